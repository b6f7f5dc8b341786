// DuckDB: https://duckdb.org/docs/sql/data_types/overview,
// https://duckdb.org/docs/sql/statements/alter_table
#include <fmt/format.h>

#include "dialects/builtin.hpp"
#include "dialects/type_string.hpp"

namespace flotilla::dialects::detail {
namespace {

using schema::portable_type;
using schema::type_kind;

/// DuckDB's largest DECIMAL width.
constexpr int max_precision = 38;

// Names as duckdb_columns().data_type reports them, then the aliases DuckDB accepts.
// Wider or unsigned integers map to the narrowest portable type holding every value;
// HUGEINT and UHUGEINT become decimal(38,0), which holds all but their extreme values.
constexpr type_name type_names[] = {
    {"boolean", type_kind::boolean},
    {"bool", type_kind::boolean},
    {"logical", type_kind::boolean},
    {"tinyint", type_kind::smallint},
    {"int1", type_kind::smallint},
    {"utinyint", type_kind::smallint},
    {"smallint", type_kind::smallint},
    {"int2", type_kind::smallint},
    {"short", type_kind::smallint},
    {"usmallint", type_kind::int32},
    {"integer", type_kind::int32},
    {"int", type_kind::int32},
    {"int4", type_kind::int32},
    {"signed", type_kind::int32},
    {"uinteger", type_kind::bigint},
    {"bigint", type_kind::bigint},
    {"int8", type_kind::bigint},
    {"long", type_kind::bigint},
    {"ubigint", type_kind::decimal, params::none, 20, 0},
    {"hugeint", type_kind::decimal, params::none, 38, 0},
    {"uhugeint", type_kind::decimal, params::none, 38, 0},
    {"float", type_kind::float32},
    {"float4", type_kind::float32},
    {"real", type_kind::float32},
    {"double", type_kind::float64},
    {"float8", type_kind::float64},
    // Bare DECIMAL is DECIMAL(18,3) in DuckDB.
    {"decimal", type_kind::decimal, params::decimal, 18, 3},
    {"numeric", type_kind::decimal, params::decimal, 18, 3},
    // VARCHAR(n) is accepted but not enforced: every string is VARCHAR.
    {"varchar", type_kind::text, params::ignored},
    {"text", type_kind::text, params::ignored},
    {"string", type_kind::text, params::ignored},
    {"char", type_kind::text, params::ignored},
    {"bpchar", type_kind::text, params::ignored},
    {"blob", type_kind::bytes},
    {"bytea", type_kind::bytes},
    {"binary", type_kind::bytes},
    {"varbinary", type_kind::bytes},
    {"date", type_kind::date},
    {"time", type_kind::time},
    {"timestamp", type_kind::timestamp_ntz},
    {"datetime", type_kind::timestamp_ntz},
    {"timestamp_us", type_kind::timestamp_ntz},
    {"timestamp_s", type_kind::timestamp_ntz},
    {"timestamp_ms", type_kind::timestamp_ntz},
    {"timestamp_ns", type_kind::timestamp_ntz},
    {"timestamp with time zone", type_kind::timestamp_tz},
    {"timestamptz", type_kind::timestamp_tz},
    {"uuid", type_kind::uuid},
    {"json", type_kind::json},
};

class duckdb_dialect final : public dialect {
 public:
  [[nodiscard]] std::string_view name() const override { return "duckdb"; }
  [[nodiscard]] std::string_view engine_reserved(const table_ref& t) const override {
    const std::string schema = detail::ascii_lower(t.schema);
    return schema == "information_schema" || schema == "pg_catalog"
               ? "DuckDB keeps the schemas information_schema and pg_catalog"
               : std::string_view();
  }
  [[nodiscard]] bool executable() const override { return true; }
  [[nodiscard]] bool supports_transactional_ddl() const override { return true; }
  /// ALTER COLUMN ... TYPE is refused on a PRIMARY KEY column.
  [[nodiscard]] bool supports_key_column_type_change() const override { return false; }

  [[nodiscard]] std::string physical_type(const portable_type& t) const override {
    switch (t.kind) {
      case type_kind::boolean: return "BOOLEAN";
      case type_kind::smallint: return "SMALLINT";
      case type_kind::int32: return "INTEGER";
      case type_kind::bigint: return "BIGINT";
      case type_kind::float32: return "FLOAT";
      case type_kind::float64: return "DOUBLE";
      case type_kind::decimal: {
        const auto d = clamp_decimal(t, max_precision);
        return fmt::format("DECIMAL({},{})", d.precision, d.scale);
      }
      case type_kind::varchar:  // no length limit in DuckDB
      case type_kind::text: return "VARCHAR";
      case type_kind::date: return "DATE";
      case type_kind::time: return "TIME";
      case type_kind::timestamp_ntz: return "TIMESTAMP";
      case type_kind::timestamp_tz: return "TIMESTAMP WITH TIME ZONE";
      case type_kind::json: return "JSON";
      case type_kind::bytes: return "BLOB";
      case type_kind::uuid: return "UUID";
    }
    return "VARCHAR";
  }

  [[nodiscard]] std::expected<portable_type, schema::type_error> parse_physical(
      std::string_view type_string) const override {
    return lookup(name(), type_string, type_names);
  }
};

}  // namespace

std::unique_ptr<dialect> make_duckdb() { return std::make_unique<duckdb_dialect>(); }

}  // namespace flotilla::dialects::detail
