// End-to-end: runs that would have loaded wrong or stale data with `success`, now either
// load the right data or fail naming what to fix. The real flotilla binary against real
// SQLite, CSV and JSON sources and DuckDB and SQLite targets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <filesystem>
#include <fstream>
#include <map>

#include <csignal>
#include <sqlite3.h>
#include <unistd.h>

#include <fmt/core.h>

#include "storage/state_store.hpp"
#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

const char* k_source = R"(
CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);
INSERT INTO t VALUES (1, 'a'), (2, 'b');
)";

void write_pruned_config(const workdir& w, const std::string& schema, const std::string& extra) {
  w.write("flotilla.toml", fmt::format(R"([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
schema = "{}"
[sources.s]
adapter = "sqlite"
path = "src.db"
prune_unchanged = true
{}
)",
                                       schema, extra));
}

/// A run's row for the source table `source_table` of `source` (several may share a target
/// table name).
const nlohmann::json* source_row(const nlohmann::json& run, const std::string& source,
                                 const std::string& source_table) {
  for (const auto& t : run["tables"])
    if (t["source"] == source && t["source_table"] == source_table)
      return &t;
  return nullptr;
}

std::string status_of(const nlohmann::json& run, const std::string& table) {
  const auto* t = find_table(run, table);
  return t ? (*t)["status"].get<std::string>() : std::string("absent");
}

}  // namespace

TEST_CASE("a pruned table whose target or declared columns changed in flotilla.toml is copied") {
  workdir w;
  sqlite_exec(w.file("src.db"), k_source);
  write_pruned_config(w, "old_schema", "");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  auto same = flotilla_json(w, {"run"}, &rc);
  CHECK(status_of(same, "old_schema.t") == "pruned");  // nothing changed: pruned

  // A new target schema: the table lands there, though the source did not change.
  write_pruned_config(w, "new_schema", "");
  auto moved = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(status_of(moved, "new_schema.t") == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM new_schema.t")[0][0] == "2");
  CHECK(status_of(flotilla_json(w, {"run"}, &rc), "new_schema.t") == "pruned");

  // A new pin: applied at once.
  write_pruned_config(w, "new_schema",
                      "[sources.s.tables.t]\ncolumns = { id = \"decimal(38,0)\" }\n");
  auto plan = flotilla_json(w, {"plan"}, &rc);
  const auto* planned = find_table(plan, "new_schema.t");
  REQUIRE(planned != nullptr);
  CHECK((*planned)["status"] != "pruned");
  auto pinned = flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 0);
  CHECK(status_of(pinned, "new_schema.t") == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT data_type FROM information_schema.columns WHERE table_schema = "
                     "'new_schema' AND table_name = 't' AND column_name = 'id'")[0][0] ==
        "DECIMAL(38,0)");
}

TEST_CASE("two sources landing on one target table: the second is refused, nothing overwritten") {
  workdir w;
  sqlite_exec(w.file("acme.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT);"
                                 "INSERT INTO orders VALUES (1, 'acme'), (2, 'acme');");
  sqlite_exec(w.file("globex.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT);"
                                   "INSERT INTO orders VALUES (7, 'globex');");
  // prune_unchanged: a pruned table still holds its claim, so the other is refused every
  // run (pruned, it let the other load over it, reported a success).
  w.write("flotilla.toml", R"toml([project]
prune_unchanged = true
[targets.wh]
dialect = "sqlite"
path = "wh.sqlite"
schema = "stg_{region}"
[sources.acme]
adapter = "sqlite"
path = "acme.db"
tags = { region = "us" }
[sources.globex]
adapter = "sqlite"
path = "globex.db"
tags = { region = "us" }
)toml");
  for (const char* verb : {"plan", "run", "run", "run", "plan"}) {
    INFO(verb);
    int rc = -1;
    auto j = flotilla_json(w, {verb}, &rc);
    INFO(j.dump());
    CHECK(rc == 1);
    std::size_t refused = 0, fine = 0;
    std::string loaded_by;
    for (const auto& t : j["tables"]) {
      if (t["status"] == "failed") {
        ++refused;
        CHECK(t["error_code"] == "FLT-R006");
        const auto error = t["error"].get<std::string>();
        CHECK(error.find("stg_us__orders") != std::string::npos);
        CHECK(error.find("overwrite") != std::string::npos);
      } else {
        ++fine;
        loaded_by = t["source"].get<std::string>();
      }
    }
    CHECK(refused == 1);
    CHECK(fine == 1);
    if (std::string(verb) == "run") {
      // The target holds exactly the rows of the source that loaded.
      auto rows = sqlite_query(w.file("wh.sqlite"),
                               "SELECT count(*), min(who), max(who) FROM stg_us__orders");
      CHECK(rows[0][1] == loaded_by);
      CHECK(rows[0][2] == loaded_by);
      CHECK(rows[0][0] == (loaded_by == "acme" ? "2" : "1"));
    }
  }
}

TEST_CASE("of two sources landing on one table, the one listed first loads, run after run, "
          "also through two targets on one file") {
  // Which loaded depended on whose catalog came first, so the table's rows flipped from one
  // source to the other between runs; two targets naming one file were never compared.
  workdir w;
  sqlite_exec(w.file("acme.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT);"
                                 "INSERT INTO orders VALUES (1, 'acme'), (2, 'acme');");
  sqlite_exec(w.file("globex.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT);"
                                   "INSERT INTO orders VALUES (7, 'globex');");
  w.write("flotilla.toml", R"toml([project]
prune_unchanged = true
[targets.clients]
dialect = "sqlite"
path = "wh.sqlite"
schema = "raw"
[targets.partners]
dialect = "sqlite"
path = "./wh.sqlite"
schema = "raw"
[sources.globex]
adapter = "sqlite"
path = "globex.db"
target = "partners"
[sources.acme]
adapter = "sqlite"
path = "acme.db"
target = "clients"
)toml");
  for (int i = 0; i < 4; ++i) {
    INFO("run " << i);
    int rc = -1;
    auto j = flotilla_json(w, {"run"}, &rc);
    INFO(j.dump());
    CHECK(rc == 1);
    for (const auto& t : j["tables"])
      if (t["source"] == "acme") {
        CHECK(t["status"] == "failed");
        CHECK(t["error_code"] == "FLT-R006");
        CHECK_THAT(t["error"].get<std::string>(),
                   Catch::Contains("globex.orders holds in this run") &&
                       Catch::Contains("when neither did yet, the one listed first in flotilla.toml"));
      } else {
        CHECK(t["status"] == (i == 0 ? "copied" : "pruned"));
      }
    CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*), min(who), max(who) FROM "
                                            "raw__orders") ==
          std::vector<std::vector<std::string>>{{"1", "globex", "globex"}});
  }
}

TEST_CASE("two targets on one DuckDB file through a symlink are one, before the file exists") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT);"
                              "INSERT INTO orders VALUES (1, 'a');");
  sqlite_exec(w.file("b.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT);"
                              "INSERT INTO orders VALUES (2, 'b');");
  std::filesystem::create_symlink("wh.duckdb", w.file("link.duckdb"));
  w.write("flotilla.toml", R"toml([targets.one]
dialect = "duckdb"
path = "wh.duckdb"
schema = "raw"
[targets.two]
dialect = "duckdb"
path = "link.duckdb"
schema = "raw"
[sources.b]
adapter = "sqlite"
path = "b.db"
target = "two"
[sources.a]
adapter = "sqlite"
path = "a.db"
target = "one"
)toml");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump());
  CHECK(rc == 1);
  for (const auto& t : j["tables"])
    CHECK(t["status"] == (t["source"] == "b" ? "copied" : "failed"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(who, ',') FROM raw.orders") ==
        std::vector<std::vector<std::string>>{{"b"}});
}

TEST_CASE("a table named without a schema and one in the schema unqualified names land in "
          "are one table: DuckDB's main, PostgreSQL's public") {
  // schema = "" (or an empty tag) and schema = "main" / "public" were two claims, so both
  // sources loaded the one table, the second overwriting the first, with `success`.
  workdir w;
  const std::string name = "orders_" + unique_suffix();
  sqlite_exec(w.file("a.db"), fmt::format("CREATE TABLE {} (id INTEGER PRIMARY KEY, who TEXT);"
                                          "INSERT INTO {} VALUES (1, 'a'), (2, 'a');",
                                          name, name));
  sqlite_exec(w.file("b.db"), fmt::format("CREATE TABLE {} (id INTEGER PRIMARY KEY, who TEXT);"
                                          "INSERT INTO {} VALUES (7, 'b');",
                                          name, name));
  SECTION("DuckDB: an empty tag value and main") {
    w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
schema = "{region}"
[sources.a]
adapter = "sqlite"
path = "a.db"
tags = { region = "" }
[sources.b]
adapter = "sqlite"
path = "b.db"
tags = { region = "MAIN" }
)toml");
    for (int i = 0; i < 2; ++i) {
      int rc = -1;
      auto j = flotilla_json(w, {"run"}, &rc);
      INFO(j.dump());
      CHECK(rc == 1);
      for (const auto& t : j["tables"])
        CHECK(t["status"] == (t["source"] == "a" ? "copied" : "failed"));
      CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(who, ',') FROM main." + name) ==
            std::vector<std::vector<std::string>>{{"a,a"}});
    }
  }
  SECTION("PostgreSQL: two targets on one database, schema \"\" and public") {
    w.write("flotilla.toml", fmt::format(R"toml([targets.plain]
dialect = "postgres"
dsn = "{0}"
schema = ""
[targets.pub]
dialect = "postgres"
dsn = "{0}"
schema = "public"
[sources.a]
adapter = "sqlite"
path = "a.db"
target = "plain"
[sources.b]
adapter = "sqlite"
path = "b.db"
target = "pub"
)toml",
                                         pg_dsn()));
    int rc = -1;
    auto plan = flotilla_json(w, {"plan"}, &rc);
    INFO(plan.dump());
    CHECK(rc == 1);
    auto j = flotilla_json(w, {"run"}, &rc);
    INFO(j.dump());
    CHECK(rc == 1);
    for (const auto& t : j["tables"]) {
      CHECK(t["status"] == (t["source"] == "a" ? "copied" : "failed"));
      if (t["source"] == "b")
        CHECK_THAT(t["error"].get<std::string>(), Catch::Contains("a." + name));
    }
    CHECK(pg_query(pg_dsn(), fmt::format("SELECT string_agg(who, ',') FROM public.{}", name)) ==
          std::vector<std::vector<std::string>>{{"a,a"}});
    pg_exec(pg_dsn(), fmt::format("DROP TABLE IF EXISTS public.{}", name));
  }
  SECTION("PostgreSQL: schema \"\" under a DSN whose options set search_path, and that schema") {
    const std::string dsn = pg_dsn() + (pg_dsn().find('?') == std::string::npos ? "?" : "&") +
                            "options=-csearch_path%3Dstage_" + name;
    w.write("flotilla.toml", fmt::format(R"toml([targets.plain]
dialect = "postgres"
dsn = "{0}"
schema = ""
[targets.stage]
dialect = "postgres"
dsn = "{1}"
schema = "stage_{2}"
[sources.a]
adapter = "sqlite"
path = "a.db"
target = "plain"
[sources.b]
adapter = "sqlite"
path = "b.db"
target = "stage"
)toml",
                                         dsn, pg_dsn(), name));
    auto plan = run_flotilla(w, {"plan"});
    INFO(plan.out << plan.err);
    CHECK(plan.exit_code == 1);
    CHECK_THAT(plan.out, Catch::Contains("b." + name + " lands on"));
  }
}

TEST_CASE("on SQLite, sources whose table prefixes one begins the other's clash, and the one "
          "listed first loads, in plan and every run") {
  // Schema "" and "b": table b__orders of the first is table orders of the second. Which
  // loaded depended on whose catalog came first; plan refused the first-listed one.
  workdir w;
  sqlite_exec(w.file("c.db"), "CREATE TABLE b__orders (id INTEGER PRIMARY KEY, v TEXT);"
                              "INSERT INTO b__orders VALUES (7, 'c7');");
  sqlite_exec(w.file("b.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, v TEXT);"
                              "INSERT INTO orders VALUES (10, 'b10');");
  w.write("flotilla.toml", R"toml([targets.w]
dialect = "sqlite"
path = "lite.db"
schema = "{s}"
[sources.c]
adapter = "sqlite"
path = "c.db"
tags = { s = "" }
[sources.b]
adapter = "sqlite"
path = "b.db"
tags = { s = "B" }
)toml");
  auto plan = run_flotilla(w, {"plan"});
  INFO(plan.out);
  CHECK_THAT(plan.out, Catch::Contains("b.orders lands on"));
  for (int i = 0; i < 6; ++i) {
    int rc = -1;
    auto j = flotilla_json(w, {"run"}, &rc);
    INFO(j.dump());
    CHECK(rc == 1);
    for (const auto& t : j["tables"])
      CHECK(t["status"] == (t["source"] == "c" ? "copied" : "failed"));
    CHECK(sqlite_query(w.file("lite.db"), "SELECT group_concat(id) FROM b__orders")[0][0] == "7");
  }
}

TEST_CASE("a run whose run directory cannot be created reports, exits 1, and keeps its loads") {
  // It ended in an uncaught filesystem error (abort, exit 134, no run JSON) after the
  // tables had committed.
  workdir w;
  sqlite_exec(w.file("src.db"), k_source);
  write_pruned_config(w, "raw", "");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (3, 'c')");
  std::filesystem::remove_all(w.path() / ".flotilla" / "runs");
  w.write(".flotilla/runs", "not a directory\n");
  auto r = run_flotilla(w, {"run", "--output", "json"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  auto j = nlohmann::json::parse(r.out);
  CHECK(status_of(j, "raw.t") == "copied");
  CHECK_THAT(j["events"]["errors"][0].get<std::string>(), Catch::Contains("FLT-E004"));
  CHECK_THAT(r.err, Catch::Contains("run.json could not be written"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM raw.t")[0][0] == "3");
  // The text summary says the log could not be written, not that nothing is left.
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (4, 'd')");
  auto text = run_flotilla(w, {"run"});
  CHECK(text.exit_code == 1);
  CHECK_THAT(text.out, Catch::Contains("events: the run's event log could not be written") &&
                           !Catch::Contains("none left to deliver"));
}

TEST_CASE("a csv/json value its declared type cannot hold fails plan and run, loading nothing") {
  workdir w;
  std::filesystem::create_directories(w.path() / "csv");
  std::filesystem::create_directories(w.path() / "json");
  w.write("csv/c.csv", "id,n,amt\n1,7,1.25\n");
  w.write("json/j.json", "{\"id\": 1, \"b\": true, \"n\": 7}\n");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
[sources.c]
adapter = "csv"
path = "csv"
[sources.c.tables.c]
columns = { n = "int", amt = "decimal(5,2)" }
[sources.j]
adapter = "json"
path = "json"
[sources.j.tables.j]
columns = { b = "bool", n = "int" }
)toml");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // Whole numbers written with a point, and a fraction the scale holds, still fit.
  w.write("csv/c.csv", "id,n,amt\n1,7,1.25\n2,8.0,2.5\n");
  flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT sum(n), sum(amt) FROM c.c")[0] ==
        std::vector<std::string>{"15", "3.75"});

  w.write("csv/c.csv", "id,n,amt\n1,7,1.25\n2,7.9,123.456\n");
  w.write("json/j.json", "{\"id\": 1, \"b\": true, \"n\": 7}\n{\"id\": 2, \"b\": 2, \"n\": 7}\n");
  for (const char* verb : {"plan", "run"}) {
    INFO(verb);
    auto j = flotilla_json(w, {verb}, &rc);
    CHECK(rc == 1);
    const auto* c = find_table(j, "c.c");
    REQUIRE(c != nullptr);
    CHECK((*c)["status"] == "failed");
    const auto ce = (*c)["error"].get<std::string>();
    CHECK(ce.find("n holds the value '7.9', which int cannot hold exactly") != std::string::npos);
    CHECK(ce.find("amt holds the value '123.456', which decimal(5,2)") != std::string::npos);
    // Where each value is, and a type that holds it exactly.
    CHECK_THAT(ce, Catch::Contains("c.csv, data row 2 (after the header): n holds") &&
                       Catch::Contains("c.csv, data row 2 (after the header): amt holds") &&
                       Catch::Contains("columns = { amt = \"decimal(6,3)\" }") &&
                       // An int's ten digits and the fraction, exactly: not a double.
                       Catch::Contains("columns = { n = \"decimal(11,1)\" }"));
    CHECK_THAT((*find_table(j, "j.j"))["error"].get<std::string>(),
               Catch::Contains("j.json, record 2: b holds"));
    const auto* jt = find_table(j, "j.j");
    REQUIRE(jt != nullptr);
    CHECK((*jt)["status"] == "failed");
    CHECK((*jt)["error"].get<std::string>().find("b holds the value '2', which bool") !=
          std::string::npos);
  }
  // The targets keep what the last good run loaded.
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), sum(n) FROM c.c")[0] ==
        std::vector<std::string>{"2", "15"});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM j.j")[0][0] == "1");
}

TEST_CASE("a csv column pinned bool takes yes and no whatever its other values") {
  workdir w;
  std::filesystem::create_directories(w.path() / "csv");
  // DuckDB infers "true, yes" as BOOLEAN, "1, yes" as VARCHAR: the pin must read both.
  w.write("csv/a.csv", "id,flag\n1,true\n2,yes\n3,N\n");
  w.write("csv/b.csv", "id,flag\n1,1\n2,yes\n3,no\n");
  w.write("csv/c.csv", "id,flag\n1,1\n2,off\n");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
[sources.c]
adapter = "csv"
path = "csv"
[sources.c.tables.a]
columns = { flag = "bool" }
[sources.c.tables.b]
columns = { flag = "bool" }
[sources.c.tables.c]
columns = { flag = "bool" }
)toml");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK((*find_table(j, "c.a"))["status"] == "copied");
  CHECK((*find_table(j, "c.b"))["status"] == "copied");
  for (const char* t : {"a", "b"})
    CHECK(duckdb_query(w.file("wh.duckdb"),
                       fmt::format("SELECT string_agg(CAST(flag AS VARCHAR), ',' ORDER BY id) "
                                   "FROM c.{}",
                                   t))[0][0] == "true,true,false");
  // A text DuckDB's reader cannot parse as a boolean is named, not loaded changed.
  CHECK_THAT((*find_table(j, "c.c"))["error"].get<std::string>(),
             Catch::Contains("flag holds the value 'off', which bool"));
}

TEST_CASE("a decimal SQLite cannot store exactly fails its table instead of loading rounded") {
  workdir w;
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/d.csv", "id,amt\n1,1234567890123.25\n2,123456789012345678\n");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "sqlite"
path = "wh.sqlite"
[sources.c]
adapter = "csv"
path = "csv"
[sources.c.tables.d]
columns = { amt = "decimal(20,2)" }
)toml");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"),
                     "SELECT CAST(amt AS TEXT) FROM c__d ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1234567890123.25"}, {"123456789012345678"}});

  w.write("csv/d.csv", "id,amt\n1,1234567890123.25\n2,123456789012345678.91\n");
  auto j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* d = find_table(j, "c__d");
  REQUIRE(d != nullptr);
  CHECK((*d)["status"] == "failed");
  const auto error = (*d)["error"].get<std::string>();
  CHECK(error.find("123456789012345678.91") != std::string::npos);
  CHECK(error.find("cannot store exactly") != std::string::npos);
  // The table keeps its earlier rows.
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM c__d")[0][0] == "2");
}

TEST_CASE("auto_widen to a decimal SQLite cannot store exactly fails the plan, the table untouched") {
  workdir w;
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/q.csv", "id,q\n1,5\n");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "sqlite"
path = "wh.sqlite"
[sources.c]
adapter = "csv"
path = "csv"
auto_widen = true
)toml");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // 17 significant digits: SQLite keeps 15 (or a whole number within 64 bits).
  w.write("csv/q.csv", "id,q\n1,1234567890123456.5\n");
  (void)flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 1);
  auto j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* q = find_table(j, "c__q");
  REQUIRE(q != nullptr);
  CHECK((*q)["status"] == "failed");
  const auto error = (*q)["error"].get<std::string>();
  CHECK((*q)["error_code"] == "FLT-S005");
  CHECK(error.find("SQLite cannot store exactly") != std::string::npos);
  CHECK(error.find("columns = { q = \"text\" }") != std::string::npos);
  // The plan refused it: the live table keeps its type and rows.
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT type FROM pragma_table_info('c__q') WHERE "
                                          "name = 'q'")[0][0] == "BIGINT");
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT q FROM c__q")[0][0] == "5");
  // Fifteen digits widen as before.
  w.write("csv/q.csv", "id,q\n1,1234567890123.5\n");
  flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT CAST(q AS TEXT) FROM c__q")[0][0] ==
        "1234567890123.5");
}

TEST_CASE("contract generate does not declare a column the source dropped") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT, w TEXT);"
                                "INSERT INTO a VALUES (1, 'x', 'y');");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
[sources.s]
adapter = "sqlite"
path = "src.db"
)toml");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"), "ALTER TABLE a DROP COLUMN v;");
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  auto gen = run_flotilla(w, {"contract", "generate", "--write"});
  CHECK(gen.exit_code == 0);
  CHECK(gen.err.find("column 'v' is in the live table but no longer in the source") !=
        std::string::npos);
  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  auto diff = run_flotilla(w, {"contract", "diff"});
  CHECK(diff.exit_code == 0);
}

TEST_CASE("tables whose names differ only in case are two tables on Snowflake: both are planned") {
  workdir w;
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/Orders.csv", "id,who\n1,upper\n");
  w.write("csv/orders.csv", "id,who\n10,lower\n");
  w.write("flotilla.toml", R"toml([targets.snow]
dialect = "snowflake"
database = "ANALYTICS"
schema = "raw"
[sources.c]
adapter = "csv"
path = "csv"
)toml");
  int rc = -1;
  auto j = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  REQUIRE(j["tables"].size() == 2);
  std::set<std::string> creates;
  for (const auto& t : j["tables"]) {
    CHECK(t["status"] != "failed");
    for (const auto& q : t["sql"])
      if (q.get<std::string>().starts_with("CREATE TABLE"))
        creates.insert(q.get<std::string>().substr(0, q.get<std::string>().find('(')));
  }
  // Quoted, so the two names are two tables (docs/dialects.md: case_sensitive).
  CHECK(creates == std::set<std::string>{"CREATE TABLE \"ANALYTICS\".\"raw\".\"Orders\" ",
                                         "CREATE TABLE \"ANALYTICS\".\"raw\".\"orders\" "});
}

TEST_CASE("the exclude FLT-R006 suggests for two schemas' tables is TOML as it is printed") {
  workdir w;
  duckdb_query(w.file("src.duckdb"),
               "CREATE SCHEMA \"we\"\"ird\"; CREATE TABLE \"we\"\"ird\".orders (k INTEGER); "
               "INSERT INTO \"we\"\"ird\".orders VALUES (1); CREATE TABLE main.orders (k INTEGER); "
               "INSERT INTO main.orders VALUES (2)");
  const std::string config = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                             "schema = \"{source}\"\n[sources.d]\nadapter = \"duckdb\"\n"
                             "path = \"src.duckdb\"\n";
  w.write("flotilla.toml", config);
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  std::string error;
  for (const auto& t : j["tables"])
    if (t["status"] == "failed")
      error = t["error"].get<std::string>();
  REQUIRE(!error.empty());
  // The suggestion, pasted into the source's section as printed, parses and leaves the
  // refused table out.
  const auto from = error.find("exclude = [");
  REQUIRE(from != std::string::npos);
  const auto to = error.find("] in [sources.", from);
  REQUIRE(to != std::string::npos);
  w.write("flotilla.toml", config + error.substr(from, to + 1 - from) + "\n");
  auto again = flotilla_json(w, {"run"}, &rc);
  INFO(again.dump(2));
  CHECK(rc == 0);
  CHECK(again["tables"].size() == 1);
  // A name holding a wildcard: no exclude can name it alone, and none is suggested.
  duckdb_query(w.file("src2.duckdb"),
               "CREATE SCHEMA \"a*\"; CREATE TABLE \"a*\".g (k INTEGER); CREATE SCHEMA ab; "
               "CREATE TABLE ab.g (k INTEGER)");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh2.duckdb\"\n"
                           "schema = \"{source}\"\n[sources.d]\nadapter = \"duckdb\"\n"
                           "path = \"src2.duckdb\"\n[sources.d.tables.\"ab.g\"]\n");
  auto wild = flotilla_json(w, {"run"}, &rc);
  INFO(wild.dump(2));
  CHECK(rc == 1);
  std::size_t refused = 0;
  for (const auto& t : wild["tables"])
    if (t["status"] == "failed") {
      ++refused;
      CHECK(t["source_table"] == "a*.g");  // ab.g's section claims the target table first
      CHECK_THAT(t["error"].get<std::string>(),
                 !Catch::Contains("exclude = [") && Catch::Contains("holds a wildcard"));
    }
  CHECK(refused == 1);
}

TEST_CASE("a table appearing later whose dotted name joins to an established one's does not "
          "take its name over") {
  workdir w;
  duckdb_query(w.file("src.duckdb"),
               "CREATE SCHEMA \"sales.eu\"; CREATE TABLE \"sales.eu\".orders (k INTEGER); "
               "INSERT INTO \"sales.eu\".orders VALUES (1), (2)");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"raw\"\n[sources.d]\nadapter = \"duckdb\"\n"
                           "path = \"src.duckdb\"\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  // sales."eu.orders" sorts before "sales.eu".orders, and both are sales.eu.orders.
  duckdb_query(w.file("src.duckdb"),
               "CREATE SCHEMA sales; CREATE TABLE sales.\"eu.orders\" (k INTEGER); "
               "INSERT INTO sales.\"eu.orders\" VALUES (9)");
  duckdb_query(w.file("src.duckdb"), "INSERT INTO \"sales.eu\".orders VALUES (3)");
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  REQUIRE(j["tables"].size() == 2);
  for (const auto& t : j["tables"]) {
    if (t["table"] == "raw.orders") {
      CHECK(t["status"] == "copied");
    } else {
      CHECK(t["table"] == "raw.eu.orders");
      CHECK(t["status"] == "failed");
      CHECK_THAT(t["error"].get<std::string>(),
                 Catch::Contains("\"sales\".\"eu.orders\" and \"sales.eu\".\"orders\"") &&
                     Catch::Contains("the other loaded its target table before it"));
    }
  }
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(k::VARCHAR, ',' ORDER BY k) FROM raw.orders")[0][0] ==
        "1,2,3");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM information_schema.tables "
                                          "WHERE table_name = 'eu.orders'")[0][0] == "0");
}

TEST_CASE("tables whose names differ only in case are one table on SQLite: one is refused") {
  workdir w;
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/Orders.csv", "id,who\n1,upper\n2,upper\n");
  w.write("csv/orders.csv", "id,who\n10,lower\n");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "sqlite"
path = "wh.sqlite"
schema = ""
[sources.c]
adapter = "csv"
path = "csv"
)toml");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  std::size_t refused = 0;
  std::string loaded;
  for (const auto& t : j["tables"]) {
    if (t["status"] == "failed") {
      ++refused;
      CHECK(t["error_code"] == "FLT-R006");
      // One source: a schema template cannot part them, nor an exclude (patterns ignore
      // case, so it would leave out both): renaming one can.
      CHECK_THAT(t["error"].get<std::string>(),
                 Catch::Contains("Rename one of them at the source") &&
                     Catch::Contains("differ only by case"));
      CHECK_THAT(t["error"].get<std::string>(), !Catch::Contains("exclude = "));
    } else {
      loaded = t["source_table"].get<std::string>();
    }
  }
  CHECK(refused == 1);
  auto rows = sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM orders");
  CHECK(rows[0][0] == (loaded == "Orders" ? "2" : "1"));
}

TEST_CASE("of two tables landing on one target table, the one flotilla.toml configures loads") {
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0}_audit CASCADE; DROP SCHEMA IF EXISTS "
                                "{0}_public CASCADE; CREATE SCHEMA {0}_audit; CREATE SCHEMA "
                                "{0}_public; CREATE TABLE {0}_public.orders (id int PRIMARY KEY, "
                                "total int); INSERT INTO {0}_public.orders VALUES (1, 10);"
                                "CREATE TABLE {0}_audit.orders (id int PRIMARY KEY, note text);"
                                "INSERT INTO {0}_audit.orders VALUES (1, 'a'), (99, 'b');",
                                s));
  // audit sorts first; public.orders is the one with a section.
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n"
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\n"
                      "include = [\"{1}_audit.*\", \"{1}_public.*\"]\n"
                      "[sources.app.tables.\"{1}_public.orders\"]\nunique_key = [\"id\"]\n",
                      pg_dsn(), s, t));
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 1);
  for (const auto& table : run["tables"]) {
    if (table["source_table"] == s + "_public.orders")
      CHECK(table["status"] == "copied");
    else {
      CHECK(table["error_code"] == "FLT-R006");
      CHECK_THAT(table["error"].get<std::string>(),
                 Catch::Contains("exclude = [\"" + s + "_audit.orders\"]"));
    }
  }
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT count(*), sum(total) FROM {}.orders", t)) ==
        std::vector<std::vector<std::string>>{{"1", "10"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {0}_audit CASCADE; DROP SCHEMA {0}_public CASCADE; "
                                "DROP SCHEMA {1} CASCADE",
                                s, t));
}

TEST_CASE("a pruned table whose target table another source loaded since is copied again") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE x (id INTEGER PRIMARY KEY, who TEXT); "
                              "INSERT INTO x VALUES (1, 'from A')");
  sqlite_exec(w.file("b.db"), "CREATE TABLE x (id INTEGER PRIMARY KEY, who TEXT); "
                              "INSERT INTO x VALUES (1, 'from B'), (2, 'from B')");
  const std::string target = "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\nschema = \"shared\"\n";
  const std::string a = "[sources.a]\nadapter = \"sqlite\"\npath = \"a.db\"\nprune_unchanged = true\n";
  const std::string b = "[sources.b]\nadapter = \"sqlite\"\npath = \"b.db\"\nprune_unchanged = true\n";
  const auto who = [&] {
    return sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(who) FROM shared__x")[0][0];
  };
  w.write("flotilla.toml", target + a + b);
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);  // b.x: FLT-R006
  REQUIRE(who() == "from A");
  // Source a taken out of flotilla.toml: b loads the table.
  w.write("flotilla.toml", target + b);
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  REQUIRE(who() == "from B,from B");
  // a back, listed first: b loaded the target table last and keeps it (a table listed
  // first no longer takes a target table over).
  w.write("flotilla.toml", target + a + b);
  auto kept = flotilla_json(w, {"run"}, &rc);
  INFO(kept.dump(2));
  for (const auto& t : kept["tables"])
    if (t["source"] == "a")
      CHECK(t["error_code"] == "FLT-R006");
    else
      CHECK(t["status"] != "failed");
  CHECK(who() == "from B,from B");
  // b taken out: a, unchanged at its source, is copied again: its rows are no longer the
  // target's.
  w.write("flotilla.toml", target + a);
  auto back = flotilla_json(w, {"run"}, &rc);
  INFO(back.dump(2));
  REQUIRE(back["tables"].size() == 1);
  CHECK(back["tables"][0]["status"] == "copied");
  CHECK(back["tables"][0]["not_pruned"] == "b.x loaded its target table since this table's last copy");
  CHECK(who() == "from A");
}

TEST_CASE("a pruned incremental table whose target was restored from an older copy is copied "
          "again, and read in full") {
  const std::string dialect = GENERATE(std::string("sqlite"), std::string("duckdb"));
  INFO(dialect);
  workdir w;
  sqlite_exec(w.file("app.db"), "CREATE TABLE ev (id INTEGER PRIMARY KEY, v TEXT); "
                                "INSERT INTO ev VALUES (1, 'a'), (2, 'b')");
  const std::string file = dialect == "sqlite" ? "wh.sqlite" : "wh.duckdb";
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"{}\"\npath = \"{}\"\nschema = \"raw\"\n"
                      "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                      "prune_unchanged = true\n[sources.app.tables.ev]\ncursor_column = \"id\"\n"
                      "unique_key = [\"id\"]\n",
                      dialect, file));
  const auto count = [&] {
    const std::string sql = dialect == "sqlite" ? "SELECT count(*) FROM raw__ev"
                                                : "SELECT count(*) FROM raw.ev";
    return dialect == "sqlite" ? sqlite_query(w.file(file), sql)[0][0]
                               : duckdb_query(w.file(file), sql)[0][0];
  };
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  REQUIRE(count() == "2");
  std::filesystem::copy_file(w.file(file), w.file("backup"));  // the target's backup
  sqlite_exec(w.file("app.db"), "INSERT INTO ev VALUES (3, 'c'), (4, 'd')");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  REQUIRE(count() == "4");
  // The target restored from the backup: rows 3 and 4 are gone from it, and the source
  // has not changed since the last run.
  std::filesystem::copy_file(w.file("backup"), w.file(file),
                             std::filesystem::copy_options::overwrite_existing);
  REQUIRE(count() == "2");
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 0);
  REQUIRE(j["tables"].size() == 1);
  CHECK(j["tables"][0]["status"] == "copied");
  CHECK_THAT(j["tables"][0]["not_pruned"].get<std::string>(),
             Catch::Contains("rows up to id = 2") && Catch::Contains("not up to id = 4"));
  CHECK(count() == "4");
  // Whole again: the next run prunes it.
  auto next = flotilla_json(w, {"run"}, &rc);
  CHECK(next["tables"][0]["status"] == "pruned");
  CHECK(count() == "4");
}

TEST_CASE("a SQLite target that cannot be read prunes nothing: its tables fail saying why") {
  workdir w;
  sqlite_exec(w.file("app.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)");
  w.write("flotilla.toml",
          "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
          "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\nprune_unchanged = true\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["tables"][0]["status"] == "pruned");
  w.write("wh.sqlite", std::string(8192, 'x'));  // no longer a database
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  CHECK(j["status"] == "failed");
  REQUIRE(j["tables"].size() == 1);
  CHECK(j["tables"][0]["status"] == "failed");
  CHECK_THAT(j["tables"][0]["not_pruned"].get<std::string>(),
             Catch::Contains("could not be asked for its tables"));
  CHECK_THAT(j["tables"][0]["error"].get<std::string>(), Catch::Contains("wh.sqlite"));
}

TEST_CASE("a name PostgreSQL would cut to 63 bytes fails its table, naming it") {
  workdir w;
  const std::string suffix = unique_suffix();
  const std::string long_table(70, 't');
  const std::string long_column(70, 'c');
  sqlite_exec(w.file("src.db"),
              fmt::format("CREATE TABLE {} (id INTEGER PRIMARY KEY);"
                          "CREATE TABLE short (id INTEGER PRIMARY KEY, {} TEXT);"
                          "CREATE TABLE fine (id INTEGER PRIMARY KEY);",
                          long_table, long_column));
  w.write("flotilla.toml", fmt::format(R"toml([targets.wh]
dialect = "postgres"
dsn = "{}"
schema = "lim_{}"
[sources.s]
adapter = "sqlite"
path = "src.db"
)toml",
                                       pg_dsn(), suffix));
  for (const char* verb : {"plan", "run"}) {
    INFO(verb);
    int rc = -1;
    auto j = flotilla_json(w, {verb}, &rc);
    CHECK(rc == 1);
    const auto* t = find_table(j, "lim_" + suffix + "." + long_table);
    REQUIRE(t != nullptr);
    CHECK((*t)["status"] == "failed");
    CHECK((*t)["error"].get<std::string>().find("is 70 bytes long") != std::string::npos);
    const auto* c = find_table(j, "lim_" + suffix + ".short");
    REQUIRE(c != nullptr);
    CHECK((*c)["status"] == "failed");
    CHECK((*c)["error"].get<std::string>().find("column '" + long_column + "'") !=
          std::string::npos);
    const auto* f = find_table(j, "lim_" + suffix + ".fine");
    REQUIRE(f != nullptr);
    CHECK((*f)["status"] != "failed");
  }
  pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS lim_" + suffix + " CASCADE");
  // A schema name too long fails every table of it, and none creates it cut short.
  const std::string long_schema = "lim_" + suffix + std::string(70, 's');
  w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{}\"\n"
                                       "schema = \"{}\"\n[sources.s]\nadapter = \"sqlite\"\n"
                                       "path = \"src.db\"\ninclude = [\"fine\"]\n",
                                       pg_dsn(), long_schema));
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT count(*) FROM pg_namespace WHERE nspname = '{}'",
                                       long_schema.substr(0, 63))) ==
        std::vector<std::vector<std::string>>{{"0"}});
}

TEST_CASE("a SQLite name that is not UTF-8 fails its table before DDL; the DuckDB file stays "
          "readable") {
  // DuckDB took the column into its catalog, the table then failed, and the file's
  // information_schema could not be read any more.
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE t (id INTEGER PRIMARY KEY, \"bad\xFFname\" TEXT);"
              "INSERT INTO t VALUES (1, 'x');"
              "CREATE TABLE \"ta\xFE\" (id INTEGER PRIMARY KEY);"
              "CREATE TABLE fine (id INTEGER PRIMARY KEY); INSERT INTO fine VALUES (1), (2);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"raw\"\n[sources.s]\nadapter = \"sqlite\"\n"
                           "path = \"src.db\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 1);
  const auto* t = find_table(run, "raw.t");
  REQUIRE(t != nullptr);
  CHECK((*t)["status"] == "failed");
  CHECK((*t)["error_code"] == "FLT-S011");
  CHECK_THAT((*t)["error"].get<std::string>(),
             Catch::Contains("column 'bad\\xFFname' is not valid UTF-8"));
  std::size_t refused_names = 0;
  for (const auto& x : run["tables"])
    if (x["error"].is_string() &&
        x["error"].get<std::string>().find("target table 'ta\\xFE' is not valid UTF-8") !=
            std::string::npos)
      ++refused_names;
  CHECK(refused_names == 1);
  CHECK((*find_table(run, "raw.fine"))["status"] == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT table_name, count(*) FROM information_schema.columns WHERE "
                     "table_schema = 'raw' GROUP BY ALL ORDER BY 1") ==
        std::vector<std::vector<std::string>>{{"fine", "1"}});
  // The text output shows the name's bytes escaped, so it stays text to grep.
  const auto text = run_flotilla(w, {"run"});
  CHECK(text.out.find("ta\\xfe") != std::string::npos);
  CHECK(text.out.find("ta\xFE") == std::string::npos);
}

TEST_CASE("a duckdb target or source path naming a SQLite file is refused, naming it") {
  workdir w;
  sqlite_exec(w.file("src.db"), k_source);
  sqlite_exec(w.file("other.db"), k_source);
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "other.db"
[sources.s]
adapter = "sqlite"
path = "src.db"
[sources.d]
adapter = "duckdb"
path = "src.db"
)toml");
  auto r = run_flotilla(w, {"run"});
  CHECK(r.exit_code == 1);
  const std::string said = r.out + r.err;
  CHECK(said.find("the file is a SQLite database") != std::string::npos);
  CHECK(said.find("extensions.duckdb.org") == std::string::npos);
  // The SQLite file is left as it was.
  CHECK(sqlite_query(w.file("other.db"), "SELECT count(*) FROM sqlite_master")[0][0] == "1");
}

TEST_CASE("plan reads the state while a run holds it, and shows what would be pruned") {
  workdir w;
  sqlite_exec(w.file("src.db"), k_source);
  write_pruned_config(w, "s", "");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // This process holds the store's lock, as a running `flotilla run` would.
  auto held = flotilla::storage::state_store::open(w.path() / ".flotilla" / "state");
  REQUIRE(held);
  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  CHECK(status_of(plan, "s.t") == "pruned");
  auto run = run_flotilla(w, {"run"});
  CHECK(run.exit_code == 2);  // a second run waits for nobody: it is refused, naming the lock
  CHECK(run.err.find("LOCK") != std::string::npos);
}

TEST_CASE("a finished run whose end the state store lost is not called killed") {
  // The record of its end gone (a damaged log RocksDB dropped on opening): its run.json
  // still says how it ended, and the next run says that, not "did not finish".
  workdir w;
  sqlite_exec(w.file("src.db"), k_source);
  write_pruned_config(w, "s", "");
  int rc = -1;
  const auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  {
    auto store = flotilla::storage::state_store::open(w.path() / ".flotilla" / "state");
    REQUIRE(store);
    auto latest = store->latest_run();
    REQUIRE(latest);
    REQUIRE(latest->has_value());
    auto r = **latest;
    REQUIRE(r.run_id() == first["run_id"].get<std::string>());
    r.set_status("running");
    REQUIRE(store->put_run(r));
  }
  const auto next = run_flotilla(w, {"run"});
  INFO(next.err);
  CHECK(next.exit_code == 0);
  CHECK_THAT(next.err, Catch::Contains("finished (success, as its run.json says)") &&
                           !Catch::Contains("did not finish"));
}

TEST_CASE("retry while a run holds the state is refused with exit 2, claiming nothing") {
  workdir w;
  sqlite_exec(w.file("src.db"), k_source);
  write_pruned_config(w, "s", "");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  auto held = flotilla::storage::state_store::open(w.path() / ".flotilla" / "state");
  REQUIRE(held);
  auto retry = run_flotilla(w, {"retry"});
  CHECK(retry.exit_code == 2);
  CHECK(retry.err.find("LOCK") != std::string::npos);
  CHECK(retry.out.find("nothing to retry") == std::string::npos);
}

TEST_CASE("a source that cannot be read lists the tables an earlier run copied as failed") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE t1 (id INTEGER PRIMARY KEY); CREATE TABLE t2 (id INT);");
  sqlite_exec(w.file("b.db"), "CREATE TABLE u (id INT);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.a]\nadapter = \"sqlite\"\npath = \"a.db\"\n"
                           "[sources.b]\nadapter = \"sqlite\"\npath = \"b.db\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  w.write("a.db", "not a database");
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(run["status"] == "partial");
  std::vector<std::string> failed;
  for (const auto& t : run["tables"])
    if (t["status"] == "failed") {
      failed.push_back(t["source_table"].get<std::string>());
      CHECK(t["error_code"] == "FLT-R002");
      CHECK_THAT(t["error"].get<std::string>(), Catch::Contains("source 'a' could not be read"));
    }
  std::sort(failed.begin(), failed.end());
  CHECK(failed == std::vector<std::string>{"t1", "t2"});
  REQUIRE(run["errors"].size() == 1);
  CHECK(run["errors"][0]["source"] == "a");
  // A selection naming tables selects among them as among a catalog's names.
  auto filtered = flotilla_json(w, {"run", "--filter", "table=u"}, &rc);
  for (const auto& t : filtered["tables"])
    CHECK(t["source"] != "a");
  auto t1 = flotilla_json(w, {"run", "--filter", "table=t1"}, &rc);
  INFO(t1.dump(2));
  CHECK(rc == 1);
  REQUIRE(t1["tables"].size() == 1);
  CHECK(t1["tables"][0]["source_table"] == "t1");
  CHECK(t1["tables"][0]["status"] == "failed");
  CHECK(t1["tables"][0]["error_code"] == "FLT-R002");
  auto plan = flotilla_json(w, {"plan", "--filter", "table=t*"}, &rc);
  std::vector<std::string> planned;
  for (const auto& t : plan["tables"])
    planned.push_back(t["source_table"].get<std::string>());
  std::sort(planned.begin(), planned.end());
  CHECK(planned == std::vector<std::string>{"t1", "t2"});
}

TEST_CASE("a pinned CSV column with a word past the inferred rows is told to be text") {
  workdir w;
  std::filesystem::create_directories(w.path() / "d");
  std::string csv = "id,amt\n";
  for (int i = 1; i <= 30000; ++i)
    csv += std::to_string(i) + "," + (i == 25000 ? std::string("abc") : std::to_string(i)) + "\n";
  w.write("d/p.csv", csv);
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.c]\nadapter = \"csv\"\npath = \"d\"\n"
                           "[sources.c.tables.p]\ncolumns = { amt = \"int\" }\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* p = find_table(run, "c.p");
  REQUIRE(p != nullptr);
  CHECK_THAT((*p)["error"].get<std::string>(),
             Catch::Contains("'abc'") && Catch::Contains("columns = { amt = \"text\" }") &&
                 !Catch::Contains("\"bigint\""));
}

TEST_CASE("a CSV file mixing CRLF and LF line endings fails naming the first line that differs") {
  workdir w;
  std::filesystem::create_directories(w.path() / "d");
  w.write("d/t.csv", "id,name\r\n1,a\r\n2,b\r\n3,c\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.c]\nadapter = \"csv\"\npath = \"d\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* t = find_table(run, "c.t");
  REQUIRE(t != nullptr);
  CHECK_THAT((*t)["error"].get<std::string>(),
             Catch::Contains("line 1 ends with CRLF, line 4 with LF") &&
                 Catch::Contains("dos2unix"));
}

TEST_CASE("a dot in a DuckDB source's schema name: each table lands under its own name, and "
          "two tables that read as one name are told apart honestly") {
  workdir w;
  duckdb_exec(w.file("src.duckdb"),
              "CREATE SCHEMA \"a.b\"; CREATE TABLE \"a.b\".c (id INT); INSERT INTO \"a.b\".c VALUES (1);"
              "CREATE TABLE \"a.b\".solo (id INT); INSERT INTO \"a.b\".solo VALUES (3);"
              "CREATE SCHEMA a; CREATE TABLE a.\"b.c\" (id INT); INSERT INTO a.\"b.c\" VALUES (2);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.d]\nadapter = \"duckdb\"\npath = \"src.duckdb\"\n");
  int rc = -1;
  const auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  // "a.b".solo is the table solo, not "b.solo".
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT id FROM d.solo")[0][0] == "3");
  // "a.b".c and a."b.c" both read as a.b.c: one is copied, the other refused saying why
  // (not that they differ only by case).
  std::size_t copied = 0, refused = 0;
  for (const auto& t : run["tables"]) {
    if (t["source_table"] != "a.b.c")
      continue;
    if (t["status"] == "copied")
      ++copied;
    if (t["status"] == "failed") {
      ++refused;
      CHECK(t["error_code"] == "FLT-R006");
      CHECK_THAT(t["error"].get<std::string>(), Catch::Contains("a schema or table name holds a dot"));
      CHECK_THAT(t["error"].get<std::string>(), !Catch::Contains("case"));
    }
  }
  CHECK(copied == 1);
  CHECK(refused == 1);
}

namespace {

/// Two SQLite tables copied once into a DuckDB target, wh.duckdb.
void loaded_duckdb_shop(const workdir& w) {
  sqlite_exec(w.file("shop.db"), "CREATE TABLE a (id INTEGER); CREATE TABLE b (id INTEGER);"
                                 "INSERT INTO a VALUES (1); INSERT INTO b VALUES (2);");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
[sources.shop]
adapter = "sqlite"
path = "shop.db"
)toml");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
}

}  // namespace

TEST_CASE("a DuckDB target another process has open fails each table with a message naming "
          "that process, not the path") {
  workdir w;
  loaded_duckdb_shop(w);
  int rc = -1;
  duckdb_file_holder held(w.file("wh.duckdb"));
  // Opening it waits for the other process for a while (a second here), then gives up.
  scoped_env wait("FLOTILLA_DUCKDB_LOCK_WAIT", "1");
  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 1);
  REQUIRE(plan["tables"].size() == 2);
  for (const auto& t : plan["tables"]) {
    INFO(t.dump());
    CHECK(t["status"] == "failed");
    // Every table, the first and those after it, says why: the file is in use.
    CHECK_THAT(t["error"].get<std::string>(),
               Catch::Contains("another process has it open") &&
                   Catch::Contains(fmt::format("PID {}", ::getpid())) &&
                   !Catch::Contains("check path"));
  }
}

TEST_CASE("a run whose DuckDB target another process has open for a moment (a plan) waits for "
          "it, then loads every table") {
  workdir w;
  loaded_duckdb_shop(w);
  sqlite_exec(w.file("shop.db"), "INSERT INTO a VALUES (3)");
  auto held = std::make_unique<duckdb_file_holder>(w.file("wh.duckdb"));
  background_flotilla run(w, {"run", "--output", "json"});
  // It says it waits, naming the process that has the file; then the file is let go.
  bool waiting = false;
  for (int i = 0; i < 600 && !waiting; ++i) {
    waiting = run.err().find("waiting up to 30 s") != std::string::npos;
    if (!waiting)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(waiting);
  CHECK_THAT(run.err(), Catch::Contains(fmt::format("PID {}", ::getpid())));
  held.reset();
  REQUIRE(run.wait(120) == 0);
  const auto out = nlohmann::json::parse(run.out());
  CHECK(out["status"] == "success");
  CHECK(out["tables"].size() == 2);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM shop.a") ==
        std::vector<std::vector<std::string>>{{"2"}});
}

TEST_CASE("with the state directory lost, plan shows the incremental load the run then does "
          "from the target's committed watermark") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE ev (seq INTEGER, msg TEXT);"
                              "INSERT INTO ev VALUES (1, 'a'), (2, 'b'), (3, 'c');");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
[sources.shop]
adapter = "sqlite"
path = "a.db"
[sources.shop.tables.ev]
cursor_column = "seq"
)toml");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("a.db"), "INSERT INTO ev VALUES (4, 'd'), (5, 'e');");
  std::filesystem::remove_all(w.path() / ".flotilla");
  auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump());
  CHECK(plan["tables"][0]["load"] == "incremental");
  for (const auto& q : plan["tables"][0]["sql"])
    CHECK_THAT(q.get<std::string>(), !Catch::Contains("DROP TABLE"));
  // Its warning says what the run does: it goes on from the target's watermark.
  CHECK_THAT(plan["tables"][0]["warnings"].dump(),
             Catch::Contains("goes on from the watermark the target committed with its rows "
                             "(seq = 3)") &&
                 !Catch::Contains("appends the source's rows to it"));
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(run["tables"][0]["load"] == "incremental");
  CHECK(run["tables"][0]["rows"] == 2);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), count(DISTINCT seq) FROM shop.ev") ==
        std::vector<std::vector<std::string>>{{"5", "5"}});
}

TEST_CASE("a CSV column pinned bytes loads each value's UTF-8 bytes: no escape decoded, any "
          "character") {
  workdir w;
  std::filesystem::create_directories(w.path() / "files");
  w.write("files/n.csv", "id,s\n1,path\\x41b\n2,caf\xC3\xA9\n");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
[sources.f]
adapter = "csv"
path = "files"
[sources.f.tables.n]
columns = { s = "bytes" }
)toml");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT hex(s) FROM f.n ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"706174685C78343162"}, {"636166C3A9"}});
}

TEST_CASE("retry of a killed run refuses when a source the run could take tables of is gone "
          "from flotilla.toml") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE t (id INTEGER); INSERT INTO t VALUES (1);");
  sqlite_exec(w.file("b.db"), "CREATE TABLE u (id INTEGER); INSERT INTO u VALUES (2);");
  const std::string both = R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
schema = "s_{source}"
[sources.a]
adapter = "sqlite"
path = "a.db"
[sources.b]
adapter = "sqlite"
path = "b.db"
)toml";
  w.write("flotilla.toml", both);
  {
    scoped_env crash("FLOTILLA_CRASH_AT", "1:before_state");  // killed at the first commit
    auto killed = run_flotilla(w, {"run", "--output", "json"});
    REQUIRE(killed.exit_code != 0);
  }
  w.write("flotilla.toml", both.substr(0, both.find("[sources.b]")));
  auto refused = run_flotilla(w, {"retry"});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("b.*") && Catch::Contains("nothing was retried") &&
                              !Catch::Contains("a.*"));
  // With --output json, a document a scheduler can read says the same.
  auto refused_json = run_flotilla(w, {"retry", "--output", "json"});
  CHECK(refused_json.exit_code == 2);
  {
    auto j = nlohmann::json::parse(refused_json.out);
    CHECK(j["exit_code"] == 2);
    CHECK(j["status"] == "failed");
    REQUIRE(j["errors"].size() == 1);
    CHECK_THAT(j["errors"][0]["message"].get<std::string>(),
               Catch::Contains("b.*") && Catch::Contains("nothing was retried"));
  }
  // Restored, the retry finishes the run: both tables are there.
  w.write("flotilla.toml", both);
  int rc = -1;
  auto retried = flotilla_json(w, {"retry"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s_b.u") ==
        std::vector<std::vector<std::string>>{{"1"}});
}

TEST_CASE("a table refused for another source's target table stays refused when a run leaves "
          "that source out: retry, --filter, the source unreadable") {
  // Each of these loaded the refused table over the first source's rows with success.
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT); "
                              "INSERT INTO orders VALUES (1, 'a'), (2, 'a')");
  sqlite_exec(w.file("b.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT); "
                              "INSERT INTO orders VALUES (10, 'b')");
  const std::string target =
      "[project]\nprune_unchanged = true\n[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
      "schema = \"raw\"\n";
  const std::string a = "[sources.a]\nadapter = \"sqlite\"\npath = \"a.db\"\n";
  const std::string b = "[sources.b]\nadapter = \"sqlite\"\npath = \"b.db\"\n";
  const auto who = [&] {
    return sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(who) FROM raw__orders")[0][0];
  };
  const auto check_refused = [&](const nlohmann::json& run, const std::string& reason) {
    INFO(run.dump(2));
    const auto* t = source_row(run, "b", "orders");
    REQUIRE(t != nullptr);
    CHECK((*t)["status"] == "failed");
    CHECK((*t)["error_code"] == "FLT-R006");
    CHECK_THAT((*t)["error"].get<std::string>(),
               Catch::Contains("a.orders loaded last") && Catch::Contains(reason));
    CHECK((*t)["not_pruned"] == "a.orders loaded its target table last, and this run does not read it");
    CHECK(who() == "a,a");
  };
  w.write("flotilla.toml", target + a + b);
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 1);  // b.orders: FLT-R006
  REQUIRE(who() == "a,a");

  SECTION("retry") {
    auto r = run_flotilla(w, {"retry", "--output", "json"});
    CHECK(r.exit_code == 1);
    check_refused(nlohmann::json::parse(r.out), "a --filter or retry leaves it out");
  }
  SECTION("--filter") {
    check_refused(flotilla_json(w, {"run", "--filter", "source=b"}, &rc),
                  "a --filter or retry leaves it out");
    CHECK(rc == 1);
    // plan says the same.
    auto plan = run_flotilla(w, {"plan", "--filter", "source=b"});
    CHECK_THAT(plan.out + plan.err, Catch::Contains("a.orders loaded last"));
  }
  SECTION("the first source unreadable") {
    std::filesystem::rename(w.file("a.db"), w.file("a.db.away"));
    check_refused(flotilla_json(w, {"run"}, &rc), "source 'a' could not be read in this run");
    CHECK(rc == 1);
  }
  SECTION("the first source taken out of flotilla.toml gives the target table up") {
    w.write("flotilla.toml", target + b);
    CHECK(flotilla_json(w, {"run"}, &rc)["status"] == "success");
    CHECK(who() == "b");
  }
  SECTION("the first source no longer selecting the table gives it up, in a filtered run too") {
    w.write("flotilla.toml", target + a + "exclude = [\"orders\"]\n" + b);
    CHECK(flotilla_json(w, {"run", "--filter", "source=b"}, &rc)["status"] == "success");
    CHECK(who() == "b");
  }
}

TEST_CASE("a table flotilla.toml names in the first-listed source keeps its target table when "
          "that source cannot be read on the first run, or no longer has the table") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT); "
                              "INSERT INTO orders VALUES (1, 'a'), (2, 'a')");
  sqlite_exec(w.file("b.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT); "
                              "INSERT INTO orders VALUES (10, 'b')");
  w.write("flotilla.toml",
          "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\nschema = \"raw\"\n"
          "[sources.a]\nadapter = \"sqlite\"\npath = \"a.db\"\ninclude = [\"orders\"]\n"
          "[sources.b]\nadapter = \"sqlite\"\npath = \"b.db\"\ninclude = [\"orders\"]\n");
  const auto who = [&] {
    return sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(who) FROM raw__orders")[0][0];
  };
  const auto refused = [&](const nlohmann::json& run) -> std::string {
    INFO(run.dump(2));
    const auto* t = source_row(run, "b", "orders");
    REQUIRE(t != nullptr);
    CHECK((*t)["status"] == "failed");
    CHECK((*t)["error_code"] == "FLT-R006");
    return (*t)["error"].get<std::string>();
  };
  int rc = -1;
  SECTION("a's file is away on the very first run: b.orders does not load in its place") {
    std::filesystem::rename(w.file("a.db"), w.file("a.db.away"));
    CHECK_THAT(refused(flotilla_json(w, {"run"}, &rc)),
               Catch::Contains("which a.orders loads") &&
                   Catch::Contains("source 'a' could not be read in this run"));
    CHECK(rc == 1);
    CHECK(sqlite_query(w.file("wh.sqlite"),
                       "SELECT count(*) FROM sqlite_master WHERE name = 'raw__orders'")[0][0] == "0");
    std::filesystem::rename(w.file("a.db.away"), w.file("a.db"));
    flotilla_json(w, {"run"}, &rc);
    CHECK(who() == "a,a");
  }
  SECTION("a filtered first run that leaves a out: b.orders does not take the target table") {
    // Else the filter run first decided which client's rows the table holds for good.
    CHECK_THAT(refused(flotilla_json(w, {"run", "--filter", "source=b"}, &rc)),
               Catch::Contains("which a.orders loads") &&
                   Catch::Contains("this run leaves source 'a' out"));
    CHECK(rc == 1);
    CHECK(sqlite_query(w.file("wh.sqlite"),
                       "SELECT count(*) FROM sqlite_master WHERE name = 'raw__orders'")[0][0] == "0");
    auto plan = run_flotilla(w, {"plan", "--filter", "source=b"});
    CHECK(plan.exit_code == 1);
    CHECK_THAT(plan.out, Catch::Contains("this run leaves source 'a' out"));
    CHECK(flotilla_json(w, {"run"}, &rc)["status"] == "partial");
    CHECK(who() == "a,a");
    // A filtered run of a alone loads as before.
    sqlite_exec(w.file("a.db"), "INSERT INTO orders VALUES (3, 'a')");
    CHECK(flotilla_json(w, {"run", "--filter", "source=a"}, &rc)["status"] == "success");
    CHECK(who() == "a,a,a");
  }
  SECTION("a's table renamed at its source: a fails FLT-R005, b.orders is refused as such") {
    REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "partial");
    REQUIRE(who() == "a,a");
    sqlite_exec(w.file("a.db"), "ALTER TABLE orders RENAME TO orders_v2");
    const auto run = flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 1);
    const auto message = refused(run);
    CHECK_THAT(message, Catch::Contains("source 'a' does not have that table in this run (FLT-R005)"));
    CHECK_THAT(message, !Catch::Contains("also loads in this run"));
    const auto* a = source_row(run, "a", "orders");
    REQUIRE(a != nullptr);
    CHECK((*a)["error_code"] == "FLT-R005");
    CHECK(who() == "a,a");
    // The plan tells the two rows of raw.orders apart by the table each comes from.
    auto plan = run_flotilla(w, {"plan"});
    CHECK_THAT(plan.out, Catch::Contains("raw__orders (from a.orders)") &&
                             Catch::Contains("raw__orders (from b.orders)"));
  }
}

TEST_CASE("a retried table whose own source loaded its target table from another of its "
          "tables stays refused") {
  workdir w;
  duckdb_exec(w.file("p.duckdb"), "CREATE SCHEMA audit;"
                                  "CREATE TABLE main.orders (id INTEGER PRIMARY KEY, who TEXT);"
                                  "INSERT INTO main.orders VALUES (1, 'main');"
                                  "CREATE TABLE audit.orders (id INTEGER PRIMARY KEY, who TEXT);"
                                  "INSERT INTO audit.orders VALUES (5, 'audit');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "schema = \"\"\n[sources.p]\nadapter = \"duckdb\"\npath = \"p.duckdb\"\n"
                           "[sources.p.tables.\"main.orders\"]\n");
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  INFO(first.dump(2));
  REQUIRE(rc == 1);
  REQUIRE(source_row(first, "p", "audit.orders") != nullptr);
  CHECK((*source_row(first, "p", "audit.orders"))["error_code"] == "FLT-R006");
  REQUIRE(sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(who) FROM orders")[0][0] == "main");
  auto r = run_flotilla(w, {"retry", "--output", "json"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  const auto retried = nlohmann::json::parse(r.out);
  REQUIRE(source_row(retried, "p", "audit.orders") != nullptr);
  CHECK((*source_row(retried, "p", "audit.orders"))["status"] == "failed");
  CHECK_THAT((*source_row(retried, "p", "audit.orders"))["error"].get<std::string>(),
             Catch::Contains("p.main.orders loaded last"));
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(who) FROM orders")[0][0] == "main");
}

TEST_CASE("a table a section names keeps its target table when its source no longer has it, "
          "against another table of the source landing there") {
  workdir w;
  duckdb_exec(w.file("p.duckdb"), "CREATE SCHEMA audit;"
                                  "CREATE TABLE main.orders (id INTEGER PRIMARY KEY, who TEXT);"
                                  "INSERT INTO main.orders VALUES (1, 'main');"
                                  "CREATE TABLE audit.orders (id INTEGER PRIMARY KEY, who TEXT);"
                                  "INSERT INTO audit.orders VALUES (5, 'audit');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "schema = \"\"\n[sources.p]\nadapter = \"duckdb\"\npath = \"p.duckdb\"\n"
                           "[sources.p.tables.\"main.orders\"]\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(who) FROM orders")[0][0] == "main");
  duckdb_exec(w.file("p.duckdb"), "ALTER TABLE main.orders RENAME TO orders_v2");
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  const auto* audit = source_row(j, "p", "audit.orders");
  REQUIRE(audit != nullptr);
  CHECK((*audit)["error_code"] == "FLT-R006");
  CHECK_THAT((*audit)["error"].get<std::string>(),
             Catch::Contains("which p.main.orders loads (flotilla.toml names it in a section") &&
                 Catch::Contains("(FLT-R005)"));
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(who) FROM orders")[0][0] == "main");
}

TEST_CASE("two sources whose names differ only by case clash on DuckDB under {source}, and the "
          "refusal does not suggest the {source} the template has") {
  workdir w;
  sqlite_exec(w.file("one.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);");
  sqlite_exec(w.file("two.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (2);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.Shop]\nadapter = \"sqlite\"\npath = \"one.db\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"two.db\"\n");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  const auto* refused = source_row(j, "shop", "t");
  REQUIRE(refused != nullptr);
  CHECK((*refused)["error_code"] == "FLT-R006");
  CHECK_THAT((*refused)["error"].get<std::string>(),
             Catch::Contains("has {source} already") && Catch::Contains("Rename a source"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT id FROM \"Shop\".t") ==
        std::vector<std::vector<std::string>>{{"1"}});
}

TEST_CASE("an incremental table taking over a target table another table loaded replaces its "
          "rows instead of resuming from its watermark, and so does the first coming back") {
  // Both mixed the two sources' rows: the new owner resumed from the watermark the target
  // committed with the other's rows, and merged into them on the key.
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT, u INTEGER);"
                              "INSERT INTO orders VALUES (1, 'a1', 1), (2, 'a2', 2);");
  sqlite_exec(w.file("b.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, who TEXT, u INTEGER);"
                              "INSERT INTO orders VALUES (1, 'b1', 0), (2, 'b2', 0), (3, 'b3', 3),"
                              " (4, 'b4', 4);");
  const std::string target =
      "[project]\nprune_unchanged = true\n[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
      "schema = \"raw\"\n";
  const auto source = [](const std::string& name) {
    return fmt::format("[sources.{0}]\nadapter = \"sqlite\"\npath = \"{0}.db\"\n"
                       "[sources.{0}.tables.orders]\ncursor_column = \"u\"\n",
                       name);
  };
  const auto rows = [&] {
    return duckdb_query(w.file("wh.duckdb"),
                        "SELECT string_agg(who, ',' ORDER BY id) FROM raw.orders")[0][0];
  };
  w.write("flotilla.toml", target + source("a") + source("b"));
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rows() == "a1,a2");
  // a taken out: b loads the table, all of its rows and none of a's.
  w.write("flotilla.toml", target + source("b"));
  auto taken = flotilla_json(w, {"run"}, &rc);
  INFO(taken.dump(2));
  CHECK(rc == 0);
  CHECK(rows() == "b1,b2,b3,b4");
  const auto* b = source_row(taken, "b", "orders");
  REQUIRE(b != nullptr);
  CHECK((*b)["load"] == "full_refresh");
  // a back (b taken out), with a new row: it replaces b's rows with all of its own.
  sqlite_exec(w.file("a.db"), "INSERT INTO orders VALUES (3, 'a3', 3);");
  w.write("flotilla.toml", target + source("a"));
  auto back = flotilla_json(w, {"run"}, &rc);
  INFO(back.dump(2));
  CHECK(rows() == "a1,a2,a3");
  // Then incremental again, from its own watermark.
  sqlite_exec(w.file("a.db"), "INSERT INTO orders VALUES (4, 'a4', 4);");
  flotilla_json(w, {"run"}, &rc);
  CHECK(rows() == "a1,a2,a3,a4");
}

TEST_CASE("a value the target refuses names the user's table, not its staging copy") {
  workdir w;
  duckdb_query(w.file("h.duckdb"), "CREATE TABLE h (id INTEGER PRIMARY KEY, hi HUGEINT); "
                                   "INSERT INTO h VALUES (1, -170141183460469231731687303715884105728)");
  w.write("flotilla.toml", "[targets.ddb]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.d]\nadapter = \"duckdb\"\npath = \"h.duckdb\"\n");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  const auto error = j["tables"][0]["error"].get<std::string>();
  CHECK_THAT(error, Catch::StartsWith("target 'ddb': \"d\".\"h\": column \"hi\"") &&
                        !Catch::Contains("__flotilla_staging") &&
                        Catch::Contains("columns = { hi = \"text\" }"));
}

TEST_CASE("a target table name another kind of object holds fails FLT-S015 in plan and run, "
          "and that object is left as it was") {
  // A view (and on PostgreSQL and SQLite an index, on PostgreSQL a sequence) named like
  // a table the run would create or refresh: nothing is dropped, nothing loaded there.
  for (const std::string kind : {"duckdb", "sqlite", "postgres"}) {
    DYNAMIC_SECTION(kind) {
      workdir w;
      sqlite_exec(w.file("shop.db"),
                  "CREATE TABLE orders (id INTEGER PRIMARY KEY, v TEXT);"
                  "INSERT INTO orders VALUES (1, 'a');"
                  "CREATE TABLE customers (id INTEGER PRIMARY KEY);"
                  "INSERT INTO customers VALUES (7);"
                  "CREATE TABLE items (id INTEGER);"
                  "INSERT INTO items VALUES (3);");
      std::string target, schema = "s_" + unique_suffix();
      std::vector<std::string> held;  // the table names another object holds
      if (kind == "duckdb") {
        duckdb_exec(w.file("wh.duckdb"),
                    "CREATE SCHEMA " + schema + "; CREATE VIEW " + schema +
                        ".Customers AS SELECT 1 AS x;");
        target = "dialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"" + schema + "\"\n";
        held = {"customers"};
      } else if (kind == "sqlite") {
        sqlite_exec(w.file("wh.sqlite"),
                    "CREATE TABLE other (a INT); CREATE INDEX shop__orders ON other (a);"
                    "CREATE VIEW SHOP__customers AS SELECT 1 AS x;");
        target = "dialect = \"sqlite\"\npath = \"wh.sqlite\"\n";
        held = {"shop__customers", "shop__orders"};
      } else {
        pg_exec(pg_dsn(), fmt::format("CREATE SCHEMA {0}; CREATE TABLE {0}.other (a INT);"
                                      "CREATE INDEX orders ON {0}.other (a);"
                                      "CREATE VIEW {0}.customers AS SELECT 1 AS x;"
                                      "CREATE SEQUENCE {0}.items;",
                                      schema));
        target = fmt::format("dialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"\n", pg_dsn(),
                             schema);
        held = {"customers", "orders", "items"};
      }
      w.write("flotilla.toml", "[targets.wh]\n" + target +
                                   "\n[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n");
      const auto name = [&](const std::string& t) {
        return kind == "sqlite" ? "shop__" + t : schema + "." + t;
      };
      int code = 0;
      auto plan = flotilla_json(w, {"plan"}, &code);
      INFO(plan.dump(2));
      CHECK(code == 1);
      auto run = flotilla_json(w, {"run"}, &code);
      INFO(run.dump(2));
      CHECK(code == 1);
      for (const std::string t : {"orders", "customers", "items"}) {
        const bool is_held = std::ranges::find(held, kind == "sqlite" ? "shop__" + t : t) !=
                             held.end();
        const auto* r = find_table(run, name(t));
        REQUIRE(r != nullptr);
        if (!is_held) {
          CHECK((*r)["status"] == "copied");
          continue;
        }
        CHECK((*r)["status"] == "failed");
        const std::string error = (*r)["error"].get<std::string>();
        CHECK((*r)["error_code"] == "FLT-S015");
        CHECK(error.find("not a table Flotilla can load into") != std::string::npos);
      }
      // The objects are still there, as they were.
      if (kind == "duckdb") {
        CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT x FROM " + schema + ".customers") ==
              std::vector<std::vector<std::string>>{{"1"}});
      } else if (kind == "sqlite") {
        CHECK(sqlite_query(w.file("wh.sqlite"),
                           "SELECT type FROM sqlite_master WHERE name IN ('shop__orders', "
                           "'SHOP__customers') ORDER BY type") ==
              std::vector<std::vector<std::string>>{{"index"}, {"view"}});
      } else {
        CHECK(pg_query(pg_dsn(), fmt::format("SELECT string_agg(relkind::text, '' ORDER BY "
                                             "relname) FROM pg_class WHERE relnamespace = "
                                             "'{}'::regnamespace AND relname IN ('customers', "
                                             "'orders', 'items')",
                                             schema))[0][0] == "vSi");
        pg_exec(pg_dsn(), "DROP SCHEMA " + schema + " CASCADE");
      }
    }
  }
}

TEST_CASE("a run whose SQLite target another process holds a write lock on says it waits, and "
          "Ctrl-C stops it there; the lock released, the run loads") {
  workdir w;
  sqlite_exec(w.file("shop.db"), "CREATE TABLE a (id INTEGER); INSERT INTO a VALUES (1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n");
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  sqlite_exec(w.file("shop.db"), "INSERT INTO a VALUES (2)");
  sqlite3* holder = nullptr;
  REQUIRE(sqlite3_open(w.file("wh.sqlite").c_str(), &holder) == SQLITE_OK);
  REQUIRE(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  {
    background_flotilla run(w, {"run", "--output", "json"});
    bool waiting = false;
    for (int i = 0; i < 600 && !waiting; ++i) {
      waiting = run.err().find("another process holds a write lock on SQLite database") !=
                std::string::npos;
      if (!waiting)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    INFO(run.err());
    REQUIRE(waiting);
    run.signal(SIGINT);
    CHECK(run.wait(30) == 1);  // at once, not after the lock's minute
    const auto out = nlohmann::json::parse(run.out());
    const auto* a = find_table(out, "shop__a");
    REQUIRE(a != nullptr);
    CHECK((*a)["status"] == "failed");
    CHECK((*a)["error_code"] == "FLT-R008");
    CHECK_THAT((*a)["error"].get<std::string>(), Catch::Contains("stopped while waiting"));
  }
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM shop__a") ==
        std::vector<std::vector<std::string>>{{"2"}});
}

TEST_CASE("a damaged state store: run and review refuse it, with JSON under --output json") {
  workdir w;
  sqlite_exec(w.file("src.db"), k_source);
  write_pruned_config(w, "raw", "");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // CURRENT names a MANIFEST that is not there.
  w.write(".flotilla/state/CURRENT", "MANIFEST-999999\n");
  for (const std::vector<std::string> args :
       {std::vector<std::string>{"run", "--output", "json"},
        std::vector<std::string>{"review", "list", "--output", "json"},
        std::vector<std::string>{"review", "show", "x", "--output", "json"}}) {
    CAPTURE(args[0], args[1]);
    auto r = run_flotilla(w, args);
    CHECK(r.exit_code == 2);
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j["errors"][0]["code"] == "FLT-R007");
    CHECK_THAT(j["errors"][0]["message"].get<std::string>(),
               Catch::Contains("the state files are damaged"));
  }
}

TEST_CASE("an empty flotilla.toml is a configuration error, not a successful run of nothing") {
  workdir w;
  w.write("flotilla.toml", "");
  for (const std::string verb : {"run", "plan"}) {
    CAPTURE(verb);
    auto r = run_flotilla(w, {verb, "--output", "json"});
    CHECK(r.exit_code == 2);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["errors"][0]["code"] == "FLT-C006");
    CHECK(j["errors"][0]["key"] == "sources");
  }
  CHECK_FALSE(std::filesystem::exists(w.path() / ".flotilla" / "runs"));
}

TEST_CASE("an unreadable source's tables are listed failed: those its sections name, and a "
          "retry's own") {
  workdir w;
  sqlite_exec(w.file("good.db"), "CREATE TABLE a (id INTEGER PRIMARY KEY); INSERT INTO a VALUES (1);");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "sqlite"
path = "wh.sqlite"
[sources.good]
adapter = "sqlite"
path = "good.db"
[sources.ghost]
adapter = "sqlite"
path = "ghost.db"
[sources.ghost.tables.orders]
unique_key = ["id"]
)toml");
  int rc = -1;
  // Never copied: the section names the table, and a monitor counting failures sees it.
  auto j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(j["status"] == "partial");
  const auto* orders = find_table(j, "ghost__orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "failed");
  CHECK((*orders)["error_code"] == "FLT-R002");
  CHECK_THAT((*orders)["error"].get<std::string>(), Catch::Contains("ghost.db"));

  // A retry of one failed table whose source is gone lists that table failed.
  sqlite_exec(w.file("src.db"), "CREATE TABLE big (id INTEGER PRIMARY KEY, v INTEGER);"
                                "CREATE TABLE ok (id INTEGER PRIMARY KEY); INSERT INTO big VALUES (1, 5);");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "sqlite"
path = "wh.sqlite"
[sources.s]
adapter = "sqlite"
path = "src.db"
[sources.s.tables.big]
columns = { v = "int" }
)toml");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("src.db"), "INSERT INTO big VALUES (2, 5000000000);");
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 1);
  std::filesystem::rename(w.file("src.db"), w.file("src.gone"));
  auto retried = flotilla_json(w, {"retry"}, &rc);
  CHECK(rc == 1);
  REQUIRE(retried["tables"].size() == 1);
  CHECK(retried["tables"][0]["table"] == "s__big");
  CHECK(retried["tables"][0]["status"] == "failed");
}

TEST_CASE("a librdkafka setting it refuses is a configuration error when flotilla.toml is read") {
  workdir w;
  sqlite_exec(w.file("src.db"), k_source);
  write_pruned_config(w, "raw", "");
  {
    std::ofstream out(w.file("flotilla.toml"), std::ios::app);
    out << "\n[events.kafka]\nbrokers = \"127.0.0.1:9\"\ntopic = \"t\"\n"
           "[events.kafka.settings]\n\"linger.mss\" = 5\n\"message.timeout.ms\" = -5\n"
           "acks = \"1\"\n";
  }
  for (const std::string verb : {"plan", "run"}) {
    CAPTURE(verb);
    auto r = run_flotilla(w, {verb, "--output", "json"});
    CHECK(r.exit_code == 2);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["errors"].size() == 3);
    std::map<std::string, std::string> said;
    for (const auto& e : j["errors"]) {
      CHECK(e["code"] == "FLT-C005");
      said[e["key"].get<std::string>()] = e["message"].get<std::string>();
    }
    CHECK_THAT(said["events.kafka.settings.\"linger.mss\""],
               Catch::Contains("did you mean 'linger.ms'?"));
    CHECK_THAT(said["events.kafka.settings.\"message.timeout.ms\""], Catch::Contains("range"));
    // At odds with the idempotent producer the sink always uses.
    CHECK_THAT(said["events.kafka.settings.acks"], Catch::Contains("acks = all"));
  }
  CHECK_FALSE(std::filesystem::exists(w.path() / "wh.duckdb"));  // nothing copied
}

TEST_CASE("a CSV column that outgrew its type names its first such value in file order") {
  workdir w;
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/m.csv", "id,n\n1,5\n");
  w.write("flotilla.toml", R"toml([targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
[sources.c]
adapter = "csv"
path = "csv"
)toml");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  // "10.5" sorts before "9.5" as text; the first in the file is 9.5, on data row 2.
  w.write("csv/m.csv", "id,n\n1,5\n2,9.5\n3,10.5\n");
  auto j = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 1);
  INFO(j.dump());
  CHECK_THAT(j.dump(), Catch::Contains("'9.5'") && Catch::Contains("data row 2"));
}

TEST_CASE("a table a section names taking a target table over from a table of its own source "
          "says why that table gives it up") {
  workdir w;
  duckdb_exec(w.file("dw.duckdb"),
              "CREATE TABLE main.orders (id INTEGER PRIMARY KEY, v TEXT);"
              "INSERT INTO main.orders VALUES (1, 'main'), (2, 'main');"
              "CREATE SCHEMA audit; CREATE TABLE audit.orders (id INTEGER PRIMARY KEY, v TEXT);"
              "INSERT INTO audit.orders VALUES (1, 'audit');");
  const std::string base =
      "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n"
      "[sources.dw]\nadapter = \"duckdb\"\npath = \"dw.duckdb\"\ninclude = [\"main.*\"]\n";
  w.write("flotilla.toml", base);
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  w.write("flotilla.toml", base + "[sources.dw.tables.\"audit.orders\"]\ndescription = \"audit\"\n");
  auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump(2));
  bool said = false;
  for (const auto& t : plan["tables"])
    if (t["source_table"] == "audit.orders")
      for (const auto& warning : t.value("warnings", nlohmann::json::array())) {
        const auto text = warning.get<std::string>();
        if (text.find("loaded the target table") != std::string::npos) {
          said = true;
          CHECK_THAT(text, Catch::Contains("gives way to this table, which flotilla.toml names "
                                           "in a section of its own"));
          CHECK_THAT(text, !Catch::Contains("no longer in flotilla.toml"));
        }
      }
  CHECK(said);
}

TEST_CASE("retry does not point at an earlier failure of a table a later full run no longer "
          "has") {
  workdir w;
  sqlite_exec(w.file("app.db"), "CREATE TABLE a (id INTEGER PRIMARY KEY); INSERT INTO a VALUES (1);"
                                "CREATE TABLE regions (id INTEGER PRIMARY KEY); INSERT INTO regions VALUES (1);");
  const std::string base = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n";
  w.write("flotilla.toml", base + "[sources.app.tables.regions]\ndescription = \"regions\"\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("app.db"), "DROP TABLE regions");
  auto failed = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 1);  // regions: FLT-R005, named in a section
  // A filtered run after it: retry would not look past it, and names regions.
  REQUIRE(flotilla_json(w, {"run", "--filter", "table=a"}, &rc)["status"] == "success");
  auto named = run_flotilla(w, {"retry"});
  CHECK(named.out.find("app.regions") != std::string::npos);
  // The section removed and a full run: regions is gone from the fleet.
  w.write("flotilla.toml", base);
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  auto none = run_flotilla(w, {"retry"});
  CHECK(none.exit_code == 0);
  CHECK(none.out.find("nothing to retry") != std::string::npos);
  CHECK(none.out.find("regions") == std::string::npos);
}

TEST_CASE("plan says why a table that would fail is not pruned, as the run does") {
  workdir w;
  sqlite_exec(w.file("app.db"), "CREATE TABLE p (id INTEGER PRIMARY KEY, name TEXT);"
                                "INSERT INTO p VALUES (1, 'widget');");
  const std::string base = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                           "prune_unchanged = true\n";
  w.write("flotilla.toml", base);
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  w.write("flotilla.toml", base + "[sources.app.tables.p]\ncolumns = { name = \"int\" }\n");
  auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump(2));
  REQUIRE(plan["tables"].size() == 1);
  CHECK(plan["tables"][0]["status"] == "failed");
  CHECK_THAT(plan["tables"][0].value("not_pruned", ""), Catch::Contains("settings changed"));
  auto text = run_flotilla(w, {"plan", "--explain"});
  CHECK(text.out.find("not pruned  ") != std::string::npos);
}

TEST_CASE("cursor_column respelled in another case, the same source column, keeps its watermark") {
  workdir w;
  sqlite_exec(w.file("app.db"), "CREATE TABLE log (seq INTEGER, msg TEXT);"
                                "INSERT INTO log VALUES (1, 'a'), (2, 'b');");
  const auto config = [&](const std::string& cursor) {
    w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                             "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                             "[sources.app.tables.log]\ncursor_column = \"" + cursor + "\"\n");
  };
  config("seq");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("app.db"), "INSERT INTO log VALUES (3, 'c')");
  config("SEQ");
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 0);
  REQUIRE(j["tables"].size() == 1);
  CHECK(j["tables"][0]["rows"] == 1);  // the new row only
  CHECK_THAT(j["tables"][0].value("warnings", nlohmann::json::array()).dump(),
             !Catch::Contains("cursor_column changed"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), count(DISTINCT seq) FROM app.log") ==
        std::vector<std::vector<std::string>>{{"3", "3"}});
  // Misspelled: the table fails FLT-S010, and no warning describes a read that never ran.
  config("sqe");
  auto typo = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  REQUIRE(typo["tables"].size() == 1);
  CHECK(typo["tables"][0]["error_code"] == "FLT-S010");
  CHECK_THAT(typo["tables"][0].value("warnings", nlohmann::json::array()).dump(),
             !Catch::Contains("reads every row"));
}

TEST_CASE("a SQLite table name that is not UTF-8 fails into PostgreSQL without a warning of a "
          "drop that does not happen") {
  workdir w;
  const std::string schema = "nu_" + unique_suffix();
  sqlite_exec(w.file("src.db"), "CREATE TABLE \"bad\xFF\xFEname\" (id INTEGER PRIMARY KEY);"
                                "INSERT INTO \"bad\xFF\xFEname\" VALUES (1);");
  w.write("flotilla.toml", fmt::format("[targets.pg]\ndialect = \"postgres\"\ndsn = \"{}\"\n"
                                       "schema = \"{}\"\n[sources.s]\nadapter = \"sqlite\"\n"
                                       "path = \"src.db\"\n",
                                       pg_dsn(), schema));
  int rc = -1;
  for (const std::string verb : {"plan", "run"}) {
    auto j = flotilla_json(w, {verb}, &rc);
    INFO(verb << ": " << j.dump(2));
    CHECK(rc == 1);
    REQUIRE(j["tables"].size() == 1);
    CHECK(j["tables"][0]["status"] == "failed");
    CHECK(j["tables"][0].value("error_code", "") == "FLT-S011");
    CHECK_THAT(j["tables"][0].value("warnings", nlohmann::json::array()).dump(),
               !Catch::Contains("treated as absent"));
  }
  pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
}

TEST_CASE("a JSON number the reader takes as a double, pinned to a decimal, names the double "
          "for what it is, and the string the pin then reads exactly") {
  workdir w;
  std::filesystem::create_directories(w.path() / "d");
  w.write("d/h.ndjson", "{\"id\":1,\"n\":99999999999999999999}\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.j]\nadapter = \"json\"\npath = \"d\"\n"
                           "[sources.j.tables.h]\ncolumns = { n = \"decimal(20,0)\" }\n");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  REQUIRE(j["tables"].size() == 1);
  const auto error = j["tables"][0]["error"].get<std::string>();
  CHECK_THAT(error, Catch::Contains("the JSON reader takes as the double") &&
                        Catch::Contains("write the value as a JSON string") &&
                        !Catch::Contains("\"double\""));
  // As the message says: the digits as a string load exactly.
  w.write("d/h.ndjson", "{\"id\":1,\"n\":\"99999999999999999999\"}\n");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT CAST(n AS VARCHAR) FROM j.h") ==
        std::vector<std::vector<std::string>>{{"99999999999999999999"}});
}

TEST_CASE("plan with a damaged state store says run refuses it, in its JSON and exit status") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"a.db\"\n"
                           "prune_unchanged = true\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  w.write(".flotilla/state/CURRENT", "garbage\n");
  auto plan = run_flotilla(w, {"plan", "--output", "json"});
  CHECK(plan.exit_code == 1);
  CHECK_THAT(plan.err, Catch::Contains("warning FLT-R007") && Catch::Contains("damaged") &&
                           !Catch::Contains("no state exists there yet"));
  const auto j = nlohmann::json::parse(plan.out);
  CHECK(j["state_error"]["code"] == "FLT-R007");
  auto run = run_flotilla(w, {"run"});
  CHECK(run.exit_code == 2);  // as the plan said
}

TEST_CASE("plan finds a damaged table file, or a missing CURRENT, of the state store as run "
          "does") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"a.db\"\n"
                           "prune_unchanged = true\n");
  int rc = -1;
  for (int i = 0; i < 2; ++i)
    REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  const auto state = w.path() / ".flotilla" / "state";
  std::vector<std::filesystem::path> tables;
  for (const auto& f : std::filesystem::directory_iterator(state))
    if (f.path().extension() == ".sst")
      tables.push_back(f.path());
  REQUIRE_FALSE(tables.empty());
  const auto backup = w.path() / "state.bak";
  std::filesystem::copy(state, backup, std::filesystem::copy_options::recursive);
  for (const auto& sst : tables) {
    INFO(sst.string());
    {
      std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(40);
      f.write("GARBAGEGARBAGE", 14);
    }
    auto plan = run_flotilla(w, {"plan", "--output", "json"});
    CHECK(plan.exit_code == 1);
    CHECK_THAT(plan.err, Catch::Contains("warning FLT-R007"));
    CHECK(nlohmann::json::parse(plan.out)["state_error"]["code"] == "FLT-R007");
    CHECK(run_flotilla(w, {"run"}).exit_code == 2);
    std::filesystem::remove_all(state);
    std::filesystem::copy(backup, state, std::filesystem::copy_options::recursive);
  }
  std::filesystem::remove(state / "CURRENT");
  auto plan = run_flotilla(w, {"plan", "--output", "json"});
  CHECK(plan.exit_code == 1);
  CHECK_THAT(plan.err, Catch::Contains("no CURRENT file") && !Catch::Contains("no state exists"));
  CHECK(run_flotilla(w, {"run"}).exit_code == 2);
}

TEST_CASE("the same project through a symlinked directory prunes its unchanged tables") {
  workdir w;
  std::filesystem::create_directories(w.path() / "real");
  std::filesystem::create_directory_symlink(w.path() / "real", w.path() / "link");
  sqlite_exec(w.file("real/a.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);");
  w.write("real/flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                                "[sources.s]\nadapter = \"sqlite\"\npath = \"a.db\"\n"
                                "prune_unchanged = true\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"-c", "real/flotilla.toml", "run"}, &rc)["status"] == "success");
  for (const std::string via : {"link/flotilla.toml", "real/flotilla.toml"}) {
    auto j = flotilla_json(w, {"-c", via, "run"}, &rc);
    INFO(via << ": " << j.dump(2));
    REQUIRE(j["tables"].size() == 1);
    CHECK(j["tables"][0]["status"] == "pruned");
  }
}

TEST_CASE("a retry of a filtered run's failures names the earlier failures it does not take") {
  workdir w;
  sqlite_exec(w.file("app.db"), "CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT); "
                                "INSERT INTO a VALUES (1, 'x');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                           "[sources.app.tables.regions]\ndescription = \"gone\"\n"
                           "[sources.app.tables.a]\ncolumns = { v = \"int\" }\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "failed");  // a and regions
  REQUIRE(flotilla_json(w, {"run", "--filter", "table=a"}, &rc)["status"] == "failed");
  auto retry = run_flotilla(w, {"retry"});
  CHECK(retry.exit_code == 1);  // a fails again
  CHECK_THAT(retry.err, Catch::Contains("failed in an earlier run") &&
                            Catch::Contains("app.regions"));
}
