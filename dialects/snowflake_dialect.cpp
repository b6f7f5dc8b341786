// Snowflake: https://docs.snowflake.com/en/sql-reference/intro-summary-data-types,
// https://docs.snowflake.com/en/sql-reference/sql/alter-table-column,
// https://docs.snowflake.com/en/sql-reference/sql/create-table (COPY GRANTS).
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
/// VARCHAR's default (and, for Flotilla, text's) length.
constexpr int text_length = 16777216;

// DESCRIBE TABLE reports NUMBER(p,s), FLOAT, VARCHAR(n), BINARY(n), BOOLEAN, DATE,
// TIME(9), TIMESTAMP_NTZ(9), TIMESTAMP_TZ(9), VARIANT; the rest are the aliases DDL
// accepts. Every integer alias is NUMBER(38,0).
constexpr type_name type_names[] = {
    {"number", type_kind::decimal, params::decimal, 38, 0},
    {"decimal", type_kind::decimal, params::decimal, 38, 0},
    {"numeric", type_kind::decimal, params::decimal, 38, 0},
    {"int", type_kind::decimal, params::none, 38, 0},
    {"integer", type_kind::decimal, params::none, 38, 0},
    {"bigint", type_kind::decimal, params::none, 38, 0},
    {"smallint", type_kind::decimal, params::none, 38, 0},
    {"tinyint", type_kind::decimal, params::none, 38, 0},
    {"byteint", type_kind::decimal, params::none, 38, 0},
    {"float", type_kind::float64, params::ignored},
    {"float4", type_kind::float64},
    {"float8", type_kind::float64},
    {"double", type_kind::float64},
    {"double precision", type_kind::float64},
    {"real", type_kind::float64},
    {"varchar", type_kind::varchar, params::length},
    {"string", type_kind::varchar, params::length},
    {"text", type_kind::varchar, params::length},
    {"character varying", type_kind::varchar, params::length},
    {"char varying", type_kind::varchar, params::length},
    {"nvarchar", type_kind::varchar, params::length},
    {"nvarchar2", type_kind::varchar, params::length},
    {"nchar varying", type_kind::varchar, params::length},
    {"char", type_kind::varchar, params::length},
    {"character", type_kind::varchar, params::length},
    {"nchar", type_kind::varchar, params::length},
    {"binary", type_kind::bytes, params::ignored},
    {"varbinary", type_kind::bytes, params::ignored},
    {"boolean", type_kind::boolean},
    {"date", type_kind::date},
    {"time", type_kind::time, params::ignored},
    // TIMESTAMP follows TIMESTAMP_TYPE_MAPPING, TIMESTAMP_NTZ by default.
    {"timestamp", type_kind::timestamp_ntz, params::ignored},
    {"datetime", type_kind::timestamp_ntz, params::ignored},
    {"timestamp_ntz", type_kind::timestamp_ntz, params::ignored},
    {"timestamp without time zone", type_kind::timestamp_ntz, params::ignored},
    {"timestamp_ltz", type_kind::timestamp_tz, params::ignored},
    {"timestamp with local time zone", type_kind::timestamp_tz, params::ignored},
    {"timestamp_tz", type_kind::timestamp_tz, params::ignored},
    {"timestamp with time zone", type_kind::timestamp_tz, params::ignored},
    {"variant", type_kind::json},
    {"object", type_kind::json},
    {"array", type_kind::json},
};

class snowflake_dialect final : public dialect {
 public:
  [[nodiscard]] std::string_view name() const override { return "snowflake"; }
  /// Flotilla always quotes, and quoted identifiers are case-sensitive.
  [[nodiscard]] schema::name_rule names() const override {
    return schema::name_rule::case_sensitive;
  }

  [[nodiscard]] std::string physical_type(const portable_type& t) const override {
    switch (t.kind) {
      case type_kind::boolean: return "BOOLEAN";
      case type_kind::smallint:
      case type_kind::int32:
      case type_kind::bigint: return "NUMBER(38,0)";
      case type_kind::float32:
      case type_kind::float64: return "FLOAT";
      case type_kind::decimal: {
        const auto d = clamp_decimal(t, max_precision);
        return fmt::format("NUMBER({},{})", d.precision, d.scale);
      }
      case type_kind::varchar:
        if (t.length < text_length)
          return fmt::format("VARCHAR({})", t.length);
        [[fallthrough]];
      case type_kind::text: return fmt::format("VARCHAR({})", text_length);
      case type_kind::date: return "DATE";
      case type_kind::time: return "TIME";
      case type_kind::timestamp_ntz: return "TIMESTAMP_NTZ";
      case type_kind::timestamp_tz: return "TIMESTAMP_TZ";
      case type_kind::json: return "VARIANT";
      case type_kind::bytes: return "BINARY";
      case type_kind::uuid: return "VARCHAR(36)";
    }
    return "VARCHAR";
  }

  [[nodiscard]] std::expected<portable_type, schema::type_error> parse_physical(
      std::string_view type_string) const override {
    auto t = lookup(name(), type_string, type_names);
    if (t && t->kind == type_kind::varchar && t->length >= text_length)
      return portable_type::of(type_kind::text);  // VARCHAR(16777216) is Snowflake's STRING
    return t;
  }

  /// Only what ALTER COLUMN accepts: NUMBER precision (same scale) and VARCHAR length.
  [[nodiscard]] bool is_safe_widening(const portable_type& from,
                                      const portable_type& to) const override {
    return is_decimal_precision_widening(from, to) || is_varchar_widening(from, to);
  }

  /// Backslash starts an escape inside a Snowflake string literal, so it is doubled.
  [[nodiscard]] std::string literal(std::string_view value) const override {
    check_literal(value);
    std::string out = "'";
    for (char c : value) {
      if (c == '\'' || c == '\\')
        out.push_back(c);
      out.push_back(c);
    }
    out.push_back('\'');
    return out;
  }

  [[nodiscard]] std::vector<std::string> alter_column_type(
      const table_ref& t, std::string_view column, const portable_type& to) const override {
    return {fmt::format("ALTER TABLE {} ALTER COLUMN {} SET DATA TYPE {}", qualified(t),
                        quote(column), physical_type(to))};
  }

  /// One atomic statement that keeps the table's grants.
  [[nodiscard]] std::vector<std::string> rebuild_and_swap(
      const table_ref& t, const schema::table_schema& old_schema,
      const schema::table_schema& new_schema) const override {
    return {fmt::format("CREATE OR REPLACE TABLE {} COPY GRANTS AS {}", qualified(t),
                        cast_select(*this, t, old_schema, new_schema, true))};
  }

  [[nodiscard]] std::vector<std::string> swap_in(const table_ref& staging,
                                                 const table_ref& target) const override {
    return {fmt::format("CREATE OR REPLACE TABLE {} COPY GRANTS AS SELECT * FROM {}",
                        qualified(target), qualified(staging)),
            drop_table(staging)};
  }
};

}  // namespace

std::unique_ptr<dialect> make_snowflake() { return std::make_unique<snowflake_dialect>(); }

}  // namespace flotilla::dialects::detail
