// Databricks (Delta): https://docs.databricks.com/en/sql/language-manual/sql-ref-datatypes.html,
// https://docs.databricks.com/en/delta/type-widening.html,
// https://docs.databricks.com/en/sql/language-manual/sql-ref-identifiers.html
#include <fmt/format.h>

#include "dialects/builtin.hpp"
#include "dialects/ddl.hpp"
#include "dialects/type_string.hpp"
#include "dialects/widening.hpp"

namespace flotilla::dialects::detail {
namespace {

using schema::portable_type;
using schema::type_kind;

constexpr int max_precision = 38;

/// Every table Flotilla creates turns Delta's type widening on: without it Delta
/// rejects ALTER COLUMN ... TYPE.
constexpr std::string_view table_options =
    " USING DELTA TBLPROPERTIES ('delta.enableTypeWidening' = 'true')";

// DESCRIBE TABLE spellings (lower case) and their aliases.
constexpr type_name type_names[] = {
    {"boolean", type_kind::boolean},
    {"tinyint", type_kind::smallint},
    {"byte", type_kind::smallint},
    {"smallint", type_kind::smallint},
    {"short", type_kind::smallint},
    {"int", type_kind::int32},
    {"integer", type_kind::int32},
    {"bigint", type_kind::bigint},
    {"long", type_kind::bigint},
    {"float", type_kind::float32},
    {"real", type_kind::float32},
    {"double", type_kind::float64},
    // Bare DECIMAL is DECIMAL(10,0).
    {"decimal", type_kind::decimal, params::decimal, 10, 0},
    {"dec", type_kind::decimal, params::decimal, 10, 0},
    {"numeric", type_kind::decimal, params::decimal, 10, 0},
    {"string", type_kind::text},
    {"varchar", type_kind::varchar, params::length},
    {"char", type_kind::varchar, params::length},
    {"binary", type_kind::bytes},
    {"date", type_kind::date},
    {"timestamp", type_kind::timestamp_tz},
    {"timestamp_ltz", type_kind::timestamp_tz},
    {"timestamp_ntz", type_kind::timestamp_ntz},
    {"variant", type_kind::json},
};

class databricks_dialect final : public dialect {
 public:
  [[nodiscard]] std::string_view name() const override { return "databricks"; }

  [[nodiscard]] std::string physical_type(const portable_type& t) const override {
    switch (t.kind) {
      case type_kind::boolean: return "BOOLEAN";
      case type_kind::smallint: return "SMALLINT";
      case type_kind::int32: return "INT";
      case type_kind::bigint: return "BIGINT";
      case type_kind::float32: return "FLOAT";
      case type_kind::float64: return "DOUBLE";
      case type_kind::decimal: {
        const auto d = clamp_decimal(t, max_precision);
        return fmt::format("DECIMAL({},{})", d.precision, d.scale);
      }
      // No TIME type, and VARCHAR(n) only adds a write-time check: strings are STRING.
      case type_kind::varchar:
      case type_kind::text:
      case type_kind::time:
      case type_kind::json:
      case type_kind::uuid: return "STRING";
      case type_kind::date: return "DATE";
      case type_kind::timestamp_ntz: return "TIMESTAMP_NTZ";
      case type_kind::timestamp_tz: return "TIMESTAMP";
      case type_kind::bytes: return "BINARY";
    }
    return "STRING";
  }

  [[nodiscard]] std::expected<portable_type, schema::type_error> parse_physical(
      std::string_view type_string) const override {
    return lookup(name(), type_string, type_names);
  }

  /// The default allowlist as Delta's type widening applies it: never to STRING.
  [[nodiscard]] bool is_safe_widening(const portable_type& from,
                                      const portable_type& to) const override {
    return default_allowlist(from, to) && !is_text_representation(from, to);
  }

  /// `name`, with an embedded backtick doubled.
  [[nodiscard]] std::string quote(std::string_view identifier) const override {
    return quote_by_doubling(identifier, '`');
  }

  /// Backslash starts an escape inside a Spark SQL string literal.
  [[nodiscard]] std::string literal(std::string_view value) const override {
    check_literal(value);
    std::string out = "'";
    for (char c : value) {
      if (c == '\'' || c == '\\')
        out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('\'');
    return out;
  }

  /// No PRIMARY KEY: key constraints exist only on Unity Catalog, and are informational
  /// there.
  [[nodiscard]] std::string create_table(const table_ref& t,
                                         const schema::table_schema& s) const override {
    return detail::create_table(*this, t, s, key_clause::none, table_options);
  }

  [[nodiscard]] std::vector<std::string> rebuild_and_swap(
      const table_ref& t, const schema::table_schema& old_schema,
      const schema::table_schema& new_schema) const override {
    return {fmt::format("CREATE OR REPLACE TABLE {}{} AS {}", qualified(t), table_options,
                        cast_select(*this, t, old_schema, new_schema, true))};
  }

  [[nodiscard]] std::vector<std::string> swap_in(const table_ref& staging,
                                                 const table_ref& target) const override {
    return {fmt::format("CREATE OR REPLACE TABLE {}{} AS SELECT * FROM {}", qualified(target),
                        table_options, qualified(staging)),
            drop_table(staging)};
  }
};

}  // namespace

std::unique_ptr<dialect> make_databricks() { return std::make_unique<databricks_dialect>(); }

}  // namespace flotilla::dialects::detail
