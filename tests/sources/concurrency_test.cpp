// One source object serves several reader threads at once (the engine's I/O workers
// share sources), and several source objects may read one file.

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "sources/source.hpp"
#include "tests/sources/support.hpp"

using namespace flotilla::sources;
using namespace flotilla::sources::testing;

namespace {

// Reads `table` from `threads` threads at once; returns how many reads saw `rows` rows.
int parallel_reads(source& src, const source_table& table, std::uint64_t rows, int threads) {
  std::atomic<int> good{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&] {
      try {
        read_request req;
        req.table = &table;
        req.columns = table.columns;
        req.batch_rows = 1000;
        std::uint64_t seen = 0;
        auto r = src.read(req, [&](flotilla::schema::row_batch&& b) {
          seen += b.rows();
          return true;
        });
        if (seen == rows && r.rows == rows)
          ++good;
      } catch (...) {
        // counted as a bad read
      }
    });
  for (auto& t : pool)
    t.join();
  return good.load();
}

}  // namespace

TEST_CASE("one source serves concurrent reads on every adapter") {
  temp_dir dir;
  SECTION("sqlite, also through two sources on one file") {
    const auto db = dir.file("c.db");
    sqlite_exec(db, "CREATE TABLE t (i INTEGER, s TEXT); WITH RECURSIVE c(x) AS (SELECT 1 UNION "
                    "ALL SELECT x + 1 FROM c WHERE x < 20000) INSERT INTO t SELECT x, 'v' || x FROM c;");
    auto src = open_source({"c", "sqlite", db, ""});
    const auto cat = src->read_catalog();
    CHECK(parallel_reads(*src, cat.tables[0], 20000, 4) == 4);
    // The connections share one cache and schema per file (sources/sqlite_source.cpp); a
    // second source on the file, and a write from another connection in between, are
    // seen by the next reads of both.
    auto other = open_source({"c2", "sqlite", db, ""});
    CHECK(parallel_reads(*other, cat.tables[0], 20000, 2) == 2);
    sqlite_exec(db, "ALTER TABLE t ADD COLUMN n INTEGER; INSERT INTO t VALUES (20001, 'x', 1);");
    const auto changed = other->read_catalog();
    REQUIRE(changed.tables[0].columns.columns.size() == 3);
    CHECK(parallel_reads(*src, changed.tables[0], 20001, 3) == 3);
    CHECK(parallel_reads(*other, changed.tables[0], 20001, 2) == 2);
  }
  SECTION("duckdb, also through two sources on one file") {
    const auto db = dir.file("c.duckdb");
    duckdb_exec(db, "CREATE TABLE t AS SELECT i, 'v' || i AS s FROM range(20000) r(i);");
    auto src = open_source({"c", "duckdb", db, ""});
    auto other = open_source({"c", "duckdb", db, ""});
    const auto cat = src->read_catalog();
    CHECK(parallel_reads(*src, cat.tables[0], 20000, 4) == 4);
    CHECK(parallel_reads(*other, cat.tables[0], 20000, 2) == 2);
  }
  SECTION("csv") {
    std::string content = "i,s\n";
    for (int i = 0; i < 20000; ++i)
      content += std::to_string(i) + ",v" + std::to_string(i) + "\n";
    write_file(dir.file("c.csv"), content);
    auto src = open_source({"c", "csv", dir.file("c.csv"), ""});
    const auto cat = src->read_catalog();
    CHECK(parallel_reads(*src, cat.tables[0], 20000, 4) == 4);
  }
  SECTION("postgres") {
    pg_schema s;
    s.exec("CREATE TABLE t AS SELECT i, 'v' || i AS s FROM generate_series(1, 20000) g(i)");
    auto src = open_source({"c", "postgres", "", s.dsn()});
    const auto cat = src->read_catalog();
    const auto& t = find_table(cat, s.name() + ".t");
    CHECK(parallel_reads(*src, t, 20000, 4) == 4);
    CHECK(parallel_reads(*src, t, 20000, 4) == 4);  // pooled connections are reused
  }
}
