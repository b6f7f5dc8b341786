// `flotilla retry`: re-runs the failed tables of the latest run, loading the data they
// staged instead of extracting again (seed 004; docs/events.md, "Retry").
#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/fleet_builder.hpp"
#include "cli/run_exec.hpp"
#include "cli/verbs.hpp"
#include "config/selection.hpp"
#include "events/outbox_relay.hpp"
#include "events/run_events.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {
namespace {

/// Nothing to retry: the message, or under --output json a run JSON with no table (a
/// scheduler parsing stdout gets JSON either way).
/// `failed`: the events an earlier run left undelivered could not be sent now either
/// (each error, said on stderr already): the exit code is 1 and the JSON says why.
struct backlog_report {
  std::uint64_t delivered = 0;          // events an earlier run left undelivered, sent now
  std::uint64_t pending = 0;            // still waiting in the outbox
  std::vector<events::error> errors;    // why the rest could not be sent (said on stderr)
};

int nothing_to_retry(const run_request& req, const std::string& message,
                     const std::string& latest_id, const backlog_report& backlog = {}) {
  const auto& failed = backlog.errors;
  const int code = failed.empty() ? 0 : 1;
  if (req.output != "json") {
    fmt::print("{}\n", message);
    return code;
  }
  nlohmann::ordered_json j;
  j["drift"] = {{"actions_taken", nlohmann::json::array()},
                {"tables_checked", 0},
                {"tables_drifted", 0}};
  j["errors"] = nlohmann::json::array();
  for (const auto& e : failed)
    j["errors"].push_back({{"code", std::string(events::code_name(e.code))}, {"message", e.message}});
  // The same section a run's JSON has: what the earlier runs' backlog did now.
  j["events"] = {{"delivered", backlog.delivered}, {"errors", nlohmann::json::array()},
                 {"pending", backlog.pending}};
  for (const auto& e : failed)
    j["events"]["errors"].push_back(e.text());
  j["message"] = message;
  j["retry_of"] = latest_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(latest_id);
  j["run_id"] = nullptr;
  j["status"] = failed.empty() ? "success" : "failed";
  j["tables"] = nlohmann::json::array();
  fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  return code;
}

/// Nothing to retry, but events a run left undelivered (its sinks were down): sent now,
/// as the next run would send them first. 0 when none wait or all went out; 1 when
/// delivery failed again (said on stderr), as a run's would.
backlog_report deliver_backlog(const config::project& project) {
  backlog_report out;
  auto& errors = out.errors;
  if (!project.events.kafka && !project.events.pubsub)
    return out;
  auto store = open_state(project, false);
  if (!store) {
    errors.push_back(events::error{events::errc::outbox, "the state store could not be opened to send "
                                                        "the events waiting in its outbox"});
    return out;
  }
  auto waiting = store->outbox_size();
  if (!waiting || *waiting == 0)
    return out;
  out.pending = *waiting;
  auto sinks = events::make_sinks(project.events, errors);
  if (!sinks.empty()) {
    events::outbox_relay relay(*store, std::move(sinks));
    const auto report = relay.drain();
    out.delivered = report.delivered;
    if (report.ok())
      fmt::print(stderr, "note: {} event(s) an earlier run left undelivered went out now\n",
                 report.delivered);
    else
      errors.push_back(*report.failure);
    if (auto left = store->outbox_size())
      out.pending = *left;
  }
  for (const auto& e : errors)
    fmt::print(stderr, "error {}\n", e.text());
  return out;
}

int do_retry(const global_options& g, run_request req) {
  std::vector<config::filter> none;
  auto project = load_or_report(g, {}, none);
  if (!project)
    return 2;
  std::string latest_id;
  bool interrupted = false;
  std::vector<std::string> failed_before;  // tables whose last result, from an earlier run, failed
  std::vector<std::string> deselected;     // failed tables flotilla.toml no longer selects
  {
    if (!state_may_exist(std::filesystem::path(project->state_dir) / "state"))
      return nothing_to_retry(req, "nothing to retry: no run has been recorded yet", "");
    auto store = open_state(*project, false);
    if (!store)
      return 2;  // locked by a run, or unreadable: open_state said why
    auto latest = store->latest_run();
    if (!latest) {
      fmt::print(stderr, "{}\n", latest.error().message);
      note_refusal("", latest.error().message);
      return 2;
    }
    if (!*latest)
      return nothing_to_retry(req, "nothing to retry: no run has been recorded yet", "");
    const auto& run = **latest;
    latest_id = run.run_id();
    interrupted = unfinished_run_status(run.status());
    // The runs whose staged data this retry loads: the retried run, and the runs it
    // retried in turn (a table that failed again on a retry keeps its entry). Staged data
    // of another, older run is not what the retried run read: such a table is read again.
    req.staged_runs.insert(latest_id);
    for (std::string of = run.retry_of(); !of.empty() && req.staged_runs.insert(of).second;) {
      auto before = store->get_run(of);
      if (!before || !*before)
        break;
      of = (*before)->retry_of();
    }
    // A run with --no-prune meant to copy its tables, unchanged ones too (a change no
    // marker sees): its retry does as well.
    req.no_prune = run.no_prune();
    // A run with --full-refresh meant to replace its tables' rows: its retry does too.
    req.full_refresh = run.full_refresh();
    if (interrupted) {
      // Killed or crashed before it recorded its tables: run its selection again. What it
      // committed is pruned or carried on from its watermarks; staged data is reused.
      req.filters.assign(run.filters().begin(), run.filters().end());
      req.only.insert(run.only().begin(), run.only().end());
    }
    // A failed table whose source flotilla.toml no longer has (or another config's run
    // in a shared state directory) cannot be retried; retrying the rest would record a
    // run over it, and its failure, staged rows and pending `schema accept` would be out
    // of reach. Refused, naming them.
    std::set<std::string> lost;
    const auto want = [&](const std::string& source, const std::string& what) {
      if (project->find_source(source) == nullptr)
        lost.insert(what);
      else
        req.only.insert(what);
    };
    for (const auto& t : run.tables())
      if (t.status() == "failed" || t.status() == "skipped") {
        // A table flotilla.toml no longer selects (excluded since, or out of include):
        // not retried, and said so.
        if (const auto* src = project->find_source(t.source());
            src != nullptr && !t.source_table().empty() &&
            config::select_tables(*src, {t.source_table()}, {}).empty()) {
          deselected.push_back(t.source() + "." + t.source_table());
          continue;
        }
        want(t.source(), t.source() + "." + t.source_table());
      }
    // A source that could not be read: its tables of the run's selection. A retry's run
    // named them (its `only`); a filtered run's are those of its filters, applied again.
    for (const auto& s : run.failed_sources()) {
      bool named = false;
      for (const auto& o : run.only())
        if (o.starts_with(s + ".")) {
          want(s, o);
          named = true;
        }
      if (!named)
        want(s, s + ".*");
    }
    if (!interrupted && run.failed_sources_size() > 0)
      req.filters.assign(run.filters().begin(), run.filters().end());
    // A run killed before it recorded its tables: every source it could take tables of.
    if (interrupted)
      for (const auto& s : run.sources())
        if (project->find_source(s) == nullptr)
          lost.insert(s + ".*");
    // Nothing failed in the latest run, but a table's last result may be an earlier run's
    // failure (a filtered run came after it): said, since retry only reads the latest run.
    if (!interrupted)
      if (auto runs = store->recent_runs(100)) {
        std::set<std::string> seen;  // newest result of each table first
        // Sources a newer run read whole (no filter, nothing failed at the source): a
        // table of theirs it did not list is no longer there, or no longer selected.
        std::set<std::string> read_whole;
        for (const auto& r : *runs) {
          for (const auto& t : r.tables()) {
            const std::string key = t.source() + "." + t.source_table();
            if (!seen.insert(key).second || t.status() != "failed" || r.run_id() == latest_id)
              continue;
            if (read_whole.contains(t.source()))
              continue;
            // Only tables flotilla.toml still selects: `flotilla run` would not copy others.
            const auto* src = project->find_source(t.source());
            if (src != nullptr &&
                (t.source_table().empty() ||
                 !config::select_tables(*src, {t.source_table()}, {}).empty()))
              failed_before.push_back(fmt::format("{} (run {})", key, r.run_id()));
          }
          if (r.filters_size() == 0 && r.only_size() == 0 &&
              !unfinished_run_status(r.status()))
            for (const auto& t : r.tables())  // the sources it listed tables of
              if (std::find(r.failed_sources().begin(), r.failed_sources().end(), t.source()) ==
                  r.failed_sources().end())
                read_whole.insert(t.source());
        }
      }
    if (!lost.empty()) {
      const std::string message = fmt::format(
          "cannot retry run {}: tables it left failed or unfinished ({}) belong to sources "
          "that {} does not define. Restore those [sources] sections and retry, or start a "
          "new run with `flotilla run`; nothing was retried",
          latest_id, fmt::join(lost, ", "), g.config_path);
      fmt::print(stderr, "error: {}\n", message);
      note_refusal("", message, g.config_path);
      return 2;
    }
  }  // the store is closed here: the run opens it again
  const std::string not_selected =
      deselected.empty()
          ? std::string()
          : fmt::format("{} table(s) that failed in it ({}) are no longer selected by {} "
                        "(excluded, or out of include) and are not retried",
                        deselected.size(), fmt::join(deselected, ", "), g.config_path);
  if (!interrupted && !req.only.empty() && !not_selected.empty())
    fmt::print(stderr, "note: run {}: {}\n", latest_id, not_selected);
  if (!interrupted && req.only.empty() && !not_selected.empty()) {
    const auto undelivered = deliver_backlog(*project);
    return nothing_to_retry(req, fmt::format("nothing to retry in run {}: {}", latest_id, not_selected),
                            latest_id, undelivered);
  }
  if (interrupted)
    fmt::print(stderr, "run {} did not finish (the process was killed, crashed, or stopped at once by a second Ctrl-C); retrying {}\n",
               latest_id,
               !req.only.empty()     ? fmt::format("its {} table(s)", req.only.size())
               : req.filters.empty() ? std::string("every table")
                                     : fmt::format("the tables of --filter {}",
                                                   fmt::join(req.filters, " --filter ")));
  // Failures of earlier runs retry does not take (it reads the latest run only).
  const std::string older =
      failed_before.empty()
          ? std::string()
          : fmt::format("{} table(s) failed in an earlier run and have not copied since, which "
                        "retry (it reads the latest run only) does not take: {}; copy them with "
                        "`flotilla run` (--filter source=... or table=...)",
                        failed_before.size(),
                        fmt::join(failed_before.begin(),
                                  failed_before.begin() +
                                      static_cast<std::ptrdiff_t>(std::min<std::size_t>(
                                          failed_before.size(), 5)),
                                  ", "));
  if (!interrupted && req.only.empty()) {
    const auto undelivered = deliver_backlog(*project);
    return nothing_to_retry(req,
                            fmt::format("nothing to retry: the latest run ({}) has no failed "
                                        "table{}",
                                        latest_id, older.empty() ? older : ". " + older),
                            latest_id, undelivered);
  }
  // Retrying the latest run's failures: older ones it does not take are said too.
  if (!older.empty())
    fmt::print(stderr, "note: {}\n", older);
  req.command = "retry";
  req.retry_of = latest_id;
  req.reuse_staged = true;
  return execute_run(g, req);
}

}  // namespace

verb retry_verb() {
  auto args = std::make_shared<run_request>();
  auto sub = std::make_shared<CLI::App*>(nullptr);
  auto glob = std::make_shared<global_options*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options& g) {
        *glob = &g;
        auto* s = app.add_subcommand(
            "retry", "re-run the failed tables of the latest run, loading their staged data");
        s->add_option("--output", args->output, "text or json")
            ->check(CLI::IsMember({"text", "json"}));
        s->add_flag("--allow-type-change-rebuild", args->allow_rebuild,
                    "confirm type changes that rebuild a table");
        *sub = s;
      },
      [=] { return *sub && (*sub)->parsed(); },
      [=] { return do_retry(**glob, *args); }};
}

}  // namespace flotilla::cli
