#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dialects/dialect.hpp"

using namespace flotilla;
using namespace flotilla::dialects;
using schema::column;
using schema::portable_type;
using schema::table_schema;
using statements = std::vector<std::string>;

namespace {

const dialect& D(std::string_view name) {
  static std::map<std::string, std::unique_ptr<dialect>, std::less<>> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(std::string(name), std::move(*make_dialect(name))).first;
  return *it->second;
}

/// Used in static tables too, so it throws rather than REQUIRE-ing.
portable_type T(std::string_view portable) { return schema::parse_type(portable).value(); }

const table_ref orders{"", "shop", "orders"};
const table_ref staging{"", "shop", "orders__flotilla_staging"};

// id is the key; amount is NOT NULL; the others are nullable.
const table_schema orders_schema{{
    column{"id", T("bigint"), false, true},
    column{"status", T("varchar(20)"), true, false},
    column{"amount", T("decimal(12,2)"), false, false},
    column{"created_at", T("timestamp_tz"), true, false},
}};

// A rebuild from `before` to `after`: status retyped, amount widened, legacy only in
// the old table (left out), coupon only in the new one (starts NULL).
const table_schema before{{
    column{"id", T("bigint"), false, true},
    column{"status", T("varchar(20)"), true, false},
    column{"amount", T("decimal(10,2)"), true, false},
    column{"legacy", T("text"), true, false},
}};
const table_schema after{{
    column{"id", T("bigint"), false, true},
    column{"status", T("int"), true, false},
    column{"amount", T("decimal(12,2)"), true, false},
    column{"coupon", T("text"), true, false},
}};

}  // namespace

TEST_CASE("create_schema creates it only when missing") {
  const std::map<std::string_view, std::string> expected{
      {"duckdb", R"(CREATE SCHEMA IF NOT EXISTS "shop")"},
      {"postgres", R"(CREATE SCHEMA IF NOT EXISTS "shop")"},
      {"sqlite", ""},  // no CREATE SCHEMA: a schema is an attached database
      {"snowflake", R"(CREATE SCHEMA IF NOT EXISTS "shop")"},
      {"bigquery", "CREATE SCHEMA IF NOT EXISTS `shop`"},
      {"databricks", "CREATE SCHEMA IF NOT EXISTS `shop`"},
      {"trino", R"(CREATE SCHEMA IF NOT EXISTS "shop")"},
  };
  for (const auto& [name, sql] : expected) {
    INFO(name);
    CHECK(D(name).create_schema("shop") == sql);
  }
}

TEST_CASE("create_schema creates it in the target's database, catalog or project") {
  const std::map<std::string_view, std::string> expected{
      {"duckdb", R"(CREATE SCHEMA IF NOT EXISTS "acme"."shop")"},
      {"postgres", R"(CREATE SCHEMA IF NOT EXISTS "shop")"},  // the connection's database
      {"sqlite", ""},
      {"snowflake", R"(CREATE SCHEMA IF NOT EXISTS "acme"."shop")"},
      {"bigquery", "CREATE SCHEMA IF NOT EXISTS `acme`.`shop`"},
      {"databricks", "CREATE SCHEMA IF NOT EXISTS `acme`.`shop`"},
      {"trino", R"(CREATE SCHEMA IF NOT EXISTS "acme"."shop")"},
  };
  for (const auto& [name, sql] : expected) {
    INFO(name);
    CHECK(D(name).create_schema("shop", "acme") == sql);
  }
}

TEST_CASE("a cast from boolean to a number goes through integer on postgres only") {
  const auto from = *schema::parse_type("bool");
  for (const char* to : {"smallint", "bigint", "decimal(12,2)", "double"}) {
    INFO(to);
    const auto t = *schema::parse_type(to);
    CHECK(D("postgres").cast("\"f\"", from, t) ==
          "CAST(CAST(\"f\" AS INTEGER) AS " + D("postgres").physical_type(t) + ")");
    CHECK(D("duckdb").cast("\"f\"", from, t) ==
          "CAST(\"f\" AS " + D("duckdb").physical_type(t) + ")");
  }
  CHECK(D("postgres").cast("\"f\"", from, *schema::parse_type("int")) == R"(CAST("f" AS INTEGER))");
  CHECK(D("postgres").cast("\"f\"", from, *schema::parse_type("text")) == R"(CAST("f" AS TEXT))");
}

TEST_CASE("create_table lists the columns in order, NOT NULL where needed, and the key") {
  const std::map<std::string_view, std::string> expected{
      {"duckdb",
       R"(CREATE TABLE "shop"."orders" ("id" BIGINT NOT NULL, "status" VARCHAR, "amount" DECIMAL(12,2) NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE, PRIMARY KEY ("id")))"},
      {"postgres",
       R"(CREATE TABLE "shop"."orders" ("id" BIGINT NOT NULL, "status" VARCHAR(20), "amount" NUMERIC(12,2) NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE, PRIMARY KEY ("id")))"},
      {"sqlite",
       R"(CREATE TABLE "shop"."orders" ("id" BIGINT NOT NULL, "status" VARCHAR(20), "amount" DECIMAL(12,2) NOT NULL, "created_at" TIMESTAMPTZ, PRIMARY KEY ("id")))"},
      {"snowflake",
       R"(CREATE TABLE "shop"."orders" ("id" NUMBER(38,0) NOT NULL, "status" VARCHAR(20), "amount" NUMBER(12,2) NOT NULL, "created_at" TIMESTAMP_TZ, PRIMARY KEY ("id")))"},
      {"bigquery",
       "CREATE TABLE `shop`.`orders` (`id` INT64 NOT NULL, `status` STRING, `amount` NUMERIC(12,2) "
       "NOT NULL, `created_at` TIMESTAMP, PRIMARY KEY (`id`) NOT ENFORCED)"},
      {"databricks",
       "CREATE TABLE `shop`.`orders` (`id` BIGINT NOT NULL, `status` STRING, `amount` DECIMAL(12,2) "
       "NOT NULL, `created_at` TIMESTAMP) USING DELTA TBLPROPERTIES "
       "('delta.enableTypeWidening' = 'true')"},
      {"trino",
       R"(CREATE TABLE "shop"."orders" ("id" BIGINT NOT NULL, "status" VARCHAR(20), "amount" DECIMAL(12,2) NOT NULL, "created_at" TIMESTAMP(6) WITH TIME ZONE))"},
  };
  for (const auto& [name, sql] : expected) {
    INFO(name);
    CHECK(D(name).create_table(orders, orders_schema) == sql);
  }
}

TEST_CASE("a key column is NOT NULL even when declared nullable, and a composite key keeps order") {
  const table_schema s{{column{"region", T("text"), true, true}, column{"n", T("int"), true, false},
                        column{"id", T("bigint"), false, true}}};
  CHECK(D("duckdb").create_table({"", "", "t"}, s) ==
        R"(CREATE TABLE "t" ("region" VARCHAR NOT NULL, "n" INTEGER, "id" BIGINT NOT NULL, PRIMARY KEY ("region", "id")))");
}

TEST_CASE("a table without key columns gets no PRIMARY KEY clause") {
  const table_schema s{{column{"n", T("int")}}};
  for (auto name : dialect_names()) {
    INFO(name);
    CHECK(D(name).create_table({"", "", "t"}, s).find("PRIMARY KEY") == std::string::npos);
  }
}

TEST_CASE("a table with no columns cannot be created") {
  for (auto name : dialect_names()) {
    INFO(name);
    CHECK_THROWS_AS(D(name).create_table(orders, table_schema{}), std::invalid_argument);
  }
}

TEST_CASE("add_column adds a nullable column, whatever the source declares") {
  const column coupon{"coupon", T("varchar(20)"), false, true};  // NOT NULL key on the source
  const std::map<std::string_view, std::string> expected{
      {"duckdb", R"(ALTER TABLE "shop"."orders" ADD COLUMN "coupon" VARCHAR)"},
      {"postgres", R"(ALTER TABLE "shop"."orders" ADD COLUMN "coupon" VARCHAR(20))"},
      {"sqlite", R"(ALTER TABLE "shop"."orders" ADD COLUMN "coupon" VARCHAR(20))"},
      {"snowflake", R"(ALTER TABLE "shop"."orders" ADD COLUMN "coupon" VARCHAR(20))"},
      {"bigquery", "ALTER TABLE `shop`.`orders` ADD COLUMN `coupon` STRING"},
      {"databricks", "ALTER TABLE `shop`.`orders` ADD COLUMN `coupon` STRING"},
      {"trino", R"(ALTER TABLE "shop"."orders" ADD COLUMN "coupon" VARCHAR(20))"},
  };
  for (const auto& [name, sql] : expected) {
    INFO(name);
    CHECK(D(name).add_column(orders, coupon) == sql);
  }
}

TEST_CASE("alter_column_type uses each engine's own syntax") {
  const std::map<std::string_view, statements> expected{
      {"duckdb", {R"(ALTER TABLE "shop"."orders" ALTER COLUMN "amount" TYPE DECIMAL(14,2))"}},
      {"postgres",
       {R"(ALTER TABLE "shop"."orders" ALTER COLUMN "amount" TYPE NUMERIC(14,2) USING "amount"::NUMERIC(14,2))"}},
      {"snowflake",
       {R"(ALTER TABLE "shop"."orders" ALTER COLUMN "amount" SET DATA TYPE NUMBER(14,2))"}},
      {"bigquery",
       {"ALTER TABLE `shop`.`orders` ALTER COLUMN `amount` SET DATA TYPE NUMERIC(14,2)"}},
      {"databricks", {"ALTER TABLE `shop`.`orders` ALTER COLUMN `amount` TYPE DECIMAL(14,2)"}},
      {"trino",
       {R"(ALTER TABLE "shop"."orders" ALTER COLUMN "amount" SET DATA TYPE DECIMAL(14,2))"}},
  };
  for (const auto& [name, sql] : expected) {
    INFO(name);
    CHECK(D(name).alter_column_type(orders, "amount", T("decimal(14,2)")) == sql);
  }
}

TEST_CASE("seed 001's example ALTER reads the same on duckdb") {
  const table_ref t{"acme_warehouse", "staging__us_west__shopify", "orders"};
  CHECK(D("duckdb").alter_column_type(t, "amount", T("decimal(12,2)")) ==
        statements{R"(ALTER TABLE "acme_warehouse"."staging__us_west__shopify"."orders" ALTER COLUMN "amount" TYPE DECIMAL(12,2))"});
}

TEST_CASE("sqlite refuses an in-place type change and points to the rebuild") {
  CHECK_FALSE(D("sqlite").supports_in_place_type_change());
  CHECK_THROWS_WITH(D("sqlite").alter_column_type(orders, "amount", T("decimal(14,2)")),
                    Catch::Contains("use rebuild_and_swap"));
}

TEST_CASE("a rebuild on duckdb and sqlite copies the shared columns, then renames") {
  const statements duckdb{
      R"(DROP TABLE IF EXISTS "shop"."orders__flotilla_rebuild")",
      R"(CREATE TABLE "shop"."orders__flotilla_rebuild" ("id" BIGINT NOT NULL, "status" INTEGER, "amount" DECIMAL(12,2), "coupon" VARCHAR, PRIMARY KEY ("id")))",
      R"(INSERT INTO "shop"."orders__flotilla_rebuild" ("id", "status", "amount") SELECT CAST("id" AS BIGINT), CAST("status" AS INTEGER), CAST("amount" AS DECIMAL(12,2)) FROM "shop"."orders")",
      R"(DROP TABLE "shop"."orders")",
      R"(ALTER TABLE "shop"."orders__flotilla_rebuild" RENAME TO "orders")",
  };
  CHECK(D("duckdb").rebuild_and_swap(orders, before, after) == duckdb);

  const table_ref main_orders{"", "main", "orders"};
  const statements sqlite{
      R"(DROP TABLE IF EXISTS "main"."orders__flotilla_rebuild")",
      R"(CREATE TABLE "main"."orders__flotilla_rebuild" ("id" BIGINT NOT NULL, "status" INT, "amount" DECIMAL(12,2), "coupon" TEXT, PRIMARY KEY ("id")))",
      R"(INSERT INTO "main"."orders__flotilla_rebuild" ("id", "status", "amount") SELECT "id", "status", "amount" FROM "main"."orders")",
      R"(DROP TABLE "main"."orders")",
      R"(ALTER TABLE "main"."orders__flotilla_rebuild" RENAME TO "orders")",
  };
  CHECK(D("sqlite").rebuild_and_swap(main_orders, before, after) == sqlite);
}

TEST_CASE("a rebuild on postgres keeps the old table's grants and names the key index") {
  const statements expected{
      R"(DROP TABLE IF EXISTS "shop"."orders__flotilla_rebuild")",
      R"(CREATE TABLE "shop"."orders__flotilla_rebuild" ("id" BIGINT NOT NULL, "status" INTEGER, "amount" NUMERIC(12,2), "coupon" TEXT, PRIMARY KEY ("id")))",
      R"(INSERT INTO "shop"."orders__flotilla_rebuild" ("id", "status", "amount") SELECT CAST("id" AS BIGINT), CAST("status" AS INTEGER), CAST("amount" AS NUMERIC(12,2)) FROM "shop"."orders")",
      R"(DO $flotilla$
DECLARE
  g record;
BEGIN
  IF (SELECT c.relacl FROM pg_catalog.pg_class c
      WHERE c.oid = pg_catalog.to_regclass('"shop"."orders"')) IS NULL THEN
    RETURN;
  END IF;
  FOR g IN
    SELECT a.privilege_type, a.is_grantable,
           CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END AS grantee
    FROM pg_catalog.pg_class c
    CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
    LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
    WHERE c.oid = pg_catalog.to_regclass('"shop"."orders"')
  LOOP
    EXECUTE pg_catalog.format('GRANT %s ON TABLE %s TO %s%s', g.privilege_type, '"shop"."orders__flotilla_rebuild"', g.grantee,
      CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
  END LOOP;
END;
$flotilla$)",
      R"(DROP TABLE "shop"."orders")",
      R"(ALTER TABLE "shop"."orders__flotilla_rebuild" RENAME TO "orders")",
      R"(DO $flotilla$
DECLARE
  k record;
BEGIN
  SELECT c.conindid::pg_catalog.regclass AS idx, i.relname, i.relnamespace INTO k
  FROM pg_catalog.pg_constraint c
  JOIN pg_catalog.pg_class i ON i.oid = c.conindid
  WHERE c.conrelid = pg_catalog.to_regclass('"shop"."orders"') AND c.contype = 'p';
  IF FOUND AND k.relname <> 'orders_pkey' AND NOT EXISTS (
      SELECT 1 FROM pg_catalog.pg_class
      WHERE relnamespace = k.relnamespace AND relname = 'orders_pkey') THEN
    EXECUTE pg_catalog.format('ALTER INDEX %s RENAME TO %I', k.idx, 'orders_pkey');
  END IF;
END;
$flotilla$)",
  };
  CHECK(D("postgres").rebuild_and_swap(orders, before, after) == expected);
}

TEST_CASE("a rebuild on the plan-only warehouses replaces the table in one statement or by rename") {
  const std::map<std::string_view, statements> expected{
      {"snowflake",
       {R"(CREATE OR REPLACE TABLE "shop"."orders" COPY GRANTS AS SELECT CAST("id" AS NUMBER(38,0)) AS "id", CAST("status" AS NUMBER(38,0)) AS "status", CAST("amount" AS NUMBER(12,2)) AS "amount", CAST(NULL AS VARCHAR(16777216)) AS "coupon" FROM "shop"."orders")"}},
      {"bigquery",
       {"CREATE OR REPLACE TABLE `shop`.`orders` AS SELECT CAST(`id` AS INT64) AS `id`, "
        "CAST(`status` AS INT64) AS `status`, CAST(`amount` AS NUMERIC(12,2)) AS `amount`, "
        "CAST(NULL AS STRING) AS `coupon` FROM `shop`.`orders`"}},
      {"databricks",
       {"CREATE OR REPLACE TABLE `shop`.`orders` USING DELTA TBLPROPERTIES "
        "('delta.enableTypeWidening' = 'true') AS SELECT CAST(`id` AS BIGINT) AS `id`, "
        "CAST(`status` AS INT) AS `status`, CAST(`amount` AS DECIMAL(12,2)) AS `amount`, "
        "CAST(NULL AS STRING) AS `coupon` FROM `shop`.`orders`"}},
      {"trino",
       {R"(DROP TABLE IF EXISTS "shop"."orders__flotilla_rebuild")",
        R"(CREATE TABLE "shop"."orders__flotilla_rebuild" AS SELECT CAST("id" AS BIGINT) AS "id", CAST("status" AS INTEGER) AS "status", CAST("amount" AS DECIMAL(12,2)) AS "amount", CAST(NULL AS VARCHAR) AS "coupon" FROM "shop"."orders")",
        R"(DROP TABLE "shop"."orders")",
        R"(ALTER TABLE "shop"."orders__flotilla_rebuild" RENAME TO "shop"."orders")"}},
  };
  for (const auto& [name, sql] : expected) {
    INFO(name);
    CHECK(D(name).rebuild_and_swap(orders, before, after) == sql);
  }
}

TEST_CASE("a rebuild sharing no column with the old table copies no rows") {
  const table_schema other{{column{"x", T("int")}}};
  const auto sql = D("duckdb").rebuild_and_swap(orders, before, other);
  REQUIRE(sql.size() == 4);
  CHECK(sql[2] == R"(DROP TABLE "shop"."orders")");
}

TEST_CASE("rebuild columns match the old table's by the dialect's name rule") {
  const table_schema old_upper{{column{"ID", T("int")}}};
  const table_schema wanted{{column{"id", T("bigint")}}};
  // DuckDB folds case: "ID" is "id", and its rows are copied.
  CHECK(D("duckdb").rebuild_and_swap({"", "", "t"}, old_upper, wanted)[2] ==
        R"(INSERT INTO "t__flotilla_rebuild" ("id") SELECT CAST("ID" AS BIGINT) FROM "t")");
  // PostgreSQL keeps quoted names exact: "id" is a new column, nothing to copy.
  for (const auto& s : D("postgres").rebuild_and_swap({"", "", "t"}, old_upper, wanted))
    CHECK(s.rfind("INSERT", 0) == std::string::npos);
}

TEST_CASE("a postgres rebuild of a long name uses a temporary name the server will not truncate") {
  const std::string long_name(70, 'a');
  const auto sql = D("postgres").rebuild_and_swap({"", "s", long_name}, before, after);
  const std::string drop = sql.front();
  const std::string tmp = drop.substr(drop.find("\"s\".\"") + 5);
  const std::string tmp_name = tmp.substr(0, tmp.size() - 1);
  CHECK(tmp_name.size() <= 63);
  CHECK(tmp_name.ends_with("__flotilla_rebuild"));
  CHECK(tmp_name.substr(0, 63) != long_name.substr(0, 63));
}

TEST_CASE("swap_in replaces the target with the loaded staging table") {
  const std::map<std::string_view, statements> expected{
      {"duckdb",
       {R"(DROP TABLE IF EXISTS "shop"."orders")",
        R"(ALTER TABLE "shop"."orders__flotilla_staging" RENAME TO "orders")"}},
      {"sqlite",
       {R"(DROP TABLE IF EXISTS "shop"."orders")",
        R"(ALTER TABLE "shop"."orders__flotilla_staging" RENAME TO "orders")"}},
      {"snowflake",
       {R"(CREATE OR REPLACE TABLE "shop"."orders" COPY GRANTS AS SELECT * FROM "shop"."orders__flotilla_staging")",
        R"(DROP TABLE IF EXISTS "shop"."orders__flotilla_staging")"}},
      {"bigquery",
       {"CREATE OR REPLACE TABLE `shop`.`orders` COPY `shop`.`orders__flotilla_staging`",
        "DROP TABLE IF EXISTS `shop`.`orders__flotilla_staging`"}},
      {"databricks",
       {"CREATE OR REPLACE TABLE `shop`.`orders` USING DELTA TBLPROPERTIES "
        "('delta.enableTypeWidening' = 'true') AS SELECT * FROM `shop`.`orders__flotilla_staging`",
        "DROP TABLE IF EXISTS `shop`.`orders__flotilla_staging`"}},
      {"trino",
       {R"(DROP TABLE IF EXISTS "shop"."orders")",
        R"(ALTER TABLE "shop"."orders__flotilla_staging" RENAME TO "shop"."orders")"}},
  };
  for (const auto& [name, sql] : expected) {
    INFO(name);
    CHECK(D(name).swap_in(staging, orders) == sql);
  }
}

TEST_CASE("swap_in on postgres copies the target's grants onto the staging table first") {
  const auto sql = D("postgres").swap_in(staging, orders);
  REQUIRE(sql.size() == 3);
  CHECK(sql[0].starts_with("DO $flotilla$\n"));
  CHECK_THAT(sql[0], Catch::Contains("WHERE c.oid = pg_catalog.to_regclass('\"shop\".\"orders\"')"));
  CHECK_THAT(sql[0], Catch::Contains("g.privilege_type, '\"shop\".\"orders__flotilla_staging\"'"));
  CHECK(sql[1] == R"(DROP TABLE IF EXISTS "shop"."orders")");
  CHECK(sql[2] == R"(ALTER TABLE "shop"."orders__flotilla_staging" RENAME TO "orders")");
}

TEST_CASE("a rename-based swap refuses a staging table in another schema") {
  for (const char* name : {"duckdb", "postgres", "sqlite", "trino"}) {
    INFO(name);
    CHECK_THROWS_AS(D(name).swap_in({"", "other", "orders__flotilla_staging"}, orders),
                    std::invalid_argument);
  }
}

TEST_CASE("drop_table drops only if the table exists") {
  const std::map<std::string_view, std::string> expected{
      {"duckdb", R"(DROP TABLE IF EXISTS "shop"."orders")"},
      {"postgres", R"(DROP TABLE IF EXISTS "shop"."orders")"},
      {"sqlite", R"(DROP TABLE IF EXISTS "shop"."orders")"},
      {"snowflake", R"(DROP TABLE IF EXISTS "shop"."orders")"},
      {"bigquery", "DROP TABLE IF EXISTS `shop`.`orders`"},
      {"databricks", "DROP TABLE IF EXISTS `shop`.`orders`"},
      {"trino", R"(DROP TABLE IF EXISTS "shop"."orders")"},
  };
  for (const auto& [name, sql] : expected) {
    INFO(name);
    CHECK(D(name).drop_table(orders) == sql);
  }
}

TEST_CASE("statement lists carry no transaction control; in_transaction adds it where DDL is transactional") {
  for (auto name : dialect_names()) {
    INFO(name);
    const dialect& d = D(name);
    auto swap = d.swap_in(staging, orders);
    for (const auto& s : swap)
      CHECK((s != "BEGIN" && s != "COMMIT"));
    const auto script = in_transaction(d, swap);
    if (d.supports_transactional_ddl()) {
      REQUIRE(script.size() == swap.size() + 2);
      CHECK(script.front() == "BEGIN");
      CHECK(script.back() == "COMMIT");
    } else {
      CHECK(script == swap);
    }
  }
  CHECK(in_transaction(D("duckdb"), {}).empty());
}

TEST_CASE("names are qualified catalog.schema.table, leaving out empty parts") {
  CHECK(D("duckdb").qualified({"wh", "shop", "orders"}) == R"("wh"."shop"."orders")");
  CHECK(D("duckdb").qualified({"", "", "orders"}) == R"("orders")");
  CHECK(D("postgres").qualified({"", "shop", "orders"}) == R"("shop"."orders")");
  CHECK(D("bigquery").qualified({"my-project", "shop", "orders"}) == "`my-project`.`shop`.`orders`");
  CHECK(D("databricks").qualified({"main", "shop", "orders"}) == "`main`.`shop`.`orders`");
  CHECK(D("trino").qualified({"iceberg", "shop", "orders"}) == R"("iceberg"."shop"."orders")");
  CHECK_THROWS_AS(D("sqlite").qualified({"wh", "shop", "orders"}), std::invalid_argument);
  CHECK_THROWS_AS(D("duckdb").qualified({"wh", "shop", ""}), std::invalid_argument);
}

TEST_CASE("a sqlite rebuild copies dates, times, JSON and UUIDs as they are") {
  // SQLite's CAST goes by affinity: CAST('2024-01-01 10:00:00' AS TIMESTAMP) is 2024.
  for (const char* t : {"date", "time", "timestamp", "timestamptz", "json", "uuid", "bigint",
                        "decimal(12,2)", "double", "bytes"}) {
    INFO(t);
    const auto ty = *schema::parse_type(t);
    CHECK(D("sqlite").cast("\"f\"", ty, ty) == "\"f\"");
  }
  CHECK(D("sqlite").cast("\"f\"", *schema::parse_type("int"), *schema::parse_type("bigint")) ==
        "\"f\"");
  CHECK(D("sqlite").cast("\"f\"", *schema::parse_type("timestamp"),
                         *schema::parse_type("timestamptz")) == "(\"f\" || '+00:00')");
  CHECK(D("sqlite").cast("\"f\"", *schema::parse_type("date"),
                         *schema::parse_type("timestamp")) == "(\"f\" || ' 00:00:00')");
  CHECK(D("sqlite").cast("\"f\"", *schema::parse_type("bigint"), *schema::parse_type("text")) ==
        "CAST(\"f\" AS TEXT)");
}

TEST_CASE("a full refresh keeps a live table whose NOT NULLs or key the source let go of, "
          "relaxing them where the engine can") {
  // The source no longer has amount's NOT NULL, nor the key.
  table_schema relaxed = orders_schema;
  for (auto& c : relaxed.columns) {
    c.nullable = true;
    c.key = false;
  }
  const auto r = schema::relaxation_for(orders_schema, relaxed);
  REQUIRE(r);
  CHECK(r->drop_key);
  CHECK(r->drop_not_null == std::vector<std::string>{"id", "amount"});
  // Stricter at the source than live: a NOT NULL is not added (the live table stays
  // permissive), the key is.
  const auto stricter = schema::relaxation_for(relaxed, orders_schema);
  REQUIRE(stricter);
  CHECK_FALSE(stricter->drop_key);
  CHECK(stricter->drop_not_null.empty());
  CHECK(stricter->add_key == std::vector<std::string>{"id"});
  table_schema not_null_only = relaxed;
  not_null_only.columns[2].nullable = false;
  const auto tighter = schema::relaxation_for(relaxed, not_null_only);
  REQUIRE(tighter);
  CHECK(tighter->empty());
  // A type or a name apart: no table kept.
  table_schema retyped = orders_schema;
  retyped.columns[2].type = T("decimal(14,2)");
  CHECK_FALSE(schema::relaxation_for(orders_schema, retyped));
  CHECK_FALSE(D("postgres").keeps_live_table(orders_schema, retyped));

  const auto pg = D("postgres").refresh_in_place(orders, orders_schema, relaxed);
  REQUIRE(pg.size() == 5);
  CHECK(pg[0] == R"(LOCK TABLE "shop"."orders" IN SHARE ROW EXCLUSIVE MODE)");
  CHECK(pg[1] == R"(DELETE FROM "shop"."orders")");
  CHECK(pg[2].find("DROP CONSTRAINT %I") != std::string::npos);
  CHECK(pg[2].find(R"('"shop"."orders"')") != std::string::npos);
  CHECK(pg[3] == R"(ALTER TABLE "shop"."orders" ALTER COLUMN "id" DROP NOT NULL)");
  CHECK(pg[4] == R"(ALTER TABLE "shop"."orders" ALTER COLUMN "amount" DROP NOT NULL)");
  CHECK(D("postgres").keeps_live_table(orders_schema, relaxed));
  // DuckDB drops no key in place; SQLite changes no column's constraint in place.
  CHECK_FALSE(D("duckdb").keeps_live_table(orders_schema, relaxed));
  CHECK_FALSE(D("sqlite").keeps_live_table(orders_schema, relaxed));
  CHECK(D("sqlite").refresh_in_place(orders, orders_schema, relaxed).front().starts_with("DROP TABLE"));
  CHECK_FALSE(D("sqlite").keeps_live_table(relaxed, orders_schema));
  CHECK(D("sqlite").keeps_live_table(relaxed, not_null_only));
  CHECK(D("sqlite").refresh_in_place(orders, relaxed, not_null_only) ==
        statements{R"(DELETE FROM "shop"."orders")"});
  // PostgreSQL adds the source's key on the emptied table.
  const auto keyed = D("postgres").refresh_in_place(orders, relaxed, orders_schema);
  REQUIRE(keyed.size() == 3);
  CHECK(keyed[2] == R"(ALTER TABLE "shop"."orders" ADD PRIMARY KEY ("id"))");
  CHECK_FALSE(D("duckdb").keeps_live_table(relaxed, orders_schema));
}
