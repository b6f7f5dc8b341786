#include "cdc/outcome.hpp"

#include <algorithm>
#include <cctype>
#include <memory>

#include <fmt/format.h>

#include "dialects/widening.hpp"
#include "schema/calendar.hpp"
#include "schema/compat.hpp"

namespace flotilla::cdc {
namespace {

using schema::portable_type;
using schema::type_kind;
namespace pb = storage::pb;

// ---- small helpers -------------------------------------------------------------------

std::string type_text(const portable_type& t) { return schema::to_string(t); }

/// The database's default collation, as the capture or a DDL names it.
bool database_collation(std::string_view c) {
  return c.empty() || c == "default" || c == "pg_catalog.default" ||
         c == "pg_catalog.\"default\"" || c == "\"default\"";
}

/// A collation a target without PostgreSQL's collations keeps as it is: the default, or
/// byte order (C, POSIX), which DuckDB's and SQLite's text comparisons are.
bool default_collation(std::string_view c) {
  return database_collation(c) || c == "C" || c == "POSIX";
}

std::string key_list(const dialects::dialect& d, const std::vector<std::string>& key) {
  std::string out;
  for (const auto& k : key)
    out += (out.empty() ? "" : ", ") + d.quote(k);
  return out;
}

std::string plain_key_list(const std::vector<std::string>& key) {
  std::string out;
  for (const auto& k : key)
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::string join_ddl(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty())
      out += '\n';
    if (!l.starts_with("--")) {
      out += l;
      continue;
    }
    // A comment runs to the end of its line (PostgreSQL's and DuckDB's lexers end it at
    // \n or \r): a name in it holding a line break would end the comment, and the rest
    // of the name would run as SQL when the proposal is applied. Shown escaped instead.
    for (const char c : l) {
      if (c == '\n')
        out += "\\x0a";
      else if (c == '\r')
        out += "\\x0d";
      else
        out += c;
    }
  }
  return out;
}

/// `DO $tag$ <body> $tag$` with a tag that does not occur in the body, so no name inside
/// can end the block early.
std::string do_block(const std::string& body) {
  std::string tag = "$flotilla$";
  for (int i = 1; body.find(tag) != std::string::npos; ++i)
    tag = fmt::format("$flotilla{}$", i);
  return fmt::format("DO {0} {1} {0}", tag, body);
}

/// A statement line of a proposal: every statement ends with ';'.
std::string stmt(std::string s) { return s + ";"; }

std::unique_ptr<dialects::dialect> dialect_of(target_kind k) {
  switch (k) {
    case target_kind::duckdb: return std::move(*dialects::make_dialect("duckdb"));
    case target_kind::postgres: return std::move(*dialects::make_dialect("postgres"));
    case target_kind::kafka:
    case target_kind::pubsub: return nullptr;
  }
  return nullptr;
}

std::string engine_name(target_kind k) {
  switch (k) {
    case target_kind::duckdb: return "DuckDB";
    case target_kind::postgres: return "PostgreSQL";
    case target_kind::kafka: return "Kafka";
    case target_kind::pubsub: return "Pub/Sub";
  }
  return "the target";
}

// ---- the type change classes of seed 002 ---------------------------------------------

enum class type_change {
  same,        ///< nothing changed
  widening,    ///< larger integer, float -> double, longer varchar, varchar -> text
  shortening,  ///< shorter variable-length column (text -> varchar(n) too)
  decimal,     ///< decimal precision or scale changed
  other,       ///< anything else: the stream stops
};

type_change classify(const portable_type& from, const portable_type& to) {
  if (from == to)
    return type_change::same;
  if (dialects::is_integer_widening(from, to) || dialects::is_float_widening(from, to) ||
      dialects::is_varchar_widening(from, to))
    return type_change::widening;
  if ((from.kind == type_kind::varchar && to.kind == type_kind::varchar && to.length < from.length) ||
      (from.kind == type_kind::text && to.kind == type_kind::varchar))
    return type_change::shortening;
  if (from.kind == type_kind::decimal && to.kind == type_kind::decimal)
    return type_change::decimal;
  return type_change::other;
}

/// The source table ("schema.table") as a PostgreSQL statement names it, each part
/// quoted: the statements a proposal suggests running at the source are pasted as they
/// are, so no name may end them early.
std::string quote(std::string_view part) {
  std::string out = "\"";
  for (char c : part) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
}

std::string source_table_sql(std::string_view name) {
  const auto dot = name.find('.');
  if (dot == std::string_view::npos)
    return quote(name);
  return quote(name.substr(0, dot)) + "." + quote(name.substr(dot + 1));
}

// ---- the builder of one decision ----------------------------------------------------

class decider {
 public:
  decider(const captured_table& before, const source_change& change, const target_info& target)
      : before_(before), change_(change), target_(target), d_(dialect_of(target.kind)) {}

  outcome run();

 private:
  // outcomes
  outcome apply(std::vector<std::string> statements, std::string note) const {
    return applied{std::move(statements), std::move(note), std::nullopt};
  }
  outcome stop(std::string_view code, std::string reason, std::string remedy) const {
    stopped s;
    s.code = std::string(code);
    s.message = stop_message(before_.name, reason);
    s.reason = std::move(reason);
    s.remedy = std::move(remedy);
    return s;
  }
  outcome hold(std::string kind, std::string reason, std::string proposed,
               std::string consequence, bool resync) const {
    pb::HoldRecord h;
    h.set_target(target_.name);
    h.set_table(before_.store_key());
    h.set_state(pb::HOLD_STATE_AWAITING_REVIEW);
    h.set_kind(std::move(kind));
    h.set_source_change(source_change_text(before_, change_));
    h.set_reason(std::move(reason));
    h.set_proposed_ddl(std::move(proposed));
    h.set_data_consequence(resync ? fmt::format("{} {}", requires_resync_text, consequence)
                                  : std::move(consequence));
    h.set_requires_resync(resync);
    h.set_position(change_.position);
    return held{std::move(h)};
  }
  outcome reload_stop(std::string_view code, std::string reason) const {
    return stop(code, std::move(reason),
                "Reload the stream (flotilla stream --reload) to copy every table again from a "
                "fresh snapshot; next time prefer a change the stream can carry");
  }

  [[nodiscard]] bool events() const { return d_ == nullptr; }
  [[nodiscard]] std::string table() const { return d_->qualified(target_.table); }
  [[nodiscard]] std::string alter(std::string_view rest) const {
    return fmt::format("ALTER TABLE {} {}", table(), rest);
  }
  [[nodiscard]] schema::name_rule names() const {
    return d_ ? d_->names() : schema::name_rule::case_sensitive;
  }
  /// Another captured column (not `self`) whose name matches `name` on the target.
  [[nodiscard]] const captured_column* collision(std::string_view name, std::string_view self) const {
    for (const auto& c : before_.columns)
      if (c.name != self && c.name != name && schema::same_name(c.name, name, names()))
        return &c;
    return nullptr;
  }

  std::optional<outcome> check_shape() const;
  std::optional<outcome> hidden_row_id(const std::string& name) const;
  outcome on(const add_column& c) const;
  outcome on(const drop_column& c) const;
  outcome on(const rename_column& c) const;
  outcome on(const alter_type& c) const;
  outcome on(const set_nullability& c) const;
  outcome on(const set_default& c) const;
  outcome on(const column_property_change& c) const;
  outcome on(const key_change& c) const;
  outcome on(const index_change& c) const;
  outcome on(const drop_table& c) const;
  outcome on(const rename_table& c) const;
  outcome on(const partition_change& c) const;
  outcome on(const truncate_table& c) const;
  outcome on(const new_table& c) const;

  outcome unknown_column(std::string_view column) const {
    return stop(code_unknown_column,
                fmt::format("the change names column '{}', which the captured shape of {} does "
                            "not have",
                            column, before_.name),
                "Reload the stream (flotilla stream --reload) so the capture reads the table's "
                "shape again");
  }
  outcome key_change_hold(std::string detail, const std::vector<std::string>& new_key) const;

  const captured_table& before_;
  const source_change& change_;
  const target_info& target_;
  std::unique_ptr<dialects::dialect> d_;
};

outcome decider::run() {
  // Table-level changes that stop whatever the target looks like come first; a new
  // table has no target table to compare.
  if (std::holds_alternative<new_table>(change_.change) ||
      std::holds_alternative<drop_table>(change_.change) ||
      std::holds_alternative<rename_table>(change_.change) ||
      std::holds_alternative<partition_change>(change_.change))
    return std::visit([this](const auto& c) { return on(c); }, change_.change);
  if (auto s = check_shape())
    return std::move(*s);
  return std::visit([this](const auto& c) { return on(c); }, change_.change);
}

/// Whether `ddl` names `name` as an identifier, quoted or not (ASCII case folded).
bool names_identifier(std::string_view ddl, std::string_view name) {
  if (ddl.empty() || name.empty())
    return false;
  const std::string text = schema::fold_name(ddl, schema::name_rule::case_insensitive);
  const std::string n = schema::fold_name(name, schema::name_rule::case_insensitive);
  const auto part = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '$';
  };
  for (auto at = text.find(n); at != std::string::npos; at = text.find(n, at + 1)) {
    const bool open = at == 0 || !part(text[at - 1]);
    const bool close = at + n.size() == text.size() || !part(text[at + n.size()]);
    if (open && close)
      return true;
  }
  return false;
}

namespace {

/// `live` holds fewer values than `want` of the same kind (integers, decimals, floats,
/// strings, timestamps): smallint for integer, varchar(20) for text.
bool narrower_of_kind(const schema::portable_type& live, const schema::portable_type& want) {
  using k = schema::type_kind;
  const auto kind_of = [](k t) {
    switch (t) {
      case k::smallint:
      case k::int32:
      case k::bigint:
        return 1;
      case k::float32:
      case k::float64:
        return 2;
      case k::varchar:
      case k::text:
        return 3;
      case k::timestamp_ntz:
      case k::timestamp_tz:
        return 4;
      default:
        return 10 + static_cast<int>(t);
    }
  };
  return kind_of(live.kind) == kind_of(want.kind) && !schema::can_read_as(want, live);
}

}  // namespace

std::optional<outcome> decider::check_shape() const {
  if (events() || !target_.actual)
    return std::nullopt;
  const auto& actual = *target_.actual;
  const auto remedy = std::string(
      "Undo the manual change on the target table, then start the stream again");
  if (actual.columns.empty())
    return stop(code_target_shape,
                fmt::format("target table {} on target '{}' does not exist", table(), target_.name),
                "Create the target table again (flotilla stream --reload copies it), then start "
                "the stream");
  std::vector<std::string> problems;
  for (const auto& c : before_.columns) {
    const auto* live = actual.find(c.name, names());
    if (!live) {
      problems.push_back(fmt::format("column {} is missing", d_->quote(c.name)));
      continue;
    }
    const auto want = d_->canonical(c.type);
    // A column a review's edited DDL names has the type that DDL gave it (seed 003: "you
    // want the target to differ, for example a wider type than the proposal"): the
    // user's choice, unless it is a narrower type of the same kind, which would cut or
    // refuse values (numeric where the proposal said text is taken, since 2026-12-08;
    // before, only a type that reads the proposal's).
    if (live->type != want &&
        !(names_identifier(target_.edited_ddl, c.name) && !narrower_of_kind(live->type, want)))
      problems.push_back(fmt::format("column {} is {}, expected {}", d_->quote(c.name),
                                     d_->physical_type(live->type), d_->physical_type(want)));
  }
  for (const auto& live : actual.columns) {
    if (live.name.starts_with("__flotilla"))
      continue;  // the stream's own bookkeeping columns
    // A column a review's edited DDL added (seed 003: "you want the target to differ"):
    // the user's, kept; the stream's rows leave it to its default.
    if (names_identifier(target_.edited_ddl, live.name))
      continue;
    if (!before_.find(live.name) &&
        std::none_of(before_.columns.begin(), before_.columns.end(), [&](const auto& c) {
          return schema::same_name(c.name, live.name, names());
        }))
      problems.push_back(fmt::format("column {} is not expected", d_->quote(live.name)));
  }
  if (problems.empty())
    return std::nullopt;
  std::string list;
  for (const auto& p : problems)
    list += (list.empty() ? "" : "; ") + p;
  return stop(code_target_shape,
              fmt::format("target table {} on target '{}' does not have the shape the stream "
                          "expects before {}: {}",
                          table(), target_.name, describe(before_, change_.change), list),
              remedy);
}

// ---- columns --------------------------------------------------------------------------

std::optional<outcome> decider::hidden_row_id(const std::string& name) const {
  // Names Flotilla keeps for its own columns (a merge's sequence column): refused as
  // `plan` refuses them (FLT-S013), on every target a copy of the table reaches.
  {
    std::string lower = name;
    for (auto& ch : lower)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower.starts_with("__flotilla_") && !events())
      return stop(code_target_shape,
                  fmt::format("column '{}' has a name Flotilla keeps for its own columns "
                              "(names starting __flotilla_): a load of the table into target "
                              "'{}' would take it for its own",
                              name, target_.name),
                  "Name the column otherwise at the source; then start the stream again");
  }
  if (target_.kind != target_kind::duckdb || !hides_duckdb_row_id(name) ||
      std::any_of(before_.columns.begin(), before_.columns.end(),
                  [](const captured_column& c) { return c.key; }))
    return std::nullopt;
  return stop(code_target_shape,
              fmt::format("column '{}' of a table without a primary key would hide the row id "
                          "a DuckDB target matches such a table's rows by: its updates and "
                          "deletes would miss rows or take the wrong ones",
                          name),
              "Give the table a primary key at the source, or name the column otherwise; then "
              "reload the stream (flotilla stream --reload), which copies every table again");
}

outcome decider::on(const add_column& a) const {
  const auto& c = a.column;
  if (auto stop = hidden_row_id(c.name))
    return *stop;
  const bool has_default = !c.default_expr.empty();
  if (c.generated) {
    // PostgreSQL 15's logical replication sends no generated column: a reload would copy
    // the values once and then stream NULLs, so `stream` refuses such a table outright.
    return stop(code_volatile_default,
                fmt::format("column '{}' was added as a generated column ({}): PostgreSQL's "
                            "logical replication does not send a generated column's values, "
                            "so the stream cannot carry this table with it",
                            c.name, c.default_expr.empty() ? "computed" : c.default_expr),
                fmt::format("Make it a plain column at the source (ALTER TABLE {} ALTER COLUMN "
                            "{} DROP EXPRESSION), or leave the table out of the stream (exclude "
                            "it in flotilla.toml); then reload the stream (flotilla stream "
                            "--reload)",
                            source_table_sql(before_.name), quote(c.name)));
  }
  if ((has_default && !c.default_constant) || c.identity) {
    const std::string what = c.identity ? std::string("as an identity column")
                                        : fmt::format("with default {}", c.default_expr);
    return stop(code_volatile_default,
                fmt::format("column '{}' was added {}, which is not a constant: its per-row "
                            "values exist only in the physical rewrite. Use a constant literal "
                            "default, add the column without a default and fill it with UPDATE, "
                            "or re-seed the table (flotilla stream --reload)",
                            c.name, what),
                "Reload the stream (flotilla stream --reload) to copy every table again; next "
                "time add the column with a constant default");
  }
  if (before_.find(c.name))
    return unknown_column(c.name);  // the capture lost track of the shape
  if (events())
    return apply({}, fmt::format("nothing to apply: the next events of {} carry column {}",
                                 before_.name, c.name));

  if (const auto* other = collision(c.name, "")) {
    return hold("add_column",
                fmt::format("the new column '{}' collides with column '{}' on target '{}': {} "
                            "matches column names case-insensitively",
                            c.name, other->name, target_.name, engine_name(target_.kind)),
                join_ddl({fmt::format("-- The target name {} is taken by {} ({} matches names "
                                      "case-insensitively), and a copy of the table needs both.",
                                      d_->quote(c.name), d_->quote(other->name),
                                      engine_name(target_.kind)),
                          "-- Rename one of the two columns at the source, for example:",
                          fmt::format("--   ALTER TABLE {} RENAME COLUMN {} TO {};",
                                      source_table_sql(before_.name), d_->quote(c.name), d_->quote(c.name + "_2")),
                          "-- then resync this review, which copies the table afresh; or remove "
                          "it, leaving the target table as it is.",
                          std::string(no_target_ddl)}),
                "The source's two columns cannot both be copied to this target; once one is "
                "renamed at the source, a resync copies the table afresh.",
                true);
  }

  std::string collate;
  // PostgreSQL keeps the source column's collation, C and POSIX too (seed 002): they
  // differ from a database default in another locale.
  if (target_.kind == target_kind::postgres ? !database_collation(c.collation)
                                            : !default_collation(c.collation)) {
    if (target_.kind == target_kind::postgres) {
      collate = " COLLATE " + d_->quote(c.collation);
    } else {
      return hold(
          "add_column",
          fmt::format("column '{}' is in collation \"{}\", which {} does not support", c.name,
                      c.collation, engine_name(target_.kind)),
          join_ddl({fmt::format("-- The source column is in collation \"{}\", which {} does not "
                                "support: add it without a collation, or in one of your choice, "
                                "before applying.",
                                c.collation, engine_name(target_.kind)),
                    "-- " + stmt(alter(fmt::format("ADD COLUMN {} {}", d_->quote(c.name),
                                                   d_->physical_type(c.type))))}),
          "Existing rows get the column's value as the source has it; the table resumes exactly "
          "at the change.",
          false);
    }
  }

  // A decimal wider than the target's widest (DuckDB's 38 digits): no exact column for it,
  // held as a widened one is (it would be made DECIMAL(38,s), and its first wider value
  // would stop the stream with the target's bare refusal).
  if (c.type.kind == schema::type_kind::decimal) {
    const auto to_t = d_->canonical(c.type);
    if (to_t.precision < c.type.precision || to_t.scale < c.type.scale)
      return hold(
          "add_column",
          fmt::format("column '{}' was added as {}: {} holds decimals of {} digits at most, so "
                      "it has no exact type there",
                      c.name, type_text(c.type), engine_name(target_.kind), to_t.precision),
          join_ddl({fmt::format("-- {} has no decimal of {} digits: {} would round or refuse "
                                "values the source takes.",
                                engine_name(target_.kind), c.type.precision,
                                d_->physical_type(to_t)),
                    "-- Edit the DDL, for example to keep every value as text:",
                    fmt::format("--   {};",
                                alter(fmt::format(
                                    "ADD COLUMN {} VARCHAR{}", d_->quote(c.name),
                                    has_default && c.default_value
                                        ? " DEFAULT " + d_->literal(*c.default_value)
                                        : std::string()))),
                    "-- or remove the table from the stream."}),
          "The column's values keep every digit only in a type the edited DDL gives it; the "
          "table then resumes exactly at the change, replaying its kept changes.",
          false);
  }

  const std::string ty = d_->physical_type(c.type);
  std::vector<std::string> out;
  const bool with_value = has_default && c.default_value.has_value();
  std::string value_sql = with_value ? d_->literal(*c.default_value) : std::string();
  // PostgreSQL's "0044-03-15 BC": the ISO year, which DuckDB reads as such (it read the
  // text as 44 AD, and refused a BC timestamp), as the rows' values are given.
  if (with_value && target_.kind != target_kind::postgres &&
      (c.type.kind == schema::type_kind::date || c.type.kind == schema::type_kind::timestamp_ntz ||
       c.type.kind == schema::type_kind::timestamp_tz) &&
      c.default_value->ends_with(" BC"))
    if (auto iso = schema::iso_from_pg_era(*c.default_value))
      value_sql = d_->literal(*iso);
  // PostgreSQL's bytea text ("\\xdead"): DuckDB reads a blob's text a byte per "\\xHH".
  if (with_value && c.type.kind == schema::type_kind::bytes &&
      target_.kind == target_kind::duckdb && c.default_value->starts_with("\\x") &&
      c.default_value->size() % 2 == 0 &&
      std::all_of(c.default_value->begin() + 2, c.default_value->end(),
                  [](unsigned char ch) { return std::isxdigit(ch) != 0; })) {
    std::string bytes;
    for (std::size_t i = 2; i + 1 < c.default_value->size(); i += 2)
      bytes += "\\x" + c.default_value->substr(i, 2);
    value_sql = d_->literal(bytes);
  }
  const std::string def =
      with_value ? fmt::format(" DEFAULT CAST({} AS {})", value_sql, ty) : "";
  if (with_value && !c.nullable && target_.kind == target_kind::postgres) {
    out.push_back(alter(fmt::format("ADD COLUMN {} {}{} NOT NULL{}", d_->quote(c.name), ty,
                                    collate, def)));
    out.push_back(alter(fmt::format("ALTER COLUMN {} DROP DEFAULT", d_->quote(c.name))));
  } else {
    // DuckDB cannot add a column with a constraint: add it, then constrain it.
    out.push_back(alter(fmt::format("ADD COLUMN {} {}{}{}", d_->quote(c.name), ty, collate, def)));
    if (with_value)
      out.push_back(alter(fmt::format("ALTER COLUMN {} DROP DEFAULT", d_->quote(c.name))));
    if (!c.nullable)
      out.push_back(alter(fmt::format("ALTER COLUMN {} SET NOT NULL", d_->quote(c.name))));
  }
  return apply(std::move(out),
               with_value ? fmt::format("existing rows get the default {} in column {}",
                                        *c.default_value, c.name)
                          : fmt::format("existing rows get NULL in column {}", c.name));
}

outcome decider::on(const drop_column& c) const {
  const auto* col = before_.find(c.column);
  if (!col)
    return unknown_column(c.column);
  if (!col->key) {
    if (events())
      return apply({}, fmt::format("nothing to apply: the next events of {} no longer carry "
                                   "column {}",
                                   before_.name, c.column));
    return apply({alter(fmt::format("DROP COLUMN {}", d_->quote(c.column)))},
                 fmt::format("the values of column {} are dropped on the target", c.column));
  }
  const auto after = apply_change(before_, c);
  const auto new_key = after.to_schema().key();
  const std::string reason = fmt::format(
      "column '{}' is part of the row key of {}, by which every change is applied: dropping it "
      "changes the key",
      c.column, before_.name);
  const std::string consequence = fmt::format(
      "Values in the dropped column are discarded on the target. The row key changes{}, so the "
      "table needs a fresh copy before it rejoins the stream.",
      new_key.empty() ? " to none" : fmt::format(" to ({})", plain_key_list(new_key)));
  if (events())
    return hold("drop_column", reason, std::string(no_target_ddl), consequence, true);
  std::vector<std::string> lines{
      fmt::format("-- {} is part of the row key: the key constraint must be dropped and created "
                  "again first.",
                  d_->quote(c.column))};
  if (target_.kind == target_kind::postgres) {
    lines.push_back(new_key.empty()
                        ? "-- PostgreSQL drops the primary key with its column; the source table "
                          "has no row key now, and the target follows it."
                        : "-- PostgreSQL drops the primary key with its column; create it again "
                          "over the remaining key columns.");
    lines.push_back(stmt(alter(fmt::format("DROP COLUMN {}", d_->quote(c.column)))));
    if (!new_key.empty())
      lines.push_back(stmt(alter(fmt::format("ADD PRIMARY KEY ({})", key_list(*d_, new_key)))));
  } else {
    lines.push_back("-- DuckDB cannot drop a key column or a key constraint in place: the table "
                    "is rebuilt without the column" +
                    (new_key.empty() ? std::string(".")
                                     : fmt::format(", keyed by ({}).", key_list(*d_, new_key))));
    for (auto& s : d_->rebuild_and_swap(target_.table, before_.to_schema(), after.to_schema()))
      lines.push_back(stmt(std::move(s)));
  }
  return hold("drop_column", reason, join_ddl(lines), consequence, true);
}

outcome decider::on(const rename_column& c) const {
  const auto* col = before_.find(c.from);
  if (!col)
    return unknown_column(c.from);
  if (auto stop = hidden_row_id(c.to))
    return *stop;
  const auto* clash = events() ? nullptr : collision(c.to, c.from);
  if (col->key) {
    const std::string reason = fmt::format(
        "column '{}' is part of the row key of {}, by which every change is applied: a key "
        "column is renamed only after review",
        c.from, before_.name);
    const std::string consequence =
        "The column keeps its values under its new name. The table resumes exactly at the "
        "change, replaying its kept changes.";
    if (events())
      return hold("rename_column", reason, std::string(no_target_ddl), consequence, false);
    if (!clash)
      return hold("rename_column", reason,
                  stmt(alter(fmt::format("RENAME COLUMN {} TO {}", d_->quote(c.from),
                                         d_->quote(c.to)))),
                  consequence, false);
  }
  if (events())
    return apply({}, fmt::format("nothing to apply: the next events of {} carry column {} as {}",
                                 before_.name, c.from, c.to));
  if (clash)
    return hold("rename_column",
                fmt::format("the new name '{}' collides with column '{}' on target '{}': {} "
                            "matches column names case-insensitively",
                            c.to, clash->name, target_.name, engine_name(target_.kind)),
                join_ddl({fmt::format("-- The target name {} is taken by {} ({} matches names "
                                      "case-insensitively), and a copy of the table needs both.",
                                      d_->quote(c.to), d_->quote(clash->name),
                                      engine_name(target_.kind)),
                          "-- Rename the column at the source to a name the target can hold, "
                          "for example:",
                          fmt::format("--   ALTER TABLE {} RENAME COLUMN {} TO {};",
                                      source_table_sql(before_.name), d_->quote(c.to), d_->quote(c.to + "_2")),
                          "-- then resync this review, which copies the table afresh; or remove "
                          "it, leaving the target table as it is.",
                          std::string(no_target_ddl)}),
                "The source's two columns cannot both be copied to this target; once one is "
                "renamed at the source, a resync copies the table afresh.",
                true);
  return apply({alter(fmt::format("RENAME COLUMN {} TO {}", d_->quote(c.from), d_->quote(c.to)))},
               fmt::format("column {} renamed to {} on the target", c.from, c.to));
}

outcome decider::on(const alter_type& c) const {
  const auto* col = before_.find(c.column);
  if (!col)
    return unknown_column(c.column);
  const auto cls = classify(col->type, c.to);
  // An unbounded numeric is carried as text: said as the source names it.
  const bool as_text = c.to.kind == schema::type_kind::text && !c.to_source.empty() &&
                       c.to_source.starts_with("numeric");
  const std::string change_words = fmt::format(
      "column '{}' changed type {} -> {}", c.column, type_text(col->type),
      as_text ? fmt::format("{} (a numeric without precision, which the stream carries as text)",
                            c.to_source)
              : type_text(c.to));
  // Fewer fractional-second digits: PostgreSQL rewrote every row with its value rounded,
  // and no change event carries the rounded values.
  if (c.rounds)
    return reload_stop(
        code_type_change,
        fmt::format("column '{}' changed type {} -> {}: PostgreSQL rounded every stored value "
                    "to the fewer fractional-second digits, and the rounded values are not in "
                    "the change stream, so the target would keep the old ones",
                    c.column, c.from_source.empty() ? type_text(col->type) : c.from_source,
                    c.to_source.empty() ? type_text(c.to) : c.to_source));
  if (!c.rewrites.empty()) {
    const std::string from = c.from_source.empty() ? type_text(col->type) : c.from_source;
    const std::string to = c.to_source.empty() ? type_text(c.to) : c.to_source;
    return reload_stop(
        code_type_change,
        fmt::format("column '{}' {}: {}, and the rewritten values are not in the change stream, "
                    "so the target would keep the old ones",
                    c.column,
                    from == to ? fmt::format("(type {})", from)
                               : fmt::format("changed type {} -> {}", from, to),
                    c.rewrites));
  }
  if (cls == type_change::same)
    return apply({}, fmt::format("nothing to apply: column {} keeps type {}", c.column,
                                 type_text(c.to)));
  // A decimal given more precision than any: an unbounded numeric, which the stream
  // carries as text. Seed 002's "more decimal precision": no target has that type to
  // match it exactly, so it is held, with the column as text proposed (each value kept as
  // the text PostgreSQL gives it); an event target carries the values as text from now on.
  if (as_text && col->type.kind == schema::type_kind::decimal && !col->key) {
    if (events())
      return apply({}, fmt::format("nothing to apply: the next events of {} carry column {} as "
                                   "text",
                                   before_.name, c.column));
    const std::string text_type = d_->physical_type(schema::portable_type::of(schema::type_kind::text));
    return hold(
        "alter_type",
        target_.kind == target_kind::postgres
            ? fmt::format("{}: the stream carries a numeric without precision as text (its "
                          "types have none without a precision), so the target column would "
                          "become text where it held numbers; that is not done by itself",
                          change_words)
            : fmt::format("{}: {} has no decimal without a precision that keeps every value "
                          "exactly, so the change is not made by itself",
                          change_words, engine_name(target_.kind)),
        join_ddl({fmt::format("-- {} keeps every value of a numeric without precision only as "
                              "text: the column becomes text, each value as PostgreSQL writes "
                              "it (10.50).",
                              engine_name(target_.kind)),
                  stmt(alter(fmt::format("ALTER COLUMN {} TYPE {}", d_->quote(c.column),
                                         text_type)))}),
        "The column's values are kept as text from the change on, every digit of them; the "
        "table then resumes exactly at the change, replaying its kept changes.",
        false);
  }
  if (cls == type_change::other)
    return reload_stop(code_type_change,
                       change_words + ", which the stream cannot carry: only longer or shorter "
                                      "variable-length columns, larger integer types and decimal "
                                      "precision or scale changes are followed");
  if (cls == type_change::decimal && col->key)
    return reload_stop(code_key_decimal,
                       change_words + ": a precision or scale change of a decimal key column "
                                      "stops the stream, which does not alter a row key's type "
                                      "(a smaller scale would round the key's values)");
  if (events())
    return apply({}, fmt::format("nothing to apply: the next events of {} carry column {} as {}",
                                 before_.name, c.column, type_text(c.to)));

  const auto from_t = d_->canonical(col->type);
  const auto to_t = d_->canonical(c.to);
  // A shorter varchar: PostgreSQL cut every longer value to the new length (only trailing
  // spaces may go, else it refuses the change), in no change event. A target whose
  // varchar has no length does the same cut itself, so its values stay the source's.
  const bool shorter = c.to.kind == schema::type_kind::varchar && c.to.length > 0 &&
                       (col->type.kind == schema::type_kind::text ||
                        (col->type.kind == schema::type_kind::varchar &&
                         (col->type.length == 0 || col->type.length > c.to.length)));
  if (from_t == to_t && shorter)
    return apply({fmt::format("UPDATE {0} SET {1} = left({1}, {2}) WHERE length({1}) > {2}",
                              table(), d_->quote(c.column), c.to.length)},
                 fmt::format("column {} changed to {} at the source, which cut its longer "
                             "values' trailing spaces; {} stores it as {}, and cuts them alike",
                             c.column, type_text(c.to), engine_name(target_.kind),
                             d_->physical_type(to_t)));
  if (from_t == to_t)
    return apply({}, fmt::format("nothing to apply: {} stores {} and {} alike as {}",
                                 engine_name(target_.kind), type_text(col->type),
                                 type_text(c.to), d_->physical_type(to_t)));

  if (col->key && !d_->supports_key_column_type_change()) {
    const auto after = apply_change(before_, c);
    std::vector<std::string> lines{fmt::format(
        "-- {} cannot change the type of a key column in place: the table is rebuilt with {} "
        "as {}, keeping its rows.",
        engine_name(target_.kind), d_->quote(c.column), d_->physical_type(to_t))};
    for (auto& s : d_->rebuild_and_swap(target_.table, before_.to_schema(), after.to_schema()))
      lines.push_back(stmt(std::move(s)));
    return hold("alter_type",
                fmt::format("{}: {} refuses ALTER COLUMN ... TYPE on a column of the primary key",
                            change_words, engine_name(target_.kind)),
                join_ddl(lines),
                "The table is rebuilt under the new type with its rows kept; it then resumes "
                "exactly at the change, replaying its kept changes.",
                false);
  }

  // Past the target's widest decimal (DuckDB's 38 digits): no exact change, held.
  if (cls == type_change::decimal &&
      (to_t.precision < c.to.precision || to_t.scale < c.to.scale)) {
    return hold(
        "alter_type",
        fmt::format("{}: {} holds decimals of {} digits at most, so {} has no exact type there",
                    change_words, engine_name(target_.kind), to_t.precision, type_text(c.to)),
        join_ddl({fmt::format("-- {} has no decimal of {} digits: {} would round or refuse "
                              "values the source now takes.",
                              engine_name(target_.kind), c.to.precision,
                              d_->physical_type(to_t)),
                  "-- Edit the DDL, for example to keep every value as text:",
                  fmt::format("--   {};", alter(fmt::format("ALTER COLUMN {} TYPE VARCHAR",
                                                           d_->quote(c.column)))),
                  "-- or remove the table from the stream."}),
        "The column's values keep every digit only in a type the edited DDL gives it; the "
        "table then resumes exactly at the change, replaying its kept changes.",
        false);
  }

  std::vector<std::string> out;
  const std::string q = d_->quote(c.column);
  const std::string ty = d_->physical_type(to_t);
  // A smaller scale rounds silently in both engines: refuse values that would change.
  if (cls == type_change::decimal && to_t.scale < from_t.scale) {
    const std::string msg = fmt::format(
        "column {} holds a value with more than {} decimal places; it does not fit {}",
        c.column, to_t.scale, ty);
    const std::string cond = fmt::format("SELECT 1 FROM {} WHERE {} <> round({}, {})", table(), q,
                                         q, to_t.scale);
    if (target_.kind == target_kind::postgres)
      out.push_back(do_block(fmt::format("BEGIN IF EXISTS ({}) THEN RAISE EXCEPTION '%', {}; END "
                                         "IF; END",
                                         cond, d_->literal(msg))));
    else
      out.push_back(fmt::format("SELECT error({}) WHERE EXISTS ({})", d_->literal(msg), cond));
  }
  if (cls == type_change::widening)
    for (auto& s : d_->alter_column_type(target_.table, c.column, to_t))
      out.push_back(std::move(s));
  else  // no explicit cast: a value that does not fit fails the change instead of truncating
    out.push_back(alter(fmt::format("ALTER COLUMN {} TYPE {}", q, ty)));
  return apply(std::move(out), fmt::format("column {} changed to {} on the target", c.column, ty));
}

outcome decider::on(const set_nullability& c) const {
  const auto* col = before_.find(c.column);
  if (!col)
    return unknown_column(c.column);
  if (events())
    return apply({}, fmt::format("nothing to apply: events carry column {} {}", c.column,
                                 c.nullable ? "nullable" : "NOT NULL"));
  if (col->nullable == c.nullable)
    return apply({}, fmt::format("nothing to apply: column {} is already {}", c.column,
                                 c.nullable ? "nullable" : "NOT NULL"));
  // Both engines make the exact change; SET NOT NULL fails, changing nothing, when a
  // target row holds NULL.
  return apply({alter(fmt::format("ALTER COLUMN {} {}", d_->quote(c.column),
                                  c.nullable ? "DROP NOT NULL" : "SET NOT NULL"))},
               fmt::format("column {} made {} on the target", c.column,
                           c.nullable ? "nullable" : "NOT NULL"));
}

outcome decider::on(const set_default& c) const {
  if (!before_.find(c.column))
    return unknown_column(c.column);
  return apply({}, "nothing to apply: target columns carry no defaults");
}

outcome decider::on(const column_property_change& c) const {
  if (!before_.find(c.column))
    return unknown_column(c.column);
  return reload_stop(code_column_property,
                     fmt::format("the {} of column '{}' changed{}, which the stream cannot carry",
                                 c.property, c.column,
                                 c.detail.empty() ? "" : fmt::format(" ({})", c.detail)));
}

// ---- keys and indexes ----------------------------------------------------------------

outcome decider::key_change_hold(std::string detail, const std::vector<std::string>& new_key) const {
  // A table that had no key and has one now: nothing to restore on the source, nothing
  // to drop on the target; the fresh copy makes the table with its key.
  const bool gained = !before_.has_key() && !new_key.empty();
  const std::string reason = fmt::format(
      "the row key of {} changed on the source ({}): every change is applied by that key, so the "
      "table can rejoin the stream only with a fresh copy. {}",
      before_.name, detail,
      gained ? std::string_view("Resync the table (it is copied again with its key), or remove it.")
             : restore_key_hint);
  const std::string consequence =
      "The row key changed, so the table needs a fresh copy before it rejoins the stream; its "
      "kept changes are not replayed.";
  if (events())
    return hold("key_change", reason,
                join_ddl({"-- The row key changed: events are keyed by the row key, so the table "
                          "is published again by its new key.",
                          std::string(no_target_ddl)}),
                consequence, true);
  std::vector<std::string> lines{
      fmt::format("-- The row key of {} changed on the source ({}).", before_.name, detail),
      // An example follows where there is one to give (DuckDB with no new key has none).
      target_.kind == target_kind::postgres || !new_key.empty()
          ? "-- Write the matching target key change by hand, for example:"
          : "-- Write the matching target key change by hand:"};
  if (gained)
    ;  // the target table has no key to drop
  else if (target_.kind == target_kind::postgres)
    lines.push_back(fmt::format("-- {}", stmt(alter("DROP CONSTRAINT <primary key name>"))));
  else
    lines.push_back("-- DuckDB cannot drop a key in place: rebuild the table with the new key.");
  // A keyless PostgreSQL table gaining a key: the statement itself, ready to apply with
  // the resync (nothing on the target to drop first, nothing to guess).
  if (gained && target_.kind == target_kind::postgres)
    return hold("key_change", reason,
                join_ddl({fmt::format("-- The row key of {} changed on the source ({}).",
                                      before_.name, detail),
                          stmt(alter(fmt::format("ADD PRIMARY KEY ({})",
                                                 key_list(*d_, new_key))))}),
                consequence, true);
  // A keyless DuckDB table gaining a key: DuckDB adds none in place, and the resync's copy
  // makes the table anew with its key: nothing to write, so the proposal resyncs as it is.
  if (gained)
    return hold("key_change", reason,
                join_ddl({fmt::format("-- The row key of {} changed on the source ({}).",
                                      before_.name, detail),
                          "-- The resync copies the table anew, with its key.",
                          std::string(no_target_ddl)}),
                consequence, true);
  if (!new_key.empty())
    lines.push_back(fmt::format("-- {}",
                                stmt(alter(fmt::format("ADD PRIMARY KEY ({})",
                                                       key_list(*d_, new_key))))));
  return hold("key_change", reason, join_ddl(lines), consequence, true);
}

outcome decider::on(const key_change& c) const {
  for (const auto& k : c.new_key)
    if (!before_.find(k))
      return unknown_column(k);
  std::string detail = c.detail;
  if (!before_.has_key() && !c.new_key.empty())
    detail = fmt::format("a primary key was added: ({})", plain_key_list(c.new_key));
  else if (detail.empty())
    detail = c.new_key.empty() ? "the row key was dropped"
                               : fmt::format("the row key is now ({})", plain_key_list(c.new_key));
  return key_change_hold(std::move(detail), c.new_key);
}

outcome decider::on(const index_change& c) const {
  if (c.serves_row_key)
    return key_change_hold(c.detail.empty()
                               ? fmt::format("index {} serving as the row key changed", c.index)
                               : c.detail,
                           {});
  return apply({}, "nothing to apply: the row key stays the same");
}

// ---- tables --------------------------------------------------------------------------

outcome decider::on(const drop_table&) const {
  return stop(code_table_dropped, fmt::format("captured table {} was dropped", before_.name),
              "To retire a table, leave it out of the stream before dropping it on the "
              "source. Where flotilla.toml names it (in include or a table section), remove "
              "that now (a pattern such as \"*\" needs nothing); then start the stream with "
              "--reload, which copies every table again");
}

outcome decider::on(const rename_table& c) const {
  return stop(code_table_renamed,
              fmt::format("captured table {} was renamed to {}, while the target table keeps the "
                          "old name",
                          before_.name, c.to),
              fmt::format("Where flotilla.toml names {} (in include or a table section), name "
                          "{} there instead (a pattern such as \"*\" takes it as it is); then "
                          "start the stream with --reload, which copies every table again (the "
                          "target table of the old name is left as it is: drop it, or rename it "
                          "to the new name before the reload to keep what depends on it)",
                          before_.name, c.to));
}

outcome decider::on(const partition_change& c) const {
  return reload_stop(code_partition,
                     fmt::format("a partition was attached to or detached from {}{}: its rows "
                                 "move without being logged as changes",
                                 before_.name,
                                 c.detail.empty() ? "" : fmt::format(" ({})", c.detail)));
}

outcome decider::on(const truncate_table&) const {
  if (events()) {
    if (before_.has_key())
      return stop(code_truncate_keyed_event,
                  fmt::format("TRUNCATE of {}, which has a row key, cannot be published as "
                              "keyed events on {} target '{}'",
                              before_.name, to_string(target_.kind), target_.name),
                  "Reload the stream (flotilla stream --reload), which publishes every row again");
    applied a{{}, fmt::format("truncate event of {} published keyed by the table name",
                              before_.name),
              before_.name};
    return a;
  }
  return apply({fmt::format("TRUNCATE TABLE {}", table())},
               fmt::format("target table {} emptied", table()));
}

outcome decider::on(const new_table& c) const {
  return apply({}, fmt::format("nothing to apply: table {} is not captured until it is added to "
                               "the source's include list; adding it restarts the capture, "
                               "which copies every table again",
                               c.name));
}

}  // namespace

// ---- public -------------------------------------------------------------------------

const captured_column* captured_table::find(std::string_view column) const {
  for (const auto& c : columns)
    if (c.name == column)
      return &c;
  return nullptr;
}

bool captured_table::has_key() const {
  return std::any_of(columns.begin(), columns.end(), [](const auto& c) { return c.key; });
}

schema::table_schema captured_table::to_schema() const {
  schema::table_schema out;
  for (const auto& c : columns)
    out.columns.push_back(schema::column{c.name, c.type, c.nullable, c.key});
  return out;
}

std::string describe(const captured_table& before, const change_kind& change) {
  struct visitor {
    const captured_table& t;
    std::string operator()(const add_column& a) const {
      const auto& c = a.column;
      std::string props = type_text(c.type);
      if (!c.nullable)
        props += " NOT NULL";
      if (!c.default_expr.empty())
        props += " DEFAULT " + c.default_expr;
      return fmt::format("column {} added ({})", c.name, props);
    }
    std::string operator()(const drop_column& c) const {
      return fmt::format("column {} dropped", c.column);
    }
    std::string operator()(const rename_column& c) const {
      return fmt::format("column {} renamed to {}", c.from, c.to);
    }
    std::string operator()(const alter_type& c) const {
      // As the source names the types, where known (numeric, not the text it is carried as).
      const auto* col = t.find(c.column);
      const std::string to = c.to_source.empty() ? type_text(c.to) : c.to_source;
      if (col && !c.from_source.empty() && c.from_source == c.to_source)
        return fmt::format("column {} (type {}) rewritten", c.column, c.from_source);
      return col ? fmt::format("column {} changed type {} -> {}", c.column,
                               c.from_source.empty() || c.to_source.empty() ? type_text(col->type)
                                                                            : c.from_source,
                               c.from_source.empty() || c.to_source.empty() ? type_text(c.to)
                                                                            : to)
                 : fmt::format("column {} changed type to {}", c.column, to);
    }
    std::string operator()(const set_nullability& c) const {
      return fmt::format("column {} {}", c.column, c.nullable ? "dropped NOT NULL" : "set NOT NULL");
    }
    std::string operator()(const set_default& c) const {
      return c.expression.empty() ? fmt::format("default of column {} dropped", c.column)
                                  : fmt::format("default of column {} set to {}", c.column,
                                                c.expression);
    }
    std::string operator()(const column_property_change& c) const {
      return fmt::format("{} of column {} changed{}", c.property, c.column,
                         c.detail.empty() ? "" : fmt::format(" ({})", c.detail));
    }
    std::string operator()(const key_change& c) const {
      if (!c.detail.empty())
        return "row key changed: " + c.detail;
      return c.new_key.empty() ? std::string("row key dropped")
                               : fmt::format("row key changed to ({})", plain_key_list(c.new_key));
    }
    std::string operator()(const index_change& c) const {
      return fmt::format("index {} changed{}", c.index,
                         c.detail.empty() ? "" : fmt::format(" ({})", c.detail));
    }
    std::string operator()(const drop_table&) const { return "table dropped"; }
    std::string operator()(const rename_table& c) const {
      return fmt::format("table renamed to {}", c.to);
    }
    std::string operator()(const partition_change& c) const {
      return fmt::format("partition attached or detached{}",
                         c.detail.empty() ? "" : fmt::format(" ({})", c.detail));
    }
    std::string operator()(const truncate_table&) const { return "table truncated"; }
    std::string operator()(const new_table& c) const {
      return fmt::format("table {} created", c.name);
    }
  };
  return std::visit(visitor{before}, change);
}

bool hides_duckdb_row_id(std::string_view column) {
  return schema::same_name(column, "rowid", schema::name_rule::case_insensitive);
}

std::string source_change_text(const captured_table& before, const source_change& change) {
  const std::string table =
      std::holds_alternative<new_table>(change.change) ? std::get<new_table>(change.change).name
                                                       : before.name;
  return fmt::format("{}: {} (source LSN {})", table, describe(before, change.change),
                     change.position.empty() ? "unknown" : change.position);
}

captured_table apply_change(const captured_table& before, const change_kind& change) {
  captured_table after = before;
  auto find = [&](std::string_view name) -> captured_column* {
    for (auto& c : after.columns)
      if (c.name == name)
        return &c;
    return nullptr;
  };
  struct visitor {
    captured_table& t;
    decltype(find)& col;
    void operator()(const add_column& a) const { t.columns.push_back(a.column); }
    void operator()(const drop_column& c) const {
      std::erase_if(t.columns, [&](const auto& x) { return x.name == c.column; });
      if (c.key_after)
        for (auto& x : t.columns)
          x.key = std::find(c.key_after->begin(), c.key_after->end(), x.name) != c.key_after->end();
    }
    void operator()(const rename_column& c) const {
      if (auto* x = col(c.from))
        x->name = c.to;
    }
    void operator()(const alter_type& c) const {
      if (auto* x = col(c.column))
        x->type = c.to;
    }
    void operator()(const set_nullability& c) const {
      if (auto* x = col(c.column))
        x->nullable = c.nullable;
    }
    void operator()(const set_default& c) const {
      if (auto* x = col(c.column))
        x->default_expr = c.expression;
    }
    void operator()(const column_property_change&) const {}  // the stream stops there
    void operator()(const key_change& c) const {
      for (auto& x : t.columns)
        x.key = std::find(c.new_key.begin(), c.new_key.end(), x.name) != c.new_key.end();
    }
    void operator()(const index_change&) const {}
    void operator()(const drop_table&) const {}
    void operator()(const rename_table& c) const { t.name = c.to; }
    void operator()(const partition_change&) const {}
    void operator()(const truncate_table&) const {}
    void operator()(const new_table&) const {}
  };
  std::visit(visitor{after, find}, change);
  return after;
}

std::optional<target_kind> parse_target_kind(std::string_view name) {
  std::string n;
  for (char c : name)
    n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "duckdb")
    return target_kind::duckdb;
  if (n == "postgres" || n == "postgresql" || n == "pg")
    return target_kind::postgres;
  if (n == "kafka")
    return target_kind::kafka;
  if (n == "pubsub" || n == "pub/sub")
    return target_kind::pubsub;
  return std::nullopt;
}

std::string_view to_string(target_kind k) {
  switch (k) {
    case target_kind::duckdb: return "duckdb";
    case target_kind::postgres: return "postgres";
    case target_kind::kafka: return "kafka";
    case target_kind::pubsub: return "pubsub";
  }
  return "unknown";
}

bool is_event_target(target_kind k) { return k == target_kind::kafka || k == target_kind::pubsub; }

std::string stop_message(std::string_view table, std::string_view reason) {
  return fmt::format(
      "PostgreSQL logical schema history gap for '{}': {}. No successor plan, row output, or "
      "checkpoint was published.",
      table, reason);
}

outcome decide_outcome(const captured_table& before, const source_change& change,
                       const target_info& target) {
  return decider(before, change, target).run();
}

bool comment_only(std::string_view ddl) {
  std::size_t i = 0;
  while (i < ddl.size()) {
    const char c = ddl[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ';') {
      ++i;
    } else if (c == '-' && i + 1 < ddl.size() && ddl[i + 1] == '-') {
      const auto eol = ddl.find('\n', i);
      i = eol == std::string_view::npos ? ddl.size() : eol + 1;
    } else {
      return false;
    }
  }
  return true;
}

bool needs_edit(std::string_view proposed_ddl) {
  if (!comment_only(proposed_ddl))
    return false;
  // A proposal whose last comment line says no DDL is needed can be applied as it stands.
  std::string_view s = proposed_ddl;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return !s.ends_with(no_target_ddl);
}

}  // namespace flotilla::cdc
