// `flotilla review list | show | apply | edit | resync | remove`: the reviews of held
// changes (seed 003, docs/cdc-reviews.md).
//
// The state store admits one writer process. When no stream runs, a decision is carried
// out here, directly on the target. While `flotilla stream` holds the store, list and show
// read it read-only, and a decision is checked against the read-only view, written to
// <state dir>/reviews/inbox and carried out by the stream (cdc::process_inbox); this
// command waits for its result (--wait seconds) and reports it.
#include <charconv>
#include <atomic>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cdc/decide.hpp"
#include "cdc/outcome.hpp"
#include "cdc/review.hpp"
#include "cdc/review_store.hpp"
#include "cli/fleet_builder.hpp"
#include "cli/run_output.hpp"
#include "cli/stop_signals.hpp"
#include "cli/verbs.hpp"
#include "config/errc.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;
using cdc::decision_kind;
using cdc::review;

struct review_args {
  std::string action;  ///< list, show, apply, edit, resync, remove
  std::vector<std::string> which;  ///< <target> <source>.<table>, or an id
  std::string which_first, which_second;  ///< the two positionals `which` is made of
  std::string output = "text";
  std::string target;  ///< list: one target only
  std::string ddl;
  std::string ddl_file;
  bool edit_apply = false;
  bool edit_resync = false;
  double wait_seconds = 30;
};

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A usage or lookup problem: printed, exit 2.
int usage(const review_args& a, std::string_view code, const std::string& message,
          const std::string& hint = {}) {
  if (a.output == "json") {
    // The fields every refused command prints (README.md), beside review's own.
    nlohmann::json error{{"code", code}, {"message", message}};
    if (!hint.empty())
      error["hint"] = hint;
    nlohmann::json j{{"status", "refused"},     {"code", code},
                     {"message", message},      {"hint", hint},
                     {"exit_code", 2},          {"errors", nlohmann::json::array({error})}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  // On stderr too, as every refused command says it (README.md), JSON or not.
  fmt::print(stderr, "error {}: {}\n", code, message);
  if (!hint.empty() && hint != message)
    fmt::print(stderr, "hint: {}\n", hint);
  return 2;
}

struct opened_store {
  std::unique_ptr<storage::state_store> store;
  bool read_only = false;  ///< another process (the stream) holds the lock
};

/// Opens the project's store for writing, or read-only while another process holds it.
/// nullopt store when none exists yet.
std::optional<opened_store> open_store(const config::project& p, std::string& problem) {
  const fs::path dir = fs::path(p.state_dir) / "state";
  opened_store out;
  if (!state_may_exist(dir))
    return out;
  // Another project's reviews are not this one's to decide: their DDL would run on this
  // project's targets (as run, retry, schema accept and stream refuse, FLT-R007).
  if (problem = state_dir_refusal(p); !problem.empty())
    return std::nullopt;
  storage::store_options o;
  o.create_if_missing = false;
  o.sync_writes = true;  // a decision is rare and must survive a power loss
  auto s = storage::state_store::open(dir, o);
  if (!s && s.error().code == storage::errc::locked) {
    o.read_only = true;
    s = storage::state_store::open(dir, o);
    out.read_only = true;
  }
  if (!s) {
    problem = s.error().message;
    return std::nullopt;
  }
  out.store = std::make_unique<storage::state_store>(std::move(*s));
  return out;
}

std::uint64_t kept_count(const storage::state_store& store, const review& r) {
  // The changes kept are the table's, and belong to its open review: a closed one of the
  // same table keeps none.
  if (!cdc::is_open(r.hold.state()))
    return 0;
  auto n = store.held_change_count(r.hold.target(), r.hold.table());
  return n ? *n : 0;
}

/// A review a `stream --reload` closed (open then: resumed, its kept changes dropped and
/// the table copied again), or one closed as removed whose table the reload copied again:
/// the table streams again, and the review says so.
bool superseded_by_reload(const review& r) {
  return (r.hold.state() == storage::pb::HOLD_STATE_REMOVED ||
          r.hold.state() == storage::pb::HOLD_STATE_RESUMED) &&
         r.note.phase == "reloaded";
}

nlohmann::json review_json(const review& r, std::uint64_t kept) {
  const auto& h = r.hold;
  const bool tried = r.ddl_was_tried();
  return nlohmann::json{
      {"superseded_by_reload", superseded_by_reload(r)},
      {"id", r.short_id()},
      {"target", h.target()},
      {"table", h.table()},
      {"state", cdc::state_name(h.state())},
      {"state_label", cdc::state_label(h.state())},
      {"open", cdc::is_open(h.state())},
      {"kind", h.kind()},
      {"source_change", h.source_change()},
      {"position", h.position()},
      {"reason", h.reason()},
      {"proposed_ddl", h.proposed_ddl()},
      {"proposal_needs_edit", cdc::needs_edit(h.proposed_ddl())},
      {"data_consequence", h.data_consequence()},
      {"requires_resync", h.requires_resync()},
      {"applied_ddl", tried ? std::string() : h.applied_ddl()},
      {"tried_ddl", tried ? h.applied_ddl() : std::string()},
      {"error", h.error()},
      {"resync_status", r.resync_status()},
      {"kept_changes", kept},
      {"created_at_us", h.created_at_us()},
      {"updated_at_us", h.updated_at_us()},
  };
}

void print_block(std::string_view title, const std::string& text) {
  fmt::print("{}:\n", title);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    fmt::print("  {}\n", printable(line));
}

void print_card(const review& r, std::uint64_t kept) {
  const auto& h = r.hold;
  fmt::print("Review {}: {} on target {}\n", r.short_id(), printable(h.table()),
             printable(h.target()));
  fmt::print("Table:  {}\n", printable(h.table()));
  fmt::print("State:  {}{}\n", cdc::state_label(h.state()),
             superseded_by_reload(r) ? ", superseded by `flotilla stream --reload`, which "
                                       "copied the table again: it streams again"
                                     : "");
  fmt::print("Kind:   {}\n", cdc::kind_label(h.kind()));
  fmt::print("Source change: {}\n", printable(h.source_change()));
  print_block("Why it was not applied automatically", h.reason());
  print_block("Proposed DDL", h.proposed_ddl().empty() ? std::string(cdc::no_target_ddl)
                                                        : h.proposed_ddl());
  if (cdc::is_open(h.state()) && cdc::needs_edit(h.proposed_ddl()))
    fmt::print("  ({} Apply proposed DDL is disabled; use `flotilla review edit`.)\n",
               cdc::needs_edit_hint);
  print_block("Data consequence", h.data_consequence());
  if (!h.applied_ddl().empty())
    print_block(r.ddl_was_tried() ? "Tried DDL" : "Applied DDL", h.applied_ddl());
  if (!h.error().empty())
    fmt::print("Error: {}\n", printable_message(h.error()));
  if (auto s = r.resync_status(); !s.empty())
    fmt::print("Resync status: {}\n", s);
  fmt::print("Kept changes: {}\n", kept);
}

/// The review named by `which`: "<target> <source>.<table>", an id from `list`, or a
/// "<source>.<table>" held on one target only.
std::optional<review> find_review(const std::vector<review>& all, const std::vector<std::string>& which,
                                  std::string& problem) {
  std::vector<const review*> hits;
  for (const auto& r : all) {
    if (which.size() == 2 && r.hold.target() == which[0] && r.hold.table() == which[1])
      hits.push_back(&r);
    else if (which.size() == 1 && (r.short_id() == which[0] || r.hold.table() == which[0]))
      hits.push_back(&r);
  }
  if (hits.size() == 1)
    return *hits.front();
  // The table alone, held on one target and closed (removed, resumed) on others: the
  // open review is the one meant.
  if (which.size() == 1 && hits.size() > 1) {
    std::vector<const review*> open;
    for (const auto* r : hits)
      if (cdc::is_open(r->hold.state()) && r->short_id() != which[0])
        open.push_back(r);
    if (open.size() == 1)
      return *open.front();
  }
  std::string named;
  for (const auto& w : which)
    named += (named.empty() ? "" : " ") + w;
  problem = hits.empty()
                ? fmt::format("No review matches '{}'; `flotilla review list` shows the reviews "
                              "with their ids.",
                              named)
                : fmt::format("'{}' names the table on {} targets; name it as <target> "
                              "<source>.<table> or by its id.",
                              named, hits.size());
  return std::nullopt;
}

cdc::target_opener project_opener(const config::project& p) {
  std::vector<sinks::warehouse_options> targets;
  for (const auto& t : p.targets)
    targets.push_back(sinks::warehouse_options{t.name, t.dialect, t.path, t.dsn, t.block_size,
                                                   t.in_place_max_bytes});
  // Event streams run no DDL: the opener answers null for them (cdc/decide.hpp).
  for (const auto& t : p.event_targets)
    targets.push_back(sinks::warehouse_options{t.name, t.kind, "", "", 0});
  return cdc::opener_for(std::move(targets));
}

std::string outcome_line(const review& r) {
  const auto& h = r.hold;
  std::string what;
  switch (h.state()) {
    case cdc::pb::HOLD_STATE_APPLYING:
      what = "the DDL ran; the stream replays the kept changes, then the table resumes";
      break;
    case cdc::pb::HOLD_STATE_AWAITING_RESYNC:
      what = r.note.resync == cdc::resync_state::requested ||
                     r.note.resync == cdc::resync_state::running
                 ? "the stream copies the table again, then it resumes"
             : r.note.resync == cdc::resync_state::failed
                 ? fmt::format("the copy failed{}: {}",
                               r.note.resync_error.empty() ? "" : ": " + r.note.resync_error,
                               cdc::resync_failed_message)
                 : "the table needs a fresh copy: run `flotilla review resync`";
      break;
    case cdc::pb::HOLD_STATE_REMOVED: what = "the table is no longer applied on this target"; break;
    case cdc::pb::HOLD_STATE_LAST_DECISION_FAILED: what = h.error(); break;
    default: break;
  }
  return fmt::format("{} {}: {}{}", h.target(), h.table(), cdc::state_label(h.state()),
                     what.empty() ? "" : " (" + what + ")");
}

/// The review `decided` as it finished, when a later hold of its table replaced it.
std::optional<review> finished_review(const storage::state_store* store, const review& decided) {
  if (store == nullptr)
    return std::nullopt;
  auto finished = cdc::list_finished_reviews(*store, decided.hold.target());
  if (!finished)
    return std::nullopt;
  for (auto& f : *finished)
    if (f.short_id() == decided.short_id())
      return std::move(f);
  return std::nullopt;
}

/// --wait's value: seconds, 0 or more (CLI11's own check names a range of 300 digits).
CLI::Validator wait_seconds_check() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        double v = 0;
        const auto* end = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(value.data(), end, v);
        if (ec != std::errc{} || ptr != end || !(v >= 0) || v > 1e9)
          return fmt::format("takes a number of seconds, 0 or more, not '{}'", value);
        return {};
      },
      "SECONDS");
}

/// A refusal of a review whose decision is taken (applying), said while a stream runs:
/// that stream carries it out, so the advice is to wait, not to start one.
/// Also a decision queued behind another one for the same review: the stream refused it
/// as applying, and the review may have moved on (resumed) by the time it is read again.
void while_stream_runs(cdc::decision_result& r, const review& named) {
  if (r.status != cdc::decision_result::outcome::refused || r.code != cdc::code_wrong_state)
    return;
  if (named.hold.state() == cdc::pb::HOLD_STATE_APPLYING) {
    r.message = fmt::format("This review is {}; it does not accept a decision. Its decision is "
                            "taken, and the running stream is carrying it out (it replays the "
                            "kept changes, then the table resumes).",
                            cdc::state_label(named.hold.state()));
    r.hint = fmt::format("wait for it: flotilla review show {}", named.short_id());
  } else if (r.hint.find("flotilla stream") != std::string::npos) {
    r.message = fmt::format("Another decision on this review came first, and the running "
                            "stream carried it out; this one was not taken. The review is {} "
                            "now.",
                            cdc::state_label(named.hold.state()));
    r.hint = fmt::format("flotilla review show {}", named.short_id());
  }
}

/// `decided`: the review the decision named. The replay of its kept changes may reach a
/// later held change of the same table, which opens a new review: the result then says
/// both, the decided review as it finished and the new one.
int report_result(const review_args& a, const cdc::decision_result& decision,
                  const storage::state_store* store, const review* decided = nullptr) {
  cdc::decision_result r = decision;
  std::optional<review> next;
  if (decided != nullptr && r.after && r.after->short_id() != decided->short_id()) {
    next = std::move(r.after);
    r.after = finished_review(store, *decided);
    if (!r.after)
      r.after = *decided;
  }
  const auto new_review_line = [&] {
    return fmt::format("new review {}: {}; the replay stopped there: {}", next->short_id(),
                       next->hold.source_change(), outcome_line(*next));
  };
  // A decision carried out whose copy then failed (seen before this command returns):
  // the table is not back, so the command fails too.
  // A remove after a failed copy is no failure: the review closed as asked.
  const bool copy_failed = r.after && r.after->note.resync == cdc::resync_state::failed &&
                           r.after->hold.state() != cdc::pb::HOLD_STATE_REMOVED;
  const int code = r.exit_code() == 0 && copy_failed ? 1 : r.exit_code();
  if (a.output == "json") {
    // A copy that failed after the decision was carried out is the command's failure: its
    // status and code say so, as a failed apply's do.
    const std::string failed_copy =
        copy_failed ? outcome_line(*r.after) : std::string();
    nlohmann::json j{{"status", r.queued                                              ? "queued"
                                : copy_failed                                         ? "failed"
                                : r.status == cdc::decision_result::outcome::done    ? "done"
                                : r.status == cdc::decision_result::outcome::refused ? "refused"
                                                                                     : "failed"},
                     {"code", copy_failed && r.code.empty() ? std::string(cdc::code_decision_failed)
                                                            : r.code},
                     {"message", copy_failed && r.message.empty() ? failed_copy : r.message},
                     {"hint", r.hint}};
    // A refusal or failure carries its exit code and errors[], as every verb's does.
    if (r.status != cdc::decision_result::outcome::done || code != 0) {
      j["exit_code"] = code;
      j["errors"] = nlohmann::json::array(
          {{{"code", r.code.empty() ? std::string(cdc::code_decision_failed) : r.code},
            {"message", r.message.empty() && r.after ? outcome_line(*r.after) : r.message}}});
      if (!r.hint.empty())
        j["errors"][0]["hint"] = r.hint;
    }
    if (r.after)
      j["review"] = review_json(*r.after, store ? kept_count(*store, *r.after) : 0);
    if (next)
      j["next_review"] = review_json(*next, store ? kept_count(*store, *next) : 0);
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    // A refusal or failure is said on stderr too, as without --output json.
    if (code != 0) {
      fmt::print(stderr, "error {}: {}\n",
                 r.code.empty() ? std::string(cdc::code_decision_failed) : r.code,
                 r.message.empty() && r.after ? outcome_line(*r.after) : r.message);
      if (!r.hint.empty() && r.hint != r.message)
        fmt::print(stderr, "hint: {}\n", r.hint);
    }
    return code;
  }
  if (r.queued) {
    fmt::print("{}\n", printable_message(r.message));
    return 0;
  }
  if (r.exit_code() == 0) {
    if (r.after)
      fmt::print(copy_failed ? stderr : stdout, "{}\n", outcome_line(*r.after));
    if (next)
      fmt::print("{}\n", new_review_line());
    return code;
  }
  fmt::print(stderr, "error {}: {}\n", r.code, r.message);
  if (!r.hint.empty() && r.hint != r.message)  // a hint that only repeats adds nothing
    fmt::print(stderr, "hint: {}\n", r.hint);
  // A proposal that needs an edit: the command that takes the edited DDL.
  if (r.code == cdc::code_needs_edit || r.code == cdc::code_resync_needs_edit)
    fmt::print(stderr,
               "next: flotilla review show {0} (its proposal and comments), then flotilla "
               "review edit {0} --ddl '<the edited DDL>' {1} (a DDL of comments only for "
               "none)\n",
               fmt::join(a.which, " "), r.code == cdc::code_needs_edit ? "--apply" : "--resync");
  return code;
}

int do_list(const review_args& a, const storage::state_store* store) {
  std::vector<review> all;
  if (store) {
    auto listed = cdc::list_reviews(*store, a.target);
    if (!listed)
      return usage(a, "FLT-R007", listed.error().message);
    all = std::move(*listed);
    // Then the finished reviews a later hold of their table replaced, newest first.
    auto finished = cdc::list_finished_reviews(*store, a.target);
    if (!finished)
      return usage(a, "FLT-R007", finished.error().message);
    std::stable_sort(finished->begin(), finished->end(), [](const review& x, const review& y) {
      return x.hold.created_at_us() > y.hold.created_at_us();
    });
    for (auto& r : *finished)
      all.push_back(std::move(r));
  }
  if (a.output == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : all)
      arr.push_back(review_json(r, kept_count(*store, r)));
    fmt::print("{}\n", nlohmann::json{{"reviews", arr}}.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  if (all.empty()) {
    fmt::print("no held tables\n");
    return 0;
  }
  // A removed review a reload replaced says so here too, as `show` does.
  const auto state_of = [](const review& r) {
    return std::string(cdc::state_label(r.hold.state())) +
           (superseded_by_reload(r) ? " (superseded by a reload)" : "");
  };
  std::size_t wt = 5, wg = 6, ws = 5;
  for (const auto& r : all) {
    wt = std::max(wt, printable(r.hold.table()).size());
    wg = std::max(wg, printable(r.hold.target()).size());
    ws = std::max(ws, state_of(r).size());
  }
  fmt::print("{:<8}  {:<{}}  {:<{}}  {:<{}}  {}\n", "ID", "TABLE", wt, "TARGET", wg, "STATE", ws,
             "KIND");
  for (const auto& r : all)
    fmt::print("{:<8}  {:<{}}  {:<{}}  {:<{}}  {}\n", r.short_id(), printable(r.hold.table()), wt,
               printable(r.hold.target()), wg, state_of(r), ws, cdc::kind_label(r.hold.kind()));
  return 0;
}

int do_review(const global_options& g, const review_args& a) {
  std::vector<config::filter> filters;
  auto project = load_or_report(g, {}, filters);
  if (!project)
    return 2;
  std::string problem;
  auto opened = open_store(*project, problem);
  if (!opened)
    return usage(a, "FLT-R007", problem);
  auto* store = opened->store.get();
  // A --target no [targets] section names lists nothing because it is a typo, not
  // because nothing is held: said, as any unknown name is.
  const bool event_target = std::any_of(
      project->event_targets.begin(), project->event_targets.end(),
      [&](const config::event_target_config& t) { return t.name == a.target; });
  if (!a.target.empty() && project->find_target(a.target) == nullptr && !event_target) {
    std::vector<std::string_view> names;
    for (const auto& t : project->targets)
      names.push_back(t.name);
    for (const auto& t : project->event_targets)
      names.push_back(t.name);
    const std::string near = config::nearest(a.target, names);
    return usage(a, cdc::code_unknown_review,
                 fmt::format("--target '{}': flotilla.toml has no such target, so no review is "
                             "held there{}",
                             a.target,
                             near.empty() ? "" : fmt::format("; did you mean '{}'?", near)));
  }
  // No stream runs (the store opened for writing): a decision or a resync a killed stream
  // left in progress is resolved before anything is shown or decided, as the stream does
  // at its start.
  if (store && !opened->read_only)
    (void)cdc::recover_interrupted(*store, project_opener(*project), now_us());
  if (a.action == "list")
    return do_list(a, store);

  if (a.which.empty() || a.which.size() > 2)
    return usage(a, cdc::code_unknown_review,
                 "Name the review as <target> <source>.<table>, or by its id from `flotilla "
                 "review list`.");
  std::vector<review> all;
  if (store) {
    auto listed = cdc::list_reviews(*store);
    if (!listed)
      return usage(a, "FLT-R007", listed.error().message);
    all = std::move(*listed);
  }
  auto found = find_review(all, a.which, problem);
  if (!found && store && a.which.size() == 1) {
    // A finished review a later hold of its table replaced: shown by its id, closed.
    auto finished = cdc::list_finished_reviews(*store);
    if (!finished)
      return usage(a, "FLT-R007", finished.error().message);
    for (auto& r : *finished)
      if (r.short_id() == a.which[0]) {
        if (a.action != "show")
          return usage(a, cdc::code_wrong_state,
                       fmt::format("This review is {}; it does not accept a decision (a later "
                                   "review of the table replaced it).",
                                   cdc::state_label(r.hold.state())));
        if (a.output == "json")
          fmt::print("{}\n", review_json(r, 0).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
        else
          print_card(r, 0);
        return 0;
      }
  }
  if (!found) {
    // A table named without its schema ("shop.items" for "shop.public.items"), or on
    // another target: the review it likely means.
    // Of several, an open review on the target named first, then any open one.
    std::string near;
    int best = -1;
    const std::string& table = a.which.back();
    for (const auto& r : all) {
      const std::string& held = r.hold.table();
      const auto first = held.find('.'), last = held.rfind('.');
      const bool same_table =
          held == table || (first != std::string::npos && last != first &&
                            held.substr(0, first) + held.substr(last) == table);
      if (!same_table || (a.which.size() == 2 && held == table && r.hold.target() == a.which[0]))
        continue;
      // `show` shows a closed review too: the target named counts first. A decision needs
      // an open review: that counts first.
      const bool open = cdc::is_open(r.hold.state());
      const bool on_target = a.which.size() == 2 && r.hold.target() == a.which[0];
      const int rank = a.action == "show" ? (on_target ? 2 : 0) + (open ? 1 : 0)
                                          : (open ? 2 : 0) + (on_target ? 1 : 0);
      if (rank > best) {
        best = rank;
        near = fmt::format("did you mean `flotilla review {} {} {}`?", a.action, r.hold.target(),
                           held);
      }
    }
    return usage(a, cdc::code_unknown_review, problem,
                 near.empty() ? std::string("`flotilla review list` shows the open reviews; name "
                                            "one by its id, or as <target> "
                                            "<source>.<schema>.<table>")
                              : near);
  }

  if (a.action == "show") {
    const auto kept = kept_count(*store, *found);
    if (a.output == "json")
      fmt::print("{}\n", review_json(*found, kept).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    else
      print_card(*found, kept);
    return 0;
  }

  cdc::decision d;
  if (a.action == "apply") {
    d.kind = decision_kind::apply_proposed;
  } else if (a.action == "resync") {
    d.kind = decision_kind::resync;
  } else if (a.action == "remove") {
    d.kind = decision_kind::remove;
  } else {  // edit
    if (a.edit_apply == a.edit_resync)
      return usage(a, cdc::code_no_ddl, "`review edit` needs exactly one of --apply or --resync.");
    if (a.ddl.empty() == a.ddl_file.empty())
      return usage(a, cdc::code_no_ddl,
                   "`review edit` needs the edited DDL: exactly one of --ddl '...' or "
                   "--ddl-file <path>.");
    d.kind = a.edit_apply ? decision_kind::apply_edited : decision_kind::resync_edited;
    if (!a.ddl_file.empty()) {
      std::ifstream in(a.ddl_file, std::ios::binary);
      if (!in)
        return usage(a, cdc::code_no_ddl,
                     fmt::format("cannot read --ddl-file {}: {}", a.ddl_file, std::strerror(errno)));
      std::ostringstream s;
      s << in.rdbuf();
      d.ddl = s.str();
      // The line end an editor leaves after the last statement is the file's, not the DDL's.
      if (d.ddl.ends_with("\r\n"))
        d.ddl.resize(d.ddl.size() - 2);
      else if (d.ddl.ends_with('\n'))
        d.ddl.pop_back();
    } else {
      d.ddl = a.ddl;
    }
  }

  const std::string target = found->hold.target();
  const std::string table = found->hold.table();
  // A source flotilla.toml no longer streams to the target: no stream would replay the
  // kept changes or copy the table, and the review would wait in `applying` for good
  // after its DDL ran. Removing the table is still a decision to take.
  if (d.kind != decision_kind::remove) {
    const std::string source = table.substr(0, table.find('.'));
    const auto* src = project->find_source(source);
    std::vector<std::string> streamed;
    if (src != nullptr && src->capture == "logical")
      streamed = project->stream_targets_of(*src);
    if (std::find(streamed.begin(), streamed.end(), target) == streamed.end())
      return usage(a, std::string(cdc::code_stream_not_taking),
                   fmt::format("{} does not stream source '{}' to target '{}'{}: no stream would "
                               "replay the changes kept for {} or copy it. Nothing ran.",
                               g.config_path, source, target,
                               src == nullptr ? " (it has no [sources." + source + "] section)"
                                              : std::string(),
                               table),
                   fmt::format("Restore the source's section (capture = \"logical\", streaming "
                               "to '{}') and decide again, or remove the table: flotilla review "
                               "remove {}",
                               target, found->short_id()));
  }
  if (!opened->read_only) {
    auto result = cdc::carry_out(*store, project_opener(*project), target, table, d, now_us());
    return report_result(a, result, store);
  }

  // The stream holds the store: check now, so a refusal is immediate, then hand the
  // decision to the stream.
  const review same[] = {*found};
  if (auto p = cdc::check_decision(*found, d, same); !p) {
    cdc::decision_result refused{cdc::decision_result::outcome::refused, p.error().code,
                                 p.error().message, p.error().hint, *found, false};
    while_stream_runs(refused, *found);
    return report_result(a, refused, store);
  }
  // Ctrl-C while the decision waits withdraws it, as an unanswered one is: exactly one
  // of the two happens. Once the stream took it, the command stops waiting and says so.
  static std::atomic<bool> stop{false};
  on_stop_signals(stop,
                  "flotilla: stopped at once by a second signal; `flotilla review show` tells "
                  "whether the decision was carried out\n",
                  "flotilla: stopping: the decision is withdrawn unless the stream has taken it "
                  "already\n");
  std::string id;
  try {
    id = cdc::submit_request(project->state_dir, {"", target, table, d});
  } catch (const std::exception& e) {
    return usage(a, cdc::code_decision_failed, e.what());
  }
  auto wait_for = [&](std::chrono::steady_clock::duration how_long) -> std::optional<int> {
    const auto deadline = std::chrono::steady_clock::now() + how_long;
    unsigned polls = 0;
    for (;;) {
      if (stop.load())
        return std::nullopt;
      if (auto r = cdc::read_result(project->state_dir, id)) {
        std::error_code ec;
        fs::remove(cdc::results_dir(project->state_dir) / (id + ".result"), ec);
        // The stream wrote the review; a fresh read-only open sees it. Once the DDL ran,
        // the stream replays the kept changes after writing the result: the decision's
        // outcome is the replay's, so wait for it (as long as a decision may take).
        const auto replay_deadline = std::chrono::steady_clock::now() + std::chrono::minutes(11);
        std::optional<opened_store> seen;  // the store as last read: the result's counts
        // The decision done, what the stream does after it: the replay of the kept changes
        // of an applied decision, the copy of a resync.
        const auto stream_work_left = [&](const std::optional<review>& after) {
          return r->status == cdc::decision_result::outcome::done && after &&
                 ((after->hold.state() == cdc::pb::HOLD_STATE_APPLYING &&
                   after->note.phase == "replay") ||
                  (after->hold.state() == cdc::pb::HOLD_STATE_AWAITING_RESYNC &&
                   (after->note.resync == cdc::resync_state::requested ||
                    after->note.resync == cdc::resync_state::running)));
        };
        bool stream_runs = false;
        for (;;) {
          stream_runs = false;
          seen.reset();
          if (auto again = open_store(*project, problem); again && again->store) {
            stream_runs = again->read_only;
            if (auto now = cdc::load_review(*again->store, target, table); now && *now)
              r->after = **now;
            seen = std::move(again);
          }
          // A stream that stopped meanwhile replays them when it starts again. A resync
          // is carried out after the result too (the copy, then the table resumes): its
          // outcome is the copy's.
          const bool replaying = stream_runs && stream_work_left(r->after);
          if (!replaying || std::chrono::steady_clock::now() >= replay_deadline)
            break;
          // Each look opens the state store: a few a second, not a busy loop.
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        // The stream stopped (or was killed) before it replayed or copied: said, so the
        // outcome line is not taken for work under way.
        // A resync it had started (waiting for its slot, or copying) is interrupted: the
        // next start says so, and the resync is decided again.
        if (!stream_runs && stream_work_left(r->after) &&
            r->after->note.resync == cdc::resync_state::running) {
          // Not carried out: the outcome says so (exit 1), as an apply cut short does.
          r->status = cdc::decision_result::outcome::failed;
          r->code = std::string(cdc::code_decision_failed);
          r->message = fmt::format(
              "the stream stopped while the resync {} waited for its slot or copied the "
              "table: the copy did not commit, and the target table is as it was. The next "
              "`flotilla stream` (or `flotilla review list`) marks it interrupted; then decide "
              "again: flotilla review resync {}",
              r->after->note.resync_operation, r->after->short_id());
        } else if (!stream_runs && stream_work_left(r->after))
          fmt::print(stderr,
                     "note: the stream stopped after carrying the decision out, before it "
                     "{}: no stream runs now; the next `flotilla stream` does it\n",
                     r->after->hold.state() == cdc::pb::HOLD_STATE_APPLYING
                         ? "replayed the kept changes"
                         : "copied the table again");
        // The DDL ran, but the stream could not replay the kept changes after it.
        if (r->status == cdc::decision_result::outcome::done && r->after &&
            r->after->hold.state() == cdc::pb::HOLD_STATE_LAST_DECISION_FAILED) {
          r->status = cdc::decision_result::outcome::failed;
          r->code = std::string(cdc::code_decision_failed);
          r->message = r->after->hold.error();
        }
        // Refused by the stream because another decision was taken first.
        if (stream_runs && r->after)
          while_stream_runs(*r, *r->after);
        return report_result(a, *r, seen ? seen->store.get() : nullptr, &*found);
      }
      if (std::chrono::steady_clock::now() >= deadline)
        return std::nullopt;
      // The store's lock free again (looked at once a second): whoever held it (a stream,
      // or another review command) is gone. A request nobody took is carried out here, as
      // with no stream running; one a stream took and never answered (killed, crashed) has
      // no result coming.
      if (++polls % 20 == 0)
        if (auto now = open_store(*project, problem); now && now->store && !now->read_only) {
          if (cdc::withdraw_request(project->state_dir, id)) {
            auto result =
                cdc::carry_out(*now->store, project_opener(*project), target, table, d, now_us());
            return report_result(a, result, now->store.get());
          }
          now.reset();  // the lock, free again for the next stream
          if (!cdc::read_result(project->state_dir, id))
            return report_result(
                a,
                cdc::decision_result{
                    cdc::decision_result::outcome::failed,
                    std::string(cdc::code_decision_failed),
                    "The stream stopped (killed, or it crashed) while it carried the decision "
                    "out; `flotilla review show` tells whether its DDL ran (a DDL that did not "
                    "commit changed nothing).",
                    fmt::format("Decide again if the review accepts a decision: flotilla review "
                                "show {}",
                                found->short_id()),
                    *found, false},
                nullptr);
        }
      // Polls a file the stream writes; a decision is a rare, interactive event.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  if (auto rc = wait_for(std::chrono::milliseconds(static_cast<long>(a.wait_seconds * 1000))))
    return *rc;
  if (stop.load() && cdc::withdraw_request(project->state_dir, id))
    return report_result(
        a,
        cdc::decision_result{
            cdc::decision_result::outcome::refused, std::string(cdc::code_stream_not_taking),
            "Stopped (Ctrl-C or SIGTERM) before the stream took the decision; it was withdrawn "
            "and nothing ran.",
            "Decide again when you mean it.", *found, false},
        store);
  if (cdc::withdraw_request(project->state_dir, id))
    return report_result(
        a,
        cdc::decision_result{
            cdc::decision_result::outcome::refused, std::string(cdc::code_stream_not_taking),
            fmt::format("The stream holding this review did not take the decision within {} s; "
                        "it was withdrawn and nothing ran.",
                        a.wait_seconds),
            "Another process holds the state store: a `flotilla stream`, which takes decisions "
            "between batches (check that it runs), or another command (a run, a review), "
            "which takes none: decide again once it ended, or stop the stream and decide "
            "while no stream runs.",
            *found, false},
        store);
  // The stream took it: its result follows within the decision's timeout.
  if (auto rc = wait_for(std::chrono::minutes(11)))
    return *rc;
  cdc::decision_result queued;
  queued.queued = true;
  queued.after = *found;
  queued.message = fmt::format(
      "{} {}: the running stream is carrying the decision out (request {}); `flotilla review "
      "show {} {}` shows its outcome",
      target, table, id, target, table);
  return report_result(a, queued, store);
}

}  // namespace

verb review_verb() {
  auto args = std::make_shared<review_args>();
  auto subs = std::make_shared<std::vector<std::pair<std::string, CLI::App*>>>();
  auto glob = std::make_shared<global_options*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options& g) {
        *glob = &g;
        auto* r = app.add_subcommand("review", "held changes: list, show and decide reviews");
        r->require_subcommand(1);
        auto add = [&](const std::string& name, const std::string& help, bool named) {
          auto* s = r->add_subcommand(name, help);
          s->add_option("--output", args->output, "text or json")
              ->check(CLI::IsMember({"text", "json"}));
          // Two positionals rather than one of 1-2 values, whose usage line CLI11 writes
          // as "[review(1x)]".
          if (named) {
            s->add_option("review", args->which_first,
                          "the target, followed by the table; or the id `review list` prints; "
                          "or the table alone, when it is held on one target only")
                ->type_name("TARGET | ID");
            s->add_option("table", args->which_second,
                          "<source>.<schema>.<table> (PostgreSQL source), as `review list` "
                          "prints it")
                ->type_name("SOURCE.SCHEMA.TABLE");
          }
          subs->emplace_back(name, s);
          return s;
        };
        auto* list = add("list", "list the reviews: table, target, state, kind", false);
        list->add_option("--target", args->target, "only this target's reviews");
        add("show", "show a review: source change, reason, proposed DDL, data consequence, ...",
            true);
        for (const auto& [name, help] :
             std::vector<std::pair<std::string, std::string>>{
                 {"apply", "apply the proposed DDL"},
                 {"resync", "run the review's DDL and copy the table again"},
                 {"remove", "stop applying the table on this target"}}) {
          auto* s = add(name, help, true);
          s->add_option("--wait", args->wait_seconds,
                        "while a stream runs: seconds to wait for it to carry the decision out")
              ->check(wait_seconds_check());
        }
        auto* edit = add("edit", "apply or resync with edited DDL", true);
        edit->add_option("--ddl", args->ddl, "the edited DDL");
        edit->add_option("--ddl-file", args->ddl_file, "a file holding the edited DDL");
        edit->add_flag("--apply", args->edit_apply, "apply the edited DDL");
        edit->add_flag("--resync", args->edit_resync, "resync with the edited DDL");
        edit->add_option("--wait", args->wait_seconds,
                         "while a stream runs: seconds to wait for it to carry the decision out")
            ->check(wait_seconds_check());
      },
      [=] {
        for (const auto& [name, s] : *subs)
          if (s->parsed()) {
            args->action = name;
            args->which.clear();
            for (const auto* w : {&args->which_first, &args->which_second})
              if (!w->empty())
                args->which.push_back(*w);
            return true;
          }
        return false;
      },
      [=] { return do_review(**glob, *args); }};
}

}  // namespace flotilla::cli
