// End-to-end: CSV and JSON values load as the file writes them, or the table fails
// naming the column, the value and the pin that loads it; nothing loads changed.
// The real flotilla binary against real files and a DuckDB target.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

void write_config(const workdir& w, const std::string& tables) {
  w.write("flotilla.toml", R"([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
[sources.f]
adapter = "json"
path = "json"
[sources.c]
adapter = "csv"
path = "csv"
)" + tables);
}

std::string error_of(const nlohmann::json& run, const std::string& table) {
  const auto* t = find_table(run, table);
  REQUIRE(t != nullptr);
  return (*t)["error"].is_string() ? (*t)["error"].get<std::string>() : std::string();
}

}  // namespace

TEST_CASE("json numbers a double cannot keep fail naming the column; strings and text pins load exactly") {
  workdir w;
  std::filesystem::create_directories(w.path() / "json");
  std::filesystem::create_directories(w.path() / "csv");
  w.write("json/pay.ndjson", "{\"id\":1,\"amount\":12345678901234567.123456789}\n"
                             "{\"id\":2,\"amount\":0.10}\n");
  w.write("json/hashes.ndjson", "{\"id\":1,\"h\":18446744073709551615}\n{\"id\":2,\"h\":5}\n");
  // A UUID column once made every nested object read as a STRUCT of all records' keys.
  w.write("json/ev.ndjson",
          "{\"id\":1,\"u\":\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\",\"o\":{\"a\":1},\"l\":[1,\"x\",null]}\n"
          "{\"id\":2,\"u\":\"00000000-0000-0000-0000-000000000000\",\"o\":{\"b\":\"x\"},\"l\":[\"q\"]}\n");
  write_config(w, "");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const std::string pay = error_of(run, "f.pay");
  CHECK_THAT(pay, Catch::Contains("line 1: column 'amount' holds the number "
                                  "12345678901234567.123456789") &&
                      Catch::Contains("write the value as a JSON string"));
  // An integer past a bigint within 64 unsigned bits: decimal(20,0), as CSV types it.
  CHECK(error_of(run, "f.hashes").empty());
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT h::VARCHAR, typeof(h) FROM f.hashes ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"18446744073709551615", "DECIMAL(20,0)"},
                                              {"5", "DECIMAL(20,0)"}});
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT string_agg(o::VARCHAR || ' ' || l::VARCHAR, '|' ORDER BY id) FROM f.ev")[0][0] ==
        "{\"a\":1} [1,\"x\",null]|{\"b\":\"x\"} [\"q\"]");

  w.write("json/pay.ndjson", "{\"id\":1,\"amount\":\"12345678901234567.123456789\"}\n"
                             "{\"id\":2,\"amount\":\"0.10\"}\n");
  write_config(w, "[sources.f.tables.pay]\ncolumns = { amount = \"decimal(38,9)\" }\n");
  run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT amount::VARCHAR FROM f.pay ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"12345678901234567.123456789"}, {"0.100000000"}});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT h::VARCHAR FROM f.hashes ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"18446744073709551615"}, {"5"}});
}

TEST_CASE("a json bigint column that outgrows 64 signed bits plans its widening to a decimal") {
  workdir w;
  std::filesystem::create_directories(w.path() / "json");
  std::filesystem::create_directories(w.path() / "csv");
  w.write("json/b.json", "[{\"id\":1,\"n\":5}]\n");
  write_config(w, "");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  w.write("json/b.json", "[{\"id\":1,\"n\":5},\n {\"id\":2,\"n\":12345678901234567890}]\n");
  // Without auto_widen the inferred column outgrows its live type: named, nothing loaded.
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK_THAT(error_of(run, "f.b"), Catch::Contains("'n'") && Catch::Contains("decimal(20,0)"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM f.b")[0][0] == "1");
  write_config(w, "[sources.f.tables.b]\nauto_widen = true\n");
  const auto plan = run_flotilla(w, {"plan"});
  CHECK_THAT(plan.out, Catch::Contains("decimal(20,0)"));
  run = flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT n::VARCHAR, typeof(n) FROM f.b ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"5", "DECIMAL(20,0)"},
                                              {"12345678901234567890", "DECIMAL(20,0)"}});
}

TEST_CASE("csv numbers a double cannot keep fail naming the pin; a quoted empty value is an empty string") {
  workdir w;
  std::filesystem::create_directories(w.path() / "json");
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/ledger.csv", "id,balance\n1,12345678901234567.123456789\n2,0.5\n");
  w.write("csv/people.csv", "id,nick\n1,\"\"\n2,\n3,\"bob\"\n");
  // A "" in a number column cannot be an empty string: there every "" stays NULL.
  w.write("csv/mixed.csv", "id,nick,n\n1,\"\",\"\"\n2,,\n3,\"bob\",\"5\"\n");
  write_config(w, "");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK_THAT(error_of(run, "c.ledger"),
             Catch::Contains("column 'balance' holds the number 12345678901234567.123456789") &&
                 Catch::Contains("columns = { balance = \"decimal(26,9)\" }"));
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT id, nick IS NULL, coalesce(nick, '-') FROM c.people ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1", "false", ""}, {"2", "true", "-"}, {"3", "false", "bob"}});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM c.mixed WHERE nick IS NULL")[0][0] ==
        "2");
  write_config(w, "[sources.c.tables.ledger]\ncolumns = { balance = \"decimal(26,9)\" }\n");
  run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT balance::VARCHAR FROM c.ledger ORDER BY id")[0][0] ==
        "12345678901234567.123456789");
}

TEST_CASE("a file column pinned to a decimal plans before the first load, wider than 38 digits too") {
  workdir w;
  std::filesystem::create_directories(w.path() / "json");
  std::filesystem::create_directories(w.path() / "csv");
  w.write("json/p.json", "{\"id\":1,\"amt\":12345.25}\n{\"id\":2,\"amt\":1.5}\n");
  w.write("csv/q.csv", "id,amt\n1,12345.25\n2,1.5\n");
  write_config(w, "[sources.f.tables.p]\ncolumns = { amt = \"decimal(18,2)\" }\n"
                  "[sources.c.tables.q]\ncolumns = { amt = \"decimal(40,2)\" }\n");
  int rc = -1;
  auto plan = flotilla_json(w, {"plan"}, &rc);  // no target file yet
  CHECK(rc == 0);
  CHECK((*find_table(plan, "f.p"))["status"] == "planned");
  CHECK((*find_table(plan, "c.q"))["status"] == "planned");
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT sum(amt)::VARCHAR FROM c.q")[0][0] == "12346.75");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT sum(amt)::VARCHAR FROM f.p")[0][0] == "12346.75");
}

TEST_CASE("pins the errors name hold the whole column; numbers as JSON strings load beside numbers") {
  workdir w;
  std::filesystem::create_directories(w.path() / "json");
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/big.csv", "id,big\n1,18446744073709551615\n2,0.5\n");
  // A producer that quotes only its long numbers; and a long number nested in an object.
  w.write("json/e.ndjson", "{\"id\": 1, \"amt\": \"12345678901234567.123456789\"}\n"
                           "{\"id\": 2, \"amt\": 7.25}\n");
  w.write("json/ev.ndjson", "{\"id\":1,\"meta\":{\"p\":0.1000000000000000055511151231257827}}\n");
  write_config(w, "[sources.f.tables.e]\ncolumns = { amt = \"decimal(30,9)\" }\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK_THAT(error_of(run, "c.big"), Catch::Contains("columns = { big = \"decimal(21,1)\" }, or "
                                                     "{ big = \"text\" }"));
  CHECK_THAT(error_of(run, "f.ev"), Catch::Contains("column 'meta' holds, nested in its value,") &&
                                        Catch::Contains("inside the value of 'meta'") &&
                                        !Catch::Contains("<column>"));
  CHECK(error_of(run, "f.e").empty());
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT amt::VARCHAR FROM f.e ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"12345678901234567.123456789"}, {"7.250000000"}});
  write_config(w, "[sources.f.tables.e]\ncolumns = { amt = \"decimal(30,9)\" }\n"
                  "[sources.c.tables.big]\ncolumns = { big = \"decimal(21,1)\" }\n");
  run = flotilla_json(w, {"run"}, &rc);
  CHECK(error_of(run, "c.big").empty());
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT max(big)::VARCHAR FROM c.big")[0][0] ==
        "18446744073709551615.0");
}

TEST_CASE("a csv value that outgrows its column's inferred type is named with its file and row") {
  workdir w;
  std::filesystem::create_directories(w.path() / "json");
  std::filesystem::create_directories(w.path() / "csv");
  std::string rows = "id,n\n";
  for (int i = 1; i <= 3000; ++i)
    rows += std::to_string(i) + "," + std::to_string(i) + "\n";
  w.write("csv/m.csv", rows);
  write_config(w, "");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  w.write("csv/m.csv", rows + "3001,oops\n3002,5\n");
  for (const char* verb : {"plan", "run"}) {
    INFO(verb);
    int rc = -1;
    auto out = flotilla_json(w, {verb}, &rc);
    INFO(out.dump(2));
    const auto* t = find_table(out, "c.m");
    REQUIRE(t != nullptr);
    const std::string all = t->dump();
    CHECK_THAT(all, Catch::Contains("FLT-S005") && Catch::Contains("'oops'") &&
                        Catch::Contains("m.csv, data row 3001"));
  }
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM c.m") ==
        std::vector<std::vector<std::string>>{{"3000"}});
}

TEST_CASE("plan before the first load checks a file's values against its pins, as run does") {
  // No target file yet: plan reads no live table, yet a value a pin cannot hold fails it.
  workdir w;
  std::filesystem::create_directories(w.path() / "json");
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/p.csv", "id,amt\n1,5\n2,abc\n");
  write_config(w, "[sources.c.tables.p]\ncolumns = { amt = \"int\" }\n");
  const auto plan = run_flotilla(w, {"plan"});
  INFO(plan.out << plan.err);
  CHECK(plan.exit_code == 1);
  CHECK_THAT(plan.out, Catch::Contains("amt holds the value 'abc', which int cannot hold"));
  CHECK_FALSE(std::filesystem::exists(w.path() / "wh.duckdb"));
  // The run fails the same way.
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK_THAT(error_of(run, "c.p"), Catch::Contains("amt holds the value 'abc'"));
}

TEST_CASE("a CSV column of whole numbers past a bigint's range is a decimal, exact") {
  workdir w;
  std::filesystem::create_directories(w.path() / "json");
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/big.csv", "id,h,g\n1,18446744073709551615,9223372036854775808\n2,5,-7\n");
  write_config(w, "");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT h::VARCHAR, typeof(h), g::VARCHAR, typeof(g) FROM c.big ORDER BY id") ==
        std::vector<std::vector<std::string>>{
            {"18446744073709551615", "DECIMAL(20,0)", "9223372036854775808", "DECIMAL(20,0)"},
            {"5", "DECIMAL(20,0)", "-7", "DECIMAL(20,0)"}});
}
