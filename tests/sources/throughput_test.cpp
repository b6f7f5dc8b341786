// Read throughput and catalog speed, measured against real engines. Hidden from the
// default run (tag [.perf]); run with: test_sources "[perf]"

#include <catch2/catch.hpp>

#include <chrono>

#include "sources/source.hpp"
#include "tests/sources/support.hpp"

using namespace flotilla::sources;
using namespace flotilla::sources::testing;

namespace {

constexpr int rows = 1'000'000;

// 16 columns: bigint key, 5 integers, 4 doubles, 4 short texts, a decimal, a timestamp.
const char* columns_sql =
    "i AS id, i % 7 AS a, i % 101 AS b, i % 1009 AS c, i * 3 AS d, -i AS e, "
    "i * 0.5 AS f, i / 3.0 AS g, i * 1.25 AS h, i * 0.001 AS j, "
    "'name' || (i % 97) AS k, 'city' || (i % 13) AS l, 'x' AS m, 'status-' || (i % 5) AS n";

double measure(source& src, const source_table& t) {
  read_request req;
  req.table = &t;
  req.columns = t.columns;
  std::uint64_t seen = 0;
  const auto start = std::chrono::steady_clock::now();
  auto result = src.read(req, [&](flotilla::schema::row_batch&& b) {
    seen += b.rows();
    return true;
  });
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(seen == rows);
  REQUIRE(result.rows == rows);
  return rows / s;
}

}  // namespace

TEST_CASE("read throughput of each adapter on 16-column rows", "[.perf]") {
  temp_dir dir;
  SECTION("sqlite") {
    const auto db = dir.file("perf.db");
    sqlite_exec(db, std::string("CREATE TABLE t (id BIGINT PRIMARY KEY, a INTEGER, b INTEGER, "
                                "c INTEGER, d BIGINT, e BIGINT, f DOUBLE, g DOUBLE, h DOUBLE, "
                                "j DOUBLE, k TEXT, l TEXT, m TEXT, n TEXT, o DECIMAL(12,2), "
                                "p DATETIME); "
                                "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s "
                                "WHERE i < 1000000) INSERT INTO t SELECT ") +
                    columns_sql +
                    ", i * 0.01 AS o, datetime(1700000000 + i, 'unixepoch') AS p FROM s");
    source_options o{"perf", "sqlite", db, ""};
    auto src = open_source(o);
    const auto cat = src->read_catalog();
    WARN("sqlite: " << static_cast<long>(measure(*src, cat.tables[0])) << " rows/s");
  }
  SECTION("duckdb") {
    const auto db = dir.file("perf.duckdb");
    duckdb_exec(db, std::string("CREATE TABLE t AS SELECT ") + columns_sql +
                        ", CAST(i * 0.01 AS DECIMAL(12,2)) AS o, "
                        "TIMESTAMP '2024-01-01' + to_seconds(i) AS p FROM range(1000000) r(i)");
    source_options o{"perf", "duckdb", db, ""};
    auto src = open_source(o);
    const auto cat = src->read_catalog();
    WARN("duckdb: " << static_cast<long>(measure(*src, cat.tables[0])) << " rows/s");
  }
  SECTION("csv") {
    const auto db = dir.file("perf.duckdb");
    duckdb_exec(db, std::string("COPY (SELECT ") + columns_sql +
                        ", CAST(i * 0.01 AS DECIMAL(12,2)) AS o, "
                        "TIMESTAMP '2024-01-01' + to_seconds(i) AS p FROM range(1000000) r(i)) "
                        "TO '" + dir.file("perf.csv") + "' (HEADER)");
    source_options o{"perf", "csv", dir.file("perf.csv"), ""};
    auto src = open_source(o);
    const auto cat = src->read_catalog();
    WARN("csv: " << static_cast<long>(measure(*src, cat.tables[0])) << " rows/s");
  }
  SECTION("postgres") {
    pg_schema s;
    s.exec(std::string("CREATE TABLE t AS SELECT ") + columns_sql +
           ", (i * 0.01)::numeric(12,2) AS o, "
           "timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second' AS p "
           "FROM generate_series(1, 1000000) AS g(i)");
    source_options o{"perf", "postgres", "", s.dsn()};
    auto src = open_source(o);
    const auto cat = src->read_catalog();
    WARN("postgres: " << static_cast<long>(measure(*src, find_table(cat, s.name() + ".t")))
                      << " rows/s");
  }
}

TEST_CASE("one catalog query reads ten thousand postgres tables", "[.perf]") {
  pg_schema s;
  for (int from = 1; from <= 10'000; from += 1000)
    s.exec("DO $$ BEGIN FOR i IN " + std::to_string(from) + ".." + std::to_string(from + 999) +
           " LOOP EXECUTE format('CREATE TABLE t%s (id bigint PRIMARY KEY, name text, "
           "amount numeric(12,2), at timestamptz, note varchar(40), n integer)', i); END LOOP; "
           "END $$");
  source_options o{"perf", "postgres", "", s.dsn()};
  auto src = open_source(o);
  (void)src->read_catalog();  // connect, warm the server's caches
  const auto start = std::chrono::steady_clock::now();
  const catalog cat = src->read_catalog();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  CHECK(cat.tables.size() >= 10'000);
  WARN("postgres catalog: " << cat.tables.size() << " tables in " << us / 1000 << " ms ("
                            << us / static_cast<long>(cat.tables.size()) << " us per table)");
  // Dropping them all in one transaction would exceed the server's lock table.
  for (int from = 1; from <= 10'000; from += 500)
    s.exec("DO $$ BEGIN FOR i IN " + std::to_string(from) + ".." + std::to_string(from + 499) +
           " LOOP EXECUTE format('DROP TABLE t%s', i); END LOOP; END $$");
}
