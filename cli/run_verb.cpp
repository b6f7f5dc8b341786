// `flotilla run` and `flotilla plan`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <thread>
#include <tuple>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <google/protobuf/arena.h>
#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/fleet_builder.hpp"
#include "cli/run_exec.hpp"
#include "cli/run_output.hpp"
#include "cli/stop_signals.hpp"
#include "cli/target_presence.hpp"
#include "cli/verbs.hpp"
#include "config/errc.hpp"
#include "config/selection.hpp"
#include "engine/heap.hpp"
#include "events/event.hpp"
#include "events/run_events.hpp"
#include "events/sink.hpp"
#include "events/source_drift.hpp"
#include "schema/evolution.hpp"
#include "sinks/warehouse.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {
namespace {

/// The change the governance gate held (its error names the step's column).
const schema::evolution_step* held_step(const engine::table_plan& plan) {
  // The column the refusal names may have several steps (a key column renamed: its key
  // change and its addition): the one that copies the table anew is the review's.
  const schema::evolution_step* out = nullptr;
  for (const auto& s : plan.drift.steps)
    if (plan.error && s.column == plan.error->column &&
        (!out || s.action == schema::evolution_action::drop_and_recreate ||
         (s.action == schema::evolution_action::rebuild &&
          out->action != schema::evolution_action::drop_and_recreate)))
      out = &s;
  return out;
}

std::string held_change(const engine::table_plan& plan) {
  const auto* s = held_step(plan);
  return s ? s->reason : std::string();
}

/// The review_required event of a change the governance gate held (FLT-S008): its kind,
/// named as the stream's reviews name theirs, and what applying it does to the rows.
events::review_info held_review(const engine::table_plan& plan, const std::string& target) {
  events::review_info r{target, "schema_change", held_change(plan), plan.error->reason,
                        plan.error->proposed_ddl, "", false, ""};
  const auto* s = held_step(plan);
  if (!s)
    return r;
  using schema::evolution_action;
  switch (s->action) {
    case evolution_action::add_columns:
      r.kind = "add_column";
      r.data_consequence = "Rows already loaded get NULL in the new column.";
      break;
    case evolution_action::alter_column_types:
    case evolution_action::widen:
      r.kind = "alter_type";
      r.data_consequence = "The column's values are converted in place; every row is kept.";
      break;
    case evolution_action::drop_not_null:
      r.kind = "drop_not_null";
      r.data_consequence = "The column accepts NULL; no row changes.";
      break;
    case evolution_action::rebuild:
      r.kind = "rebuild";
      r.data_consequence =
          "The table is rebuilt with the new shape (a new table swapped in); every row is kept.";
      break;
    case evolution_action::drop_and_recreate:
      r.kind = "drop_and_recreate";
      r.data_consequence =
          "The table is dropped and created anew, then loaded in full from the source: rows "
          "only the target held are gone.";
      r.requires_resync = true;
      break;
  }
  return r;
}

/// The --filter arguments as the selection reads them: `key=value`, spaces around either
/// trimmed (`client = beta` is `client=beta`), so one selection has one spelling in the
/// run record and the events. An argument that does not parse stays as typed.
std::vector<std::string> filters_as_given(const std::vector<std::string>& typed) {
  std::vector<std::string> out;
  out.reserve(typed.size());
  for (const auto& f : typed) {
    auto parsed = config::parse_filter(f);
    out.push_back(parsed ? parsed->key + "=" + parsed->value : f);
  }
  return out;
}

std::atomic<bool> g_cancel{false};
/// A finished run's reports, never freed (see the end of execute_run).
std::vector<actors::pipeline_report>* g_finished_reports = nullptr;

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Live progress on a terminal: tables done/total and rows/s. Quiet when piped.
class progress_line {
 public:
  explicit progress_line(actors::progress& p) : p_(p) {
    if (!live_terminal())
      return;
    thread_ = std::thread([this] {
      const auto start = std::chrono::steady_clock::now();
      // The rate stops at the last table: what follows (events, the run record) is not
      // copying, and would make the last figure shown the lowest.
      std::optional<std::chrono::steady_clock::time_point> copied;
      while (!stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        // Until every source's catalog is in, the total is of those read so far: says so.
        const auto read = p_.sources_read.load(), sources = p_.sources_total.load();
        const auto now = std::chrono::steady_clock::now();
        if (!copied && read >= sources && p_.tables_total.load() > 0 &&
            p_.tables_done.load() >= p_.tables_total.load())
          copied = now;
        const double secs = std::chrono::duration<double>(copied.value_or(now) - start).count();
        fmt::print(stderr, "\r\x1b[Ktables {}/{}{}  rows {}  {:.0f} rows/s", p_.tables_done.load(),
                   p_.tables_total.load(),
                   read < sources ? fmt::format("+ (catalogs {}/{})", read, sources) : "",
                   p_.rows.load(), secs > 0 ? p_.rows.load() / secs : 0.0);
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

/// The run's record at its start, status "running", so that a run killed or crashed before
/// its end is known: the next run marks it "interrupted", and `retry` runs its tables again.
/// What a run record says of the request, at its start and at its end alike.
void describe_request(storage::pb::RunRecord& r, const run_request& req, const std::string& run_id,
                      std::int64_t started) {
  r.set_run_id(run_id);
  r.set_started_at_us(started);
  r.set_command(req.command);
  r.set_retry_of(req.retry_of);
  r.set_no_prune(req.no_prune);
  r.set_full_refresh(req.full_refresh);
  for (const auto& f : filters_as_given(req.filters))
    r.add_filters(f);
  for (const auto& t : req.only)
    r.add_only(t);
}

/// The run's start in the state store. A store that cannot take it (damaged, full) is
/// refused before anything runs (FLT-R007): a run it cannot record, `retry` and the next
/// run would not know of. Returns false then, said on stderr.
bool record_start(storage::state_store& store, const run_request& req, const std::string& run_id,
                  std::int64_t started, const config::project& project,
                  const std::vector<config::filter>& filters) {
  storage::pb::RunRecord r;
  describe_request(r, req, run_id, started);
  r.set_status("running");
  for (const auto& s : project.sources)
    if (config::source_may_match(s, filters) && takes_source(req.only, s.name))
      r.add_sources(s.name);
  auto st = store.put_run(r);
  if (st)
    return true;
  const std::string dir = (std::filesystem::path(project.state_dir) / "state").string();
  const std::string message =
      fmt::format("the run could not be recorded in the state store at '{}', so nothing ran: "
                  "{}; {}",
                  dir, st.error().message, storage::error::remedy(st.error().code));
  fmt::print(stderr, "error FLT-R007: {}\n", message);
  note_refusal("FLT-R007", message, dir);
  return false;
}

/// The run JSON file a killed run did not write (it is written once the tables have
/// reported): what it committed, from the tables' results in the state store, with
/// status "interrupted". A file already there is left as it is.
void write_interrupted_json(const config::project& project, const storage::pb::RunRecord& r,
                            const std::vector<const storage::pb::TableResult*>& committed,
                            const events::run_totals& totals,
                            std::string_view status = "interrupted",
                            std::string_view note_key = "interrupted",
                            std::string_view note = "") {
  const auto dir = std::filesystem::path(project.state_dir) / "runs" / r.run_id();
  std::error_code ec;
  if (std::filesystem::exists(dir / "run.json", ec))
    return;
  nlohmann::json actions = nlohmann::json::array();
  nlohmann::json tables = nlohmann::json::array();
  for (const auto* t : committed) {
    for (const auto& a : t->actions()) {
      nlohmann::json step{{"column", a.column()}, {"reason", a.reason()}, {"step", a.action()},
                          {"table", t->table()}, {"action", a.action()}};
      for (auto k : {schema::evolution_action::add_columns,
                     schema::evolution_action::alter_column_types,
                     schema::evolution_action::drop_and_recreate, schema::evolution_action::widen,
                     schema::evolution_action::rebuild, schema::evolution_action::drop_not_null})
        if (schema::to_string(k) == a.action())
          step["action"] = schema::seed_action(k);
      if (a.also_size() > 0)
        step["also"] = std::vector<std::string>(a.also().begin(), a.also().end());
      actions.push_back(std::move(step));
    }
    nlohmann::json row{{"error", t->error().empty() ? nlohmann::json(nullptr) : nlohmann::json(t->error())},
                       {"rows", t->rows()},
                       {"source", t->source()},
                       {"source_table", t->source_table()},
                       {"status", t->status()},
                       {"table", t->table()}};
    if (!t->error_code().empty())
      row["error_code"] = t->error_code();
    if (!t->load().empty())
      row["load"] = t->load();
    if (t->warnings_size() > 0)
      row["warnings"] = nlohmann::json(std::vector<std::string>(t->warnings().begin(), t->warnings().end()));
    if (t->recovered_rows() > 0)
      row["recovered"] = {{"rows", t->recovered_rows()},
                          {"run_id", t->recovered_run_id()},
                          {"watermark", t->recovered_watermark()}};
    tables.push_back(std::move(row));
  }
  nlohmann::json j{
      {"drift",
       {{"actions_taken", std::move(actions)},
        {"tables_checked", totals.tables_checked},
        {"tables_drifted", totals.tables_drifted}}},
      {"errors", nlohmann::json::array()},
      {"events", {{"errors", nlohmann::json::array()}, {"log", (dir / "events.ndjson").string()}}},
      {std::string(note_key),
       note.empty()
           ? std::string(
                 "the process was killed, crashed, or stopped at once by a second Ctrl-C "
                 "before the run finished; `tables` lists the tables it committed (their rows "
                 "are in the target) and, failed, those whose schema change it committed "
                 "before their rows; the run after it went on from there")
           : std::string(note)},
      {"run_id", r.run_id()},
      {"status", std::string(status)},
      {"tables", std::move(tables)}};
  if (!r.retry_of().empty())
    j["retry_of"] = r.retry_of();
  std::filesystem::create_directories(dir, ec);
  std::ofstream out(dir / "run.json");
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

/// A recorded table's events, as its run emitted them: table_started, its schema actions
/// and table_finished, counted into `totals`.
void add_recorded_table_events(std::vector<events::run_events::batch_event>& table_events,
                               const storage::pb::TableResult& t, events::run_totals& totals,
                               std::int64_t when_unknown_us) {
  // A table the record keeps no times of (pruned, skipped, failed before its plan): the
  // run's own time, as near as the record knows it.
  const std::int64_t started = t.started_at_us() != 0 ? t.started_at_us() : when_unknown_us;
  const std::int64_t finished = t.finished_at_us() != 0 ? t.finished_at_us() : started;
  // A table skipped before it started has only its table_finished.
  if (t.status() != "skipped")
    table_events.emplace_back(events::table_event_line{
        .finished = false,
        .source = t.source(),
        .table = t.source_table(),
        .target_table = t.table(),
        .mode = t.load().empty() ? std::string_view("none") : std::string_view(t.load()),
        .timestamp_us = started});
  for (const auto& a : t.actions()) {
    auto action = events::schema_action(
        t.source(), t.source_table(),
        {a.action(), a.column(), a.from(), a.to(), a.reason(), a.sql(),
         {a.also().begin(), a.also().end()}});
    // As in a finished run: when the table's copy ended, not when this is written.
    action.set_timestamp_us(finished);
    table_events.emplace_back(std::move(action));
  }
  for (const auto& w : t.warnings()) {
    auto warning = events::warning(t.source(), t.source_table(), t.table(), w);
    warning.set_timestamp_us(finished);
    table_events.emplace_back(std::move(warning));
  }
  table_events.emplace_back(events::table_event_line{
      .finished = true,
      .source = t.source(),
      .table = t.source_table(),
      .target_table = t.table(),
      .status = t.status(),
      .rows = t.rows(),
      .error = t.error(),
      .error_code = t.error_code(),
      .duration_us = std::max<std::int64_t>(0, finished - started),
      .recovered_rows = t.recovered_rows(),
      .recovered_run_id = t.recovered_run_id(),
      .timestamp_us = finished});
  if (t.status() == "copied")
    ++totals.tables_copied;
  else if (t.status() == "failed")
    ++totals.tables_failed;
  else if (t.status() == "held")
    ++totals.tables_held;
  else if (t.status() == "skipped")
    ++totals.tables_skipped;
  else if (t.status() == "pruned")
    ++totals.tables_pruned;
}

/// What a killed run's events file holds when a later run finishes its events: its cut
/// last line (a kill in the middle of a write) removed first.
struct kept_events {
  bool finished = false;      ///< it has the run's run_finished: nothing is missing
  bool started = false;       ///< its first line is the run's run_started
  std::size_t first_line = 0; ///< bytes up to and including the first newline
};

kept_events trim_cut_events(const std::filesystem::path& file, std::string_view run_id) {
  kept_events k;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    return k;
  std::string text;
  {
    std::ifstream in(file, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::size_t last_newline = text.rfind('\n');
  const std::size_t kept = last_newline == std::string::npos ? 0 : last_newline + 1;
  if (kept != text.size())
    std::filesystem::resize_file(file, kept, ec);
  text.resize(kept);
  k.finished = text.find("\"type\":\"run_finished\"") != std::string::npos;
  k.first_line = text.empty() ? 0 : text.find('\n') + 1;
  k.started = text.starts_with(fmt::format("{{\"run_id\":\"{}\",\"sequence\":1,", run_id)) &&
              text.substr(0, k.first_line).find("\"type\":\"run_started\"") != std::string::npos;
  return k;
}

/// A killed run's events writer, going on after its run_started: the file's cut line and
/// whatever followed its run_started removed (it may have reached no sink), run_started
/// written when the file did not have it. Null when the file ends with the run's
/// run_finished (nothing is missing) or cannot be written (said on stderr).
std::unique_ptr<events::run_events> reopen_events(storage::state_store& store,
                                                  const config::project& project,
                                                  const storage::pb::RunRecord& r,
                                                  std::uint64_t tables_selected) {
  const auto file = events::event_log::path_for(project.state_dir, r.run_id());
  const kept_events previous = trim_cut_events(file, r.run_id());
  if (previous.finished)
    return nullptr;
  std::error_code ec;
  if (std::filesystem::exists(file, ec))
    std::filesystem::resize_file(file, previous.started ? previous.first_line : 0, ec);
  if (ec) {
    fmt::print(stderr, "warning: the events of run {} could not be finished ({}): {}\n",
               r.run_id(), file.string(), ec.message());
    return nullptr;
  }
  events::run_events_options options;
  options.deliver_in_background = false;  // the next run's relay delivers them first
  auto ev = events::run_events::open(&store, project, r.run_id(), options);
  if (!ev) {
    fmt::print(stderr, "warning: the events of run {} could not be written: {}\n", r.run_id(),
               ev.error().text());
    return nullptr;
  }
  if (previous.started)
    (*ev)->continue_after(1);
  else
    (void)(*ev)->emit(events::run_started(
        {r.command(), {r.filters().begin(), r.filters().end()}, tables_selected, r.retry_of()}));
  return std::move(*ev);
}

/// The events a run killed before it wrote them (they are written once its tables have
/// reported) would have written for the tables it committed, written for it, under its
/// run id: run_started, each committed table's table_started, schema_action and table_finished events
/// (from their results in the state store), and run_finished with status "interrupted".
/// They reach the event sinks through the outbox, ahead of the next run's own.
void publish_interrupted(storage::state_store& store, const config::project& project,
                         const storage::pb::RunRecord& r) {
  auto results = store.list<storage::pb::TableResult>();
  if (!results) {
    fmt::print(stderr, "warning: the tables run {} committed could not be read for its events: {}\n",
               r.run_id(), results.error().message);
    return;
  }
  std::vector<const storage::pb::TableResult*> committed;
  std::vector<const storage::pb::TableResult*> noted;  // its DDL committed (record_schema_change)
  std::set<std::pair<std::string, std::string>> done;  // (source, source table)
  for (const auto& k : *results)
    if (k.record.run_id() == r.run_id()) {
      if (k.key.starts_with(altered_prefix)) {
        noted.push_back(&k.record);
        continue;
      }
      committed.push_back(&k.record);
      done.emplace(k.record.source(), k.record.source_table());
    }
  // Tables whose schema change committed on the target (DDL commits ahead of the rows)
  // and whose rows did not: reported failed, with the change.
  std::vector<storage::pb::TableResult> altered;
  altered.reserve(noted.size());
  for (const auto* t : noted)
    if (!done.contains({t->source(), t->source_table()})) {
      auto& a = altered.emplace_back(*t);
      a.set_status("failed");
      a.set_error_code("FLT-R001");
      a.set_error(
          "the run was killed after this table's schema change committed on the target and "
          "before it recorded the table's rows: the target table has the new shape (the "
          "actions listed); the run after it copied the rows (of an incremental table whose "
          "rows had committed too, that run reports them as `recovered`)");
    }
  for (const auto& a : altered)
    committed.push_back(&a);
  // In the order a finished run reports its tables: sources as flotilla.toml names them,
  // each source's tables by name (its catalog's order); the state store keeps them by key.
  std::map<std::string, std::size_t> source_order;
  for (std::size_t i = 0; i < project.sources.size(); ++i)
    source_order.emplace(project.sources[i].name, i);
  const auto order_of = [&](const storage::pb::TableResult* t) {
    auto it = source_order.find(t->source());
    return std::make_tuple(it == source_order.end() ? source_order.size() : it->second,
                           std::string_view(t->source()), std::string_view(t->source_table()));
  };
  std::stable_sort(committed.begin(), committed.end(),
                   [&](const auto* a, const auto* b) { return order_of(a) < order_of(b); });
  // Killed while it wrote its events (they go out as its record is written): its file keeps
  // its run_started, and the rest is written from here. Its events all written (killed
  // before its record said so): run.json alone is missing.
  const auto log = reopen_events(store, project, r, committed.size());
  events::run_totals totals;
  totals.status = "interrupted";
  std::vector<events::run_events::batch_event> table_events;
  for (const auto* t : committed)
    add_recorded_table_events(table_events, *t, totals, r.started_at_us());
  if (log)
    (void)log->emit_batch(std::move(table_events));
  // Until its last commit: when it died is not known.
  for (const auto* t : committed)
    if (t->finished_at_us() != 0)
      totals.duration_us = std::max(totals.duration_us, t->finished_at_us() - r.started_at_us());
  for (const auto* t : committed) {
    totals.tables_checked += t->drift_checked() ? 1 : 0;
    totals.tables_drifted += t->drifted() ? 1 : 0;
  }
  if (log)
    (void)log->emit(events::run_finished(totals));
  write_interrupted_json(project, r, committed, totals);
}

/// A run killed while it wrote its events (after recording its results): its file may end
/// in part of a line, and its table events may be in no sink: they go to the outbox in one
/// append after the file has all of them, and a kill before that append leaves a whole
/// file with nothing in the outbox. Without its run_finished, what follows its run_started
/// is written again from the run record (file and outbox), then its run_finished: at least
/// once, never lost. The cut line is removed first.
void finish_cut_events(storage::state_store& store, const config::project& project,
                       const storage::pb::RunRecord& r, const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    return;  // never opened: no events are the run's to finish
  const auto log = reopen_events(store, project, r, static_cast<std::uint64_t>(r.tables_size()));
  if (!log)
    return;
  events::run_totals totals;
  std::vector<events::run_events::batch_event> table_events;
  for (const auto& t : r.tables())
    add_recorded_table_events(table_events, t, totals,
                              r.finished_at_us() != 0 ? r.finished_at_us() : r.started_at_us());
  (void)log->emit_batch(std::move(table_events));
  totals.status = r.status();
  totals.tables_checked = r.drift().tables_checked();
  totals.tables_drifted = r.drift().tables_drifted();
  if (r.finished_at_us() != 0)
    totals.duration_us = std::max<std::int64_t>(0, r.finished_at_us() - r.started_at_us());
  (void)log->emit(events::run_finished(totals));
  // Delivered by this run's relay, first, and counted in its `delivered`.
  fmt::print(stderr,
             "note: run {} was killed while it wrote its events; its table events and "
             "run_finished were written again from its record ({})\n",
             r.run_id(), file.string());
}

/// A run records its results before it publishes its events, and writes its run.json once
/// they are delivered: a run killed in between (a sink slow to answer) is finished in the
/// state store, its events are in its events.ndjson and the outbox, and it has no run.json.
/// The next run writes it from the run record, and says so.
void write_unwritten_json(storage::state_store& store, const config::project& project) {
  auto id = store.latest_run_id();
  if (!id || !*id)
    return;
  const auto dir = std::filesystem::path(project.state_dir) / "runs" / **id;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) || std::filesystem::exists(dir / "run.json", ec))
    return;
  auto latest = store.latest_run();
  if (!latest || !*latest || (*latest)->run_id() != **id)
    return;
  const auto& r = **latest;
  std::vector<const storage::pb::TableResult*> tables;
  for (const auto& t : r.tables())
    tables.push_back(&t);
  events::run_totals totals;
  totals.tables_checked = r.drift().tables_checked();
  totals.tables_drifted = r.drift().tables_drifted();
  finish_cut_events(store, project, r, dir / "events.ndjson");
  const bool sinks = project.events.kafka.has_value() || project.events.pubsub.has_value();
  write_interrupted_json(
      project, r, tables, totals, r.status(), "note",
      fmt::format("the process ended (killed, crashed, or stopped at once by a second Ctrl-C) "
                  "after the run recorded its results and before it wrote this file: written "
                  "by the next run from the run record; the events are in events.ndjson{}",
                  sinks ? ", and the runs after it delivered those still in the outbox" : ""));
  fmt::print(stderr,
             "note: run {} ended after recording its results, before writing its run.json; "
             "written now from its record ({}).{}\n",
             r.run_id(), (dir / "run.json").string(),
             sinks ? " Its undelivered events go out with this run's." : "");
}

/// A latest run still "running" when another starts (the store's lock keeps two runs
/// apart) was killed or crashed: it is recorded as "interrupted", and named; the events
/// of the tables it committed are written for it.
void close_interrupted(storage::state_store& store, const run_request& req,
                       const config::project& project) {
  // Most runs find the one before them finished: its status alone says so.
  if (auto status = store.latest_run_status(); !status || !*status || **status != "running") {
    if (status && *status && **status != "interrupted")
      write_unwritten_json(store, project);
    return;
  }
  auto latest = store.latest_run();
  if (!latest || !*latest || (*latest)->status() != "running")
    return;
  auto& r = **latest;
  // Its run.json says how it ended: the run finished, and the state store lost the
  // record of its end (a damaged log it dropped on opening, a full disk then).
  std::string ended;
  {
    std::error_code ec;
    const auto json = std::filesystem::path(project.state_dir) / "runs" / r.run_id() / "run.json";
    if (std::filesystem::exists(json, ec))
      try {
        std::ifstream in(json);
        const auto j = nlohmann::json::parse(in);
        if (j.contains("status") && j["status"].is_string() && j["status"] != "interrupted")
          ended = j["status"].get<std::string>();
      } catch (const std::exception&) {
      }
  }
  if (!ended.empty()) {
    fmt::print(stderr,
               "note: run {} finished ({}, as its run.json says), but the state store has no "
               "record of its end (its log was damaged, or the disk was full when it was "
               "written); what it committed is kept, and this run goes on from there.\n",
               r.run_id(), ended);
    r.set_status(ended);
    if (auto st = store.put_run(r); !st)
      fmt::print(stderr, "warning: the run {} could not be recorded as {}: {}\n", r.run_id(),
                 ended, st.error().message);
    return;
  }
  r.set_status("interrupted");
  if (auto st = store.put_run(r); !st)
    fmt::print(stderr, "warning: the run {} could not be marked interrupted: {}\n", r.run_id(),
               st.error().message);
  publish_interrupted(store, project, r);
  remove_altered_notes(store, r.run_id());
  if (req.retry_of == r.run_id())
    return;  // `retry` said so already
  fmt::print(stderr,
             "note: run {} did not finish (the process was killed, crashed, or stopped at once by a second Ctrl-C). What it "
             "committed is kept; this run goes on from there.\n",
             r.run_id());
}

/// False when the state store refused the record (said on stderr).
bool record_run(storage::state_store& store, const run_request& req, const std::string& run_id,
                std::int64_t started, const run_summary& summary,
                const std::vector<actors::pipeline_report>& reports) {
  // On an arena: one result with several strings per selected table, freed at once.
  google::protobuf::ArenaOptions arena_options;
  arena_options.start_block_size = 64 * 1024;
  arena_options.max_block_size = 1024 * 1024;
  google::protobuf::Arena arena(arena_options);
  auto& r = *google::protobuf::Arena::CreateMessage<storage::pb::RunRecord>(&arena);
  describe_request(r, req, run_id, started);
  r.set_status(summary.status);
  r.set_finished_at_us(now_us());
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
      // No run id per table: in a run record every table's is the record's own.
      tr->set_reused_staged(o.reused_staged);
      describe_copy(*tr, o);
      // What the drift gate saw, for `schema accept`. A retry that reused staged data
      // records nothing, unless the gate failed it again (seed 004, docs/events.md).
      if (const auto* v = drift_verdict_of(o))
        if (!o.reused_staged || v->decision == events::drift_decision::fail)
          events::record_observation(*tr, *v);
    }
  }
  r.mutable_drift()->set_tables_checked(summary.tables_checked);
  r.mutable_drift()->set_tables_drifted(summary.tables_drifted);
  auto st = store.put_run(r);
  if (!st)
    fmt::print(stderr, "warning: the run record could not be stored: {}\n", st.error().message);
  return st.has_value();
}

/// Keeps the newest [project] keep_runs runs (0: every run): the older run records leave
/// the state store and their directories (run.json, events.ndjson) are removed. The
/// latest run, the one `retry` and `schema accept` read, always stays. Staged data of
/// failed tables lives elsewhere (staged/) and is not touched.
void forget_old_runs(storage::state_store& store, const config::project& project) {
  if (project.keep_runs == 0)
    return;
  auto removed = store.prune_runs(project.keep_runs);
  if (!removed) {
    fmt::print(stderr, "warning: old run records could not be removed: {}\n",
               removed.error().message);
    return;
  }
  const std::filesystem::path runs = std::filesystem::path(project.state_dir) / "runs";
  for (const auto& id : *removed) {
    if (id.empty() || id == "." || id == ".." || id.find('/') != std::string::npos)
      continue;  // not a directory name of runs/ (put_run accepts only valid names)
    std::error_code ec;  // a directory already gone, or never written, is fine
    std::filesystem::remove_all(runs / id, ec);
  }
}

/// Writes the run's events (events.ndjson, and every configured event sink through the
/// outbox) and waits for their delivery; the outcome goes into the run JSON. Table events
/// are emitted in each table's order once the fleet has reported.
run_events_section publish_events(storage::state_store& store, const config::project& project,
                                  const run_request& req, const std::string& run_id,
                                  std::int64_t started,
                                  const std::vector<actors::pipeline_report>& reports,
                                  const run_summary& summary) {
  run_events_section section;
  auto ev = events::run_events::open(&store, project, run_id);
  if (!ev) {
    section.opened = false;
    section.errors.push_back(ev.error().text());
    return section;
  }
  auto& log = **ev;
  std::uint64_t selected = 0;
  for (const auto& p : reports)
    selected += p.tables.size();
  (void)log.emit(events::run_started({req.command, filters_as_given(req.filters), selected,
                                      req.retry_of}));
  events::run_totals totals;
  // The table events in one batch: one write to events.ndjson (and one outbox append)
  // for the whole fleet rather than one per event. The two per table go by their fields
  // (no Event built when no outbox keeps them); `targets` holds the strings they view.
  std::vector<events::run_events::batch_event> table_events;
  table_events.reserve(2 * selected);
  std::vector<std::string> targets;
  targets.reserve(selected);
  for (const auto& p : reports)
    for (const auto& t : p.tables) {
      const auto& o = t.outcome;
      const std::string& target = targets.emplace_back(display_name(t.target));
      const std::size_t first_event = table_events.size();
      // A copied or failed table's events carry when they happened: table_started its
      // copy's start, the others its end (a pruned or skipped table's: when emitted).
      const std::int64_t ended = o.finished_at_us;
      // A table skipped before it started (Ctrl-C) has only its table_finished.
      if (o.status != engine::table_status::skipped)
        table_events.emplace_back(events::table_event_line{
            .source = t.source,
            .table = t.table,
            .target_table = target,
            .mode = o.reused_staged ? std::string_view("retry")
                    : o.plan        ? engine::to_string(o.plan->load)
                                    : std::string_view("none"),
            .timestamp_us = ended != 0 ? ended - o.duration_us : 0});
      if (o.plan && (o.status == engine::table_status::copied || o.ddl_applied))
        for (const auto& step : o.plan->drift.steps)
          table_events.emplace_back(events::schema_action(
              t.source, t.table,
              {std::string(schema::to_string(step.action)), step.column,
               step.from ? schema::to_string(*step.from) : step.from_text,
               schema::step_to_text(step),
               step.reason, step.sql, step.also}));
      if (const auto* v = drift_verdict_of(o); v && v->drifted())
        table_events.emplace_back(events::source_drift_detected(*v));
      if (o.plan && o.plan->error && o.plan->error->code == "FLT-S008")
        table_events.emplace_back(
            events::review_required(t.source, t.table, held_review(*o.plan, target)));
      else if (o.plan && o.plan->error)
        table_events.emplace_back(events::contract_violation(
            t.source, t.table,
            {o.plan->error->column, o.plan->error->expected, o.plan->error->actual,
             o.plan->error->reason, o.plan->error->code}));
      if (o.plan)
        for (const auto& warning : o.plan->warnings)
          table_events.emplace_back(events::warning(t.source, t.table, target, warning));
      table_events.emplace_back(events::table_event_line{
          .finished = true,
          .source = t.source,
          .table = t.table,
          .target_table = target,
          .status = engine::to_string(o.status),
          .rows = o.rows,
          .error = o.error ? std::string_view(*o.error) : std::string_view(),
          .error_code = o.error_code,
          .duration_us = o.duration_us,
          .recovered_rows = o.recovered ? o.recovered->rows : 0,
          .recovered_run_id = o.recovered ? std::string_view(o.recovered->run_id)
                                          : std::string_view(),
          .timestamp_us = ended});
      for (std::size_t i = first_event; ended != 0 && i < table_events.size(); ++i)
        if (auto* e = std::get_if<events::pb::Event>(&table_events[i]))
          e->set_timestamp_us(ended);
      switch (o.status) {
        case engine::table_status::copied: ++totals.tables_copied; break;
        case engine::table_status::pruned: ++totals.tables_pruned; break;
        case engine::table_status::failed: ++totals.tables_failed; break;
        case engine::table_status::skipped: ++totals.tables_skipped; break;
        case engine::table_status::held: ++totals.tables_held; break;
      }
    }
  // Fault injection (tests): killed with run_started written, before the table events.
  if (const char* c = std::getenv("FLOTILLA_CRASH_AT"); c && std::string_view(c) == "table_events")
    std::raise(SIGKILL);
  // The sources' own warnings (a table gone from the source, a source selecting nothing).
  for (const auto& w : source_warning_list())
    table_events.emplace_back(events::warning(w.source, w.table, w.target_table, w.message));
  (void)log.emit_batch(std::move(table_events));
  totals.status = summary.status;
  totals.tables_checked = summary.tables_checked;
  totals.tables_drifted = summary.tables_drifted;
  totals.duration_us = now_us() - started;
  for (const auto& p : reports)
    if (p.error)
      totals.source_errors.emplace_back(p.source, *p.error);
  (void)log.emit(events::run_finished(totals));
  // The tables have committed: a stop from now on leaves only events undelivered, which
  // the outbox keeps for the next run.
  set_stop_messages(
      "flotilla: stopped at once by a second signal while delivering the run's events: "
      "every table had finished; the events not yet acknowledged stay in the outbox, and "
      "the next run delivers them first\n",
      "flotilla: stopping the delivery of the run's events: every table has finished; the "
      "events not yet acknowledged stay in the outbox, and the next run delivers them "
      "first\n");
  auto report = log.finish();
  section.log = report.log_path.string();
  section.emitted = report.emitted;
  section.delivered = report.delivered;
  section.pending = report.pending;
  section.sinks = project.events.kafka.has_value() || project.events.pubsub.has_value();
  for (const auto& e : report.errors)
    section.errors.push_back(e.text());
  return section;
}

}  // namespace

/// A source that could not be read at all has no catalog to list its tables: those an
/// earlier run copied, and those flotilla.toml names in a section of their own (never
/// copied yet), are reported failed with the source's reason, so that the run JSON, the
/// run record and the events count them (a monitor counting failed tables sees them). A
/// `--filter table=` (or an exclude pattern) selects among those names as it selects
/// among a catalog's (since 2026-12-07; they were left out of such a run before). A
/// retry of named tables lists those of its list.
void list_tables_of_failed_sources(const config::project& project,
                                   const storage::state_store& store,
                                   const std::vector<config::filter>& filters,
                                   const std::set<std::string>& only,
                                   std::vector<actors::pipeline_report>& reports) {
  for (auto& p : reports) {
    if (!p.error || !p.tables.empty())
      continue;
    const auto* src = project.find_source(p.source);
    if (src == nullptr)
      continue;
    const bool whole_source = only.empty() || only.contains(p.source + ".*");
    const auto* target = project.target_of(*src);
    std::optional<std::set<std::string>> current;
    if (target != nullptr)
      current = kept_table_names(store, src->name, target->name);
    // Every name known, then the names the selection (include, exclude, table filters)
    // takes among them, as it would among a catalog's.
    std::vector<std::string> names;
    std::map<std::string, std::string> target_of_name;
    if (auto known = store.list<storage::pb::TableResult>(p.source + ".")) {
      for (const auto& k : *known) {
        if (k.record.source() != p.source || k.record.source_table().empty())
          continue;
        if (current && !current->contains(k.record.source_table()))
          continue;  // gone from the source before: said then, by the run that saw it go
        if (target_of_name.emplace(k.record.source_table(), k.record.table()).second)
          names.push_back(k.record.source_table());
      }
    }
    // A section's table, never copied: named by its section, landing where it would.
    std::set<const config::table_config*> listed;
    for (const auto& n : names)
      listed.insert(config::find_table(*src, n));
    for (const auto& section : src->tables) {
      if (listed.contains(&section) || section.name.find_first_of("*?[") != std::string::npos ||
          target == nullptr)
        continue;
      const auto where = config::target_table(*target, *src, section.name);
      if (target_of_name.emplace(section.name, display_name(dialects::table_ref{
                                                   where.catalog, where.schema, where.name}))
              .second)
        names.push_back(section.name);
    }
    const auto chosen = config::select_tables(*src, names, filters);
    for (const auto& name : chosen) {
      if (!whole_source && !only.contains(p.source + "." + name))
        continue;
      auto& t = p.tables.emplace_back();
      t.source = p.source;
      t.table = name;
      t.target = dialects::table_ref{"", "", target_of_name[name]};
      t.outcome.status = engine::table_status::failed;
      t.outcome.error_code = "FLT-R002";
      t.outcome.error = fmt::format("source '{}' could not be read, so this table was not "
                                    "copied: {}",
                                    p.source, *p.error);
    }
  }
}

/// Plan-only warehouses (snowflake, bigquery, ...) are never connected to: a run that
/// selects a source loading into one is a usage error, said before anything runs.
bool refuse_plan_only_targets(const config::project& p,
                              const std::vector<config::filter>& filters) {
  bool refused = false;
  for (const auto& s : p.sources) {
    const auto* target = p.target_of(s);
    if (target == nullptr || target->executed || !config::source_may_match(s, filters))
      continue;
    config::diagnostic d;
    d.code = config::errc::plan_only_target;
    d.file = p.config_path;
    d.line = s.at.line;
    d.column = s.at.column;
    d.key = config::key_path({"sources", s.name});
    d.value = target->name;
    d.message = fmt::format(
        "source '{}' loads into target '{}', a {} warehouse, which Flotilla plans for but "
        "does not connect to: `flotilla plan` shows the SQL for it. Leave the source out of "
        "the run with --filter, or point it at a duckdb, postgres or sqlite target",
        s.name, target->name, target->dialect);
    fmt::print(stderr, "{}\n", config::format(d));
    note_refusal(config::code_name(d.code), d.message, d.file, d.line, d.column, d.key, d.value);
    refused = true;
  }
  return refused;
}

int execute_run(const global_options& g, const run_request& a) {
  // From the start: a stop asked for while the run records itself still stops it the
  // way the message says (nothing starts; the run JSON and record are written).
  // On a terminal the progress line is on stderr: the notice starts on a line of its own.
  static const std::string stopping = fmt::format(
      "{}flotilla: stopping: no table starts from now on, and the tables in flight roll back "
      "before their commit (a PostgreSQL statement waiting on a lock is cancelled; a read or "
      "write waiting elsewhere stops once it returns); a second Ctrl-C or SIGTERM stops at "
      "once\n",
      live_terminal() ? "\n" : "");
  on_stop_signals(g_cancel,
                  "flotilla: stopped at once by a second signal: the tables in flight did not "
                  "commit (their targets are unchanged); `flotilla retry` finishes the run\n",
                  stopping.c_str());
  sinks::set_stop_request(&g_cancel);
  events::set_stop_request(&g_cancel);
  std::vector<config::filter> filters;
  auto project = load_or_report(g, a.filters, filters);
  if (!project)
    return 2;
  if (refuse_plan_only_targets(*project, filters))
    return 2;
  auto store = open_state(*project, true);
  if (!store)
    return 2;
  if (a.only.empty())  // a run, not a retry
    drop_unselected_staged(*project, *store);
  remove_orphan_staged(*project, *store);
  const std::string run_id = new_run_id();
  const std::int64_t started = now_us();
  close_interrupted(*store, a, *project);
  if (!record_start(*store, a, run_id, started, *project, filters))
    return 2;
  fleet_options fo;
  fo.no_prune = a.no_prune;
  fo.full_refresh = a.full_refresh;
  fo.allow_type_change_rebuild = a.allow_rebuild;
  fo.run_id = run_id;
  fo.only = a.only;
  fo.reuse_staged = a.reuse_staged;
  fo.staged_runs = a.staged_runs;
  fo.presence = std::make_shared<target_presence>(*project);
  auto spec = build_fleet(*project, filters, store.get(), fo);
  actors::progress counters;
  counters.sources_total = spec.pipelines.size();
  spec.progress_counters = &counters;
  spec.cancel = &g_cancel;
  std::vector<actors::pipeline_report> reports;
  {
    progress_line line(counters);
    reports = actors::run_fleet(spec);
  }
  fo.presence->record_target_files(*project, !filters.empty() || !a.only.empty());
  list_tables_of_failed_sources(*project, *store, filters, a.only, reports);
  const run_summary summary = summarize(reports);
  // A selection that matched nothing (a mistyped table= filter) copies nothing: said,
  // since the run is still recorded as the latest one. A retry retries what it names.
  // A source that selects nothing is said whenever a filter was given: the warning about
  // the selection would otherwise blame the filter alone.
  const bool nothing_said =
      a.only.empty() && warn_if_nothing_selected(*project, a.filters, reports, "was copied");
  print_source_warnings(nothing_said && a.filters.empty());
  save_table_sets(*store);
  // The run record and the run JSON's table rows do not depend on the events: a second
  // thread writes them while the events are published (for a large fleet these are most
  // of a run whose tables are all unchanged).
  std::string tables;
  bool recorded = false;
  std::thread side([&] {
    engine::prepare_thread_heap();
    try {
      tables = run_tables_json(reports);
      recorded = record_run(*store, a, run_id, started, summary, reports);
      if (noted_schema_changes())  // the run's results stand for them now
        remove_altered_notes(*store, run_id);
      forget_old_runs(*store, *project);
    } catch (const std::exception& e) {
      if (tables.empty())
        tables = "[]";
      fmt::print(stderr, "warning: the run record could not be stored: {}\n", e.what());
    }
  });
  run_events_section events;
  try {
    events = publish_events(*store, *project, a, run_id, started, reports, summary);
  } catch (...) {
    side.join();
    throw;
  }
  side.join();
  // Fault injection (tests): killed as a run waiting on a slow sink would be, with its
  // results recorded and its events written, before its run.json.
  if (const char* c = std::getenv("FLOTILLA_CRASH_AT"); c && std::string_view(c) == "run_json")
    std::raise(SIGKILL);
  const bool events_ok = events.errors.empty();
  std::filesystem::path dir = std::filesystem::path(project->state_dir) / "runs" / run_id;
  const std::string text =
      run_json_text(run_id, reports, summary,
                    a.command == "retry" ? std::optional<std::string>(a.retry_of) : std::nullopt,
                    events, tables);
  // The tables have committed: a run JSON file that cannot be written costs a warning,
  // not the report (the run record in the state store has it too).
  {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream out;
    if (!ec) {
      out.open(dir / "run.json");
      out << text << "\n";
      out.flush();
    }
    if (ec || !out)
      fmt::print(stderr,
                 "warning: {} could not be written ({}); {}. Make {} a writable directory "
                 "(and free disk space)\n",
                 (dir / "run.json").string(), ec ? ec.message() : std::string("write failed"),
                 recorded ? "the run itself is recorded"
                          : "nor could the run record be stored (above): the next run takes "
                            "this one for a run that did not finish, and goes on from what its "
                            "tables committed",
                 (std::filesystem::path(project->state_dir) / "runs").string());
  }
  if (a.output == "json")
    fmt::print("{}\n", text);
  else
    print_run_text(run_id, reports, summary, events);
  // The process ends right after this: a fleet's reports (a few strings per table) are
  // left to the exit, which returns their memory at once, instead of being freed one
  // allocation at a time. Still reachable, so no leak checker reports them.
  g_finished_reports = new std::vector<actors::pipeline_report>(std::move(reports));
  // A stop that came after every table had committed changed nothing: the exit code
  // follows the run's own status (tables a stop kept from their data count as failed).
  return summary.failed == 0 && events_ok ? 0 : 1;
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
        s->add_flag("--full-refresh", args->full_refresh,
                    "copy every selected table in full, incremental ones too: their rows "
                    "replace the target's, and their watermarks start over");
        s->add_flag("--allow-type-change-rebuild", args->allow_rebuild,
                    "confirm type changes that rebuild a table");
        *sub = s;
      },
      [=] { return *sub && (*sub)->parsed(); },
      [=] { return execute_run(**glob, *args); }};
}

}  // namespace flotilla::cli
