// The flotilla executable loads libpq, libcurl and librdkafka on first use
// (cli/client_libraries.cpp): they are not start-up dependencies, a run that never calls
// them does not load them, and a run that does works through them as if linked.
#include <catch2/catch.hpp>

#include <string>

#include <fmt/format.h>

#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

bool loaded(const command_result& r, const std::string& soname) {
  return r.err.find("file=" + soname) != std::string::npos;
}

}  // namespace

TEST_CASE("the executable does not load libpq, libcurl or librdkafka at start-up") {
  workdir w;
  const std::string dynamic = flotilla_dynamic_section(w);
  INFO(dynamic);
  CHECK(dynamic.find("(NEEDED)") != std::string::npos);  // readelf did list the dependencies
  CHECK(dynamic.find("libcaf_core") != std::string::npos);
  CHECK(dynamic.find("libpq") == std::string::npos);
  CHECK(dynamic.find("libcurl") == std::string::npos);
  CHECK(dynamic.find("librdkafka") == std::string::npos);
}

TEST_CASE("a SQLite run loads none of them; a PostgreSQL run loads libpq and copies through it") {
  workdir w;
  sqlite_exec(w.file("shop.db"),
              "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT);"
              "INSERT INTO orders VALUES (1, 'new'), (2, 'paid'), (3, 'done');");
  w.write("flotilla.toml", "[project]\nname = \"t\"\n\n[targets.wh]\ndialect = \"sqlite\"\n"
                           "path = \"wh.sqlite\"\n\n[sources.shop]\nadapter = \"sqlite\"\n"
                           "path = \"shop.db\"\n");
  {
    // The dynamic loader then names every library it loads, at start-up or by dlopen.
    scoped_env trace("LD_DEBUG", "files");
    auto run = run_flotilla(w, {"run"});
    INFO(run.err.substr(0, 4000));
    CHECK(run.exit_code == 0);
    CHECK(loaded(run, "libcaf_core.so"));  // the trace does name what is loaded
    CHECK_FALSE(loaded(run, "libpq.so.5"));
    CHECK_FALSE(loaded(run, "libcurl.so.4"));
    CHECK_FALSE(loaded(run, "librdkafka.so.1"));
  }
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM \"shop__orders\"") ==
        std::vector<std::vector<std::string>>{{"3"}});

  // The same source into PostgreSQL: libpq is loaded at the first call and every row
  // arrives (the calls, COPY included, pass through the loaded library).
  const std::string schema = "lazy_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE", schema));
  workdir p;
  sqlite_exec(p.file("shop.db"),
              "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT);"
              "INSERT INTO orders VALUES (1, 'new'), (2, 'paid'), (3, 'done');");
  p.write("flotilla.toml", fmt::format("[project]\nname = \"t\"\n\n[targets.wh]\n"
                                       "dialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"\n\n"
                                       "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n",
                                       pg_dsn(), schema));
  {
    // The dynamic loader then names every library it loads, at start-up or by dlopen.
    scoped_env trace("LD_DEBUG", "files");
    auto run = run_flotilla(p, {"run"});
    INFO(run.err.substr(0, 4000));
    CHECK(run.exit_code == 0);
    CHECK(loaded(run, "libpq.so.5"));
    CHECK_FALSE(loaded(run, "librdkafka.so.1"));
  }
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT count(*), string_agg(status, ',' ORDER BY id) "
                                       "FROM {}.orders",
                                       schema)) ==
        std::vector<std::vector<std::string>>{{"3", "new,paid,done"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE", schema));
}
