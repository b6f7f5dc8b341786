#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dialects/dialect.hpp"

using namespace flotilla;
using namespace flotilla::dialects;
using schema::portable_type;

namespace Catch {
template <>
struct StringMaker<portable_type> {
  static std::string convert(const portable_type& t) { return schema::to_string(t); }
};
}  // namespace Catch

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

/// The parsed portable type, spelled portably, or "error: <message>".
std::string parsed(std::string_view dialect, std::string_view engine_type) {
  auto t = D(dialect).parse_physical(engine_type);
  return t ? schema::to_string(*t) : "error: " + t.error().message;
}

/// Every portable type, with parameters that exercise each dialect's limits.
const char* const every_portable_type[] = {
    "bool",          "smallint",      "int",           "bigint",        "float",
    "double",        "decimal(1,0)",  "decimal(12,2)", "decimal(18,0)", "decimal(29,9)",
    "decimal(30,9)", "decimal(30,10)", "decimal(38,9)", "decimal(38,38)", "decimal(40,2)",
    "decimal(76,0)", "decimal(76,38)", "decimal(76,76)", "varchar(1)",   "varchar(20)",
    "varchar(16777216)", "text",     "date",          "time",          "timestamp_ntz",
    "timestamp_tz",  "json",          "bytes",         "uuid",
};

}  // namespace

TEST_CASE("each portable type is spelled in each engine's own DDL type") {
  struct row {
    const char* portable;
    const char* duckdb;
    const char* postgres;
    const char* sqlite;
    const char* snowflake;
    const char* bigquery;
    const char* databricks;
    const char* trino;
  };
  // clang-format off
  const row rows[] = {
    // portable        duckdb                      postgres                    sqlite           snowflake            bigquery            databricks       trino
    {"bool",           "BOOLEAN",                  "BOOLEAN",                  "BOOLEAN",       "BOOLEAN",           "BOOL",             "BOOLEAN",       "BOOLEAN"},
    {"smallint",       "SMALLINT",                 "SMALLINT",                 "SMALLINT",      "NUMBER(38,0)",      "INT64",            "SMALLINT",      "SMALLINT"},
    {"int",            "INTEGER",                  "INTEGER",                  "INT",           "NUMBER(38,0)",      "INT64",            "INT",           "INTEGER"},
    {"bigint",         "BIGINT",                   "BIGINT",                   "BIGINT",        "NUMBER(38,0)",      "INT64",            "BIGINT",        "BIGINT"},
    {"float",          "FLOAT",                    "REAL",                     "FLOAT",         "FLOAT",             "FLOAT64",          "FLOAT",         "REAL"},
    {"double",         "DOUBLE",                   "DOUBLE PRECISION",         "DOUBLE",        "FLOAT",             "FLOAT64",          "DOUBLE",        "DOUBLE"},
    {"decimal(12,2)",  "DECIMAL(12,2)",            "NUMERIC(12,2)",            "DECIMAL(12,2)", "NUMBER(12,2)",      "NUMERIC(12,2)",    "DECIMAL(12,2)", "DECIMAL(12,2)"},
    {"decimal(30,10)", "DECIMAL(30,10)",           "NUMERIC(30,10)",           "DECIMAL(30,10)", "NUMBER(30,10)",    "BIGNUMERIC(30,10)", "DECIMAL(30,10)", "DECIMAL(30,10)"},
    {"decimal(40,2)",  "DECIMAL(38,2)",            "NUMERIC(40,2)",            "DECIMAL(40,2)", "NUMBER(38,2)",      "BIGNUMERIC(40,2)", "DECIMAL(38,2)", "DECIMAL(38,2)"},
    {"decimal(76,0)",  "DECIMAL(38,0)",            "NUMERIC(76,0)",            "DECIMAL(76,0)", "NUMBER(38,0)",      "BIGNUMERIC",       "DECIMAL(38,0)", "DECIMAL(38,0)"},
    {"varchar(20)",    "VARCHAR",                  "VARCHAR(20)",              "VARCHAR(20)",   "VARCHAR(20)",       "STRING",           "STRING",        "VARCHAR(20)"},
    {"text",           "VARCHAR",                  "TEXT",                     "TEXT",          "VARCHAR(16777216)", "STRING",           "STRING",        "VARCHAR"},
    {"date",           "DATE",                     "DATE",                     "DATE",          "DATE",              "DATE",             "DATE",          "DATE"},
    {"time",           "TIME",                     "TIME",                     "TIME",          "TIME",              "TIME",             "STRING",        "TIME(6)"},
    {"timestamp_ntz",  "TIMESTAMP",                "TIMESTAMP",                "TIMESTAMP",     "TIMESTAMP_NTZ",     "DATETIME",         "TIMESTAMP_NTZ", "TIMESTAMP(6)"},
    {"timestamp_tz",   "TIMESTAMP WITH TIME ZONE", "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ",   "TIMESTAMP_TZ",      "TIMESTAMP",        "TIMESTAMP",     "TIMESTAMP(6) WITH TIME ZONE"},
    {"json",           "JSON",                     "JSONB",                    "JSON TEXT",     "VARIANT",           "JSON",             "STRING",        "JSON"},
    {"bytes",          "BLOB",                     "BYTEA",                    "BLOB",          "BINARY",            "BYTES",            "BINARY",        "VARBINARY"},
    {"uuid",           "UUID",                     "UUID",                     "UUID",          "VARCHAR(36)",       "STRING",           "STRING",        "UUID"},
  };
  // clang-format on
  for (const auto& r : rows) {
    const portable_type t = T(r.portable);
    INFO(r.portable);
    CHECK(D("duckdb").physical_type(t) == r.duckdb);
    CHECK(D("postgres").physical_type(t) == r.postgres);
    CHECK(D("sqlite").physical_type(t) == r.sqlite);
    CHECK(D("snowflake").physical_type(t) == r.snowflake);
    CHECK(D("bigquery").physical_type(t) == r.bigquery);
    CHECK(D("databricks").physical_type(t) == r.databricks);
    CHECK(D("trino").physical_type(t) == r.trino);
  }
}

TEST_CASE("canonical is the type the engine reports back, and differs only where documented") {
  struct row {
    const char* dialect;
    const char* portable;
    const char* canonical;
  };
  // Everything not listed here is its own canonical type.
  const row rows[] = {
      // DuckDB: VARCHAR has no length; DECIMAL stops at 38 digits.
      {"duckdb", "varchar(20)", "text"},
      {"duckdb", "decimal(40,2)", "decimal(38,2)"},
      {"duckdb", "decimal(76,0)", "decimal(38,0)"},
      // Snowflake: every integer is NUMBER(38,0), FLOAT is double, text is VARCHAR(16777216).
      {"snowflake", "smallint", "decimal(38,0)"},
      {"snowflake", "int", "decimal(38,0)"},
      {"snowflake", "bigint", "decimal(38,0)"},
      {"snowflake", "float", "double"},
      {"snowflake", "varchar(16777216)", "text"},
      {"snowflake", "uuid", "varchar(36)"},
      {"snowflake", "decimal(40,2)", "decimal(38,2)"},
      // BigQuery: INT64, FLOAT64, STRING; bare BIGNUMERIC for what no BIGNUMERIC(P,S) holds.
      {"bigquery", "smallint", "bigint"},
      {"bigquery", "int", "bigint"},
      {"bigquery", "float", "double"},
      {"bigquery", "varchar(20)", "text"},
      {"bigquery", "uuid", "text"},
      {"bigquery", "decimal(76,0)", "decimal(76,38)"},
      // Databricks: STRING for varchar, time, json and uuid; DECIMAL stops at 38.
      {"databricks", "varchar(20)", "text"},
      {"databricks", "time", "text"},
      {"databricks", "json", "text"},
      {"databricks", "uuid", "text"},
      {"databricks", "decimal(40,2)", "decimal(38,2)"},
      // Trino: DECIMAL stops at 38.
      {"trino", "decimal(40,2)", "decimal(38,2)"},
      {"trino", "decimal(76,0)", "decimal(38,0)"},
  };
  for (const auto& r : rows) {
    INFO(r.dialect << ": " << r.portable);
    CHECK(schema::to_string(D(r.dialect).canonical(T(r.portable))) == r.canonical);
  }
  for (const char* p : {"bool", "double", "decimal(12,2)", "text", "date",
                        "timestamp_ntz", "timestamp_tz", "bytes"})
    for (auto name : dialect_names()) {
      INFO(name << ": " << p);
      CHECK(D(name).canonical(T(p)) == T(p));
    }
  for (const char* p : every_portable_type) {
    INFO(p);
    CHECK(D("postgres").canonical(T(p)) == T(p));
    CHECK(D("sqlite").canonical(T(p)) == T(p));
  }
}

TEST_CASE("every dialect reads its own DDL spelling of every portable type back as canonical") {
  for (auto name : dialect_names()) {
    const dialect& d = D(name);
    for (const char* p : every_portable_type) {
      const portable_type t = T(p);
      const std::string spelled = d.physical_type(t);
      INFO(name << ": " << p << " spelled " << spelled);
      auto back = d.parse_physical(spelled);
      REQUIRE(back.has_value());
      CHECK(*back == d.canonical(t));
      // canonical is a fixed point: the engine reports a canonical type back unchanged.
      CHECK(d.canonical(*back) == *back);
      CHECK(d.physical_type(*back) == d.physical_type(d.canonical(*back)));
    }
  }
}

TEST_CASE("canonical answers as the dialect's own round trip does, asked again, from several "
          "threads, and for more types than it keeps") {
  for (auto name : dialect_names()) {
    INFO(name);
    const auto made = make_dialect(name);
    REQUIRE(made.has_value());
    const dialect& d = **made;
    // varchar(1..150), decimal(1..40, 0..2): more distinct types than canonical keeps.
    std::vector<portable_type> types;
    for (int n = 1; n <= 150; ++n)
      types.push_back(portable_type::varchar(n));
    for (int p = 1; p <= 40; ++p)
      for (int sc = 0; sc <= std::min(p, 2); ++sc)
        types.push_back(portable_type::decimal(p, sc));
    std::vector<portable_type> expected;
    for (const auto& t : types)
      expected.push_back(*d.parse_physical(d.physical_type(t)));
    std::vector<std::vector<portable_type>> seen(4);
    std::vector<std::thread> threads;
    for (auto& out : seen)
      threads.emplace_back([&d, &types, &out] {
        for (int round = 0; round < 3; ++round)
          for (const auto& t : types)
            out.push_back(d.canonical(t));
      });
    for (auto& t : threads)
      t.join();
    for (const auto& out : seen) {
      REQUIRE(out.size() == 3 * types.size());
      for (std::size_t i = 0; i < out.size(); ++i)
        CHECK(out[i] == expected[i % types.size()]);
    }
  }
}

TEST_CASE("engine type strings from DESCRIBE and information_schema read as portable types") {
  struct row {
    const char* dialect;
    const char* engine_type;
    const char* portable;
  };
  const row rows[] = {
      // DuckDB: duckdb_columns().data_type and the aliases DDL accepts.
      {"duckdb", "INTEGER", "int"},
      {"duckdb", "BIGINT", "bigint"},
      {"duckdb", "SMALLINT", "smallint"},
      {"duckdb", "TINYINT", "smallint"},
      {"duckdb", "UTINYINT", "smallint"},
      {"duckdb", "USMALLINT", "int"},
      {"duckdb", "UINTEGER", "bigint"},
      {"duckdb", "UBIGINT", "decimal(20,0)"},
      {"duckdb", "HUGEINT", "decimal(38,0)"},
      {"duckdb", "UHUGEINT", "decimal(38,0)"},
      {"duckdb", "DECIMAL(12,2)", "decimal(12,2)"},
      {"duckdb", "DECIMAL(5,0)", "decimal(5,0)"},
      {"duckdb", "DECIMAL", "decimal(18,3)"},
      {"duckdb", "VARCHAR", "text"},
      {"duckdb", "VARCHAR(20)", "text"},
      {"duckdb", "TIMESTAMP WITH TIME ZONE", "timestamp_tz"},
      {"duckdb", "TIMESTAMPTZ", "timestamp_tz"},
      {"duckdb", "TIMESTAMP", "timestamp_ntz"},
      {"duckdb", "TIMESTAMP_S", "timestamp_ntz"},
      {"duckdb", "TIMESTAMP_MS", "timestamp_ntz"},
      {"duckdb", "TIMESTAMP_NS", "timestamp_ntz"},
      {"duckdb", "BLOB", "bytes"},
      {"duckdb", "UUID", "uuid"},
      {"duckdb", "JSON", "json"},
      {"duckdb", "FLOAT", "float"},
      {"duckdb", "DOUBLE", "double"},
      {"duckdb", "BOOLEAN", "bool"},
      {"duckdb", "TIME", "time"},
      {"duckdb", "DATE", "date"},
      // PostgreSQL: format_type(), information_schema.data_type, pg_type.typname.
      {"postgres", "character varying(20)", "varchar(20)"},
      {"postgres", "character varying", "text"},
      {"postgres", "varchar(20)", "varchar(20)"},
      {"postgres", "numeric(12,2)", "decimal(12,2)"},
      {"postgres", "numeric", "decimal(38,9)"},
      {"postgres", "timestamp with time zone", "timestamp_tz"},
      {"postgres", "timestamp(3) with time zone", "timestamp_tz"},
      {"postgres", "timestamptz", "timestamp_tz"},
      {"postgres", "timestamp without time zone", "timestamp_ntz"},
      {"postgres", "time without time zone", "time"},
      {"postgres", "int4", "int"},
      {"postgres", "integer", "int"},
      {"postgres", "int2", "smallint"},
      {"postgres", "int8", "bigint"},
      {"postgres", "double precision", "double"},
      {"postgres", "float8", "double"},
      {"postgres", "real", "float"},
      {"postgres", "float(10)", "float"},
      {"postgres", "float(30)", "double"},
      {"postgres", "bytea", "bytes"},
      {"postgres", "jsonb", "json"},
      {"postgres", "json", "json"},
      {"postgres", "uuid", "uuid"},
      {"postgres", "boolean", "bool"},
      {"postgres", "character(3)", "varchar(3)"},
      {"postgres", "bpchar", "text"},
      {"postgres", "text", "text"},
      {"postgres", "date", "date"},
      // Snowflake: DESCRIBE TABLE.
      {"snowflake", "NUMBER(38,0)", "decimal(38,0)"},
      {"snowflake", "NUMBER(12,2)", "decimal(12,2)"},
      {"snowflake", "NUMBER", "decimal(38,0)"},
      {"snowflake", "INTEGER", "decimal(38,0)"},
      {"snowflake", "VARCHAR(16777216)", "text"},
      {"snowflake", "VARCHAR(134217728)", "text"},
      {"snowflake", "VARCHAR(20)", "varchar(20)"},
      {"snowflake", "TEXT", "text"},
      {"snowflake", "TIMESTAMP_TZ", "timestamp_tz"},
      {"snowflake", "TIMESTAMP_TZ(9)", "timestamp_tz"},
      {"snowflake", "TIMESTAMP_LTZ(9)", "timestamp_tz"},
      {"snowflake", "TIMESTAMP_NTZ", "timestamp_ntz"},
      {"snowflake", "TIMESTAMP_NTZ(9)", "timestamp_ntz"},
      {"snowflake", "FLOAT", "double"},
      {"snowflake", "BINARY", "bytes"},
      {"snowflake", "BINARY(8388608)", "bytes"},
      {"snowflake", "VARIANT", "json"},
      {"snowflake", "OBJECT", "json"},
      {"snowflake", "BOOLEAN", "bool"},
      {"snowflake", "TIME(9)", "time"},
      {"snowflake", "DATE", "date"},
      // BigQuery: INFORMATION_SCHEMA.COLUMNS.data_type.
      {"bigquery", "INT64", "bigint"},
      {"bigquery", "NUMERIC(12,2)", "decimal(12,2)"},
      {"bigquery", "NUMERIC(12, 2)", "decimal(12,2)"},
      {"bigquery", "NUMERIC(12)", "decimal(12,0)"},
      {"bigquery", "NUMERIC", "decimal(38,9)"},
      {"bigquery", "BIGNUMERIC", "decimal(76,38)"},
      {"bigquery", "BIGNUMERIC(40,2)", "decimal(40,2)"},
      {"bigquery", "FLOAT64", "double"},
      {"bigquery", "STRING", "text"},
      {"bigquery", "STRING(20)", "varchar(20)"},
      {"bigquery", "BYTES", "bytes"},
      {"bigquery", "BYTES(16)", "bytes"},
      {"bigquery", "JSON", "json"},
      {"bigquery", "TIMESTAMP", "timestamp_tz"},
      {"bigquery", "DATETIME", "timestamp_ntz"},
      {"bigquery", "DATE", "date"},
      {"bigquery", "TIME", "time"},
      {"bigquery", "BOOL", "bool"},
      {"bigquery", "INTEGER", "bigint"},
      // Databricks: DESCRIBE TABLE (lower case) and DDL spellings.
      {"databricks", "DECIMAL(12,2)", "decimal(12,2)"},
      {"databricks", "decimal(12,2)", "decimal(12,2)"},
      {"databricks", "decimal", "decimal(10,0)"},
      {"databricks", "STRING", "text"},
      {"databricks", "string", "text"},
      {"databricks", "varchar(20)", "varchar(20)"},
      {"databricks", "INT", "int"},
      {"databricks", "BIGINT", "bigint"},
      {"databricks", "TINYINT", "smallint"},
      {"databricks", "TIMESTAMP", "timestamp_tz"},
      {"databricks", "TIMESTAMP_NTZ", "timestamp_ntz"},
      {"databricks", "timestamp_ntz", "timestamp_ntz"},
      {"databricks", "DOUBLE", "double"},
      {"databricks", "FLOAT", "float"},
      {"databricks", "BINARY", "bytes"},
      {"databricks", "VARIANT", "json"},
      // Trino: DESCRIBE / information_schema.
      {"trino", "varchar(20)", "varchar(20)"},
      {"trino", "varchar", "text"},
      {"trino", "decimal(12,2)", "decimal(12,2)"},
      {"trino", "timestamp(6) with time zone", "timestamp_tz"},
      {"trino", "timestamp(3) with time zone", "timestamp_tz"},
      {"trino", "timestamp(6)", "timestamp_ntz"},
      {"trino", "time(6)", "time"},
      {"trino", "integer", "int"},
      {"trino", "tinyint", "smallint"},
      {"trino", "real", "float"},
      {"trino", "double", "double"},
      {"trino", "char(3)", "varchar(3)"},
      {"trino", "varbinary", "bytes"},
      {"trino", "json", "json"},
      {"trino", "uuid", "uuid"},
  };
  for (const auto& r : rows) {
    INFO(r.dialect << ": " << r.engine_type);
    CHECK(parsed(r.dialect, r.engine_type) == r.portable);
  }
}

TEST_CASE("sqlite reads the declared types Flotilla writes exactly and any other by its affinity") {
  struct row {
    const char* declared;
    const char* portable;
  };
  const row rows[] = {
      // Exactly what Flotilla writes.
      {"DECIMAL(12,2)", "decimal(12,2)"},
      {"VARCHAR(20)", "varchar(20)"},
      {"BOOLEAN", "bool"},
      {"DATE", "date"},
      {"TIME", "time"},
      {"TIMESTAMP", "timestamp_ntz"},
      {"TIMESTAMPTZ", "timestamp_tz"},
      {"SMALLINT", "smallint"},
      {"INT", "int"},
      {"BIGINT", "bigint"},
      {"FLOAT", "float"},
      {"DOUBLE", "double"},
      {"TEXT", "text"},
      {"JSON", "json"},
      {"JSON TEXT", "json"},
      {"BLOB", "bytes"},
      {"UUID", "uuid"},
      {"DATETIME", "timestamp_ntz"},
      // Rule 1, "INT" anywhere: INTEGER affinity, 64-bit.
      {"INTEGER", "bigint"},
      {"TINYINT", "bigint"},
      {"MEDIUMINT", "bigint"},
      {"UNSIGNED BIG INT", "bigint"},
      {"INT8", "bigint"},
      {"FLOATING POINT", "bigint"},  // "POINT" holds INT: SQLite's own example
      // Rule 2, CHAR / CLOB / TEXT: TEXT affinity.
      {"CHARACTER(20)", "text"},
      {"NVARCHAR(100)", "text"},
      {"NATIVE CHARACTER(70)", "text"},
      {"CLOB", "text"},
      // Rule 3, BLOB or no type at all.
      {"", "bytes"},
      {"binary blob", "bytes"},
      // Rule 4, REAL / FLOA / DOUB: REAL affinity.
      {"REAL", "double"},
      {"DOUBLE PRECISION", "double"},
      {"FLOAT8", "double"},
      // Rule 5, anything else: NUMERIC affinity.
      {"NUMERIC", "decimal(38,9)"},
      {"MONEY", "decimal(38,9)"},
      {"DECIMAL(100,2)", "decimal(38,9)"},  // out of portable range: by affinity
      {"VARCHAR(0)", "text"},
  };
  for (const auto& r : rows) {
    INFO("declared type '" << r.declared << "'");
    CHECK(parsed("sqlite", r.declared) == r.portable);
  }
}

TEST_CASE("an engine type Flotilla cannot map is an error naming the type and the dialect") {
  struct row {
    const char* dialect;
    const char* engine_type;
  };
  const row rows[] = {
      {"duckdb", "INTERVAL"},
      {"duckdb", "INTEGER[]"},
      {"duckdb", "STRUCT(a INTEGER)"},
      {"duckdb", "MAP(VARCHAR, INTEGER)"},
      {"duckdb", "TIME WITH TIME ZONE"},
      {"duckdb", "DECIMAL(12,2)[]"},
      {"duckdb", "DECIMAL(80,2)"},
      {"duckdb", "BOOLEAN(1)"},
      {"duckdb", ""},
      {"postgres", "interval"},
      {"postgres", "integer[]"},
      {"postgres", "_int4"},
      {"postgres", "time with time zone"},
      {"postgres", "money"},
      {"postgres", "numeric(1000,2)"},
      {"postgres", "numeric(12"},
      {"postgres", "varchar(0)"},
      {"snowflake", "GEOGRAPHY"},
      {"snowflake", "VECTOR(FLOAT, 256)"},
      {"bigquery", "GEOGRAPHY"},
      {"bigquery", "INTERVAL"},
      {"bigquery", "STRUCT<a INT64>"},
      {"bigquery", "ARRAY<INT64>"},
      {"databricks", "interval day"},
      {"databricks", "array<int>"},
      {"databricks", "map<string,int>"},
      {"trino", "array(integer)"},
      {"trino", "row(a integer)"},
      {"trino", "ipaddress"},
      {"trino", "time(3) with time zone"},
  };
  for (const auto& r : rows) {
    INFO(r.dialect << ": '" << r.engine_type << "'");
    auto t = D(r.dialect).parse_physical(r.engine_type);
    REQUIRE_FALSE(t.has_value());
    CHECK_THAT(t.error().message, Catch::Contains(r.dialect));
    CHECK_THAT(t.error().message, Catch::Contains(std::string("'") + r.engine_type + "'"));
  }
  CHECK(parsed("duckdb", "GEOMETRY") ==
        "error: unknown duckdb type 'GEOMETRY': Flotilla has no portable type for it");
  CHECK(parsed("postgres", "numeric(1000,2)") ==
        "error: postgres type 'numeric(1000,2)' is out of range: decimal precision must be "
        "1..76 and scale 0..precision");
}
