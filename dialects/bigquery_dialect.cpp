// BigQuery (GoogleSQL): https://cloud.google.com/bigquery/docs/reference/standard-sql/data-types,
// .../lexical (quoted identifiers share string literals' escapes),
// .../data-definition-language (ALTER COLUMN SET DATA TYPE, CREATE TABLE COPY).
#include <fmt/format.h>

#include "dialects/builtin.hpp"
#include "dialects/ddl.hpp"
#include "dialects/type_string.hpp"

namespace flotilla::dialects::detail {
namespace {

using schema::portable_type;
using schema::type_kind;

/// Digits left of the point an INT64 can need (9223372036854775807).
constexpr int int64_digits = 19;

// INFORMATION_SCHEMA.COLUMNS spellings, the INT64 aliases, and the legacy names the
// tables API still reports (INTEGER, FLOAT, BOOLEAN).
constexpr type_name type_names[] = {
    {"bool", type_kind::boolean},
    {"boolean", type_kind::boolean},
    {"int64", type_kind::bigint},
    {"int", type_kind::bigint},
    {"integer", type_kind::bigint},
    {"bigint", type_kind::bigint},
    {"smallint", type_kind::bigint},
    {"tinyint", type_kind::bigint},
    {"byteint", type_kind::bigint},
    {"float64", type_kind::float64},
    {"float", type_kind::float64},
    // Bare NUMERIC is NUMERIC(38,9); bare BIGNUMERIC holds 38 digits either side.
    {"numeric", type_kind::decimal, params::decimal, 38, 9},
    {"decimal", type_kind::decimal, params::decimal, 38, 9},
    {"bignumeric", type_kind::decimal, params::decimal, 76, 38},
    {"bigdecimal", type_kind::decimal, params::decimal, 76, 38},
    {"string", type_kind::varchar, params::length},
    {"bytes", type_kind::bytes, params::ignored},
    {"date", type_kind::date},
    {"time", type_kind::time},
    {"datetime", type_kind::timestamp_ntz},
    {"timestamp", type_kind::timestamp_tz},
    {"json", type_kind::json},
};

/// NUMERIC(P,S) takes S <= 9 and P - S <= 29; BIGNUMERIC(P,S) takes S <= 38 and
/// P - S <= 38.
bool fits_numeric(const portable_type& t) { return t.scale <= 9 && t.precision - t.scale <= 29; }
bool fits_bignumeric(const portable_type& t) {
  return t.scale <= 38 && t.precision - t.scale <= 38;
}

/// GoogleSQL escapes, shared by quoted identifiers and string literals.
std::string escape(std::string_view text, char q) {
  std::string out(1, q);
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out.push_back(c);
    }
  }
  out.push_back(q);
  return out;
}

class bigquery_dialect final : public dialect {
 public:
  [[nodiscard]] std::string_view name() const override { return "bigquery"; }

  [[nodiscard]] std::string physical_type(const portable_type& t) const override {
    switch (t.kind) {
      case type_kind::boolean: return "BOOL";
      case type_kind::smallint:
      case type_kind::int32:
      case type_kind::bigint: return "INT64";
      case type_kind::float32:
      case type_kind::float64: return "FLOAT64";
      case type_kind::decimal:
        if (fits_numeric(t))
          return fmt::format("NUMERIC({},{})", t.precision, t.scale);
        if (fits_bignumeric(t))
          return fmt::format("BIGNUMERIC({},{})", t.precision, t.scale);
        return "BIGNUMERIC";  // the widest BigQuery has
      case type_kind::varchar:
      case type_kind::text:
      case type_kind::uuid: return "STRING";
      case type_kind::date: return "DATE";
      case type_kind::time: return "TIME";
      case type_kind::timestamp_ntz: return "DATETIME";
      case type_kind::timestamp_tz: return "TIMESTAMP";
      case type_kind::json: return "JSON";
      case type_kind::bytes: return "BYTES";
    }
    return "STRING";
  }

  [[nodiscard]] std::expected<portable_type, schema::type_error> parse_physical(
      std::string_view type_string) const override {
    return lookup(name(), type_string, type_names);
  }

  /// INT64 -> NUMERIC, INT64 -> BIGNUMERIC, NUMERIC -> BIGNUMERIC, and nothing else.
  /// NUMERIC or BIGNUMERIC is the type the decimal maps to; the target must hold every
  /// value of the source (as many integer digits, at least the scale).
  [[nodiscard]] bool is_safe_widening(const portable_type& from,
                                      const portable_type& to) const override {
    if (to.kind != type_kind::decimal)
      return false;
    const int to_digits = to.precision - to.scale;
    if (schema::is_integer(from.kind))
      return to_digits >= int64_digits;
    if (from.kind == type_kind::decimal && fits_numeric(from) && !fits_numeric(to))
      return to_digits >= from.precision - from.scale && to.scale >= from.scale;
    return false;
  }

  /// `name`, with GoogleSQL escapes (\` and \\) inside.
  [[nodiscard]] std::string quote(std::string_view identifier) const override {
    check_identifier(identifier);
    return escape(identifier, '`');
  }

  [[nodiscard]] std::string literal(std::string_view value) const override {
    check_literal(value);
    return escape(value, '\'');
  }

  [[nodiscard]] std::string create_table(const table_ref& t,
                                         const schema::table_schema& s) const override {
    return detail::create_table(*this, t, s, key_clause::not_enforced);
  }

  [[nodiscard]] std::vector<std::string> alter_column_type(
      const table_ref& t, std::string_view column, const portable_type& to) const override {
    return {fmt::format("ALTER TABLE {} ALTER COLUMN {} SET DATA TYPE {}", qualified(t),
                        quote(column), physical_type(to))};
  }

  [[nodiscard]] std::vector<std::string> rebuild_and_swap(
      const table_ref& t, const schema::table_schema& old_schema,
      const schema::table_schema& new_schema) const override {
    return {fmt::format("CREATE OR REPLACE TABLE {} AS {}", qualified(t),
                        cast_select(*this, t, old_schema, new_schema, true))};
  }

  /// A table copy keeps the staging table's column modes and key as they are.
  [[nodiscard]] std::vector<std::string> swap_in(const table_ref& staging,
                                                 const table_ref& target) const override {
    return {fmt::format("CREATE OR REPLACE TABLE {} COPY {}", qualified(target),
                        qualified(staging)),
            drop_table(staging)};
  }
};

}  // namespace

std::unique_ptr<dialect> make_bigquery() { return std::make_unique<bigquery_dialect>(); }

}  // namespace flotilla::dialects::detail
