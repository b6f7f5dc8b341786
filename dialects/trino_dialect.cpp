// Trino: https://trino.io/docs/current/language/types.html,
// https://trino.io/docs/current/sql/alter-table.html
#include <fmt/format.h>

#include "dialects/builtin.hpp"
#include "dialects/ddl.hpp"
#include "dialects/type_string.hpp"

namespace flotilla::dialects::detail {
namespace {

using schema::portable_type;
using schema::type_kind;

constexpr int max_precision = 38;

// DESCRIBE / information_schema spellings (lower case).
constexpr type_name type_names[] = {
    {"boolean", type_kind::boolean},
    {"tinyint", type_kind::smallint},
    {"smallint", type_kind::smallint},
    {"integer", type_kind::int32},
    {"int", type_kind::int32},
    {"bigint", type_kind::bigint},
    {"real", type_kind::float32},
    {"double", type_kind::float64},
    // Bare DECIMAL is decimal(38,0).
    {"decimal", type_kind::decimal, params::decimal, 38, 0},
    {"varchar", type_kind::varchar, params::length},
    {"char", type_kind::varchar, params::length},
    {"varbinary", type_kind::bytes},
    {"date", type_kind::date},
    {"time", type_kind::time, params::ignored},
    {"timestamp", type_kind::timestamp_ntz, params::ignored},
    {"timestamp with time zone", type_kind::timestamp_tz, params::ignored},
    {"json", type_kind::json},
    {"uuid", type_kind::uuid},
};

class trino_dialect final : public dialect {
 public:
  [[nodiscard]] std::string_view name() const override { return "trino"; }

  [[nodiscard]] std::string physical_type(const portable_type& t) const override {
    switch (t.kind) {
      case type_kind::boolean: return "BOOLEAN";
      case type_kind::smallint: return "SMALLINT";
      case type_kind::int32: return "INTEGER";
      case type_kind::bigint: return "BIGINT";
      case type_kind::float32: return "REAL";
      case type_kind::float64: return "DOUBLE";
      case type_kind::decimal: {
        const auto d = clamp_decimal(t, max_precision);
        return fmt::format("DECIMAL({},{})", d.precision, d.scale);
      }
      case type_kind::varchar: return fmt::format("VARCHAR({})", t.length);
      case type_kind::text: return "VARCHAR";
      case type_kind::date: return "DATE";
      case type_kind::time: return "TIME(6)";
      case type_kind::timestamp_ntz: return "TIMESTAMP(6)";
      case type_kind::timestamp_tz: return "TIMESTAMP(6) WITH TIME ZONE";
      case type_kind::json: return "JSON";
      case type_kind::bytes: return "VARBINARY";
      case type_kind::uuid: return "UUID";
    }
    return "VARCHAR";
  }

  [[nodiscard]] std::expected<portable_type, schema::type_error> parse_physical(
      std::string_view type_string) const override {
    return lookup(name(), type_string, type_names);
  }

  /// No PRIMARY KEY: Trino connectors have none.
  [[nodiscard]] std::string create_table(const table_ref& t,
                                         const schema::table_schema& s) const override {
    return detail::create_table(*this, t, s, key_clause::none);
  }

  [[nodiscard]] std::vector<std::string> alter_column_type(
      const table_ref& t, std::string_view column, const portable_type& to) const override {
    return {fmt::format("ALTER TABLE {} ALTER COLUMN {} SET DATA TYPE {}", qualified(t),
                        quote(column), physical_type(to))};
  }

  /// CREATE TABLE AS under the temporary name, then drop and rename: not atomic (Trino
  /// has no transactional DDL), but the old table is dropped only once the new one holds
  /// every row.
  [[nodiscard]] std::vector<std::string> rebuild_and_swap(
      const table_ref& t, const schema::table_schema& old_schema,
      const schema::table_schema& new_schema) const override {
    const table_ref tmp = sibling(t, rebuild_suffix, 0);
    return {drop_table(tmp),
            fmt::format("CREATE TABLE {} AS {}", qualified(tmp),
                        cast_select(*this, t, old_schema, new_schema, true)),
            fmt::format("DROP TABLE {}", qualified(t)), rename_table(*this, tmp, t, true)};
  }

  /// Trino resolves a bare new name against the session's schema, not the table's:
  /// the new name is always fully qualified.
  [[nodiscard]] std::vector<std::string> swap_in(const table_ref& staging,
                                                 const table_ref& target) const override {
    swap_steps steps;
    steps.qualify_new_name = true;
    return swap_by_rename(*this, staging, target, steps);
  }
};

}  // namespace

std::unique_ptr<dialect> make_trino() { return std::make_unique<trino_dialect>(); }

}  // namespace flotilla::dialects::detail
