#include "cdc/ddl_changes.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <regex>

#include <fmt/format.h>

#include "cdc/ddl_capture.hpp"
#include "sources/type_mapping.hpp"

namespace flotilla::cdc {
namespace {

/// The value of a default that is a plain literal, as PostgreSQL deparses one: `5`,
/// `-1.5`, `true`, `'a b'::text`, `'2020-02-03'::date`, `'x'::character varying`. Every
/// row takes that value, even where PostgreSQL wrote it into each row (a statement that
/// also rewrites the table, a domain with a check) rather than as metadata.
std::optional<std::string> literal_default(const std::string& expr) {
  static const std::regex number(R"(^-?[0-9]+(\.[0-9]+)?$)");
  static const std::regex quoted(
      R"(^'((?:[^'\\]|'')*)'::[a-z][a-z0-9_ ]*(\([0-9, ]+\))?$)");
  std::smatch m;
  if (std::regex_match(expr, number) || expr == "true" || expr == "false")
    return expr;
  if (!std::regex_match(expr, m, quoted))
    return std::nullopt;
  std::string out;
  const std::string inner = m[1].str();
  for (std::size_t i = 0; i < inner.size(); ++i) {
    out += inner[i];
    if (inner[i] == '\'' && i + 1 < inner.size() && inner[i + 1] == '\'')
      ++i;
  }
  return out;
}

captured_column to_column(const source_column& c) {
  captured_column out;
  out.name = c.name;
  out.type = sources::map_postgres_type(c.type);
  out.nullable = !c.not_null;
  out.key = c.key;
  out.collation = c.collation.value_or("");
  out.identity = c.identity.value_or(false);
  out.generated = c.generated.value_or(false);
  if (c.default_expr) {
    out.default_expr = *c.default_expr;
    // ADD COLUMN ... DEFAULT stores a constant as metadata (atthasmissing); a volatile
    // default rewrites the table instead, and its per-row values are not in the stream.
    out.default_constant = c.has_missing;
    out.default_value = c.missing_value;
    if (!c.has_missing)
      if (auto literal = literal_default(*c.default_expr)) {
        out.default_constant = true;
        out.default_value = std::move(literal);
      }
  }
  return out;
}

/// "ATTACH PARTITION p3" when the statement text attaches or detaches a partition. The
/// capture logs the whole query string, which may hold other statements: only a change
/// that altered no column is taken for it.
std::string partition_clause(const std::string& ddl) {
  static const std::regex clause(R"((ATTACH|DETACH)\s+PARTITION\s+("(?:[^"]|"")+"|[^\s;(]+))",
                                 std::regex::icase);
  std::smatch m;
  if (!std::regex_search(ddl, m, clause))
    return {};
  std::string verb = m[1].str();
  for (auto& ch : verb)
    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return verb + " PARTITION " + m[2].str();
}

/// The column a statement retypes with `ALTER [COLUMN] c [SET DATA] TYPE t USING expr`,
/// when it does: PostgreSQL rewrites every row's value with the expression, and those
/// values are not in the change stream. Empty when the statement has no such clause.
std::string retyped_using(const std::string& ddl) {
  static const std::regex clause(
      R"(ALTER\s+(?!TABLE\b)(?:COLUMN\s+)?("(?:[^"]|"")+"|[^\s;,]+)\s+(?:SET\s+DATA\s+)?TYPE\s+(?:[^;,()]|\([^)]*\))*?\bUSING\b)",
      std::regex::icase);
  std::smatch m;
  return std::regex_search(ddl, m, clause) ? m[1].str() : std::string();
}

}  // namespace

captured_table to_captured(const std::string& source, const std::string& table,
                           const std::vector<source_column>& columns) {
  captured_table t;
  t.source = source;
  t.name = table;
  for (const auto& c : columns)
    t.columns.push_back(to_column(c));
  return t;
}

namespace {

/// The kind of a time-like PostgreSQL type as format_type() names it ("time(0) without
/// time zone", "timestamp with time zone", "interval second(3)"); empty for other types.
std::string time_family(const std::string& type) {
  for (const char* kind : {"timestamp", "time", "interval"})
    if (type.starts_with(kind)) {
      const bool zoned = type.find("with time zone") != std::string::npos;
      return std::string(kind) + (zoned ? " tz" : "");
    }
  return {};
}

/// The fractional-second digits a time-like type keeps: its (p), else PostgreSQL's 6;
/// nullopt for other types.
std::optional<int> fractional_digits(const std::string& type) {
  if (time_family(type).empty())
    return std::nullopt;
  const auto open = type.find('(');
  if (open == std::string::npos)
    return 6;
  int p = 0;
  const auto* first = type.data() + open + 1;
  const auto [end, ec] = std::from_chars(first, type.data() + type.size(), p);
  if (ec != std::errc{} || end == first)
    return 6;
  return p;
}

/// Why PostgreSQL's change of a column from `before` to `after` (as format_type() names
/// them) rewrites its stored values into other text, where it does; empty otherwise.
/// The changes the stream follows (a longer varchar, a larger integer, a decimal's
/// precision) keep each value as it was.
std::string rewritten_values(const std::string& before, const std::string& after) {
  const auto is_char = [](const std::string& t) {
    return t == "character" || t.starts_with("character(") || t == "bpchar";
  };
  if (is_char(before) != is_char(after) || (is_char(before) && before != after)) {
    if (is_char(after))
      return fmt::format("PostgreSQL pads every stored value to {}'s length with spaces",
                         after);
    return "PostgreSQL dropped the trailing spaces of every stored value, which character(n) "
           "pads with";
  }
  // An interval restricted to some fields (interval year to month, interval day): the
  // other fields of every stored value are dropped. One that restricts none drops nothing.
  const auto fields = [](const std::string& t) -> std::string {
    if (!t.starts_with("interval"))
      return {};
    std::string rest = t.substr(8);
    if (const auto p = rest.find('('); p != std::string::npos)
      rest.erase(p, rest.find(')', p) == std::string::npos ? std::string::npos
                                                           : rest.find(')', p) - p + 1);
    while (!rest.empty() && rest.front() == ' ')
      rest.erase(0, 1);
    while (!rest.empty() && rest.back() == ' ')
      rest.pop_back();
    return rest;
  };
  if (before.starts_with("interval") && after.starts_with("interval") && !fields(after).empty() &&
      fields(after) != fields(before))
    return fmt::format("PostgreSQL dropped from every stored value the fields {} does not "
                       "keep",
                       after);
  if (before == "inet" && after == "cidr")
    return "PostgreSQL wrote every stored address as a network (10.0.0.1 as 10.0.0.1/32)";
  if (before == "json" && after == "jsonb")
    return "PostgreSQL rewrote every stored document as jsonb keeps it (spacing, key order, "
           "duplicate keys dropped)";
  return {};
}

}  // namespace

std::vector<source_change> to_source_changes(const std::string& table,
                                             const std::vector<source_column>& before,
                                             const ddl_event& event, const std::string& position) {
  std::vector<source_change> out;
  auto add = [&](change_kind k) { out.push_back(source_change{std::move(k), position}); };
  if (event.dropped) {
    add(drop_table{});
    return out;
  }
  if (event.object_type == "type") {
    // A value of an enum renamed (ddl_capture): each column of it, or of an array or a
    // domain over it, now reads every stored value so, in no change event.
    const auto dot = event.object_identity.rfind('.');
    const std::string bare =
        dot == std::string::npos ? event.object_identity : event.object_identity.substr(dot + 1);
    const auto of_type = [&](std::string t) {
      if (t.ends_with("[]"))
        t.resize(t.size() - 2);
      if (t.size() > 1 && t.front() == '"' && t.back() == '"')
        t = t.substr(1, t.size() - 2);
      return t == bare || t == event.object_identity || t.ends_with("." + bare);
    };
    std::vector<const source_column*> hit;
    for (const auto& c : before)
      if (of_type(c.type))
        hit.push_back(&c);
    if (hit.empty() && !before.empty())
      hit.push_back(&before.front());  // a domain over it: the table is named, not the column
    for (const auto* c : hit) {
      alter_type retype{c->name, sources::map_postgres_type(c->type), c->type, c->type};
      retype.rewrites = fmt::format("a value of enum type {} was renamed, so every stored value "
                                    "of it reads as the new name",
                                    event.object_identity);
      add(std::move(retype));
    }
    return out;
  }
  if (event.schema + "." + event.table != table) {
    add(rename_table{event.schema + "." + event.table});
    return out;
  }
  for (const auto& d : diff_columns(before, event.columns)) {
    switch (d.what) {
      case column_diff::kind::added: add(add_column{to_column(*d.after)}); break;
      case column_diff::kind::dropped: {
        drop_column drop{d.column};
        if (d.before && d.before->key) {  // the key the source has now, not the rest of the old
          drop.key_after.emplace();
          for (const auto& c : event.columns)
            if (c.key)
              drop.key_after->push_back(c.name);
        }
        add(std::move(drop));
        break;
      }
      case column_diff::kind::renamed: add(rename_column{d.column, d.to}); break;
      case column_diff::kind::retyped: {
        alter_type retype{d.column, sources::map_postgres_type(d.after->type), d.after->type};
        if (d.before) {
          retype.from_source = d.before->type;
          const auto was = fractional_digits(d.before->type), now = fractional_digits(d.after->type);
          retype.rounds = was && now && *now < *was &&
                          time_family(d.before->type) == time_family(d.after->type);
          retype.rewrites = rewritten_values(d.before->type, d.after->type);
        }
        add(std::move(retype));
        break;
      }
      case column_diff::kind::nullability:
        add(set_nullability{d.column, !d.after->not_null});
        break;
      case column_diff::kind::default_changed:
        add(set_default{d.column, d.after->default_expr.value_or("")});
        break;
      case column_diff::kind::collation:
        add(column_property_change{d.column, "collation", d.to});
        break;
      case column_diff::kind::identity:
        add(column_property_change{d.column, "identity", d.to});
        break;
      case column_diff::kind::generated:
        add(column_property_change{d.column, "generated", d.to});
        break;
      case column_diff::kind::key_changed: {
        key_change k;
        for (const auto& c : event.columns)
          if (c.key)
            k.new_key.push_back(c.name);
        const bool had_key = std::any_of(before.begin(), before.end(),
                                         [](const source_column& c) { return c.key; });
        k.detail = k.new_key.empty() ? "primary key dropped"
                   : had_key         ? "primary key redefined"
                                     : "primary key added";
        add(std::move(k));
        break;
      }
    }
  }
  if (out.empty())
    if (auto clause = partition_clause(event.ddl); !clause.empty())
      add(partition_change{std::move(clause)});
  return out;
}

/// A held change of a statement that made others: its proposal runs theirs too (the
/// statements decided before it first, those after it last), and its card names them. A
/// proposal that only comments (an edit is needed) lists them for the edit to keep.
void with_other_changes(storage::pb::HoldRecord& h, const std::vector<std::string>& before_hold,
                        const std::vector<std::string>& after_hold,
                        const std::vector<std::string>& others, std::string_view where) {
  if (others.empty())
    return;
  h.set_source_change(fmt::format("{}; {}: {}", h.source_change(), where, fmt::join(others, "; ")));
  if (before_hold.empty() && after_hold.empty())
    return;
  const auto statements = [](const std::vector<std::string>& list) {
    std::string out;
    for (const auto& st : list)
      out += st + (st.ends_with(";") ? "\n" : ";\n");
    return out;
  };
  if (comment_only(h.proposed_ddl())) {
    std::string listed = fmt::format("-- Made {} too; the edited DDL must make them as "
                                     "well:\n", where);
    std::vector<std::string> all = before_hold;
    all.insert(all.end(), after_hold.begin(), after_hold.end());
    for (const auto& st : all) {
      std::string line = "--   " + st + (st.ends_with(";") ? "" : ";");
      for (auto at = line.find('\n'); at != std::string::npos; at = line.find('\n', at))
        line.replace(at, 1, "\n--   ");
      listed += line + "\n";
    }
    h.set_proposed_ddl(h.proposed_ddl() + (h.proposed_ddl().ends_with("\n") ? "" : "\n") + listed);
    return;
  }
  std::string proposed = statements(before_hold);
  proposed += h.proposed_ddl();
  if (!after_hold.empty())
    proposed += (proposed.ends_with("\n") ? "" : "\n") + statements(after_hold);
  h.set_proposed_ddl(proposed);
}

outcome decide_ddl(const std::string& source, const std::string& table,
                   const std::vector<source_column>& before, const ddl_event& event,
                   const std::string& position, const target_info& target) {
  // Seed 002: a change whose per-row values exist only in the rewrite stops the pipeline
  // before it (as a volatile default does): applied, the target would keep every old value
  // under the new type. The remedy is a reload, then the change made another way.
  const auto rewrite_stop = [&](std::string reason, std::string_view next_time) {
    stopped s;
    s.code = std::string(code_type_change);
    s.reason = std::move(reason);
    s.message = stop_message(table, s.reason);
    s.remedy = fmt::format("Reload the stream (flotilla stream --reload) to copy every table "
                           "again from a fresh snapshot; next time {}",
                           next_time);
    return s;
  };
  if (!event.dropped)
    if (const auto column = retyped_using(event.ddl); !column.empty())
      return rewrite_stop(
          fmt::format("column {} was retyped with USING, which rewrites every row's value in "
                      "the table; the change stream does not carry those values, so the "
                      "target would keep the old ones",
                      column),
          "make a type change the stream follows (a wider type, a longer varchar, a decimal "
          "precision) without USING, or one it cannot follow (int -> text, a USING "
          "expression) followed at once by `flotilla stream --reload`");
  // Run inside a DO block or a function (a migration's dynamic SQL): the statement text is
  // not there to show whether a retype had USING, so it stops as USING does.
  if (!event.dropped && ddl_statements(event.ddl) == ddl_not_shown)
    for (const auto& d : diff_columns(before, event.columns))
      if (d.what == column_diff::kind::retyped)
        return rewrite_stop(
            fmt::format("column {} was retyped ({} -> {}) by DDL run inside another statement "
                        "(a DO block or a function), whose text does not show whether it had "
                        "USING, which rewrites every row's value in the table where the change "
                        "stream carries none",
                        d.column, d.before ? d.before->type : std::string("?"),
                        d.after ? d.after->type : std::string("?")),
            "run the ALTER TABLE as a statement of its own (a type change without USING is "
            "then applied on the target)");
  captured_table current = to_captured(source, table, before);
  applied all;
  std::optional<held> first_hold;
  // The statement's other changes: run with the held one when its review is decided (its
  // replay writes rows in the shape after the whole statement), and named on its card.
  std::vector<std::string> before_hold, after_hold, others;
  // The live target is compared with the shape before the statement only: none of the
  // statement's changes reaches the target before all of them are decided, so a later
  // change would find the target still without the earlier ones.
  target_info each = target;
  for (const auto& change : to_source_changes(table, before, event, position)) {
    outcome o = decide_outcome(current, change, each);
    each.actual.reset();
    if (std::holds_alternative<stopped>(o))
      return o;
    if (auto* h = std::get_if<held>(&o)) {
      if (!first_hold)
        first_hold = *h;
      else
        others.push_back(source_change_text(current, change));
    } else {
      auto& a = std::get<applied>(o);
      all.statements.insert(all.statements.end(), a.statements.begin(), a.statements.end());
      auto& side = first_hold ? after_hold : before_hold;
      side.insert(side.end(), a.statements.begin(), a.statements.end());
      if (!a.note.empty())
        all.note += (all.note.empty() ? "" : "; ") + a.note;
      others.push_back(source_change_text(current, change));
      all.said.push_back(a.note.empty() ? others.back() : others.back() + ": " + a.note);
    }
    current = apply_change(current, change.change);
  }
  if (first_hold) {
    with_other_changes(first_hold->hold, before_hold, after_hold, others,
                       "in the same statement");
    return *first_hold;
  }
  return all;
}

}  // namespace flotilla::cdc
