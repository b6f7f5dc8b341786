#pragma once
/// Columns and table schemas, and the rule by which column names are matched.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/types.hpp"

namespace flotilla::schema {

struct column {
  std::string name;
  portable_type type;
  bool nullable = true;
  bool key = false;  ///< part of the table's row key

  friend bool operator==(const column&, const column&) = default;
};

/// How a dialect matches column names. DuckDB, SQLite, BigQuery, Databricks and Trino
/// treat identifiers case-insensitively (ASCII folding); PostgreSQL and Snowflake keep
/// quoted identifiers case-sensitive, and Flotilla always quotes, so they match exactly.
enum class name_rule { case_insensitive, case_sensitive };

[[nodiscard]] bool same_name(std::string_view a, std::string_view b, name_rule rule);
[[nodiscard]] std::string fold_name(std::string_view name, name_rule rule);

struct table_schema {
  std::vector<column> columns;  ///< in table order

  [[nodiscard]] const column* find(std::string_view name, name_rule rule) const;
  /// A name from flotilla.toml (cursor_column, unique_key): the column spelled exactly so,
  /// else the only one matching it ignoring case; nullptr when none or several match.
  [[nodiscard]] const column* resolve(std::string_view name) const;
  /// How many columns match `name` ignoring case.
  [[nodiscard]] std::size_t count_folded(std::string_view name) const;
  /// Names of the key columns, in table order.
  [[nodiscard]] std::vector<std::string> key() const;

  friend bool operator==(const table_schema&, const table_schema&) = default;
};

/// The columns a full refresh creates: the live table's columns in live order (a column
/// the load also has takes the load's definition; live-only columns become nullable and
/// are filled with NULL), then the load's new columns. With no live table, the load's.
[[nodiscard]] table_schema full_refresh_columns(const std::optional<table_schema>& live,
                                                const table_schema& load, name_rule rule);

/// What a live table needs to take a full refresh of `stage` in place (emptied and
/// loaded, keeping what depends on it: views, grants, indexes, triggers). A NOT NULL the
/// stage lets go of is dropped (`drop_not_null`); a key other than the stage's is dropped
/// (`drop_key`, first), and the stage's key, when it has one the live table lacks, is
/// added (`add_key`, last). A NOT NULL the stage has beyond the live table is not added:
/// the live table stays the more permissive, which every row the load writes satisfies.
struct in_place_relaxation {
  bool drop_key = false;
  std::vector<std::string> drop_not_null;  ///< live column names
  std::vector<std::string> add_key;        ///< the stage's key columns, to add

  [[nodiscard]] bool empty() const { return !drop_key && drop_not_null.empty() && add_key.empty(); }
};

/// The relaxation that lets `live` take `stage`'s rows in place; nullopt when their
/// columns differ in name, order or type.
[[nodiscard]] std::optional<in_place_relaxation> relaxation_for(const table_schema& live,
                                                                const table_schema& stage);

}  // namespace flotilla::schema
