// `flotilla schema accept [source.table ...]`: promotes the latest run's observed
// schemas into the source-drift baselines (seed 004). Reads and writes local state only:
// it never opens a connection to a source or a target.
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/fleet_builder.hpp"
#include "cli/run_exec.hpp"
#include "cli/run_output.hpp"
#include "cli/verbs.hpp"
#include "config/policy.hpp"
#include "events/schema_accept.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {
namespace {

struct schema_args {
  std::vector<std::string> datasets;
  std::string output = "text";
};

/// `--output json`: what was accepted, per dataset and column, or why nothing was.
void print_json(const events::accept_plan& plan, std::string_view status, int exit_code) {
  nlohmann::json accepted = nlohmann::json::array();
  for (const auto& d : plan.accepted) {
    nlohmann::json changes = nlohmann::json::array();
    for (const auto& c : d.changes)
      changes.push_back({{"kind", events::to_string(c.kind)},
                         {"column", c.column},
                         {"from", c.from},
                         {"to", c.to}});
    accepted.push_back({{"dataset", d.dataset},
                        {"first_baseline", d.first_baseline},
                        {"changes", std::move(changes)}});
  }
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : plan.errors)
    errors.push_back({{"code", events::code_name(e.code)}, {"message", e.message}});
  nlohmann::json doc{{"status", status},
                     {"exit_code", exit_code},
                     {"accepted", std::move(accepted)},
                     {"changes", plan.change_count()},
                     {"errors", std::move(errors)}};
  fmt::print("{}\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int do_accept(const global_options& g, const schema_args& a) {
  // Refused before anything is planned (flotilla.toml, the state store): the document
  // `--output json` prints all the same, its errors the refusal's.
  set_refusal_document([](const nlohmann::json& errors) {
    return nlohmann::json{{"status", "failed"},
                          {"exit_code", 2},
                          {"accepted", nlohmann::json::array()},
                          {"changes", 0},
                          {"errors", errors}};
  });
  std::vector<config::filter> filters;
  auto project = load_or_report(g, {}, filters);
  if (!project)
    return 2;

  std::unique_ptr<storage::state_store> store;
  std::optional<storage::pb::RunRecord> latest;
  std::map<std::string, storage::pb::SchemaBaseline> baselines;
  if (state_may_exist(std::filesystem::path(project->state_dir) / "state")) {
    store = open_state(*project, false);
    if (!store)
      return 2;
    auto run = store->latest_run();
    if (!run) {
      fmt::print(stderr, "{}\n", run.error().message);
      return 2;
    }
    latest = std::move(*run);
    if (latest && unfinished_run_status(latest->status())) {
      // A run killed before its end recorded no observed schema: the latest finished
      // run's are the ones to accept, as when the killed run had left nothing.
      auto recent = store->recent_runs();
      if (!recent) {
        fmt::print(stderr, "{}\n", recent.error().message);
        return 2;
      }
      latest.reset();
      for (auto& r : *recent)
        if (!unfinished_run_status(r.status())) {
          latest = std::move(r);
          break;
        }
    }
    auto stored = store->list<storage::pb::SchemaBaseline>();
    if (!stored) {
      fmt::print(stderr, "{}\n", stored.error().message);
      return 2;
    }
    for (auto& b : *stored)
      baselines.emplace(std::move(b.key), std::move(b.record));
  }

  const bool json = a.output == "json";
  // Tables the gate skips: their sections declare columns under an enforced contract,
  // which prunes the read to them.
  std::set<std::string> declared;
  for (const auto& src : project->sources)
    for (const auto& t : src.tables)
      if (!t.columns.empty() &&
          config::effective_policy(*project, src, &t).contract == config::contract_mode::enforced)
        declared.insert(events::dataset_name(src.name, t.name));
  // The latest run's tables whose gate is "ignore" now: their schema is never observed.
  std::set<std::string> ignored;
  if (latest)
    for (const auto& t : latest->tables()) {
      if (t.has_observed_schema())
        continue;
      for (const auto& src : project->sources)
        if (src.name == t.source() &&
            config::effective_policy(*project, src, t.source_table()).on_source_drift ==
                config::drift_policy::ignore)
          ignored.insert(events::dataset_name(t.source(), t.source_table()));
    }
  auto plan = events::plan_accept(latest ? &*latest : nullptr, a.datasets, baselines, now_us(),
                                  declared, ignored);
  if (!plan.errors.empty()) {
    for (const auto& e : plan.errors)
      fmt::print(stderr, "error {}\n", e.text());
    fmt::print(stderr, "nothing was accepted\n");
    if (json) {
      plan.accepted.clear();
      print_json(plan, "failed", 2);
    }
    return 2;
  }
  if (plan.accepted.empty()) {
    if (json)
      print_json(plan, "nothing_to_accept", 0);
    else if (a.datasets.empty() && latest &&
             (latest->filters_size() > 0 || latest->only_size() > 0 ||
              latest->failed_sources_size() > 0))
      // Accept reads the latest run only (seed 004): a table it did not observe is not
      // compared, whatever an earlier run saw.
      fmt::print("nothing to accept: no table the latest run ({}) observed differs from its "
                 "baseline. That run was {}: a drift an earlier run warned of on a table it "
                 "did not observe (left out, or loaded from staged data) is accepted once a "
                 "run observes that table again: run `flotilla run`{}, then accept\n",
                 latest->run_id(),
                 latest->filters_size() > 0
                     ? "a run with --filter " + [&] {
                         std::string f;
                         for (const auto& x : latest->filters())
                           f += (f.empty() ? "" : " --filter ") + x;
                         return f;
                       }()
                 : latest->only_size() > 0 ? std::string("a retry, which had only the tables it "
                                                         "retried")
                                           : std::string("a run that could not read a source"),
                 latest->filters_size() > 0 ? " (without the filter)"
                 : latest->only_size() > 0  ? ""
                                            : " once the source is reachable");
    else
      fmt::print("nothing to accept\n");
    return 0;
  }
  for (const auto& d : plan.accepted) {
    if (auto st = store->put(d.dataset, d.baseline); !st) {
      fmt::print(stderr, "the baseline of {} could not be written: {}\n", d.dataset,
                 st.error().message);
      return 2;
    }
  }
  if (json) {
    print_json(plan, "accepted", 0);
    return 0;
  }
  // A name a source holds may hold a line break: shown escaped, one change a line, as
  // `run` shows it.
  for (const auto& line : plan.lines())
    fmt::print("{}\n", printable(line));
  fmt::print("accepted {} schema change(s)\n", plan.change_count());
  return 0;
}

}  // namespace

verb schema_verb() {
  auto args = std::make_shared<schema_args>();
  auto accept = std::make_shared<CLI::App*>(nullptr);
  auto glob = std::make_shared<global_options*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options& g) {
        *glob = &g;
        auto* s = app.add_subcommand("schema", "source-drift baselines (on_source_drift)");
        s->require_subcommand(1);
        auto* acc = s->add_subcommand(
            "accept",
            "promote the latest run's observed schemas into the baselines (all that differ, "
            "or the named ones); opens no connection");
        acc->add_option("datasets", args->datasets,
                        "<source>.<table> ... (default: every one "
                        "that differs)");
        acc->add_option("--output", args->output, "text or json")
            ->check(CLI::IsMember({"text", "json"}));
        *accept = acc;
      },
      [=] { return *accept && (*accept)->parsed(); }, [=] { return do_accept(**glob, *args); }};
}

}  // namespace flotilla::cli
