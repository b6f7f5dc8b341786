// The flotilla executable loads DuckDB's library on first use (cli/duckdb_loader.cpp):
// commands that never call DuckDB do not load it, and a library that cannot be loaded
// fails the tables that need it with an error saying what to do, losing nothing.
#include <catch2/catch.hpp>

#include <string>

#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

void write_config(const workdir& w, const std::string& target_section) {
  sqlite_exec(w.file("shop.db"),
              "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT);"
              "INSERT INTO orders VALUES (1, 'new'), (2, 'paid'), (3, 'done');");
  w.write("flotilla.toml", "[project]\nname = \"t\"\n\n[targets.wh]\n" + target_section +
                               "\n[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n");
}

}  // namespace

TEST_CASE("the executable does not load DuckDB at start-up") {
  workdir w;
  const std::string dynamic = flotilla_dynamic_section(w);
  INFO(dynamic);
  CHECK(dynamic.find("(NEEDED)") != std::string::npos);  // readelf did list the dependencies
  CHECK(dynamic.find("libcaf_core") != std::string::npos);
  CHECK(dynamic.find("libduckdb") == std::string::npos);
}

TEST_CASE("a run that never calls DuckDB does not need its library") {
  workdir w;
  write_config(w, "dialect = \"sqlite\"\npath = \"wh.sqlite\"\n");
  scoped_env missing("FLOTILLA_DUCKDB_LIBRARY", w.file("no-such-dir/libduckdb.so"));
  auto run = flotilla_json(w, {"run"});
  CHECK(run["status"] == "success");
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM \"shop__orders\"") ==
        std::vector<std::vector<std::string>>{{"3"}});
  CHECK(run_flotilla(w, {"plan"}).exit_code == 0);
}

TEST_CASE("a DuckDB library that cannot be loaded fails the table with what to do, then a rerun copies it") {
  workdir w;
  write_config(w, "dialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"{source}\"\n");
  const std::string bad = w.file("no-such-dir/libduckdb.so");
  {
    scoped_env missing("FLOTILLA_DUCKDB_LIBRARY", bad);
    int code = 0;
    auto run = flotilla_json(w, {"run"}, &code);
    CHECK(code != 0);
    CHECK(run["status"] == "failed");
    const auto* t = find_table(run, "shop.orders");
    REQUIRE(t != nullptr);
    CHECK((*t)["status"] == "failed");
    const std::string error = (*t)["error"];
    CHECK(error.find(bad) != std::string::npos);
    CHECK(error.find("FLOTILLA_DUCKDB_LIBRARY") != std::string::npos);
    CHECK(error.find("scripts/setup") != std::string::npos);
  }
  {
    // A file that is not a shared library: the same kind of error, naming it.
    w.write("not-a-library.so", "this is not an ELF file");
    scoped_env wrong("FLOTILLA_DUCKDB_LIBRARY", w.file("not-a-library.so"));
    int code = 0;
    auto run = flotilla_json(w, {"run"}, &code);
    CHECK(code != 0);
    const auto* t = find_table(run, "shop.orders");
    REQUIRE(t != nullptr);
    CHECK(std::string((*t)["error"]).find(w.file("not-a-library.so")) != std::string::npos);
  }
  // The library as built: the table is copied, every row once.
  auto run = flotilla_json(w, {"run"});
  CHECK(run["status"] == "success");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), sum(id) FROM \"shop\".\"orders\"") ==
        std::vector<std::vector<std::string>>{{"3", "6"}});
}
