// Kept catalogs: a prune run takes an unchanged SQLite file's catalog from the state
// store instead of reading it from SQLite, and any change of the file reads it afresh.
// FLOTILLA_TRACE_CATALOG=1 makes flotilla say, per source, which of the two it did.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>

#include "storage/state_store.hpp"
#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

constexpr const char* k_read = "catalog shop: read from the source";
constexpr const char* k_kept = "catalog shop: kept (source marker unchanged)";

const char* k_shop_sql = R"(
CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, amount DECIMAL(10,2),
                     qty INTEGER NOT NULL, updated_at TIMESTAMP);
INSERT INTO orders VALUES (1, 'new', 10.50, 1, '2025-01-01 10:00:00'),
                          (2, 'paid', 20.00, 2, '2025-01-01 11:00:00');
CREATE TABLE customers (id INTEGER PRIMARY KEY, email VARCHAR(80), vip BOOLEAN,
                        score REAL, born DATE, data BLOB);
INSERT INTO customers VALUES (1, 'a@x.io', 1, 1.5, '1990-01-01', x'00ff'),
                             (2, 'b@x.io', 0, NULL, NULL, NULL);
)";

/// FLOTILLA_TRACE_CATALOG=1 for the flotilla processes the test starts.
struct trace_catalogs : scoped_env {
  trace_catalogs() : scoped_env("FLOTILLA_TRACE_CATALOG", "1") {}
};

void write_config(const workdir& w, const std::string& extra = "") {
  w.write("flotilla.toml", R"([project]
name = "test"

[targets.wh]
dialect = "duckdb"
path = "wh.duckdb"

[sources.shop]
adapter = "sqlite"
path = "shop.db"
prune_unchanged = true
)" + extra);
}

struct traced_run {
  nlohmann::json run;
  std::string err;
  int exit_code = -1;
};

traced_run run(const workdir& w, std::vector<std::string> args = {"run"}) {
  args.push_back("--output");
  args.push_back("json");
  auto r = run_flotilla(w, args);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE_NOTHROW(nlohmann::json::parse(r.out));
  return {nlohmann::json::parse(r.out), r.err, r.exit_code};
}

std::string status_of(const traced_run& r, const std::string& table) {
  const auto* t = find_table(r.run, table);
  return t ? (*t)["status"].get<std::string>() : "absent";
}

bool said(const traced_run& r, const char* line) {
  return r.err.find(line) != std::string::npos;
}

/// The columns of a DuckDB table as (name, type, nullable), in order.
std::vector<std::vector<std::string>> columns_of(const workdir& w, const std::string& table) {
  return duckdb_query(w.file("wh.duckdb"),
                      "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                      "WHERE table_schema = 'shop' AND table_name = '" + table +
                          "' ORDER BY ordinal_position");
}

/// An open SQLite connection, kept open so a WAL-mode file is not checkpointed.
class connection {
 public:
  explicit connection(const std::string& file) { REQUIRE(sqlite3_open(file.c_str(), &db_) == SQLITE_OK); }
  ~connection() { sqlite3_close(db_); }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  void exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    INFO(sql << "\n" << msg);
    REQUIRE(rc == SQLITE_OK);
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace

TEST_CASE("an unchanged SQLite file is pruned from its kept catalog, without reading SQLite") {
  trace_catalogs trace;
  workdir w;
  sqlite_exec(w.file("shop.db"), k_shop_sql);
  write_config(w);
  auto first = run(w);
  REQUIRE(first.exit_code == 0);
  CHECK(said(first, k_read));
  CHECK(status_of(first, "shop.orders") == "copied");

  auto second = run(w);
  CHECK(second.exit_code == 0);
  CHECK(said(second, k_kept));
  CHECK_FALSE(said(second, k_read));
  CHECK(status_of(second, "shop.orders") == "pruned");
  CHECK(status_of(second, "shop.customers") == "pruned");
  CHECK(second.run["drift"]["tables_checked"] == 0);

  // --no-prune and plan read the source, kept catalog or not.
  auto forced = run(w, {"run", "--no-prune"});
  CHECK(said(forced, k_read));
  CHECK(status_of(forced, "shop.orders") == "copied");
  auto plan = run_flotilla(w, {"plan"});
  CHECK(plan.exit_code == 0);
  CHECK(plan.err.find(k_read) != std::string::npos);
  CHECK(plan.err.find(k_kept) == std::string::npos);

  // Still the same file: kept again, and pruned.
  auto again = run(w);
  CHECK(said(again, k_kept));
  CHECK(status_of(again, "shop.customers") == "pruned");
}

TEST_CASE("a table first selected under a kept catalog is created as a fresh read would") {
  trace_catalogs trace;
  workdir w;
  sqlite_exec(w.file("shop.db"), k_shop_sql);
  write_config(w);
  auto first = run(w, {"run", "--filter", "table=orders"});
  REQUIRE(first.exit_code == 0);
  CHECK(said(first, k_read));
  CHECK(status_of(first, "shop.customers") == "absent");

  // customers now comes from the kept catalog: its target must match a fresh read's.
  auto second = run(w);
  CHECK(second.exit_code == 0);
  CHECK(said(second, k_kept));
  CHECK(status_of(second, "shop.orders") == "pruned");
  CHECK(status_of(second, "shop.customers") == "copied");

  workdir fresh;
  sqlite_exec(fresh.file("shop.db"), k_shop_sql);
  write_config(fresh);
  auto control = run(fresh, {"run", "--no-prune"});
  REQUIRE(control.exit_code == 0);
  CHECK(said(control, k_read));
  CHECK_FALSE(columns_of(w, "customers").empty());
  CHECK(columns_of(w, "customers") == columns_of(fresh, "customers"));
  CHECK(columns_of(w, "orders") == columns_of(fresh, "orders"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM shop.customers")[0][0] == "2");
}

TEST_CASE("a kept table whose columns do not unpack fails with what to do; --no-prune copies it") {
  // A kept catalog's columns are unpacked only for the tables a run copies. A damaged
  // record must fail that table, naming the source, the table and the way out, and lose
  // nothing: the pruned tables stay pruned and --no-prune reads the source afresh.
  trace_catalogs trace;
  workdir w;
  sqlite_exec(w.file("shop.db"), k_shop_sql);
  write_config(w);
  REQUIRE(run(w, {"run", "--filter", "table=orders"}).exit_code == 0);
  {
    auto store = flotilla::storage::state_store::open(w.path() / ".flotilla" / "state");
    REQUIRE(store.has_value());
    auto kept = store->get<flotilla::storage::pb::SourceCatalog>("shop");
    REQUIRE(kept.has_value());
    REQUIRE(kept->has_value());
    bool damaged = false;
    for (auto& t : *(*kept)->mutable_tables())
      if (t.name() == "customers") {
        t.set_columns(std::string("id\0no such type\0" "3", 17));
        damaged = true;
      }
    REQUIRE(damaged);
    REQUIRE(store->put("shop", **kept));
  }
  auto second = run(w);
  CHECK(second.exit_code == 1);
  CHECK(said(second, k_kept));
  CHECK(status_of(second, "shop.orders") == "pruned");
  REQUIRE(status_of(second, "shop.customers") == "failed");
  const std::string error = (*find_table(second.run, "shop.customers"))["error"];
  CHECK(error.find("'shop'") != std::string::npos);
  CHECK(error.find("customers") != std::string::npos);
  CHECK(error.find("--no-prune") != std::string::npos);

  auto forced = run(w, {"run", "--no-prune"});
  CHECK(forced.exit_code == 0);
  CHECK(said(forced, k_read));
  CHECK(status_of(forced, "shop.customers") == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM shop.customers")[0][0] == "2");
  // The record read afresh replaced the damaged one: kept and pruned again.
  auto again = run(w);
  CHECK(again.exit_code == 0);
  CHECK(said(again, k_kept));
  CHECK(status_of(again, "shop.customers") == "pruned");
}

TEST_CASE("any change of the SQLite file reads its catalog afresh and copies its tables") {
  trace_catalogs trace;
  workdir w;
  sqlite_exec(w.file("shop.db"), k_shop_sql);
  write_config(w);
  REQUIRE(run(w).exit_code == 0);
  REQUIRE(said(run(w), k_kept));

  SECTION("a new column") {
    sqlite_exec(w.file("shop.db"), "ALTER TABLE orders ADD COLUMN note TEXT");
    auto r = run(w);
    CHECK(r.exit_code == 0);
    CHECK(said(r, k_read));
    CHECK(status_of(r, "shop.orders") == "copied");
    CHECK(r.run["drift"]["actions_taken"].size() == 1);
    CHECK(columns_of(w, "orders").back()[0] == "note");
  }
  SECTION("a new row") {
    sqlite_exec(w.file("shop.db"), "INSERT INTO orders VALUES (3, 'x', 1, 1, '2026-01-01 00:00:00')");
    auto r = run(w);
    CHECK(said(r, k_read));
    CHECK(status_of(r, "shop.orders") == "copied");
    CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM shop.orders")[0][0] == "3");
  }
  SECTION("a new table") {
    sqlite_exec(w.file("shop.db"), "CREATE TABLE refunds (id INTEGER PRIMARY KEY, amount REAL)");
    auto r = run(w);
    CHECK(said(r, k_read));
    CHECK(status_of(r, "shop.refunds") == "copied");
  }
  SECTION("writes while the file is in WAL mode and never checkpointed") {
    connection db(w.file("shop.db"));
    db.exec("PRAGMA journal_mode=WAL");
    db.exec("PRAGMA wal_autocheckpoint=0");
    db.exec("INSERT INTO orders VALUES (3, 'x', 1, 1, '2026-01-01 00:00:00')");
    auto switched = run(w);
    CHECK(said(switched, k_read));
    CHECK(status_of(switched, "shop.orders") == "copied");
    auto unchanged = run(w);
    CHECK(said(unchanged, k_kept));
    CHECK(status_of(unchanged, "shop.orders") == "pruned");

    db.exec("INSERT INTO orders VALUES (4, 'y', 1, 1, '2026-01-02 00:00:00')");
    auto row = run(w);
    CHECK(said(row, k_read));
    CHECK(status_of(row, "shop.orders") == "copied");
    CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM shop.orders")[0][0] == "4");
    CHECK(said(run(w), k_kept));

    db.exec("ALTER TABLE customers ADD COLUMN tier INTEGER");
    auto column = run(w);
    CHECK(said(column, k_read));
    CHECK(status_of(column, "shop.customers") == "copied");
    CHECK(columns_of(w, "customers").back()[0] == "tier");
    auto after = run(w);
    CHECK(said(after, k_kept));
    CHECK(status_of(after, "shop.customers") == "pruned");
  }
  SECTION("the file replaced by another one") {
    std::filesystem::rename(w.file("shop.db"), w.file("old.db"));
    sqlite_exec(w.file("shop.db"), k_shop_sql);
    auto r = run(w);
    CHECK(said(r, k_read));
    CHECK(status_of(r, "shop.orders") == "copied");
  }
}

TEST_CASE("a csv directory takes each unchanged file's table from the kept catalog") {
  // A csv table's columns are inferred from every row of its file: a prune run does not
  // read an unchanged file again to infer them, and a changed file is inferred afresh.
  trace_catalogs trace;
  workdir w;
  std::filesystem::create_directories(w.file("files"));
  w.write("files/a.csv", "id,amount\n1,10\n2,20\n");
  w.write("files/b.csv", "id;note\n1;\"x;y\"\n");
  w.write("flotilla.toml", R"([project]
name = "test"

[targets.wh]
dialect = "duckdb"
path = "wh.duckdb"

[sources.files]
adapter = "csv"
path = "files"
prune_unchanged = true
)");
  auto first = run(w);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK(said(first, "catalog files: read from the source, 0 of 2 tables kept"));
  CHECK(status_of(first, "files.a") == "copied");

  auto second = run(w);
  CHECK(second.exit_code == 0);
  CHECK(said(second, "catalog files: read from the source, 2 of 2 tables kept"));
  CHECK(status_of(second, "files.a") == "pruned");
  CHECK(status_of(second, "files.b") == "pruned");

  // A changed file is inferred again (its new column and row land); the other is kept.
  w.write("files/a.csv", "id,amount,note\n1,10,\n2,20,\n3,30,late\n");
  auto third = run(w);
  CHECK(third.exit_code == 0);
  CHECK(said(third, "catalog files: read from the source, 1 of 2 tables kept"));
  CHECK(status_of(third, "files.a") == "copied");
  CHECK(status_of(third, "files.b") == "pruned");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT note FROM files.a WHERE id = 3") ==
        std::vector<std::vector<std::string>>{{"late"}});

  // A kept table is read with the dialect its file was inferred with.
  auto forced = run(w, {"run", "--no-prune"});
  CHECK(forced.exit_code == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT note FROM files.b") ==
        std::vector<std::vector<std::string>>{{"x;y"}});
}
