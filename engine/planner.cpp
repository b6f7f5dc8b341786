#include "engine/planner.hpp"
#include "schema/toml_text.hpp"

#include <algorithm>
#include <set>
#include <cctype>
#include <regex>

#include <fmt/format.h>

#include "dialects/ddl.hpp"
#include "dialects/widening.hpp"
#include "schema/compat.hpp"
#include "schema/utf8.hpp"

namespace flotilla::engine {

std::string_view to_string(load_kind k) {
  switch (k) {
    case load_kind::full_refresh: return "full_refresh";
    case load_kind::incremental: return "incremental";
    case load_kind::merge: return "merge";
  }
  return "full_refresh";
}

dialects::table_ref staging_of(const dialects::table_ref& target, std::size_t max_bytes) {
  return dialects::detail::sibling(target, "__flotilla_staging", max_bytes);
}

namespace {

using schema::column;
using schema::evolution_action;
using schema::evolution_step;
using schema::portable_type;

std::string_view rule_name(new_column_rule r) {
  switch (r) {
    case new_column_rule::append_new_columns: return "append_new_columns";
    case new_column_rule::ignore: return "ignore";
    case new_column_rule::fail: return "fail";
  }
  return "append_new_columns";
}

std::string_view rule_name(rebuild_rule r) {
  switch (r) {
    case rebuild_rule::require_confirmation: return "require_confirmation";
    case rebuild_rule::allow: return "allow";
    case rebuild_rule::deny: return "deny";
  }
  return "allow";
}

const column* find_declared(const table_settings& s, const std::string& name,
                            schema::name_rule rule) {
  for (const auto& d : s.declared)
    if (schema::same_name(d.name, name, rule))
      return &d;
  return nullptr;
}

/// The planner's working state for one table.
struct planner {
  const schema::table_schema& source;
  const dialects::dialect& dialect;
  const dialects::table_ref& target;
  const table_settings& settings;
  table_plan& p;
  /// The live table as the plan's DDL leaves it (nullopt: none, or rebuilt from nothing).
  std::optional<schema::table_schema> live_after{};
  /// The live table as it is (nullptr: none), for the type a refusal suggests.
  const schema::table_schema* live_now = nullptr;

  schema::name_rule names() const { return dialect.names(); }

  /// The source column a declaration means: the one spelled exactly so; else, on a target
  /// whose names ignore case, the one column equal to it but for case. nullptr when none,
  /// or when several are and none is spelled so (`*twins` then lists them).
  const column* source_for(const std::string& declared, std::string* twins = nullptr) const {
    if (names() == schema::name_rule::case_sensitive)
      return source.find(declared, schema::name_rule::case_sensitive);
    if (const column* c = source.resolve(declared))
      return c;
    if (twins != nullptr && source.count_folded(declared) > 1)
      for (const auto& c : source.columns)
        if (schema::same_name(c.name, declared, schema::name_rule::case_insensitive))
          *twins += (twins->empty() ? "'" : ", '") + c.name + "'";
    return nullptr;
  }

  /// The declaration meant for the source column `name`: the one spelled exactly so; else,
  /// on a target whose names ignore case, one equal to it but for case, unless that
  /// declaration means another source column spelled exactly as it ("id" beside "Id").
  const column* declared_for(const std::string& name) const {
    if (const column* d = find_declared(settings, name, schema::name_rule::case_sensitive))
      return d;
    if (names() == schema::name_rule::case_sensitive)
      return nullptr;
    for (const auto& d : settings.declared)
      if (schema::same_name(d.name, name, schema::name_rule::case_insensitive) &&
          source_for(d.name) == source.find(name, schema::name_rule::case_sensitive))
        return &d;
    return nullptr;
  }
  std::string T(const portable_type& t) const { return schema::to_string(t); }

  /// A declaration spelled as none of the source's columns that differ from it only by
  /// case (`twins`, quoted and listed), on a target where they are one column.
  std::string twins_declared(const std::string& name, const std::string& twins) const {
    return fmt::format("{} is declared, and the source has no column spelled so but {}, "
                       "which differ only by case (one column on {}); declare the one meant "
                       "spelled exactly as the source spells it",
                       name, twins, dialect.name());
  }

  std::string missing_declared(const std::string& name) const {
    // The target's names are case-sensitive (PostgreSQL): a spelling that differs only in
    // case is another column there, but most likely the one meant.
    if (source.count_folded(name) > 1) {
      std::string alike;
      for (const auto& c : source.columns)
        if (schema::same_name(c.name, name, schema::name_rule::case_insensitive))
          alike += (alike.empty() ? "'" : ", '") + c.name + "'";
      return fmt::format("{} is declared but the source has no column spelled so: its columns "
                         "{} differ from it only in case, and {} keeps the case of names, so "
                         "each is another column; declare the one meant spelled exactly as the "
                         "source spells it",
                         name, alike, dialect.name());
    }
    if (const schema::column* other = source.find(name, schema::name_rule::case_insensitive))
      return fmt::format("{} is declared but the source has no such column: its column '{}' "
                         "differs only in case, and {} keeps the case of names, so it is "
                         "another column; declare it as {} in the table's columns{}",
                         name, other->name, dialect.name(), other->name,
                         settings.section.empty() ? " in flotilla.toml" : in_section());
    return fmt::format("{} is declared but the source has no such column; add it at the "
                       "source, or remove it from the table's columns{}",
                       name, settings.section.empty() ? " in flotilla.toml" : in_section());
  }
  /// " in [sources.s.tables."t"]", where a message tells what to write in flotilla.toml.
  [[nodiscard]] std::string in_section() const {
    return settings.section.empty() ? std::string() : " in " + settings.section;
  }
  std::string unreadable_declared(const std::string& column, const portable_type& source,
                                  const portable_type& declared) const {
    // PostgreSQL's numeric without a scale (and a domain over it) is read as its text,
    // which no pin turns into a number: the fix is at the source.
    const bool numeric_text =
        !settings.read_as_declared &&  // SQLite's own text column: no PostgreSQL numeric
        source.kind == schema::type_kind::text &&
        (declared.kind == schema::type_kind::decimal || schema::integer_rank(declared.kind) > 0 ||
         declared.kind == schema::type_kind::float64 || declared.kind == schema::type_kind::float32);
    // The type to suggest: the source's, or the live column's when that is wider and
    // holds the source's values (the source's type would narrow it: FLT-S004).
    portable_type suggest = source;
    if (live_now != nullptr)
      if (const schema::column* l = live_now->find(column, names())) {
        const portable_type have = dialect.canonical(l->type);
        if (have != source && schema::can_read_as(source, have))
          suggest = have;
      }
    return fmt::format("{} has type {}, which cannot be read as {}; {}declare a type it can be "
                       "read as{} (columns = {{ {} = \"{}\" }}{}), or change it at the source",
                       column, T(source), T(declared),
                       numeric_text ? "text is never read as a number (where the column is "
                                      "a PostgreSQL numeric without a scale, or a domain over "
                                      "one, which is read as its text, give it a scale at the "
                                      "source, numeric(18,2), or select from a view that casts "
                                      "it); or "
                                    : "",
                       suggest == source ? "" : ", the live column's type, which is never narrowed",
                       schema::toml_key(column), T(suggest), in_section());
  }

  /// How a declared column is read from the source: in its source type, except a decimal
  /// or a float declared as text, which is read as the source's own text, so that a value
  /// no decimal holds (PostgreSQL's 'NaN') loads as it is rather than failing the read, and
  /// a real keeps its own digits (3.4e+38, not the double it widens to, 3.3999999521443642e+38).
  /// A SQLite column's declared type does not bound what it holds, so a declared column
  /// is read as declared there: each value converted exactly, or failing naming it.
  column read_as(const column& s, const portable_type& declared) const {
    column r = s;
    const bool own_text = s.type.kind == schema::type_kind::decimal ||
                          s.type.kind == schema::type_kind::float32 ||
                          s.type.kind == schema::type_kind::float64;
    if (settings.read_as_declared || (own_text && declared.kind == schema::type_kind::text))
      r.type = declared;
    return r;
  }
  /// A text column declared bytes is read as its UTF-8 bytes, whatever the source.
  /// A SQLite column's declared type does not bound its values, so a declaration is not
  /// bound by it either where that is what the user means: text takes any value as
  /// written ('N/A' in an INTEGER column), bytes any value's bytes, and a TEXT column's
  /// values parse as a date, time or timestamp (SQLite has no such storage: ISO text is
  /// its usual form), exactly or failing naming the value. Anything else keeps seed 000's
  /// check at plan time (a TEXT or DECIMAL column declared int fails the plan, FLT-S002).
  bool reads_as_declared(const column& s, const portable_type& declared) const {
    using k = schema::type_kind;
    const auto textual = [](k kind) { return kind == k::text || kind == k::varchar; };
    // Every text has a byte form, its UTF-8, on any source: bytes is how a text holding a
    // NUL reaches a target whose text refuses it (PostgreSQL).
    if (declared.kind == k::bytes && textual(s.type.kind))
      return true;
    if (!settings.read_as_declared)
      return false;
    const bool temporal = declared.kind == k::date || declared.kind == k::time ||
                          declared.kind == k::timestamp_ntz || declared.kind == k::timestamp_tz;
    // SQLite keeps a NUMERIC column's fractions as doubles: a double or another decimal
    // reads each value as stored (a value the declared decimal cannot hold fails its row).
    // A decimal the column declares with its own precision (DECIMAL(24,2)) is the schema
    // the user wrote: a narrower decimal pin fails the plan, as a PostgreSQL numeric's
    // does (seed 000). A bare NUMERIC or DECIMAL (decimal(38,9)) bounds nothing.
    const bool bare_decimal = s.type.precision == 38 && s.type.scale == 9;
    const bool numeric = s.type.kind == k::decimal &&
                         ((declared.kind == k::decimal && bare_decimal) ||
                          declared.kind == k::float64 || declared.kind == k::float32);
    return textual(declared.kind) || declared.kind == k::bytes ||
           (textual(s.type.kind) && temporal) || numeric;
  }

  /// A file's number column widening to a decimal whose widest value the target cannot
  /// store exactly (SQLite keeps 15 significant digits, or a whole number within 64 bits):
  /// its digits, or null.
  const table_settings::column_digits* inexact_on_target(const std::string& column,
                                                         const portable_type& want) const {
    if (dialect.name() != "sqlite" || want.kind != schema::type_kind::decimal)
      return nullptr;
    for (const auto& d : settings.digits)
      if (schema::same_name(d.column, column, names()))
        return d.significant > 15 && !(d.whole && d.integer <= 18) ? &d : nullptr;
    return nullptr;
  }

  /// A declared column of a file whose values its type cannot hold: the value, or null.
  const table_settings::unfit_column* unfit_value(const std::string& column) const {
    for (const auto& u : settings.unfit)
      if (schema::same_name(u.column, column, names()))
        return &u;
    return nullptr;
  }
  void fail_unfit(const column& s, const portable_type& declared,
                  const table_settings::unfit_column& unfit) {
    const std::string& value = unfit.value;
    // The inferred type holds a number; a value that is no number only text holds.
    static const std::regex number(R"(\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*)");
    // A double keeps 15 significant digits: a longer number only text holds as written.
    std::size_t digits = 0;
    for (const char c : value.substr(0, value.find_first_of("eE")))
      digits += (c >= '0' && c <= '9' && (digits > 0 || c != '0')) ? 1 : 0;
    const bool inexact_double =
        (s.type.kind == schema::type_kind::float64 ||
         s.type.kind == schema::type_kind::float32) && digits > 15;
    // A timestamp with its UTC offset, which a timestamp without time zone would drop.
    const bool offset = declared.kind == schema::type_kind::timestamp_ntz;
    std::string holds = offset ? std::string("timestamp_tz")
                        : std::regex_match(value, number) && !inexact_double
                            ? T(s.type)
                            : std::string("text");
    // An exact number past a declared decimal's digits: a wider decimal holds it exactly,
    // where the inferred type (a double) would not.
    // So does a decimal value in a column declared an integer: a double would hold it
    // inexactly. The decimal suggested also holds the live column's values, which it would
    // otherwise narrow (FLT-S004).
    static const std::regex plain(R"(\s*[+-]?0*(\d*)(?:\.(\d*?)0*)?\s*)");
    if (std::smatch m; (declared.kind == schema::type_kind::decimal ||
                        schema::integer_digits(declared.kind) > 0) &&
                       !offset && std::regex_match(value, m, plain)) {
      int scale = std::max<int>(declared.scale, static_cast<int>(m[2].length()));
      int integer = std::max<int>(declared.kind == schema::type_kind::decimal
                                      ? declared.precision - declared.scale
                                      : schema::integer_digits(declared.kind),
                                  static_cast<int>(m[1].length()));
      if (live_now != nullptr)
        if (const schema::column* l = live_now->find(s.name, names())) {
          const portable_type have = dialect.canonical(l->type);
          if (have.kind == schema::type_kind::decimal) {
            scale = std::max(scale, have.scale);
            integer = std::max(integer, have.precision - have.scale);
          } else {
            integer = std::max(integer, schema::integer_digits(have.kind));
          }
        }
      if (integer + scale <= 38)
        holds = fmt::format("decimal({},{})", integer + scale, scale);
    }
    // A JSON number the reader took as a double (an integer past 64 bits, or more digits
    // than a double keeps): the value shown is the double's, not the file's, and a double
    // is no type to hold it. Written as a JSON string, the declared type reads its digits.
    const bool json_record = unfit.where.find(", record ") != std::string::npos;
    const bool exact_type = declared.kind == schema::type_kind::decimal ||
                            schema::is_integer(declared.kind);
    if (json_record && exact_type &&
        (s.type.kind == schema::type_kind::float64 || s.type.kind == schema::type_kind::float32) &&
        (inexact_double || value.find_first_of("eE") != std::string::npos)) {
      fail("FLT-S002",
           fmt::format("{}{} holds a number the JSON reader takes as the double {} (it reads a "
                       "number past 64 bits, or of more digits than a double keeps, as a "
                       "double), so {} cannot load its digits as written; write the value as a "
                       "JSON string (its digits in double quotes), which the declared {} reads "
                       "exactly, or declare text (columns = {{ {} = \"text\" }}{}) and write it "
                       "so too",
                       unfit.where.empty() ? std::string() : unfit.where + ": ", s.name, value,
                       T(declared), T(declared), schema::toml_key(s.name), in_section()),
           s.name, T(declared), "text");
      return;
    }
    fail("FLT-S002",
         fmt::format("{}{} holds the value '{}', which {} cannot hold exactly{} (the file is "
                     "parsed as declared); declare a type that holds every value of the "
                     "column (columns = {{ {} = \"{}\" }}{}), or fix the file",
                     unfit.where.empty() ? std::string() : unfit.where + ": ", s.name, value,
                     T(declared),
                     offset ? ": it would drop the value's UTC offset" : "", schema::toml_key(s.name), holds,
                     in_section()),
         s.name, T(declared), holds);
  }

  /// The first failure stands, with its code. `column`, `expected` and `actual` name the
  /// column, its declared (or table's) type and the type the source has, where the
  /// failure has them. Later failures of other kinds or columns join its reason (`also
  /// [code]: ...`), so one plan shows everything to fix in the table.
  void fail(std::string code, std::string reason, std::string column = {},
            std::string expected = {}, std::string actual = {}) {
    if (!p.error) {
      p.error = plan_error{std::move(code), std::move(reason), std::move(column),
                           std::move(expected), std::move(actual)};
      return;
    }
    // A held review is of one change at a time: nothing joins an FLT-S008. The gate's own
    // refusal joins a rebuild's confirmation (FLT-S006, S007), so that the flag it asks for
    // is not followed by the review a second plan would then show.
    if (p.error->code != "FLT-S008" &&
        (code != "FLT-S008" || p.error->code == "FLT-S006" || p.error->code == "FLT-S007"))
      p.error->reason += fmt::format("; also [{}]: {}", code, reason);
  }

  /// A NUL byte ends a name in every engine: no target can hold one, and no statement
  /// naming it can be written. Bytes that are not UTF-8 (a SQLite name can hold any):
  /// DuckDB and PostgreSQL refuse them, or worse, take them into a catalog they can no
  /// longer read back, and no event can carry them. True when a name holds either (the
  /// plan failed, FLT-S011).
  bool nul_in_names() {
    const auto nul = [&](std::string_view what, const std::string& name, std::string_view fix) {
      if (name.find('\0') != std::string::npos) {
        std::string shown;
        for (const char c : name)
          shown += c == '\0' ? std::string("\\0") : std::string(1, c);
        fail("FLT-S011",
             fmt::format("{} '{}' holds a NUL byte (shown as \\0), which no {} name can hold; {}",
                         what, shown, dialect.name(), fix),
             what == "column" ? name : std::string());
        return;
      }
      if (schema::valid_utf8(name))
        return;
      std::string shown;  // ASCII as it is, every other byte as \xHH
      for (const char c : name) {
        const auto b = static_cast<unsigned char>(c);
        shown += b >= 0x20 && b < 0x7F ? std::string(1, c) : fmt::format("\\x{:02X}", b);
      }
      fail("FLT-S011",
           fmt::format("{} '{}' is not valid UTF-8 (its bytes shown as \\xHH), which no {} name "
                       "can hold; {}",
                       what, shown, dialect.name(), fix),
           what == "column" ? name : std::string());
    };
    nul("target schema", target.schema,
        "remove it from the target's schema template or the tags it uses");
    nul("target table", target.name, "rename the table at the source");
    for (const auto& c : source.columns)
      nul("column", c.name, "rename it at the source (a file's header or key)");
    return p.error.has_value();
  }

  /// What the load cannot do whatever the target holds, found before anything runs:
  /// two loaded columns the target would take for one, and a cursor_column or unique_key
  /// column that is not loaded.
  void check_loaded_columns() {
    const auto& loaded = p.load_columns.columns;
    // A column without a name (SQLite allows "" as one): no target can name it.
    for (std::size_t i = 0; i < source.columns.size(); ++i)
      if (source.columns[i].name.empty() &&
          std::any_of(loaded.begin(), loaded.end(), [](const column& c) { return c.name.empty(); }))
        fail("FLT-S011",
             fmt::format("column {} (counted from 1) of the source table has an empty name, "
                         "which no {} column can have; rename it at the source, or declare the "
                         "columns to load (contract = \"enforced\") without it",
                         i + 1, dialect.name()));
    // An enforced contract that leaves out a column of the source's primary key: the
    // table would be created keyed on the rest, which rows differing only in the left-out
    // column break (or, merged, overwrite each other). An omission: declare it.
    if (settings.enforced)
      for (const auto& c : source.columns)
        // (A declared key column left out is refused by its own error, FLT-S002.)
        if (c.key && p.load_columns.find(c.name, names()) == nullptr &&
            find_declared(settings, c.name, names()) == nullptr)
          fail("FLT-S010",
               fmt::format("column '{}' is in the source's primary key, and contract = enforced "
                           "leaves it out (it is not declared): rows differing only in it would "
                           "be one row of the table. Declare it in the table's columns (e.g. {} "
                           "= \"{}\")",
                           c.name, c.name, T(c.type)),
               c.name, "", T(c.type));
    for (std::size_t i = 0; i < loaded.size(); ++i)
      for (std::size_t j = i + 1; j < loaded.size(); ++j)
        if (schema::same_name(loaded[i].name, loaded[j].name, names()))
          fail("FLT-S009",
               fmt::format("columns '{}' and '{}' are one column on {}, whose names ignore case; "
                           "rename one at the source, or declare the columns to load "
                           "(contract = \"enforced\") without one of them",
                           loaded[i].name, loaded[j].name, dialect.name()),
               loaded[j].name);
    // The columns a cursor or key may name: those loaded, and, in source order among
    // them, a declared one its own error left out (a pin that failed), which is there.
    std::string list;
    std::set<std::string> listed;
    for (const auto& c : source.columns)
      if (p.load_columns.find(c.name, schema::name_rule::case_sensitive) != nullptr ||
          (p.error && find_declared(settings, c.name, names()) != nullptr)) {
        list += (list.empty() ? "" : ", ") + c.name;
        listed.insert(c.name);
      }
    for (const auto& c : loaded)
      if (!listed.contains(c.name))
        list += (list.empty() ? "" : ", ") + c.name;
    const auto missing = [&](const std::string& key, const std::string& column) {
      if (p.load_columns.find(column, schema::name_rule::case_sensitive) != nullptr)
        return;
      // A declared column left out was refused by its own error (FLT-S002, FLT-S001).
      if (p.error && find_declared(settings, column, names()) != nullptr)
        return;
      if (const std::size_t n = p.load_columns.count_folded(column); n > 1) {
        // Two columns differing only by case (PostgreSQL): which one is meant is a guess,
        // and a wrong cursor loses rows.
        std::string alike;
        for (const auto& c : loaded)
          if (schema::same_name(c.name, column, schema::name_rule::case_insensitive))
            alike += (alike.empty() ? "'" : ", '") + c.name + "'";
        fail("FLT-S010",
             fmt::format("{} '{}' matches {} loaded columns ({}), which differ only by case; "
                         "spell it exactly as one of them in the table's section of "
                         "flotilla.toml",
                         key, column, n, alike),
             column);
      } else if (n == 0) {
        fail("FLT-S010",
             fmt::format("{} '{}' is not among the table's loaded columns ({}): dropped or "
                         "renamed at the source, left out by the contract, or misspelled; set "
                         "it to one of them in the table's section of flotilla.toml{}",
                         key, column, list,
                         key == "cursor_column"
                             ? ", or remove cursor_column to copy the table in full each run"
                             : std::string()),
             column);
      }
    };
    // A name the target would cut could make two tables or columns one, silently.
    if (const std::size_t limit = dialect.max_identifier_bytes(); limit != 0) {
      const auto too_long = [&](std::string_view what, const std::string& name,
                                std::string_view fix) {
        if (name.size() > limit)
          fail("FLT-S011",
               fmt::format("{} '{}' is {} bytes long, and {} keeps only the first {} of a "
                           "name (two names alike in those would be one); {}",
                           what, name, name.size(), dialect.name(), limit, fix),
               what == "column" ? name : std::string());
      };
      too_long("target schema", target.schema,
               "shorten the target's schema template or the tags it uses");
      too_long("target table", target.name, "rename the table at the source");
      for (const auto& c : loaded)
        too_long("column", c.name,
                 "rename it at the source, or leave it out (contract = \"enforced\" with "
                 "columns that do not name it)");
    }
    check_reserved_names();
    if (!settings.cursor_column.empty())
      missing("cursor_column", settings.cursor_column);
    for (const auto& k : settings.unique_key)
      missing("unique_key column", k);
  }

  /// Names Flotilla keeps for its own tables and columns (the `_flotilla` schema, the
  /// `_flotilla_commits` table, `<table>__flotilla_staging`, `__flotilla_merge`,
  /// `__flotilla_rebuild`, the merge's `__flotilla_seq` column): a source table or column
  /// so named would be taken for one of Flotilla's, then overwritten, dropped or merged
  /// into. Such a table fails instead, named.
  void check_reserved_names() {
    const auto lower = [](std::string_view s) {
      std::string out(s);
      for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return out;
    };
    const std::string table = lower(target.name);
    if (lower(target.schema) == "_flotilla" || table == "_flotilla_commits" ||
        table.find("__flotilla_") != std::string::npos)
      fail("FLT-S013",
           fmt::format("target table {} has a name Flotilla keeps for its own tables (the "
                       "_flotilla schema, _flotilla_commits, names holding __flotilla_), which "
                       "it would overwrite or drop; rename the table at the source, exclude it, "
                       "or give the target another schema",
                       dialect.qualified(target)));
    // Names the engine keeps for itself: creating the table there fails on the target,
    // where nothing can be corrected; said by plan, with the fix on this side.
    if (const auto keeps = dialect.engine_reserved(target); !keeps.empty())
      fail("FLT-S013",
           fmt::format("target table {} is a name the engine keeps for itself ({}); rename the "
                       "table at the source (or its file), exclude it, or change the target's "
                       "schema (its template, or the tag it uses)",
                       dialect.qualified(target), keeps));
    for (const auto& c : p.load_columns.columns)
      if (const auto keeps = dialect.engine_reserved_column(c.name); !keeps.empty())
        fail("FLT-S013",
             fmt::format("column '{}' is a name the engine keeps for itself ({}), so {} cannot "
                         "have it; rename it at the source (for a file, in its header), or "
                         "leave it out (contract = \"enforced\" with columns that do not name it)",
                         c.name, keeps, dialect.qualified(target)),
             c.name);
    for (const auto& c : p.load_columns.columns)
      if (lower(c.name).starts_with("__flotilla_"))
        fail("FLT-S013",
             fmt::format("column '{}' has a name Flotilla keeps for its own columns (names "
                         "starting __flotilla_); rename it at the source, or leave it out "
                         "(contract = \"enforced\" with columns that do not name it)",
                         c.name),
             c.name);
  }

  /// Columns to load, from the source and the declarations (seed 000's contracts).
  void choose_columns() {
    const auto rule = names();
    if (settings.enforced) {
      // A table an include pattern picked up under a source's (or the project's) enforced
      // contract has no section to declare its columns in: nothing would load.
      if (settings.declared.empty()) {
        fail("FLT-S014",
             fmt::format("contract = enforced ({}) and the table declares no columns, so it "
                         "would load none: declare them in its section of flotilla.toml{} "
                         "(columns = {{ ... }}; once the table is loaded, `flotilla contract "
                         "generate --write` proposes them), set contract = \"none\" there, or "
                         "leave the table out (exclude)",
                         settings.contract_from.empty() ? "the source's" : settings.contract_from,
                         settings.section.empty() ? "" : " (" + settings.section + ")"));
        return;
      }
      for (const auto& d : settings.declared) {
        std::string twins;
        const column* s = source_for(d.name, &twins);
        if (s == nullptr && !twins.empty()) {
          fail("FLT-S001", twins_declared(d.name, twins), d.name, T(d.type));
          continue;
        }
        if (s == nullptr) {
          fail("FLT-S001", missing_declared(d.name), d.name, T(d.type));
          continue;
        }
        column out = *s;
        out.type = d.type;
        if (settings.inferred || reads_as_declared(*s, d.type)) {
          // A file is parsed as its declared types (the inference only guessed them).
          if (const auto* v = unfit_value(s->name)) {
            fail_unfit(*s, d.type, *v);
            continue;
          }
          p.read_columns.columns.push_back(out);
          p.load_columns.columns.push_back(out);
          continue;
        }
        if (!schema::can_read_as(s->type, d.type)) {
          fail("FLT-S002", unreadable_declared(s->name, s->type, d.type), s->name, T(d.type),
               T(s->type));
          continue;
        }
        p.read_columns.columns.push_back(read_as(*s, d.type));
        p.load_columns.columns.push_back(out);
      }
      for (const auto& s : source.columns)
        if (declared_for(s.name) == nullptr)
          p.warnings.push_back(fmt::format(
              "column '{}' ({}) is in the source but not declared; contract = enforced leaves it "
              "out",
              s.name, T(s.type)));
      return;
    }
    for (const auto& s : source.columns) {
      column out = s;
      if (const column* d = declared_for(s.name)) {
        if (settings.inferred || reads_as_declared(s, d->type)) {  // parsed as declared, as above
          if (const auto* v = unfit_value(s.name)) {
            fail_unfit(s, d->type, *v);
            continue;
          }
          out.type = d->type;
          p.read_columns.columns.push_back(out);
          p.load_columns.columns.push_back(out);
          continue;
        }
        if (!schema::can_read_as(s.type, d->type)) {
          fail("FLT-S002", unreadable_declared(s.name, s.type, d->type), s.name, T(d->type),
               T(s.type));
          continue;
        }
        out.type = d->type;
        p.read_columns.columns.push_back(read_as(s, d->type));
        p.load_columns.columns.push_back(out);
        continue;
      }
      p.read_columns.columns.push_back(s);
      p.load_columns.columns.push_back(out);
    }
    for (const auto& d : settings.declared)
      if (source.find(d.name, rule) == nullptr)
        fail("FLT-S001", missing_declared(d.name), d.name, T(d.type));
      else if (std::string twins; source_for(d.name, &twins) == nullptr)
        fail("FLT-S001", twins_declared(d.name, twins), d.name, T(d.type));
  }

  void drop_load_column(const std::string& name) {
    const auto rule = names();
    auto erase = [&](schema::table_schema& t) {
      std::erase_if(t.columns, [&](const column& c) { return schema::same_name(c.name, name, rule); });
    };
    erase(p.read_columns);
    erase(p.load_columns);
  }

  bool in_place(const portable_type& have, const portable_type& want, const column& live_col) const {
    return dialect.supports_in_place_type_change() && dialect.is_safe_widening(have, want) &&
           (!live_col.key || dialect.supports_key_column_type_change());
  }

  std::string retype_reason(const std::string& name, const portable_type& have,
                            const portable_type& want) const {
    return fmt::format("column '{}' changed {} -> {}", name, dialect.physical_type(have),
                       dialect.physical_type(want));
  }

  /// Gives column `name` of `columns` the type `type`.
  void retype(schema::table_schema& columns, const std::string& name,
              const portable_type& type) const {
    for (auto& c : columns.columns)
      if (schema::same_name(c.name, name, names()))
        c.type = type;
  }

  /// Compares the columns to load with the live table and decides every change.
  void evolve(const schema::table_schema& live) {
    const auto rule = names();
    auto& d = p.drift;
    std::vector<std::string> ignored;
    bool rebuild = false;
    bool recreate = false;
    // An enforced contract that leaves out a column of the live table's primary key, which
    // the source still has: a full refresh would load every row with it empty and drop
    // the key. An omission, not a choice: the table stops before anything runs.
    if (settings.enforced)
      for (const auto& l : live.columns) {
        const column* s = source.find(l.name, rule);
        if (l.key && s != nullptr && !s->key && p.load_columns.find(l.name, rule) == nullptr &&
            find_declared(settings, l.name, rule) == nullptr)
          fail("FLT-S010",
               fmt::format("column '{}' is in the live table's primary key, and contract = "
                           "enforced leaves it out (it is not declared): loaded so, every row "
                           "would have it empty and the key would be gone. Declare it in the "
                           "table's columns (e.g. {} = \"{}\")",
                           l.name, s->name, T(s->type)),
               l.name, "", T(s->type));
      }
    // A declared column refused because the source's new type cannot be read as declared
    // (FLT-S002) is not loaded, but its source type no longer matches the live one: drift,
    // refused (seed 001's definition), counted as FLT-S005's refusals are.
    if (p.error)
      for (const auto& decl : settings.declared) {
        const column* s = source.find(decl.name, rule);
        const column* l = live.find(decl.name, rule);
        if (s == nullptr || l == nullptr || p.load_columns.find(decl.name, rule) != nullptr)
          continue;
        const auto have = dialect.canonical(l->type), want = dialect.canonical(s->type);
        if (have != want)
          d.unsafe_retypes.push_back({l->name, have, want});
      }
    for (const auto& col : std::vector<column>(p.load_columns.columns)) {
      const column* l = live.find(col.name, rule);
      const bool pinned = declared_for(col.name) != nullptr;
      if (l == nullptr) {
        // A declared column is asked for by name: it loads whatever on_schema_change says
        // of columns new in the source (docs/schema-changes.md, "Which columns load").
        if (pinned) {
          column added = col;
          added.nullable = true;
          added.key = false;
          d.columns_to_add.push_back(added);
          d.steps.push_back({evolution_action::add_columns, col.name,
                             fmt::format("column '{}' added as {}", col.name,
                                         dialect.physical_type(col.type)),
                             settings.enforced
                                 ? fmt::format("contract = enforced ({}) declares it",
                                               settings.contract_from)
                                 : std::string("the table's columns declare it"),
                             std::nullopt, col.type});
          continue;
        }
        const std::string by = fmt::format("on_schema_change = {} ({})",
                                           rule_name(settings.on_schema_change),
                                           settings.on_schema_change_from);
        switch (settings.on_schema_change) {
          case new_column_rule::append_new_columns: {
            column added = col;
            added.nullable = true;
            added.key = false;
            d.columns_to_add.push_back(added);
            d.steps.push_back({evolution_action::add_columns, col.name,
                               fmt::format("column '{}' added as {}", col.name,
                                           dialect.physical_type(col.type)),
                               by, std::nullopt, col.type});
            break;
          }
          case new_column_rule::ignore:
            ignored.push_back(col.name);
            p.warnings.push_back(fmt::format("column '{}' ({}) is new in the source and left out; {}",
                                             col.name, T(col.type), by));
            break;
          case new_column_rule::fail:
            fail("FLT-S003",
                 fmt::format("column '{}' ({}) is new in the source; {} stops the table; "
                             "set on_schema_change = \"append_new_columns\" to add it, or "
                             "\"ignore\" to leave it out",
                             col.name, T(col.type), by),
                 col.name, "", T(col.type));
            break;
        }
        continue;
      }
      // The live column was loaded from the source column spelled as it ("Id"), and the
      // column loaded now is its twin by case ("id": a declaration respelled), whose values
      // are others. The table is copied anew, not the two mixed in one column.
      if (l->name != col.name && rule == schema::name_rule::case_insensitive &&
          source.find(l->name, schema::name_rule::case_sensitive) != nullptr &&
          p.load_columns.find(l->name, schema::name_rule::case_sensitive) == nullptr) {
        recreate = true;
        d.steps.push_back(
            {evolution_action::drop_and_recreate, col.name,
             fmt::format("column '{}' now loads the source's column '{}', where the live column "
                         "'{}' holds the values of the source's column '{}', another column that "
                         "differs only by case",
                         l->name, col.name, l->name, l->name),
             "the source column loaded changed: copied anew", l->type, col.type});
        continue;
      }
      const portable_type have = dialect.canonical(l->type);
      const portable_type want = dialect.canonical(col.type);
      if (have == want)
        continue;

      if (pinned) {
        // A number column pinned double, the fix FLT-S005 names when values outgrow it:
        // the live column cannot take every double, so the table is copied anew under
        // the pin (type_change_rebuild decides, seed 000).
        const bool to_double = want.kind == schema::type_kind::float64 &&
                               (schema::is_integer(have.kind) ||
                                have.kind == schema::type_kind::decimal);
        // A text column pinned bytes, the fix FLT-R001 names for a text holding a NUL byte
        // (which a PostgreSQL text cannot): its values load as their UTF-8 bytes, into a
        // table copied anew likewise.
        const bool to_bytes = want.kind == schema::type_kind::bytes &&
                              (have.kind == schema::type_kind::text ||
                               have.kind == schema::type_kind::varchar);
        if (!schema::can_read_as(have, want) && (to_double || to_bytes)) {
          d.unsafe_retypes.push_back({l->name, have, want});
          recreate = true;
          d.steps.push_back({evolution_action::drop_and_recreate, l->name,
                             retype_reason(l->name, have, want),
                             "declared type; the live column cannot hold it: copied anew",
                             have, want});
          continue;
        }
        if (!schema::can_read_as(have, want)) {
          // A file's column whose values now need a wider type than the live column's:
          // the pin to name is that one (the live type would refuse those values).
          portable_type suggest = have;
          if (settings.inferred)
            if (const column* sc = source.find(l->name, names()); sc != nullptr) {
              const portable_type data = dialect.canonical(sc->type);
              if (data != have && schema::can_read_as(have, data))
                suggest = data;
            }
          fail("FLT-S004",
               fmt::format("{} has type {}, which cannot be read as {}; a live column only "
                           "changes to a type that reads every value it may hold: declare columns = {{ {} = \"{}\" }}{} or wider (\"text\" "
                           "takes every value as written){}",
                           l->name, T(have), T(want), schema::toml_key(l->name), T(suggest),
                           in_section(),
                           suggest == have ? std::string()
                                           : fmt::format("; the file's values need {}", T(suggest))),
               l->name, T(want), T(have));
          continue;
        }
        const bool here = in_place(have, want, *l);
        d.safe_retypes.push_back({l->name, have, want});
        rebuild |= !here;
        d.steps.push_back({here ? evolution_action::widen : evolution_action::rebuild, l->name,
                           retype_reason(l->name, have, want),
                           here ? fmt::format("declared type; dialect {}: in place", dialect.name())
                                : fmt::format("declared type; dialect {} cannot change it in place",
                                              dialect.name()),
                           have, want});
        continue;
      }
      if (settings.inferred) {
        // Seed 000: an inferred column does not change type on its own, and the live
        // table is the truth. Values the live column holds as they are (a text column
        // whose values now all look like numbers; whole numbers in a double column) load
        // in its type.
        // A file with no rows has no values to type its columns: the live types hold.
        const bool holds =
            settings.no_rows || schema::can_read_as(want, have) ||
            (schema::is_integer(want.kind) && have.kind == schema::type_kind::float64);
        if (holds) {
          retype(p.load_columns, col.name, l->type);
          // A live text column takes the file's text as written: read as the type now
          // inferred and written back as text, a value would change form between runs
          // (2024-03-15T10:00:00+02:00 as 2024-03-15 08:00:00+00).
          if (l->type.kind == schema::type_kind::text || l->type.kind == schema::type_kind::varchar)
            retype(p.read_columns, col.name, l->type);
          continue;
        }
        if (!settings.auto_widen || !schema::auto_widen_step(have, want)) {
          // A live column of another type does not become json (it is never narrowed, and
          // json is no widening of a number): text keeps the new values, each as its JSON.
          // The pin named must work: a declared type the live column widens to (or a
          // double, which copies the table anew); else it would narrow the live column
          // (FLT-S004), and text, which every value reads as, is the one that does.
          const bool pin_widens =
              schema::can_read_as(have, want) ||
              (want.kind == schema::type_kind::float64 &&
               (schema::is_integer(have.kind) || have.kind == schema::type_kind::decimal));
          const bool as_json = want.kind == schema::type_kind::json;
          const std::string pin =
              as_json ? fmt::format("pin it with columns = {{ {} = \"text\" }} (each value kept "
                                    "as its JSON text)",
                                    schema::toml_key(col.name))
              : pin_widens
                  ? fmt::format("pin it with columns = {{ {} = \"{}\" }}", schema::toml_key(col.name), T(want))
                  : fmt::format("pin it with columns = {{ {} = \"text\" }} (each value kept as "
                                "written; {} would narrow the live {} column, which is never "
                                "done)",
                                schema::toml_key(col.name), T(want), T(have));
          // The pin's change, made by a rebuild where the target cannot make it in place,
          // needs a confirmation a table with declared columns asks for by default.
          const portable_type pinned =
              as_json || !pin_widens ? portable_type::of(schema::type_kind::text) : want;
          const std::string confirm =
              in_place(have, pinned, *l)
                  ? std::string()
                  : " (the live column then changes by a rebuild of the table: run with "
                    "--allow-type-change-rebuild)";
          const std::string fix = (schema::auto_widen_step(have, want)
                                       ? fmt::format("set auto_widen = true, or {}", pin)
                                       : pin) +
                                  in_section() + confirm;
          fail("FLT-S005",
               fmt::format("column '{}' outgrew its inferred type: the table has {}, the data now "
                           "needs {}; {}",
                           col.name, T(have), T(want), fix),
               col.name, T(have), T(want));
          d.unsafe_retypes.push_back({l->name, have, want});  // a retype, refused: drift
          continue;
        }
        if (const auto* digits = inexact_on_target(col.name, want)) {
          // SQLite would refuse the values at the load, after the retype had committed.
          fail("FLT-S005",
               fmt::format("column '{}' outgrew its inferred type: the table has {}, the data "
                           "now needs {}, and a value of {} significant digits, which SQLite "
                           "cannot store exactly (its numbers keep 15 significant digits, or a "
                           "whole number within 64 bits); pin it with columns = {{ {} = \"text\" "
                           "}}{} to keep every digit, or load into a duckdb or postgres target",
                           col.name, T(have), T(want), digits->significant,
                           schema::toml_key(col.name), in_section()),
               col.name, T(have), T(want));
          d.unsafe_retypes.push_back({l->name, have, want});
          continue;
        }
        const bool here = in_place(have, want, *l);
        d.safe_retypes.push_back({l->name, have, want});
        rebuild |= !here;
        d.steps.push_back({here ? evolution_action::widen : evolution_action::rebuild, l->name,
                           retype_reason(l->name, have, want),
                           fmt::format("auto_widen = true ({})", settings.auto_widen_from), have,
                           want});
        continue;
      }
      // Seed 000 (SQLLoad, the default for a table with a contract): later runs follow
      // the live table, changes made by hand included, so a live column that is a safe
      // widening of the source's (int -> bigint, varchar(10) -> text, widened on the
      // target) takes the source's values as they are. Not a live text column whose
      // source turned numeric: that is seed 001's unsafe STRING -> INT, which a table with
      // a contract stops on. Seed 001 (Rocky, without one) changes it back.
      // A table whose contract is set, `contract = "none"` written out included (seed 000's
      // own mode, which "follows the live table, including changes made by hand"); only
      // the built-in default is Rocky's.
      // A decimal the live table widened by hand in scale too (numeric(14,2) ->
      // numeric(16,4)) holds every source value exactly: seed 001's allowlist, which
      // keeps the scale, is for changing the live table, not for following it.
      const bool holds_decimal = want.kind == schema::type_kind::decimal &&
                                 have.kind == schema::type_kind::decimal &&
                                 schema::can_read_as(want, have);
      if ((settings.enforced || !settings.declared.empty() ||
           settings.contract_from != "default") &&
          ((dialect.is_safe_widening(want, have) && !dialects::is_text_representation(want, have)) ||
           holds_decimal)) {
        retype(p.load_columns, col.name, l->type);
        continue;
      }
      // Seed 001's graduated evolution.
      if (dialect.is_safe_widening(have, want)) {
        const bool here = in_place(have, want, *l);
        d.safe_retypes.push_back({l->name, have, want});
        rebuild |= !here;
        d.steps.push_back({here ? evolution_action::alter_column_types : evolution_action::rebuild,
                           l->name, retype_reason(l->name, have, want),
                           here ? fmt::format("dialect {}: safe widening", dialect.name())
                                : fmt::format("dialect {}: safe widening, not in place",
                                              dialect.name()),
                           have, want});
      } else {
        d.unsafe_retypes.push_back({l->name, have, want});
        recreate = true;
        d.steps.push_back({evolution_action::drop_and_recreate, l->name,
                           retype_reason(l->name, have, want),
                           fmt::format("dialect {}: not a safe widening", dialect.name()), have,
                           want});
      }
    }
    // An incremental table merges on its key: a live primary key other than that key
    // (the source's key changed, or unique_key was set later) would refuse rows the merge
    // means to insert, on every run. Only a new table has the new key: seed 001's full
    // refresh.
    if (!settings.cursor_column.empty()) {
      std::vector<std::string> live_key;
      for (const auto& c : live.columns)
        if (c.key)
          live_key.push_back(c.name);
      // A key the source dropped (an append now) leaves a primary key that refuses the
      // rows it appends again: recreated without it. A live table without a primary key
      // (a unique_key's, or appended rows') does not show the key its rows were merged
      // on: the watermark records it. Merging on another key would keep the duplicates
      // the old one let in, and a key now wider would never read the rows it parts.
      std::string why = "the live table's primary key would refuse rows the load brings";
      bool known = !live_key.empty();
      if (!known && settings.has_watermark && settings.watermark_key) {
        live_key = *settings.watermark_key;
        known = true;
        why = "the rows loaded so far were merged on the other key";
      }
      const auto same_key = [&] {
        if (live_key.size() != p.unique_key.size())
          return false;
        for (const auto& k : p.unique_key)
          if (std::none_of(live_key.begin(), live_key.end(),
                           [&](const auto& n) { return schema::same_name(n, k, rule); }))
            return false;
        return true;
      };
      if (known && !same_key()) {
        const auto list = [](const std::vector<std::string>& names) {
          std::string out;
          for (const auto& n : names)
            out += (out.empty() ? "" : ", ") + n;
          return out.empty() ? std::string("none") : out;
        };
        recreate = true;
        // Named by a column of the new key (of the old one when there is none now), whose
        // type does not change: the step's from and to are that type, not an added column's.
        const std::string named = p.unique_key.empty() ? live_key.front() : p.unique_key.front();
        std::optional<portable_type> from;
        portable_type to = portable_type::of(schema::type_kind::text);
        if (const column* l = live.find(named, rule))
          from = dialect.canonical(l->type);
        if (const column* c = p.load_columns.find(named, rule))
          to = c->type;
        else if (from)
          to = *from;
        d.steps.push_back({evolution_action::drop_and_recreate, named,
                           fmt::format("the table's key changed ({}) -> ({})", list(live_key),
                                       list(p.unique_key)),
                           why, from, to});
      }
    }
    if (!ignored.empty())
      p.ignored_read_columns = p.read_columns;
    for (const auto& name : ignored)
      drop_load_column(name);
    if (p.error)
      return;
    const auto relaxed = columns_to_relax(live);
    if (!dialect.supports_in_place_type_change())
      rebuild |= !relaxed.empty();

    if (recreate || rebuild)
      gate_rebuild();
    gate_governance();
    if (p.error)
      return;

    if (recreate) {
      // Seed 001: anything outside the allowlist costs a full refresh. The steps are the
      // changes that force it; the first lists the others, which the new table takes too.
      std::vector<std::string> also;
      for (const auto& s : d.steps)
        if (s.action != evolution_action::drop_and_recreate)
          also.push_back(s.reason);
      std::erase_if(d.steps, [](const evolution_step& s) {
        return s.action != evolution_action::drop_and_recreate;
      });
      // A key change beside a retype that recreates the table is one rebuild: said in
      // that step's `also`, not as a second action of the same column.
      if (d.steps.size() > 1) {
        const auto key = std::find_if(d.steps.begin(), d.steps.end(), [](const auto& s) {
          return s.reason.starts_with("the table's key changed");
        });
        if (key != d.steps.end()) {
          std::string reason = key->reason;
          d.steps.erase(key);
          also.insert(also.begin(), std::move(reason));
        }
      }
      // Appended: a recreate schema::evaluate_drift decided already lists its own (columns
      // added, safe retypes) there, which an assignment would drop.
      if (!d.steps.empty())
        d.steps.front().also.insert(d.steps.front().also.end(), also.begin(), also.end());
      p.shape_action = "recreate";
      p.reset_watermark = true;
      // Columns the source no longer has stay (never dropped), but the new table is
      // loaded from the source alone: their values are gone. Said, not silent.
      for (const auto& l : live.columns)
        if (p.load_columns.find(l.name, rule) == nullptr)
          p.warnings.push_back(fmt::format(
              "column '{}' is in the live table only (not loaded from the source): the "
              "recreated table keeps it, empty in every row",
              l.name));
      // An incremental table may hold rows its source no longer has (deleted or purged
      // there since they loaded): the new table has the source's rows alone.
      if (!settings.cursor_column.empty())
        p.warnings.push_back(
            "the table is incremental and is created anew from the source's rows alone: rows "
            "earlier loads put in it that the source no longer has (deleted or purged there "
            "since) are not in the new table; copy the target table aside before this run "
            "if they must be kept (type_change_rebuild = \"deny\" stops such a change "
            "instead)");
      full_refresh();
      std::vector<std::string> statements = p.staging_sql;
      statements.insert(statements.end(), p.swap_sql.begin(), p.swap_sql.end());
      for (auto& s : d.steps)
        s.sql = join_statements(statements);
      return;
    }
    if (rebuild) {
      // Rebuild and swap inside the target, data kept: live columns with their new types,
      // then the added columns.
      schema::table_schema next = live;
      for (auto& c : next.columns) {
        for (const auto& r : d.safe_retypes)
          if (schema::same_name(c.name, r.name, rule))
            c.type = r.to;
        for (const auto& r : relaxed)
          if (schema::same_name(c.name, r, rule))
            c.nullable = true;
      }
      for (const auto& c : d.columns_to_add)
        next.columns.push_back(c);
      for (auto& sql : dialect.rebuild_and_swap(target, live, next))
        p.ddl.push_back(std::move(sql));
      // Every change is made by the rebuild: a widening that would otherwise have been
      // an ALTER in place is one of its steps, and says so.
      for (auto& s : d.steps) {
        if (s.action == evolution_action::alter_column_types || s.action == evolution_action::widen) {
          s.action = evolution_action::rebuild;
          s.decided_by += s.decided_by.empty() ? "made by the table's rebuild"
                                               : "; made by the table's rebuild";
        }
        s.sql = join_statements(p.ddl);
      }
      live_after = std::move(next);
      p.shape_action = "rebuild";
      return;
    }
    for (const auto& c : d.columns_to_add) {
      p.ddl.push_back(dialect.add_column(target, c));
      attach_sql(evolution_action::add_columns, c.name, {p.ddl.back()});
      live_after->columns.push_back({c.name, c.type});  // added nullable, not in the key
    }
    for (const auto& c : d.safe_retypes) {
      const auto statements = dialect.alter_column_type(target, c.name, c.to);
      p.ddl.insert(p.ddl.end(), statements.begin(), statements.end());
      attach_sql(evolution_action::alter_column_types, c.name, statements);
      for (auto& l : live_after->columns)
        if (schema::same_name(l.name, c.name, rule))
          l.type = c.to;
    }
    for (const auto& name : relaxed) {
      p.ddl.push_back(dialect.drop_not_null(target, name));
      attach_sql(evolution_action::drop_not_null, name, {p.ddl.back()});
      for (auto& l : live_after->columns)
        if (schema::same_name(l.name, name, rule))
          l.nullable = true;
    }
    p.shape_action = d.steps.empty() ? "none" : "evolve";
  }

  /// The statements of the step that changes `column` by `action` (alter_column_types
  /// stands for widen too), for its schema_action event.
  void attach_sql(evolution_action action, const std::string& column,
                  const std::vector<std::string>& statements) {
    for (auto& s : p.drift.steps) {
      const bool same_action =
          s.action == action || (action == evolution_action::alter_column_types &&
                                 s.action == evolution_action::widen);
      if (same_action && schema::same_name(s.column, column, names()) && s.sql.empty()) {
        s.sql = join_statements(statements);
        return;
      }
    }
  }

  static std::string join_statements(const std::vector<std::string>& statements) {
    std::string out;
    for (const auto& sql : statements) {
      std::string_view one = sql;  // one separator between statements, not ";;"
      while (!one.empty() && (one.back() == ';' || one.back() == '\n' || one.back() == ' '))
        one.remove_suffix(1);
      if (one.empty())
        continue;
      out += out.empty() ? "" : ";\n";
      out += one;
    }
    return out;
  }

  /// An incremental load appends rows to the live table: a NOT NULL column the source
  /// no longer has, or has made nullable, would refuse them (and every run after). Such
  /// columns drop their NOT NULL, each with its step; key columns keep it.
  std::vector<std::string> columns_to_relax(const schema::table_schema& live) {
    std::vector<std::string> out;
    if (settings.cursor_column.empty())
      return out;  // a full refresh creates the table's columns anew
    const auto rule = names();
    for (const auto& l : live.columns) {
      if (l.nullable || l.key)
        continue;
      const column* c = p.load_columns.find(l.name, rule);
      if (c != nullptr && !c->nullable)
        continue;
      out.push_back(l.name);
      p.drift.steps.push_back(
          {evolution_action::drop_not_null, l.name,
           c == nullptr ? fmt::format("column '{}' is no longer loaded from the source; its NOT "
                                      "NULL is dropped so new rows can leave it empty",
                                      l.name)
                        : fmt::format("column '{}' became nullable in the source", l.name),
           dialect.supports_in_place_type_change()
               ? fmt::format("dialect {}: in place", dialect.name())
               : fmt::format("dialect {}: rebuild and swap, rows kept", dialect.name()),
           l.type, l.type});
    }
    return out;
  }

  void gate_rebuild() {
    const evolution_step* first = nullptr;
    for (const auto& s : p.drift.steps)
      if (s.action == evolution_action::drop_and_recreate || s.action == evolution_action::rebuild)
        if (first == nullptr || s.action == evolution_action::drop_and_recreate)
          first = &s;
    if (first == nullptr)
      return;
    // Every column the rebuild changes, the unsafe ones first: one plan shows them all.
    std::string reasons = first->reason;
    for (const auto& s : p.drift.steps)
      if (&s != first && s.action == evolution_action::drop_and_recreate)
        reasons += ", " + s.reason;
    for (const auto& s : p.drift.steps)
      if (&s != first && s.action == evolution_action::rebuild)
        reasons += ", " + s.reason;
    const std::string by = fmt::format("type_change_rebuild = {} ({})",
                                       rule_name(settings.type_change_rebuild),
                                       settings.type_change_rebuild_from);
    switch (settings.type_change_rebuild) {
      case rebuild_rule::allow:
        break;
      case rebuild_rule::require_confirmation:
        if (!settings.rebuild_confirmed)
          fail("FLT-S006", fmt::format("{}, which rebuilds the table; {} needs "
                                       "--allow-type-change-rebuild to run it",
                                       reasons, by));
        break;
      case rebuild_rule::deny: {
        // What else would stop the rebuild: the key as it was, or the column's type (a
        // type flotilla.toml declares is the declaration's to restore, not the source's).
        const bool key = reasons.starts_with("the table's key changed");
        const bool pinned = std::any_of(
            settings.declared.begin(), settings.declared.end(),
            [&](const schema::column& c) { return schema::same_name(c.name, first->column, names()); });
        fail("FLT-S007", fmt::format("{}, which rebuilds the table; {} stops the table. To "
                                     "rebuild it, set type_change_rebuild = \"allow\" (or "
                                     "\"require_confirmation\" and run with "
                                     "--allow-type-change-rebuild) where it is set; or {}",
                                     reasons, by,
                                     key ? "restore the table's previous key (the source's "
                                           "primary key, or unique_key in flotilla.toml)"
                                     : pinned
                                         ? fmt::format("restore the type flotilla.toml declares "
                                                       "for column '{}' (its columns = {{ ... }}{})",
                                                       first->column, in_section())
                                         : std::string("restore the column's type at the source")));
        break;
      }
    }
    for (auto& s : p.drift.steps)
      if (s.action == evolution_action::drop_and_recreate || s.action == evolution_action::rebuild)
        s.decided_by += fmt::format("; {}{}", by,
                                    settings.rebuild_confirmed ? ", confirmed by the flag" : "");
  }

  /// Seed 001's drift-governance gate: only provably additive, granted changes proceed.
  void gate_governance() {
    if (!settings.governance_gate)
      return;
    // Every change the gate holds is named, the first one's column and proposal given: a
    // review of one would otherwise find the next only on the following run.
    const evolution_step* first = nullptr;
    std::string held;
    for (const auto& s : p.drift.steps) {
      const bool additive = s.action == evolution_action::add_columns;
      if (additive && settings.additive_granted)
        continue;
      if (!first)
        first = &s;
      held += fmt::format("{}{} ({})", held.empty() ? "" : "; also ", s.reason,
                          schema::to_string(s.action));
    }
    // The review is of the change that decides the table's fate: one that copies it anew
    // (a key change, an unsafe retype) over an added column or an ALTER in place.
    const auto weight = [](evolution_action a) {
      return a == evolution_action::drop_and_recreate ? 2 : a == evolution_action::rebuild ? 1 : 0;
    };
    for (const auto& s : p.drift.steps)
      if (first && weight(s.action) > weight(first->action) &&
          !(s.action == evolution_action::add_columns && settings.additive_granted))
        first = &s;
    if (first)
      fail("FLT-S008",
           fmt::format("require-review: {}; auto_apply_additive_drift applies only additive "
                       "changes, and only when [policy] grants holds \"schema_change.additive\""
                       "{}; review and apply {} by hand",
                       held,
                       settings.additive_granted ? "" : " (it does not here: add it to apply added "
                                                        "columns)",
                       held.find("; also ") == std::string::npos ? "it" : "them"),
           first->column);
  }

  void full_refresh() {
    p.load = load_kind::full_refresh;
    // The staging table's drop also clears a leftover of an earlier crash when the load
    // goes into the live table itself (dropped and re-created in the load's transaction).
    p.staging_sql = {dialect.drop_table(staging_of(target, dialect.max_identifier_bytes()))};
    const auto columns = schema::full_refresh_columns(live_after, p.load_columns, names());
    p.refresh_columns = columns;
    // A table not there yet is created in the load's own transaction (no staging table
    // to swap), and one the target empties in place is loaded there: the warehouse
    // writer does the same.
    if (dialect.replaces_in_place() || !live_after ||
        (settings.empties_in_place && dialect.keeps_live_table(*live_after, columns))) {
      for (auto& sql : dialect.refresh_in_place(target, live_after, columns))
        p.staging_sql.push_back(std::move(sql));
      return;
    }
    p.staging_sql.push_back(dialect.create_table(staging_of(target, dialect.max_identifier_bytes()), columns));
    p.swap_sql = dialect.swap_in(staging_of(target, dialect.max_identifier_bytes()), target);
  }
};

/// The source's primary key columns when every one of them is loaded; none otherwise.
std::vector<std::string> loaded_source_key(const schema::table_schema& source,
                                           const schema::table_schema& loaded,
                                           schema::name_rule rule) {
  std::vector<std::string> key;
  for (const auto& c : source.columns) {
    if (!c.key)
      continue;
    const schema::column* l = loaded.find(c.name, rule);
    if (l == nullptr)
      return {};
    key.push_back(l->name);
  }
  return key;
}

}  // namespace

table_plan plan_table(const schema::table_schema& source,
                      const std::optional<schema::table_schema>& live, target_state state,
                      const dialects::dialect& dialect, const dialects::table_ref& target,
                      const table_settings& settings) {
  table_plan p;
  p.target = target;
  planner pl{source, dialect, target, settings, p};
  if (live && state == target_state::present)
    pl.live_now = &*live;
  if (pl.nul_in_names())
    return p;
  pl.choose_columns();
  pl.check_loaded_columns();
  // A loaded column without a name: no statement can name it (FLT-S011, said above).
  if (p.error && std::any_of(p.load_columns.columns.begin(), p.load_columns.columns.end(),
                             [](const schema::column& c) { return c.name.empty(); }))
    return p;
  p.unique_key = settings.unique_key;
  // A key column named in another case than the source's (as cursor_column may be): the
  // loaded column's own spelling, where exactly one matches ignoring case.
  for (auto& k : p.unique_key)
    if (p.load_columns.find(k, dialect.names()) == nullptr) {
      const schema::column* only = nullptr;
      std::size_t matches = 0;
      for (const auto& c : p.load_columns.columns)
        if (schema::same_name(c.name, k, schema::name_rule::case_insensitive)) {
          only = &c;
          ++matches;
        }
      if (matches == 1)
        k = only->name;
    }
  if (p.unique_key.empty() && !settings.cursor_column.empty())
    p.unique_key = loaded_source_key(source, p.load_columns, dialect.names());
  else if (!settings.cursor_column.empty() && !p.unique_key.empty() &&
           p.unique_key != loaded_source_key(source, p.load_columns, dialect.names())) {
    // Rows merge on the unique_key, so the source's own key is not the table's: a row
    // whose unique_key changed would arrive as a second row of its source key. (A NULL in
    // a unique_key column matches nothing and is inserted, so it is no primary key either.)
    for (auto& c : p.load_columns.columns)
      c.key = false;
    p.key_may_repeat = true;
  }

  const bool incremental = !settings.cursor_column.empty();
  if (!target.schema.empty())
    p.schema_sql = dialect.create_schema(target.schema, target.catalog);
  if (state != target_state::present || !live) {
    // Absent or unreadable: (re)build from the source with a full refresh.
    p.shape_action = "create";
    p.reset_watermark = true;
    if (state == target_state::unreadable)  // rebuilt from scratch: nothing of it can be kept
      p.ddl.push_back(dialect.drop_table(target));
    if (p.error && p.load_columns.columns.empty()) {
      p.load = load_kind::full_refresh;
      return p;  // refused, and no column left to create the table with
    }
    pl.full_refresh();
    // A unique_key other than the source's own key may repeat in the source's rows: the
    // first load merges too (into the table it creates), so the table starts as every
    // later run keeps it, one row per key, the last one read (reads go in cursor order).
    if (incremental && state == target_state::absent && !settings.unique_key.empty() &&
        settings.unique_key != loaded_source_key(source, p.load_columns, dialect.names()))
      p.load = load_kind::merge;
    return p;
  }
  p.drift_checked = true;
  pl.live_after = live;
  pl.evolve(*live);
  if (p.error && p.error->code == "FLT-S008") {
    // The change held for review: the statements it would run, as planned without the gate.
    auto open = settings;
    open.governance_gate = false;
    const table_plan ungated = plan_table(source, live, state, dialect, target, open);
    // (Not one that copies the table anew: its DDL alone would leave the table empty. A
    // rebuild copies the rows within the target: its statements keep them.)
    for (const auto& s : ungated.drift.steps)
      if (s.column == p.error->column && !s.sql.empty() &&
          s.action != evolution_action::drop_and_recreate) {
        p.error->proposed_ddl = s.sql;
        break;
      }
    // "Apply it by hand" says what to apply: the statements the change would run. A change
    // that copies the table anew (drop and recreate) is no statement to apply by hand: its
    // DDL alone leaves the table empty, and an incremental table would then load only the
    // rows past its watermark. A run does it, the gate lifted for it. A rebuild's
    // statements copy the rows within the target: they are applied as they are.
    bool reloads = false;
    std::string statements;
    std::set<std::string> said;  // a rebuild's statements are shared by its steps: once
    for (const auto& s : ungated.drift.steps) {
      reloads = reloads || s.action == evolution_action::drop_and_recreate;
      if (!said.insert(s.sql).second)
        continue;
      if (s.sql.empty() || (s.action == evolution_action::add_columns && settings.additive_granted))
        continue;
      std::string_view sql = s.sql;  // one separator between statements, not ";;"
      while (!sql.empty() && (sql.back() == ';' || sql.back() == '\n' || sql.back() == ' '))
        sql.remove_suffix(1);
      statements += (statements.empty() ? "" : "; ") + std::string(sql);
    }
    auto& reason = p.error->reason;
    if (reloads) {
      const auto tail = reason.rfind("; review and apply");
      if (tail != std::string::npos)
        reason.erase(tail);
      reason += "; the change copies the table anew, which only a run does (its statements "
                "alone would leave the table empty, and an incremental table would load only "
                "the rows past its watermark): let one run through with [resilience] "
                "auto_apply_additive_drift = false, or restore the source's column";
    } else if (!statements.empty()) {
      reason += fmt::format(" (the statements Flotilla would run: {})", statements);
    }
  }
  if (p.error && incremental) {
    // Refused, but the run JSON still says how the table loads.
    p.load = p.unique_key.empty() && settings.has_watermark ? load_kind::incremental
             : !p.unique_key.empty() && !settings.foreign_rows ? load_kind::merge
                                                               : load_kind::full_refresh;
    return p;
  }
  if (p.error || p.shape_action == "recreate")
    return p;
  if (incremental && settings.has_watermark) {
    p.load = p.unique_key.empty() ? load_kind::incremental : load_kind::merge;
    // Columns named once each, in order, as the warnings list them ("'a', 'b'").
    struct name_list {
      std::string text;
      std::set<std::string> named;
      void add(const std::string& column) {
        if (named.insert(column).second)
          text += fmt::format("{}'{}'", text.empty() ? "" : ", ", column);
      }
    };
    // A column the live table gains: the rows loaded before it hold NULL there, while the
    // source's hold their values (a column added with a default has it in every row,
    // seed 002). Merged on a key, every row is read again and gets them.
    name_list added_columns;
    // A column now text whose rows the target converted in place (a boolean, a decimal,
    // a float): the target's text for a value need not be the source's ('true' where
    // a SQLite source, which re-created the table to retype it, holds '1'; '1.500' for
    // '1.5'). Merged on a key, every row is read again and holds the source's text.
    // Integers have one text everywhere.
    name_list retyped_columns;
    const auto to_text = [](const schema::portable_type& from, const schema::portable_type& to) {
      return !schema::is_string(from.kind) && schema::is_string(to.kind) &&
             from.kind != schema::type_kind::smallint && from.kind != schema::type_kind::int32 &&
             from.kind != schema::type_kind::bigint;
    };
    for (const auto& s : p.drift.steps) {
      if (s.action == evolution_action::add_columns)
        added_columns.add(s.column);
      else if (s.from && to_text(*s.from, s.to) &&
               (s.action == evolution_action::widen ||
                s.action == evolution_action::alter_column_types ||
                s.action == evolution_action::rebuild))
        retyped_columns.add(s.column);
    }
    // Added, or widened, by an earlier run whose load then failed, or was killed, after
    // its ALTER: the columns (and types) the watermark's load wrote say so all the same.
    if (settings.watermark_columns)
      for (const auto& c : p.load_columns.columns) {
        const auto& then = *settings.watermark_columns;
        const auto at = std::find_if(then.begin(), then.end(), [&](const std::string& w) {
          return schema::same_name(w, c.name, dialect.names());
        });
        if (at == then.end()) {
          added_columns.add(c.name);
        } else if (settings.watermark_column_types) {
          const auto type = schema::parse_type(
              (*settings.watermark_column_types)[static_cast<std::size_t>(at - then.begin())]);
          if (type && to_text(*type, c.type))
            retyped_columns.add(c.name);
        }
      }
    const std::string& added = added_columns.text;
    const std::string& retyped = retyped_columns.text;
    if (!retyped.empty() && p.load == load_kind::merge) {
      p.reset_watermark = true;
      p.warnings.push_back(fmt::format(
          "column(s) {} now text: the target converted the rows loaded before with its own "
          "cast, whose text for a value may differ from the source's ('true' for 1, '1.500' "
          "for 1.5), so this run reads every row again, merged on the table's key, and each "
          "holds the text the source gives it",
          retyped));
    } else if (!retyped.empty()) {
      p.warnings.push_back(fmt::format(
          "column(s) {} now text: the rows loaded before hold the target's text for their "
          "values ('true' for 1, '1.500' for 1.5), which may differ from the source's; the "
          "table has no key to read every row again by without repeating rows. To match "
          "them, declare the table's unique_key, or run `flotilla run --full-refresh` for it",
          retyped));
    }
    if (!added.empty() && p.load == load_kind::merge) {
      p.reset_watermark = true;
      p.warnings.push_back(fmt::format(
          "column(s) {} added: the rows loaded before had no value for them, so this run "
          "reads every row again, merged on the table's key, and each gets the value the "
          "source holds (a default the column was added with, for one)",
          added));
    } else if (!added.empty()) {
      p.warnings.push_back(fmt::format(
          "column(s) {} added: the rows loaded before keep NULL there, whatever the source "
          "holds for them (a default the column was added with, for one); the table has no "
          "key to read every row again by without repeating rows. To fill them, declare "
          "the table's unique_key, or run `flotilla run --full-refresh` for it",
          added));
    }
  } else if (incremental && !p.unique_key.empty() && !settings.foreign_rows)
    p.load = load_kind::merge;  // first run of an incremental table into an existing table
  else {
    pl.full_refresh();
    // A full refresh by a unique_key that may repeat in the rows read loads as a merge
    // that replaces every live row (the engine's replace_rows): into the live table, in
    // the load's transaction, without a staging table to swap in. Its statements, as an
    // incremental merge's, are the sink's; none of the swap's is shown.
    if (!p.unique_key.empty() && (!incremental || p.key_may_repeat)) {
      p.staging_sql.clear();
      p.swap_sql.clear();
    }
    // Columns the source no longer has (dropped, renamed) stay, never dropped (seed
    // 000), but a full refresh loads the source alone: their values are gone. Said, not
    // silent, on every copy while they stay.
    for (const auto& l : live->columns)
      if (p.load_columns.find(l.name, dialect.names()) == nullptr)
        p.warnings.push_back(fmt::format(
            "column '{}' is in the live table only ({}): the full refresh keeps it, with no "
            "value of the source in any row (NULL, or the column's default where the target "
            "table gives it one); drop it from the target table if it is not wanted",
            l.name,
            source.find(l.name, dialect.names()) != nullptr
                ? (settings.enforced ? "the source has it, and contract = enforced does not "
                                       "declare it, so it is not loaded"
                                     : "the source has it, and it is not loaded")
                : "the source does not have it, or no longer has it"));
  }
  return p;
}

std::string describe_step(const schema::evolution_step& s, const dialects::dialect& d) {
  const std::string to = schema::to_string(s.to);
  switch (s.action) {
    case evolution_action::add_columns:
      return fmt::format("add column  {} {} -> {}", s.column, to, d.physical_type(s.to));
    // Named as the step is (`step` in JSON, the run's text, the events): `widen` for a
    // declared or auto_widen widening, `alter_column_types` for a source retype.
    case evolution_action::widen:
      return fmt::format("widen  {} {} -> {} ({})  in place", s.column,
                         s.from ? schema::to_string(*s.from) : "", to, d.physical_type(s.to));
    case evolution_action::alter_column_types:
      return fmt::format("alter column type  {} {} -> {} ({})  in place", s.column,
                         s.from ? schema::to_string(*s.from) : "", to, d.physical_type(s.to));
    case evolution_action::rebuild:
      return fmt::format("rebuild  {} {} -> {} ({})  rebuild and swap", s.column,
                         s.from ? schema::to_string(*s.from) : "", to, d.physical_type(s.to));
    case evolution_action::drop_and_recreate: {
      std::string line = fmt::format("drop and recreate  {}", s.reason);
      for (const auto& a : s.also)
        line += fmt::format("; also {}", a);
      return line;
    }
    case evolution_action::drop_not_null:
      return fmt::format("drop not null  {}  {}", s.column, s.decided_by);
  }
  return s.reason;
}

}  // namespace flotilla::engine
