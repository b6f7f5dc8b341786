#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "dialects/dialect.hpp"

using namespace flotilla;
using namespace flotilla::dialects;

TEST_CASE("dialect_names lists the seven dialects in a stable order") {
  const std::vector<std::string_view> expected{"duckdb",     "postgres",   "sqlite", "snowflake",
                                               "bigquery",   "databricks", "trino"};
  CHECK(dialect_names() == expected);
}

TEST_CASE("every name and alias resolves to its dialect, whatever the case") {
  struct row {
    const char* written;
    std::string_view resolves_to;
  };
  const row rows[] = {
      {"duckdb", "duckdb"},         {"DuckDB", "duckdb"},
      {"postgres", "postgres"},     {"postgresql", "postgres"},
      {"PostgreSQL", "postgres"},   {"pg", "postgres"},
      {"PG", "postgres"},           {"sqlite", "sqlite"},
      {"sqlite3", "sqlite"},        {"SQLite3", "sqlite"},
      {"snowflake", "snowflake"},   {"SNOWFLAKE", "snowflake"},
      {"bigquery", "bigquery"},     {"bq", "bigquery"},
      {"BigQuery", "bigquery"},     {"databricks", "databricks"},
      {"delta", "databricks"},      {"spark", "databricks"},
      {"Databricks", "databricks"}, {"trino", "trino"},
      {"presto", "trino"},          {"Presto", "trino"},
  };
  for (const auto& r : rows) {
    INFO(r.written);
    auto d = make_dialect(r.written);
    REQUIRE(d.has_value());
    CHECK((*d)->name() == r.resolves_to);
  }
}

TEST_CASE("an unknown dialect name is an error naming it and listing the known ones") {
  auto d = make_dialect("oracle");
  REQUIRE_FALSE(d.has_value());
  const std::string& m = d.error().message;
  CHECK(m.find("unknown dialect 'oracle'") != std::string::npos);
  for (auto name : dialect_names())
    CHECK(m.find(name) != std::string::npos);
  CHECK(m.find("postgresql (postgres)") != std::string::npos);
  CHECK(m.find("presto (trino)") != std::string::npos);
}

TEST_CASE("an empty dialect name is an error too") { CHECK_FALSE(make_dialect("").has_value()); }

TEST_CASE("each dialect declares what its engine can do") {
  using schema::name_rule;
  struct row {
    std::string_view dialect;
    bool executable;
    bool transactional_ddl;
    bool in_place_type_change;
    bool key_column_type_change;
    name_rule names;
  };
  // dialect       executed  txn DDL  ALTER TYPE  key ALTER TYPE  names
  const row rows[] = {
      {"duckdb", true, true, true, false, name_rule::case_insensitive},
      {"postgres", true, true, true, true, name_rule::case_sensitive},
      {"sqlite", true, true, false, true, name_rule::case_insensitive},
      {"snowflake", false, false, true, true, name_rule::case_sensitive},
      {"bigquery", false, false, true, true, name_rule::case_insensitive},
      {"databricks", false, false, true, true, name_rule::case_insensitive},
      {"trino", false, false, true, true, name_rule::case_insensitive},
  };
  for (const auto& r : rows) {
    INFO(r.dialect);
    auto d = std::move(*make_dialect(r.dialect));
    CHECK(d->executable() == r.executable);
    CHECK(d->supports_transactional_ddl() == r.transactional_ddl);
    CHECK(d->supports_in_place_type_change() == r.in_place_type_change);
    CHECK(d->supports_key_column_type_change() == r.key_column_type_change);
    CHECK(d->names() == r.names);
  }
}
