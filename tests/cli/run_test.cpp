// End-to-end: the real flotilla binary against real SQLite sources and DuckDB, SQLite
// and PostgreSQL targets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <duckdb.h>
#include <fmt/core.h>

#include <libpq-fe.h>

#include "storage/state_store.hpp"
#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

/// The run directory under .flotilla/runs that is none of `known`: a killed run's.
std::string other_run(const workdir& w, const std::set<std::string>& known) {
  for (const auto& dir : std::filesystem::directory_iterator(w.path() / ".flotilla" / "runs"))
    if (!known.contains(dir.path().filename().string()))
      return dir.path().filename().string();
  return {};
}

/// `flotilla <args>` stopped at the crash point `point` (FLOTILLA_CRASH_AT: the process
/// kills itself there, as kill -9 would).
command_result run_crashing_at(const workdir& w, const std::string& point,
                               std::vector<std::string> args = {"run"}) {
  setenv("FLOTILLA_CRASH_AT", point.c_str(), 1);
  auto r = run_flotilla(w, std::move(args));
  unsetenv("FLOTILLA_CRASH_AT");
  return r;
}

const char* k_orders_sql = R"(
CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, amount DECIMAL(10,2),
                     qty INTEGER, note TEXT, updated_at TIMESTAMP);
INSERT INTO orders VALUES (1, 'new', 10.50, 1, 'a', '2025-01-01 10:00:00'),
                          (2, 'paid', 20.00, 2, NULL, '2025-01-01 11:00:00'),
                          (3, 'done', -3.25, 3, 'c', '2025-01-01 12:00:00');
CREATE TABLE customers (id INTEGER PRIMARY KEY, email VARCHAR(80), vip BOOLEAN);
INSERT INTO customers VALUES (1, 'a@x.io', 1), (2, 'b@x.io', 0);
)";

struct target_kind {
  std::string name;
};

/// A config with one SQLite source `shop` (tags client=acme, region=us_west) into the
/// given target; returns the target table name of `orders` as flotilla reports it.
std::string write_config(const workdir& w, const std::string& target, const std::string& extra = "",
                         const std::string& pg_schema_suffix = "") {
  std::string target_section;
  if (target == "duckdb")
    target_section = "dialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"staging__{region}__{source}\"\n";
  else if (target == "sqlite")
    target_section = "dialect = \"sqlite\"\npath = \"wh.sqlite\"\nschema = \"staging__{region}__{source}\"\n";
  else
    target_section = fmt::format("dialect = \"postgres\"\ndsn = \"{}\"\nschema = \"st_{}_{{source}}\"\n",
                                 pg_dsn(), pg_schema_suffix);
  w.write("flotilla.toml", fmt::format(R"([project]
name = "test"

[targets.wh]
{}
[sources.shop]
adapter = "sqlite"
path = "shop.db"
tags = {{ client = "acme", region = "us_west" }}
{}
)",
                                       target_section, extra));
  return "";
}

std::string orders_table(const std::string& target, const std::string& pg_suffix) {
  if (target == "sqlite")
    return "staging__us_west__shop__orders";
  if (target == "postgres")
    return "st_" + pg_suffix + "_shop.orders";
  return "staging__us_west__shop.orders";
}

std::vector<std::vector<std::string>> target_query(const workdir& w, const std::string& target,
                                                   const std::string& sql) {
  if (target == "duckdb")
    return duckdb_query(w.file("wh.duckdb"), sql);
  if (target == "sqlite")
    return sqlite_query(w.file("wh.sqlite"), sql);
  return pg_query(pg_dsn(), sql);
}

/// The SQL name of the target orders table in each engine.
std::string orders_sql(const std::string& target, const std::string& pg_suffix) {
  if (target == "sqlite")
    return "\"staging__us_west__shop__orders\"";
  if (target == "postgres")
    return "\"st_" + pg_suffix + "_shop\".\"orders\"";
  return "\"staging__us_west__shop\".\"orders\"";
}

const nlohmann::json* action_for(const nlohmann::json& run, const std::string& action) {
  for (const auto& a : run["drift"]["actions_taken"])
    if (a["action"] == action)
      return &a;
  return nullptr;
}

}  // namespace

TEST_CASE("a SQLite source replicates into each executed target and evolves with drift") {
  const std::string target = GENERATE(std::string("duckdb"), std::string("sqlite"),
                                      std::string("postgres"));
  INFO("target " << target);
  workdir w;
  const std::string suffix = unique_suffix();
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, target, "", suffix);
  const std::string table = orders_table(target, suffix);
  const std::string sql_name = orders_sql(target, suffix);

  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(first["status"] == "success");
  const auto* t = find_table(first, table);
  REQUIRE(t != nullptr);
  CHECK((*t)["status"] == "copied");
  CHECK((*t)["rows"] == 3);
  CHECK(target_query(w, target, "SELECT count(*) FROM " + sql_name)[0][0] == "3");
  CHECK(target_query(w, target, "SELECT CAST(amount AS VARCHAR(20)) FROM " + sql_name +
                                    " WHERE id = 3")[0][0] == "-3.25");

  SECTION("a new source column is added nullable (add_columns)") {
    sqlite_exec(w.file("shop.db"), "ALTER TABLE orders ADD COLUMN coupon TEXT;"
                                   "UPDATE orders SET coupon = 'X' WHERE id = 1;");
    auto run = flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 0);
    const auto* a = action_for(run, "add_columns");
    REQUIRE(a != nullptr);
    CHECK((*a)["table"] == table);
    CHECK((*a)["reason"].get<std::string>().find("coupon") != std::string::npos);
    CHECK(run["drift"]["tables_drifted"] == 0);
    CHECK(target_query(w, target, "SELECT coupon FROM " + sql_name + " WHERE id = 1")[0][0] == "X");
  }

  SECTION("a safe widening alters the column in place or rebuilds where the engine cannot") {
    sqlite_exec(w.file("shop.db"),
                "CREATE TABLE o2 (id INTEGER PRIMARY KEY, status TEXT, amount DECIMAL(14,2), qty INTEGER,"
                " note TEXT, updated_at TIMESTAMP); INSERT INTO o2 SELECT * FROM orders;"
                "DROP TABLE orders; ALTER TABLE o2 RENAME TO orders;");
    auto run = flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 0);
    CHECK(run["drift"]["tables_drifted"] == 1);
    // SQLite rebuilds the table for it, rows kept: the same action.
    const auto* a = action_for(run, "alter_column_types");
    REQUIRE(a != nullptr);
    CHECK((*a)["reason"].get<std::string>().find("column 'amount' changed") != std::string::npos);
    CHECK(target_query(w, target, "SELECT count(*) FROM " + sql_name)[0][0] == "3");
  }

  SECTION("an unsafe change drops and recreates the table with a full refresh") {
    sqlite_exec(w.file("shop.db"),
                "CREATE TABLE o2 (id INTEGER PRIMARY KEY, status INTEGER, amount DECIMAL(10,2), qty INTEGER,"
                " note TEXT, updated_at TIMESTAMP);"
                "INSERT INTO o2 SELECT id, id * 10, amount, qty, note, updated_at FROM orders;"
                "DROP TABLE orders; ALTER TABLE o2 RENAME TO orders;");
    auto run = flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 0);
    const auto* a = action_for(run, "drop_and_recreate");
    REQUIRE(a != nullptr);
    CHECK((*a)["reason"].get<std::string>().find("column 'status' changed") != std::string::npos);
    CHECK(target_query(w, target, "SELECT status FROM " + sql_name + " WHERE id = 2")[0][0] == "20");
  }

  SECTION("columns removed from the source are ignored and kept in the target") {
    sqlite_exec(w.file("shop.db"), "ALTER TABLE orders DROP COLUMN note;"
                                   "INSERT INTO orders VALUES (4, 'new', 1.00, 1, '2025-01-02 00:00:00');");
    auto run = flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 0);
    CHECK(run["drift"]["actions_taken"].empty());
    CHECK(target_query(w, target, "SELECT count(*) FROM " + sql_name)[0][0] == "4");
    CHECK(target_query(w, target, "SELECT note FROM " + sql_name + " WHERE id = 4")[0][0] == "NULL");
  }
  if (target == "postgres")
    pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS \"st_" + suffix + "_shop\" CASCADE");
}

TEST_CASE("prune_unchanged skips unchanged tables and --no-prune copies them") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb", "prune_unchanged = true\n");
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  auto second = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK((*find_table(second, "staging__us_west__shop.orders"))["status"] == "pruned");
  CHECK(second["drift"]["tables_checked"] == 0);
  // The plan counts what a run would prune, in its JSON and its headline.
  const auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(plan["pruned"] == second["tables"].size());
  CHECK(plan["to_load"] == 0);
  CHECK_THAT(run_flotilla(w, {"plan"}).out,
             Catch::Contains(fmt::format("0 to load, {} pruned", second["tables"].size())));
  auto forced = flotilla_json(w, {"run", "--no-prune"}, &rc);
  CHECK((*find_table(forced, "staging__us_west__shop.orders"))["status"] == "copied");
  CHECK((*find_table(forced, "staging__us_west__shop.orders"))["not_pruned"] ==
        "--no-prune: every table is copied");
  sqlite_exec(w.file("shop.db"), "INSERT INTO orders VALUES (9, 'x', 1, 1, NULL, '2026-01-01 00:00:00')");
  auto changed = flotilla_json(w, {"run"}, &rc);
  CHECK((*find_table(changed, "staging__us_west__shop.orders"))["status"] == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM staging__us_west__shop.orders")[0][0] == "4");
}

TEST_CASE("a warehouse file gone since the last run is filled again: nothing is pruned into it") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb", "prune_unchanged = true\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  std::filesystem::rename(w.file("wh.duckdb"), w.file("moved.duckdb"));
  auto again = flotilla_json(w, {"run"}, &rc);
  INFO(again.dump(2));
  CHECK(rc == 0);
  const auto& t = *find_table(again, "staging__us_west__shop.orders");
  CHECK(t["status"] == "copied");
  CHECK_THAT(t["not_pruned"].get<std::string>(), Catch::Contains("is missing"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM staging__us_west__shop.orders")[0][0] ==
        duckdb_query(w.file("moved.duckdb"), "SELECT count(*) FROM staging__us_west__shop.orders")[0][0]);
}

TEST_CASE("a table dropped in a DuckDB file another process holds, its drop still in the "
          "write-ahead log, is not pruned") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb", "prune_unchanged = true\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  REQUIRE((*find_table(flotilla_json(w, {"run"}, &rc), "staging__us_west__shop.orders"))["status"] ==
          "pruned");
  // Another process drops the table and keeps the file open: the drop is in wh.duckdb.wal,
  // the file itself unchanged.
  duckdb_database db = nullptr;
  duckdb_connection con = nullptr;
  REQUIRE(duckdb_open(w.file("wh.duckdb").c_str(), &db) == DuckDBSuccess);
  REQUIRE(duckdb_connect(db, &con) == DuckDBSuccess);
  REQUIRE(duckdb_query(con, "DROP TABLE staging__us_west__shop.orders", nullptr) == DuckDBSuccess);
  REQUIRE(std::filesystem::exists(w.file("wh.duckdb.wal")));
  auto held = flotilla_json(w, {"run"}, &rc);
  INFO(held.dump(2));
  CHECK(rc == 1);  // it cannot load the table while the file is held, and says so
  const auto& t = *find_table(held, "staging__us_west__shop.orders");
  CHECK(t["status"] == "failed");
  CHECK_THAT(t["not_pruned"].get<std::string>(), Catch::Contains("changed since a run last left it"));
  duckdb_disconnect(&con);
  duckdb_close(&db);
  // Released: copied again, then pruned.
  auto again = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK((*find_table(again, "staging__us_west__shop.orders"))["status"] == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM staging__us_west__shop.orders")[0][0] == "3");
  CHECK((*find_table(flotilla_json(w, {"run"}, &rc), "staging__us_west__shop.orders"))["status"] ==
        "pruned");
}

TEST_CASE("run's text output keeps an engine's error on one line, its line breaks as '; '") {
  workdir w;
  const std::string schema = "lines_" + unique_suffix();
  sqlite_exec(w.file("src.db"), "CREATE TABLE m (id INTEGER, v TEXT);"
                                "INSERT INTO m VALUES (1, 'ab'), (2, 'abcdefgh');");
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"\n"
                      "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                      "[sources.s.tables.m]\ncolumns = {{ v = \"varchar(5)\" }}\n",
                      pg_dsn(), schema));
  auto r = run_flotilla(w, {"run"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  // PostgreSQL's "ERROR: ...\nCONTEXT: COPY ...": one line, nothing escaped.
  CHECK(r.out.find("value too long for type character varying(5); CONTEXT:") !=
        std::string::npos);
  CHECK(r.out.find("\\x0a") == std::string::npos);
  pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
}

TEST_CASE("a date PostgreSQL cannot hold is refused with the text pin that loads it") {
  workdir w;
  const std::string schema = "dr_" + unique_suffix();
  duckdb_exec(w.file("src.duckdb"), "CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE);"
                                    "INSERT INTO t VALUES (1, DATE '2020-01-01'), "
                                    "(2, DATE '5881580-07-10')");
  const std::string base =
      fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"\n"
                  "[sources.s]\nadapter = \"duckdb\"\npath = \"src.duckdb\"\n",
                  pg_dsn(), schema);
  w.write("flotilla.toml", base);
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* t = find_table(run, schema + ".t");
  REQUIRE(t != nullptr);
  CHECK_THAT((*t)["error"].get<std::string>(),
             Catch::Contains("date out of range") && Catch::Contains("columns = { d = \"text\" }") &&
                 !Catch::Contains("flotilla retry"));
  w.write("flotilla.toml", base + "[sources.s.tables.t]\ncolumns = { d = \"text\" }\n");
  CHECK(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  CHECK(pg_query(pg_dsn(), "SELECT d FROM \"" + schema + "\".t ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"2020-01-01"}, {"5881580-07-10"}});
  pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
}

TEST_CASE("a target table dropped since its last copy is copied again, not pruned") {
  const std::string target = GENERATE(std::string("duckdb"), std::string("sqlite"),
                                      std::string("postgres"));
  INFO("target " << target);
  workdir w;
  const std::string suffix = unique_suffix();
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, target, "prune_unchanged = true\n", suffix);
  const std::string table = orders_table(target, suffix);
  const std::string sql_name = orders_sql(target, suffix);
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  const std::string rows = target_query(w, target, "SELECT count(*) FROM " + sql_name)[0][0];
  // Unchanged on both sides: pruned (a DuckDB file as the last run left it is not even
  // opened to ask).
  auto unchanged = flotilla_json(w, {"run"}, &rc);
  CHECK((*find_table(unchanged, table))["status"] == "pruned");

  if (target == "duckdb")
    duckdb_query(w.file("wh.duckdb"), "DROP TABLE " + sql_name);
  else if (target == "sqlite")
    sqlite_exec(w.file("wh.sqlite"), "DROP TABLE " + sql_name);
  else
    pg_exec(pg_dsn(), "DROP TABLE " + sql_name);
  auto again = flotilla_json(w, {"run"}, &rc);
  INFO(again.dump(2));
  CHECK(rc == 0);
  const auto& t = *find_table(again, table);
  CHECK(t["status"] == "copied");
  CHECK_THAT(t["not_pruned"].get<std::string>(), Catch::Contains("is missing"));
  CHECK(target_query(w, target, "SELECT count(*) FROM " + sql_name)[0][0] == rows);
  // And pruned again after.
  CHECK((*find_table(flotilla_json(w, {"run"}, &rc), table))["status"] == "pruned");
  if (target == "postgres")
    pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS \"st_" + suffix + "_shop\" CASCADE");
}

TEST_CASE("an incremental table moved to a target whose file does not exist yet reads every "
          "row, saying so, not that its rows were lost; a target file removed says it is "
          "missing") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE ev (id INTEGER PRIMARY KEY, ts TIMESTAMP);"
                                "INSERT INTO ev VALUES (1, '2025-01-01'), (2, '2025-01-02');");
  const auto config = [&](const std::string& to) {
    w.write("flotilla.toml", "[targets.a]\ndialect = \"duckdb\"\npath = \"a.duckdb\"\n"
                             "[targets.b]\ndialect = \"sqlite\"\npath = \"b.sqlite\"\n"
                             "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                             "prune_unchanged = true\ntarget = \"" +
                                 to + "\"\n[sources.s.tables.ev]\ncursor_column = \"ts\"\n");
  };
  config("a");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  config("b");
  auto moved = run_flotilla(w, {"run"});
  CHECK(moved.exit_code == 0);
  CHECK_THAT(moved.out, Catch::Contains("b.sqlite does not exist (removed, or the table's "
                                        "target changed since its last copy)") &&
                            !Catch::Contains("is missing"));
  CHECK(sqlite_query(w.file("b.sqlite"), "SELECT count(*) FROM s__ev")[0][0] == "2");
  std::filesystem::remove(w.file("b.sqlite"));
  auto removed = run_flotilla(w, {"run"});
  CHECK(removed.exit_code == 0);
  CHECK_THAT(removed.out, Catch::Contains("b.sqlite is missing, and with it the rows loaded"));
  CHECK(sqlite_query(w.file("b.sqlite"), "SELECT count(*) FROM s__ev")[0][0] == "2");
}

TEST_CASE("a SQLite source rewritten in place with its size and mtime kept is not pruned") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT); "
                              "INSERT INTO orders VALUES (1, 'aaaa')");
  sqlite_exec(w.file("b.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT); "
                              "INSERT INTO orders VALUES (1, 'bbbb')");
  std::filesystem::copy_file(w.file("a.db"), w.file("shop.db"));
  write_config(w, "duckdb", "prune_unchanged = true\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  // The same size, change counter and (set back) mtime: only the inode's ctime tells.
  const auto mtime = std::filesystem::last_write_time(w.file("shop.db"));
  {
    std::ifstream in(w.file("b.db"), std::ios::binary);
    std::ofstream out(w.file("shop.db"), std::ios::binary | std::ios::in);
    out << in.rdbuf();
  }
  std::filesystem::last_write_time(w.file("shop.db"), mtime);
  auto again = flotilla_json(w, {"run"}, &rc);
  INFO(again.dump(2));
  CHECK((*find_table(again, "staging__us_west__shop.orders"))["status"] == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT note FROM staging__us_west__shop.orders")[0][0] ==
        "bbbb");
}

TEST_CASE("run and plan list tables in catalog order, however the copies finish") {
  workdir w;
  // Tables of very different sizes, so copies finish out of order; t07 is the largest.
  std::string sql;
  for (int i = 0; i < 24; ++i) {
    auto name = fmt::format("t{:02}", i);
    sql += fmt::format("CREATE TABLE {} (id INTEGER PRIMARY KEY, v TEXT);", name);
    int rows = i == 7 ? 20000 : (i % 5) * 50 + 1;
    sql += fmt::format(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < {}) "
        "INSERT INTO {} SELECT x, 'row ' || x FROM n;",
        rows, name);
  }
  sqlite_exec(w.file("shop.db"), sql);
  write_config(w, "duckdb", "prune_unchanged = true\n");
  auto names = [](const nlohmann::json& report) {
    std::vector<std::string> out;
    for (const auto& t : report["tables"])
      out.push_back(t["source_table"].get<std::string>());
    return out;
  };
  std::vector<std::string> expected;
  for (int i = 0; i < 24; ++i)
    expected.push_back(fmt::format("t{:02}", i));
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  CHECK(names(first) == expected);
  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  CHECK(names(plan) == expected);
  // A second run: every table unchanged and pruned, in the same order.
  auto pruned = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(names(pruned) == expected);
  CHECK(pruned["tables"][7]["status"] == "pruned");
  auto forced = flotilla_json(w, {"run", "--no-prune"}, &rc);
  CHECK(rc == 0);
  CHECK(names(forced) == expected);
  auto text = run_flotilla(w, {"plan"}).out;
  CHECK(text.find("t06") < text.find("t07"));
  CHECK(text.find("t07") < text.find("t08"));
}

TEST_CASE("an incremental table with a unique key never duplicates rows on rerun") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb",
               "\n[sources.shop.tables.orders]\ncursor_column = \"updated_at\"\nunique_key = [\"id\"]\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("shop.db"),
              "UPDATE orders SET status = 'refunded', updated_at = '2025-02-01 00:00:00' WHERE id = 2;"
              "INSERT INTO orders VALUES (4, 'new', 4.00, 4, 'd', '2025-02-02 00:00:00');");
  auto second = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  // The two changed rows, and the row at the first run's watermark, merged again.
  CHECK((*find_table(second, "staging__us_west__shop.orders"))["rows"] == 3);
  auto third = flotilla_json(w, {"run"}, &rc);
  // The row at the watermark is read and merged again: nothing new, nothing doubled.
  CHECK((*find_table(third, "staging__us_west__shop.orders"))["rows"] == 1);
  auto rows = duckdb_query(w.file("wh.duckdb"),
                           "SELECT id, status FROM staging__us_west__shop.orders ORDER BY id");
  REQUIRE(rows.size() == 4);
  CHECK(rows[1][1] == "refunded");
  // A row written after the last run with the watermark's own cursor value arrives.
  sqlite_exec(w.file("shop.db"),
              "INSERT INTO orders VALUES (5, 'late', 5.00, 5, 'e', '2025-02-02 00:00:00');");
  flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT count(*), count(DISTINCT id), max(id) FROM "
                     "staging__us_west__shop.orders") ==
        std::vector<std::vector<std::string>>{{"5", "5", "5"}});
}

TEST_CASE("rows at the watermark with a NULL in the merge key are not inserted again") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  sqlite_exec(w.file("shop.db"), "CREATE TABLE codes (id INTEGER PRIMARY KEY, code TEXT, ts INT);"
                                 "INSERT INTO codes VALUES (1, 'A', 1), (2, NULL, 2);");
  write_config(w, "sqlite",
               "\n[sources.shop.tables.codes]\ncursor_column = \"ts\"\nunique_key = [\"CODE\"]\n");
  int rc = -1;
  for (int run = 0; run < 3; ++run) {
    flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 0);
  }
  auto rows = sqlite_query(w.file("wh.sqlite"),
                           "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  REQUIRE(rows[0][0] != "0");
  auto names = sqlite_query(w.file("wh.sqlite"), "SELECT name FROM sqlite_master WHERE type = "
                                                 "'table' AND name LIKE '%codes'");
  REQUIRE(names.size() == 1);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM \"" + names[0][0] + "\"")[0][0] ==
        "2");
}

TEST_CASE("every row read again (a new cursor_column) leaves each NULL-key row once, on every "
          "target") {
  // The merge of a full read matched no live row for a NULL key: each such read added
  // another copy of every row with a NULL in its unique_key.
  for (const std::string target : {"duckdb", "sqlite", "postgres"}) {
    DYNAMIC_SECTION(target) {
      workdir w;
      const std::string suffix = unique_suffix();
      sqlite_exec(w.file("shop.db"), k_orders_sql);
      sqlite_exec(w.file("shop.db"),
                  "CREATE TABLE codes (id INTEGER PRIMARY KEY, code TEXT, ts INT, seq INT);"
                  "INSERT INTO codes VALUES (1, 'A', 1, 1), (2, NULL, 2, 2), (3, NULL, 3, 3);");
      const std::string table = target == "sqlite"     ? "staging__us_west__shop__codes"
                                : target == "postgres" ? "st_" + suffix + "_shop.codes"
                                                       : "staging__us_west__shop.codes";
      int rc = -1;
      for (const char* cursor : {"ts", "seq", "TS"}) {
        INFO(cursor);
        write_config(w, target,
                     fmt::format("include = [\"codes\"]\n[sources.shop.tables.codes]\n"
                                 "cursor_column = \"{}\"\nunique_key = [\"code\"]\n",
                                 cursor),
                     suffix);
        flotilla_json(w, {"run"}, &rc);
        CHECK(rc == 0);
        const std::string sql = target == "sqlite" ? "\"" + table + "\"" : table;
        CHECK(target_query(w, target,
                           "SELECT count(*), count(DISTINCT id), sum(id) FROM " + sql) ==
              std::vector<std::vector<std::string>>{{"3", "3", "6"}});
      }
      if (target == "postgres")
        pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS st_" + suffix + "_shop CASCADE");
    }
  }
}

TEST_CASE("an append-only incremental table reads strictly past its watermark") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  sqlite_exec(w.file("shop.db"), "CREATE TABLE log (n INTEGER, what TEXT);"
                                 "INSERT INTO log VALUES (1, 'a'), (2, 'b');");
  write_config(w, "duckdb", "\n[sources.shop.tables.log]\ncursor_column = \"n\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("shop.db"), "INSERT INTO log VALUES (3, 'c');");
  auto second = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK((*find_table(second, "staging__us_west__shop.log"))["rows"] == 1);
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT string_agg(what, ',' ORDER BY n) FROM staging__us_west__shop.log") ==
        std::vector<std::vector<std::string>>{{"a,b,c"}});
}

TEST_CASE("a first load keeps one row per unique_key, the last in cursor order") {
  // A CSV has no key: the rows repeat id 1, and a later run sees it once more.
  for (const std::string target : {"duckdb", "sqlite", "postgres"}) {
    INFO(target);
    workdir w;
    w.write("t.csv", "id,v,updated\n1,a,1\n2,b,2\n1,c,3\n");
    const std::string schema = "uk_" + unique_suffix();
    const std::string where =
        target == "postgres" ? fmt::format("dsn = \"{}\"\nschema = \"{}\"", pg_dsn(), schema)
                             : fmt::format("path = \"wh.{}\"", target);
    w.write("flotilla.toml",
            fmt::format("[targets.wh]\ndialect = \"{}\"\n{}\n[sources.f]\nadapter = \"csv\"\n"
                        "path = \"t.csv\"\ntarget = \"wh\"\n[sources.f.tables.t]\n"
                        "cursor_column = \"updated\"\nunique_key = [\"id\"]\n",
                        target, where));
    const auto rows_of = [&] {
      const std::string sql = "SELECT id, v FROM " +
                              (target == "postgres" ? schema + ".t"
                               : target == "duckdb" ? std::string("f.t") : std::string("f__t")) +
                              " ORDER BY id";
      if (target == "duckdb")
        return duckdb_query(w.file("wh.duckdb"), sql);
      if (target == "sqlite")
        return sqlite_query(w.file("wh.sqlite"), sql);
      return pg_query(pg_dsn(), sql);
    };
    CHECK_THAT(run_flotilla(w, {"plan"}).out, Catch::Contains("create table, merge"));
    int rc = -1;
    auto first = flotilla_json(w, {"run"}, &rc);
    INFO(first.dump());
    CHECK(rc == 0);
    CHECK(rows_of() == std::vector<std::vector<std::string>>{{"1", "c"}, {"2", "b"}});
    w.write("t.csv", "id,v,updated\n1,a,1\n2,b,2\n1,c,3\n2,d,4\n");
    flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 0);
    CHECK(rows_of() == std::vector<std::vector<std::string>>{{"1", "c"}, {"2", "d"}});
    if (target == "postgres")
      pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", schema));
  }
}

TEST_CASE("a unique_key other than the source's key is the only key rows merge on") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE c (id INTEGER PRIMARY KEY, code TEXT NOT NULL "
                                "UNIQUE, v TEXT, u INT);"
                                "INSERT INTO c VALUES (1, 'A', 'x', 1), (2, 'B', 'y', 2);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.s.tables.c]\ncursor_column = \"u\"\nunique_key = [\"code\"]\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // Row 1 comes again under another code: a new row of the key the rows merge on.
  sqlite_exec(w.file("src.db"), "UPDATE c SET code = 'A2', v = 'x2', u = 3 WHERE id = 1;"
                                "INSERT INTO c VALUES (3, 'C', 'z', 4);");
  auto second = flotilla_json(w, {"run"}, &rc);
  INFO(second.dump());
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT code, v FROM s.c ORDER BY code") ==
        std::vector<std::vector<std::string>>{{"A", "x"}, {"A2", "x2"}, {"B", "y"}, {"C", "z"}});
}

TEST_CASE("a unique_key changed or set since the rows were loaded copies the table anew, on "
          "every target") {
  // The target table of a unique_key has no primary key, so the change went unseen: a
  // wider key never read the rows the old one had merged away (lost), a key set on an
  // appended table kept every duplicate the appends had brought.
  for (const std::string target : {"duckdb", "sqlite", "postgres"}) {
    INFO(target);
    workdir w;
    sqlite_exec(w.file("src.db"),
                "CREATE TABLE lines (id INTEGER, line INTEGER, ts INTEGER, qty INTEGER);"
                "INSERT INTO lines VALUES (1, 1, 1, 10), (1, 2, 2, 20), (2, 1, 3, 30);");
    const std::string schema = "uk_" + unique_suffix();
    const std::string where =
        target == "postgres" ? fmt::format("dsn = \"{}\"\nschema = \"{}\"", pg_dsn(), schema)
                             : fmt::format("path = \"wh.{}\"", target);
    const auto config = [&](const std::string& key) {
      w.write("flotilla.toml",
              fmt::format("[targets.wh]\ndialect = \"{}\"\n{}\n[sources.s]\nadapter = \"sqlite\"\n"
                          "path = \"src.db\"\n[sources.s.tables.lines]\ncursor_column = \"ts\"\n{}\n",
                          target, where, key));
    };
    const auto rows_of = [&] {
      const std::string sql = "SELECT id, line, qty FROM " +
                              (target == "postgres" ? schema + ".lines"
                               : target == "duckdb" ? std::string("s.lines") : std::string("s__lines")) +
                              " ORDER BY id, line, qty";
      if (target == "duckdb")
        return duckdb_query(w.file("wh.duckdb"), sql);
      if (target == "sqlite")
        return sqlite_query(w.file("wh.sqlite"), sql);
      return pg_query(pg_dsn(), sql);
    };
    const std::vector<std::vector<std::string>> all{{"1", "1", "10"}, {"1", "2", "20"}, {"2", "1", "30"}};
    config("unique_key = [\"id\"]");
    int rc = -1;
    flotilla_json(w, {"run"}, &rc);
    REQUIRE(rc == 0);
    CHECK(rows_of() == std::vector<std::vector<std::string>>{{"1", "2", "20"}, {"2", "1", "30"}});
    // Wider: every row again.
    config("unique_key = [\"id\", \"line\"]");
    CHECK_THAT(run_flotilla(w, {"plan"}).out, Catch::Contains("the table's key changed (id) -> (id, line)"));
    auto widened = flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
    INFO(widened.dump());
    CHECK(rc == 0);
    CHECK(rows_of() == all);
    // Appended (no key), then keyed: one row per key.
    config("");
    flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
    CHECK(rc == 0);
    sqlite_exec(w.file("src.db"), "UPDATE lines SET ts = 4, qty = 11 WHERE id = 1 AND line = 1");
    flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 0);
    CHECK(rows_of().size() == 4);  // appended: the old version of (1, 1) stays
    config("unique_key = [\"id\", \"line\"]");
    flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
    CHECK(rc == 0);
    CHECK(rows_of() == std::vector<std::vector<std::string>>{{"1", "1", "11"}, {"1", "2", "20"}, {"2", "1", "30"}});
    // A key the source's rows repeat: the copy anew keeps one row per key, the last in
    // cursor order, as a first load under that key does (it kept every row).
    config("unique_key = [\"id\"]");
    flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
    CHECK(rc == 0);
    CHECK(rows_of() == std::vector<std::vector<std::string>>{{"1", "1", "11"}, {"2", "1", "30"}});
    if (target == "postgres")
      pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", schema));
  }
}

TEST_CASE("a changed cursor_column starts from its own watermark, not the old column's") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE e (id INTEGER PRIMARY KEY, seq INT, ver INT);"
                                "INSERT INTO e VALUES (1, 1000, 1), (2, 1001, 2);");
  const auto config = [&](const char* cursor) {
    w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"sqlite\"\npath = "
                                         "\"wh.sqlite\"\n[sources.s]\nadapter = \"sqlite\"\n"
                                         "path = \"src.db\"\n[sources.s.tables.e]\n"
                                         "cursor_column = \"{}\"\n",
                                         cursor));
  };
  config("seq");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  config("ver");
  sqlite_exec(w.file("src.db"), "INSERT INTO e VALUES (3, 1002, 3), (4, 1003, 4);");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*), max(ver) FROM s__e") ==
        std::vector<std::vector<std::string>>{{"4", "4"}});
}

TEST_CASE("a full refresh with a unique_key keeps one row per key, the last read, and drops "
          "the rest") {
  // The key was ignored without a cursor_column: every version of a key loaded.
  workdir w;
  std::filesystem::create_directories(w.path() / "data");
  w.write("data/items.csv", "id,name\n1,a\n1,a2\n2,b\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"raw\"\n[sources.files]\nadapter = \"csv\"\npath = "
                           "\"data\"\n[sources.files.tables.items]\nunique_key = [\"id\"]\n");
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(id || name, ',' ORDER BY id) FROM "
                                          "raw.items") ==
        std::vector<std::vector<std::string>>{{"1a2,2b"}});
  // Said, with the numbers: 3 rows read, 2 kept.
  CHECK_THAT(first["tables"][0]["warnings"].dump(),
             Catch::Contains("1 of the 3 rows read repeated a unique_key (id)") &&
                 Catch::Contains("the table holds 2 rows"));
  // The next full refresh replaces the rows: a key gone from the source goes.
  w.write("data/items.csv", "id,name\n1,a3\n3,c\n3,c2\n");
  auto second = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  CHECK_THAT(second["tables"][0]["warnings"].dump(), Catch::Contains("1 of the 3 rows read"));
  // Without repeats, nothing is said.
  w.write("data/items.csv", "id,name\n1,a4\n3,c3\n");
  auto third = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  CHECK(third["tables"][0]["warnings"].dump().find("repeated a unique_key") == std::string::npos);
  w.write("data/items.csv", "id,name\n1,a3\n3,c\n3,c2\n");
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(id || name, ',' ORDER BY id) FROM "
                                          "raw.items") ==
        std::vector<std::vector<std::string>>{{"1a3,3c2"}});
}

TEST_CASE("a table with a unique_key copied anew for an unsafe retype loads, one row per key") {
  // Its full refresh merges (one row per key) into the live table, which lacked the new
  // shape: "does not have a column", every run.
  for (const std::string target : {"duckdb", "sqlite"}) {
    INFO(target);
    workdir w;
    sqlite_exec(w.file("s.db"), "CREATE TABLE t (id INT, v TEXT); "
                                "INSERT INTO t VALUES (1, 'a'), (1, 'b'), (2, 'c');");
    w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"{}\"\npath = \"wh.{}\"\n"
                                         "[sources.s]\nadapter = \"sqlite\"\npath = \"s.db\"\n"
                                         "[sources.s.tables.t]\nunique_key = [\"id\"]\n",
                                         target, target));
    int rc = -1;
    flotilla_json(w, {"run"}, &rc);
    REQUIRE(rc == 0);
    sqlite_exec(w.file("s.db"), "CREATE TABLE t2 (id INT, v INT, z TEXT); INSERT INTO t2 VALUES "
                                "(1, 5, 'x'), (1, 6, 'y'), (3, 7, 'z'); DROP TABLE t; ALTER TABLE "
                                "t2 RENAME TO t;");
    auto j = flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
    INFO(j.dump());
    CHECK(rc == 0);
    CHECK(j["drift"]["actions_taken"][0]["action"] == "drop_and_recreate");
    const std::string sql = target == "duckdb" ? "SELECT id, v, z FROM s.t ORDER BY id"
                                               : "SELECT id, v, z FROM s__t ORDER BY id";
    const auto rows = target == "duckdb" ? duckdb_query(w.file("wh.duckdb"), sql)
                                         : sqlite_query(w.file("wh.sqlite"), sql);
    CHECK(rows == std::vector<std::vector<std::string>>{{"1", "6", "y"}, {"3", "7", "z"}});
  }
}

TEST_CASE("rows whose unique_key holds a NULL are each kept: a NULL is no key") {
  workdir w;
  std::filesystem::create_directories(w.path() / "data");
  w.write("data/items.csv", "id,name\n1,a\n1,a2\n,n1\n,n2\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "schema = \"raw\"\n[sources.files]\nadapter = \"csv\"\npath = "
                           "\"data\"\n[sources.files.tables.items]\nunique_key = [\"id\"]\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(name, ',') FROM (SELECT name "
                                          "FROM raw__items ORDER BY name)") ==
        std::vector<std::vector<std::string>>{{"a2,n1,n2"}});
}

TEST_CASE("a SQLite NUMERIC column pinned as double reads as stored; 1e20 lands in SQLite") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, amt NUMERIC, big NUMERIC);"
                                "INSERT INTO t VALUES (1, 3.14159265358979, 1e20), (2, 12.34, 5);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.s.tables.t]\ncolumns = { amt = \"double\" }\n");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump());
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT amt, big = 1e20 FROM s__t WHERE id = 1") ==
        std::vector<std::vector<std::string>>{{"3.14159265358979", "1"}});
}

TEST_CASE("a cursor column retyped int -> text reads every row again, not past the old watermark") {
  // As text, '1000' sorts before the watermark '500': rows past it were never read.
  workdir w;
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"raw\"\n[sources.s]\nadapter = \"sqlite\"\npath = "
                           "\"src.db\"\n[sources.s.tables.orders]\ncursor_column = \"seq\"\n");
  sqlite_exec(w.file("src.db"), "CREATE TABLE orders (id INT PRIMARY KEY, seq INT);"
                                "INSERT INTO orders VALUES (1, 100), (2, 500);");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE o2 (id INT PRIMARY KEY, seq TEXT); INSERT INTO o2 SELECT * FROM "
              "orders; DROP TABLE orders; ALTER TABLE o2 RENAME TO orders;"
              "INSERT INTO orders VALUES (3, '1000');");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  const auto* t = find_table(run, "raw.orders");
  REQUIRE(t != nullptr);
  CHECK((*t)["warnings"].dump().find("changed type since the watermark 500") != std::string::npos);
  // From now on the watermark is text's ('500', the largest as text): later rows past it
  // as text arrive, and the warning is not repeated.
  sqlite_exec(w.file("src.db"), "INSERT INTO orders VALUES (4, '700'), (5, '9000');");
  run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(!find_table(run, "raw.orders")->contains("warnings"));
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT count(*), count(DISTINCT id), string_agg(seq, ',' ORDER BY id) FROM "
                     "raw.orders") == std::vector<std::vector<std::string>>{
                                          {"5", "5", "100,500,1000,700,9000"}});
}

TEST_CASE("SQLite cursors compare as SQLite stores them: untyped, 'T' timestamps, offsets") {
  // Keyless tables append: a row read twice would be a duplicate, one skipped is lost.
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE untyped (id, v, u);"
              "INSERT INTO untyped VALUES (1, 'a', 1), (2, 'b', 2);"
              "CREATE TABLE iso (id INT, ts TIMESTAMP);"
              "INSERT INTO iso VALUES (1, '2024-01-01T10:00:00'), (2, '2024-01-01T11:00:00');"
              "CREATE TABLE zoned (id INT, ts TIMESTAMPTZ);"
              "INSERT INTO zoned VALUES (1, '2024-01-01 10:00:00-05:00');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.s.tables.untyped]\ncursor_column = \"u\"\n"
                           "[sources.s.tables.iso]\ncursor_column = \"ts\"\n"
                           "[sources.s.tables.zoned]\ncursor_column = \"ts\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"), "INSERT INTO untyped VALUES (3, 'c', 3), (4, 'd', 10);"
                                "INSERT INTO iso VALUES (3, '2024-01-01T12:00:00');"
                                "INSERT INTO zoned VALUES (2, '2024-01-01 11:00:00-05:00');");
  for (int run = 0; run < 2; ++run) {
    auto j = flotilla_json(w, {"run", "--no-prune"}, &rc);
    INFO(j.dump());
    CHECK(rc == 0);
  }
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT (SELECT string_agg(id::VARCHAR, ',' ORDER BY "
                                          "id) FROM s.untyped), (SELECT string_agg(id::VARCHAR, "
                                          "',' ORDER BY id) FROM s.iso), (SELECT "
                                          "string_agg(id::VARCHAR, ',' ORDER BY id) FROM "
                                          "s.zoned)") ==
        std::vector<std::vector<std::string>>{{"1,2,3,4", "1,2,3", "1,2"}});
}

/// The UPDATE an FLT-R002 message about a SQLite cursor column advises, as written.
std::string advised_update(const std::string& message) {
  const auto from = message.find("(UPDATE ");
  REQUIRE(from != std::string::npos);
  auto to = message.find("), then drop", from);
  if (to == std::string::npos)
    to = message.find("), or use", from);
  REQUIRE(to != std::string::npos);
  return message.substr(from + 1, to - from - 1);
}

TEST_CASE("a SQLite timestamp cursor mixing forms fails its table instead of skipping rows") {
  // ' ' sorts before 'T', and every julian day before every unix time: a later row in the
  // other form sorted below the watermark and was never copied, the run a success.
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE t_text (id INTEGER PRIMARY KEY, ts DATETIME);"
              "INSERT INTO t_text VALUES (1, '2024-01-02T10:00:00');"
              "CREATE TABLE t_num (id INTEGER PRIMARY KEY, ts DATETIME);"
              "INSERT INTO t_num VALUES (1, 1704189600);"
              "CREATE TABLE t_zone (id INTEGER PRIMARY KEY, ts TIMESTAMPTZ);"
              "INSERT INTO t_zone VALUES (1, '2024-01-01 10:00:00+02:00');"
              // Declared TEXT, or not at all: the same text comparison.
              "CREATE TABLE t_plain (id INTEGER PRIMARY KEY, ts TEXT);"
              "INSERT INTO t_plain VALUES (1, '2024-01-01T11:00:00+00:00');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.s.tables.t_text]\ncursor_column = \"ts\"\n"
                           "[sources.s.tables.t_num]\ncursor_column = \"ts\"\n"
                           "[sources.s.tables.t_zone]\ncursor_column = \"ts\"\n"
                           "[sources.s.tables.t_plain]\ncursor_column = \"ts\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"), "INSERT INTO t_text VALUES (2, '2024-01-02 23:00:00');"
                                "INSERT INTO t_num VALUES (2, julianday('2024-06-01'));"
                                // 09:30 UTC, after the watermark's 08:00 UTC, sorts below it.
                                "INSERT INTO t_zone VALUES (2, '2024-01-01 09:30:00+00:00');"
                                // 12:30 UTC, after the watermark's 11:00 UTC.
                                "INSERT INTO t_plain VALUES (2, '2024-01-01T09:30:00-03:00');");
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump());
  CHECK(rc == 1);
  const auto* text = find_table(j, "s.t_text");
  REQUIRE(text != nullptr);
  CHECK((*text)["status"] == "failed");
  CHECK_THAT((*text)["error"].get<std::string>(),
             Catch::Contains("with a 'T' ('2024-01-02T10:00:00') and with a space") &&
                 Catch::Contains("substr(\"ts\", 1, 10) || 'T'"));
  const auto* num = find_table(j, "s.t_num");
  REQUIRE(num != nullptr);
  CHECK((*num)["status"] == "failed");
  CHECK_THAT((*num)["error"].get<std::string>(), Catch::Contains("julian days"));
  const auto* zone = find_table(j, "s.t_zone");
  REQUIRE(zone != nullptr);
  CHECK((*zone)["status"] == "failed");
  CHECK_THAT((*zone)["error"].get<std::string>(),
             Catch::Contains("different UTC offsets ('2024-01-01 09:30:00+00:00', offset "
                             "+00:00, beside the watermark '2024-01-01 10:00:00+02:00')") &&
                 Catch::Contains("'+120 minutes') || '+02:00'"));
  CHECK((*find_table(j, "s.t_plain"))["status"] == "failed");
  CHECK_THAT((*find_table(j, "s.t_plain"))["error"].get<std::string>(),
             Catch::Contains("different UTC offsets ('2024-01-01T09:30:00-03:00'"));
  // Stored at the watermark's offset, by the message's own statement: both rows arrive,
  // once each, with no reload.
  sqlite_exec(w.file("src.db"), advised_update((*zone)["error"]));
  // One form again, the watermark's, as the message says: the row arrives.
  sqlite_exec(w.file("src.db"), "UPDATE t_text SET ts = substr(ts, 1, 10) || 'T' || "
                                "substr(ts, 12) WHERE substr(ts, 11, 1) = ' '");
  j = flotilla_json(w, {"run"}, &rc);
  CHECK((*find_table(j, "s.t_text"))["status"] == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s.t_text")[0][0] == "2");
  CHECK((*find_table(j, "s.t_zone"))["status"] == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), count(DISTINCT id) FROM s.t_zone") ==
        std::vector<std::vector<std::string>>{{"2", "2"}});
}

TEST_CASE("a SQLite text cursor later than its watermark but sorting before it fails; "
          "the advised fix and a reload copy every row") {
  // '.' and the digits sort before 'Z': 10:00:00.5Z sorts below a watermark of
  // 10:00:00Z, and so does 10:00:00.7+00:00 (the same offset spelled otherwise). Both
  // rows were skipped for good, the runs a success.
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE c (id INTEGER PRIMARY KEY, v TEXT, ts TIMESTAMP);"
              "INSERT INTO c VALUES (1, 'first', '2024-01-01 10:00:00Z');"
              "CREATE TABLE u (id INTEGER PRIMARY KEY, ts TIMESTAMP);"
              "INSERT INTO u VALUES (1, '2024-01-01 10:00:00.25Z');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.s.tables.c]\ncursor_column = \"ts\"\n"
                           "[sources.s.tables.u]\ncursor_column = \"ts\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"),
              "INSERT INTO c VALUES (2, 'half a second later', '2024-01-01 10:00:00.5Z');"
              "INSERT INTO c VALUES (3, 'the same offset spelled otherwise', "
              "'2024-01-01 10:00:00.7+00:00');"
              // A fraction and ' UTC' beside a watermark with a fraction and 'Z': offset
              // none before, now the same offset, a later instant sorting below it.
              "INSERT INTO u VALUES (2, '2024-01-01 10:00:00.3 UTC');"
              "INSERT INTO u VALUES (3, '2024-01-01 10:00:00.251Z');");
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump());
  CHECK(rc == 1);
  for (const char* name : {"s.c", "s.u"}) {
    const auto* t = find_table(j, name);
    REQUIRE(t != nullptr);
    CHECK((*t)["status"] == "failed");
    CHECK((*t)["error_code"] == "FLT-R002");
    CHECK_THAT((*t)["error"].get<std::string>(),
               Catch::Contains("but sorting before it as text") &&
                   Catch::Contains("then drop the table in its targets"));
  }
  CHECK_THAT((*find_table(j, "s.c"))["error"].get<std::string>(),
             Catch::Contains("holds '2024-01-01 10:00:00.5Z', later than the watermark "
                             "'2024-01-01 10:00:00Z'"));
  // The advice, followed literally: every value in one form at the source, kept to the
  // microsecond, then the tables dropped in the target.
  sqlite_exec(w.file("src.db"), advised_update((*find_table(j, "s.c"))["error"]));
  sqlite_exec(w.file("src.db"), advised_update((*find_table(j, "s.u"))["error"]));
  CHECK(sqlite_query(w.file("src.db"), "SELECT ts FROM c ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"2024-01-01 10:00:00.000000"},
                                              {"2024-01-01 10:00:00.500000"},
                                              {"2024-01-01 10:00:00.700000"}});
  duckdb_exec(w.file("wh.duckdb"), "DROP TABLE s.c; DROP TABLE s.u");
  j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT id, CAST(ts AS VARCHAR) FROM s.c ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1", "2024-01-01 10:00:00"},
                                              {"2", "2024-01-01 10:00:00.5"},
                                              {"3", "2024-01-01 10:00:00.7"}});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), count(DISTINCT id) FROM s.u") ==
        std::vector<std::vector<std::string>>{{"3", "3"}});
  // Later rows in the one form arrive, each once.
  sqlite_exec(w.file("src.db"), "INSERT INTO c VALUES (4, 'later', '2024-01-01 10:00:00.900000')");
  j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), count(DISTINCT id) FROM s.c") ==
        std::vector<std::vector<std::string>>{{"4", "4"}});
}

TEST_CASE("the fix advised for SQLite cursor offsets keeps fractions and reads ' UTC'") {
  // The fix stored values at the watermark's offset to the second: a fraction was cut at
  // the source, and the row then sorted below the watermark. A ' UTC' value was called
  // "offset none" and the fix, which SQLite's date functions cannot read, set it NULL.
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE b (id INTEGER PRIMARY KEY, ts TIMESTAMP);"
                                "INSERT INTO b VALUES (1, '2024-01-01 10:00:00Z');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.s.tables.b]\ncursor_column = \"ts\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"), "INSERT INTO b VALUES (2, '2024-01-01 10:00:00.5Z');"
                                "INSERT INTO b VALUES (3, '2024-01-01 10:30:00');"
                                "INSERT INTO b VALUES (4, '2024-01-01 11:00:00.9 UTC');");
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump());
  CHECK(rc == 1);
  const std::string why = (*find_table(j, "s__b"))["error"];
  CHECK_THAT(why, Catch::Contains("different UTC offsets ('2024-01-01 10:30:00', offset none") &&
                      Catch::Contains("then drop the table in its targets"));
  sqlite_exec(w.file("src.db"), advised_update(why));
  CHECK(sqlite_query(w.file("src.db"), "SELECT ts FROM b ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"2024-01-01 10:00:00.000000"},
                                              {"2024-01-01 10:00:00.500000"},
                                              {"2024-01-01 10:30:00.000000"},
                                              {"2024-01-01 11:00:00.900000"}});
  sqlite_exec(w.file("wh.sqlite"), "DROP TABLE s__b");
  j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT id, ts FROM s__b ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1", "2024-01-01 10:00:00"},
                                              {"2", "2024-01-01 10:00:00.5"},
                                              {"3", "2024-01-01 10:30:00"},
                                              {"4", "2024-01-01 11:00:00.9"}});
}

TEST_CASE("a dotted file stem or SQLite table name is one name: its section, include and "
          "filter never take another table") {
  // `sales.2024` was split as schema.table: its section also selected `2024.csv` (despite
  // include = []) and failed it with the other file's column pin.
  workdir w;
  std::filesystem::create_directories(w.file("data"));
  w.write("data/sales.2024.csv", "id,amount\n1,10.5\n");
  w.write("data/2024.csv", "id,amount\n1,abc\n");
  w.write("data/other.csv", "id\n1\n");
  sqlite_exec(w.file("s.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, a TEXT);"
                              "INSERT INTO orders VALUES (1, 'plain');"
                              "CREATE TABLE \"x.orders\" (id INTEGER PRIMARY KEY, b TEXT);"
                              "INSERT INTO \"x.orders\" VALUES (1, 'dotted');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.f]\nadapter = \"csv\"\npath = \"data\"\ninclude = []\n"
                           "[sources.f.tables.\"sales.2024\"]\n"
                           "columns = { amount = \"decimal(10,2)\" }\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"s.db\"\ninclude = []\n"
                           "[sources.s.tables.\"x.orders\"]\n");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 0);
  REQUIRE(j["tables"].size() == 2);
  const auto has = [&](const std::string& source, const std::string& table) {
    for (const auto& t : j["tables"])
      if (t["source"] == source && t["source_table"] == table && t["status"] == "copied")
        return true;
    return false;
  };
  CHECK(has("f", "sales.2024"));
  CHECK(has("s", "x.orders"));
  // A table= filter takes the whole name too: `sales.*` is not every file of the source.
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.f]\nadapter = \"csv\"\npath = \"data\"\n"
                           "[sources.f.tables.\"sales.2024\"]\n"
                           "columns = { amount = \"decimal(10,2)\" }\n");
  for (const char* filter : {"table=sales.2024", "table=sales.*"}) {
    INFO(filter);
    auto plan = flotilla_json(w, {"plan", "--filter", filter}, &rc);
    REQUIRE(plan["tables"].size() == 1);
    CHECK(plan["tables"][0]["source_table"] == "sales.2024");
  }
}

TEST_CASE("plan counts the tables of a source it cannot read as a run would fail them") {
  // Plan said 0 failed and listed no table, where the run failed the table.
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.a]\nadapter = \"sqlite\"\npath = \"a.db\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  std::filesystem::rename(w.file("a.db"), w.file("a.moved"));
  const auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump(2));
  CHECK(rc == 1);
  CHECK(plan["failed"] == 1);
  REQUIRE(plan["tables"].size() == 1);
  CHECK(plan["tables"][0]["status"] == "failed");
  CHECK(plan["tables"][0]["error_code"] == "FLT-R002");
  const auto run = flotilla_json(w, {"run"}, &rc);
  REQUIRE(run["tables"].size() == 1);
  CHECK(run["tables"][0]["table"] == plan["tables"][0]["table"]);
}

TEST_CASE("a filtered run refused for another source's target table does not ask for a "
          "{source} the template has") {
  workdir w;
  sqlite_exec(w.file("one.db"), "CREATE TABLE a__b (id INTEGER, who TEXT); INSERT INTO a__b "
                                "VALUES (1, 'ONE')");
  sqlite_exec(w.file("two.db"), "CREATE TABLE b (id INTEGER, who TEXT); INSERT INTO b VALUES "
                                "(1, 'TWO')");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "schema = \"{region}_{source}\"\n"
                           "[sources.p]\nadapter = \"sqlite\"\npath = \"one.db\"\n"
                           "tags = { region = \"q\" }\n"
                           "[sources.p__a]\nadapter = \"sqlite\"\npath = \"two.db\"\n"
                           "tags = { region = \"q\" }\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  const auto j = flotilla_json(w, {"run", "--filter", "source=p__a"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  REQUIRE(j["tables"].size() == 1);
  CHECK(j["tables"][0]["error_code"] == "FLT-R006");
  CHECK_THAT(j["tables"][0]["error"].get<std::string>(),
             Catch::Contains("has {source} already") &&
                 !Catch::Contains("a schema template with {source}"));
}

TEST_CASE("a pin a message suggests for a column whose name is no bare TOML key parses "
          "when pasted, and loads") {
  // `columns = { my col = "text" }` was suggested: pasted, flotilla.toml did not parse.
  workdir w;
  std::filesystem::create_directories(w.file("data"));
  w.write("data/s.csv", "id,my col\n1,5\n");
  const std::string toml = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.f]\nadapter = \"csv\"\npath = \"data\"\n";
  w.write("flotilla.toml", toml);
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  w.write("data/s.csv", "id,my col\n1,abc\n");
  const auto j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const std::string why = j["tables"][0]["error"];
  INFO(why);
  const auto from = why.find("columns = {");
  REQUIRE(from != std::string::npos);
  const std::string pin = why.substr(from, why.find('}', from) + 1 - from);
  CHECK(pin == "columns = { \"my col\" = \"text\" }");
  w.write("flotilla.toml", toml + "[sources.f.tables.s]\n" + pin + "\n");
  flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT \"my col\" FROM f.s")[0][0] == "abc");
}

TEST_CASE("contract diff under an enforced contract reports every live column nothing "
          "declares (seed 000), one the source lacks with what ends the difference") {
  // A column dropped at the source stays in the live table (never dropped) and cannot be
  // declared (FLT-S001); one added to the target by hand is in the same place.
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, gone TEXT);"
                                "INSERT INTO t VALUES (1, 'x', 'g')");
  const std::string toml = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "include = [\"t\"]\n";
  w.write("flotilla.toml", toml);
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"), "ALTER TABLE t DROP COLUMN gone");
  duckdb_exec(w.file("wh.duckdb"), "ALTER TABLE s.t ADD COLUMN by_hand VARCHAR");
  REQUIRE(run_flotilla(w, {"contract", "generate", "--write"}).exit_code == 0);
  std::ifstream in(w.file("flotilla.toml"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text.find("gone") == std::string::npos);
  CHECK(text.find("by_hand") == std::string::npos);
  const std::string include = "include = [\"t\"]\n";
  text.replace(text.find(include), include.size(), include + "contract = \"enforced\"\n");
  w.write("flotilla.toml", text);
  auto diff = run_flotilla(w, {"contract", "diff"});
  INFO(diff.out << diff.err << text);
  CHECK(diff.exit_code == 1);
  for (const char* column : {"gone", "by_hand"})
    CHECK(diff.out.find(fmt::format("undeclared: column '{}' (text) is in the live table but not "
                                    "declared, and the source has no such column",
                                    column)) != std::string::npos);
  CHECK(diff.out.find("drop it from the live table, or set contract = \"none\"") != std::string::npos);
  // The run loads the declared columns all the same.
  flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  // Dropped from the live table as the message says: no difference left.
  duckdb_exec(w.file("wh.duckdb"), "ALTER TABLE s.t DROP COLUMN gone");
  duckdb_exec(w.file("wh.duckdb"), "ALTER TABLE s.t DROP COLUMN by_hand");
  diff = run_flotilla(w, {"contract", "diff"});
  INFO(diff.out);
  CHECK(diff.exit_code == 0);
}

TEST_CASE("contract = \"none\" written out follows a live column widened by hand (seed 000); "
          "the built-in default changes it back (seed 001)") {
  for (const bool explicit_none : {true, false}) {
    INFO(explicit_none);
    workdir w;
    sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, n INT);"
                                  "INSERT INTO t VALUES (1, 5)");
    w.write("flotilla.toml", std::string("[targets.wh]\ndialect = \"duckdb\"\npath = "
                                         "\"wh.duckdb\"\n[sources.s]\nadapter = \"sqlite\"\n"
                                         "path = \"src.db\"\n") +
                                 (explicit_none ? "contract = \"none\"\n" : ""));
    int rc = -1;
    flotilla_json(w, {"run"}, &rc);
    REQUIRE(rc == 0);
    duckdb_exec(w.file("wh.duckdb"), "ALTER TABLE s.t ALTER COLUMN n TYPE BIGINT");
    sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (2, 6)");
    const auto j = flotilla_json(w, {"run"}, &rc);
    INFO(j.dump(2));
    CHECK(rc == 0);
    const auto type = duckdb_query(w.file("wh.duckdb"), "SELECT data_type FROM duckdb_columns() "
                                                        "WHERE table_name = 't' AND column_name = 'n'");
    CHECK(type[0][0] == (explicit_none ? "BIGINT" : "INTEGER"));
    CHECK(j["drift"]["actions_taken"].empty() == explicit_none);
    CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s.t")[0][0] == "2");
  }
}

TEST_CASE("contract = \"none\" written out takes seed 000's default: a rebuild needs "
          "--allow-type-change-rebuild") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
                                "INSERT INTO t VALUES (1, 'a')");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "contract = \"none\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  sqlite_exec(w.file("src.db"), "DROP TABLE t; CREATE TABLE t (id INTEGER PRIMARY KEY, v INT);"
                                "INSERT INTO t VALUES (1, 7)");
  auto refused = flotilla_json(w, {"run"}, &rc);
  INFO(refused.dump(2));
  CHECK(rc == 1);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT v FROM s.t")[0][0] == "a");
  auto confirmed = flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  INFO(confirmed.dump(2));
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT CAST(v AS VARCHAR) FROM s.t")[0][0] == "7");
}

TEST_CASE("a NaN SQLite cannot store fails its table, naming the column; never a NULL") {
  workdir w;
  std::filesystem::create_directories(w.file("data"));
  w.write("data/t.csv", "id,x\n1,NaN\n2,1.5\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.c]\nadapter = \"csv\"\npath = \"data\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* t = find_table(run, "c__t");
  REQUIRE(t != nullptr);
  CHECK((*t)["status"] == "failed");
  CHECK_THAT((*t)["error"].get<std::string>(),
             Catch::Contains("row 1: column \"x\" holds NaN") && Catch::Contains("x = \"text\""));
  // Pinned as text, the value is kept.
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.c]\nadapter = \"csv\"\npath = \"data\"\n"
                           "[sources.c.tables.t]\ncolumns = { x = \"text\" }\n");
  flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT x FROM c__t ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"NaN"}, {"1.5"}});
}

TEST_CASE("a target name the engine keeps for itself fails in plan, with the fix on this side") {
  workdir w;
  std::filesystem::create_directories(w.path() / "in");
  w.write("in/sqlite_stat9.csv", "id\n1\n");
  w.write("in/plain.csv", "id\n1\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "schema = \"\"\n[sources.c]\nadapter = \"csv\"\npath = \"in\"\ntarget = \"wh\"\n"
                           "[targets.dk]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"{zone}\"\n[sources.d]\nadapter = \"csv\"\npath = \"in\"\n"
                           "target = \"dk\"\ntags = { zone = \"information_schema\" }\n");
  int rc = -1;
  auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump());
  CHECK(rc == 1);
  std::size_t refused = 0;
  for (const auto& t : plan["tables"]) {
    const bool kept = t["source"] == "d" || t["source_table"] == "sqlite_stat9";
    CHECK((t.value("error_code", std::string()) == "FLT-S013") == kept);
    if (kept) {
      ++refused;
      CHECK_THAT(t["error"].dump(), Catch::Contains("keeps for itself") &&
                                        Catch::Contains("rename the table at the source"));
    }
  }
  CHECK(refused == 3);  // sqlite_stat9 into SQLite; both tables into DuckDB's information_schema
}

TEST_CASE("a source table or column named as Flotilla's own fails, named; nothing of it loads") {
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE orders (id INTEGER PRIMARY KEY, v TEXT);"
              "INSERT INTO orders VALUES (1, 'a');"
              "CREATE TABLE orders__flotilla_staging (id INTEGER PRIMARY KEY, v TEXT);"
              "INSERT INTO orders__flotilla_staging VALUES (1, 'b');"
              "CREATE TABLE _flotilla_commits (x INT);"
              "CREATE TABLE items (id INTEGER PRIMARY KEY, __FLOTILLA_seq INT);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "schema = \"\"\n[sources.s]\nadapter = \"sqlite\"\n"
                           "path = \"src.db\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 1);
  CHECK((*find_table(run, "orders"))["status"] == "copied");
  for (const char* t : {"orders__flotilla_staging", "_flotilla_commits", "items"}) {
    INFO(t);
    const auto* r = find_table(run, t);
    REQUIRE(r != nullptr);
    CHECK((*r)["status"] == "failed");
    CHECK((*r)["error_code"] == "FLT-S013");
  }
  CHECK_THAT((*find_table(run, "items"))["error"].get<std::string>(),
             Catch::Contains("column '__FLOTILLA_seq'"));
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM sqlite_master WHERE name IN "
                                          "('items', 'orders__flotilla_staging')") ==
        std::vector<std::vector<std::string>>{{"0"}});
}

TEST_CASE("events kept for an unreachable broker still count as pending once the sink is gone") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  const std::string base = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n";
  w.write("flotilla.toml", base + "[events.kafka]\nbrokers = \"127.0.0.1:1\"\ntopic = \"t\"\n"
                                  "[events.kafka.settings]\n\"message.timeout.ms\" = 1000\n");
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  const auto kept = first["events"]["pending"].get<int>();
  CHECK(kept > 0);
  w.write("flotilla.toml", base);
  auto second = flotilla_json(w, {"run"}, &rc);
  INFO(second.dump());
  CHECK(second["events"]["pending"] == kept);
  // The text summary says they wait, and for what.
  const auto text = run_flotilla(w, {"run"});
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains(fmt::format("warning  events  {} event(s) wait in the "
                                                   "outbox", kept)) &&
                           Catch::Contains("configures no event sink"));
}

TEST_CASE("a value its PostgreSQL column cannot hold fails the table naming the column and the "
          "pin, and the pin loads it") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE big (id INTEGER PRIMARY KEY, n INT);"
                                "INSERT INTO big VALUES (1, 1), (2, 9000000000);");
  const std::string schema = "wide_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE", schema));
  const std::string base = fmt::format(
      "[targets.wh]\ndialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"\n"
      "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n",
      pg_dsn(), schema);
  w.write("flotilla.toml", base);
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 1);
  const auto* big = find_table(run, schema + ".big");
  REQUIRE(big != nullptr);
  CHECK_THAT((*big)["error"].get<std::string>(),
             Catch::Contains("column \"n\" holds a value its type cannot hold") &&
                 Catch::Contains("columns = { n = \"bigint\" }"));
  w.write("flotilla.toml", base + "[sources.s.tables.big]\ncolumns = { n = \"bigint\" }\n");
  flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT max(n) FROM {}.big", schema))[0][0] == "9000000000");
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE", schema));
}

TEST_CASE("a decimal pinned as text is read as the source's text: NaN and values no decimal "
          "holds load as they are") {
  const std::string schema = "nan_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.m (id int PRIMARY KEY, n numeric(10,2));"
                                "INSERT INTO {0}.m VALUES (1, 'NaN'), (2, 1.5)",
                                schema));
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE d (id INTEGER PRIMARY KEY, v DECIMAL(5,2));"
                                "INSERT INTO d VALUES (1, 1.5), (2, 123456.789);");
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                      "[sources.p]\nadapter = \"postgres\"\ndsn = \"{}\"\ninclude = [\"{}.m\"]\n"
                      "[sources.p.tables.\"{}.m\"]\ncolumns = {{ n = \"text\" }}\n"
                      "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                      "[sources.s.tables.d]\ncolumns = {{ v = \"text\" }}\n",
                      pg_dsn(), schema, schema));
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(n, ',' ORDER BY id) FROM p.m") ==
        std::vector<std::vector<std::string>>{{"NaN,1.50"}});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(v, ',' ORDER BY id) FROM s.d") ==
        std::vector<std::vector<std::string>>{{"1.5,123456.789"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE", schema));
}

TEST_CASE("two PostgreSQL tables whose names share their first 62 bytes are created at once") {
  const std::string src = "long_src_" + unique_suffix(), dst = "long_dst_" + unique_suffix();
  const std::string a(62, 'o'), b = a + "b";
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.\"{1}a\" (id int PRIMARY KEY, v text);"
                                "CREATE TABLE {0}.\"{2}\" (id int PRIMARY KEY, v text);"
                                "INSERT INTO {0}.\"{1}a\" VALUES (1, 'a');"
                                "INSERT INTO {0}.\"{2}\" VALUES (1, 'b')",
                                src, a, b));
  workdir w;
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{1}\"\n"
                      "[sources.p]\nadapter = \"postgres\"\ndsn = \"{0}\"\ninclude = [\"{2}.*\"]\n",
                      pg_dsn(), dst, src));
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT (SELECT v FROM {0}.\"{1}a\") || (SELECT v FROM "
                                       "{0}.\"{2}\")",
                                       dst, a, b))[0][0] == "ab");
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; DROP SCHEMA IF EXISTS {1} "
                                "CASCADE",
                                src, dst));
}

TEST_CASE("a value its DuckDB column cannot hold fails the table naming the column and the fix") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE rdec (id INTEGER PRIMARY KEY, d DECIMAL(5,2));"
                                "INSERT INTO rdec VALUES (1, 1.5), (2, 123456.789);"
                                "CREATE TABLE big (id INTEGER PRIMARY KEY, n INT);"
                                "INSERT INTO big VALUES (1, 1), (2, 1099511627776);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 1);
  CHECK_THAT((*find_table(run, "s.rdec"))["error"].get<std::string>(),
             Catch::Contains("column \"d\" holds a value its type cannot hold") &&
                 Catch::Contains("d = \"text\"") && Catch::Contains("row 2: value '"));
  CHECK_THAT((*find_table(run, "s.big"))["error"].get<std::string>(),
             Catch::Contains("row 2, column 'n': value '1099511627776'"));
}

TEST_CASE("plan shows a table's description, and a long name apart from its status") {
  workdir w;
  const std::string long_name(60, 'n');
  sqlite_exec(w.file("src.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY);"
                                "CREATE TABLE " + long_name + " (id INTEGER PRIMARY KEY);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "include = [\"*\"]\n[sources.s.tables.orders]\n"
                           "description = \"Orders, one row per order.\"\n");
  const auto text = run_flotilla(w, {"plan"}).out;
  CHECK_THAT(text, Catch::Contains("description  Orders, one row per order.") &&
                       Catch::Contains("s." + long_name + "  create table"));
  auto j = flotilla_json(w, {"plan"});
  const auto* orders = find_table(j, "s.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["description"] == "Orders, one row per order.");
}

TEST_CASE("a failing table does not stop the others") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb", "\n[sources.shop.tables.orders]\ncursor_column = \"no_such_column\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(run["status"] == "partial");
  const auto* orders = find_table(run, "staging__us_west__shop.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "failed");
  CHECK((*orders)["error"].get<std::string>().find("no_such_column") != std::string::npos);
  CHECK((*find_table(run, "staging__us_west__shop.customers"))["status"] == "copied");
}

TEST_CASE("a table flotilla.toml names that the source lacks fails, with the name it likely meant") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb",
               "include = [\"customers\", \"ordrs\", \"archive_*\"]\n"
               "[sources.shop.tables.ordres]\ncursor_column = \"id\"\n");
  int rc = -1;
  // The plan's headline counts the two tables a run would fail, as its JSON does.
  auto plan_text = run_flotilla(w, {"plan"});
  CHECK(plan_text.exit_code == 1);
  CHECK_THAT(plan_text.out, Catch::Contains("Plan ready  3 selected, 0 to alter, 1 to load, "
                                            "2 failed"));
  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 1);
  CHECK(plan["failed"] == 2);
  CHECK(plan["errors"].size() == 2);
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(run["status"] == "partial");
  // Every source's tables were listed: `errors` is there, and empty.
  REQUIRE(run.contains("errors"));
  CHECK(run["errors"] == nlohmann::json::array());
  CHECK((*find_table(run, "staging__us_west__shop.customers"))["status"] == "copied");
  for (const auto& [table, where] : std::vector<std::pair<std::string, std::string>>{
           {"ordres", "in [sources.shop.tables.\"ordres\"]"},
           {"ordrs", "in include of [sources.shop]"}}) {
    const auto* t = find_table(run, "staging__us_west__shop." + table);
    REQUIRE(t != nullptr);
    CHECK((*t)["status"] == "failed");
    CHECK((*t)["error_code"] == "FLT-R005");
    const std::string why = (*t)["error"];
    CHECK(why.find(fmt::format("source 'shop' has no table '{}', which flotilla.toml names {} "
                               "(did you mean 'orders'?)",
                               table, where)) != std::string::npos);
  }
  // A pattern that matches nothing is not a name, and a filter narrows what is reported.
  CHECK(find_table(run, "staging__us_west__shop.archive_*") == nullptr);
  // The retry of that run fails them the same way: misspelled, not "gone since".
  auto retry = flotilla_json(w, {"retry"}, &rc);
  INFO(retry.dump());
  CHECK(rc == 1);
  for (const std::string table : {"ordres", "ordrs"}) {
    const auto* t = find_table(retry, "staging__us_west__shop." + table);
    REQUIRE(t != nullptr);
    CHECK((*t)["error_code"] == "FLT-R005");
    CHECK_THAT((*t)["error"].get<std::string>(), Catch::Contains("(did you mean 'orders'?)") &&
                                                     !Catch::Contains("no longer has"));
  }
  // Renamed with a suffix: too far for a typo, but the name is in the new one.
  sqlite_exec(w.file("shop.db"), "ALTER TABLE orders RENAME TO orders_v2");
  write_config(w, "duckdb", "include = [\"customers\"]\n[sources.shop.tables.orders]\n");
  auto renamed = flotilla_json(w, {"run"}, &rc);
  const auto* orders = find_table(renamed, "staging__us_west__shop.orders");
  REQUIRE(orders != nullptr);
  CHECK_THAT((*orders)["error"].get<std::string>(), Catch::Contains("(did you mean 'orders_v2'?)"));
  auto filtered = flotilla_json(w, {"run", "--filter", " table = customers "}, &rc);
  CHECK(rc == 0);
  CHECK(filtered["tables"].size() == 1);
  // The filter as the selection read it: spaces around key and value trimmed.
  std::ifstream events(w.path() / ".flotilla" / "runs" / filtered["run_id"].get<std::string>() /
                       "events.ndjson");
  std::string first;
  REQUIRE(std::getline(events, first));
  auto started = nlohmann::json::parse(first);
  REQUIRE(started["type"] == "run_started");
  CHECK(started["run_started"]["filters"] == nlohmann::json::array({"table=customers"}));
}

TEST_CASE("a quoted value with text after its closing quote is named as such, not as unclosed") {
  workdir w;
  std::filesystem::create_directories(w.file("drops"));
  w.write("drops/semi.csv", "id;name\n1;ok\n2;\"a\"b;\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.db\"\n"
                           "[sources.drops]\nadapter = \"csv\"\npath = \"drops\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* semi = find_table(run, "drops__semi");
  REQUIRE(semi != nullptr);
  CHECK((*semi)["status"] == "failed");
  const std::string why = (*semi)["error"];
  CHECK(why.find("line 3: the value \"a\"b closes its double quote before its end") !=
        std::string::npos);
  CHECK(why.find("never closed") == std::string::npos);
}

TEST_CASE("a CSV quote error after a value holding a line break names the line an editor shows") {
  workdir w;
  std::filesystem::create_directories(w.file("d"));
  // DuckDB numbers the error by record (3); the record begins on line 4.
  w.write("d/early.csv", "id,note,amt\n1,\"a\nb\",1\n2,\"x\"y,5\n3,z,6\n");
  w.write("d/open.csv", "id,note,amt\n1,\"a\nb\",1\n2,\"x,5\n3,z,6\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.c]\nadapter = \"csv\"\npath = \"d\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* early = find_table(run, "c.early");
  const auto* open = find_table(run, "c.open");
  REQUIRE(early != nullptr);
  REQUIRE(open != nullptr);
  CHECK_THAT((*early)["error"].get<std::string>(),
             Catch::Contains("line 4: the value \"x\"y closes its double quote before its end"));
  CHECK_THAT((*open)["error"].get<std::string>(),
             Catch::Contains("line 4: a value opens a double quote that is never closed"));
}

TEST_CASE("a JSON value a pinned column cannot parse is named with its record and column") {
  workdir w;
  std::filesystem::create_directories(w.file("in"));
  w.write("in/e.ndjson", "{\"id\":1,\"d\":\"2024-01-01\"}\n{\"id\":2,\"d\":\"2024-01-02\"}\n"
                         "{\"id\":3,\"d\":\"n/a\"}\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.db\"\n"
                           "[sources.j]\nadapter = \"json\"\npath = \"in\"\n"
                           "[sources.j.tables.e]\ncolumns = { d = \"date\" }\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* e = find_table(run, "j__e");
  REQUIRE(e != nullptr);
  CHECK((*e)["status"] == "failed");
  const std::string why = (*e)["error"];
  CHECK(why.find("record 3: column 'd' holds 'n/a', which is not a date") != std::string::npos);
  CHECK(why.find("columns = { d = \"text\" }") != std::string::npos);
  CHECK(why.find("ignore_errors") == std::string::npos);
}

TEST_CASE("a CSV header of empty fields only is refused, not loaded under made-up names") {
  workdir w;
  std::filesystem::create_directories(w.file("in"));
  w.write("in/noname.csv", ",,\n1,2,3\n4,5,6\n");
  w.write("in/headless.csv", "a,b\n1,2\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.db\"\n"
                           "[sources.f]\nadapter = \"csv\"\npath = \"in\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* t = find_table(run, "f__noname");
  REQUIRE(t != nullptr);
  CHECK((*t)["status"] == "failed");
  CHECK((*t)["error"].get<std::string>().find("header (line 1) has no column names") !=
        std::string::npos);
  CHECK((*find_table(run, "f__headless"))["status"] == "copied");
}

TEST_CASE("a malformed file fails its own table; the source's other files load") {
  workdir w;
  std::filesystem::create_directories(w.file("drops"));
  w.write("drops/good.csv", "id,name\n1,a\n2,b\n");
  w.write("drops/bad.csv", "id,name,x\n1,\"a,b\",x\n2,\"c,d,y\n3,e,f\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.db\"\n"
                           "[sources.drops]\nadapter = \"csv\"\npath = \"drops\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(run["status"] == "partial");
  const auto* bad = find_table(run, "drops__bad");
  REQUIRE(bad != nullptr);
  CHECK((*bad)["status"] == "failed");
  CHECK((*bad)["error_code"] == "FLT-R002");
  const std::string why = (*bad)["error"];
  CHECK(why.find("bad.csv") != std::string::npos);
  CHECK(why.find("line 3: a value opens a double quote that is never closed") != std::string::npos);
  CHECK((*find_table(run, "drops__good"))["rows"] == 2);
  auto plan = run_flotilla(w, {"plan"});
  CHECK(plan.exit_code == 1);
  CHECK(plan.out.find("line 3: a value opens a double quote") != std::string::npos);
}

TEST_CASE("a file target's directory is made when missing, for SQLite as for DuckDB") {
  for (const char* dialect : {"sqlite", "duckdb"}) {
    INFO(dialect);
    workdir w;
    sqlite_exec(w.file("shop.db"), k_orders_sql);
    w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"{}\"\npath = \"out/sub/wh.db\"\n"
                                         "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n",
                                         dialect));
    CHECK(run_flotilla(w, {"run"}).exit_code == 0);
    CHECK(std::filesystem::exists(w.file("out/sub/wh.db")));
  }
}

TEST_CASE("hostile identifiers are quoted and cannot break out of SQL") {
  workdir w;
  sqlite_exec(w.file("shop.db"),
              "CREATE TABLE \"we\"\"ird; DROP TABLE x;--\" (\"a\"\"b\" INTEGER, \"c'd; --\" TEXT, \"Ünï\" TEXT);"
              "INSERT INTO \"we\"\"ird; DROP TABLE x;--\" VALUES (1, 'it''s', 'ü');");
  write_config(w, "duckdb");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  auto rows = duckdb_query(w.file("wh.duckdb"),
                           "SELECT \"a\"\"b\", \"c'd; --\", \"Ünï\" FROM staging__us_west__shop.\"we\"\"ird; DROP TABLE x;--\"");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0] == std::vector<std::string>{"1", "it's", "ü"});
}

TEST_CASE("a DuckDB schema named like a database is qualified with the file's database") {
  // DuckDB names the database after its file; "wh"."orders" is ambiguous in wh.duckdb
  // when the schema is "wh" too, and so are the schemas "system" and "temp".
  struct case_t {
    std::string path, schema, database;
  };
  const auto c = GENERATE(case_t{"wh.duckdb", "wh", "wh"}, case_t{"wh.duckdb", "WH", "wh"},
                          case_t{"wh.duckdb", "temp", "wh"}, case_t{"wh.duckdb", "system", "wh"},
                          case_t{"dw.v2.duckdb", "dw", "dw"},
                          case_t{"main.duckdb", "main_db", "main_db"},
                          case_t{"wh.duckdb", "other", "wh"});
  CAPTURE(c.path, c.schema);
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  w.write("flotilla.toml", fmt::format(R"([project]
name = "test"

[targets.wh]
dialect = "duckdb"
path = "{}"
schema = "{}"

[sources.shop]
adapter = "sqlite"
path = "shop.db"
)",
                                       c.path, c.schema));
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(first["status"] == "success");
  sqlite_exec(w.file("shop.db"), "ALTER TABLE orders ADD COLUMN channel TEXT;"
                                 "INSERT INTO orders (id, channel) VALUES (4, 'web');");
  auto plan = run_flotilla(w, {"plan"});
  CHECK(plan.exit_code == 0);
  CHECK(plan.out.find("channel") != std::string::npos);
  auto second = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(action_for(second, "add_columns") != nullptr);
  auto rows = duckdb_query(w.file(c.path),
                           fmt::format("SELECT count(*), max(channel) FROM \"{}\".\"{}\".orders",
                                       c.database, c.schema));
  REQUIRE(rows.size() == 1);
  CHECK(rows[0] == std::vector<std::string>{"4", "web"});
}

TEST_CASE("a source the run cannot read is in the run JSON's errors and in run_finished") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb", "\n[sources.gone]\nadapter = \"sqlite\"\npath = \"gone.db\"\n"
                           "tags = { region = \"eu\" }\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(run["status"] == "partial");
  REQUIRE(run["errors"].size() == 1);
  CHECK(run["errors"][0]["source"] == "gone");
  const std::string error = run["errors"][0]["error"];
  CHECK(error.find("gone.db") != std::string::npos);
  // The event stream says the same: no table of `gone` has events, run_finished names it.
  std::ifstream in(run["events"]["log"].get<std::string>());
  nlohmann::json finished;
  std::set<std::string> sources_with_events;
  for (std::string line; std::getline(in, line);) {
    auto e = nlohmann::json::parse(line);
    if (e["type"] == "run_finished")
      finished = e["run_finished"];
    else if (!e["source"].get<std::string>().empty())
      sources_with_events.insert(e["source"]);
  }
  CHECK(sources_with_events == std::set<std::string>{"shop"});
  CHECK(finished["status"] == "partial");
  CHECK(finished["tables_failed"] == 0);
  CHECK(finished["sources_failed"] == 1);
  REQUIRE(finished["source_errors"].size() == 1);
  CHECK(finished["source_errors"][0]["source"] == "gone");
  CHECK(finished["source_errors"][0]["error"] == error);
  // The text summary counts the failed source.
  auto text = run_flotilla(w, {"run"});
  CHECK(text.exit_code == 1);
  CHECK(text.out.find("0 skipped, 1 source(s) failed,") != std::string::npos);
}

TEST_CASE("an unknown command is named, with the commands there are, and exits 2") {
  workdir w;
  auto r = run_flotilla(w, {"frobnicate"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("unknown command 'frobnicate'; use one of: plan, run,"));
  r = run_flotilla(w, {"review", "lst"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("unknown command 'lst' for 'review'; did you mean 'list'? "
                                      "use one of: list,"));
  r = run_flotilla(w, {"pln"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("unknown command 'pln'; did you mean 'plan'?"));
  r = run_flotilla(w, {"contract"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("flotilla contract needs a command: diff, generate"));
  // With --help after it: the same error, not the help of the command above it (exit 0).
  r = run_flotilla(w, {"status", "--help"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("unknown command 'status'; use one of: plan, run,"));
  r = run_flotilla(w, {"schema", "acept", "--help"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("unknown command 'acept' for 'schema'; did you mean "
                                      "'accept'?"));
  // A command's own help is still its help.
  r = run_flotilla(w, {"schema", "--help"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("accept"));
}

TEST_CASE("a usage error with --output json prints the JSON document too; a stray word is "
          "named, with --filter suggested") {
  workdir w;
  auto r = run_flotilla(w, {"run", "--output", "json", "--fitler", "x=y"});
  CHECK(r.exit_code == 2);
  INFO(r.out << r.err);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["exit_code"] == 2);
  REQUIRE(j["errors"].size() == 1);
  CHECK_THAT(j["errors"][0]["message"].get<std::string>(),
             Catch::StartsWith("unknown flag '--fitler' for 'flotilla run'"));
  // One line, without the terminal's closing advice (stderr keeps it).
  CHECK(j["errors"][0]["message"].get<std::string>().find('\n') == std::string::npos);
  CHECK(j["errors"][0]["message"].get<std::string>().find("Run with --help") == std::string::npos);
  CHECK(r.err.find("Run with --help for more information.") != std::string::npos);
  r = run_flotilla(w, {"run", "acme"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("flotilla run takes no argument 'acme'; to select a source "
                                      "or table, use --filter source=acme"));
  CHECK(r.out.empty());
  r = run_flotilla(w, {"plan", "--output=json", "acme"});
  CHECK(r.exit_code == 2);
  CHECK(nlohmann::json::parse(r.out)["status"] == "failed");
  // A command's flag given before the command: said where it goes.
  r = run_flotilla(w, {"--no-prune", "run"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("flag '--no-prune' goes after the command: flotilla run"));
  // The value of a misspelled flag is not taken for a stray word.
  r = run_flotilla(w, {"run", "--fliter", "client=d"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("did you mean '--filter'?") != std::string::npos);
  CHECK(r.err.find("takes no argument") == std::string::npos);
}

TEST_CASE("configuration warnings are in the run and plan JSON as config_warnings") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb", "exclude = [\"custom*\"]\n[sources.shop.tables.customers]\n");
  int rc = -1;
  for (const char* verb : {"plan", "run"}) {
    INFO(verb);
    auto j = flotilla_json(w, {verb}, &rc);
    REQUIRE(j.contains("config_warnings"));
    REQUIRE(j["config_warnings"].size() == 1);
    CHECK(j["config_warnings"][0]["code"] == "FLT-C022");
    CHECK(j["config_warnings"][0]["key"] == "sources.shop.exclude");
    CHECK(j["config_warnings"][0]["line"].get<int>() > 0);
  }
  // None: no key at all.
  write_config(w, "duckdb");
  CHECK_FALSE(flotilla_json(w, {"run"}, &rc).contains("config_warnings"));
}

TEST_CASE("flotilla bench hands every flag to the harness, its --help too") {
  workdir w;
  auto r = run_flotilla(w, {"bench", "--list"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("fleet-scale") != std::string::npos);
  r = run_flotilla(w, {"bench", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--smoke") != std::string::npos);
  // -c after the command, as after any other (the harness reads no flotilla.toml).
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"bench", "-c", "x.toml", "--list"}, {"bench", "--list", "--config=x.toml"}}) {
    r = run_flotilla(w, args);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("fleet-scale") != std::string::npos);
  }
}

TEST_CASE("filter values no source has are FLT-C023: nothing runs, the latest run stays") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb");
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  auto r = run_flotilla(w, {"run", "--filter", "region=us_wset"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("FLT-C023") &&
                        Catch::Contains("no source has region = 'us_wset' (did you mean 'us_west'?)"));
  r = run_flotilla(w, {"plan", "--filter", "source=SHOP"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("did you mean 'shop'?"));
  // A table filter matching nothing is no error: an empty, successful run.
  auto none = flotilla_json(w, {"run", "--filter", "table=nothing_here"}, &rc);
  CHECK(rc == 0);
  CHECK(none["tables"].empty());
}

TEST_CASE("a mistyped flag gets the nearest flag of its command; -c may follow the command") {
  workdir w;
  auto r = run_flotilla(w, {"run", "--fitler", "client=acme"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("unknown flag '--fitler' for 'flotilla run'; did you mean "
                                      "'--filter'?"));
  r = run_flotilla(w, {"plan", "--no-prun"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("did you mean '--no-prune'?"));
  // A one-letter flag the command lacks: its letter's long flag, not another letter.
  r = run_flotilla(w, {"run", "-o", "json"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("unknown flag '-o' for 'flotilla run'; did you mean "
                                      "'--output'?"));
  r = run_flotilla(w, {"run", "-q"});
  CHECK_THAT(r.err, Catch::Contains("see flotilla run --help") && !Catch::Contains("did you"));
  r = run_flotilla(w, {"--version"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("flotilla "));
  // -c after the command names the config as well as before it.
  std::filesystem::create_directories(w.file("files"));
  w.write("elsewhere.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                            "[sources.s]\nadapter = \"csv\"\npath = \"files\"\n");
  r = run_flotilla(w, {"plan", "-c", w.file("elsewhere.toml")});
  CHECK(r.exit_code == 0);
  // A config file that exists but cannot be read says why.
  std::filesystem::create_directories(w.file("dir.toml"));
  r = run_flotilla(w, {"-c", w.file("dir.toml"), "plan"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("it is a directory"));
}

TEST_CASE("configuration errors are reported together and exit 2") {
  workdir w;
  w.write("flotilla.toml", R"([project]
name = "x"
[targets.wh]
dialect = "duckdbb"
path = "wh.duckdb"
[sources.shop]
adaptr = "sqlite"
path = "shop.db"
)");
  auto r = run_flotilla(w, {"run"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("FLT-C005") != std::string::npos);  // unknown dialect
  CHECK(r.err.find("FLT-C003") != std::string::npos);  // unknown key, with a suggestion
  CHECK(r.err.find("adapter") != std::string::npos);
}

TEST_CASE("plan shows the actions and SQL without changing the target") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb");
  int rc = -1;
  // Before the first run there is no target file, and plan does not create one.
  auto first = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  CHECK((*find_table(first, "staging__us_west__shop.orders"))["shape_action"] == "create");
  CHECK_FALSE(std::filesystem::exists(w.file("wh.duckdb")));
  flotilla_json(w, {"run"}, &rc);
  sqlite_exec(w.file("shop.db"), "ALTER TABLE orders ADD COLUMN coupon TEXT;");
  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  const nlohmann::json* orders = find_table(plan, "staging__us_west__shop.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["shape_action"] == "evolve");
  bool has_alter = false;
  for (const auto& s : (*orders)["sql"])
    has_alter |= s.get<std::string>().find("ADD COLUMN") != std::string::npos;
  CHECK(has_alter);
  auto cols = duckdb_query(w.file("wh.duckdb"),
                           "SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders'"
                           " AND column_name = 'coupon'");
  CHECK(cols[0][0] == "0");
  auto text = run_flotilla(w, {"plan"});
  CHECK(text.out.find("Plan ready  2 selected, 1 to alter, 2 to load") != std::string::npos);
}

TEST_CASE("plan for a SQLite target shows the in-place full refresh that run performs") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "sqlite");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  const nlohmann::json* orders = find_table(plan, "staging__us_west__shop__orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["load"] == "full_refresh");
  std::vector<std::string> sql;
  for (const auto& s : (*orders)["sql"])
    sql.push_back(s.get<std::string>());
  INFO(nlohmann::json(sql).dump(1));
  const std::string live = "\"staging__us_west__shop__orders\"";
  // The live table has the columns to load: emptied and loaded again, no swap.
  CHECK(std::find(sql.begin(), sql.end(), "DELETE FROM " + live) != sql.end());
  for (const auto& s : sql) {
    CHECK(s.find("RENAME") == std::string::npos);
    CHECK(s.find("CREATE TABLE " + live) == std::string::npos);
  }
  const auto version = [&] { return sqlite_query(w.file("wh.sqlite"), "PRAGMA schema_version")[0][0]; };
  const auto before = version();
  // The run does what the plan said: the live table reloaded, no staging table left.
  sqlite_exec(w.file("shop.db"), "INSERT INTO orders VALUES (4, 'new', 1.00, 1, 'd', '2025-01-02 10:00:00');");
  flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  auto rows = sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM " + live);
  CHECK(rows[0][0] == "4");
  auto tables = sqlite_query(w.file("wh.sqlite"),
                             "SELECT count(*) FROM sqlite_master WHERE name LIKE '%flotilla_staging%'");
  CHECK(tables[0][0] == "0");
  CHECK(version() == before);  // nothing was dropped or created
}

TEST_CASE("a PostgreSQL target empties a small live table in place, as plan shows: a view over "
          "it keeps working; in_place_max_bytes = 0 swaps") {
  workdir w;
  const std::string suffix = unique_suffix();
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "postgres", "", suffix);
  const std::string live = orders_sql("postgres", suffix);
  const std::string view = "\"st_" + suffix + "_shop\".\"paid\"";
  const auto sql_of = [](const nlohmann::json& plan, const std::string& table) {
    std::vector<std::string> sql;
    if (const auto* t = find_table(plan, table))
      for (const auto& s : (*t)["sql"])
        sql.push_back(s.get<std::string>());
    return sql;
  };
  const auto oid = [&] {
    return pg_query(pg_dsn(), "SELECT to_regclass('" + live + "')::oid::text")[0][0];
  };
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  pg_exec(pg_dsn(),
          "CREATE VIEW " + view + " AS SELECT id FROM " + live + " WHERE status = 'paid'");
  const auto first = oid();

  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  auto sql = sql_of(plan, orders_table("postgres", suffix));
  INFO(nlohmann::json(sql).dump(1));
  CHECK(std::find(sql.begin(), sql.end(), "DELETE FROM " + live) != sql.end());
  for (const auto& s : sql)
    CHECK(s.find("RENAME") == std::string::npos);

  // The run does what the plan said: the same table, reloaded; the view sees the new rows.
  sqlite_exec(w.file("shop.db"), "UPDATE orders SET status = 'paid' WHERE id = 3;");
  auto run = flotilla_json(w, {"run", "--no-prune"}, &rc);
  CHECK(rc == 0);
  CHECK(run["status"] == "success");
  CHECK(oid() == first);
  CHECK(pg_query(pg_dsn(), "SELECT string_agg(id::text, ',' ORDER BY id) FROM " + view)[0][0] ==
        "2,3");

  // Turned off: the plan shows the staging table and its swap.
  pg_exec(pg_dsn(), "DROP VIEW " + view);
  write_config(w, "postgres", "", suffix);
  std::ifstream in(w.file("flotilla.toml"));
  std::string toml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  toml.replace(toml.find("schema = "), 0, "in_place_max_bytes = 0\n");
  w.write("flotilla.toml", toml);
  plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  sql = sql_of(plan, orders_table("postgres", suffix));
  CHECK(std::find(sql.begin(), sql.end(), "DELETE FROM " + live) == sql.end());
  CHECK(std::any_of(sql.begin(), sql.end(),
                    [](const std::string& s) { return s.find("RENAME") != std::string::npos; }));
  flotilla_json(w, {"run", "--no-prune"}, &rc);
  CHECK(rc == 0);
  CHECK(oid() != first);
  pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS \"st_" + suffix + "_shop\" CASCADE");
}

TEST_CASE("plan-only warehouses get the exact SQL from plan and are refused by run") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  w.write("flotilla.toml", R"([targets.sf]
dialect = "snowflake"
database = "ACME"
schema = "staging__{source}"
[sources.shop]
adapter = "sqlite"
path = "shop.db"
)");
  int rc = -1;
  auto plan = flotilla_json(w, {"plan"}, &rc);
  CHECK(rc == 0);
  bool has_create = false;
  for (const auto& t : plan["tables"])
    for (const auto& s : t["sql"])
      has_create |= s.get<std::string>().find("CREATE") != std::string::npos;
  CHECK(has_create);
  // No connection: the plan says it did not look at a live table.
  CHECK_THAT(plan["tables"][0]["warnings"].dump(),
             Catch::Contains("plan-only") && Catch::Contains("not read"));
  // What its SQL does to a table already there is what the warning says: dropped and
  // made anew (no staging table is swapped in).
  bool drops_live = false;
  for (const auto& s : plan["tables"][0]["sql"])
    drops_live |= s.get<std::string>().starts_with("DROP TABLE IF EXISTS") &&
                  s.get<std::string>().find("__flotilla_staging") == std::string::npos;
  CHECK(drops_live);
  CHECK_THAT(plan["tables"][0]["warnings"].dump(),
             Catch::Contains("drops a table of this name if one exists there, rows and all") &&
                 !Catch::Contains("swap"));
  auto run = run_flotilla(w, {"run"});
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("source 'shop' loads into target 'sf', a snowflake warehouse") !=
        std::string::npos);
  CHECK(run.err.find("flotilla plan") != std::string::npos);
  CHECK(run.err.find("error FLT-C025: sources.shop:") != std::string::npos);
}

TEST_CASE("kill -9 in the middle of a run, then a rerun: nothing lost, nothing duplicated") {
  const std::string point = GENERATE(std::string("before_state"), std::string("after_state"));
  INFO("crash " << point);
  workdir w;
  std::string sql;
  for (int t = 0; t < 6; ++t)
    sql += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT, at TIMESTAMP);"
                       "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)"
                       " INSERT INTO t{0} SELECT i, 'v' || i, datetime('2025-01-01', '+' || i || ' minutes') FROM n;",
                       t);
  sqlite_exec(w.file("shop.db"), sql);
  write_config(w, "duckdb",
               "\n[sources.shop.tables.t0]\ncursor_column = \"at\"\n"
               "\n[sources.shop.tables.t1]\ncursor_column = \"at\"\nunique_key = [\"id\"]\n");
  // Two runs: the first completes; rows are added; the second dies at its 3rd commit.
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  std::string more;
  for (int t = 0; t < 6; ++t)
    more += fmt::format("INSERT INTO t{0} SELECT i, 'w' || i, datetime('2025-06-01', '+' || i || ' minutes')"
                        " FROM (WITH RECURSIVE n(i) AS (SELECT 2001 UNION ALL SELECT i + 1 FROM n WHERE i < 2500)"
                        " SELECT i FROM n);",
                        t);
  sqlite_exec(w.file("shop.db"), more);
  auto crashed = run_crashing_at(w, "3:" + point);
  CHECK(crashed.exit_code != 0);
  auto rerun = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  for (int t = 0; t < 6; ++t) {
    auto rows = duckdb_query(w.file("wh.duckdb"),
                             fmt::format("SELECT count(*), count(DISTINCT id) FROM staging__us_west__shop.t{}", t));
    INFO("table t" << t);
    CHECK(rows[0][0] == "2500");
    CHECK(rows[0][1] == "2500");
  }
}

TEST_CASE("a DuckDB source reading its own target file leaves Flotilla's copies out of its "
          "catalog") {
  workdir w;
  duckdb_query(w.file("wh.duckdb"), "CREATE TABLE main.raw (id INTEGER, v VARCHAR)");
  duckdb_query(w.file("wh.duckdb"), "INSERT INTO main.raw VALUES (1, 'a'), (2, 'b')");
  w.write("flotilla.toml", "[targets.duck]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"copy\"\n[sources.self]\nadapter = \"duckdb\"\n"
                           "path = \"wh.duckdb\"\ntarget = \"duck\"\n");
  int rc = -1;
  for (int run = 0; run < 2; ++run) {
    auto j = flotilla_json(w, {"run"}, &rc);
    INFO(j.dump(2));
    CHECK(rc == 0);
    REQUIRE(j["tables"].size() == 1);  // main.raw, never copy.raw onto itself
    CHECK(j["tables"][0]["table"] == "copy.raw");
    CHECK(j["tables"][0]["status"] == "copied");
  }
  duckdb_query(w.file("wh.duckdb"), "INSERT INTO main.raw VALUES (3, 'c')");
  CHECK(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM copy.raw")[0][0] == "3");
}

TEST_CASE("a source pointed at another file reads it whole: the watermark was the other "
          "file's") {
  workdir w;
  sqlite_exec(w.file("client1.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, ts TEXT);"
                                    "INSERT INTO orders VALUES (1, '2024-06-01 00:00:00'), "
                                    "(2, '2024-06-02 00:00:00');");
  sqlite_exec(w.file("client2.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, ts TEXT);"
                                    "INSERT INTO orders VALUES (10, '2024-01-01 00:00:00'), "
                                    "(11, '2024-01-02 00:00:00'), (12, '2024-07-01 00:00:00');");
  const auto config = [&](const std::string& file) {
    w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = "
                                         "\"wh.duckdb\"\nschema = \"s\"\n"
                                         "[sources.shop]\nadapter = \"sqlite\"\npath = "
                                         "\"{}\"\n[sources.shop.tables.orders]\n"
                                         "cursor_column = \"ts\"\n",
                                         file));
  };
  int rc = -1;
  config("client1.db");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  config("client2.db");
  auto moved = flotilla_json(w, {"run"}, &rc);
  INFO(moved.dump(2));
  CHECK(rc == 0);
  const auto& t = *find_table(moved, "s.orders");
  CHECK(t["rows"] == 3);
  CHECK_THAT(t["warnings"].dump(), Catch::Contains("client2.db now") &&
                                       Catch::Contains("client1.db") &&
                                       Catch::Contains("reads every row"));
  // None of the new file's rows below the old watermark is lost; merged on the key, as an
  // incremental load does, the rows loaded before stay (an incremental load deletes none).
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(CAST(id AS VARCHAR), ',' ORDER BY "
                                          "id) FROM s.orders")[0][0] == "1,2,10,11,12");
  // And from there on, incremental again, from the new file's watermark.
  sqlite_exec(w.file("client2.db"), "INSERT INTO orders VALUES (13, '2024-08-01 00:00:00')");
  auto next = flotilla_json(w, {"run"}, &rc);
  CHECK_FALSE((*find_table(next, "s.orders")).contains("warnings"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s.orders")[0][0] == "6");
}

TEST_CASE("the same source data reached another way keeps its watermark: the project's "
          "directory moved whole, a CSV directory named by its file") {
  // A keyless incremental table's target is the only copy of rows its source no longer
  // has (a log with retention): read in full, its rows were replaced and those lost.
  workdir w;
  std::filesystem::create_directories(w.path() / "proj" / "data");
  sqlite_exec(w.file("proj/src.db"), "CREATE TABLE log (seq INTEGER, msg TEXT);"
                                     "INSERT INTO log VALUES (1, 'a'), (2, 'b'), (3, 'c');");
  w.write("proj/data/people.csv", "id,v\n1,a\n2,b\n");
  const auto config = [&](const std::string& dir, const std::string& csv) {
    w.write(dir + "/flotilla.toml",
            fmt::format("[project]\nname = \"p\"\n[targets.wh]\ndialect = \"duckdb\"\n"
                        "path = \"wh.duckdb\"\n[sources.s]\nadapter = \"sqlite\"\n"
                        "path = \"src.db\"\n[sources.s.tables.log]\ncursor_column = \"seq\"\n"
                        "[sources.f]\nadapter = \"csv\"\npath = \"{}\"\n"
                        "[sources.f.tables.people]\ncursor_column = \"id\"\n",
                        csv));
  };
  config("proj", "data");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"-c", "proj/flotilla.toml", "run"}, &rc)["status"] == "success");
  // The sources keep only their latest rows.
  sqlite_exec(w.file("proj/src.db"), "DELETE FROM log WHERE seq <= 2; INSERT INTO log VALUES (4, 'd');");
  w.write("proj/data/people.csv", "id,v\n2,b\n3,c\n");
  REQUIRE(flotilla_json(w, {"-c", "proj/flotilla.toml", "run"}, &rc)["status"] == "success");
  std::filesystem::rename(w.path() / "proj", w.path() / "moved");
  config("moved", "data/people.csv");
  sqlite_exec(w.file("moved/src.db"), "INSERT INTO log VALUES (5, 'e');");
  w.write("moved/data/people.csv", "id,v\n3,c\n4,d\n");
  const auto j = flotilla_json(w, {"-c", "moved/flotilla.toml", "run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 0);
  for (const auto& t : j["tables"])
    CHECK_FALSE(t.contains("warnings"));
  CHECK(duckdb_query(w.file("moved/wh.duckdb"), "SELECT string_agg(CAST(seq AS VARCHAR), ',' "
                                                "ORDER BY seq) FROM s.log")[0][0] == "1,2,3,4,5");
  CHECK(duckdb_query(w.file("moved/wh.duckdb"), "SELECT string_agg(CAST(id AS VARCHAR), ',' "
                                                "ORDER BY id) FROM f.people")[0][0] == "1,2,3,4");
}

TEST_CASE("a target table whose rows a finished run recorded is not reported as recovered "
          "when the table comes back to it") {
  workdir w;
  sqlite_exec(w.file("shop.db"), "CREATE TABLE ev (id INTEGER PRIMARY KEY, ts INTEGER);"
                                 "INSERT INTO ev VALUES (1, 10);");
  const auto config = [&](const std::string& schema) {
    w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = "
                                         "\"wh.duckdb\"\nschema = \"{}\"\n"
                                         "[sources.s]\nadapter = \"sqlite\"\npath = "
                                         "\"shop.db\"\n[sources.s.tables.ev]\n"
                                         "cursor_column = \"ts\"\n",
                                         schema));
  };
  int rc = -1;
  config("a");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("shop.db"), "INSERT INTO ev VALUES (2, 20)");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  // Into another schema for a while, then back: the target table in "a" holds the token
  // of a run that recorded its rows, behind the watermark state has now.
  config("b");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("shop.db"), "INSERT INTO ev VALUES (3, 30), (4, 40)");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  config("a");
  auto back = run_flotilla(w, {"run", "--output", "json"});
  INFO(back.out << back.err);
  const auto j = nlohmann::json::parse(back.out);
  const auto* t = find_table(j, "a.ev");
  REQUIRE(t != nullptr);
  CHECK_FALSE(t->contains("recovered"));
  CHECK(back.err.find("was stopped before recording") == std::string::npos);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), count(DISTINCT id) FROM a.ev")[0] ==
        std::vector<std::string>{"4", "4"});
}

TEST_CASE("kill -9 between an incremental table's target commit and its state commit: the "
          "rerun reports the rows the killed run committed") {
  workdir w;
  std::string sql;
  for (int t = 0; t < 2; ++t)
    sql += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT, at TIMESTAMP);"
                       "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)"
                       " INSERT INTO t{0} SELECT i, 'v' || i, datetime('2025-01-01', '+' || i || ' minutes') FROM n;",
                       t);
  sqlite_exec(w.file("shop.db"), sql);
  write_config(w, "duckdb",
               "\n[sources.shop.tables.t0]\ncursor_column = \"at\"\n"
               "\n[sources.shop.tables.t1]\ncursor_column = \"at\"\n");
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  std::set<std::string> known{first["run_id"].get<std::string>()};
  sqlite_exec(w.file("shop.db"),
              "INSERT INTO t0 SELECT id + 1000, v, datetime(at, '+1 year') FROM t0 WHERE id <= 40;"
              "INSERT INTO t1 SELECT id + 1000, v, datetime(at, '+1 year') FROM t1 WHERE id <= 40;");
  // Killed right after the first table's target commit, before its state commit.
  auto crashed = run_crashing_at(w, "1:before_state");
  REQUIRE(crashed.exit_code != 0);
  // plan says so before anything runs again.
  auto plan = flotilla_json(w, {"plan"}, &rc);

  auto rerun = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  known.insert(rerun["run_id"].get<std::string>());
  const std::string killed = other_run(w, known);  // its run.json, written by the rerun
  REQUIRE_FALSE(killed.empty());
  // 41 rows: the 40 new ones and the one at the watermark, which an incremental read takes
  // again (merged on the key, never twice).
  CHECK(plan.dump().find("run " + killed + " committed 41 row(s)") != std::string::npos);
  REQUIRE(rerun["tables"].size() == 2);
  // The killed run committed the first table, and maybe the second (the two copies may
  // overlap, and the kill comes at the first state commit): each table is either
  // recovered (its 41 rows the killed run's, the rerun reading only the watermark's row
  // again) or loaded by the rerun (41 rows).
  std::size_t recovered_tables = 0;
  std::uint64_t recovered = 0;
  for (const auto& t : rerun["tables"]) {
    INFO(t.dump());
    CHECK(t["status"] == "copied");
    if (t.contains("recovered")) {
      ++recovered_tables;
      CHECK(t["rows"] == 1);  // the killed run's rows are not read again: its watermark's row
      CHECK(t["recovered"]["run_id"] == killed);
      CHECK(t["recovered"]["rows"] == 41);
      recovered += t["recovered"]["rows"].get<std::uint64_t>();
      CHECK(t["recovered"]["watermark"].get<std::string>().starts_with("2026-"));
      CHECK(t["warnings"].dump().find("stopped before recording them") != std::string::npos);
    } else {
      CHECK(t["rows"] == 41);
    }
  }
  CHECK(recovered_tables >= 1);
  // Every row once.
  for (int t = 0; t < 2; ++t) {
    auto rows = duckdb_query(w.file("wh.duckdb"),
                             fmt::format("SELECT count(*), count(DISTINCT id) FROM staging__us_west__shop.t{}", t));
    CHECK(rows[0][0] == "340");
    CHECK(rows[0][1] == "340");
  }
  // The rerun's table_finished event carries them as well.
  std::ifstream events(w.path() / ".flotilla" / "runs" / rerun["run_id"].get<std::string>() /
                       "events.ndjson");
  std::string line;
  std::uint64_t event_recovered = 0;
  while (std::getline(events, line)) {
    auto e = nlohmann::json::parse(line);
    if (e["type"] == "table_finished") {
      event_recovered += e["table_finished"]["recovered_rows"].get<std::uint64_t>();
      if (e["table_finished"]["recovered_rows"] != 0)
        CHECK(e["table_finished"]["recovered_run_id"] == killed);
    }
  }
  CHECK(event_recovered == recovered);
  // Once reported, they are state's: the next run recovers nothing.
  auto third = flotilla_json(w, {"run"}, &rc);
  for (const auto& t : third["tables"])
    CHECK_FALSE(t.contains("recovered"));
}

TEST_CASE("a killed run's run.json and events, written by the next run, list its tables in "
          "flotilla.toml's order") {
  workdir w;
  for (const char* db : {"zeta.db", "alpha.db"})
    sqlite_exec(w.file(db), "CREATE TABLE b (id INTEGER PRIMARY KEY); INSERT INTO b VALUES (1);"
                            "CREATE TABLE a (id INTEGER PRIMARY KEY); INSERT INTO a VALUES (1);");
  // zeta first: the state store keeps the tables by key, where alpha comes first.
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.zeta]\nadapter = \"sqlite\"\npath = \"zeta.db\"\n"
                           "[sources.alpha]\nadapter = \"sqlite\"\npath = \"alpha.db\"\n");
  auto crashed = run_crashing_at(w, "4:after_state");  // all four committed, then killed
  REQUIRE(crashed.exit_code != 0);
  int rc = -1;
  auto rerun = flotilla_json(w, {"run"}, &rc);
  const std::string killed = other_run(w, {rerun["run_id"].get<std::string>()});
  REQUIRE_FALSE(killed.empty());
  std::ifstream in(w.path() / ".flotilla" / "runs" / killed / "run.json");
  const auto record = nlohmann::json::parse(in);
  REQUIRE(record["status"] == "interrupted");
  std::vector<std::string> listed;
  for (const auto& t : record["tables"])
    listed.push_back(t["source"].get<std::string>() + "." + t["source_table"].get<std::string>());
  CHECK(listed == std::vector<std::string>{"zeta.a", "zeta.b", "alpha.a", "alpha.b"});
  std::ifstream events(w.path() / ".flotilla" / "runs" / killed / "events.ndjson");
  std::vector<std::string> finished;
  std::string line;
  while (std::getline(events, line)) {
    auto e = nlohmann::json::parse(line);
    if (e["type"] == "table_finished")
      finished.push_back(e["source"].get<std::string>() + "." + e["table"].get<std::string>());
  }
  CHECK(finished == listed);
}

TEST_CASE("a run killed after recording its results, before its run.json, gets it from the "
          "next run") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb");
  auto killed = run_crashing_at(w, "run_json");
  REQUIRE(killed.exit_code != 0);
  auto again = run_flotilla(w, {"run", "--output", "json"});
  INFO(again.err);
  CHECK(again.exit_code == 0);
  const auto rerun = nlohmann::json::parse(again.out);
  const std::string first = other_run(w, {rerun["run_id"].get<std::string>()});
  REQUIRE_FALSE(first.empty());
  CHECK_THAT(again.err, Catch::Contains("note: run " + first + " ended after recording its "
                                        "results, before writing its run.json"));
  std::ifstream in(w.path() / ".flotilla" / "runs" / first / "run.json");
  REQUIRE(in.good());
  const auto record = nlohmann::json::parse(in);
  CHECK(record["status"] == "success");  // as recorded: its tables had all committed
  CHECK(record["tables"].size() == 2);
  for (const auto& t : record["tables"])
    CHECK(t["status"] == "copied");
  CHECK(record["note"].get<std::string>().find("written by the next run") != std::string::npos);
  // Once: the run after does not write it again.
  auto third = run_flotilla(w, {"run"});
  CHECK(third.err.find("ended after recording") == std::string::npos);
}

TEST_CASE("a run killed while it writes its events gets them written from its record, the "
          "cut line removed") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb");
  auto killed = run_crashing_at(w, "table_events");
  REQUIRE(killed.exit_code != 0);
  std::filesystem::path file;
  for (const auto& d : std::filesystem::directory_iterator(w.path() / ".flotilla" / "runs"))
    file = d.path() / "events.ndjson";
  REQUIRE(std::filesystem::exists(file));
  // As a kill in the middle of a write leaves it: part of a line.
  std::ofstream(file, std::ios::app) << "{\"run_id\":\"x\",\"sequence\":2,\"timest";
  auto again = run_flotilla(w, {"run"});
  INFO(again.err);
  CHECK(again.exit_code == 0);
  // The run record is written beside the events: killed before it said the run finished,
  // the run is an interrupted one; after, one whose events were cut short. Either way its
  // file ends up whole, once.
  CHECK_THAT(again.err, Catch::Contains("was killed while it wrote its events") ||
                            Catch::Contains("did not finish"));
  std::ifstream in(file);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    REQUIRE_NOTHROW(nlohmann::json::parse(line));
    lines.push_back(nlohmann::json::parse(line));
  }
  REQUIRE(lines.size() == 6);  // run_started, two tables' started and finished, run_finished
  for (std::size_t i = 0; i < lines.size(); ++i)
    CHECK(lines[i]["sequence"] == i + 1);
  CHECK(lines.front()["type"] == "run_started");
  CHECK(lines.back()["type"] == "run_finished");
  CHECK((lines.back()["run_finished"]["status"] == "success" ||
         lines.back()["run_finished"]["status"] == "interrupted"));
  std::size_t finished = 0;
  for (const auto& l : lines)
    finished += l["type"] == "table_finished" ? 1 : 0;
  CHECK(finished == 2);
  // Once: the run after leaves it as it is.
  auto third = run_flotilla(w, {"run"});
  CHECK(third.err.find("was killed while it wrote its events") == std::string::npos);
  std::ifstream again_in(file);
  std::size_t count = 0;
  for (std::string line; std::getline(again_in, line);)
    ++count;
  CHECK(count == lines.size());
}

TEST_CASE("a run killed with every table event written and no run_finished gets them once, "
          "then run_finished") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb");
  auto killed = run_crashing_at(w, "run_json");
  REQUIRE(killed.exit_code != 0);
  std::filesystem::path file;
  for (const auto& d : std::filesystem::directory_iterator(w.path() / ".flotilla" / "runs"))
    file = d.path() / "events.ndjson";
  // As a kill right before run_finished leaves it: every table event, no run_finished.
  std::vector<std::string> kept;
  {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
      kept.push_back(line);
  }
  REQUIRE(kept.size() == 6);
  kept.pop_back();
  const auto original = nlohmann::json::parse(kept[1]);  // the first table_started
  const auto original_end = nlohmann::json::parse(kept[2]);
  REQUIRE(original["type"] == "table_started");
  REQUIRE(original_end["type"] == "table_finished");
  {
    std::ofstream out(file, std::ios::trunc);
    for (const auto& l : kept)
      out << l << "\n";
  }
  auto again = run_flotilla(w, {"run"});
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.err, Catch::Contains("was killed while it wrote its events"));
  std::ifstream in(file);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 6);
  for (std::size_t i = 0; i < lines.size(); ++i)
    CHECK(lines[i]["sequence"] == i + 1);
  CHECK(lines.back()["type"] == "run_finished");
  CHECK(lines.back()["run_finished"]["status"] == "success");
  CHECK(lines.back()["run_finished"]["duration_us"].get<std::int64_t>() > 0);
  // Written again from the record as the run wrote them: the load, its duration and
  // times (docs/events.md: the same payload for the same sequence).
  CHECK(lines[1]["table_started"] == original["table_started"]);
  CHECK(lines[1]["table_started"]["mode"] == "full_refresh");
  CHECK(lines[1]["timestamp_us"] == original["timestamp_us"]);
  CHECK(lines[2]["table_finished"] == original_end["table_finished"]);
  CHECK(lines[2]["table_finished"]["duration_us"].get<std::int64_t>() > 0);
  CHECK(lines[2]["timestamp_us"] == original_end["timestamp_us"]);
}

TEST_CASE("kill -9, then retry: the interrupted run is named and its selection runs again") {
  workdir w;
  std::string sql;
  for (int t = 0; t < 4; ++t)
    sql += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT);"
                       "INSERT INTO t{0} VALUES (1, 'a'), (2, 'b');",
                       t);
  sqlite_exec(w.file("shop.db"), sql);
  write_config(w, "duckdb", "prune_unchanged = true\n");
  auto crashed = run_crashing_at(w, "2:after_state", {"run", "--filter", "client=acme"});
  REQUIRE(crashed.exit_code != 0);
  auto retried = run_flotilla(w, {"retry", "--output", "json"});
  CHECK(retried.exit_code == 0);
  CHECK(retried.err.find("did not finish") != std::string::npos);
  CHECK(retried.err.find("--filter client=acme") != std::string::npos);
  auto j = nlohmann::json::parse(retried.out);
  REQUIRE(j["tables"].size() == 4);
  std::size_t pruned = 0;
  for (const auto& t : j["tables"]) {
    CHECK(t["status"] != "failed");
    pruned += t["status"] == "pruned" ? 1 : 0;
  }
  CHECK(pruned == 2);  // the two tables the killed run committed
  for (int t = 0; t < 4; ++t)
    CHECK(duckdb_query(w.file("wh.duckdb"),
                       fmt::format("SELECT count(*) FROM staging__us_west__shop.t{}", t))[0][0] ==
          "2");
  // The retry finished: nothing is left to retry.
  auto again = run_flotilla(w, {"retry"});
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("nothing to retry") != std::string::npos);
}

TEST_CASE("the retry of a run with --no-prune copies its tables, unchanged ones too") {
  workdir w;
  std::string sql;
  for (int t = 0; t < 4; ++t)
    sql += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT);"
                       "INSERT INTO t{0} VALUES (1, 'a'), (2, 'b');",
                       t);
  sqlite_exec(w.file("shop.db"), sql);
  write_config(w, "duckdb", "prune_unchanged = true\n");
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  // --no-prune for a change no marker sees; killed after two tables.
  auto crashed = run_crashing_at(w, "2:after_state", {"run", "--no-prune"});
  REQUIRE(crashed.exit_code != 0);
  auto retried = run_flotilla(w, {"retry", "--output", "json"});
  CHECK(retried.exit_code == 0);
  auto j = nlohmann::json::parse(retried.out);
  REQUIRE(j["tables"].size() == 4);
  for (const auto& t : j["tables"]) {
    CHECK(t["status"] == "copied");
    CHECK_THAT(t["not_pruned"].get<std::string>(), Catch::Contains("--no-prune"));
  }
  // A retry of a run without it prunes what is unchanged (the test above).
}

TEST_CASE("retry after a filtered run names the tables an earlier run left failed") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb", "[sources.shop.tables.orders]\ncolumns = { status = \"int\" }\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 1);  // orders: status is text, declared int
  REQUIRE(flotilla_json(w, {"run", "--filter", "table=customers"}, &rc)["status"] == "success");
  auto r = run_flotilla(w, {"retry"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("has no failed table. 1 table(s) failed in an earlier run") &&
                                Catch::Contains("shop.orders (run "));
  // Excluded since: `flotilla run` would not copy it, so retry does not suggest it.
  write_config(w, "duckdb", "exclude = [\"orders\"]\n");
  auto excluded = run_flotilla(w, {"retry"});
  CHECK(excluded.exit_code == 0);
  CHECK_THAT(excluded.out + excluded.err, Catch::Contains("has no failed table") &&
                                              !Catch::Contains("shop.orders"));
  // A selection that matches nothing is said.
  auto none = run_flotilla(w, {"run", "--filter", "table=ordrs"});
  CHECK(none.exit_code == 0);
  CHECK_THAT(none.err, Catch::Contains("the selection (--filter table=ordrs) matched no table"));
}

TEST_CASE("retry of a filtered run whose source could not be read retries the filter's tables "
          "only") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb", "");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  std::filesystem::rename(w.file("shop.db"), w.file("shop.db.away"));
  auto failed = flotilla_json(w, {"run", "--filter", "table=customers"}, &rc);
  REQUIRE(rc == 1);
  REQUIRE(failed["errors"].size() == 1);
  std::filesystem::rename(w.file("shop.db.away"), w.file("shop.db"));
  sqlite_exec(w.file("shop.db"), "CREATE TABLE fresh (id INTEGER); INSERT INTO fresh VALUES (1);");
  auto retry = flotilla_json(w, {"retry"}, &rc);
  CHECK(rc == 0);
  INFO(retry.dump());
  REQUIRE(retry["tables"].size() == 1);
  CHECK(retry["tables"][0]["source_table"] == "customers");
  CHECK(retry["tables"][0]["status"] == "copied");
}

TEST_CASE("a run killed between a table's schema change and its rows reports the change") {
  workdir w;
  sqlite_exec(w.file("shop.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
                                 "INSERT INTO t VALUES (1, 'a'), (2, 'b');");
  write_config(w, "duckdb", "");
  int rc = -1;
  const std::string first = flotilla_json(w, {"run"}, &rc)["run_id"];
  REQUIRE(rc == 0);
  sqlite_exec(w.file("shop.db"), "ALTER TABLE t ADD COLUMN extra INTEGER;"
                                 "INSERT INTO t VALUES (3, 'c', 7);");
  auto crashed = run_crashing_at(w, "after_ddl");
  REQUIRE(crashed.exit_code != 0);
  auto next = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  const std::string killed = other_run(w, {first, next["run_id"].get<std::string>()});
  REQUIRE_FALSE(killed.empty());
  std::ifstream json_in(w.path() / ".flotilla" / "runs" / killed / "run.json");
  REQUIRE(json_in.good());
  const auto run = nlohmann::json::parse(json_in);
  INFO(run.dump(2));
  CHECK(run["status"] == "interrupted");
  REQUIRE(run["tables"].size() == 1);
  CHECK(run["tables"][0]["status"] == "failed");
  CHECK_THAT(run["tables"][0]["error"].get<std::string>(),
             Catch::Contains("schema change committed on the target and before it recorded the "
                             "table's rows"));
  REQUIRE(run["drift"]["actions_taken"].size() == 1);
  CHECK(run["drift"]["actions_taken"][0]["column"] == "extra");
  std::vector<nlohmann::json> events;
  std::ifstream in(w.path() / ".flotilla" / "runs" / killed / "events.ndjson");
  for (std::string line; std::getline(in, line);)
    events.push_back(nlohmann::json::parse(line));
  std::size_t actions = 0;
  for (const auto& e : events)
    actions += e["type"] == "schema_action" ? 1 : 0;
  CHECK(actions == 1);
  // The note of the change is gone once reported, and a run's own once it finished.
  sqlite_exec(w.file("shop.db"), "ALTER TABLE t ADD COLUMN more INTEGER;");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  {
    auto store = flotilla::storage::state_store::open(w.path() / ".flotilla" / "state",
                                                      {.read_only = true});
    REQUIRE(store);
    auto notes = store->list<flotilla::storage::pb::TableResult>("#altered/");
    REQUIRE(notes);
    CHECK(notes->empty());
  }
  // The rows: all three, once, after the next run.
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT count(*), count(DISTINCT id), sum(extra) FROM staging__us_west__shop.t")[0] ==
        std::vector<std::string>{"3", "3", "7"});
}

TEST_CASE("the next run writes the events of the tables a killed run committed, under its run id") {
  workdir w;
  std::string sql;
  for (int t = 0; t < 4; ++t)
    sql += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT);"
                       "INSERT INTO t{0} VALUES (1, 'a'), (2, 'b'), ({0} + 3, 'c');",
                       t);
  sqlite_exec(w.file("shop.db"), sql);
  write_config(w, "duckdb", "prune_unchanged = true\n");
  int rc = -1;
  const std::string first = flotilla_json(w, {"run"}, &rc)["run_id"];
  REQUIRE(rc == 0);
  std::string added;
  for (int t = 0; t < 4; ++t)
    added += fmt::format("ALTER TABLE t{} ADD COLUMN extra INTEGER;", t);
  sqlite_exec(w.file("shop.db"), added);
  auto crashed = run_crashing_at(w, "2:after_state");
  REQUIRE(crashed.exit_code != 0);
  auto next = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  // The killed run's directory now holds its events: the two committed tables (each its
  // added column and its result), then run_finished with status interrupted.
  std::vector<nlohmann::json> events;
  const std::string killed = other_run(w, {first, next["run_id"].get<std::string>()});
  REQUIRE_FALSE(killed.empty());
  std::ifstream in(w.path() / ".flotilla" / "runs" / killed / "events.ndjson");
  for (std::string line; std::getline(in, line);)
    events.push_back(nlohmann::json::parse(line));
  // Per table: table_started, its schema_action, table_finished. Two committed; a table
  // whose added column committed before the kill and whose rows did not is listed failed,
  // with its action (how many depends on how far the others got).
  REQUIRE(events.size() >= 8);
  REQUIRE((events.size() - 2) % 3 == 0);
  CHECK(events.front()["type"] == "run_started");
  CHECK(events.back()["type"] == "run_finished");
  CHECK(events.back()["run_finished"]["status"] == "interrupted");
  CHECK(events.back()["run_finished"]["tables_copied"] == 2);
  const std::size_t listed = (events.size() - 2) / 3;
  CHECK(events.back()["run_finished"]["tables_failed"] == listed - 2);
  std::uint64_t rows = 0;
  for (std::size_t i = 1; i + 2 < events.size(); i += 3) {
    CHECK(events[i]["run_id"] == killed);
    CHECK(events[i]["type"] == "table_started");
    CHECK(events[i]["table_started"]["mode"] == "full_refresh");
    CHECK(events[i + 1]["type"] == "schema_action");
    CHECK(events[i + 1]["schema_action"]["action"] == "add_columns");
    CHECK(events[i + 1]["schema_action"]["column"] == "extra");
    CHECK(events[i + 2]["type"] == "table_finished");
    const auto status = events[i + 2]["table_finished"]["status"].get<std::string>();
    CHECK((status == "copied" || status == "failed"));
    CHECK(events[i + 2]["table_finished"]["duration_us"].get<std::int64_t>() < 60'000'000);
    if (status == "copied")
      rows += events[i + 2]["table_finished"]["rows"].get<std::uint64_t>();
  }
  CHECK(rows == 6);
  CHECK(events.back()["run_finished"]["tables_checked"] == listed);
  // And its run JSON file: what it committed, status interrupted.
  {
    std::ifstream json_in(w.path() / ".flotilla" / "runs" / killed / "run.json");
    REQUIRE(json_in.good());
    const auto run = nlohmann::json::parse(json_in);
    CHECK(run["run_id"] == killed);
    CHECK(run["status"] == "interrupted");
    REQUIRE(run["tables"].size() == listed);
    std::uint64_t json_rows = 0;
    std::size_t copied_tables = 0;
    for (const auto& t : run["tables"]) {
      CHECK(t["source"] == "shop");
      if (t["status"] == "copied") {
        ++copied_tables;
        json_rows += t["rows"].get<std::uint64_t>();
      } else {
        CHECK(t["status"] == "failed");
      }
    }
    CHECK(copied_tables == 2);
    CHECK(json_rows == 6);
    CHECK(run["drift"]["tables_checked"] == listed);
    REQUIRE(run["drift"]["actions_taken"].size() == listed);
    CHECK(run["drift"]["actions_taken"][0]["action"] == "add_columns");
    CHECK(run["drift"]["actions_taken"][0]["column"] == "extra");
  }
  // The next run copied the other two, which its own events report (the two the killed
  // run committed are pruned).
  std::size_t copied = 0;
  for (const auto& t : next["tables"])
    copied += t["status"] == "copied" ? 1 : 0;
  CHECK(copied == 2);
}

TEST_CASE("Ctrl-C stops cleanly: tables in flight roll back, the rest are skipped, a rerun completes") {
  workdir w;
  std::string sql;
  for (int t = 0; t < 24; ++t)
    sql += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT);"
                       "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)"
                       " INSERT INTO t{0} SELECT i, 'v' || i FROM n;",
                       t);
  sqlite_exec(w.file("shop.db"), sql);
  write_config(w, "duckdb", "prune_unchanged = true\n");
  setenv("FLOTILLA_INTERRUPT_AT", "2", 1);
  int rc = -1;
  auto stopped = flotilla_json(w, {"run"}, &rc);
  unsetenv("FLOTILLA_INTERRUPT_AT");
  CHECK(rc == 1);
  CHECK(stopped["status"] == "partial");
  std::size_t copied = 0, not_copied = 0;
  for (const auto& t : stopped["tables"]) {
    if (t["status"] == "copied")
      ++copied;
    else
      ++not_copied;
  }
  CHECK(copied >= 2);
  CHECK(not_copied > 0);
  // Every table is either complete or absent.
  auto present = duckdb_query(w.file("wh.duckdb"),
                              "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                              "'staging__us_west__shop' AND table_name NOT LIKE '%flotilla%'");
  for (const auto& row : present)
    CHECK(duckdb_query(w.file("wh.duckdb"),
                       "SELECT count(*) FROM staging__us_west__shop.\"" + row[0] + "\"")[0][0] == "300");
  auto rerun = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  for (int t = 0; t < 24; ++t)
    CHECK(duckdb_query(w.file("wh.duckdb"),
                       fmt::format("SELECT count(*) FROM staging__us_west__shop.t{}", t))[0][0] == "300");
}

TEST_CASE("Ctrl-C after the last table committed: the run succeeded and exits 0") {
  workdir w;
  sqlite_exec(w.file("shop.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, v TEXT);"
                                 "INSERT INTO orders VALUES (1, 'a'), (2, 'b');");
  write_config(w, "duckdb");
  setenv("FLOTILLA_INTERRUPT_AT", "1", 1);  // SIGINT right after the only table's commit
  int rc = -1;
  auto stopped = flotilla_json(w, {"run"}, &rc);
  unsetenv("FLOTILLA_INTERRUPT_AT");
  CHECK(stopped["status"] == "success");
  CHECK((*find_table(stopped, "staging__us_west__shop.orders"))["status"] == "copied");
  CHECK(rc == 0);
}

TEST_CASE("an unreadable target table is treated as absent and rebuilt with a full refresh") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  write_config(w, "duckdb");
  // A live table whose column type Flotilla cannot map: DESCRIBE cannot be read back.
  duckdb_exec(w.file("wh.duckdb"), "CREATE SCHEMA staging__us_west__shop;"
                                   "CREATE TABLE staging__us_west__shop.orders (id INTEGER, odd INTERVAL[]);");
  int rc = -1;
  // plan counts the drop and recreate among the tables to alter, and says what goes.
  auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump(2));
  CHECK(plan["to_alter"] == 1);
  CHECK_THAT(plan.dump(), Catch::Contains("grants, comments and indexes made by hand are lost"));
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK((*find_table(run, "staging__us_west__shop.orders"))["status"] == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM staging__us_west__shop.orders")[0][0] == "3");
}

TEST_CASE("keep_runs keeps the newest runs and their directories; retry still finds the latest") {
  workdir w;
  sqlite_exec(w.file("shop.db"), k_orders_sql);
  const std::string config = R"([project]
name = "test"
keep_runs = {}

[targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
schema = "staging__{{region}}__{{source}}"

[sources.shop]
adapter = "sqlite"
path = "shop.db"
tags = {{ client = "acme", region = "us_west" }}
)";
  w.write("flotilla.toml", fmt::format(fmt::runtime(config), 2));
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    int rc = -1;
    auto run = flotilla_json(w, {"run"}, &rc);
    REQUIRE(rc == 0);
    ids.push_back(run["run_id"].get<std::string>());
  }
  auto run_dirs = [&] {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(w.path() / ".flotilla" / "runs"))
      out.insert(e.path().filename().string());
    return out;
  };
  CHECK(run_dirs() == std::set<std::string>{ids[2], ids[3]});
  // `retry` reads the latest run's record: it is kept.
  auto retry = run_flotilla(w, {"retry"});
  INFO(retry.err);
  CHECK(retry.exit_code == 0);
  CHECK((retry.out + retry.err).find("latest run (" + ids[3] + ")") != std::string::npos);

  // 0 keeps every run.
  w.write("flotilla.toml", fmt::format(fmt::runtime(config), 0));
  int rc = -1;
  auto fifth = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  CHECK(run_dirs() == std::set<std::string>{ids[2], ids[3], fifth["run_id"].get<std::string>()});

  // A negative count is a configuration error naming the key.
  w.write("flotilla.toml", fmt::format(fmt::runtime(config), -1));
  auto bad = run_flotilla(w, {"run"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("project.keep_runs") != std::string::npos);
}

TEST_CASE("a target that refuses its first connections fails the remaining tables at once; a "
          "rerun after the fix copies them all") {
  workdir w;
  std::string ddl;
  constexpr int tables = 12;
  for (int i = 0; i < tables; ++i)
    ddl += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT); "
                       "INSERT INTO t{0} VALUES (1, 'a'), (2, 'b');\n",
                       i);
  sqlite_exec(w.file("shop.db"), ddl);
  // A database that does not exist yet, on the test server.
  const std::string database = "flotilla_absent_" + unique_suffix();
  std::string dsn = pg_dsn();
  if (dsn.starts_with("postgresql://") || dsn.starts_with("postgres://"))
    dsn = dsn.substr(0, dsn.rfind('/')) + "/" + database;
  else
    dsn += " dbname=" + database;
  w.write("flotilla.toml", fmt::format(R"([project]
name = "test"

[targets.wh]
dialect = "postgres"
dsn = "{}"
schema = "{{source}}"

[sources.shop]
adapter = "sqlite"
path = "shop.db"
)",
                                       dsn));
  int code = 0;
  auto run = flotilla_json(w, {"run"}, &code);
  CHECK(code != 0);
  REQUIRE(run["tables"].size() == tables);
  std::size_t not_tried = 0;
  for (const auto& t : run["tables"]) {
    CHECK(t["status"] == "failed");
    CHECK(t["error_code"] == "FLT-R003");
    const std::string error = t["error"];
    // Every table names the reason the target gave.
    CHECK_THAT(error, Catch::Contains(database) && Catch::Contains("does not exist"));
    if (error.find("not tried for this table") != std::string::npos)
      ++not_tried;
  }
  // Three failed connections in a row, and a few more started at the same time by the
  // other workers; the rest were not tried.
  CHECK(not_tried >= tables - 8);

  pg_exec(pg_dsn(), "CREATE DATABASE " + database);
  auto again = flotilla_json(w, {"run"}, &code);
  pg_exec(pg_dsn(), "DROP DATABASE " + database + " WITH (FORCE)");
  CHECK(code == 0);
  REQUIRE(again["tables"].size() == tables);
  for (const auto& t : again["tables"]) {
    CHECK(t["status"] == "copied");
    CHECK(t["rows"] == 2);
  }
}

TEST_CASE("a fleet of PostgreSQL sources keeps a bounded number of source connections open, "
          "so a role's connection limit does not fail the run") {
  workdir w;
  const std::string dsn = pg_dsn();
  const std::string schema = "flt_conn_" + unique_suffix(), role = schema + "_r";
  // 6 connections: two catalog readers and one worker keeping 4 sources open at once. Each
  // of the 12 sources kept open for the whole run needed 12. The limit leaves 2 more: the
  // server counts a closed connection until its backend has exited, which on a loaded
  // machine can lag the next connection.
  pg_exec(dsn, fmt::format("CREATE SCHEMA {0}; CREATE TABLE {0}.t (id int PRIMARY KEY);"
                           "INSERT INTO {0}.t VALUES (1); CREATE ROLE {1} LOGIN CONNECTION LIMIT 8;"
                           "GRANT USAGE ON SCHEMA {0} TO {1}; GRANT SELECT ON {0}.t TO {1}",
                           schema, role));
  std::string as_role;
  {
    PQconninfoOption* options = PQconninfoParse(dsn.c_str(), nullptr);
    REQUIRE(options != nullptr);
    for (auto* o = options; o->keyword; ++o)
      if (o->val && std::string(o->keyword) != "user")
        as_role += fmt::format("{}='{}' ", o->keyword, o->val);
    PQconninfoFree(options);
  }
  as_role += "user=" + role;
  std::string config = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                       "[io]\nmax_connections_per_endpoint = 1\n";
  for (int i = 1; i <= 12; ++i)
    config += fmt::format("[sources.p{}]\nadapter = \"postgres\"\ndsn = \"{}\"\ninclude = [\"{}.t\"]\n",
                          i, as_role, schema);
  w.write("flotilla.toml", config);
  int rc = -1;
  const auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(run["status"] == "success");
  std::size_t copied = 0;
  for (const auto& t : run["tables"])
    copied += t["status"] == "copied" ? 1 : 0;
  CHECK(copied == 12);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM p12.t")[0][0] == "1");
  pg_exec(dsn, fmt::format("DROP SCHEMA {0} CASCADE; DROP OWNED BY {1}; DROP ROLE {1}", schema, role));
}

TEST_CASE("a PostgreSQL target role missing a grant is told which: CREATE on the database, or "
          "the _flotilla bookkeeping table") {
  workdir w;
  const std::string dsn = pg_dsn();
  const std::string database = "flt_grants_" + unique_suffix(), role = database + "_r";
  pg_exec(dsn, "CREATE DATABASE " + database);
  pg_exec(dsn, fmt::format("CREATE ROLE {} LOGIN", role));
  std::string as_postgres, as_role;
  {
    PQconninfoOption* options = PQconninfoParse(dsn.c_str(), nullptr);
    REQUIRE(options != nullptr);
    for (auto* o = options; o->keyword; ++o)
      if (o->val && std::string(o->keyword) != "user" && std::string(o->keyword) != "dbname")
        as_postgres += fmt::format("{}='{}' ", o->keyword, o->val);
    PQconninfoFree(options);
  }
  as_postgres += "dbname=" + database + " ";
  as_role = as_postgres + "user=" + role;
  const std::string with_user = as_postgres + "user=postgres";
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
                                "INSERT INTO t VALUES (1, 'a');");
  const auto config = [&](const std::string& target_dsn) {
    w.write("flotilla.toml",
            fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{}\"\nschema = \"stage\"\n"
                        "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                        "[sources.s.tables.t]\ncursor_column = \"id\"\n",
                        target_dsn));
  };
  int rc = -1;
  // No CREATE on the database: the schema cannot be made.
  config(as_role);
  auto no_schema = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  REQUIRE(no_schema["tables"].size() == 1);
  CHECK_THAT(no_schema["tables"][0]["error"].get<std::string>(),
             Catch::Contains("permission denied for database") &&
                 Catch::Contains("CREATE on the target's database, so it can create the schema "
                                 "stage"));
  // Loaded once by its owner, then every grant on the table and its schema, but none on
  // the bookkeeping table.
  config(with_user);
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  pg_exec(with_user, fmt::format("GRANT USAGE, CREATE ON SCHEMA stage TO {0};"
                                 "GRANT SELECT, INSERT, UPDATE, DELETE ON stage.t TO {0}",
                                 role));
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (2, 'b')");
  config(as_role);
  auto no_tokens = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  REQUIRE(no_tokens["tables"].size() == 1);
  const std::string error = no_tokens["tables"][0]["error"];
  CHECK_THAT(error, Catch::Contains("USAGE on schema _flotilla and SELECT, INSERT, UPDATE and "
                                    "DELETE on _flotilla._flotilla_commits"));
  // Those grants are what it needs.
  pg_exec(with_user, fmt::format("GRANT USAGE ON SCHEMA _flotilla TO {0};"
                                 "GRANT SELECT, INSERT, UPDATE, DELETE ON _flotilla._flotilla_commits "
                                 "TO {0}",
                                 role));
  auto granted = flotilla_json(w, {"run"}, &rc);
  INFO(granted.dump());
  CHECK(rc == 0);
  CHECK(pg_query(with_user, "SELECT count(*) FROM stage.t")[0][0] == "2");
  // The merge's own table refused in the target schema: that schema's grants are named,
  // not the bookkeeping table's.
  pg_exec(with_user, fmt::format("REVOKE CREATE ON SCHEMA stage FROM {}", role));
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (3, 'c')");
  auto no_create = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  REQUIRE(no_create["tables"].size() == 1);
  CHECK_THAT(no_create["tables"][0]["error"].get<std::string>(),
             Catch::Contains("permission denied for schema stage") &&
                 Catch::Contains("USAGE and CREATE on its schema") &&
                 !Catch::Contains("_flotilla._flotilla_commits"));
  pg_exec(dsn, fmt::format("DROP DATABASE {} WITH (FORCE)", database));
  pg_exec(dsn, fmt::format("DROP ROLE {}", role));
}

TEST_CASE("a source that lists no tables where an earlier run copied some fails them, as an "
          "unreadable source does") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE a (id INTEGER PRIMARY KEY); INSERT INTO a VALUES (1);"
                                "CREATE TABLE b (id INTEGER PRIMARY KEY); INSERT INTO b VALUES (2);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // A failed sync leaves the file empty: SQLite reads it as a database without tables.
  std::filesystem::resize_file(w.file("src.db"), 0);
  const auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(run["status"] == "failed");
  REQUIRE(run["tables"].size() == 2);
  for (const auto& t : run["tables"]) {
    CHECK(t["status"] == "failed");
    CHECK(t["error_code"] == "FLT-R002");
    CHECK_THAT(t["error"].get<std::string>(),
               Catch::Contains("source 'shop' lists no tables, where earlier runs copied 2"));
  }
  // The target keeps what was last copied.
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT id FROM shop.b")[0][0] == "2");
  // Its retry fails the same way: the source, not each table as if gone on its own.
  const auto retry = flotilla_json(w, {"retry"}, &rc);
  INFO(retry.dump());
  CHECK(rc == 1);
  REQUIRE(retry["tables"].size() == 2);
  for (const auto& t : retry["tables"]) {
    CHECK(t["error_code"] == "FLT-R002");
    CHECK_THAT(t["error"].get<std::string>(),
               Catch::Contains("source 'shop' lists no tables, where earlier runs copied 2") &&
                   !Catch::Contains("no longer has"));
  }
  // A source never copied may list no tables: nothing to fail.
  sqlite_exec(w.file("other.db"), "CREATE TABLE x (id int); DROP TABLE x;");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.other]\nadapter = \"sqlite\"\npath = \"other.db\"\n");
  const auto empty = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(empty["tables"].empty());
}

TEST_CASE("a section's table of a source never copied and unreadable is named where it lands") {
  // Not by its bare name: a monitor keyed on `table` would mix it with another `orders`.
  workdir w;
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"raw_{source}\"\n[sources.shop]\nadapter = \"sqlite\"\n"
                           "path = \"gone.db\"\n[sources.shop.tables.orders]\n"
                           "cursor_column = \"id\"\n");
  int rc = -1;
  for (const char* verb : {"run", "plan"}) {
    INFO(verb);
    const auto j = flotilla_json(w, {verb}, &rc);
    CHECK(rc == 1);
    REQUIRE(j["tables"].size() == 1);
    CHECK(j["tables"][0]["table"] == "raw_shop.orders");
    CHECK(j["tables"][0]["error_code"] == "FLT-R002");
  }
}

TEST_CASE("a table include names, gone from its source, fails FLT-R005 without a warning "
          "beside it") {
  workdir w;
  sqlite_exec(w.file("s.db"), "CREATE TABLE orders (id int); CREATE TABLE audit_log (id int);"
                              "INSERT INTO orders VALUES (1); INSERT INTO audit_log VALUES (1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"s.db\"\n"
                           "include = [\"orders\", \"Audit_Log\"]\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("s.db"), "DROP TABLE audit_log;");
  const auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 1);
  bool failed = false;
  for (const auto& t : j["tables"])
    if (t.value("error_code", "") == "FLT-R005")
      failed = t["source_table"] == "Audit_Log";
  CHECK(failed);
  CHECK_FALSE(j.contains("source_warnings"));
}

TEST_CASE("a table said gone from its source is not listed failed when the source later "
          "cannot be read") {
  workdir w;
  std::filesystem::create_directories(w.path() / "d");
  w.write("d/a.csv", "id\n1\n");
  w.write("d/b.csv", "id\n2\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.files]\nadapter = \"csv\"\npath = \"d\"\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["tables"].size() == 2);
  std::filesystem::remove(w.path() / "d" / "b.csv");
  auto gone = flotilla_json(w, {"run"}, &rc);
  INFO(gone.dump(2));
  REQUIRE(gone.contains("source_warnings"));
  // The directory emptied: its one table of the last run fails, not the one gone before.
  std::filesystem::remove(w.path() / "d" / "a.csv");
  auto empty = flotilla_json(w, {"run"}, &rc);
  INFO(empty.dump(2));
  CHECK(rc == 1);
  REQUIRE(empty["tables"].size() == 1);
  CHECK(empty["tables"][0]["source_table"] == "a");
  CHECK_THAT(empty["tables"][0]["error"].get<std::string>(),
             Catch::Contains("where earlier runs copied 1 of it"));
  // Unreadable (the directory gone): the same one table.
  std::filesystem::remove_all(w.path() / "d");
  auto unreadable = flotilla_json(w, {"run"}, &rc);
  INFO(unreadable.dump(2));
  CHECK(rc == 1);
  REQUIRE(unreadable["tables"].size() == 1);
  CHECK(unreadable["tables"][0]["source_table"] == "a");
}

TEST_CASE("retry copies a PostgreSQL table flotilla.toml names without its schema, once the "
          "source has it again") {
  workdir w;
  const std::string dsn = pg_dsn();
  const std::string table = "flt_retry_" + unique_suffix();
  pg_exec(dsn, fmt::format("CREATE TABLE public.{0} (id int PRIMARY KEY, v text); "
                           "INSERT INTO public.{0} VALUES (1, 'a')", table));
  w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                                       "[sources.s]\nadapter = \"postgres\"\ndsn = \"{}\"\n"
                                       "include = [\"{}\"]\n[sources.s.tables.{}]\n"
                                       "cursor_column = \"id\"\n",
                                       dsn, table, table));
  int code = -1;
  REQUIRE(flotilla_json(w, {"run"}, &code)["status"] == "success");
  pg_exec(dsn, "DROP TABLE public." + table);
  auto failed = flotilla_json(w, {"run"}, &code);
  CHECK(code == 1);
  pg_exec(dsn, fmt::format("CREATE TABLE public.{0} (id int PRIMARY KEY, v text); "
                           "INSERT INTO public.{0} VALUES (1, 'a'), (2, 'b')", table));
  auto retried = flotilla_json(w, {"retry"}, &code);
  pg_exec(dsn, "DROP TABLE public." + table);
  INFO(failed.dump() << "\n" << retried.dump());
  CHECK(code == 0);
  REQUIRE(retried["tables"].size() == 1);
  CHECK(retried["tables"][0]["status"] == "copied");
  CHECK(retried["tables"][0]["table"] == "s." + table);
}

TEST_CASE("a table loaded in full between incremental loads does not resume past the old "
          "watermark") {
  workdir w;
  const std::string target = GENERATE(std::string("sqlite"), std::string("duckdb"));
  // Killed after the full load's target commit, before its state commit: state still has
  // the old watermark, and the target's cleared token must win.
  const bool crash = GENERATE(false, true);
  INFO(target << (crash ? ", killed before the state commit" : ""));
  const std::string wh = target == "sqlite" ? "dialect = \"sqlite\"\npath = \"wh.db\"\n"
                                            : "dialect = \"duckdb\"\npath = \"wh.duckdb\"\n";
  const auto config = [&](bool incremental) {
    w.write("flotilla.toml",
            fmt::format("[targets.wh]\n{}schema = \"\"\n[sources.s]\nadapter = \"sqlite\"\n"
                        "path = \"src.db\"\ninclude = [\"t\"]\n{}",
                        wh, incremental ? "[sources.s.tables.t]\ncursor_column = \"ver\"\n" : ""));
  };
  const auto ids = [&] {
    const std::string q = "SELECT string_agg(CAST(id AS VARCHAR), ',' ORDER BY id) FROM t";
    return target == "sqlite" ? sqlite_query(w.file("wh.db"),
                                             "SELECT group_concat(id) FROM (SELECT id FROM t "
                                             "ORDER BY id)")[0][0]
                              : duckdb_query(w.file("wh.duckdb"), q)[0][0];
  };
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, ver INTEGER);"
                                "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30);");
  config(true);
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);  // watermark ver = 30
  // Reloaded from older data, copied in full.
  sqlite_exec(w.file("src.db"), "DELETE FROM t; INSERT INTO t VALUES (11, 1), (12, 2);");
  config(false);
  if (crash) {
    auto killed = run_crashing_at(w, "1:before_state");
    REQUIRE(killed.exit_code != 0);
  } else {
    flotilla_json(w, {"run"}, &rc);
    REQUIRE(rc == 0);
  }
  REQUIRE(ids() == "11,12");
  // Incremental again: from the start, not past ver 30.
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (13, 3), (14, 4);");
  config(true);
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(ids() == "11,12,13,14");
  // And its own watermark holds from there.
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (15, 5);");
  run = flotilla_json(w, {"run"}, &rc);
  CHECK(run["tables"][0]["load"] == "merge");  // on the source's key, from ver 4 on
  CHECK(run["tables"][0]["rows"].get<int>() <= 2);
  CHECK(ids() == "11,12,13,14,15");
}

TEST_CASE("stream into a SQLite warehouse is a configuration error, said before it starts") {
  workdir w;
  w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                                       "[sources.src]\nadapter = \"postgres\"\ndsn = \"{}\"\n"
                                       "capture = \"logical\"\ninclude = [\"public.t\"]\n",
                                       pg_dsn()));
  auto r = run_flotilla(w, {"stream"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("target 'wh', a sqlite warehouse") &&
                        Catch::Contains("--filter") && Catch::Contains("flotilla run"));
}

TEST_CASE("SIGTERM delivered twice at once (as `timeout` sends it) stops the run cleanly, once") {
  workdir w;
  sqlite_exec(w.file("shop.db"), "CREATE TABLE a (id INTEGER PRIMARY KEY); INSERT INTO a VALUES (1);"
                                 "CREATE TABLE b (id INTEGER PRIMARY KEY); INSERT INTO b VALUES (2);"
                                 "CREATE TABLE c (id INTEGER PRIMARY KEY); INSERT INTO c VALUES (3);");
  write_config(w, "duckdb");
  setenv("FLOTILLA_INTERRUPT_AT", "1:twice", 1);
  auto r = run_flotilla(w, {"run", "--output", "json"});
  unsetenv("FLOTILLA_INTERRUPT_AT");
  INFO(r.out << r.err);
  // Not ended at once by the second one: the run reports every table (those in flight
  // when the stop came may still commit) and exits as its tables went.
  CHECK_THAT(r.err, !Catch::Contains("stopped at once"));
  // The first one is acknowledged, once.
  const auto said = r.err.find("flotilla: stopping: no table starts from now on");
  CHECK(said != std::string::npos);
  CHECK(r.err.find("flotilla: stopping:", said + 1) == std::string::npos);
  REQUIRE((r.exit_code == 0 || r.exit_code == 1));
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["tables"].size() == 3);
  std::size_t copied = 0;
  for (const auto& t : j["tables"])
    copied += t["status"] == "copied" ? 1 : 0;
  CHECK(copied >= 1);
  CHECK((r.exit_code == 0) == (copied == 3));
}

TEST_CASE("a configuration that selects no table says so") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "include = [\"nomatch*\"]\n");
  auto r = run_flotilla(w, {"run"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("warning: the configuration selects no table of any source") &&
                        Catch::Contains("nothing was copied"));
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  r = run_flotilla(w, {"run"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("selects no table") == std::string::npos);
}

TEST_CASE("a refused command prints a JSON document with --output json") {
  workdir w;
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdbb\"\npath = \"wh.duckdb\"\n");
  for (const std::string verb : {"run", "plan"}) {
    auto r = run_flotilla(w, {verb, "--output", "json"});
    INFO(verb << ": " << r.out << r.err);
    CHECK(r.exit_code == 2);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["status"] == "failed");
    CHECK(j["exit_code"] == 2);
    CHECK(j["run_id"].is_null());
    REQUIRE(j["errors"].size() == 1);
    CHECK(j["errors"][0]["code"] == "FLT-C005");
    CHECK(j["errors"][0]["key"] == "targets.wh.dialect");
    CHECK(j["errors"][0]["value"] == "duckdbb");
    CHECK(j["errors"][0]["line"] == 2);
    CHECK_THAT(r.err, Catch::Contains("FLT-C005"));
  }
  // Without --output json, stdout stays empty.
  auto r = run_flotilla(w, {"run"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
}

TEST_CASE("the complete example of docs/configuration.md runs as written") {
  // The page's example, its [events.kafka] block left out as the page says to without a
  // broker: every table section must apply to its table on the example's SQLite source.
  std::ifstream page(std::string(FLOTILLA_SOURCE_DIR) + "/docs/configuration.md");
  REQUIRE(page);
  std::string line, toml;
  bool in_section = false, in_block = false, in_events = false;
  while (std::getline(page, line)) {
    if (line.starts_with("## A complete example")) {
      in_section = true;
      continue;
    }
    if (!in_section)
      continue;
    if (!in_block) {
      in_block = line.starts_with("```toml");
      continue;
    }
    if (line.starts_with("```"))
      break;
    if (line.starts_with("["))
      in_events = line.starts_with("[events.");
    if (!in_events)
      toml += line + "\n";
  }
  REQUIRE(toml.find("[sources.shop_acme]") != std::string::npos);
  workdir w;
  std::filesystem::create_directories(w.path() / "data");
  sqlite_exec(w.file("data/acme.db"), R"(
    CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total NUMERIC,
                         status TEXT, updated_at TEXT);
    CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT);
    INSERT INTO orders VALUES (1, 1, 10.50, 'new', '2024-01-01 10:00:00+00'),
                              (2, 1, 7.25, 'paid', '2024-01-02 10:00:00+00');
    INSERT INTO customers VALUES (1, 'Ann', 'a@x.io');)");
  w.write("flotilla.toml", toml);
  int code = -1;
  const auto run = flotilla_json(w, {"run"}, &code);
  INFO(run.dump(2));
  REQUIRE(code == 0);
  CHECK(run["status"] == "success");
  const auto types = duckdb_query(
      w.file("warehouse.duckdb"),
      "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = "
      "'staging__us_west__shop_acme' AND table_name = 'orders' AND column_name IN ('total', "
      "'updated_at') ORDER BY column_name");
  REQUIRE(types.size() == 2);
  CHECK(types[0][1] == "DECIMAL(18,2)");
  CHECK(types[1][1] == "TIMESTAMP WITH TIME ZONE");
  // The section's cursor and key: a second run re-reads from the watermark and merges.
  sqlite_exec(w.file("data/acme.db"),
              "UPDATE orders SET status = 'done', updated_at = '2024-01-03 10:00:00+00' WHERE id = 2");
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  CHECK(duckdb_query(w.file("warehouse.duckdb"),
                     "SELECT id, status FROM staging__us_west__shop_acme.orders ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1", "new"}, {"2", "done"}});
}

TEST_CASE("a source pointed at another target says its settings changed, not that its table "
          "was dropped") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE ev (id INTEGER PRIMARY KEY, v TEXT);"
                                "INSERT INTO ev VALUES (1, 'a')");
  const std::string head = "[targets.w]\ndialect = \"duckdb\"\npath = \"w.duckdb\"\n"
                           "[targets.x]\ndialect = \"sqlite\"\npath = \"x.sqlite\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "prune_unchanged = true\n";
  w.write("flotilla.toml", head + "target = \"w\"\n");
  int rc = -1;
  REQUIRE((flotilla_json(w, {"run"}, &rc), rc == 0));
  w.write("flotilla.toml", head + "target = \"x\"\n");
  const auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  REQUIRE(run["tables"].size() == 1);
  CHECK(run["tables"][0]["status"] == "copied");
  CHECK_THAT(run["tables"][0]["not_pruned"].get<std::string>(),
             Catch::StartsWith("the table's settings changed since the last copy"));
}

TEST_CASE("a SQLite target table made again for a NOT NULL the source let go of keeps the "
          "indexes and triggers made by hand on it, and says so") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, b TEXT NOT NULL);"
                                "INSERT INTO t VALUES (1, 'a')");
  w.write("flotilla.toml", "[targets.lite]\ndialect = \"sqlite\"\npath = \"wh.db\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  int rc = -1;
  REQUIRE((flotilla_json(w, {"run"}, &rc), rc == 0));
  sqlite_exec(w.file("wh.db"), "CREATE INDEX hand_ix ON s__t (b); CREATE TABLE audit (x);"
                               "CREATE TRIGGER hand_tr AFTER INSERT ON s__t BEGIN "
                               "INSERT INTO audit VALUES (new.id); END;");
  sqlite_exec(w.file("src.db"), "CREATE TABLE t2 (id INTEGER PRIMARY KEY, b TEXT);"
                                "INSERT INTO t2 SELECT * FROM t; DROP TABLE t;"
                                "ALTER TABLE t2 RENAME TO t; INSERT INTO t VALUES (2, NULL)");
  const auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  const std::string warnings = run["tables"][0]["warnings"].dump();
  CHECK(warnings.find("hand_ix") != std::string::npos);
  CHECK(warnings.find("trigger hand_tr") != std::string::npos);
  CHECK(sqlite_query(w.file("wh.db"), "SELECT name FROM sqlite_master WHERE tbl_name = 's__t' "
                                      "AND sql IS NOT NULL AND type <> 'table' ORDER BY name") ==
        std::vector<std::vector<std::string>>{{"hand_ix"}, {"hand_tr"}});
  // Made after the rows: the trigger fired for none of them.
  CHECK(sqlite_query(w.file("wh.db"), "SELECT count(*) FROM audit")[0][0] == "0");
  CHECK(sqlite_query(w.file("wh.db"), "SELECT id, b FROM s__t ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1", "a"}, {"2", "NULL"}});
}

TEST_CASE("DuckDB views over a table whose columns change are made again, so they read it") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INT PRIMARY KEY, amt DECIMAL(10,2), "
                                "updated_at TIMESTAMP);"
                                "INSERT INTO t VALUES (1, 1.5, '2024-01-01 00:00:00')");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"s\"\n[sources.src]\nadapter = \"sqlite\"\n"
                           "path = \"src.db\"\n[sources.src.tables.t]\n"
                           "cursor_column = \"updated_at\"\n");
  int rc = -1;
  REQUIRE((flotilla_json(w, {"run"}, &rc), rc == 0));
  duckdb_exec(w.file("wh.duckdb"), "CREATE VIEW s.v_amt AS SELECT id, amt FROM s.t");
  duckdb_exec(w.file("wh.duckdb"), "CREATE VIEW s.v_all AS SELECT * FROM s.t");
  duckdb_exec(w.file("wh.duckdb"), "CREATE VIEW s.v_top AS SELECT id FROM s.v_amt");
  // Widened, and a column added, at the source.
  sqlite_exec(w.file("src.db"), "ALTER TABLE t RENAME TO o;"
                                "CREATE TABLE t (id INT PRIMARY KEY, amt DECIMAL(14,2), "
                                "updated_at TIMESTAMP, note TEXT);"
                                "INSERT INTO t (id, amt, updated_at) SELECT * FROM o; DROP TABLE o;"
                                "INSERT INTO t VALUES (2, 123456789012.25, '2024-01-02 00:00:00', 'n')");
  const auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  const std::string warnings = run["tables"][0]["warnings"].dump();
  CHECK(warnings.find("v_amt") != std::string::npos);
  CHECK(warnings.find("v_all") != std::string::npos);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT id, amt FROM s.v_amt ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1", "1.50"}, {"2", "123456789012.25"}});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), max(note) FROM s.v_all") ==
        std::vector<std::vector<std::string>>{{"2", "n"}});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s.v_top")[0][0] == "2");
}

TEST_CASE("a stream whose two event sinks want two formats is refused as a configuration error") {
  workdir w;
  w.write("flotilla.toml",
          "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
          "[sources.pg]\nadapter = \"postgres\"\ndsn = \"postgresql://127.0.0.1:1/none\"\n"
          "capture = \"logical\"\n"
          "[events.kafka]\nbrokers = \"127.0.0.1:1\"\ntopic = \"t\"\nformat = \"json\"\n"
          "[events.pubsub]\nproject = \"p\"\ntopic = \"tt1\"\nformat = \"protobuf\"\n");
  int rc = -1;
  const auto j = flotilla_json(w, {"stream"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 2);
  REQUIRE(j["errors"].size() == 1);
  CHECK(j["errors"][0]["code"] == "FLT-C005");
  CHECK(j["errors"][0]["key"] == "events.pubsub.format");
  const auto r = run_flotilla(w, {"stream"});
  CHECK_THAT(r.err, Catch::Contains("error FLT-C005: events.pubsub.format: [events.kafka] has "
                                    "format = \"json\""));
}

TEST_CASE("a SQLite cursor column of julian days (REAL) keeps its watermark as the number: later "
          "rows arrive") {
  // SQLite orders every number before every text: a watermark kept as the date's text
  // ('2023-02-25 18:00:00') matched no row again, and every later row was skipped.
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE jd (id INTEGER PRIMARY KEY, c DATETIME, v TEXT);"
              "INSERT INTO jd VALUES (1, 2460000.5, 'a'), (2, 2460001.25, 'b');"
              "CREATE TABLE dj (id INTEGER, c DATE);"
              "INSERT INTO dj VALUES (1, 2460310.5);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.q]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.q.tables.jd]\ncursor_column = \"c\"\n"
                           "[sources.q.tables.dj]\ncursor_column = \"c\"\n");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  sqlite_exec(w.file("src.db"), "INSERT INTO jd VALUES (3, 2460002.75, 'later');"
                                "INSERT INTO dj VALUES (2, 2460311.5);");
  auto second = flotilla_json(w, {"run"});
  INFO(second.dump(2));
  CHECK((*find_table(second, "q__jd"))["rows"] == 2);  // the row at the watermark, merged, and row 3
  CHECK((*find_table(second, "q__dj"))["rows"] == 1);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(id, ',') FROM (SELECT id FROM "
                                          "q__jd ORDER BY id)") ==
        std::vector<std::vector<std::string>>{{"1,2,3"}});
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(c, ',') FROM (SELECT c FROM "
                                          "q__dj ORDER BY id)") ==
        std::vector<std::vector<std::string>>{{"2024-01-01,2024-01-02"}});
  // Nothing new: nothing read, nothing repeated.
  auto third = flotilla_json(w, {"run"});
  CHECK((*find_table(third, "q__dj"))["rows"] == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM q__dj") ==
        std::vector<std::vector<std::string>>{{"2"}});
}

TEST_CASE("a SQLite target stores a timestamp with time zone as its date functions read it") {
  workdir w;
  duckdb_exec(w.file("src.duckdb"),
              "CREATE TABLE e (id INT PRIMARY KEY, ts TIMESTAMPTZ);"
              "INSERT INTO e VALUES (1, TIMESTAMPTZ '2024-03-10 02:30:00-05'), (2, NULL)");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.d]\nadapter = \"duckdb\"\npath = \"src.duckdb\"\n");
  auto run = flotilla_json(w, {"run"});
  INFO(run.dump(2));
  REQUIRE(run["status"] == "success");
  CHECK(sqlite_query(w.file("wh.sqlite"),
                     "SELECT ts, datetime(ts), unixepoch(ts) FROM d__e WHERE id = 1") ==
        std::vector<std::vector<std::string>>{
            {"2024-03-10 07:30:00+00:00", "2024-03-10 07:30:00", "1710055800"}});
}

TEST_CASE("run --full-refresh reloads incremental tables in full: deleted rows go, and the "
          "watermark starts over from the rows read") {
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE m (id INTEGER PRIMARY KEY, c INTEGER, v TEXT);"
              "INSERT INTO m VALUES (1, 1, 'a'), (2, 2, 'b');"
              "CREATE TABLE a (id INTEGER, c INTEGER);"
              "INSERT INTO a VALUES (1, 1), (2, 2);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.q]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "prune_unchanged = true\n"
                           "[sources.q.tables.m]\ncursor_column = \"c\"\n"
                           "[sources.q.tables.a]\ncursor_column = \"c\"\n");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  sqlite_exec(w.file("src.db"), "DELETE FROM m WHERE id = 1; UPDATE m SET v = 'B' WHERE id = 2;"
                                "DELETE FROM a WHERE id = 1; INSERT INTO a VALUES (3, 3);");
  auto plan = flotilla_json(w, {"plan", "--full-refresh"});
  CHECK((*find_table(plan, "q__a"))["load"] == "full_refresh");
  auto full = flotilla_json(w, {"run", "--full-refresh"});
  INFO(full.dump(2));
  for (const char* t : {"q__m", "q__a"}) {
    INFO(t);
    CHECK((*find_table(full, t))["load"] == "full_refresh");
    CHECK_THAT((*find_table(full, t))["warnings"][0].get<std::string>(),
               Catch::Contains("--full-refresh"));
  }
  const auto rows = [&](const char* sql) { return sqlite_query(w.file("wh.sqlite"), sql); };
  CHECK(rows("SELECT group_concat(id || v, ',') FROM (SELECT * FROM q__m ORDER BY id)") ==
        std::vector<std::vector<std::string>>{{"2B"}});
  CHECK(rows("SELECT group_concat(id, ',') FROM (SELECT id FROM q__a ORDER BY id)") ==
        std::vector<std::vector<std::string>>{{"2,3"}});
  // The watermark is the full read's largest cursor: the next run appends only what follows.
  sqlite_exec(w.file("src.db"), "INSERT INTO a VALUES (4, 4);");
  auto next = flotilla_json(w, {"run"});
  INFO(next.dump(2));
  CHECK((*find_table(next, "q__a"))["load"] == "incremental");
  CHECK((*find_table(next, "q__a"))["rows"] == 1);
  CHECK(rows("SELECT group_concat(id, ',') FROM (SELECT id FROM q__a ORDER BY id)") ==
        std::vector<std::vector<std::string>>{{"2,3,4"}});
}

TEST_CASE("a SQLite target refuses an integer its column's type cannot hold, as the others do") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INT PRIMARY KEY, n INT, s SMALLINT);"
                                "INSERT INTO t VALUES (1, 5000000000, 7), (2, 3, 100000);");
  const std::string base = "[targets.sl]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.src]\nadapter = \"sqlite\"\npath = \"src.db\"\ntarget = \"sl\"\n";
  w.write("flotilla.toml", base);
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  INFO(first.dump(2));
  CHECK(rc == 1);
  CHECK_THAT((*find_table(first, "src__t"))["error"].get<std::string>(),
             Catch::Contains("column 'n': value '5000000000' does not fit type INTEGER") &&
                 Catch::Contains("n = \"bigint\""));
  w.write("flotilla.toml", base + "[sources.src.tables.t]\ncolumns = { n = \"bigint\", s = \"int\" }\n");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT n, s FROM src__t ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"5000000000", "7"}, {"3", "100000"}});
}

TEST_CASE("a SQLite source decimal with its own precision refuses a narrower pin at plan; a "
          "bare NUMERIC takes any") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE c (id INTEGER PRIMARY KEY, x DECIMAL(24,2), "
                                "y NUMERIC); INSERT INTO c VALUES (1, 1.5, 2.25);");
  const std::string base = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n";
  w.write("flotilla.toml",
          base + "[sources.s.tables.c]\ncolumns = { x = \"decimal(20,4)\", y = \"decimal(18,2)\" }\n");
  const auto plan = run_flotilla(w, {"plan"});
  INFO(plan.out << plan.err);
  CHECK(plan.exit_code == 1);
  CHECK_THAT(plan.out, Catch::Contains("x has type decimal(24,2), which cannot be read as "
                                       "decimal(20,4)") &&
                           !Catch::Contains("y has type"));
  w.write("flotilla.toml",
          base + "[sources.s.tables.c]\ncolumns = { x = \"decimal(26,2)\", y = \"decimal(18,2)\" }\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT x::VARCHAR, y::VARCHAR FROM s.c") ==
        std::vector<std::vector<std::string>>{{"1.50", "2.25"}});
}

TEST_CASE("a SQLite target refuses a decimal with more digits before the point than its type holds") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, d DECIMAL(5,2));"
                                "INSERT INTO t VALUES (1, 12.5), (2, 999.995);");
  const std::string base = "[targets.sl]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.src]\nadapter = \"sqlite\"\npath = \"src.db\"\ntarget = \"sl\"\n";
  w.write("flotilla.toml", base);
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  INFO(first.dump(2));
  CHECK(rc == 1);
  CHECK_THAT((*find_table(first, "src__t"))["error"].get<std::string>(),
             Catch::Contains("row 2, column 'd': value '1000.00' does not fit type DECIMAL(5,2)") &&
                 Catch::Contains("d = \"decimal(6,2)\""));
  w.write("flotilla.toml", base + "[sources.src.tables.t]\ncolumns = { d = \"decimal(6,2)\" }\n");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT CAST(d AS TEXT) FROM src__t ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"12.5"}, {"1000"}});

  // A value no decimal holds (past 38 digits): text is what is proposed, not the type
  // already declared.
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (3, 1e40)");
  w.write("flotilla.toml", base + "[sources.src.tables.t]\ncolumns = { d = \"decimal(38,2)\" }\n");
  auto wide = flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  INFO(wide.dump(2));
  CHECK(rc == 1);
  CHECK_THAT((*find_table(wide, "src__t"))["error"].get<std::string>(),
             Catch::Contains("nor any decimal (38 digits at most)") &&
                 Catch::Contains("d = \"text\"") && !Catch::Contains("\"decimal(38,2)\" })"));
}

TEST_CASE("retry says so when the tables that failed are no longer selected, and records no run") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE ok (id INTEGER PRIMARY KEY);"
                                "CREATE TABLE bad (id INTEGER PRIMARY KEY, n INT);"
                                "INSERT INTO bad VALUES (1, 'x');");
  const std::string base = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.q]\nadapter = \"sqlite\"\npath = \"src.db\"\n";
  w.write("flotilla.toml", base);
  int rc = -1;
  const auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 1);
  w.write("flotilla.toml", base + "exclude = [\"bad\"]\n");
  auto retry = flotilla_json(w, {"retry"}, &rc);
  INFO(retry.dump(2));
  CHECK(rc == 0);
  CHECK(retry["run_id"].is_null());
  CHECK_THAT(retry["message"].get<std::string>(),
             Catch::Contains("(q.bad) are no longer selected") && Catch::Contains(first["run_id"].get<std::string>()));
}

TEST_CASE("a retry of a run with --full-refresh copies its failed tables in full too") {
  workdir w;
  std::string rows;
  for (int i = 1; i <= 10; ++i)
    rows += fmt::format("{}({}, {}, {})", i == 1 ? "" : ", ", i, i, i);
  sqlite_exec(w.file("src.db"), "CREATE TABLE m (id INTEGER PRIMARY KEY, c INTEGER, n INT);"
                                "INSERT INTO m VALUES " + rows + ";");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.q]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.q.tables.m]\ncursor_column = \"c\"\n");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  // Rows deleted, and a row the full refresh fails on.
  sqlite_exec(w.file("src.db"), "DELETE FROM m WHERE id < 5; INSERT INTO m VALUES (11, 11, 'x');");
  int rc = -1;
  (void)flotilla_json(w, {"run", "--full-refresh"}, &rc);
  REQUIRE(rc == 1);
  sqlite_exec(w.file("src.db"), "UPDATE m SET n = 11 WHERE id = 11;");
  auto retry = flotilla_json(w, {"retry"}, &rc);
  INFO(retry.dump(2));
  CHECK(rc == 0);
  CHECK((*find_table(retry, "q.m"))["load"] == "full_refresh");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), min(id) FROM q.m") ==
        std::vector<std::vector<std::string>>{{"7", "5"}});
}

TEST_CASE("a table that earlier runs copied and the source no longer has is said once, named") {
  workdir w;
  sqlite_exec(w.file("shop.db"), "CREATE TABLE orders_2024 (id INTEGER); INSERT INTO orders_2024 "
                                 "VALUES (1); CREATE TABLE keep (id INTEGER);");
  std::filesystem::create_directories(w.file("drops"));
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.db\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n"
                           "[sources.drops]\nadapter = \"csv\"\npath = \"drops\"\n");
  auto first = run_flotilla(w, {"run"});
  REQUIRE(first.exit_code == 0);
  // A source that selects nothing is said, with what a file source reads.
  CHECK(first.err.find("source 'drops' lists no tables (a csv or json source's tables are its "
                       "directory's files ending in .csv") != std::string::npos);
  CHECK(first.err.find("no longer has") == std::string::npos);
  sqlite_exec(w.file("shop.db"), "ALTER TABLE orders_2024 RENAME TO archived_2024;");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  REQUIRE(run.contains("source_warnings"));
  bool named = false;
  for (const auto& warning : run["source_warnings"])
    if (warning.value("table", "") == "orders_2024") {
      named = true;
      CHECK(warning["source"] == "shop");
      CHECK(warning["message"].get<std::string>().find(
                "source 'shop' no longer has table 'orders_2024', which earlier runs copied") !=
            std::string::npos);
      CHECK(warning["message"].get<std::string>().find("shop__orders_2024") != std::string::npos);
    }
  CHECK(named);
  // Said once: the next run knows the source's tables as they are now.
  auto again = run_flotilla(w, {"run"});
  CHECK(again.exit_code == 0);
  CHECK(again.err.find("no longer has") == std::string::npos);
}

TEST_CASE("a SQLite source on its target's own file does not read back the copies") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.a]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  for (int i = 0; i < 3; ++i) {
    int rc = -1;
    auto run = flotilla_json(w, {"run"}, &rc);
    CHECK(rc == 0);
    REQUIRE(run["tables"].size() == 1);
    CHECK(run["tables"][0]["source_table"] == "orders");
  }
  // The schema template changed: the copies the old one made are not source tables either.
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"src.db\"\nschema = \"s2\"\n"
                           "[sources.a]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  for (int i = 0; i < 2; ++i) {
    int rc = -1;
    auto run = flotilla_json(w, {"run"}, &rc);
    INFO(run.dump(2));
    CHECK(rc == 0);
    REQUIRE(run["tables"].size() == 1);
    CHECK(run["tables"][0]["source_table"] == "orders");
    CHECK(run["tables"][0]["table"] == "s2__orders");
  }
  // An empty template would land the source's table on itself: refused, the table kept.
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"src.db\"\nschema = \"\"\n"
                           "[sources.a]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  int rc = -1;
  auto self = flotilla_json(w, {"run"}, &rc);
  INFO(self.dump(2));
  CHECK(rc == 1);
  const nlohmann::json* orders = nullptr;
  for (const auto& t : self["tables"])
    if (t["source_table"] == "orders")
      orders = &t;
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "failed");
  CHECK((*orders)["error"].get<std::string>().find("would land on itself") != std::string::npos);
  CHECK(sqlite_query(w.file("src.db"), "SELECT sql FROM sqlite_master WHERE name = 'orders'") ==
        std::vector<std::vector<std::string>>{{"CREATE TABLE orders (id INTEGER)"}});
}

TEST_CASE("a table that appears beside the one loading a target table does not take it over") {
  // alpha.orders, created later, sorts before zeta.orders: by catalog order alone it would
  // take the target table over and replace its rows.
  workdir w;
  const std::string sfx = unique_suffix();
  const std::string zeta = "zeta_" + sfx, alpha = "alpha_" + sfx;
  pg_exec(pg_dsn(), "CREATE SCHEMA " + zeta + "; CREATE TABLE " + zeta +
                        ".orders (id int PRIMARY KEY, v text); INSERT INTO " + zeta +
                        ".orders VALUES (1, 'z1'), (2, 'z2'), (3, 'z3')");
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                      "[sources.shop]\nadapter = \"postgres\"\ndsn = \"{}\"\n"
                      "include = [\"{}.*\", \"{}.*\"]\n",
                      pg_dsn(), zeta, alpha));
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  pg_exec(pg_dsn(), "CREATE SCHEMA " + alpha + "; CREATE TABLE " + alpha +
                        ".orders (id int PRIMARY KEY, v text); INSERT INTO " + alpha +
                        ".orders VALUES (9, 'a9')");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 1);
  for (const auto& t : run["tables"]) {
    if (t["source_table"] == alpha + ".orders") {
      CHECK(t["status"] == "failed");
      CHECK(t["error_code"] == "FLT-R006");
      CHECK(t["error"].get<std::string>().find("exclude = [\"" + alpha + ".orders\"]") !=
            std::string::npos);
    } else {
      CHECK(t["source_table"] == zeta + ".orders");
      CHECK(t["status"] != "failed");
    }
  }
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(v, ',' ORDER BY id) FROM shop.orders") ==
        std::vector<std::vector<std::string>>{{"z1,z2,z3"}});
  pg_exec(pg_dsn(), "DROP SCHEMA " + zeta + " CASCADE; DROP SCHEMA " + alpha + " CASCADE");
}

TEST_CASE("a source added before another in flotilla.toml does not take over the target table "
          "the other loads") {
  workdir w;
  sqlite_exec(w.file("old.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, v TEXT);"
                                "INSERT INTO orders VALUES (1, 'old1'), (2, 'old2');");
  sqlite_exec(w.file("new.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, v TEXT);"
                                "INSERT INTO orders VALUES (9, 'new9');");
  const std::string target = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                             "schema = \"raw\"\n";
  const std::string old_source = "[sources.old]\nadapter = \"sqlite\"\npath = \"old.db\"\n";
  w.write("flotilla.toml", target + old_source);
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  w.write("flotilla.toml",
          target + "[sources.new]\nadapter = \"sqlite\"\npath = \"new.db\"\n" + old_source);
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 1);
  for (const auto& t : run["tables"]) {
    if (t["source"] == "new") {
      CHECK(t["status"] == "failed");
      CHECK(t["error_code"] == "FLT-R006");
    } else {
      CHECK(t["status"] != "failed");
    }
  }
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(v, ',' ORDER BY id) FROM raw.orders") ==
        std::vector<std::vector<std::string>>{{"old1,old2"}});
}

TEST_CASE("a file that never loaded, moved away as its error advised, is not said gone") {
  workdir w;
  std::filesystem::create_directories(w.path() / "csv");
  w.write("csv/good.csv", "id,v\n1,a\n");
  w.write("csv/bad.csv", "id,v\n1,a,extra\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.files]\nadapter = \"csv\"\npath = \"csv\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);  // bad.csv fails, named
  std::filesystem::remove(w.path() / "csv" / "bad.csv");
  auto run = run_flotilla(w, {"run"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.err.find("no longer has") == std::string::npos);
  // One that loaded, then goes, is said.
  std::filesystem::remove(w.path() / "csv" / "good.csv");
  w.write("csv/other.csv", "id\n1\n");
  auto gone = run_flotilla(w, {"run"});
  INFO(gone.err);
  CHECK(gone.err.find("no longer has table 'good'") != std::string::npos);
}

TEST_CASE("a schema-qualified source table gone from its source is said with its own target table") {
  workdir w;
  const std::string sfx = unique_suffix();
  const std::string schema = "gone_" + sfx;
  pg_exec(pg_dsn(), "CREATE SCHEMA " + schema + "; CREATE TABLE " + schema +
                        ".items (id int PRIMARY KEY); CREATE TABLE " + schema +
                        ".keep (id int PRIMARY KEY)");
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"stage\"\n"
                      "[sources.src]\nadapter = \"postgres\"\ndsn = \"{}\"\ninclude = [\"{}.*\"]\n",
                      pg_dsn(), schema));
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  pg_exec(pg_dsn(), "DROP TABLE " + schema + ".items");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(run.contains("source_warnings"));
  const std::string said = run["source_warnings"][0]["message"];
  CHECK(said.find("no longer has table '" + schema + ".items'") != std::string::npos);
  CHECK(said.find("its target table stage.items of target 'wh'") != std::string::npos);
  pg_exec(pg_dsn(), "DROP SCHEMA " + schema + " CASCADE");
}

TEST_CASE("two projects in one directory do not share a state directory: the second is refused") {
  workdir w;
  sqlite_exec(w.file("prod.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY);");
  sqlite_exec(w.file("stage.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY);");
  for (const std::string n : {"prod", "stage"})
    w.write(n + ".toml", fmt::format("[project]\nname = \"{0}\"\n[targets.wh]\ndialect = \"duckdb\"\n"
                                     "path = \"{0}.duckdb\"\n[sources.shop]\nadapter = \"sqlite\"\n"
                                     "path = \"{0}.db\"\n",
                                     n));
  REQUIRE(run_flotilla(w, {"-c", "prod.toml", "run"}).exit_code == 0);
  auto stage = run_flotilla(w, {"-c", "stage.toml", "run"});
  CHECK(stage.exit_code == 2);
  CHECK(stage.err.find("belongs to project 'prod'") != std::string::npos);
  CHECK(stage.err.find("state_dir = \".flotilla-stage\"") != std::string::npos);
  CHECK(stage.err.find("error FLT-R007: ") == 0);
  // `schema accept --output json` refused so prints its own document, not a run's.
  auto accept = run_flotilla(w, {"-c", "stage.toml", "schema", "accept", "--output", "json"});
  CHECK(accept.exit_code == 2);
  const auto doc = nlohmann::json::parse(accept.out);
  INFO(doc.dump(2));
  CHECK(doc["status"] == "failed");
  CHECK(doc["accepted"] == nlohmann::json::array());
  CHECK(doc["changes"] == 0);
  CHECK(doc["errors"][0]["code"] == "FLT-R007");
  CHECK_FALSE(doc.contains("tables"));
  CHECK_FALSE(doc.contains("run_id"));
  // With a state directory of its own, it runs; prod's state is untouched.
  w.write("stage.toml", "[project]\nname = \"stage\"\nstate_dir = \".flotilla-stage\"\n"
                        "[targets.wh]\ndialect = \"duckdb\"\npath = \"stage.duckdb\"\n"
                        "[sources.shop]\nadapter = \"sqlite\"\npath = \"stage.db\"\n");
  CHECK(run_flotilla(w, {"-c", "stage.toml", "run"}).exit_code == 0);
  CHECK(run_flotilla(w, {"-c", "prod.toml", "run"}).exit_code == 0);
}

TEST_CASE("a config file copied under one [project] name does not share the first one's state; "
          "renamed, it does") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE a (id INTEGER PRIMARY KEY); INSERT INTO a VALUES (1);");
  const auto config = [](const std::string& target) {
    return fmt::format("[project]\nname = \"shop\"\n[targets.wh]\ndialect = \"duckdb\"\n"
                       "path = \"{}.duckdb\"\n[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n",
                       target);
  };
  w.write("prod.toml", config("prod"));
  w.write("stage.toml", config("stage"));
  REQUIRE(run_flotilla(w, {"-c", "prod.toml", "run"}).exit_code == 0);
  auto stage = run_flotilla(w, {"-c", "stage.toml", "run"});
  CHECK(stage.exit_code == 2);
  CHECK_THAT(stage.err, Catch::Contains("error FLT-R007") && Catch::Contains("prod.toml") &&
                            Catch::Contains("names itself 'shop' too"));
  CHECK_FALSE(std::filesystem::exists(w.file("stage.duckdb")));
  CHECK(run_flotilla(w, {"-c", "prod.toml", "run"}).exit_code == 0);  // prod's own, still
  // prod.toml renamed (the same project): its state follows it.
  std::filesystem::rename(w.file("prod.toml"), w.file("shop.toml"));
  std::filesystem::remove(w.file("stage.toml"));
  CHECK(run_flotilla(w, {"-c", "shop.toml", "run"}).exit_code == 0);
}

TEST_CASE("a project renamed in its own config file keeps its incremental tables' rows: its "
          "old name's commit tokens are its own") {
  // The next load after the rename read every row and replaced the table's: a row the
  // merge kept (deleted at the source since) was lost, on a keyed table too.
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, seq INTEGER, v TEXT);"
                                "INSERT INTO t VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, 'c');");
  const auto config = [](const std::string& name) {
    return fmt::format("[project]\nname = \"{}\"\nprune_unchanged = true\n[targets.wh]\n"
                       "dialect = \"duckdb\"\npath = \"wh.duckdb\"\n[sources.s]\n"
                       "adapter = \"sqlite\"\npath = \"src.db\"\n[sources.s.tables.t]\n"
                       "cursor_column = \"seq\"\n",
                       name);
  };
  w.write("flotilla.toml", config("shop"));
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("src.db"), "DELETE FROM t WHERE id = 1; INSERT INTO t VALUES (4, 4, 'd');");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  w.write("flotilla.toml", config("shop-eu"));
  CHECK(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (5, 5, 'e');");
  const auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 0);
  REQUIRE(j["tables"].size() == 1);
  CHECK(j["tables"][0]["load"] != "full_refresh");
  CHECK_FALSE(j["tables"][0].contains("warnings"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(CAST(id AS VARCHAR), ',' ORDER BY "
                                          "id) FROM s.t")[0][0] == "1,2,3,4,5");
  // Renamed again: both earlier names stay its own.
  w.write("flotilla.toml", config("shop-emea"));
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (6, 6, 'f');");
  CHECK(flotilla_json(w, {"run"}, &rc)["tables"][0]["load"] != "full_refresh");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s.t")[0][0] == "6");
}

TEST_CASE("two config files without a project name in one directory do not share its state") {
  workdir w;
  sqlite_exec(w.file("acme.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY); INSERT INTO orders VALUES (1);");
  sqlite_exec(w.file("globex.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY); INSERT INTO orders VALUES (1000);");
  for (const std::string n : {"acme", "globex"})
    w.write(n + ".toml", fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"{0}.duckdb\"\n"
                                     "[sources.s]\nadapter = \"sqlite\"\npath = \"{0}.db\"\n",
                                     n));
  REQUIRE(run_flotilla(w, {"-c", "acme.toml", "run"}).exit_code == 0);
  CHECK(run_flotilla(w, {"-c", "acme.toml", "run"}).exit_code == 0);  // its own, again
  // Both go by the directory's name: not one project for that.
  auto globex = run_flotilla(w, {"-c", "globex.toml", "run"});
  CHECK(globex.exit_code == 2);
  CHECK(globex.err.find("error FLT-R007: ") == 0);
  CHECK(globex.err.find("neither names itself ([project] name)") != std::string::npos);
  CHECK(run_flotilla(w, {"-c", "globex.toml", "retry"}).exit_code == 2);
  CHECK_FALSE(std::filesystem::exists(w.file("globex.duckdb")));
  // Named, and given a state directory of its own as the message says: it runs.
  w.write("globex.toml", "[project]\nname = \"globex\"\nstate_dir = \".flotilla-globex\"\n"
                         "[targets.wh]\ndialect = \"duckdb\"\npath = \"globex.duckdb\"\n"
                         "[sources.s]\nadapter = \"sqlite\"\npath = \"globex.db\"\n");
  CHECK(run_flotilla(w, {"-c", "globex.toml", "run"}).exit_code == 0);
  CHECK(duckdb_query(w.file("globex.duckdb"), "SELECT id FROM s.orders")[0][0] == "1000");
  // acme.toml renamed: its config file is gone, so the new name is that project, and its
  // state carries on.
  std::filesystem::rename(w.file("acme.toml"), w.file("prod.toml"));
  int rc = -1;
  const auto renamed = flotilla_json(w, {"-c", "prod.toml", "run", "--filter", "source=s"}, &rc);
  INFO(renamed.dump(2));
  CHECK(rc == 0);
  CHECK(renamed["status"] == "success");
  CHECK_THAT(run_flotilla(w, {"-c", "prod.toml", "retry"}).out,
             Catch::Contains(renamed["run_id"].get<std::string>()));
}

TEST_CASE("a DuckDB full refresh names the indexes made by hand that it does not keep") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER);"
                                "INSERT INTO t VALUES (1, 1), (2, 2);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  duckdb_query(w.file("wh.duckdb"), "CREATE INDEX ix_x ON s.t (x)");
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (3, 3);");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 0);
  const auto& t = *find_table(run, "s.t");
  REQUIRE(t.contains("warnings"));
  CHECK(t["warnings"][0].get<std::string>().find("without the indexes made by hand on it (ix_x)") !=
        std::string::npos);
}

TEST_CASE("a column and a table gone from the source are warning events, as the run JSON says "
          "them") {
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE t1 (id INTEGER PRIMARY KEY, note TEXT, v INT);"
              "INSERT INTO t1 VALUES (1, 'a', 1);"
              "CREATE TABLE t2 (id INTEGER PRIMARY KEY); INSERT INTO t2 VALUES (1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  sqlite_exec(w.file("src.db"), "ALTER TABLE t1 DROP COLUMN note; DROP TABLE t2;");
  const auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  REQUIRE(rc == 0);
  REQUIRE(j["tables"].size() == 1);
  REQUIRE(j["tables"][0]["warnings"].size() == 1);
  REQUIRE(j["source_warnings"].size() == 1);
  std::ifstream events(w.path() / ".flotilla" / "runs" / j["run_id"].get<std::string>() /
                       "events.ndjson");
  std::vector<std::string> order;  // type of each event of t1, then the source's warning
  std::vector<nlohmann::json> warnings;
  std::string line;
  while (std::getline(events, line)) {
    auto e = nlohmann::json::parse(line);
    if (e["table"] == "t1")
      order.push_back(e["type"]);
    if (e["type"] == "warning")
      warnings.push_back(e);
  }
  CHECK(order == std::vector<std::string>{"table_started", "warning", "table_finished"});
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0]["source"] == "s");
  CHECK(warnings[0]["warning"]["target_table"] == "s.t1");
  CHECK(warnings[0]["warning"]["message"] == j["tables"][0]["warnings"][0]);
  CHECK_THAT(warnings[0]["warning"]["message"].get<std::string>(), Catch::Contains("'note'"));
  CHECK(warnings[1]["table"] == "t2");
  CHECK(warnings[1]["warning"]["target_table"] == "s.t2");
  CHECK(warnings[1]["warning"]["message"] == j["source_warnings"][0]["message"]);
}

TEST_CASE("an incremental table whose target moves away and back reads every row into the "
          "older copy, replacing it") {
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE kv (id INTEGER PRIMARY KEY, seq INT, v TEXT);"
              "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 100) "
              "INSERT INTO kv SELECT i, i, 'old' FROM c;");
  const auto config = [&](const std::string& schema) {
    w.write("flotilla.toml",
            "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"" + schema +
                "\"\n[sources.p]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                "[sources.p.tables.kv]\ncursor_column = \"seq\"\n");
  };
  int rc = -1;
  config("a");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["tables"][0]["rows"] == 100);
  // Emptied and refilled below the watermark, then loaded into schema b in full.
  sqlite_exec(w.file("src.db"),
              "DELETE FROM kv; WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
              "WHERE i < 10) INSERT INTO kv SELECT i, i, 'new' FROM c;");
  config("b");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["tables"][0]["rows"] == 10);
  // Back to a, whose copy (and commit token, seq = 100) is older than the watermark.
  config("a");
  const auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump(2));
  CHECK_THAT(plan.dump(), Catch::Contains("older than the watermark seq = 10"));
  const auto back = flotilla_json(w, {"run"}, &rc);
  INFO(back.dump(2));
  CHECK(rc == 0);
  CHECK(back["tables"][0]["rows"] == 10);
  CHECK_THAT(back["tables"][0]["warnings"][0].get<std::string>(),
             Catch::Contains("replaces the copy's rows"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), min(v), max(v) FROM a.kv") ==
        std::vector<std::vector<std::string>>{{"10", "new", "new"}});
  // And on from there: a later row arrives, with nothing said again.
  sqlite_exec(w.file("src.db"), "INSERT INTO kv VALUES (11, 11, 'later');");
  const auto next = flotilla_json(w, {"run"}, &rc);
  INFO(next.dump(2));
  CHECK_FALSE(next["tables"][0].contains("warnings"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM a.kv")[0][0] == "11");
}

TEST_CASE("plan with no state to read says no run was stopped before recording its rows") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE kv (id INTEGER PRIMARY KEY, seq INT);"
                                "INSERT INTO kv VALUES (1, 1), (2, 2);");
  const std::string body = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.p]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.p.tables.kv]\ncursor_column = \"seq\"\n";
  w.write("flotilla.toml", body);
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  // Another state directory, none there yet: the run goes on from the target's token, and
  // so does the plan, neither calling it a stopped run's.
  w.write("flotilla.toml", "[project]\nstate_dir = \"state2\"\n" + body);
  const auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump(2));
  CHECK_THAT(plan.dump(), !Catch::Contains("stopped before recording"));
  const auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK_FALSE(run["tables"][0].contains("recovered"));
}

TEST_CASE("a run killed after recording a table keeps its warnings: the next run writes them for "
          "it, in its run JSON and as warning events") {
  workdir w;
  sqlite_exec(w.file("src.db"),
              "CREATE TABLE t (seq INTEGER, v TEXT);"
              "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.s.tables.t]\ncursor_column = \"seq\"\n");
  int rc = -1;
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  // A keyless table's column added with a default: the rows loaded before keep NULL.
  sqlite_exec(w.file("src.db"), "ALTER TABLE t ADD COLUMN extra INTEGER DEFAULT 7;"
                                "INSERT INTO t (seq, v) VALUES (4, 'd');");
  REQUIRE(run_crashing_at(w, "1:after_state").exit_code != 0);
  const auto rerun = flotilla_json(w, {"run"}, &rc);
  INFO(rerun.dump(2));
  REQUIRE(rc == 0);
  // The killed run's JSON, written by the rerun, has the table's warning.
  std::string killed;
  for (const auto& d : std::filesystem::directory_iterator(w.path() / ".flotilla" / "runs"))
    if (d.path().filename() != rerun["run_id"].get<std::string>() &&
        std::filesystem::exists(d.path() / "run.json")) {
      const auto j = nlohmann::json::parse(std::ifstream(d.path() / "run.json"));
      if (j["status"] == "interrupted")
        killed = d.path().filename();
    }
  REQUIRE_FALSE(killed.empty());
  const auto run_dir = w.path() / ".flotilla" / "runs" / killed;
  const auto j = nlohmann::json::parse(std::ifstream(run_dir / "run.json"));
  INFO(j.dump(2));
  REQUIRE(j["tables"].size() == 1);
  REQUIRE(j["tables"][0].contains("warnings"));
  CHECK_THAT(j["tables"][0]["warnings"][0].get<std::string>(), Catch::Contains("extra"));
  std::ifstream events(run_dir / "events.ndjson");
  std::string line;
  int warnings = 0;
  while (std::getline(events, line))
    if (nlohmann::json::parse(line)["type"] == "warning")
      ++warnings;
  CHECK(warnings == 1);
}

TEST_CASE("a target table no run of the project loaded is said to be taken over, once") {
  workdir w;
  sqlite_exec(w.file("wh.sqlite"), "CREATE TABLE files__inv (id BIGINT, v TEXT);"
                                   "INSERT INTO files__inv VALUES (9, 'mine');");
  std::filesystem::create_directories(w.file("f"));
  w.write("f/inv.csv", "id,v\n1,a\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.files]\nadapter = \"csv\"\npath = \"f\"\n");
  int rc = -1;
  const auto plan = flotilla_json(w, {"plan"}, &rc);
  INFO(plan.dump(2));
  CHECK_THAT(plan.dump(), Catch::Contains("exists, and no run recorded in this project's state "
                                          "loaded it") &&
                              Catch::Contains("replaces its rows with the source's"));
  const auto first = flotilla_json(w, {"run"}, &rc);
  INFO(first.dump(2));
  REQUIRE(rc == 0);
  CHECK_THAT(first["tables"][0]["warnings"][0].get<std::string>(),
             Catch::Contains("the target table files__inv exists"));
  // Loaded now: the project's own, nothing said again.
  const auto again = flotilla_json(w, {"run"}, &rc);
  INFO(again.dump(2));
  CHECK_FALSE(again["tables"][0].contains("warnings"));
}

TEST_CASE("a source on its target's own database never overwrites another of its own tables") {
  workdir w;
  sqlite_exec(w.file("db.sqlite"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT);"
                                   "INSERT INTO orders VALUES (9, 'raw');"
                                   "CREATE TABLE x__orders (id INTEGER PRIMARY KEY, total REAL);"
                                   "INSERT INTO x__orders VALUES (1, 10), (2, 20);"
                                   "CREATE TABLE items (id INTEGER PRIMARY KEY);"
                                   "INSERT INTO items VALUES (1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"db.sqlite\"\nschema = \"x\"\n"
                           "[sources.a]\nadapter = \"sqlite\"\npath = \"db.sqlite\"\n");
  for (int i = 0; i < 2; ++i) {
    int rc = -1;
    const auto run = flotilla_json(w, {"run"}, &rc);
    INFO(run.dump(2));
    CHECK(rc == 1);
    const auto* orders = find_table(run, "x__orders");
    REQUIRE(orders != nullptr);
    CHECK((*orders)["status"] == "failed");
    CHECK_THAT(run.dump(), Catch::Contains("orders would overwrite x__orders, a table of source 'a' "
                                           "itself"));
    // The user's table as it was; the other table copied (and not read back after).
    CHECK(sqlite_query(w.file("db.sqlite"), "SELECT id, total FROM x__orders ORDER BY id") ==
          std::vector<std::vector<std::string>>{{"1", "10.0"}, {"2", "20.0"}});
    CHECK(sqlite_query(w.file("db.sqlite"), "SELECT count(*) FROM x__items")[0][0] == "1");
  }
}

TEST_CASE("a report that cannot be written to standard output is no success") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n");
  const char* bin = std::getenv("FLOTILLA_BIN");
  REQUIRE(bin != nullptr);
  const auto err = w.file("err.txt");
  const int status = std::system(fmt::format("cd '{}' && '{}' run --output json > /dev/full 2> '{}'",
                                             w.path().string(), bin, err)
                                     .c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  std::ifstream in(err);
  const std::string said((std::istreambuf_iterator<char>(in)), {});
  CHECK_THAT(said, Catch::Contains("could not be written to standard output"));
  // The run itself went through, and is recorded.
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s.t")[0][0] == "1");
  // A reader that closed the pipe first: exit 1 and said, not a death by SIGPIPE (141).
  // (The reader is gone before the run writes: `exec 1>&-` of a subshell's pipe end.)
  const auto code = w.file("code.txt");
  REQUIRE(std::system(fmt::format("cd '{}' && bash -c \"'{}' run --output json 2> '{}' | "
                                  "exec 0<&-; echo \\${{PIPESTATUS[0]}} > '{}'\"",
                                  w.path().string(), bin, err, code)
                          .c_str()) == 0);
  std::ifstream codes(code);
  std::string piped;
  std::getline(codes, piped);
  CHECK(piped == "1");
}

TEST_CASE("a config file missing or not TOML blames no --filter") {
  workdir w;
  auto missing = run_flotilla(w, {"plan", "--filter", "client=hooli"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("FLT-C001") && !Catch::Contains("FLT-C021"));
  w.write("flotilla.toml", "[sources.s]\nadapter = \"sqlite\ntags = { client = \"acme\" }\n");
  auto broken = run_flotilla(w, {"run", "--filter", "client=acme"});
  CHECK(broken.exit_code == 2);
  CHECK_THAT(broken.err, Catch::Contains("FLT-C002") && !Catch::Contains("FLT-C021"));
}

TEST_CASE("the text of a stopped run names the tables it skipped") {
  workdir w;
  std::string sql;
  for (int t = 0; t < 24; ++t)
    sql += fmt::format("CREATE TABLE t{0} (id INTEGER PRIMARY KEY, v TEXT);"
                       "INSERT INTO t{0} VALUES (1, 'a');",
                       t);
  sqlite_exec(w.file("shop.db"), sql);
  write_config(w, "duckdb", "");
  setenv("FLOTILLA_INTERRUPT_AT", "1", 1);
  auto stopped = run_flotilla(w, {"run"});
  unsetenv("FLOTILLA_INTERRUPT_AT");
  INFO(stopped.out << stopped.err);
  CHECK(stopped.exit_code == 1);
  // As many named (or counted past the first 20) as the summary says were skipped.
  const auto at = stopped.out.find(" skipped, ");
  REQUIRE(at != std::string::npos);
  const auto count_from = stopped.out.rfind(' ', at - 1) + 1;
  const int skipped = std::stoi(stopped.out.substr(count_from, at - count_from));
  REQUIRE(skipped > 0);
  int named = 0, more = 0;
  std::istringstream lines(stopped.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("skipped  ... and "))
      more = std::stoi(line.substr(std::string_view("skipped  ... and ").size()));
    else if (line.starts_with("skipped  staging__us_west__shop.t"))
      ++named;
  }
  CHECK(named == std::min(skipped, 20));
  CHECK(named + more == skipped);
}

TEST_CASE("a target table another project loaded is not resumed from that project's watermark") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE applog (seq INTEGER, v TEXT);"
                              "INSERT INTO applog VALUES (1, 'a1'), (2, 'a2'), (3, 'a3'), (6, 'a6');");
  sqlite_exec(w.file("b.db"), "CREATE TABLE applog (seq INTEGER, v TEXT);"
                              "INSERT INTO applog VALUES (1, 'b1'), (2, 'b2'), (7, 'b7');");
  for (const std::string n : {"a", "b"})
    w.write(n + ".toml", fmt::format("[project]\nname = \"{0}\"\nstate_dir = \".flotilla-{0}\"\n"
                                     "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                                     "schema = \"fixed\"\n[sources.s]\nadapter = \"sqlite\"\n"
                                     "path = \"{0}.db\"\n[sources.s.tables.applog]\n"
                                     "cursor_column = \"seq\"\n",
                                     n));
  int rc = -1;
  REQUIRE(flotilla_json(w, {"-c", "a.toml", "run"}, &rc)["status"] == "success");
  // Project b on the same target table: a's rows and watermark (seq = 6) are not its own.
  const auto b = flotilla_json(w, {"-c", "b.toml", "run"}, &rc);
  INFO(b.dump(2));
  CHECK(rc == 0);
  CHECK(b["tables"][0]["rows"] == 3);
  CHECK_THAT(b["tables"][0]["warnings"].dump(), Catch::Contains("committed by project 'a'"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(v, ',' ORDER BY seq) FROM fixed.applog") ==
        std::vector<std::vector<std::string>>{{"b1,b2,b7"}});
  // And a, back, does not resume from b's (seq = 7): its rows are read again.
  const auto a = flotilla_json(w, {"-c", "a.toml", "run"}, &rc);
  INFO(a.dump(2));
  CHECK_THAT(a["tables"][0]["warnings"].dump(), Catch::Contains("committed by project 'b'"));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT string_agg(v, ',' ORDER BY seq) FROM fixed.applog") ==
        std::vector<std::vector<std::string>>{{"a1,a2,a3,a6"}});
}

TEST_CASE("plan warns of a state directory that cannot be made, which run refuses") {
  workdir w;
  w.write("afile", "");
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER); INSERT INTO t VALUES (1);");
  w.write("flotilla.toml", "[project]\nstate_dir = \"afile/state\"\n[targets.wh]\ndialect = "
                           "\"duckdb\"\npath = \"wh.duckdb\"\n[sources.s]\nadapter = \"sqlite\"\n"
                           "path = \"src.db\"\n");
  auto plan = run_flotilla(w, {"plan"});
  CHECK(plan.exit_code == 0);
  CHECK_THAT(plan.err, Catch::Contains("afile is a file, not a directory") &&
                           Catch::Contains("FLT-R007"));
  auto run = run_flotilla(w, {"run"});
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Catch::Contains("FLT-R007"));
}

TEST_CASE("a full refresh taking over a target table another table loaded, and a changed "
          "cursor_column, say so") {
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE customers (id INTEGER PRIMARY KEY, n TEXT);"
                              "INSERT INTO customers VALUES (1, 'acme-1'), (2, 'acme-2');");
  sqlite_exec(w.file("b.db"), "CREATE TABLE customers (id INTEGER PRIMARY KEY, n TEXT);"
                              "INSERT INTO customers VALUES (1, 'globex-1');");
  const std::string head = "[project]\nname = \"k\"\n[targets.wh]\ndialect = \"sqlite\"\n"
                           "path = \"wh.db\"\nschema = \"raw\"\n";
  const std::string globex = "[sources.globex]\nadapter = \"sqlite\"\npath = \"b.db\"\n";
  w.write("flotilla.toml", head + "[sources.acme]\nadapter = \"sqlite\"\npath = \"a.db\"\n" + globex);
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 1);  // globex's table refused: acme's holds the target table
  // acme's source taken out: globex's copy replaces acme's rows, and says so.
  w.write("flotilla.toml", head + globex);
  const auto taken = flotilla_json(w, {"run"}, &rc);
  INFO(taken.dump(2));
  CHECK(rc == 0);
  CHECK_THAT(taken["tables"][0]["warnings"].dump(),
             Catch::Contains("acme.customers loaded the target table raw__customers last: this "
                             "copy replaces its rows"));
  // An incremental table whose cursor column changes reads every row, and says so.
  w.write("flotilla.toml", head + globex + "[sources.globex.tables.customers]\ncursor_column = \"id\"\n");
  REQUIRE(flotilla_json(w, {"run"}, &rc)["status"] == "success");
  w.write("flotilla.toml", head + globex + "[sources.globex.tables.customers]\ncursor_column = \"n\"\n");
  const auto changed = flotilla_json(w, {"run"}, &rc);
  INFO(changed.dump(2));
  CHECK(rc == 0);
  CHECK(changed["tables"][0]["rows"] == 1);
  CHECK_THAT(changed["tables"][0]["warnings"].dump(),
             Catch::Contains("cursor_column changed from 'id' to 'n'"));
}

TEST_CASE("a run going on from a target commit the state store does not know says so") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, seq INT);"
                                "INSERT INTO t VALUES (1, 1), (2, 2);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n"
                           "[sources.s.tables.t]\ncursor_column = \"seq\"\n");
  int rc = -1;
  const auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // The state directory lost: the target's commit token carries the table on.
  std::filesystem::remove_all(w.path() / ".flotilla");
  sqlite_exec(w.file("src.db"), "INSERT INTO t VALUES (3, 3);");
  const auto again = flotilla_json(w, {"run"}, &rc);
  INFO(again.dump(2));
  CHECK(rc == 0);
  CHECK_THAT(again["tables"][0]["warnings"].dump(),
             Catch::Contains("the state store does not know run " +
                             first["run_id"].get<std::string>()));
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s.t")[0][0] == "3");
  // Known from then on: nothing said again.
  const auto third = flotilla_json(w, {"run"}, &rc);
  INFO(third.dump(2));
  CHECK_FALSE(third["tables"][0].contains("warnings"));
}

TEST_CASE("a PostgreSQL full refresh swapped in keeps the column types the live table was "
          "given by hand (seed 000: contract none follows the live table)") {
  workdir w;
  const std::string src = "hs_" + unique_suffix();
  const std::string tgt = "ht_" + unique_suffix();
  pg_exec(pg_dsn(), "CREATE SCHEMA \"" + src + "\"; CREATE TABLE \"" + src +
                        "\".sw (id int PRIMARY KEY, amount numeric(12,2), ts timestamp); "
                        "INSERT INTO \"" + src + "\".sw VALUES (1, 2.5, '2024-01-01 10:00:00')");
  // in_place_max_bytes = 0: every full refresh goes through a staging table and a swap.
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n"
                      "in_place_max_bytes = 0\n[sources.app]\nadapter = \"postgres\"\n"
                      "dsn = \"{0}\"\ninclude = [\"{1}.sw\"]\ncontract = \"none\"\n",
                      pg_dsn(), src, tgt));
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  pg_exec(pg_dsn(), "ALTER TABLE \"" + tgt + "\".sw ALTER amount TYPE numeric, ALTER ts TYPE "
                    "timestamp(3)");
  auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  CHECK(rc == 0);
  CHECK(j["drift"]["actions_taken"].empty());
  const auto types = pg_query(pg_dsn(), "SELECT format_type(atttypid, atttypmod) FROM "
                                        "pg_attribute WHERE attrelid = '\"" + tgt +
                                        "\".sw'::regclass AND attnum > 0 ORDER BY attnum");
  CHECK(types == std::vector<std::vector<std::string>>{
                     {"integer"}, {"numeric"}, {"timestamp(3) without time zone"}});
  CHECK(pg_query(pg_dsn(), "SELECT count(*) FROM \"" + tgt + "\".sw WHERE id = 1 AND amount = 2.5")[0][0] == "1");
  // The key is there again after the swap.
  CHECK(pg_query(pg_dsn(), "SELECT count(*) FROM pg_constraint WHERE conrelid = '\"" + tgt +
                               "\".sw'::regclass AND contype = 'p'")[0][0] == "1");
  pg_exec(pg_dsn(), "DROP SCHEMA \"" + src + "\" CASCADE; DROP SCHEMA \"" + tgt + "\" CASCADE");
}

TEST_CASE("rows a killed run recovered from an earlier killed run are reported for it by the "
          "run after it") {
  workdir w;
  sqlite_exec(w.file("shop.db"),
              "CREATE TABLE log (seq INTEGER, v TEXT);"
              "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)"
              " INSERT INTO log SELECT i, 'v' || i FROM n;");
  write_config(w, "duckdb", "\n[sources.shop.tables.log]\ncursor_column = \"seq\"\n");
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  std::set<std::string> known{first["run_id"].get<std::string>()};
  const auto append = [&](int from) {
    sqlite_exec(w.file("shop.db"),
                fmt::format("WITH RECURSIVE n(i) AS (SELECT {0} UNION ALL SELECT i + 1 FROM n "
                            "WHERE i < {1}) INSERT INTO log SELECT i, 'v' || i FROM n;",
                            from, from + 9));
  };
  append(101);
  // Killed after its target commit, before its state commit: its 10 rows unrecorded.
  REQUIRE(run_crashing_at(w, "1:before_state").exit_code != 0);
  append(111);
  // Recovers the first killed run's rows, copies its own, records them, and is killed in
  // turn.
  REQUIRE(run_crashing_at(w, "1:after_state").exit_code != 0);
  auto rerun = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  known.insert(rerun["run_id"].get<std::string>());
  // The two killed runs: the second's run.json and events, written by the rerun, carry
  // what it recovered of the first's.
  std::vector<std::string> killed;
  for (const auto& dir : std::filesystem::directory_iterator(w.path() / ".flotilla" / "runs"))
    if (!known.contains(dir.path().filename().string()))
      killed.push_back(dir.path().filename().string());
  REQUIRE(killed.size() == 2);
  nlohmann::json k2_json;
  std::string k1, k2;
  for (const auto& id : killed) {
    std::ifstream in(w.path() / ".flotilla" / "runs" / id / "run.json");
    REQUIRE(in);
    auto j = nlohmann::json::parse(in);
    if (j["tables"].size() == 1 && j["tables"][0].contains("recovered")) {
      k2 = id;
      k2_json = j;
    } else {
      k1 = id;
    }
  }
  INFO(k2_json.dump(2));
  REQUIRE_FALSE(k2.empty());
  REQUIRE_FALSE(k1.empty());
  const auto& t = k2_json["tables"][0];
  CHECK(t["recovered"]["run_id"] == k1);
  CHECK(t["recovered"]["rows"] == 10);
  std::ifstream events(w.path() / ".flotilla" / "runs" / k2 / "events.ndjson");
  std::uint64_t finished_rows = 0, recovered_rows = 0;
  for (std::string line; std::getline(events, line);) {
    auto e = nlohmann::json::parse(line);
    if (e["type"] == "table_finished") {
      finished_rows += e["table_finished"]["rows"].get<std::uint64_t>();
      recovered_rows += e["table_finished"]["recovered_rows"].get<std::uint64_t>();
    }
  }
  CHECK(recovered_rows == 10);
  CHECK(finished_rows + recovered_rows == 20);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), count(DISTINCT seq) FROM "
                                          "staging__us_west__shop.log")[0] ==
        std::vector<std::string>{"120", "120"});
}
