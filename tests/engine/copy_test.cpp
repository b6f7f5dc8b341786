// copy_table against real SQLite files: the reader and the writer, for tables of one
// batch (written on the copying thread) and of many (a writer thread takes them), and
// both ways a copy can fail half-way: the source and the target.
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "engine/copy.hpp"

using namespace flotilla;
namespace fs = std::filesystem;

namespace {

struct scratch {
  fs::path dir;
  scratch() {
    static std::atomic<int> n{0};
    dir = fs::temp_directory_path() / fmt::format("flotilla_copy_{}_{}", ::getpid(), n++);
    fs::create_directories(dir);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  [[nodiscard]] std::string file(const char* name) const { return (dir / name).string(); }
};

void exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO((err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

/// The first column of the first row, as text ("" for none or NULL).
std::string scalar(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

/// `rows` rows with ids 1..rows; the row with id `bad` (when non-zero) holds text in
/// its INTEGER column, which the SQLite reader refuses.
void make_source(const std::string& path, int rows, int bad = 0) {
  exec(path, fmt::format("CREATE TABLE orders (id INTEGER PRIMARY KEY, qty INTEGER, note TEXT);"
                         "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {0})"
                         " INSERT INTO orders SELECT i, CASE WHEN i = {1} THEN 'many' ELSE i * 2 END,"
                         " 'n' || i FROM n WHERE {0} > 0;",
                         rows, bad));
}

struct copy_setup {
  std::unique_ptr<sources::source> src;
  std::unique_ptr<sinks::warehouse> wh;
  sources::catalog catalog;
  engine::table_job job;

  copy_setup(const scratch& s, std::size_t batch_rows) {
    sources::source_options so;
    so.name = "shop";
    so.adapter = "sqlite";
    so.path = s.file("shop.db");
    src = sources::open_source(so);
    sinks::warehouse_options wo;
    wo.name = "wh";
    wo.dialect = "sqlite";
    wo.path = s.file("wh.sqlite");
    wh = sinks::open_warehouse(wo);
    catalog = src->read_catalog();
    const auto* t = catalog.find("orders");
    REQUIRE(t != nullptr);
    job.source_name = "shop";
    job.target_name = "wh";
    job.table = *t;
    job.target = {"", "", "orders"};
    job.batch_rows = batch_rows;
  }
};

}  // namespace

TEST_CASE("a table of one batch and a table of many are copied whole, in order") {
  const int rows = GENERATE(0, 7, 10, 95);
  INFO(rows << " rows in batches of 10");
  scratch s;
  make_source(s.file("shop.db"), rows);
  copy_setup c(s, 10);
  auto out = engine::copy_table(*c.src, *c.wh, c.job);
  INFO(out.error.value_or(""));
  CHECK(out.status == engine::table_status::copied);
  CHECK(out.rows == static_cast<std::uint64_t>(rows));
  c.wh.reset();
  const std::string wh = s.file("wh.sqlite");
  CHECK(scalar(wh, "SELECT count(*) FROM orders") == std::to_string(rows));
  CHECK(scalar(wh, "SELECT count(*) FROM orders WHERE qty = id * 2 AND note = 'n' || id") ==
        std::to_string(rows));
  CHECK(scalar(wh, "SELECT coalesce(sum(id), 0) FROM orders") == std::to_string(rows * (rows + 1) / 2));
}

TEST_CASE("a source that fails half-way leaves the target as it was and names the column") {
  const int bad = GENERATE(3, 55);  // in the first batch, or after the writer thread began
  INFO("bad value in row " << bad);
  scratch s;
  make_source(s.file("shop.db"), 95, bad);
  exec(s.file("wh.sqlite"), "CREATE TABLE orders (id BIGINT, qty BIGINT, note TEXT);"
                            "INSERT INTO orders VALUES (1, 1, 'old');");
  copy_setup c(s, 10);
  auto out = engine::copy_table(*c.src, *c.wh, c.job);
  CHECK(out.status == engine::table_status::failed);
  CHECK(out.error_code == "FLT-R002");
  CHECK_THAT(out.error.value_or(""), Catch::Contains("qty"));
  c.wh.reset();
  CHECK(scalar(s.file("wh.sqlite"), "SELECT group_concat(note) FROM orders") == "old");
}

TEST_CASE("a target write that fails half-way stops the read and rolls the load back") {
  const int rows = GENERATE(7, 95);
  INFO(rows << " rows in batches of 10");
  scratch s;
  make_source(s.file("shop.db"), rows);
  exec(s.file("wh.sqlite"), "CREATE TABLE orders (id BIGINT, qty BIGINT, note TEXT);"
                            "INSERT INTO orders VALUES (1, 1, 'old');");
  copy_setup c(s, 10);
  // The write fails: the run was stopped before the copy's first batch was written.
  std::atomic<bool> cancel{true};
  c.job.cancel = &cancel;
  auto out = engine::copy_table(*c.src, *c.wh, c.job);
  CHECK(out.status == engine::table_status::failed);
  CHECK(out.error_code == "FLT-R008");  // the stop's code, not a target error
  CHECK_THAT(out.error.value_or(""), Catch::Contains("stopped by the user"));
  c.wh.reset();
  CHECK(scalar(s.file("wh.sqlite"), "SELECT group_concat(note) FROM orders") == "old");
}

TEST_CASE("a load that cannot start fails as the target's, not the source's, and stops the read") {
  const int rows = GENERATE(7, 95);
  // A shared connection starts the load after a one-batch read, or during a longer one;
  // one of its own starts it before the read.
  const bool shared = GENERATE(false, true);
  INFO(rows << " rows in batches of 10, shared connection: " << shared);
  scratch s;
  make_source(s.file("shop.db"), rows);
  // The table in a database the target's file has not attached: its first statement
  // fails. (A view where the table should be fails the plan already: FLT-S015.)
  exec(s.file("wh.sqlite"), "CREATE TABLE orders (id BIGINT, qty BIGINT, note TEXT);"
                            "INSERT INTO orders VALUES (1, 1, 'old');");
  copy_setup c(s, 10);
  c.job.target.schema = "not_attached";
  std::mutex target_lock;
  if (shared)
    c.job.target_lock = &target_lock;
  auto out = engine::copy_table(*c.src, *c.wh, c.job);
  CHECK(out.status == engine::table_status::failed);
  CHECK(out.error_code == "FLT-R001");
  CHECK_THAT(out.error.value_or(""), Catch::Contains("not_attached"));
  c.wh.reset();
  CHECK(scalar(s.file("wh.sqlite"), "SELECT group_concat(note) FROM orders") == "old");
}

TEST_CASE("workers sharing one target connection take it in turns, each reading its own tables") {
  constexpr int tables = 40;
  scratch s;
  std::string ddl;
  for (int t = 0; t < tables; ++t)
    ddl += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT);"
                       "WITH RECURSIVE n(i) AS "
                       "(SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {1})"
                       " INSERT INTO t{0} SELECT i, 't{0}-' || i FROM n;",
                       t, 5 + 7 * t);  // one batch up to many
  exec(s.file("shop.db"), ddl);
  sinks::warehouse_options wo;
  wo.name = "wh";
  wo.dialect = "sqlite";
  wo.path = s.file("wh.sqlite");
  auto wh = sinks::open_warehouse(wo);
  std::mutex target_lock;
  std::vector<engine::table_outcome> outcomes(tables);
  const auto worker = [&](int first) {
    sources::source_options so;
    so.name = "shop";
    so.adapter = "sqlite";
    so.path = s.file("shop.db");
    auto src = sources::open_source(so);
    const auto catalog = src->read_catalog();
    for (int t = first; t < tables; t += 2) {
      engine::table_job job;
      job.source_name = "shop";
      job.target_name = "wh";
      job.table = *catalog.find(fmt::format("t{}", t));
      job.target = {"", "", fmt::format("t{}", t)};
      job.batch_rows = 10;
      job.target_lock = &target_lock;
      outcomes[t] = engine::copy_table(*src, *wh, job);
    }
  };
  for (int round = 0; round < 2; ++round) {  // into an empty target, then into the loaded one
    std::thread a(worker, 0), b(worker, 1);
    a.join();
    b.join();
    for (int t = 0; t < tables; ++t) {
      INFO("round " << round << ", table t" << t << ": " << outcomes[t].error.value_or(""));
      CHECK(outcomes[t].status == engine::table_status::copied);
      CHECK(outcomes[t].rows == static_cast<std::uint64_t>(5 + 7 * t));
    }
  }
  wh.reset();
  for (int t = 0; t < tables; ++t)
    CHECK(scalar(s.file("wh.sqlite"),
                 fmt::format("SELECT count(*) FROM t{0} WHERE v = 't{0}-' || id", t)) ==
          std::to_string(5 + 7 * t));
}
