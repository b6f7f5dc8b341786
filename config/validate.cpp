#include "config/validate.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "config/policy.hpp"
#include "config/selection.hpp"
#include "schema/toml_text.hpp"

namespace flotilla::config {
namespace {

struct checker {
  const project& p;
  std::vector<diagnostic> out;

  void report(errc code, position at, std::string key, std::string value, std::string allowed,
              std::string message, severity level = severity::error) {
    out.push_back(diagnostic{code, level, p.config_path, at.line, at.column, std::move(key),
                             std::move(value), std::move(allowed), std::move(message)});
  }

  /// Two targets of different engines naming one database file: each would take the
  /// other's file for a broken database of its own, and which wins depends on which
  /// writes first in a run.
  void targets_sharing_a_file() {
    const auto file_of = [](const target_config& t) -> std::string {
      if ((t.dialect != "duckdb" && t.dialect != "sqlite") || t.path.empty() ||
          t.path == ":memory:")
        return {};
      std::error_code ec;
      const auto canonical = std::filesystem::weakly_canonical(t.path, ec);
      return ec ? t.path : canonical.string();
    };
    for (std::size_t j = 0; j < p.targets.size(); ++j) {
      const std::string file = file_of(p.targets[j]);
      if (file.empty())
        continue;
      for (std::size_t i = 0; i < j; ++i)
        if (p.targets[i].dialect != p.targets[j].dialect && file_of(p.targets[i]) == file) {
          report(errc::invalid_value, p.targets[j].at,
                 key_path({"targets", p.targets[j].name, "path"}), p.targets[j].path, "",
                 fmt::format("target '{}' ({}) and target '{}' ({}) name the same file {}: a "
                             "database file is of one engine; give each target a file of its "
                             "own",
                             p.targets[j].name, p.targets[j].dialect, p.targets[i].name,
                             p.targets[i].dialect, file));
          break;
        }
    }
  }

  void templates() {
    for (const auto& t : p.targets) {
      auto names = template_placeholders(t.schema);
      if (!names) {
        report(errc::malformed_template, t.schema_at.line ? t.schema_at : t.at,
               key_path({"targets", t.name, "schema"}), t.schema,
               "literal text and {source} or {<tag>} placeholders",
               fmt::format("malformed schema template: {}", names.error().message));
        continue;
      }
      for (const auto& s : p.sources) {
        if (s.target != t.name)
          continue;
        for (const auto& n : *names) {
          if (n == "source" || s.tags.contains(n))
            continue;
          std::string tags = "source";
          std::vector<std::string_view> known{"source"};
          for (const auto& [k, v] : s.tags) {
            tags += ", " + k;
            known.push_back(k);
          }
          // Reported at the source, the one of the target's sources that lacks the tag:
          // the template is shared, the fix is usually this source's tags (or a typo in
          // the template, which the near match points at).
          const std::string near = nearest(n, known);
          const auto where = t.schema_at.line ? t.schema_at : t.at;
          report(errc::unknown_placeholder, s.tags_at.line ? s.tags_at : s.at,
                 key_path({"sources", s.name, "tags"}),
                 fmt::format("{{{}}}", n), tags,
                 fmt::format("source '{}' has no tag '{}', used by the schema template '{}' of "
                             "target '{}' (targets.{}.schema, line {}); {}add {} to its tags, or "
                             "change the template",
                             s.name, n, t.schema, t.name, t.name, where.line,
                             // A near tag: either may be the typo.
                             near.empty() ? ""
                                          : fmt::format("its tag '{}' is close to it: correct "
                                                        "whichever of the two is misspelt (the "
                                                        "tag, or the template's {{{}}}); or ",
                                                        near, n),
                             fmt::format("{} = \"...\"", schema::toml_key(n))));
        }
      }
    }
  }

  void contracts(const source_config& s, const table_config& t) {
    const table_policy pol = effective_policy(p, s, &t);
    if (pol.contract != contract_mode::enforced)
      return;
    const std::string path = key_path({"sources", s.name, "tables", t.name});
    if (t.columns.empty() && t.columns_rejected == 0) {  // a rejected one is reported already
      report(errc::contract_without_columns, t.at, key_path_append(path, "columns"), "",
             "columns = { name = \"type\", ... }",
             fmt::format("table '{}' of source '{}' has contract = \"enforced\" (from the {}) but "
                         "declares no columns",
                         t.name, s.name, to_string(pol.from.contract)));
      return;
    }
    auto declared = [&](std::string_view c) {
      return std::any_of(t.columns.begin(), t.columns.end(),
                         [&](const declared_column& d) { return iequals(d.name, c); });
    };
    std::string names;
    for (const auto& c : t.columns)
      names += (names.empty() ? "" : ", ") + c.name;
    if (!t.cursor_column.empty() && !declared(t.cursor_column))
      report(errc::undeclared_column, t.cursor_column_at, key_path_append(path, "cursor_column"),
             t.cursor_column, names,
             fmt::format("cursor_column '{}' is not a declared column of the enforced contract",
                         t.cursor_column));
    for (const auto& k : t.unique_key)
      if (!declared(k))
        report(errc::undeclared_column, t.unique_key_at, key_path_append(path, "unique_key"), k, names,
               fmt::format("unique_key column '{}' is not a declared column of the enforced "
                           "contract",
                           k));
  }

  /// The source-drift gate (seed 004) skips a table whose columns are declared: its
  /// contract checks them. Set on the section itself, the setting would be dropped
  /// without a word.
  void gate_on_declared(const source_config& s, const table_config& t) {
    if (t.columns.empty() || !t.policy.on_source_drift ||
        *t.policy.on_source_drift == drift_policy::ignore ||
        effective_policy(p, s, &t).contract != contract_mode::enforced)
      return;
    report(errc::gate_on_declared_table, t.on_source_drift_at,
           key_path({"sources", s.name, "tables", t.name, "on_source_drift"}),
           std::string(to_string(*t.policy.on_source_drift)), "",
           fmt::format("on_source_drift = \"{}\" has no effect on table '{}': it declares its "
                       "columns (columns = {{ ... }}) under contract = \"enforced\", which "
                       "checks them instead of the source-drift gate; remove the setting, or "
                       "set contract = \"none\" (or remove the declared columns) to gate the "
                       "table",
                       to_string(*t.policy.on_source_drift), t.name),
           severity::warning);
  }

  /// Under an enforced contract only declared columns load: a new source column is never
  /// added, left out by on_schema_change, or stopped by it. Set on the section itself, the
  /// setting would be dropped without a word.
  void new_columns_on_enforced(const source_config& s, const table_config& t) {
    if (t.columns.empty() || !t.policy.on_schema_change ||
        effective_policy(p, s, &t).contract != contract_mode::enforced)
      return;
    report(errc::new_columns_under_contract, t.at,
           key_path({"sources", s.name, "tables", t.name, "on_schema_change"}),
           std::string(to_string(*t.policy.on_schema_change)), "",
           fmt::format("on_schema_change = \"{}\" has no effect on table '{}': under contract = "
                       "\"enforced\" a source column it does not declare is never loaded "
                       "(plan and run warn about it); declare a column to load it, or set "
                       "contract = \"none\" for on_schema_change to decide",
                       to_string(*t.policy.on_schema_change), t.name),
           severity::warning);
  }

  void excluded_sections(const source_config& s, const table_config& t) {
    for (const auto& pattern : s.exclude) {
      if (!pattern_covers_name(pattern, t.name, bare_names(s)))
        continue;
      // At the exclude, the key named; the message says where the section is.
      report(errc::excluded_section, s.exclude_at, key_path({"sources", s.name, "exclude"}),
             pattern, "",
             fmt::format("exclude pattern '{}' removes table '{}', which has a section (line "
                         "{}); the section is not used",
                         pattern, t.name, t.at.line),
             severity::warning);
      break;
    }
  }
};

}  // namespace

std::vector<diagnostic> validate(const project& p) {
  checker c{p, {}};
  c.templates();
  c.targets_sharing_a_file();
  for (const auto& s : p.sources)
    for (const auto& t : s.tables) {
      c.contracts(s, t);
      c.excluded_sections(s, t);
      c.gate_on_declared(s, t);
      c.new_columns_on_enforced(s, t);
    }
  std::stable_sort(c.out.begin(), c.out.end(), [](const diagnostic& a, const diagnostic& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  return std::move(c.out);
}

}  // namespace flotilla::config
