// `flotilla plan`: what a run would do, without doing it (seed 000's tree, seed 001's SQL).
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/fleet_builder.hpp"
#include "cli/run_output.hpp"
#include "cli/verbs.hpp"
#include "config/selection.hpp"
#include "dialects/dialect.hpp"
#include "events/source_drift.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {
namespace {

struct plan_args {
  std::vector<std::string> filters;
  std::string output = "text";
  bool no_prune = false;
  bool full_refresh = false;
  bool allow_rebuild = false;
  bool show_sql = false;
  bool explain = false;
};

std::string shape_label(const std::string& shape) {
  if (shape == "create") return "create table";
  if (shape == "evolve") return "alter table";
  if (shape == "recreate") return "drop and recreate";
  if (shape == "rebuild") return "rebuild table";
  return "load";
}

int do_plan(const global_options& g, const plan_args& a) {
  std::vector<config::filter> filters;
  auto project = load_or_report(g, a.filters, filters);
  if (!project)
    return 2;
  // Plan reads local state (markers, watermarks) when it exists, and never creates it.
  std::string state_refused;  // a store there that cannot be read: run refuses it
  auto store = open_state_to_read(*project, &state_refused);
  fleet_options fo;
  fo.plan_only = true;
  fo.no_prune = a.no_prune;
  fo.full_refresh = a.full_refresh;
  fo.allow_type_change_rebuild = a.allow_rebuild;
  auto spec = build_fleet(*project, filters, store.get(), fo);
  auto reports = actors::run_fleet(spec);
  // With a filter, the sources that select nothing are said too (see run).
  print_source_warnings(warn_if_nothing_selected(*project, a.filters, reports, "is planned") &&
                        a.filters.empty());
  // The tables an unreadable source's earlier runs copied: a run would fail them, and
  // says so; plan counts them alike.
  if (store)
    list_tables_of_failed_sources(*project, *store, filters, {}, reports);

  // One dialect per target dialect named, for every table's actions.
  std::map<std::string, std::unique_ptr<dialects::dialect>, std::less<>> dialects_by_name;
  auto dialect_named = [&](const std::string& name) -> const dialects::dialect* {
    auto it = dialects_by_name.find(name);
    if (it == dialects_by_name.end()) {
      auto made = dialects::make_dialect(name);
      it = dialects_by_name.emplace(name, made ? std::move(*made) : nullptr).first;
    }
    return it->second.get();
  };
  nlohmann::json tables = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  std::size_t selected = 0, to_alter = 0, to_load = 0, failed = 0, pruned = 0, held = 0;
  std::size_t skipped = 0;  // of `held`: skipped, not held by a review
  std::size_t tables_failed = 0;  // of `selected`: the tables a run would fail
  std::size_t sources_failed = 0;  // sources whose catalog could not be read, as run counts
  for (const auto& p : reports) {
    if (p.error) {
      ++failed;
      ++sources_failed;
      errors.push_back({{"source", p.source}, {"error", *p.error}, {"error_code", "FLT-R002"}});
    }
    for (const auto& t : p.tables) {
      ++selected;
      nlohmann::json row{{"table", display_name(t.target)},
                         {"source", t.source},
                         {"source_table", t.table}};
      if (const auto* src = project->find_source(t.source))
        if (const auto* section = config::find_table(*src, t.table);
            section != nullptr && !section->description.empty())
          row["description"] = section->description;
      const auto& o = t.outcome;
      if (o.status == engine::table_status::failed) {
        ++failed;
        ++tables_failed;
        row["status"] = "failed";
        if (!o.error_code.empty())
          row["error_code"] = o.error_code;
        row["error"] = o.error.value_or("");
        errors.push_back({{"table", display_name(t.target)},
                          {"source", t.source},
                          {"source_table", t.table},
                          {"error", o.error.value_or("")}});
        if (!o.error_code.empty())
          errors.back()["error_code"] = o.error_code;
      } else if (o.status == engine::table_status::pruned) {
        ++pruned;
        row["status"] = "pruned";
      } else if (o.status == engine::table_status::held ||
                 o.status == engine::table_status::skipped) {
        ++held;
        if (o.status == engine::table_status::skipped)
          ++skipped;
        // Held by an open review (a stream's, seed 003): a run leaves it alone, and says so.
        row["status"] = std::string(engine::to_string(o.status));
        if (!o.error_code.empty())
          row["error_code"] = o.error_code;
        row["error"] = o.error.value_or("");
      } else if (o.plan && o.plan->error) {
        ++failed;
        ++tables_failed;
        row["status"] = "failed";
        row["error_code"] = o.plan->error->code;
        row["error"] = o.plan->error->reason;
        // What else the plan found (columns a contract leaves out, say), as the run says.
        if (!o.plan->warnings.empty())
          row["warnings"] = o.plan->warnings;
        errors.push_back({{"table", display_name(t.target)},
                          {"source", t.source},
                          {"source_table", t.table},
                          {"error", o.plan->error->reason},
                          {"error_code", o.plan->error->code}});
      } else if (o.plan) {
        const auto& pl = *o.plan;
        row["status"] = "planned";
        // A live table Flotilla cannot read (a column it cannot map) is planned as absent,
        // "create": it is dropped first, and said so.
        const bool drops_live =
            pl.shape_action == "create" &&
            std::any_of(pl.drift.steps.begin(), pl.drift.steps.end(), [](const auto& s) {
              return s.action == schema::evolution_action::drop_and_recreate;
            });
        row["shape_action"] = drops_live ? std::string("recreate") : pl.shape_action;
        row["load"] = engine::to_string(pl.load);
        nlohmann::json actions = nlohmann::json::array();
        const auto* src = project->find_source(t.source);
        const auto* tgt = src ? project->target_of(*src) : nullptr;
        const dialects::dialect* dialect = dialect_named(tgt ? tgt->dialect : "duckdb");
        for (const auto& s : pl.drift.steps) {
          actions.push_back({{"action", schema::seed_action(s.action)},
                             {"step", schema::to_string(s.action)},
                             {"column", s.column},
                             {"reason", s.reason},
                             {"decided_by", s.decided_by},
                             {"line", dialect ? engine::describe_step(s, *dialect) : s.reason}});
          if (!s.also.empty())
            actions.back()["also"] = s.also;
        }
        row["actions"] = std::move(actions);
        if (!t.not_pruned.empty())
          row["not_pruned"] = t.not_pruned;
        row["warnings"] = pl.warnings;
        row["plan_only"] = dialect && !dialect->executable();
        nlohmann::json sql = nlohmann::json::array();
        if (!pl.schema_sql.empty())
          sql.push_back(pl.schema_sql);
        for (const auto& s : pl.ddl)
          sql.push_back(s);
        for (const auto& s : pl.staging_sql)
          sql.push_back(s);
        for (const auto& s : pl.swap_sql)
          sql.push_back(s);
        row["sql"] = std::move(sql);
        ++to_load;
        // A live table dropped for a column Flotilla cannot map is altered too (a drop and
        // recreate), though planned as a table created anew.
        if (pl.shape_action == "evolve" || pl.shape_action == "recreate" ||
            pl.shape_action == "rebuild" || (pl.live_unmappable && !pl.ddl.empty()))
          ++to_alter;
      }
      // What the source-drift gate (seed 004) would decide, as the run reports it.
      if (const auto* v = drift_verdict_of(o); v != nullptr && v->drifted()) {
        nlohmann::json changes = nlohmann::json::array();
        for (const auto& c : v->changes)
          changes.push_back({{"column", c.column},
                             {"from", c.from},
                             {"kind", events::to_string(c.kind)},
                             {"to", c.to}});
        row["source_drift"] = {{"baseline_run_id", v->baseline_run_id},
                               {"changes", std::move(changes)},
                               {"decision", events::to_string(v->decision)},
                               {"policy", v->policy == config::drift_policy::fail ? "fail" : "warn"}};
        if (v->decision == events::drift_decision::warn)
          row["warnings"].push_back(v->warning.starts_with("warning: ") ? v->warning.substr(9)
                                                                         : v->warning);
      }
      // A table that would fail says why it is not pruned too, as the run JSON does.
      if (!t.not_pruned.empty() && !row.contains("not_pruned") && row["status"] != "pruned")
        row["not_pruned"] = t.not_pruned;
      tables.push_back(std::move(row));
    }
  }

  // Events earlier runs left undelivered (their sinks were down): the run sends them
  // first, or keeps them while no sink is configured.
  std::uint64_t backlog = 0;
  if (store)
    if (auto waiting = store->outbox_size())
      backlog = *waiting;
  const bool has_sink = project->events.kafka || project->events.pubsub;
  const std::string backlog_line =
      backlog == 0 ? std::string()
      : has_sink
          ? fmt::format("{} event(s) earlier runs left undelivered wait in the outbox: the run "
                        "sends them first",
                        backlog)
          : fmt::format("{} event(s) earlier runs left undelivered wait in the outbox, and "
                        "flotilla.toml configures no event sink ([events.kafka], "
                        "[events.pubsub]): they are kept until one is configured",
                        backlog);
  if (a.output == "json") {
    nlohmann::json j{{"selected", selected},
                     {"to_alter", to_alter},
                     {"to_load", to_load},
                     {"pruned", pruned},
                     {"held", held - skipped},
                     {"skipped", skipped},
                     {"failed", tables_failed}};
    j["tables"] = std::move(tables);
    j["errors"] = std::move(errors);  // always there, empty when nothing failed
    if (const std::string warnings = config_warnings_json(); !warnings.empty())
      j["config_warnings"] = nlohmann::json::parse(warnings);
    if (const std::string warnings = source_warnings_json(); !warnings.empty())
      j["source_warnings"] = nlohmann::json::parse(warnings);
    if (backlog > 0)
      j["events"] = {{"message", backlog_line}, {"pending", backlog}};
    if (!state_refused.empty())
      j["state_error"] = {{"code", "FLT-R007"}, {"message", state_refused}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return failed == 0 && state_refused.empty() ? 0 : 1;
  }

  // A target table name two rows share (two tables landing on one, FLT-R006) is told
  // apart by the table each row comes from.
  // Names are compared without case, and a row refused for another's target table
  // (FLT-R006) is always told apart: the two may spell one table differently
  // (`orders` and `public.orders`, `Orders` and `orders`).
  const auto folded = [](std::string v) {
    for (auto& c : v)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return v;
  };
  std::map<std::string, std::size_t> uses;
  for (const auto& t : tables)
    ++uses[folded(t["table"].get<std::string>())];
  const auto shown = [&](const nlohmann::json& row) {
    std::string name = row["table"].get<std::string>();
    if ((uses[folded(name)] > 1 || row.value("error_code", std::string()) == "FLT-R006") &&
        row.contains("source_table"))
      name += fmt::format(" (from {}.{})", row["source"].get<std::string>(),
                          row["source_table"].get<std::string>());
    return name;
  };
  fmt::print("Plan ready  {} selected, {} to alter, {} to load{}{}{}{}{}\n\n", selected, to_alter,
             to_load, pruned == 0 ? std::string() : fmt::format(", {} pruned", pruned),
             held == skipped ? std::string() : fmt::format(", {} held", held - skipped),
             skipped == 0 ? std::string() : fmt::format(", {} skipped", skipped),
             tables_failed == 0 ? std::string() : fmt::format(", {} failed", tables_failed),
             sources_failed == 0 ? std::string()
                                 : fmt::format(", {} source(s) failed", sources_failed));
  if (!backlog_line.empty())
    fmt::print("events  {}\n\n", backlog_line);
  fmt::print("{:<50}  {}\n", fmt::format("Objects ({})", tables.size()), "flotilla run");
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const auto& t = tables[i];
    const bool last = i + 1 == tables.size();
    const std::string branch = last ? "└── " : "├── ";
    const std::string indent = last ? "    " : "│   ";
    const std::string status = t.value("status", std::string("not planned"));
    std::string label = status == "planned" ? shape_label(t["shape_action"]) : status;
    if (status == "planned" && t["load"] != "full_refresh")
      label += fmt::format(", {}", t["load"].get<std::string>());
    // At least two spaces between a long name and its label.
    fmt::print("{:<50}  {}\n", branch + printable(shown(t)), label);
    std::vector<std::string> lines;
    if (t.contains("description"))
      lines.push_back(fmt::format("description  {}", t["description"].get<std::string>()));
    if (t.contains("actions"))
      for (const auto& s : t["actions"]) {
        std::string line = s["line"];
        // Said once: a line that already ends with what decided it (drop not null's).
        if (const auto& by = s["decided_by"].get_ref<const std::string&>();
            a.explain && !by.empty() && !line.ends_with(by))
          line += fmt::format("  [{}]", by);
        lines.push_back(line);
      }
    if ((status == "held" || status == "skipped") && t.contains("error"))
      lines.push_back(fmt::format("reason  {}{}",
                                  t.contains("error_code")
                                      ? t["error_code"].get<std::string>() + ": "
                                      : std::string(),
                                  t["error"].get<std::string>()));
    if (a.explain && t.contains("not_pruned"))
      lines.push_back(fmt::format("not pruned  {}", t["not_pruned"].get<std::string>()));
    if (t.contains("warnings"))
      for (const auto& w : t["warnings"])
        lines.push_back(fmt::format("warning  {}", w.get<std::string>()));
    // A statement keeps its own lines (a DO block is pasted as it is printed), each
    // continuation under the first, in the tree.
    const std::size_t first_sql = lines.size();
    if (t.contains("sql") && (a.show_sql || t.value("plan_only", false)))
      for (const auto& s : t["sql"])
        lines.push_back(fmt::format("sql  {}", s.get<std::string>()));
    for (std::size_t k = 0; k < lines.size(); ++k) {
      const bool last = k + 1 == lines.size();
      std::string_view text = lines[k];
      const auto nl = k >= first_sql ? text.find('\n') : std::string_view::npos;
      fmt::print("{}{}{}\n", indent, last ? "└── " : "├── ", printable(text.substr(0, nl)));
      for (auto rest = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
           nl != std::string_view::npos;) {
        const auto next = rest.find('\n');
        fmt::print("{}{}     {}\n", indent, last ? "    " : "│   ", printable(rest.substr(0, next)));
        if (next == std::string_view::npos)
          break;
        rest = rest.substr(next + 1);
      }
    }
  }
  if (!errors.empty()) {
    fmt::print("\nErrors ({})\n", errors.size());
    for (std::size_t i = 0; i < errors.size(); ++i) {
      const auto& e = errors[i];
      const bool last = i + 1 == errors.size();
      fmt::print("{}{}\n", last ? "└── " : "├── ",
                 printable(e.contains("table") ? shown(e) : e["source"].get<std::string>()));
      fmt::print("{}└── reason  {}\n", last ? "    " : "│   ",
                 printable_message(e["error"].get<std::string>()));
    }
  }
  // A state store run refuses (damaged, unreadable): the run this plans would not happen.
  return failed == 0 && state_refused.empty() ? 0 : 1;
}

}  // namespace

verb plan_verb() {
  auto args = std::make_shared<plan_args>();
  auto sub = std::make_shared<CLI::App*>(nullptr);
  auto glob = std::make_shared<global_options*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options& g) {
        *glob = &g;
        auto* s = app.add_subcommand("plan", "show what a run would do, without doing it");
        s->add_option("--filter", args->filters, "select tables: tag=value, source=..., table=...");
        s->add_option("--output", args->output, "text or json")
            ->check(CLI::IsMember({"text", "json"}));
        s->add_flag("--no-prune", args->no_prune, "plan every table, even unchanged ones");
        s->add_flag("--full-refresh", args->full_refresh,
                    "plan every selected table copied in full, as `run --full-refresh` copies it");
        s->add_flag("--allow-type-change-rebuild", args->allow_rebuild,
                    "plan as if type changes that rebuild a table were confirmed");
        s->add_flag("--sql", args->show_sql, "show the exact SQL of each object (JSON always has it)");
        s->add_flag("--explain", args->explain, "show which setting decided each change");
        *sub = s;
      },
      [=] { return *sub && (*sub)->parsed(); },
      [=] { return do_plan(**glob, *args); }};
}

}  // namespace flotilla::cli
