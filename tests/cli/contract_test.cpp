// `flotilla contract diff` and `flotilla contract generate [--write]` (seed 000,
// "Checking declarations"), end to end against real DuckDB and PostgreSQL targets.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include <fmt/core.h>

#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

/// A SQLite source `shop` with orders (total DECIMAL(12,2)) and customers, loaded into a
/// DuckDB or PostgreSQL target by `flotilla run` before any column is declared.
struct contract_fleet {
  workdir w;
  std::string target;
  std::string schema;  // the target schema of source `shop`

  explicit contract_fleet(std::string kind) : target(std::move(kind)) {
    schema = target == "postgres" ? "ct_" + unique_suffix() : "staging__us_west__shop";
    sqlite_exec(w.file("shop.db"),
                "CREATE TABLE orders (id INTEGER PRIMARY KEY, total DECIMAL(12,2), status TEXT);"
                "INSERT INTO orders VALUES (1, 10.50, 'new'), (2, 7.25, 'paid');"
                "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                "INSERT INTO customers VALUES (1, 'Ada');");
  }
  ~contract_fleet() {
    if (target == "postgres")
      pg_exec(pg_dsn(), "DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
  }
  [[nodiscard]] std::string target_section() const {
    if (target == "postgres")
      return fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"\n",
                         pg_dsn(), schema);
    return "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
           "schema = \"staging__{region}__{source}\"\n";
  }
  void config(const std::string& tables) const {
    w.write("flotilla.toml", target_section() +
                                 "\n[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n"
                                 "tags = { region = \"us_west\" }\n" +
                                 tables);
  }
  void load() const {
    config("");
    auto r = run_flotilla(w, {"run"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  [[nodiscard]] std::string table(const std::string& name) const { return schema + "." + name; }
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const nlohmann::json* table_entry(const nlohmann::json& j, const std::string& table) {
  for (const auto& t : j["tables"])
    if (t["table"] == table)
      return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("contract diff reproduces seed 000's comparison and exits 1 on a difference") {
  const std::string kind = GENERATE(std::string("duckdb"), std::string("postgres"));
  INFO("target " << kind);
  contract_fleet f(kind);
  f.load();
  f.config("\n[sources.shop.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n");
  auto r = run_flotilla(f.w, {"contract", "diff"});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out == fmt::format("Contract comparison\n"
                             "  OK    table:{}\n"
                             "  DIFF  table:{}\n"
                             "        type_mismatch: column 'total' is declared decimal(18,2) but "
                             "physical type is decimal(12,2)\n"
                             "\n"
                             "1 contract difference(s)\n",
                             f.table("customers"), f.table("orders")));

  SECTION("declarations that match the live table are OK and exit 0") {
    f.config("\n[sources.shop.tables.orders]\ncolumns = { total = \"decimal(12,2)\", id = \"bigint\" }\n");
    auto ok = run_flotilla(f.w, {"contract", "diff"});
    CHECK(ok.exit_code == 0);
    CHECK(ok.out == fmt::format("Contract comparison\n  OK    table:{}\n  OK    table:{}\n\n"
                                "0 contract difference(s)\n",
                                f.table("customers"), f.table("orders")));
  }
  SECTION("--filter compares only the selected tables") {
    auto only = run_flotilla(f.w, {"contract", "diff", "--filter", "table=customers"});
    CHECK(only.exit_code == 0);
    CHECK(only.out.find("orders") == std::string::npos);
  }
}

TEST_CASE("contract diff reports a declared column the live table lacks and a table never loaded") {
  contract_fleet f("duckdb");
  f.load();
  sqlite_exec(f.w.file("shop.db"), "CREATE TABLE refunds (id INTEGER PRIMARY KEY, amount DECIMAL(8,2));");
  f.config("\n[sources.shop.tables.orders]\ncolumns = { total = \"decimal(12,2)\", coupon = \"text\" }\n");
  auto r = run_flotilla(f.w, {"contract", "diff"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("  DIFF  table:staging__us_west__shop.orders\n"
                   "        missing: column 'coupon' is declared text but the live table has no "
                   "such column\n") != std::string::npos);
  CHECK(r.out.find("  DIFF  table:staging__us_west__shop.refunds\n"
                   "        missing_table: the live table does not exist in target 'wh'\n") !=
        std::string::npos);
  CHECK(r.out.find("\n2 contract difference(s)\n") != std::string::npos);
  // Nothing was created by the comparison.
  CHECK(duckdb_query(f.w.file("wh.duckdb"),
                     "SELECT count(*) FROM information_schema.tables WHERE table_name = 'refunds'")[0][0] ==
        "0");
}

TEST_CASE("contract diff reports a declared table the source no longer has, as run fails it") {
  contract_fleet f("duckdb");
  f.load();
  f.config("\n[sources.shop.tables.orders]\ncolumns = { total = \"decimal(12,2)\" }\n");
  CHECK(run_flotilla(f.w, {"contract", "diff"}).exit_code == 0);
  sqlite_exec(f.w.file("shop.db"), "DROP TABLE orders;");
  auto r = run_flotilla(f.w, {"contract", "diff"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("  DIFF  table:staging__us_west__shop.orders\n"
                   "        missing_source_table: source 'shop' has no table 'orders'") !=
        std::string::npos);
  // A filter that leaves the table out leaves its finding out too.
  CHECK(run_flotilla(f.w, {"contract", "diff", "--filter", "table=customers"}).exit_code == 0);
  // generate proposes nothing for it and says why.
  auto g = run_flotilla(f.w, {"contract", "generate"});
  CHECK(g.exit_code == 0);
  CHECK(g.err.find("source 'shop' has no table 'orders'") != std::string::npos);
}

TEST_CASE("a table run refuses for landing on another's target table is not compared with "
          "that one's live table, nor proposed") {
  // Both were compared with the one live table (`OK` twice, exit 0), and generate wrote the
  // same section twice: invalid TOML, with a proposal from the other table's columns.
  workdir w;
  sqlite_exec(w.file("a.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, x TEXT);"
                              "INSERT INTO orders VALUES (1, 'x');");
  sqlite_exec(w.file("b.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY, y TEXT);"
                              "INSERT INTO orders VALUES (1, 'y');");
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "schema = \"raw\"\n\n[sources.a]\nadapter = \"sqlite\"\npath = \"a.db\"\n\n"
                           "[sources.b]\nadapter = \"sqlite\"\npath = \"b.db\"\n");
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 1);  // b.orders: FLT-R006
  auto diff = run_flotilla(w, {"contract", "diff"});
  INFO(diff.out << diff.err);
  CHECK(diff.exit_code == 1);
  CHECK_THAT(diff.out, Catch::Contains("target_taken: b.orders lands on target table raw.orders, "
                                       "which a.orders also loads"));
  auto g = run_flotilla(w, {"contract", "generate", "--write"});
  INFO(g.out << g.err);
  CHECK(g.exit_code == 0);
  CHECK_THAT(g.err, Catch::Contains("b.orders lands on target table raw.orders"));
  const std::string written = read_file(w.file("flotilla.toml"));
  CHECK(written.find("[sources.a.tables.") != std::string::npos);
  CHECK(written.find("[sources.b.tables.") == std::string::npos);
  // a's section now: the diff still reports b, and only b.
  auto again = run_flotilla(w, {"contract", "diff"});
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.out, Catch::Contains("OK    table:raw.orders"));
}

TEST_CASE("an enforced contract that leaves out a column of the source's key fails before the "
          "first load, naming it") {
  // The table was created keyed on the declared rest, and the load then broke that key.
  workdir w;
  sqlite_exec(w.file("s.db"), "CREATE TABLE o (id INT, k INT, v TEXT, PRIMARY KEY (id, k));"
                              "INSERT INTO o VALUES (1, 1, 'a'), (1, 2, 'b');");
  const auto config = [&](const std::string& columns) {
    w.write("flotilla.toml", "[targets.w]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                             "[sources.s]\nadapter = \"sqlite\"\npath = \"s.db\"\n"
                             "contract = \"enforced\"\n[sources.s.tables.o]\ncolumns = " +
                                 columns + "\n");
  };
  config("{ id = \"bigint\", v = \"text\" }");
  auto plan = run_flotilla(w, {"plan"});
  CHECK(plan.exit_code == 1);
  CHECK_THAT(plan.out, Catch::Contains("column 'k' is in the source's primary key"));
  // The failed table's other findings are shown too, as the run reports them.
  CHECK_THAT(plan.out, Catch::Contains("warning  column 'k' (") &&
                           Catch::Contains("is in the source but not declared"));
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 1);
  CHECK(run["tables"][0]["error_code"] == "FLT-S010");
  config("{ id = \"bigint\", k = \"bigint\", v = \"text\" }");
  CHECK(run_flotilla(w, {"run"}).exit_code == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM s.o")[0][0] == "2");
}

TEST_CASE("an enforced contract that leaves out the live table's key fails before anything "
          "runs, naming the column") {
  // It loaded every row with the key column empty and the key dropped, reported success.
  contract_fleet f("duckdb");
  f.load();
  f.config("\n[sources.shop.tables.orders]\ncontract = \"enforced\"\n"
           "columns = { total = \"decimal(12,2)\", status = \"text\" }\n");
  auto plan = run_flotilla(f.w, {"plan"});
  INFO(plan.out << plan.err);
  CHECK(plan.exit_code == 1);
  CHECK_THAT(plan.out, Catch::Contains("column 'id' is in the source's primary key"));
  int rc = -1;
  auto run = flotilla_json(f.w, {"run"}, &rc);
  INFO(run.dump());
  CHECK(rc == 1);
  const auto* t = find_table(run, f.table("orders"));
  REQUIRE(t != nullptr);
  CHECK((*t)["error_code"] == "FLT-S010");
  CHECK(duckdb_query(f.w.file("wh.duckdb"), "SELECT count(id) FROM " + f.table("orders")) ==
        std::vector<std::vector<std::string>>{{"2"}});
  // Declared, it loads.
  f.config("\n[sources.shop.tables.orders]\ncontract = \"enforced\"\n"
           "columns = { id = \"bigint\", total = \"decimal(12,2)\", status = \"text\" }\n");
  CHECK(run_flotilla(f.w, {"run"}).exit_code == 0);
}

TEST_CASE("an enforced contract's undeclared live columns are contract differences") {
  const std::string kind = GENERATE(std::string("duckdb"), std::string("postgres"));
  INFO("target " << kind);
  contract_fleet f(kind);
  f.load();
  f.config("\n[sources.shop.tables.orders]\ncontract = \"enforced\"\n"
           "columns = { id = \"bigint\", total = \"decimal(12,2)\" }\n");
  auto r = run_flotilla(f.w, {"contract", "diff"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find(fmt::format("  DIFF  table:{}\n        undeclared: column 'status' (text) is in "
                               "the live table but not declared\n",
                               f.table("orders"))) != std::string::npos);
  CHECK(r.out.find("\n1 contract difference(s)\n") != std::string::npos);
  // Without the contract the same declarations are fine: extra live columns are allowed.
  f.config("\n[sources.shop.tables.orders]\ncolumns = { id = \"bigint\", total = \"decimal(12,2)\" }\n");
  CHECK(run_flotilla(f.w, {"contract", "diff"}).exit_code == 0);
}

TEST_CASE("contract diff compares types as the target stores them") {
  const std::string kind = GENERATE(std::string("duckdb"), std::string("postgres"));
  INFO("target " << kind);
  contract_fleet f(kind);
  f.load();
  f.config("\n[sources.shop.tables.customers]\ncolumns = { name = \"varchar(40)\" }\n");
  auto r = run_flotilla(f.w, {"contract", "diff"});
  if (kind == "duckdb") {
    // DuckDB keeps no VARCHAR length: varchar(40) is stored as, and reads back as, text.
    CHECK(r.exit_code == 0);
  } else {
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("type_mismatch: column 'name' is declared varchar(40) but physical type is "
                     "text\n") != std::string::npos);
  }
}

TEST_CASE("contract diff --output json lists every table and finding") {
  contract_fleet f("duckdb");
  f.load();
  f.config("\n[sources.shop.tables.orders]\ncontract = \"enforced\"\n"
           "columns = { id = \"int\", total = \"decimal(18,2)\", coupon = \"text\" }\n");
  int rc = -1;
  auto j = flotilla_json(f.w, {"contract", "diff"}, &rc);
  CHECK(rc == 1);
  CHECK(j["differences"] == 4);
  CHECK(j["errors"].empty());
  const auto* customers = table_entry(j, "staging__us_west__shop.customers");
  REQUIRE(customers != nullptr);
  CHECK((*customers)["status"] == "ok");
  CHECK((*customers)["source"] == "shop");
  CHECK((*customers)["source_table"] == "customers");
  CHECK((*customers)["declared_columns"] == 0);
  CHECK((*customers)["findings"].empty());
  CHECK((*customers)["note"].get<std::string>().find("nothing to compare") != std::string::npos);
  const auto* orders = table_entry(j, "staging__us_west__shop.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "diff");
  CHECK((*orders)["contract"] == "enforced");
  CHECK_FALSE(orders->contains("note"));
  const auto& fs = (*orders)["findings"];
  REQUIRE(fs.size() == 4);
  CHECK(fs[0] == nlohmann::json{{"kind", "type_mismatch"},
                                {"column", "id"},
                                {"declared", "int"},
                                {"physical", "bigint"},
                                {"message", "column 'id' is declared int but physical type is bigint"}});
  CHECK(fs[1]["kind"] == "type_mismatch");
  CHECK(fs[1]["declared"] == "decimal(18,2)");
  CHECK(fs[1]["physical"] == "decimal(12,2)");
  CHECK(fs[2]["kind"] == "missing");
  CHECK(fs[2]["column"] == "coupon");
  CHECK(fs[2]["physical"].is_null());
  CHECK(fs[3]["kind"] == "undeclared");
  CHECK(fs[3]["column"] == "status");
  CHECK(fs[3]["declared"].is_null());
  CHECK(fs[3]["physical"] == "text");
}

TEST_CASE("contract diff on a plan-only target says the live table cannot be read") {
  workdir w;
  sqlite_exec(w.file("shop.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY);");
  w.write("flotilla.toml", "[targets.sf]\ndialect = \"snowflake\"\ndatabase = \"ACME\"\n"
                           "schema = \"staging__{source}\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n");
  auto r = run_flotilla(w, {"contract", "diff"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("  DIFF  table:staging__shop.orders\n        unreadable: the live table cannot "
                   "be read: target 'sf' uses dialect 'snowflake'") != std::string::npos);
  int rc = -1;
  auto j = flotilla_json(w, {"contract", "diff"}, &rc);
  CHECK(rc == 1);
  CHECK(j["tables"][0]["findings"][0]["kind"] == "unreadable");
  auto g = run_flotilla(w, {"contract", "generate"});
  CHECK(g.exit_code == 1);
  CHECK(g.err.find("table:staging__shop.orders cannot be declared") != std::string::npos);
}

TEST_CASE("contract diff names a source it cannot read and exits 1; config errors exit 2") {
  workdir w;
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"gone.db\"\n");
  auto r = run_flotilla(w, {"contract", "diff"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("error: source 'shop' cannot be read") != std::string::npos);
  CHECK(r.out.find("1 source(s) could not be read") != std::string::npos);
  auto j = flotilla_json(w, {"contract", "diff"});
  CHECK(j["errors"][0]["source"] == "shop");
  CHECK_FALSE(std::filesystem::exists(w.file("wh.duckdb")));  // nothing created

  CHECK(run_flotilla(w, {"contract", "diff", "--filter", "nosuchtag=1"}).exit_code == 2);
  CHECK(run_flotilla(w, {"contract"}).exit_code == 2);
  w.write("flotilla.toml", "[targets.wh]\ndialect = \"duckdbb\"\n");
  auto bad = run_flotilla(w, {"contract", "generate"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("FLT-C005") != std::string::npos);
}

TEST_CASE("contract generate proposes each live table's columns as TOML sections") {
  const std::string kind = GENERATE(std::string("duckdb"), std::string("postgres"));
  INFO("target " << kind);
  contract_fleet f(kind);
  f.load();
  sqlite_exec(f.w.file("shop.db"), "CREATE TABLE refunds (id INTEGER PRIMARY KEY);");
  f.config("\n[sources.shop.tables.orders]\ncolumns = { total = \"decimal(18,2)\" }\n");
  const std::string before = read_file(f.w.path() / "flotilla.toml");
  auto r = run_flotilla(f.w, {"contract", "generate"});
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "[sources.shop.tables.\"customers\"]\n"
        "columns = { id = \"bigint\", name = \"text\" }\n"
        "\n"
        "[sources.shop.tables.\"orders\"]\n"
        "columns = { id = \"bigint\", total = \"decimal(12,2)\", status = \"text\" }\n");
  CHECK(r.err.find(fmt::format("note: table:{} has no live table", f.table("refunds"))) !=
        std::string::npos);
  // The declared widening no run has made yet is replaced by the live type: said.
  CHECK_THAT(r.err, Catch::Contains(fmt::format("note: table:{} column 'total' is declared "
                                                "\"decimal(18,2)\", and the live table has "
                                                "decimal(12,2)",
                                                f.table("orders"))));
  CHECK(read_file(f.w.path() / "flotilla.toml") == before);  // generate alone writes nothing

  int rc = -1;
  auto j = flotilla_json(f.w, {"contract", "generate"}, &rc);
  CHECK(rc == 0);
  CHECK(j["written"] == false);
  const auto* orders = table_entry(j, f.table("orders"));
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "proposed");
  CHECK((*orders)["section"] == "[sources.shop.tables.\"orders\"]");
  CHECK((*orders)["columns"][1] == nlohmann::json{{"name", "total"}, {"type", "decimal(12,2)"}});
  CHECK((*orders)["declared_not_live"] ==
        nlohmann::json::array({{{"column", "total"}, {"declared", "decimal(18,2)"},
                                {"live", "decimal(12,2)"}}}));
  CHECK((*table_entry(j, f.table("refunds")))["status"] == "no_live_table");
}

TEST_CASE("contract generate --write keeps a declared column no run has added yet") {
  // The declaration is the user's: a proposal of the live table alone would drop it,
  // and with on_schema_change = "ignore" the column would then never be loaded.
  workdir w;
  sqlite_exec(w.file("shop.db"),
              "CREATE TABLE orders (id INTEGER PRIMARY KEY, total DECIMAL(12,2));"
              "INSERT INTO orders VALUES (1, 10.50);");
  const std::string head = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n";
  w.write("flotilla.toml", head);
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  sqlite_exec(w.file("shop.db"), "ALTER TABLE orders ADD COLUMN coupon TEXT;");
  w.write("flotilla.toml", head + "[sources.shop.tables.orders]\non_schema_change = \"ignore\"\n"
                                  "columns = { coupon = \"varchar(40)\", gone = \"int\" }\n");
  int rc = -1;
  auto j = flotilla_json(w, {"contract", "generate"}, &rc);
  CHECK(rc == 0);
  const auto& row = j["tables"][0];
  CHECK(row["declared_not_live"] ==
        nlohmann::json::array({{{"column", "coupon"}, {"declared", "varchar(40)"},
                                {"live", nullptr}}}));
  CHECK(row["not_in_source"] == nlohmann::json::array({"gone"}));
  auto r = run_flotilla(w, {"contract", "generate", "--write"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("column 'coupon' is declared \"varchar(40)\" and not in the "
                                    "live table yet") &&
                        Catch::Contains("column 'gone' is declared but is neither in the live "
                                        "table nor in the source"));
  CHECK_THAT(read_file(w.path() / "flotilla.toml"),
             Catch::Contains("coupon = \"varchar(40)\"") && !Catch::Contains("gone"));
  // The next run adds it as declared.
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT data_type FROM information_schema.columns "
                                          "WHERE table_name = 'orders' AND column_name = "
                                          "'coupon'") ==
        std::vector<std::vector<std::string>>{{"VARCHAR"}});
}

TEST_CASE("contract generate --write keeps a commented config byte for byte, and contract diff then agrees") {
  workdir w;
  sqlite_exec(w.file("shop.db"),
              "CREATE TABLE orders (id INTEGER PRIMARY KEY, total DECIMAL(12,2), status TEXT);"
              "INSERT INTO orders VALUES (1, 10.50, 'new');"
              "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
              "CREATE TABLE \"line items\" (id INTEGER PRIMARY KEY, \"unit price\" DECIMAL(10,2),"
              " \"Menge ü\" INTEGER, \"say \"\"hi\"\"\" TEXT);");
  const std::string head =
      "# Flotilla for the shop fleet.\n"
      "#   contracts adopted by `flotilla contract generate --write`\n"
      "\n"
      "[project]\n"
      "name = \"shop\"   # the project name\n"
      "\n"
      "[targets.wh]\n"
      "dialect   =   \"duckdb\"\n"
      "path = \"wh.duckdb\"\n"
      "schema = \"raw\"\n"
      "\n"
      "\n"
      "[sources.shop]            # the SQLite shop\n"
      "adapter = \"sqlite\"\n"
      "path    = \"shop.db\"\n"
      "include = [\n"
      "  \"orders\",      # every order\n"
      "  \"customers\",\n"
      "  \"line items\",\n"
      "]\n";
  const std::string tail =
      "\n"
      "# ---- other settings ----\n"
      "[io]\n"
      "max_connections_per_endpoint = 2\n";
  // First load the tables as the source has them.
  w.write("flotilla.toml", head + tail);
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);

  w.write("flotilla.toml", head +
                               "\n"
                               "  # orders: pin the total\n"
                               "  [sources.shop.tables.orders]\n"
                               "  description = \"Orders, one row per order.\"\n"
                               "  columns = {total=\"decimal(18,2)\"}   # to adopt\n"
                               "  cursor_column = \"id\"\n"
                               "\n"
                               "[sources.shop.tables.\"line items\"]\n"
                               "# no columns yet\n"
                               "unique_key = [\"id\"]\n" +
                               tail);
  REQUIRE(run_flotilla(w, {"contract", "diff"}).exit_code == 1);

  auto r = run_flotilla(w, {"contract", "generate", "--write"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out ==
        "Wrote 3 declaration(s) to flotilla.toml\n"
        "  section added     [sources.shop.tables.\"customers\"]\n"
        "  columns added     [sources.shop.tables.\"line items\"]\n"
        "  columns replaced  [sources.shop.tables.\"orders\"]\n");
  const std::string expected =
      head +
      "\n"
      "  # orders: pin the total\n"
      "  [sources.shop.tables.orders]\n"
      "  description = \"Orders, one row per order.\"\n"
      "  columns = { id = \"bigint\", total = \"decimal(12,2)\", status = \"text\" }   # to adopt\n"
      "  cursor_column = \"id\"\n"
      "\n"
      "[sources.shop.tables.\"line items\"]\n"
      "columns = { id = \"bigint\", \"unit price\" = \"decimal(10,2)\", \"Menge ü\" = \"int\", "
      "\"say \\\"hi\\\"\" = \"text\" }\n"
      "# no columns yet\n"
      "unique_key = [\"id\"]\n"
      "\n"
      "[sources.shop.tables.\"customers\"]\n"
      "columns = { id = \"bigint\", name = \"text\" }\n" +
      tail;
  CHECK(read_file(w.path() / "flotilla.toml") == expected);

  auto diff = run_flotilla(w, {"contract", "diff"});
  INFO(diff.out << diff.err);
  CHECK(diff.exit_code == 0);
  CHECK(diff.out.find("\n0 contract difference(s)\n") != std::string::npos);

  SECTION("writing again changes nothing") {
    const auto before = std::filesystem::last_write_time(w.path() / "flotilla.toml");
    std::filesystem::last_write_time(w.path() / "flotilla.toml",
                                     before - std::chrono::hours(1));
    auto again = run_flotilla(w, {"contract", "generate", "--write"});
    REQUIRE(again.exit_code == 0);
    CHECK(again.out == "flotilla.toml already declares these 3 table(s) as proposed; nothing "
                       "written\n");
    CHECK(read_file(w.path() / "flotilla.toml") == expected);
    // Not rewritten: the file keeps its (back-dated) modification time.
    CHECK(std::filesystem::last_write_time(w.path() / "flotilla.toml") ==
          before - std::chrono::hours(1));
    auto json = run_flotilla(w, {"contract", "generate", "--write", "--output", "json"});
    auto j = nlohmann::json::parse(json.out);
    CHECK(j["written"] == false);
    CHECK(j["tables"][0]["edit"] == "unchanged");
  }
  SECTION("the adopted declarations can be enforced") {
    std::string enforced = expected;
    enforced.insert(enforced.find("[sources.shop]            # the SQLite shop\n") +
                        std::string("[sources.shop]            # the SQLite shop\n").size(),
                    "contract = \"enforced\"\n");
    w.write("flotilla.toml", enforced);
    auto strict = run_flotilla(w, {"contract", "diff"});
    INFO(strict.out << strict.err);
    CHECK(strict.exit_code == 0);
  }
}

TEST_CASE("contract generate --write leaves the file alone when nothing can be proposed") {
  workdir w;
  sqlite_exec(w.file("shop.db"), "CREATE TABLE orders (id INTEGER PRIMARY KEY);");
  const std::string text = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n";
  w.write("flotilla.toml", text);
  auto r = run_flotilla(w, {"contract", "generate", "--write"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "Nothing to write: no selected table has a live table\n");
  CHECK(read_file(w.path() / "flotilla.toml") == text);
}

TEST_CASE("contract generate --write says which tables leave the source-drift gate") {
  contract_fleet f("duckdb");
  f.load();
  // Under contract = "none" declared columns only pin types: the gate keeps checking the
  // tables, and --write has nothing to say about it.
  f.w.write("flotilla.toml",
            f.target_section() +
                "\n[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n"
                "tags = { region = \"us_west\" }\non_source_drift = \"warn\"\n"
                "[sources.shop.tables.orders]\nunique_key = [\"id\"]\n");
  auto none = run_flotilla(f.w, {"contract", "generate", "--write", "--output", "json"});
  INFO(none.out << none.err);
  REQUIRE(none.exit_code == 0);
  const auto jn = nlohmann::json::parse(none.out);
  for (const auto* name : {"orders", "customers"}) {
    const auto* t = table_entry(jn, f.table(name));
    REQUIRE(t != nullptr);
    CHECK_FALSE(t->contains("left_drift_gate"));
  }
  CHECK(none.err.find("on_source_drift") == std::string::npos);

  // An enforced contract prunes the read to the declared columns, which the gate then
  // skips: both tables, loaded before the contract was set, leave it once declared. A
  // second --write changes nothing and says nothing.
  contract_fleet e("duckdb");
  e.load();
  e.w.write("flotilla.toml",
            e.target_section() +
                "\n[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n"
                "tags = { region = \"us_west\" }\non_source_drift = \"warn\"\n"
                "contract = \"enforced\"\n");
  auto r = run_flotilla(e.w, {"contract", "generate", "--write", "--output", "json"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  for (const auto* name : {"orders", "customers"}) {
    const auto* t = table_entry(j, e.table(name));
    REQUIRE(t != nullptr);
    CHECK(t->value("left_drift_gate", "") == "warn");
  }
  auto again = run_flotilla(e.w, {"contract", "generate", "--write"});
  INFO(again.out << again.err);
  CHECK(again.exit_code == 0);
  CHECK(again.err.find("on_source_drift") == std::string::npos);

  // In text, a note on stderr per table.
  contract_fleet t("duckdb");
  t.load();
  t.w.write("flotilla.toml", "[project]\non_source_drift = \"fail\"\ncontract = \"enforced\"\n\n" +
                                 t.target_section() +
                                 "\n[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n"
                                 "tags = { region = \"us_west\" }\ninclude = [\"orders\"]\n");
  auto text = run_flotilla(t.w, {"contract", "generate", "--write"});
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.err.find("note: [sources.shop.tables.\"orders\"] now declares columns: "
                      "on_source_drift = \"fail\" no longer checks this table") !=
        std::string::npos);
}

TEST_CASE("contract diff and generate say when their --filter matched no table") {
  contract_fleet f("duckdb");
  f.load();
  for (const char* verb : {"diff", "generate"}) {
    INFO(verb);
    auto r = run_flotilla(f.w, {"contract", verb, "--filter", "table=nosuch"});
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("warning: the selection (--filter table=nosuch) matched "
                                      "no table of any source"));
    auto ok = run_flotilla(f.w, {"contract", verb, "--filter", "table=orders"});
    CHECK(ok.err.find("matched no table") == std::string::npos);
  }
}

TEST_CASE("contract generate --write keeps a declared type the target stores as the live one") {
  // DuckDB's VARCHAR has no length: varchar(20) is stored as text, which contract diff
  // finds OK; generate proposes it as declared, and --write leaves the file alone.
  contract_fleet f("duckdb");
  f.load();
  f.config("[sources.shop.tables.customers]\ncolumns = { id = \"bigint\", name = \"varchar(20)\" }\n");
  const std::string before = read_file(f.w.path() / "flotilla.toml");
  auto diff = run_flotilla(f.w, {"contract", "diff", "--filter", "table=customers"});
  INFO(diff.out << diff.err);
  REQUIRE(diff.exit_code == 0);
  auto r = run_flotilla(f.w, {"contract", "generate", "--write", "--filter", "table=customers",
                              "--output", "json"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["written"] == false);
  const auto* t = table_entry(j, f.table("customers"));
  REQUIRE(t != nullptr);
  CHECK((*t)["edit"] == "unchanged");
  CHECK((*t)["columns"][1]["type"] == "varchar(20)");
  CHECK(read_file(f.w.path() / "flotilla.toml") == before);

  // The documented aliases name the same types: kept as written too.
  f.config("[sources.shop.tables.customers]\ncolumns = { id = \"bigint\", name = \"string\" }\n");
  const std::string aliases = read_file(f.w.path() / "flotilla.toml");
  REQUIRE(run_flotilla(f.w, {"contract", "diff", "--filter", "table=customers"}).exit_code == 0);
  auto a = run_flotilla(f.w, {"contract", "generate", "--write", "--filter", "table=customers",
                              "--output", "json"});
  INFO(a.out << a.err);
  REQUIRE(a.exit_code == 0);
  const auto ja = nlohmann::json::parse(a.out);
  const auto* ta = table_entry(ja, f.table("customers"));
  REQUIRE(ta != nullptr);
  CHECK((*ta)["edit"] == "unchanged");
  CHECK(read_file(f.w.path() / "flotilla.toml") == aliases);
}

TEST_CASE("contract generate --write declares the source's type where the live one cannot hold "
          "its values, so the next plan still loads the table") {
  // A numeric(40,2) loads into DuckDB, which describes the column as decimal(38,2): that
  // declaration could not read the source's values (FLT-S002 on every plan after).
  workdir w;
  const std::string schema = "cg_" + unique_suffix();
  pg_exec(pg_dsn(), "CREATE SCHEMA \"" + schema + "\"; CREATE TABLE \"" + schema +
                        "\".wide (id int PRIMARY KEY, amount numeric(40,2)); INSERT INTO \"" +
                        schema + "\".wide VALUES (1, 12345678901234567890.25)");
  w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                                       "[sources.pg]\nadapter = \"postgres\"\ndsn = \"{}\"\n"
                                       "include = [\"{}.wide\"]\n",
                                       pg_dsn(), schema));
  auto run = run_flotilla(w, {"run"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  auto gen = run_flotilla(w, {"contract", "generate", "--write"});
  INFO(gen.out << gen.err);
  CHECK(gen.exit_code == 0);
  CHECK_THAT(read_file(w.path() / "flotilla.toml"), Catch::Contains("amount = \"decimal(40,2)\""));
  auto plan = run_flotilla(w, {"plan"});
  INFO(plan.out << plan.err);
  CHECK(plan.exit_code == 0);
  CHECK(run_flotilla(w, {"contract", "diff"}).exit_code == 0);
  pg_exec(pg_dsn(), "DROP SCHEMA \"" + schema + "\" CASCADE");
}
