// `flotilla contract diff` and `flotilla contract generate [--write]` (seed 000,
// "Checking declarations"). docs/contracts.md describes the output and the write rules.
#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/contract_check.hpp"
#include "cli/fleet_builder.hpp"
#include "cli/run_output.hpp"
#include "cli/verbs.hpp"
#include "config/load.hpp"
#include "config/policy.hpp"
#include "config/toml_edit.hpp"
#include "schema/compat.hpp"

namespace flotilla::cli {
namespace {

struct contract_args {
  std::vector<std::string> filters;
  std::string output = "text";
  bool write = false;  ///< generate only
};

nlohmann::json optional_text(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

void report_failures(const contract_survey& s, nlohmann::json& errors) {
  for (const auto& f : s.failures) {
    fmt::print(stderr, "error: source '{}' cannot be read: {}\n", f.source, f.error);
    errors.push_back({{"source", f.source}, {"error", f.error}});
  }
}

/// A --filter that matched no table of any source: said on stderr, as `plan` and `run`
/// say it, so a misspelt name does not pass a contract check in CI unnoticed.
void warn_if_nothing_surveyed(const contract_args& a, const contract_survey& s,
                              std::string_view nothing) {
  if (!s.tables.empty() || !s.failures.empty() || a.filters.empty())
    return;
  fmt::print(stderr, "warning: the selection (--filter {}) matched no table of any source; "
                     "nothing {}\n",
             fmt::join(a.filters, " --filter "), nothing);
}

// ---- contract diff -------------------------------------------------------------------

int do_diff(const global_options& g, const contract_args& a) {
  std::vector<config::filter> filters;
  auto project = load_or_report(g, a.filters, filters);
  if (!project)
    return 2;
  const auto survey = survey_contracts(*project, filters);
  warn_if_nothing_surveyed(a, survey, "is compared");

  nlohmann::json tables = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  std::size_t differences = 0;
  for (const auto& t : survey.tables) {
    const auto findings = findings_of(t);
    differences += findings.size();
    const std::size_t declared = t.section ? t.section->columns.size() : 0;
    nlohmann::json row{{"table", display_name(t.where)},
                       {"source", t.source},
                       {"source_table", t.source_table},
                       {"target", t.target},
                       {"contract", config::to_string(t.contract)},
                       {"declared_columns", declared},
                       {"status", findings.empty() ? "ok" : "diff"}};
    nlohmann::json items = nlohmann::json::array();
    for (const auto& f : findings)
      items.push_back({{"kind", to_string(f.kind)},
                       {"column", optional_text(f.column)},
                       {"declared", optional_text(f.declared)},
                       {"physical", optional_text(f.physical)},
                       {"message", f.message}});
    row["findings"] = std::move(items);
    if (t.live && declared == 0 && t.contract == config::contract_mode::none)
      row["note"] = "no declared columns and no enforced contract: nothing to compare";
    tables.push_back(std::move(row));
  }
  report_failures(survey, errors);
  const int rc = differences == 0 && survey.failures.empty() ? 0 : 1;

  if (a.output == "json") {
    nlohmann::json j{{"tables", tables}, {"differences", differences}, {"errors", errors}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return rc;
  }
  fmt::print("Contract comparison\n");
  // A name two tables share (same-named tables in two targets) says which target it is.
  std::map<std::string, int> named;
  for (const auto& t : tables)
    ++named[t["table"].get<std::string>()];
  for (const auto& t : tables) {
    const std::string name = t["table"].get<std::string>();
    fmt::print("  {:<6}table:{}{}\n", t["status"] == "ok" ? "OK" : "DIFF", printable(name),
               named[name] > 1 ? printable(fmt::format(" (target {}, from {}.{})",
                                                       t["target"].get<std::string>(),
                                                       t["source"].get<std::string>(),
                                                       t["source_table"].get<std::string>()))
                               : std::string());
    for (const auto& f : t["findings"])
      fmt::print("        {}: {}\n", f["kind"].get<std::string>(),
                 printable(f["message"].get<std::string>()));
  }
  fmt::print("\n{} contract difference(s)\n", differences);
  if (!survey.failures.empty())
    fmt::print("{} source(s) could not be read\n", survey.failures.size());
  return rc;
}

// ---- contract generate ---------------------------------------------------------------

std::string section_of(const config::table_declaration& d) {
  return config::table_header(d.source, d.section.empty() ? d.table : d.section);
}

/// Two live columns whose names differ only in case cannot both be declared (the
/// loader's FLT-C019).
std::string duplicate_column(const schema::table_schema& live) {
  for (std::size_t i = 0; i < live.columns.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (schema::same_name(live.columns[i].name, live.columns[j].name,
                            schema::name_rule::case_insensitive))
        return fmt::format("'{}' and '{}'", live.columns[j].name, live.columns[i].name);
  return "";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(fmt::format("cannot read '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The reloaded file declares exactly the written columns for each table, in order, so
/// `contract diff` finds them equal to the live tables.
std::string check_written(const config::project& p,
                          const std::vector<config::table_declaration>& decls,
                          const std::vector<std::string>& catalog_names) {
  for (std::size_t i = 0; i < decls.size(); ++i) {
    const auto& d = decls[i];
    const auto* src = p.find_source(d.source);
    const auto* section = src ? config::find_table(*src, catalog_names[i]) : nullptr;
    if (section == nullptr)
      return fmt::format("{} is not found after writing", section_of(d));
    bool same = section->columns.size() == d.columns.size();
    for (std::size_t c = 0; same && c < d.columns.size(); ++c) {
      auto type = schema::parse_type(d.columns[c].type);
      same = section->columns[c].name == d.columns[c].name && type &&
             section->columns[c].type == *type;
    }
    if (!same)
      return fmt::format("{} does not declare the written columns after writing", section_of(d));
  }
  return "";
}

/// Writes the declarations into the config file; returns an error message or "".
std::string write_into_config(const std::string& path,
                              const std::vector<config::table_declaration>& decls,
                              const std::vector<std::string>& catalog_names,
                              std::vector<config::declaration_edit>& edits, bool& changed) {
  changed = false;
  std::string original;
  try {
    original = read_text(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  auto edited = config::write_declarations(original, decls);
  if (!edited)
    return fmt::format("{} was not changed: {}", path, edited.error().message);
  // Validate before replacing the file: a declaration the loader rejects (a cursor
  // column an enforced contract must declare, say) leaves the file as it was.
  auto check = config::load_project_text(edited->text, path);
  if (!check.ok()) {
    for (const auto& d : check.diagnostics)
      fmt::print(stderr, "{}\n", config::format(d));
    return fmt::format("{} was not changed: the declarations would not load", path);
  }
  edits = edited->edits;
  // The file declares all of it already: left alone, not rewritten (same bytes, new inode).
  if (edited->text == original)
    return "";
  changed = true;
  if (auto w = config::write_file_atomically(path, edited->text); !w)
    return fmt::format("{} was not changed: {}", path, w.error().message);
  auto reloaded = config::load_project(path);
  if (!reloaded.ok()) {
    for (const auto& d : reloaded.diagnostics)
      fmt::print(stderr, "{}\n", config::format(d));
    return fmt::format("{} was written but no longer loads", path);
  }
  if (auto problem = check_written(*reloaded.model, decls, catalog_names); !problem.empty())
    return fmt::format("{} was written but {}", path, problem);
  edits = edited->edits;
  return "";
}

std::string_view edit_label(config::declaration_edit e) {
  switch (e) {
    case config::declaration_edit::replaced_columns: return "columns replaced";
    case config::declaration_edit::added_columns: return "columns added";
    case config::declaration_edit::added_section: return "section added";
    case config::declaration_edit::unchanged: return "already declared";
  }
  return "";
}

int do_generate(const global_options& g, const contract_args& a) {
  std::vector<config::filter> filters;
  auto project = load_or_report(g, a.filters, filters);
  if (!project)
    return 2;
  const auto survey = survey_contracts(*project, filters);
  warn_if_nothing_surveyed(a, survey, "is proposed");

  nlohmann::json tables = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  std::vector<config::table_declaration> decls;
  std::vector<std::string> catalog_names;  // of each declaration
  std::vector<std::size_t> rows;           // index in `tables` of each declaration
  // Declarations of tables the source-drift gate checks today, and its policy for each.
  std::vector<std::pair<std::size_t, std::string_view>> gated;
  bool failed = false;
  // A section applies to every table whose name matches it ignoring case: a source with
  // `Orders` and `orders` cannot have either declared, since the section of one would
  // apply to the other too (and fail it, or load it under the wrong columns).
  const auto folded = [](const std::string& source, std::string_view table) {
    std::string k = source + '\n';
    for (char c : table)
      k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return k;
  };
  std::map<std::string, std::vector<std::string>> alike;  // folded name -> source tables
  for (const auto& t : survey.tables)
    alike[folded(t.source, t.source_table)].push_back(t.source_table);
  for (const auto& t : survey.tables) {
    const std::string name = display_name(t.where);
    std::string twin;
    for (const auto& other : alike[folded(t.source, t.source_table)])
      if (other != t.source_table)
        twin = other;
    nlohmann::json row{{"table", name},
                       {"source", t.source},
                       {"source_table", t.source_table},
                       {"target", t.target}};
    std::string dup = t.live ? duplicate_column(*t.live) : "";
    if (!t.absent_in_source.empty()) {
      fmt::print(stderr, "note: table:{}: {}; nothing to propose\n", name, t.absent_in_source);
      row["status"] = "missing_source_table";
      row["error"] = t.absent_in_source;
    } else if (!t.taken_by.empty()) {
      fmt::print(stderr, "note: table:{}: {}; nothing to propose\n", name, t.taken_by);
      row["status"] = "target_taken";
      row["error"] = t.taken_by;
    } else if (!t.unreadable.empty() || !dup.empty() || !twin.empty()) {
      const std::string why =
          !twin.empty()
              ? fmt::format("the source also has table '{}', whose name differs only in "
                            "case, and flotilla.toml takes one table section per name ignoring "
                            "case (FLT-C019): the two cannot both be declared; write the one "
                            "section by hand, spelled exactly as its table (which it then "
                            "configures alone), or rename one of them at the source",
                            twin)
          : dup.empty() ? t.unreadable
                        : fmt::format("its columns {} differ only in case, and "
                                      "flotilla.toml names columns ignoring case: "
                                      "rename one of them",
                                      dup);
      fmt::print(stderr, "error: table:{} cannot be declared: {}\n", name, why);
      row["status"] = dup.empty() && twin.empty() ? "unreadable" : "undeclarable";
      row["error"] = why;
      failed = true;
    } else if (!t.live) {
      fmt::print(stderr, "note: table:{} has no live table in target '{}'; nothing to propose\n",
                 name, t.target);
      row["status"] = "no_live_table";
    } else {
      config::table_declaration d;
      d.source = t.source;
      d.section = t.section ? t.section->name : "";
      d.table = t.source_table;
      nlohmann::json cols = nlohmann::json::array();
      nlohmann::json left_out = nlohmann::json::array();
      nlohmann::json replaced = nlohmann::json::array();  // declarations not live yet
      for (const auto& c : t.live->columns) {
        // A column the source dropped stays in the live table (never dropped), but a
        // declaration of it would fail every plan (FLT-S001): it is not proposed.
        if (t.source_columns.find(c.name, t.dialect->names()) == nullptr) {
          fmt::print(stderr,
                     "note: table:{} column '{}' is in the live table but no longer in the "
                     "source; not declared\n",
                     name, c.name);
          left_out.push_back(c.name);
          continue;
        }
        // A declaration the target stores as this live type stays as written (varchar(20)
        // on DuckDB, whose VARCHAR has no length; an alias, "integer" or "string"):
        // contract diff finds it OK, and rewriting it would drop what the user declared.
        std::string type = schema::to_string(c.type);
        if (t.section != nullptr)
          for (const auto& declared : t.section->columns)
            if (schema::same_name(declared.name, c.name, t.dialect->names())) {
              const std::string written = declared.type_text.empty()
                                              ? schema::to_string(declared.type)
                                              : declared.type_text;
              if (t.dialect->canonical(declared.type) == t.dialect->canonical(c.type)) {
                type = written;
              } else {
                // A declaration the live table does not have yet (a widening no run has
                // made): the proposal is of the live table, and says what it replaces.
                fmt::print(stderr,
                           "note: table:{} column '{}' is declared \"{}\", and the live table "
                           "has {} (no run has made the declared change yet): the proposal "
                           "declares the live type; keep \"{}\" in flotilla.toml if the next "
                           "run is to make that change\n",
                           name, c.name, written, type, written);
                replaced.push_back({{"column", c.name}, {"declared", written}, {"live", type}});
              }
            }
        // A live type that cannot hold every value of the source's (a HUGEINT the target
        // describes as decimal(38,0) where the source reads decimal(39,0)): declared as
        // the source's type, which the target stores as this live type; the live one would
        // fail the next plan (FLT-S002) of a table that loads today.
        if (const auto* from = t.source_columns.find(c.name, t.dialect->names());
            from != nullptr && type == schema::to_string(c.type) &&
            !schema::can_read_as(from->type, c.type)) {
          type = schema::to_string(from->type);
          fmt::print(stderr,
                     "note: table:{} column '{}' is {} in the live table, which cannot be read "
                     "from the source's {}: declared as the source's type, as the target "
                     "stores it\n",
                     name, c.name, schema::to_string(c.type), type);
        }
        d.columns.push_back(config::column_declaration{c.name, type});
        cols.push_back({{"name", c.name}, {"type", d.columns.back().type}});
      }
      // A declared column the live table lacks: kept as declared while the source has it
      // (the next run adds it); the proposal would otherwise drop it without a word.
      if (t.section != nullptr)
        for (const auto& declared : t.section->columns) {
          const bool live = std::any_of(
              t.live->columns.begin(), t.live->columns.end(), [&](const auto& c) {
                return schema::same_name(declared.name, c.name, t.dialect->names());
              });
          if (live)
            continue;
          const std::string written = declared.type_text.empty()
                                          ? schema::to_string(declared.type)
                                          : declared.type_text;
          if (t.source_columns.find(declared.name, t.dialect->names()) == nullptr) {
            fmt::print(stderr,
                       "note: table:{} column '{}' is declared but is neither in the live "
                       "table nor in the source; not declared\n",
                       name, declared.name);
            left_out.push_back(declared.name);
            continue;
          }
          fmt::print(stderr,
                     "note: table:{} column '{}' is declared \"{}\" and not in the live table "
                     "yet (no run has added it): the proposal keeps it as declared\n",
                     name, declared.name, written);
          replaced.push_back({{"column", declared.name}, {"declared", written}, {"live", nullptr}});
          d.columns.push_back(config::column_declaration{declared.name, written});
          cols.push_back({{"name", declared.name}, {"type", written}});
        }
      if (!left_out.empty())
        row["not_in_source"] = std::move(left_out);
      if (!replaced.empty())
        row["declared_not_live"] = std::move(replaced);
      row["status"] = "proposed";
      row["section"] = section_of(d);
      row["columns"] = std::move(cols);
      rows.push_back(tables.size());
      // Seed 004's gate skips tables whose enforced contract declares their columns: a
      // table it checked until now leaves it once the declaration is written, which
      // `--write` says.
      if (const auto* src = project->find_source(t.source);
          src != nullptr && (t.section == nullptr || t.section->columns.empty())) {
        const auto pol = config::effective_policy(*project, *src, t.section);
        if (pol.on_source_drift != config::drift_policy::ignore &&
            pol.contract == config::contract_mode::enforced)
          gated.push_back({decls.size(), config::to_string(pol.on_source_drift)});
      }
      decls.push_back(std::move(d));
      catalog_names.push_back(t.source_table);
    }
    tables.push_back(std::move(row));
  }
  report_failures(survey, errors);
  failed = failed || !survey.failures.empty();

  std::string proposal;
  for (const auto& d : decls)
    proposal += (proposal.empty() ? "" : "\n") + config::declaration_section(d);

  bool written = false, unchanged = false;
  std::vector<config::declaration_edit> edits;
  if (a.write && !decls.empty()) {
    bool changed = false;
    if (auto problem = write_into_config(g.config_path, decls, catalog_names, edits, changed);
        !problem.empty()) {
      fmt::print(stderr, "error: {}\n", problem);
      errors.push_back({{"config", g.config_path}, {"error", problem}});
      failed = true;
    } else if (!changed) {
      unchanged = true;
      for (std::size_t i = 0; i < decls.size(); ++i)
        tables[rows[i]]["edit"] = "unchanged";
    } else {
      written = true;
      for (std::size_t i = 0; i < edits.size(); ++i)
        tables[rows[i]]["edit"] = config::to_string(edits[i]);
      for (const auto& [i, policy] : gated)
        if (edits[i] != config::declaration_edit::unchanged)
          tables[rows[i]]["left_drift_gate"] = policy;
    }
  }

  if (a.output == "json") {
    nlohmann::json j{{"tables", tables}, {"toml", proposal}, {"written", written},
                     {"errors", errors}};
    if (a.write)
      j["config"] = g.config_path;
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (!a.write) {
    fmt::print("{}", proposal);
  } else if (unchanged) {
    fmt::print("{} already declares these {} table(s) as proposed; nothing written\n",
               g.config_path, decls.size());
  } else if (written) {
    // Those already declared as proposed are listed, not counted as written.
    const auto changed = static_cast<std::size_t>(std::count_if(
        edits.begin(), edits.end(),
        [](config::declaration_edit e) { return e != config::declaration_edit::unchanged; }));
    fmt::print("Wrote {} declaration(s) to {}\n", changed, g.config_path);
    for (std::size_t i = 0; i < decls.size(); ++i)
      fmt::print("  {:<18}{}\n", edit_label(edits[i]), section_of(decls[i]));
    for (const auto& [i, policy] : gated)
      if (edits[i] != config::declaration_edit::unchanged)
        fmt::print(stderr,
                   "note: {} now declares columns: on_source_drift = \"{}\" no longer checks "
                   "this table (the gate skips a table whose enforced contract declares its "
                   "columns; a contract diff or plan checks it)\n",
                   section_of(decls[i]), policy);
  } else if (decls.empty()) {
    fmt::print("Nothing to write: {}\n",
               failed ? "no selected table could be declared (see above)"
                      : "no selected table has a live table");
  }
  return failed ? 1 : 0;
}

}  // namespace

verb contract_verb() {
  auto diff_args = std::make_shared<contract_args>();
  auto generate_args = std::make_shared<contract_args>();
  auto diff = std::make_shared<CLI::App*>(nullptr);
  auto generate = std::make_shared<CLI::App*>(nullptr);
  auto glob = std::make_shared<global_options*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options& g) {
        *glob = &g;
        auto* c = app.add_subcommand("contract", "contract diff | contract generate [--write]");
        c->require_subcommand(1);
        auto* d = c->add_subcommand("diff",
                                    "compare each selected table's declared columns with its live "
                                    "table; changes nothing, exits 1 on any difference");
        d->add_option("--filter", diff_args->filters,
                      "select tables: tag=value, source=..., table=...");
        d->add_option("--output", diff_args->output, "text or json")
            ->check(CLI::IsMember({"text", "json"}));
        auto* gen = c->add_subcommand("generate",
                                      "propose the declarations that adopt each live table");
        gen->add_option("--filter", generate_args->filters,
                        "select tables: tag=value, source=..., table=...");
        gen->add_option("--output", generate_args->output, "text or json")
            ->check(CLI::IsMember({"text", "json"}));
        gen->add_flag("--write", generate_args->write,
                      "write the declarations into flotilla.toml, keeping the rest of the file");
        *diff = d;
        *generate = gen;
      },
      [=] { return (*diff && (*diff)->parsed()) || (*generate && (*generate)->parsed()); },
      [=] {
        if (*diff && (*diff)->parsed())
          return do_diff(**glob, *diff_args);
        return do_generate(**glob, *generate_args);
      }};
}

}  // namespace flotilla::cli
