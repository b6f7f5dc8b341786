#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "dialects/dialect.hpp"
#include "dialects/widening.hpp"
#include "schema/evolution.hpp"

using namespace flotilla;
using namespace flotilla::dialects;
using schema::portable_type;

namespace {

const dialect& D(std::string_view name) {
  static std::map<std::string, std::unique_ptr<dialect>, std::less<>> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(std::string(name), std::move(*make_dialect(name))).first;
  return *it->second;
}

portable_type T(std::string_view portable) {
  auto t = schema::parse_type(portable);
  REQUIRE(t.has_value());
  return *t;
}

schema::table_schema one_column(std::string_view name, std::string_view type) {
  return schema::table_schema{{schema::column{std::string(name), T(type)}}};
}

/// What drift evaluation does when the live target column has type `from` and the
/// source now has `to`: "same" (no drift the target can see), or the action taken.
std::string outcome(std::string_view dialect, std::string_view from, std::string_view to) {
  const auto r = schema::evaluate_drift(one_column("c", to), one_column("c", from), D(dialect));
  if (!r.drifted())
    return "same";
  REQUIRE(r.steps.size() == 1);
  return std::string(schema::to_string(r.steps.front().action));
}

constexpr const char* same = "same";
constexpr const char* alter = "alter_column_types";
constexpr const char* recreate = "drop_and_recreate";

}  // namespace

TEST_CASE("the default allowlist is seed 001's table, rule by rule") {
  struct row {
    const char* from;
    const char* to;
    bool safe;
  };
  const row rows[] = {
      // INT -> BIGINT, also TINYINT/SMALLINT upward
      {"smallint", "int", true},
      {"int", "bigint", true},
      {"smallint", "bigint", true},
      {"bigint", "int", false},
      {"int", "smallint", false},
      // FLOAT -> DOUBLE
      {"float", "double", true},
      {"double", "float", false},
      // DECIMAL(p1, s) -> DECIMAL(p2, s), p2 > p1, same scale
      {"decimal(10,2)", "decimal(12,2)", true},
      {"decimal(12,2)", "decimal(10,2)", false},
      {"decimal(10,2)", "decimal(12,4)", false},
      {"decimal(10,2)", "decimal(10,2)", false},
      // VARCHAR(n1) -> VARCHAR(n2), n2 > n1; VARCHAR(n) -> STRING
      {"varchar(20)", "varchar(40)", true},
      {"varchar(40)", "varchar(20)", false},
      {"varchar(20)", "text", true},
      {"text", "varchar(20)", false},
      // numeric / BOOLEAN -> STRING
      {"smallint", "text", true},
      {"int", "text", true},
      {"bigint", "text", true},
      {"float", "text", true},
      {"double", "text", true},
      {"decimal(12,2)", "text", true},
      {"bool", "text", true},
      {"int", "varchar(20)", false},  // STRING means text, not a bounded varchar
      // Everything else costs a full refresh.
      {"text", "int", false},
      {"date", "timestamp_ntz", false},
      {"timestamp_ntz", "timestamp_tz", false},
      {"int", "double", false},
      {"int", "decimal(20,0)", false},
      {"json", "text", false},
      {"uuid", "text", false},
      {"bytes", "text", false},
      {"date", "text", false},
      {"bool", "int", false},
  };
  for (const auto& r : rows) {
    INFO(r.from << " -> " << r.to);
    CHECK(default_allowlist(T(r.from), T(r.to)) == r.safe);
  }
}

TEST_CASE("each dialect classifies each type change as seed 001 and its overrides say") {
  struct row {
    const char* from;  ///< the live target column
    const char* to;    ///< the source column
    const char* duckdb;
    const char* postgres;
    const char* sqlite;
    const char* snowflake;
    const char* bigquery;
    const char* databricks;
    const char* trino;
  };
  // "same": both sides have one physical type on that engine, so there is no drift.
  // SQLite follows the default allowlist, but cannot alter a type in place: the planner
  // rebuilds its table for a safe widening, rows kept (engine/planner.cpp).
  // clang-format off
  const row rows[] = {
    // from             to                duckdb    postgres  sqlite    snowflake  bigquery  databricks trino
    // Seed 001's default allowlist.
    {"smallint",       "int",             alter,    alter,    alter,    same,      same,     alter,     alter},
    {"int",            "bigint",          alter,    alter,    alter,    same,      same,     alter,     alter},
    {"smallint",       "bigint",          alter,    alter,    alter,    same,      same,     alter,     alter},
    {"float",          "double",          alter,    alter,    alter,    same,      same,     alter,     alter},
    {"decimal(10,2)",  "decimal(12,2)",   alter,    alter,    alter,    alter,     recreate, alter,     alter},
    {"varchar(20)",    "varchar(40)",     same,     alter,    alter,    alter,     same,     same,      alter},
    {"varchar(20)",    "text",            same,     alter,    alter,    alter,     same,     same,      alter},
    {"int",            "text",            alter,    alter,    alter,    recreate,  recreate, recreate,  alter},
    {"bigint",         "text",            alter,    alter,    alter,    recreate,  recreate, recreate,  alter},
    {"float",          "text",            alter,    alter,    alter,    recreate,  recreate, recreate,  alter},
    {"double",         "text",            alter,    alter,    alter,    recreate,  recreate, recreate,  alter},
    {"decimal(12,2)",  "text",            alter,    alter,    alter,    recreate,  recreate, recreate,  alter},
    {"bool",           "text",            alter,    alter,    alter,    recreate,  recreate, recreate,  alter},
    // BigQuery's own three: INT64 -> NUMERIC, INT64 -> BIGNUMERIC, NUMERIC -> BIGNUMERIC.
    {"bigint",         "decimal(20,0)",   recreate, recreate, recreate, recreate,  alter,    recreate,  recreate},
    {"int",            "decimal(38,9)",   recreate, recreate, recreate, recreate,  alter,    recreate,  recreate},
    {"bigint",         "decimal(50,10)",  recreate, recreate, recreate, recreate,  alter,    recreate,  recreate},
    {"bigint",         "decimal(12,2)",   recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"decimal(12,2)",  "decimal(40,2)",   alter,    alter,    alter,    alter,     alter,    alter,     alter},
    {"decimal(12,2)",  "decimal(40,4)",   recreate, recreate, recreate, recreate,  alter,    recreate,  recreate},
    {"decimal(40,2)",  "decimal(50,2)",   same,     alter,    alter,    same,      recreate, same,      same},
    // Narrowing and other changes cost a full refresh.
    {"decimal(12,2)",  "decimal(10,2)",   recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"decimal(10,2)",  "decimal(12,4)",   recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"varchar(40)",    "varchar(20)",     same,     recreate, recreate, recreate,  same,     same,      recreate},
    {"text",           "varchar(20)",     same,     recreate, recreate, recreate,  same,     same,      recreate},
    {"text",           "int",             recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"bigint",         "int",             recreate, recreate, recreate, same,      same,     recreate,  recreate},
    {"int",            "double",          recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"date",           "timestamp_ntz",   recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"timestamp_ntz",  "timestamp_tz",    recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"bool",           "int",             recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"bytes",          "text",            recreate, recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"uuid",           "text",            recreate, recreate, recreate, alter,     same,     same,      recreate},
    {"json",           "text",            recreate, recreate, recreate, recreate,  recreate, same,      recreate},
    {"time",           "text",            recreate, recreate, recreate, recreate,  recreate, same,      recreate},
    {"int",            "varchar(20)",     alter,    recreate, recreate, recreate,  recreate, recreate,  recreate},
    {"int",            "int",             same,     same,     same,     same,      same,     same,      same},
  };
  // clang-format on
  for (const auto& r : rows) {
    INFO(r.from << " -> " << r.to);
    CHECK(outcome("duckdb", r.from, r.to) == r.duckdb);
    CHECK(outcome("postgres", r.from, r.to) == r.postgres);
    CHECK(outcome("sqlite", r.from, r.to) == r.sqlite);
    CHECK(outcome("snowflake", r.from, r.to) == r.snowflake);
    CHECK(outcome("bigquery", r.from, r.to) == r.bigquery);
    CHECK(outcome("databricks", r.from, r.to) == r.databricks);
    CHECK(outcome("trino", r.from, r.to) == r.trino);
  }
}

TEST_CASE("sqlite takes seed 001's default allowlist, and changes no type in place") {
  for (const char* from : {"smallint", "int", "float", "decimal(10,2)", "varchar(20)", "bool"})
    for (const char* to : {"bigint", "double", "decimal(12,2)", "varchar(40)", "text"}) {
      INFO(from << " -> " << to);
      CHECK(D("sqlite").is_safe_widening(T(from), T(to)) == default_allowlist(T(from), T(to)));
    }
  CHECK_FALSE(D("sqlite").supports_in_place_type_change());
}

TEST_CASE("a drift reason names the column and both types in the target's own spelling") {
  struct row {
    const char* dialect;
    const char* from;
    const char* to;
    const char* action;
    const char* reason;
  };
  const row rows[] = {
      {"duckdb", "text", "int", recreate, "column 'status' changed VARCHAR -> INTEGER"},
      {"postgres", "text", "int", recreate, "column 'status' changed TEXT -> INTEGER"},
      {"sqlite", "text", "int", recreate, "column 'status' changed TEXT -> INT"},
      {"snowflake", "text", "int", recreate,
       "column 'status' changed VARCHAR(16777216) -> NUMBER(38,0)"},
      {"bigquery", "text", "int", recreate, "column 'status' changed STRING -> INT64"},
      {"databricks", "text", "int", recreate, "column 'status' changed STRING -> INT"},
      {"trino", "text", "int", recreate, "column 'status' changed VARCHAR -> INTEGER"},
      {"duckdb", "int", "bigint", alter, "column 'status' changed INTEGER -> BIGINT"},
      {"postgres", "decimal(10,2)", "decimal(12,2)", alter,
       "column 'status' changed NUMERIC(10,2) -> NUMERIC(12,2)"},
      {"snowflake", "varchar(20)", "varchar(40)", alter,
       "column 'status' changed VARCHAR(20) -> VARCHAR(40)"},
      {"bigquery", "int", "decimal(38,9)", alter, "column 'status' changed INT64 -> NUMERIC(38,9)"},
      {"bigquery", "decimal(12,2)", "decimal(40,2)", alter,
       "column 'status' changed NUMERIC(12,2) -> BIGNUMERIC(40,2)"},
      {"bigquery", "int", "text", recreate, "column 'status' changed INT64 -> STRING"},
      {"databricks", "bool", "text", recreate, "column 'status' changed BOOLEAN -> STRING"},
      {"trino", "varchar(20)", "text", alter, "column 'status' changed VARCHAR(20) -> VARCHAR"},
  };
  for (const auto& r : rows) {
    INFO(r.dialect << ": " << r.from << " -> " << r.to);
    const auto d = schema::evaluate_drift(one_column("status", r.to), one_column("status", r.from),
                                          D(r.dialect));
    REQUIRE(d.steps.size() == 1);
    CHECK(schema::to_string(d.steps[0].action) == r.action);
    CHECK(d.steps[0].column == "status");
    CHECK(d.steps[0].reason == r.reason);
  }
}

TEST_CASE("a new source column is added nullable, and its reason names the target type") {
  schema::table_schema source{{{"id", T("bigint"), false, true},
                               {"Coupon", T("varchar(20)"), false, false}}};
  schema::table_schema target{{{"id", T("bigint"), false, true}}};
  const auto r = schema::evaluate_drift(source, target, D("duckdb"));
  REQUIRE(r.columns_to_add.size() == 1);
  CHECK(r.columns_to_add[0].nullable);
  CHECK_FALSE(r.drifted());
  REQUIRE(r.steps.size() == 1);
  CHECK(schema::to_string(r.steps[0].action) == "add_columns");
  CHECK(r.steps[0].reason == "column 'Coupon' added as VARCHAR");
}

TEST_CASE("column names match by the dialect's rule: folded on duckdb, exact on postgres") {
  const auto source = one_column("Status", "int");
  const auto target = one_column("status", "int");
  // DuckDB folds case: the same column, nothing to do.
  CHECK(schema::evaluate_drift(source, target, D("duckdb")).empty());
  // PostgreSQL and Snowflake keep quoted names exact: "Status" is a new column.
  for (const char* d : {"postgres", "snowflake"}) {
    INFO(d);
    const auto r = schema::evaluate_drift(source, target, D(d));
    REQUIRE(r.columns_to_add.size() == 1);
    CHECK(r.columns_to_add[0].name == "Status");
  }
}

TEST_CASE("integer widening never surfaces as drift on snowflake") {
  for (const char* from : {"smallint", "int", "bigint"})
    for (const char* to : {"smallint", "int", "bigint"}) {
      INFO(from << " -> " << to);
      CHECK(outcome("snowflake", from, to) == "same");
    }
}

TEST_CASE("bigquery judges numeric against bignumeric by the physical type a decimal maps to") {
  // NUMERIC holds scale <= 9 and at most 29 integer digits; anything wider is BIGNUMERIC.
  CHECK(D("bigquery").physical_type(T("decimal(38,9)")) == "NUMERIC(38,9)");
  CHECK(D("bigquery").physical_type(T("decimal(39,9)")) == "BIGNUMERIC(39,9)");
  CHECK(D("bigquery").physical_type(T("decimal(20,10)")) == "BIGNUMERIC(20,10)");
  CHECK(outcome("bigquery", "decimal(38,9)", "decimal(39,9)") == alter);    // NUMERIC -> BIGNUMERIC
  CHECK(outcome("bigquery", "decimal(12,2)", "decimal(14,2)") == recreate); // NUMERIC -> NUMERIC
  // The target must hold every value: as many integer digits, at least the scale.
  CHECK(outcome("bigquery", "decimal(12,2)", "decimal(20,10)") == alter);    // 10 -> 10 digits
  CHECK(outcome("bigquery", "decimal(12,2)", "decimal(40,32)") == recreate); // 10 -> 8 digits
  CHECK(outcome("bigquery", "bigint", "decimal(20,2)") == recreate);         // INT64 needs 19
}
