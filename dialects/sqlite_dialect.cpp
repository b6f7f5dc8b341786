// SQLite: https://www.sqlite.org/datatype3.html (type affinity),
// https://www.sqlite.org/lang_altertable.html (no ALTER COLUMN TYPE).
#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "dialects/builtin.hpp"
#include "dialects/ddl.hpp"
#include "dialects/type_string.hpp"
#include "dialects/widening.hpp"

namespace flotilla::dialects::detail {
namespace {

using schema::portable_type;
using schema::type_kind;

// Declared types Flotilla writes, and common ones with an obvious meaning, read back
// exactly. Everything else falls to SQLite's affinity rules (affinity() below).
constexpr type_name exact_names[] = {
    {"boolean", type_kind::boolean},
    {"bool", type_kind::boolean},
    {"smallint", type_kind::smallint},
    {"int", type_kind::int32},
    {"bigint", type_kind::bigint},
    {"float", type_kind::float32},
    {"double", type_kind::float64},
    {"double precision", type_kind::float64},
    {"real", type_kind::float64},
    {"decimal", type_kind::decimal, params::decimal, 38, 9},
    {"numeric", type_kind::decimal, params::decimal, 38, 9},
    {"varchar", type_kind::varchar, params::length},
    {"text", type_kind::text},
    {"date", type_kind::date},
    {"time", type_kind::time, params::ignored},
    {"timestamp", type_kind::timestamp_ntz, params::ignored},
    {"datetime", type_kind::timestamp_ntz, params::ignored},
    {"timestamptz", type_kind::timestamp_tz, params::ignored},
    {"json", type_kind::json},
    {"json text", type_kind::json},
    {"blob", type_kind::bytes},
    {"uuid", type_kind::uuid},
};

/// SQLite's five affinity rules (section 3.1 of datatype3), in their order. An INTEGER
/// column holds 64-bit values, so integer affinity reads as bigint; NUMERIC affinity as
/// the portable default decimal.
portable_type affinity(std::string_view declared) {
  std::string up(declared);
  std::transform(up.begin(), up.end(), up.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  auto has = [&](std::string_view s) { return up.find(s) != std::string::npos; };
  if (has("INT"))
    return portable_type::of(type_kind::bigint);
  if (has("CHAR") || has("CLOB") || has("TEXT"))
    return portable_type::of(type_kind::text);
  if (has("BLOB") || std::all_of(up.begin(), up.end(),
                                 [](unsigned char c) { return std::isspace(c) != 0; }))
    return portable_type::of(type_kind::bytes);
  if (has("REAL") || has("FLOA") || has("DOUB"))
    return portable_type::of(type_kind::float64);
  return portable_type::decimal(38, 9);
}

class sqlite_dialect final : public dialect {
 public:
  [[nodiscard]] std::string_view name() const override { return "sqlite"; }
  [[nodiscard]] std::string_view engine_reserved(const table_ref& t) const override {
    return detail::ascii_lower(t.name).starts_with("sqlite_") ? "SQLite keeps table names starting sqlite_"
                                               : std::string_view();
  }
  [[nodiscard]] bool executable() const override { return true; }
  [[nodiscard]] bool supports_transactional_ddl() const override { return true; }
  [[nodiscard]] bool supports_in_place_type_change() const override { return false; }
  /// In WAL mode readers see the committed table until the load commits, while a RENAME
  /// rewrites the schema entry of every table in the database (sqlite_rename_table over
  /// all of sqlite_master): swapping staging tables in made a 10,000-table fleet
  /// quadratic (18 minutes for the first 5,600).
  [[nodiscard]] bool replaces_in_place() const override { return true; }
  /// Seed 001's default allowlist. SQLite cannot change a column's type in place, so a
  /// safe widening rebuilds the table with its rows (the planner's rebuild and swap), and
  /// anything else is a full refresh.
  [[nodiscard]] bool is_safe_widening(const portable_type& from,
                                      const portable_type& to) const override {
    return default_allowlist(from, to);
  }

  [[nodiscard]] std::string physical_type(const portable_type& t) const override {
    switch (t.kind) {
      case type_kind::boolean: return "BOOLEAN";
      case type_kind::smallint: return "SMALLINT";
      case type_kind::int32: return "INT";  // INTEGER reads back as bigint (64-bit)
      case type_kind::bigint: return "BIGINT";
      case type_kind::float32: return "FLOAT";
      case type_kind::float64: return "DOUBLE";
      case type_kind::decimal: return fmt::format("DECIMAL({},{})", t.precision, t.scale);
      case type_kind::varchar: return fmt::format("VARCHAR({})", t.length);
      case type_kind::text: return "TEXT";
      case type_kind::date: return "DATE";
      case type_kind::time: return "TIME";
      case type_kind::timestamp_ntz: return "TIMESTAMP";
      case type_kind::timestamp_tz: return "TIMESTAMPTZ";
      // Not JSON: that is NUMERIC affinity, which stores a JSON number as an INTEGER or a
      // REAL, rounding one past 64 bits or 15 digits. TEXT affinity keeps the text.
      case type_kind::json: return "JSON TEXT";
      case type_kind::bytes: return "BLOB";
      case type_kind::uuid: return "UUID";
    }
    return "TEXT";
  }

  /// Never fails: any declared type has an affinity. A name Flotilla writes reads back
  /// exactly; one it does not know, or with parameters out of range, by its affinity.
  [[nodiscard]] std::expected<portable_type, schema::type_error> parse_physical(
      std::string_view type_string) const override {
    if (auto t = lookup(name(), type_string, exact_names))
      return t;
    return affinity(type_string);
  }

  /// A schema is an attached database; there is no catalog level above it.
  [[nodiscard]] std::string qualified(const table_ref& t) const override {
    if (!t.catalog.empty())
      throw std::invalid_argument(fmt::format(
          "sqlite has no catalogs: table '{}' names catalog '{}'", t.name, t.catalog));
    return dialect::qualified(t);
  }

  /// SQLite's CAST goes by type affinity, not by the type's name: CAST('2024-01-01
  /// 10:00:00' AS TIMESTAMP) takes NUMERIC affinity and gives 2024, a JSON or UUID text
  /// gives 0. A rebuild copies values as they are, since the column's affinity converts
  /// numbers on insert and dates, times, JSON and UUIDs are already the target's text;
  /// only a change of text form is written out (a UTC offset, with its minutes as the
  /// load writes it and SQLite's date and time functions read it; a time of day).
  [[nodiscard]] std::string cast(std::string_view expr, const portable_type& from,
                                 const portable_type& to) const override {
    const bool from_date = from.kind == type_kind::date;
    if (to.kind == type_kind::timestamp_tz && (from.kind == type_kind::timestamp_ntz || from_date))
      return fmt::format("({} || '{}+00:00')", expr, from_date ? " 00:00:00" : "");
    if (to.kind == type_kind::timestamp_ntz && from_date)
      return fmt::format("({} || ' 00:00:00')", expr);
    if ((to.kind == type_kind::text || to.kind == type_kind::varchar) && from.kind != to.kind &&
        from.kind != type_kind::varchar && from.kind != type_kind::text) {
      // The text the other engines (and a load from the source) give: a boolean, stored
      // as 0/1, as true/false; a decimal, stored as an INTEGER or a REAL, with its scale's
      // digits (3.10, not 3.1).
      if (from.kind == type_kind::boolean)
        return fmt::format("CASE WHEN {0} IS NULL THEN NULL WHEN {0} THEN 'true' ELSE 'false' END",
                           expr);
      if (from.kind == type_kind::decimal)  // an INTEGER's digits as they are: 19 of them
        return fmt::format("CASE WHEN typeof({0}) = 'integer' THEN CAST({0} AS TEXT){2} "
                           "WHEN typeof({0}) = 'real' THEN printf('%.{1}f', {0}) "
                           "ELSE CAST({0} AS TEXT) END",
                           expr, from.scale,
                           from.scale > 0 ? " || '." + std::string(static_cast<std::size_t>(from.scale), '0') + "'"
                                          : std::string());
      // A double's shortest text that reads back as the same double (what the other
      // engines write; CAST keeps only 15 digits: 1.0000000000000002 became 1.0). SQLite's
      // printf stops at 16 digits but with its '!' flag.
      // A float's value is kept as the double nearest it (0.1f as 0.10000000149011612):
      // its text is the shortest that reads back as the same float, as the other engines
      // write it (0.1): one within half the float's spacing at the value (2^(e-24), for
      // 2^e <= |x|) of it; nine digits always do.
      if (from.kind == type_kind::float32) {
        std::string out = fmt::format(
            "CASE WHEN typeof({0}) <> 'real' THEN CAST({0} AS TEXT) "
            "WHEN {0} = 9e999 THEN 'Infinity' WHEN {0} = -9e999 THEN '-Infinity' ",
            expr);
        for (int digits = 6; digits <= 8; ++digits)
          out += fmt::format(
              "WHEN abs(CAST(printf('%.{1}g', {0}) AS REAL) - {0}) < "
              "pow(2, floor(log2(abs({0}))) - 24) THEN printf('%.{1}g', {0}) ",
              expr, digits);
        return out + fmt::format("ELSE printf('%.9g', {}) END", expr);
      }
      if (from.kind == type_kind::float64)
        return fmt::format(
            "CASE WHEN typeof({0}) <> 'real' THEN CAST({0} AS TEXT) "
            "WHEN {0} = 9e999 THEN 'Infinity' WHEN {0} = -9e999 THEN '-Infinity' "
            "WHEN CAST(printf('%.15g', {0}) AS REAL) = {0} THEN printf('%.15g', {0}) "
            "WHEN CAST(printf('%!.16g', {0}) AS REAL) = {0} THEN printf('%!.16g', {0}) "
            "ELSE printf('%!.17g', {0}) END",
            expr);
      return fmt::format("CAST({} AS TEXT)", expr);
    }
    return std::string(expr);
  }

  /// SQLite has no CREATE SCHEMA: a schema is a database file attached to the
  /// connection, which is the warehouse's business. Nothing to run.
  [[nodiscard]] std::string create_schema(std::string_view,
                                          std::string_view = {}) const override {
    return {};
  }

  /// No constraint of a SQLite column changes in place: a relaxation rebuilds.
  [[nodiscard]] std::optional<std::vector<std::string>> relax_in_place(
      const table_ref&, const schema::in_place_relaxation& r) const override {
    if (!r.empty())
      return std::nullopt;
    return std::vector<std::string>{};
  }

  [[nodiscard]] std::string drop_not_null(const table_ref& t,
                                          std::string_view column) const override {
    throw std::logic_error(fmt::format(
        "sqlite cannot drop NOT NULL from column '{}' of {} in place: use rebuild_and_swap",
        column, qualified(t)));
  }

  /// SQLite runs a correlated EXISTS as a nested loop, every live row against every
  /// incoming one (a 16,000-row merge into 50,000 rows took 30 s). `IN` makes one index
  /// of the incoming keys, and the live key's own index finds each.
  [[nodiscard]] std::string delete_matching(const table_ref& live, const table_ref& incoming,
                                            const std::vector<std::string>& key) const override {
    std::string cols;
    for (const auto& k : key)
      cols += (cols.empty() ? "" : ", ") + quote(k);
    const std::string row = key.size() == 1 ? cols : "(" + cols + ")";
    return fmt::format("DELETE FROM {} WHERE {} IN (SELECT {} FROM {})", qualified(live), row,
                       cols, qualified(incoming));
  }

  [[nodiscard]] std::vector<std::string> alter_column_type(const table_ref& t,
                                                           std::string_view column,
                                                           const portable_type&) const override {
    throw std::logic_error(fmt::format(
        "sqlite cannot change the type of column '{}' of {} in place: use rebuild_and_swap",
        column, qualified(t)));
  }
};

}  // namespace

std::unique_ptr<dialect> make_sqlite() { return std::make_unique<sqlite_dialect>(); }

}  // namespace flotilla::dialects::detail
