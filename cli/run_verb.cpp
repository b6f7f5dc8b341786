// `flotilla run` and `flotilla plan`.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/fleet_builder.hpp"
#include "cli/run_exec.hpp"
#include "cli/verbs.hpp"
#include "events/event.hpp"
#include "events/run_events.hpp"
#include "events/source_drift.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {
namespace {

std::atomic<bool> g_cancel{false};

extern "C" void on_interrupt(int) {
  g_cancel.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
  std::signal(SIGTERM, SIG_DFL);
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Live progress on a terminal: tables done/total and rows/s. Quiet when piped.
class progress_line {
 public:
  explicit progress_line(actors::progress& p) : p_(p) {
    if (!isatty(STDERR_FILENO))
      return;
    thread_ = std::thread([this] {
      auto start = std::chrono::steady_clock::now();
      while (!stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        fmt::print(stderr, "\r\x1b[Ktables {}/{}  rows {}  {:.0f} rows/s", p_.tables_done.load(),
                   p_.tables_total.load(), p_.rows.load(), secs > 0 ? p_.rows.load() / secs : 0.0);
      }
      fmt::print(stderr, "\r\x1b[K");
    });
  }
  ~progress_line() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }

 private:
  actors::progress& p_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

nlohmann::json run_json(const std::string& run_id, const std::vector<actors::pipeline_report>& reports,
                        std::string& status_out, std::size_t& failed_out) {
  nlohmann::json tables = nlohmann::json::array();
  nlohmann::json actions = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  std::size_t checked = 0, drifted = 0, failed = 0, ok = 0;
  std::size_t source_checked = 0, source_drifted = 0;
  for (const auto& p : reports) {
    if (p.error) {
      ++failed;
      errors.push_back({{"source", p.source}, {"error", *p.error}});
    }
    for (const auto& t : p.tables) {
      const auto& o = t.outcome;
      nlohmann::json row{{"table", display_name(t.target)},
                         {"source", t.source},
                         {"source_table", t.table},
                         {"status", engine::to_string(o.status)},
                         {"rows", o.rows},
                         {"error", o.error ? nlohmann::json(*o.error) : nlohmann::json(nullptr)}};
      if (!o.error_code.empty())
        row["error_code"] = o.error_code;
      if (o.reused_staged)
        row["reused_staged"] = true;
      if (const auto* v = drift_verdict_of(o)) {
        ++source_checked;
        source_drifted += v->drifted() ? 1 : 0;
        nlohmann::json changes = nlohmann::json::array();
        for (const auto& c : v->changes)
          changes.push_back({{"kind", events::to_string(c.kind)},
                             {"column", c.column},
                             {"from", c.from},
                             {"to", c.to}});
        row["source_drift"] = {{"decision", events::to_string(v->decision)},
                               {"policy", v->policy == config::drift_policy::fail ? "fail" : "warn"},
                               {"changes", changes},
                               {"hints_hash", v->hints_hash},
                               {"baseline_run_id", v->baseline_run_id}};
      }
      if (o.plan) {
        row["load"] = engine::to_string(o.plan->load);
        if (o.plan->drift_checked)
          ++checked;
        if (o.plan->drift.drifted())
          ++drifted;
        // Only what was done: a refused or failed table took no action.
        if (o.status == engine::table_status::copied)
          for (const auto& s : o.plan->drift.steps)
            actions.push_back({{"table", display_name(t.target)},
                             {"action", schema::to_string(s.action)},
                             {"column", s.column},
                             {"reason", s.reason}});
      }
      tables.push_back(std::move(row));
      if (o.status == engine::table_status::failed || o.status == engine::table_status::skipped)
        ++failed;  // a skipped table did not get its data: the run is not a success
      else
        ++ok;
    }
  }
  status_out = failed == 0 ? "success" : (ok == 0 ? "failed" : "partial");
  failed_out = failed;
  nlohmann::json j{{"run_id", run_id},
                   {"status", status_out},
                   {"tables", tables},
                   {"drift",
                    {{"tables_checked", checked},
                     {"tables_drifted", drifted},
                     {"actions_taken", actions}}}};
  j["source_drift"] = {{"tables_checked", source_checked}, {"tables_drifted", source_drifted}};
  if (!errors.empty())
    j["errors"] = errors;
  return j;
}

void print_run_text(const nlohmann::json& j) {
  std::size_t copied = 0, pruned = 0, failed = 0, skipped = 0, rows = 0;
  for (const auto& t : j["tables"]) {
    const std::string s = t["status"];
    copied += s == "copied";
    pruned += s == "pruned";
    failed += s == "failed";
    skipped += s == "skipped";
    rows += t["rows"].get<std::size_t>();
  }
  for (const auto& a : j["drift"]["actions_taken"])
    fmt::print("{:<20} {}  {}\n", a["action"].get<std::string>(), a["table"].get<std::string>(),
               a["reason"].get<std::string>());
  for (const auto& t : j["tables"])
    if (t["status"] == "failed")
      fmt::print("failed  {}  {}{}\n", t["table"].get<std::string>(),
                 t.contains("error_code") ? t["error_code"].get<std::string>() + ": " : "",
                 t["error"].is_null() ? "" : t["error"].get<std::string>());
  if (j.contains("errors"))
    for (const auto& e : j["errors"])
      fmt::print("failed  source {}  {}\n", e["source"].get<std::string>(),
                 e["error"].get<std::string>());
  if (j.contains("events"))
    for (const auto& e : j["events"]["errors"])
      fmt::print("events  {}\n", e.get<std::string>());
  fmt::print("Run {}  {}: {} copied, {} pruned, {} failed, {} skipped, {} rows; drift: {} checked, "
             "{} drifted\n",
             j["run_id"].get<std::string>(), j["status"].get<std::string>(), copied, pruned,
             failed, skipped, rows, j["drift"]["tables_checked"].get<std::size_t>(),
             j["drift"]["tables_drifted"].get<std::size_t>());
}

void record_run(storage::state_store& store, const run_request& req, const std::string& run_id,
                std::int64_t started, const nlohmann::json& j,
                const std::vector<actors::pipeline_report>& reports) {
  storage::pb::RunRecord r;
  r.set_run_id(run_id);
  r.set_status(j["status"].get<std::string>());
  r.set_started_at_us(started);
  r.set_finished_at_us(now_us());
  r.set_command(req.command);
  r.set_retry_of(req.retry_of);
  for (const auto& f : req.filters)
    r.add_filters(f);
  for (const auto& p : reports) {
    if (p.error)
      r.add_failed_sources(p.source);
    for (const auto& t : p.tables) {
      const auto& o = t.outcome;
      auto* tr = r.add_tables();
      tr->set_table(display_name(t.target));
      tr->set_source(t.source);
      tr->set_source_table(t.table);
      tr->set_status(std::string(engine::to_string(o.status)));
      tr->set_rows(o.rows);
      if (o.error)
        tr->set_error(*o.error);
      tr->set_error_code(o.error_code);
      tr->set_run_id(run_id);
      tr->set_reused_staged(o.reused_staged);
      if (o.plan)
        tr->set_drifted(o.plan->drift.drifted());
      // What the drift gate saw, for `schema accept`. A retry that reused staged data
      // records nothing, unless the gate failed it again (seed 004, docs/events.md).
      if (const auto* v = drift_verdict_of(o))
        if (!o.reused_staged || v->decision == events::drift_decision::fail)
          events::record_observation(*tr, *v);
    }
  }
  r.mutable_drift()->set_tables_checked(j["drift"]["tables_checked"].get<std::uint64_t>());
  r.mutable_drift()->set_tables_drifted(j["drift"]["tables_drifted"].get<std::uint64_t>());
  auto st = store.put_run(r);
  if (!st)
    fmt::print(stderr, "warning: the run record could not be stored: {}\n", st.error().message);
}

/// Writes the run's events (events.ndjson, and every configured event sink through the
/// outbox) and waits for their delivery; the outcome goes into the run JSON. Table events
/// are emitted in each table's order once the fleet has reported.
bool publish_events(storage::state_store& store, const config::project& project,
                    const run_request& req, const std::string& run_id, std::int64_t started,
                    const std::vector<actors::pipeline_report>& reports, nlohmann::json& j) {
  auto ev = events::run_events::open(&store, project, run_id);
  if (!ev) {
    j["events"] = {{"errors", nlohmann::json::array({ev.error().text()})}};
    return false;
  }
  auto& log = **ev;
  std::uint64_t selected = 0;
  for (const auto& p : reports)
    selected += p.tables.size();
  (void)log.emit(events::run_started({req.command, req.filters, selected, req.retry_of}));
  events::run_totals totals;
  // The table events in one batch: one write to events.ndjson (and one outbox append)
  // for the whole fleet rather than one per event.
  std::vector<events::pb::Event> table_events;
  table_events.reserve(2 * selected);
  for (const auto& p : reports)
    for (const auto& t : p.tables) {
      const auto& o = t.outcome;
      const std::string target = display_name(t.target);
      table_events.push_back(events::table_started(
          t.source, t.table, target,
          o.reused_staged ? "retry" : o.plan ? engine::to_string(o.plan->load) : "none"));
      if (o.plan && o.status == engine::table_status::copied)
        for (const auto& step : o.plan->drift.steps)
          table_events.push_back(events::schema_action(
              t.source, t.table,
              {std::string(schema::to_string(step.action)), step.column,
               step.from ? schema::to_string(*step.from) : "", schema::to_string(step.to),
               step.reason, ""}));
      if (const auto* v = drift_verdict_of(o); v && v->drifted())
        table_events.push_back(events::source_drift_detected(*v));
      if (o.plan && o.plan->error && o.plan->error->code == "FLT-S008")
        table_events.push_back(events::review_required(
            t.source, t.table, {"", "schema_change", "", o.plan->error->reason, "", "", false, ""}));
      else if (o.plan && o.plan->error)
        table_events.push_back(events::contract_violation(
            t.source, t.table, {"", "", "", o.plan->error->reason, o.plan->error->code}));
      table_events.push_back(events::table_finished(
          t.source, t.table,
          {std::string(engine::to_string(o.status)), o.rows, o.error.value_or(""), o.error_code, 0,
           target}));
      switch (o.status) {
        case engine::table_status::copied: ++totals.tables_copied; break;
        case engine::table_status::pruned: ++totals.tables_pruned; break;
        case engine::table_status::failed: ++totals.tables_failed; break;
        case engine::table_status::skipped: ++totals.tables_skipped; break;
        case engine::table_status::held: ++totals.tables_held; break;
      }
    }
  (void)log.emit_all(std::move(table_events));
  totals.status = j["status"].get<std::string>();
  totals.tables_checked = j["drift"]["tables_checked"].get<std::uint64_t>();
  totals.tables_drifted = j["drift"]["tables_drifted"].get<std::uint64_t>();
  totals.duration_us = now_us() - started;
  (void)log.emit(events::run_finished(totals));
  auto report = log.finish();
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : report.errors)
    errors.push_back(e.text());
  j["events"] = {{"log", report.log_path.string()},
                 {"emitted", report.emitted},
                 {"delivered", report.delivered},
                 {"pending", report.pending},
                 {"errors", errors}};
  return report.ok();
}

}  // namespace

int execute_run(const global_options& g, const run_request& a) {
  std::vector<config::filter> filters;
  auto project = load_or_report(g, a.filters, filters);
  if (!project)
    return 2;
  auto store = open_state(*project, true);
  if (!store)
    return 2;
  const std::string run_id = new_run_id();
  const std::int64_t started = now_us();
  fleet_options fo;
  fo.no_prune = a.no_prune;
  fo.allow_type_change_rebuild = a.allow_rebuild;
  fo.run_id = run_id;
  fo.only = a.only;
  fo.reuse_staged = a.reuse_staged;
  auto spec = build_fleet(*project, filters, store.get(), fo);
  actors::progress counters;
  spec.progress_counters = &counters;
  spec.cancel = &g_cancel;
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  std::vector<actors::pipeline_report> reports;
  {
    progress_line line(counters);
    reports = actors::run_fleet(spec);
  }
  std::string status;
  std::size_t failed = 0;
  auto j = run_json(run_id, reports, status, failed);
  if (a.command == "retry")
    j["retry_of"] = a.retry_of;
  const bool events_ok = publish_events(*store, *project, a, run_id, started, reports, j);
  record_run(*store, a, run_id, started, j, reports);
  std::filesystem::path dir = std::filesystem::path(project->state_dir) / "runs" / run_id;
  std::filesystem::create_directories(dir);
  const std::string text = j.dump(2);
  std::ofstream(dir / "run.json") << text << "\n";
  if (a.output == "json")
    fmt::print("{}\n", text);
  else
    print_run_text(j);
  if (g_cancel.load())
    return 1;
  return failed == 0 && events_ok ? 0 : 1;
}

verb run_verb() {
  auto args = std::make_shared<run_request>();
  auto sub = std::make_shared<CLI::App*>(nullptr);
  auto glob = std::make_shared<global_options*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options& g) {
        *glob = &g;
        auto* s = app.add_subcommand("run", "copy the selected tables into their targets, "
                                            "evolving their schemas");
        s->add_option("--filter", args->filters, "select tables: tag=value, source=..., table=...");
        s->add_option("--output", args->output, "text or json")
            ->check(CLI::IsMember({"text", "json"}));
        s->add_flag("--no-prune", args->no_prune, "copy every table, even unchanged ones");
        s->add_flag("--allow-type-change-rebuild", args->allow_rebuild,
                    "confirm type changes that rebuild a table");
        *sub = s;
      },
      [=] { return *sub && (*sub)->parsed(); },
      [=] { return execute_run(**glob, *args); }};
}

}  // namespace flotilla::cli
