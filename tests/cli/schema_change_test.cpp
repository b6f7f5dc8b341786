// Seed 000's contracts and schema-change policies, end to end against real DuckDB and
// PostgreSQL targets, through `flotilla plan` and `flotilla run`.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/core.h>

#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

struct fleet {
  workdir w;
  std::string target;
  std::string schema;  // target schema of source `app`
  std::string table(const std::string& name) const { return schema + "." + name; }
  std::string sql(const std::string& name) const { return "\"" + schema + "\".\"" + name + "\""; }

  explicit fleet(std::string kind) : target(std::move(kind)) {
    schema = target == "postgres" ? "raw_" + unique_suffix() : "raw";
    sqlite_exec(w.file("app.db"),
                "CREATE TABLE orders (id INTEGER PRIMARY KEY, total DECIMAL(12,2), status TEXT);"
                "INSERT INTO orders VALUES (1, 10.50, 'new'), (2, 7.25, 'paid');"
                "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                "INSERT INTO customers VALUES (1, 'Ada');");
  }
  ~fleet() {
    if (target == "postgres")
      pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
  }
  void config(const std::string& extra) const {
    std::string t = target == "postgres"
                        ? fmt::format("dialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"\n", pg_dsn(), schema)
                        : "dialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n";
    w.write("flotilla.toml", fmt::format("[targets.wh]\n{}\n[sources.app]\nadapter = \"sqlite\"\n"
                                         "path = \"app.db\"\n{}\n",
                                         t, extra));
  }
  std::vector<std::vector<std::string>> query(const std::string& q) const {
    return target == "postgres" ? pg_query(pg_dsn(), q) : duckdb_query(w.file("wh.duckdb"), q);
  }
  std::string column_type(const std::string& table_name, const std::string& column) const {
    if (target == "postgres")
      return query(fmt::format("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE "
                               "attrelid = '{}'::regclass AND attname = '{}'",
                               sql(table_name), column))[0][0];
    return query(fmt::format("SELECT data_type FROM information_schema.columns WHERE table_schema = "
                             "'{}' AND table_name = '{}' AND column_name = '{}'",
                             schema, table_name, column))[0][0];
  }
};

const nlohmann::json* plan_table(const nlohmann::json& plan, const std::string& table) {
  for (const auto& t : plan["tables"])
    if (t["table"] == table)
      return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("seed 000: a new source column is added, and plan shows it first") {
  const std::string target = GENERATE(std::string("duckdb"), std::string("postgres"));
  INFO(target);
  fleet f(target);
  f.config("");
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  sqlite_exec(f.w.file("app.db"), "ALTER TABLE orders ADD COLUMN coupon TEXT");
  auto plan = run_flotilla(f.w, {"plan", "--filter", "table=orders"});
  CHECK(plan.exit_code == 0);
  CHECK(plan.out.find("Plan ready  1 selected, 1 to alter, 1 to load") != std::string::npos);
  CHECK(plan.out.find("alter table") != std::string::npos);
  CHECK(plan.out.find(target == "postgres" ? "add column  coupon text -> TEXT"
                                           : "add column  coupon text -> VARCHAR") != std::string::npos);
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  CHECK(f.query("SELECT count(*) FROM " + f.sql("orders"))[0][0] == "2");
}

TEST_CASE("seed 000: a column the source dropped stays on the target, and a full refresh says it "
          "empties it") {
  fleet f("duckdb");
  f.config("");
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  sqlite_exec(f.w.file("app.db"), "ALTER TABLE orders DROP COLUMN status");
  int rc = -1;
  auto run = flotilla_json(f.w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 0);
  const nlohmann::json* orders = nullptr;
  for (const auto& t : run["tables"])
    if (t["source_table"] == "orders")
      orders = &t;
  REQUIRE(orders != nullptr);
  REQUIRE(orders->contains("warnings"));
  CHECK_THAT((*orders)["warnings"][0].get<std::string>(),
             Catch::Contains("column 'status' is in the live table only") &&
                 Catch::Contains("with no value of the source in any row"));
  // Kept (never dropped), empty.
  CHECK(f.query("SELECT count(*), count(status) FROM " + f.sql("orders")) ==
        std::vector<std::vector<std::string>>{{"2", "0"}});
}

TEST_CASE("seed 000: a pinned type wider than the live column widens it in place") {
  const std::string target = GENERATE(std::string("duckdb"), std::string("postgres"));
  INFO(target);
  fleet f(target);
  f.config("");
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  f.config("[sources.app.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n");
  auto plan = run_flotilla(f.w, {"plan", "--filter", "table=orders"});
  CHECK(plan.exit_code == 0);
  CHECK(plan.out.find(target == "postgres"
                          ? "widen  total decimal(12,2) -> decimal(18,2) (NUMERIC(18,2))  in place"
                          : "widen  total decimal(12,2) -> decimal(18,2) (DECIMAL(18,2))  in place") !=
        std::string::npos);
  int rc = -1;
  auto run = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 0);
  bool widened = false;
  for (const auto& a : run["drift"]["actions_taken"])
    widened |= a["action"] == "alter_column_types" && a["step"] == "widen";
  CHECK(widened);
  CHECK(f.column_type("orders", "total") ==
        (target == "postgres" ? "numeric(18,2)" : "DECIMAL(18,2)"));
  CHECK(f.query("SELECT CAST(total AS VARCHAR) FROM " + f.sql("orders") + " WHERE id = 1")[0][0] ==
        "10.50");
}

TEST_CASE("seed 000: a type the source cannot be read as fails plan for that table only") {
  fleet f("duckdb");
  f.config("[sources.app.tables.orders]\ncolumns = { total = \"int\" }\n");
  auto plan = run_flotilla(f.w, {"plan"});
  CHECK(plan.exit_code == 1);
  CHECK(plan.out.find("Errors (1)") != std::string::npos);
  CHECK(plan.out.find("└── reason  total has type decimal(12,2), which cannot be read as int") !=
        std::string::npos);
  int rc = -1;
  auto run = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(run, "raw.orders"))["status"] == "failed");
  CHECK((*find_table(run, "raw.customers"))["status"] == "copied");
}

TEST_CASE("seed 000: narrowing a live column fails the table with both types") {
  fleet f("duckdb");
  f.config("[sources.app.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n");
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  f.config("[sources.app.tables.orders]\ncolumns = { total = \"decimal(14,2)\" }\n");
  auto plan = run_flotilla(f.w, {"plan"});
  CHECK(plan.exit_code == 1);
  CHECK(plan.out.find("total has type decimal(18,2), which cannot be read as decimal(14,2)") !=
        std::string::npos);
  CHECK(f.column_type("orders", "total") == "DECIMAL(18,2)");
}

TEST_CASE("seed 000: on_schema_change ignore leaves a new column out and fail stops only that table") {
  fleet f("duckdb");
  f.config("on_schema_change = \"ignore\"\n");
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  sqlite_exec(f.w.file("app.db"), "ALTER TABLE orders ADD COLUMN coupon TEXT;"
                                  "ALTER TABLE customers ADD COLUMN email TEXT;");
  int rc = -1;
  auto ignored = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(f.query("SELECT count(*) FROM information_schema.columns WHERE column_name = 'coupon'")[0][0] == "0");

  f.config("on_schema_change = \"fail\"\n[sources.app.tables.customers]\non_schema_change = \"append_new_columns\"\n");
  auto failed = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* orders = find_table(failed, "raw.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "failed");
  CHECK((*orders)["error"].get<std::string>().find("coupon") != std::string::npos);
  CHECK((*orders)["error"].get<std::string>().find("on_schema_change = fail") != std::string::npos);
  CHECK((*find_table(failed, "raw.customers"))["status"] == "copied");
  CHECK(f.query("SELECT count(*) FROM information_schema.columns WHERE column_name = 'email'")[0][0] == "1");
}

TEST_CASE("seed 000: an enforced contract loads only declared columns and plan warns about the rest") {
  fleet f("duckdb");
  f.config("[sources.app.tables.orders]\ncontract = \"enforced\"\n"
           "columns = { id = \"bigint\", total = \"decimal(18,2)\" }\n");
  auto plan = flotilla_json(f.w, {"plan"});
  const auto* orders = plan_table(plan, "raw.orders");
  REQUIRE(orders != nullptr);
  REQUIRE((*orders)["warnings"].size() == 1);
  CHECK((*orders)["warnings"][0].get<std::string>().find("'status'") != std::string::npos);
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  auto cols = f.query("SELECT column_name, data_type FROM information_schema.columns WHERE "
                      "table_schema = 'raw' AND table_name = 'orders' ORDER BY ordinal_position");
  REQUIRE(cols.size() == 2);
  CHECK(cols[0] == std::vector<std::string>{"id", "BIGINT"});
  CHECK(cols[1] == std::vector<std::string>{"total", "DECIMAL(18,2)"});
}

TEST_CASE("seed 000: type_change_rebuild needs the flag, allows, or denies a rebuild") {
  fleet f("duckdb");
  f.config("[sources.app.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n");
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  // status text -> integer: not a safe widening, so the table must be rebuilt.
  sqlite_exec(f.w.file("app.db"),
              "CREATE TABLE o2 (id INTEGER PRIMARY KEY, total DECIMAL(12,2), status INTEGER);"
              "INSERT INTO o2 SELECT id, total, id FROM orders; DROP TABLE orders;"
              "ALTER TABLE o2 RENAME TO orders;");
  int rc = -1;
  auto refused = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* orders = find_table(refused, "raw.orders");
  CHECK((*orders)["error"].get<std::string>().find("--allow-type-change-rebuild") != std::string::npos);
  CHECK(f.column_type("orders", "status") == "VARCHAR");  // untouched

  f.config("[sources.app.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n"
           "type_change_rebuild = \"deny\"\n");
  auto denied = flotilla_json(f.w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 1);
  const auto denied_error = (*find_table(denied, "raw.orders"))["error"].get<std::string>();
  CHECK(denied_error.find("deny") != std::string::npos);
  CHECK(denied_error.find("set type_change_rebuild = \"allow\"") != std::string::npos);

  f.config("[sources.app.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n");
  auto confirmed = flotilla_json(f.w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 0);
  CHECK(f.column_type("orders", "status") == "INTEGER");
  CHECK(f.column_type("orders", "total") == "DECIMAL(18,2)");
}

TEST_CASE("seed 000: an inferred CSV column never changes type on its own; auto_widen widens it") {
  workdir w;
  w.write("events.csv", "id,at\n1,2025-01-01 10:00:00\n");
  const std::string base = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n"
                           "[sources.files]\nadapter = \"csv\"\npath = \"events.csv\"\n";
  w.write("flotilla.toml", base);
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  // timestamps without a zone outgrown by one with an offset
  w.write("events.csv", "id,at\n1,2025-01-01 10:00:00\n2,2025-01-02 10:00:00+02:00\n");
  int rc = -1;
  auto failed = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* t = find_table(failed, "raw.events");
  REQUIRE(t != nullptr);
  const std::string err = (*t)["error"];
  CHECK(err.find("'at'") != std::string::npos);
  CHECK(err.find("timestamp_ntz") != std::string::npos);
  CHECK(err.find("timestamp_tz") != std::string::npos);
  CHECK(err.find("auto_widen = true") != std::string::npos);

  w.write("flotilla.toml", base + "auto_widen = true\n");
  auto plan = run_flotilla(w, {"plan"});
  // DuckDB has no in-place rule for it in seed 001's allowlist: the table is rebuilt.
  CHECK(plan.out.find("rebuild  at timestamp_ntz -> timestamp_tz") != std::string::npos);
  auto widened = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM raw.events")[0][0] == "2");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT data_type FROM information_schema.columns WHERE "
                                          "table_name = 'events' AND column_name = 'at'")[0][0] ==
        "TIMESTAMP WITH TIME ZONE");

  // Never to float or text by itself, even with auto_widen: pin those.
  w.write("events.csv", "id,at\n1,2025-01-01 10:00:00+00\n2,soon\n");
  auto to_text = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(to_text, "raw.events"))["error"].get<std::string>().find("pin it with columns") !=
        std::string::npos);
}

TEST_CASE("a SQLite target's timestamps widened to timestamp_tz keep one text form, the load's") {
  workdir w;
  w.write("events.csv", "id,at\n1,2024-01-01 00:00:00\n");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.files]\nadapter = \"csv\"\npath = \"events.csv\"\n"
                           "auto_widen = true\n");
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  w.write("events.csv", "id,at\n1,2024-01-01 00:00:00\n2,2024-01-03 00:00:00+01\n");
  int rc = -1;
  const auto j = flotilla_json(w, {"run"}, &rc);
  INFO(j.dump(2));
  REQUIRE(rc == 0);
  // The rebuilt row and the loaded one alike, as SQLite's date functions read them.
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT id, at, unixepoch(at) FROM files__events ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1", "2024-01-01 00:00:00+00:00", "1704067200"},
                                              {"2", "2024-01-02 23:00:00+00:00", "1704236400"}});
}

TEST_CASE("seed 000: auto_widen takes an inferred int column to the decimal its new values need") {
  // DuckDB's file readers infer a double for any number with a point; the lattice is
  // bool -> int -> decimal, so the file is read for the digits the values need.
  workdir w;
  w.write("orders.csv", "id,amount\n1,12\n2,3\n");
  const std::string base = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n"
                           "[sources.files]\nadapter = \"csv\"\npath = \"orders.csv\"\n";
  w.write("flotilla.toml", base);
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  w.write("orders.csv", "id,amount\n1,12\n2,3.25\n3,-99999.125\n");
  int rc = -1;
  auto failed = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const std::string err = (*find_table(failed, "raw.orders"))["error"];
  CHECK(err.find("the table has bigint, the data now needs decimal(22,3)") != std::string::npos);
  CHECK(err.find("set auto_widen = true") != std::string::npos);

  w.write("flotilla.toml", base + "auto_widen = true\n");
  CHECK(run_flotilla(w, {"plan"}).out.find("amount bigint -> decimal(22,3)") != std::string::npos);
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  const auto wh = w.file("wh.duckdb");
  CHECK(duckdb_query(wh, "SELECT data_type FROM information_schema.columns WHERE table_name = "
                         "'orders' AND column_name = 'amount'")[0][0] == "DECIMAL(22,3)");
  // Exact, never through a double: -99999.125 and 3.25 as written.
  CHECK(duckdb_query(wh, "SELECT sum(amount)::VARCHAR FROM raw.orders")[0][0] == "-99983.875");

  // Whole numbers written with a point fit a live integer column as they are.
  {
    workdir v;
    v.write("n.csv", "id,amount\n1,12\n");
    v.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.db\"\n"
                             "[sources.files]\nadapter = \"csv\"\npath = \"n.csv\"\n");
    REQUIRE(run_flotilla(v, {"run"}).exit_code == 0);
    v.write("n.csv", "id,amount\n2,7.\n");
    auto whole = flotilla_json(v, {"run"}, &rc);
    CHECK(rc == 0);
    CHECK(whole["drift"]["tables_drifted"] == 0);
    CHECK(sqlite_query(v.file("wh.db"), "SELECT amount FROM files__n")[0][0] == "7");
    // As an exporter writes every number: "7.0", "8.00" are whole numbers too.
    v.write("n.csv", "id,amount\n3,7.0\n4,-8.00\n");
    auto zeros = flotilla_json(v, {"run"}, &rc);
    INFO(zeros.dump(2));
    CHECK(rc == 0);
    CHECK(zeros["drift"]["tables_drifted"] == 0);
    CHECK(sqlite_query(v.file("wh.db"), "SELECT group_concat(amount, ',') FROM files__n") ==
          std::vector<std::vector<std::string>>{{"7,-8"}});
  }

  // The widened column holds the next file's values as they are: no drift, no change.
  w.write("orders.csv", "id,amount\n1,0.5\n");
  auto again = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK(again["drift"]["tables_drifted"] == 0);
  CHECK(duckdb_query(wh, "SELECT amount::VARCHAR FROM raw.orders")[0][0] == "0.500");

  // A value that is no plain decimal (an exponent) keeps the double, which is never
  // taken by itself: pin it.
  w.write("orders.csv", "id,amount\n1,1.5e3\n");
  auto exp = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const std::string pin = (*find_table(exp, "raw.orders"))["error"];
  CHECK(pin.find("needs double; pin it with columns") != std::string::npos);
}

TEST_CASE("seed 001: the governance gate lets granted additive changes through and refuses the rest") {
  fleet f("duckdb");
  const std::string gate = "[resilience]\nauto_apply_additive_drift = true\n[policy]\n"
                           "grants = [\"schema_change.additive\"]\n";
  f.config("");
  REQUIRE(run_flotilla(f.w, {"run"}).exit_code == 0);
  f.w.write("flotilla.toml", f.w.file("flotilla.toml"));  // keep path valid
  std::string base = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n"
                     "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n";
  f.w.write("flotilla.toml", base + gate);
  sqlite_exec(f.w.file("app.db"), "ALTER TABLE customers ADD COLUMN email TEXT;"
                                  "CREATE TABLE o2 (id INTEGER PRIMARY KEY, total DECIMAL(12,2), status INTEGER);"
                                  "INSERT INTO o2 SELECT id, total, id FROM orders; DROP TABLE orders;"
                                  "ALTER TABLE o2 RENAME TO orders;");
  int rc = -1;
  auto run = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* orders = find_table(run, "raw.orders");
  CHECK((*orders)["status"] == "failed");
  CHECK((*orders)["error"].get<std::string>().find("require-review") != std::string::npos);
  CHECK(f.column_type("orders", "status") == "VARCHAR");  // refused before touching the target
  CHECK((*find_table(run, "raw.customers"))["status"] == "copied");
  CHECK(f.query("SELECT count(*) FROM information_schema.columns WHERE column_name = 'email'")[0][0] == "1");
  // The held change's review_required event: a change that copies the table anew proposes
  // no statements (its DDL alone would leave the table empty); it says what it is.
  std::ifstream in(run["events"]["log"].get<std::string>());
  std::vector<nlohmann::json> reviews;
  for (std::string line; std::getline(in, line);)
    if (auto e = nlohmann::json::parse(line); e["type"] == "review_required")
      reviews.push_back(e);
  REQUIRE(reviews.size() == 1);
  CHECK(reviews[0]["table"] == "orders");
  const auto& r = reviews[0]["review_required"];
  CHECK(r["target"] == "raw.orders");
  CHECK(r["proposed_ddl"] == "");
  // What kind of change it is, and what applying it does to the rows.
  CHECK(r["kind"] == "drop_and_recreate");
  CHECK(r["requires_resync"] == true);
  CHECK_THAT(r["data_consequence"].get<std::string>(), Catch::Contains("loaded in full"));
}

TEST_CASE("a SQLite table rebuilt for a dropped NOT NULL keeps its dates, JSON and UUIDs") {
  workdir w;
  sqlite_exec(w.file("app.db"),
              "CREATE TABLE ev (id INTEGER PRIMARY KEY, created TIMESTAMP, d DATE, t TIME, "
              "j JSON, u UUID, note TEXT NOT NULL, upd INTEGER);"
              "INSERT INTO ev VALUES (1, '2024-01-01 10:00:00', '2024-02-03', '12:30:00', "
              "'{\"a\": 1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'n1', 1);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                           "[sources.app.tables.ev]\ncursor_column = \"upd\"\n");
  const std::string query = "SELECT id, created, d, t, j, u, note FROM app__ev ORDER BY id";
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  const auto before = sqlite_query(w.file("wh.sqlite"), query);
  REQUIRE(before.size() == 1);
  sqlite_exec(w.file("app.db"),
              "ALTER TABLE ev DROP COLUMN note;"
              "INSERT INTO ev VALUES (2, '2024-09-09 09:09:09', '2024-09-10', '01:02:03', '{}', "
              "'c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a13', 2);");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  const auto after = sqlite_query(w.file("wh.sqlite"), query);
  REQUIRE(after.size() == 2);
  CHECK(after[0] == before[0]);
  CHECK(after[0] == std::vector<std::string>{"1", "2024-01-01 10:00:00", "2024-02-03", "12:30:00",
                                             "{\"a\": 1}", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                                             "n1"});
  CHECK(after[1][6] == "NULL");
}

TEST_CASE("under an enforced contract a live table with a column Flotilla cannot map fails; "
          "it is not dropped") {
  fleet f("postgres");
  f.config("[sources.app.tables.orders]\ncontract = \"enforced\"\n"
           "columns = { id = \"bigint\", total = \"decimal(12,2)\", status = \"text\" }\n");
  int rc = -1;
  flotilla_json(f.w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // A column added on the target by hand, of a type with no portable form.
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {} ADD COLUMN sla interval DEFAULT '1 day'",
                                f.sql("orders")));
  auto plan = flotilla_json(f.w, {"plan"}, &rc);
  CHECK(rc == 1);
  const auto* p = plan_table(plan, f.table("orders"));
  REQUIRE(p != nullptr);
  CHECK((*p)["error_code"] == "FLT-S012");
  auto run = flotilla_json(f.w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 1);
  const auto* t = find_table(run, f.table("orders"));
  REQUIRE(t != nullptr);
  CHECK((*t)["status"] == "failed");
  CHECK((*t)["error_code"] == "FLT-S012");
  CHECK_THAT((*t)["error"].get<std::string>(),
             Catch::Contains("column 'sla' has type interval") &&
                 Catch::Contains("left as it is"));
  // Without a contract (seed 001, Rocky): treated as absent and rebuilt, which plan says.
  f.config("");
  auto rocky = flotilla_json(f.w, {"plan"}, &rc);
  const auto* r = plan_table(rocky, f.table("orders"));
  REQUIRE(r != nullptr);
  CHECK_THAT((*r)["warnings"].dump(), Catch::Contains("could not be read") &&
                                         Catch::Contains("copied anew with a full refresh"));
  CHECK((*find_table(run, f.table("customers")))["status"] == "copied");
  CHECK(f.query(fmt::format("SELECT count(*), min(sla)::text FROM {}", f.sql("orders"))) ==
        std::vector<std::vector<std::string>>{{"2", "1 day"}});
}

TEST_CASE("a live table with a column Flotilla cannot map is not dropped under deny, nor "
          "under require_confirmation without the flag") {
  fleet f("postgres");
  f.config("[sources.app.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n");
  int rc = -1;
  flotilla_json(f.w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // A type of several words: every report names it whole.
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0} ADD COLUMN sla time with time zone DEFAULT "
                                "'02:00:00+00';"
                                "GRANT SELECT ON {0} TO PUBLIC",
                                f.sql("orders")));
  const auto sla = [&] {
    return f.query(fmt::format("SELECT count(*), min(sla)::text FROM {}", f.sql("orders")));
  };
  // A pin: require_confirmation by default.
  auto run = flotilla_json(f.w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 1);
  const auto* t = find_table(run, f.table("orders"));
  REQUIRE(t != nullptr);
  CHECK((*t)["error_code"] == "FLT-S012");
  CHECK_THAT((*t)["error"].get<std::string>(),
             Catch::Contains("column 'sla'") &&
                 Catch::Contains("type_change_rebuild = require_confirmation") &&
                 Catch::Contains("--allow-type-change-rebuild"));
  CHECK(sla() == std::vector<std::vector<std::string>>{{"2", "02:00:00+00"}});
  // deny: the flag does not change it.
  f.config("type_change_rebuild = \"deny\"\n");
  run = flotilla_json(f.w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(run, f.table("orders")))["error_code"] == "FLT-S012");
  CHECK_THAT((*find_table(run, f.table("orders")))["error"].get<std::string>(),
             Catch::Contains("type_change_rebuild = deny (source)"));
  CHECK(sla() == std::vector<std::vector<std::string>>{{"2", "02:00:00+00"}});
  // on_schema_change = ignore: copied anew, the table would take the source columns ignore
  // leaves out, confirmed or not.
  f.config("on_schema_change = \"ignore\"\n");
  run = flotilla_json(f.w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(run, f.table("orders")))["error_code"] == "FLT-S012");
  CHECK_THAT((*find_table(run, f.table("orders")))["error"].get<std::string>(),
             Catch::Contains("Under on_schema_change = ignore") &&
                 !Catch::Contains("--allow-type-change-rebuild to drop it"));
  CHECK(sla() == std::vector<std::vector<std::string>>{{"2", "02:00:00+00"}});
  // Confirmed: seed 001's rebuild, said in the run's warnings.
  f.config("[sources.app.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n");
  // The plan says the live table is dropped, not created.
  auto plan = flotilla_json(f.w, {"plan", "--allow-type-change-rebuild"}, &rc);
  REQUIRE(find_table(plan, f.table("orders")) != nullptr);
  CHECK((*find_table(plan, f.table("orders")))["shape_action"] == "recreate");
  run = flotilla_json(f.w, {"run", "--allow-type-change-rebuild"}, &rc);
  CHECK(rc == 0);
  t = find_table(run, f.table("orders"));
  CHECK((*t)["status"] == "copied");
  CHECK_THAT((*t)["warnings"].dump(), Catch::Contains("copied anew with a full refresh"));
  CHECK(f.query(fmt::format("SELECT count(*) FROM information_schema.columns WHERE "
                            "table_schema = '{}' AND table_name = 'orders' AND "
                            "column_name = 'sla'",
                            f.schema))[0][0] == "0");
  // The drop is a schema action: in the run's drift actions and the events, with the column.
  const nlohmann::json* action = nullptr;
  for (const auto& a : run["drift"]["actions_taken"])
    if (a["table"] == f.table("orders"))
      action = &a;
  REQUIRE(action != nullptr);
  CHECK((*action)["action"] == "drop_and_recreate");
  CHECK((*action)["column"] == "sla");
  // A retype of the live table as seed 001 counts drift: checked and drifted.
  CHECK(run["drift"]["tables_checked"].get<int>() >= 1);
  CHECK(run["drift"]["tables_drifted"] == 1);
  CHECK_THAT((*action)["reason"].get<std::string>(),
             Catch::Contains("has type time with time zone, which Flotilla cannot map") &&
                 Catch::Contains("any other the source does not have"));
  std::ifstream events(f.w.path() / ".flotilla" / "runs" / run["run_id"].get<std::string>() /
                       "events.ndjson");
  bool event = false;
  for (std::string line; std::getline(events, line);)
    event = event || (line.find("schema_action") != std::string::npos &&
                      line.find("drop_and_recreate") != std::string::npos &&
                      line.find("sla") != std::string::npos &&
                      line.find("\"from\":\"time with time zone\"") != std::string::npos);
  CHECK(event);
}

TEST_CASE("seed 001 on a SQLite target: a safe widening rebuilds the table with its rows, "
          "so an incremental table keeps the rows the source no longer has") {
  workdir w;
  sqlite_exec(w.file("app.db"),
              "CREATE TABLE ev (id INT PRIMARY KEY, upd INT NOT NULL, code VARCHAR(10), "
              "qty INT);"
              "INSERT INTO ev VALUES (1, 1, 'a', 5), (2, 2, 'b', 6);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                           "[sources.app.tables.ev]\ncursor_column = \"upd\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // The source purges an old row: the target keeps it (an append-only increment).
  sqlite_exec(w.file("app.db"), "DELETE FROM ev WHERE id = 1; INSERT INTO ev VALUES (3, 3, 'c', 7)");
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  const std::string rows = "SELECT id, code, qty FROM app__ev ORDER BY id";
  REQUIRE(sqlite_query(w.file("wh.sqlite"), rows).size() == 3);
  // Widened the SQLite way: a new table, the rows copied, the old one dropped.
  sqlite_exec(w.file("app.db"),
              "ALTER TABLE ev RENAME TO o; CREATE TABLE ev (id INT PRIMARY KEY, upd INT NOT "
              "NULL, code VARCHAR(20), qty BIGINT); INSERT INTO ev SELECT * FROM o; DROP TABLE o;"
              "INSERT INTO ev VALUES (4, 4, 'a much longer', 9000000000)");
  auto plan = run_flotilla(w, {"plan"});
  CHECK_THAT(plan.out, !Catch::Contains("drop and recreate"));
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 0);
  std::set<std::string> actions;
  for (const auto& a : run["drift"]["actions_taken"])
    actions.insert(a["action"].get<std::string>());
  CHECK(actions == std::set<std::string>{"alter_column_types"});
  CHECK(sqlite_query(w.file("wh.sqlite"), rows) ==
        std::vector<std::vector<std::string>>{{"1", "a", "5"},
                                              {"2", "b", "6"},
                                              {"3", "c", "7"},
                                              {"4", "a much longer", "9000000000"}});
  CHECK(sqlite_query(w.file("wh.sqlite"),
                     "SELECT type FROM pragma_table_info('app__ev') WHERE name IN ('code', "
                     "'qty') ORDER BY name") ==
        std::vector<std::vector<std::string>>{{"VARCHAR(20)"}, {"BIGINT"}});
}

TEST_CASE("seed 001: a widening keeps the indexes made by hand on an incremental table (a "
          "DuckDB ALTER of an indexed column, a DuckDB key rebuild, a SQLite rebuild)") {
  workdir w;
  const std::string create =
      "CREATE TABLE {} (id {} PRIMARY KEY, upd INT NOT NULL, qty {}, code TEXT);"
      "INSERT INTO {} VALUES (1, 1, 5, 'a'), (2, 2, 6, 'b');";
  sqlite_exec(w.file("app.db"), fmt::format(fmt::runtime(create), "ev", "INT", "INT", "ev") +
                                    fmt::format(fmt::runtime(create), "kv", "INT", "INT", "kv"));
  sqlite_exec(w.file("lite.db"), fmt::format(fmt::runtime(create), "ev", "INT", "INT", "ev"));
  w.write("flotilla.toml",
          "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n"
          "[targets.lite]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
          "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\ntarget = \"wh\"\n"
          "[sources.app.tables.ev]\ncursor_column = \"upd\"\n"
          "[sources.app.tables.kv]\ncursor_column = \"upd\"\n"
          "[sources.lt]\nadapter = \"sqlite\"\npath = \"lite.db\"\ntarget = \"lite\"\n"
          "[sources.lt.tables.ev]\ncursor_column = \"upd\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  duckdb_exec(w.file("wh.duckdb"), "CREATE INDEX ev_qty ON raw.ev(qty, code); "
                                   "CREATE INDEX kv_qty ON raw.kv(qty)");
  sqlite_exec(w.file("wh.sqlite"), "CREATE INDEX lt_qty ON lt__ev(qty);"
                                   // A trigger went with the old table, unsaid.
                                   "CREATE TABLE audit (id INT); CREATE TRIGGER lt_audit AFTER "
                                   "INSERT ON lt__ev BEGIN INSERT INTO audit VALUES (new.id); END");
  // qty widened on ev (DuckDB: an ALTER its index would refuse), the key on kv (DuckDB: a
  // rebuild), qty on the SQLite target (a rebuild).
  const std::string widen =
      "ALTER TABLE {0} RENAME TO o; CREATE TABLE {0} (id {1} PRIMARY KEY, upd INT NOT NULL, "
      "qty {2}, code TEXT); INSERT INTO {0} SELECT * FROM o; DROP TABLE o;"
      "INSERT INTO {0} VALUES (3, 3, {3}, 'c');";
  sqlite_exec(w.file("app.db"), fmt::format(fmt::runtime(widen), "ev", "INT", "BIGINT", "9000000000") +
                                    fmt::format(fmt::runtime(widen), "kv", "BIGINT", "INT", "7"));
  sqlite_exec(w.file("lite.db"), fmt::format(fmt::runtime(widen), "ev", "INT", "BIGINT", "9000000000"));
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  for (const char* t : {"raw.ev", "raw.kv", "lt__ev"}) {
    const auto* table = find_table(run, t);
    REQUIRE(table != nullptr);
    CHECK((*table)["status"] == "copied");
    CHECK((*table)["warnings"].dump().find("made by hand on it") != std::string::npos);
  }
  CHECK((*find_table(run, "lt__ev"))["warnings"].dump().find("lt_qty, trigger lt_audit") !=
        std::string::npos);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT name FROM sqlite_master WHERE type = "
                                          "'trigger'") ==
        std::vector<std::vector<std::string>>{{"lt_audit"}});
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*) FROM audit WHERE id = 3") ==
        std::vector<std::vector<std::string>>{{"1"}});
  CHECK(duckdb_query(w.file("wh.duckdb"),
                     "SELECT table_name, index_name FROM duckdb_indexes() ORDER BY 1") ==
        std::vector<std::vector<std::string>>{{"ev", "ev_qty"}, {"kv", "kv_qty"}});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT data_type FROM duckdb_columns() WHERE "
                                          "table_name = 'ev' AND column_name = 'qty'")[0][0] ==
        "BIGINT");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*), max(qty) FROM raw.ev")[0] ==
        std::vector<std::string>{"3", "9000000000"});
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM raw.kv")[0][0] == "3");
  CHECK(sqlite_query(w.file("wh.sqlite"),
                     "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL") ==
        std::vector<std::vector<std::string>>{{"lt_qty"}});
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*), max(qty) FROM lt__ev")[0] ==
        std::vector<std::string>{"3", "9000000000"});
}

TEST_CASE("a SQLite rebuild to text writes booleans and decimals as a load does") {
  workdir w;
  sqlite_exec(w.file("app.db"),
              "CREATE TABLE t (id INT PRIMARY KEY, b BOOLEAN, d DECIMAL(8,2), ts INT, x DOUBLE, "
              "big DECIMAL(30,10));"
              "INSERT INTO t VALUES (1, 1, 3.10, 1, 1.0000000000000002, 9223372036854775807), "
              "(2, 0, 2.00, 2, 0.1, 1.5), (3, NULL, NULL, 3, -9e999, NULL);");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                           "[sources.app.tables.t]\ncursor_column = \"ts\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // Retyped to text at the source; rows 1-3 are gone there, kept by the target.
  sqlite_exec(w.file("app.db"), "DROP TABLE t; CREATE TABLE t (id INT PRIMARY KEY, b TEXT, "
                                "d TEXT, ts INT, x TEXT, big TEXT); INSERT INTO t VALUES (4, 'true', '4.50', 4, '2.5', '7')");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"),
                     "SELECT id, b, d, typeof(d), x, big FROM app__t ORDER BY id") ==
        std::vector<std::vector<std::string>>{
            {"1", "true", "3.10", "text", "1.0000000000000002", "9223372036854775807.0000000000"},
            {"2", "false", "2.00", "text", "0.1", "1.5000000000"},
            {"3", "NULL", "NULL", "null", "-Infinity", "NULL"},
            {"4", "true", "4.50", "text", "2.5", "7"}});
}

TEST_CASE("a SQLite rebuild of a float column to text writes the float's shortest text") {
  // A 4-byte float is kept as the double nearest it: 0.1f as 0.10000000149011612, which
  // the double's shortest text would spell out.
  workdir w;
  duckdb_exec(w.file("src.duckdb"),
              "CREATE TABLE t (id INTEGER PRIMARY KEY, upd INTEGER NOT NULL, f4 FLOAT);"
              "INSERT INTO t VALUES (1, 1, 0.1), (2, 2, 3.4e38), (3, 3, 1.5e-7), (4, 4, -0.3)");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.d]\nadapter = \"duckdb\"\npath = \"src.duckdb\"\n"
                           "[sources.d.tables.t]\ncursor_column = \"upd\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  duckdb_exec(w.file("src.duckdb"), "ALTER TABLE t ALTER f4 TYPE VARCHAR; INSERT INTO t VALUES (5, 5, 'z')");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT group_concat(f4, '|') FROM (SELECT f4 FROM "
                                          "d__t ORDER BY id)") ==
        std::vector<std::vector<std::string>>{{"0.1|3.4e+38|1.5e-07|-0.3|z"}});
}

TEST_CASE("a live text column keeps a file's values as written once they all look like "
          "timestamps") {
  workdir w;
  std::filesystem::create_directories(w.path() / "data");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.j]\nadapter = \"json\"\npath = \"data\"\n");
  w.write("data/ev.ndjson", "{\"id\":1,\"at\":\"soon\"}\n{\"id\":2,\"at\":\"2024-03-15T10:00:00+02:00\"}\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // Every value a timestamp now: inferred timestamp_tz, loaded into the text column as
  // the file writes it, not as the instant's UTC form.
  w.write("data/ev.ndjson", "{\"id\":2,\"at\":\"2024-03-15T10:00:00+02:00\"}\n");
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT id, at FROM j__ev") ==
        std::vector<std::vector<std::string>>{{"2", "2024-03-15T10:00:00+02:00"}});
}

TEST_CASE("a JSON number past 64 bits keeps every digit in a SQLite json column") {
  workdir w;
  std::filesystem::create_directories(w.path() / "data");
  w.write("data/k.jsonl", "{\"id\":1,\"v\":\"abc\"}\n{\"id\":2,\"v\":12345678901234567890123}\n"
                          "{\"id\":3,\"v\":9007199254740993}\n{\"id\":4,\"v\":1.10}\n");  // 1.10: read as the JSON number 1.1
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                           "[sources.j]\nadapter = \"json\"\npath = \"data\"\n");
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  REQUIRE(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT id, v, typeof(v) FROM j__k ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"1", "\"abc\"", "text"},
                                              {"2", "12345678901234567890123", "text"},
                                              {"3", "9007199254740993", "text"},
                                              {"4", "1.1", "text"}});
}

TEST_CASE("seed 000: a table with a contract follows a live column widened by hand; one "
          "without goes back to the source's type (seed 001)") {
  const std::string target = GENERATE(std::string("postgres"), std::string("duckdb"));
  INFO(target);
  fleet f(target);
  sqlite_exec(f.w.file("app.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, note VARCHAR(10), "
                                  "y INT, x TEXT); INSERT INTO t VALUES (1, 'n', 5, 'x');");
  f.config("[sources.app.tables.t]\ncolumns = { x = \"text\" }\n");
  int rc = -1;
  flotilla_json(f.w, {"run"}, &rc);
  REQUIRE(rc == 0);
  if (target == "postgres")
    pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0} ALTER COLUMN y TYPE bigint;"
                                  "ALTER TABLE {0} ALTER COLUMN note TYPE text",
                                  f.sql("t")));
  else
    duckdb_exec(f.w.file("wh.duckdb"),
                fmt::format("ALTER TABLE {} ALTER COLUMN y TYPE BIGINT", f.sql("t")));
  sqlite_exec(f.w.file("app.db"), "INSERT INTO t VALUES (2, 'm', 6, 'z')");
  auto run = flotilla_json(f.w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 0);
  CHECK(run["drift"]["tables_drifted"] == 0);
  CHECK(run["drift"]["actions_taken"].empty());
  CHECK((f.column_type("t", "y") == "bigint" || f.column_type("t", "y") == "BIGINT"));
  if (target == "postgres")
    CHECK(f.column_type("t", "note") == "text");
  CHECK(f.query(fmt::format("SELECT count(*), sum(y) FROM {}", f.sql("t"))) ==
        std::vector<std::vector<std::string>>{{"2", "11"}});
  // Without a contract, Rocky's: the hand change is drift, the rebuild lists every column.
  f.config("type_change_rebuild = \"require_confirmation\"\n");
  auto plan = flotilla_json(f.w, {"plan"}, &rc);
  CHECK(rc == 1);
  const auto* p = plan_table(plan, f.table("t"));
  REQUIRE(p != nullptr);
  CHECK((*p)["error_code"] == "FLT-S006");
  CHECK_THAT((*p)["error"].get<std::string>(), Catch::Contains("column 'y' changed"));
  if (target == "postgres")
    CHECK_THAT((*p)["error"].get<std::string>(), Catch::Contains("column 'note' changed"));
}

TEST_CASE("a declared column spelled in another case than the source's is named in the error") {
  fleet f("postgres");
  sqlite_exec(f.w.file("app.db"), "CREATE TABLE c (id INTEGER PRIMARY KEY, \"Note\" TEXT);"
                                  "INSERT INTO c VALUES (1, 'n')");
  f.config("include = [\"c\"]\n[sources.app.tables.c]\ncolumns = { note = \"text\" }\n");
  int rc = -1;
  auto plan = flotilla_json(f.w, {"plan"}, &rc);
  CHECK(rc == 1);
  const auto* p = plan_table(plan, f.table("c"));
  REQUIRE(p != nullptr);
  CHECK((*p)["error_code"] == "FLT-S001");
  CHECK_THAT((*p)["error"].get<std::string>(),
             Catch::Contains("'Note' differs only in case") && Catch::Contains("declare it as Note"));
}

TEST_CASE("a drift action whose DDL committed before the load failed is reported as taken") {
  fleet f("postgres");
  f.config("");
  int rc = -1;
  flotilla_json(f.w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // The target refuses the next rows; the column is added before the load, on its own.
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {} ADD CONSTRAINT small CHECK (total < 100)",
                                f.sql("orders")));
  sqlite_exec(f.w.file("app.db"), "ALTER TABLE orders ADD COLUMN coupon TEXT;"
                                  "UPDATE orders SET total = 500 WHERE id = 1;");
  auto run = flotilla_json(f.w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 1);
  CHECK((*find_table(run, f.table("orders")))["status"] == "failed");
  CHECK(f.column_type("orders", "coupon") == "text");
  bool reported = false;
  for (const auto& a : run["drift"]["actions_taken"])
    reported = reported || (a["table"] == f.table("orders") && a["action"] == "add_columns");
  CHECK(reported);
}

TEST_CASE("seed 000: a text pin reads a SQLite value its column's declared type cannot hold "
          "as written; other pins still convert exactly or fail naming the value") {
  fleet f("duckdb");
  sqlite_exec(f.w.file("app.db"),
              "CREATE TABLE stock(id INTEGER PRIMARY KEY, qty INTEGER, price REAL, flag BOOLEAN, "
              "seen DATETIME);"
              "INSERT INTO stock VALUES (1, 10, 0.30000000000000004, 1, '2024-01-01 00:00:00'),"
              "(2, 'N/A', 'cheap', 'maybe', 'not a date');"
              "CREATE TABLE counts(id INTEGER PRIMARY KEY, qty INTEGER);"
              "INSERT INTO counts VALUES (1, 10), (2, 'N/A');"
              "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);"
              "INSERT INTO notes VALUES (1, 'plain'), (2, x'00ff41');"
              "CREATE TABLE days(id INTEGER PRIMARY KEY, d TEXT);"
              "INSERT INTO days VALUES (1, '2024-01-02'), (2, '2024-01-03 00:00:00');");
  f.config("[sources.app.tables.stock]\n"
           "columns = { qty = \"text\", price = \"text\", flag = \"varchar(10)\", seen = \"text\" }\n"
           "[sources.app.tables.counts]\ncolumns = { qty = \"bigint\" }\n"
           "[sources.app.tables.notes]\ncolumns = { body = \"bytes\" }\n"
           "[sources.app.tables.days]\ncolumns = { d = \"date\" }\n");
  int rc = -1;
  auto run = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(run, "raw.stock"))["status"] == "copied");
  CHECK(f.query("SELECT qty, price, flag, seen FROM " + f.sql("stock") + " ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"10", "0.30000000000000004", "1", "2024-01-01 00:00:00"},
                                              {"N/A", "cheap", "maybe", "not a date"}});
  // A bytes pin takes a TEXT column's blob (no UTF-8, a NUL byte) as its bytes.
  CHECK((*find_table(run, "raw.notes"))["status"] == "copied");
  CHECK(f.query("SELECT hex(body) FROM " + f.sql("notes") + " ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"706C61696E"}, {"00FF41"}});
  // A date pin parses a TEXT column's ISO dates (SQLite has no date type).
  CHECK((*find_table(run, "raw.days"))["status"] == "copied");
  CHECK(f.query("SELECT CAST(d AS VARCHAR) FROM " + f.sql("days") + " ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"2024-01-02"}, {"2024-01-03"}});
  // A pin that is no text still converts each value exactly: 'N/A' is no bigint.
  const auto& t = *find_table(run, "raw.counts");
  CHECK(t["status"] == "failed");
  CHECK_THAT(t["error"].get<std::string>(), Catch::Contains("column 'qty', row 2: value 'N/A'"));
}
