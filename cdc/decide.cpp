#include "cdc/decide.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cdc/outcome.hpp"
#include "cdc/review_store.hpp"

namespace flotilla::cdc {
namespace {

namespace fs = std::filesystem;
using outcome_t = decision_result::outcome;

decision_result refused(std::string_view code, std::string message, std::string hint = {},
                        std::optional<review> r = std::nullopt) {
  decision_result out;
  out.status = outcome_t::refused;
  out.code = std::string(code);
  out.message = std::move(message);
  out.hint = std::move(hint);
  out.after = std::move(r);
  return out;
}

decision_result failed(std::string message, std::optional<review> r = std::nullopt) {
  decision_result out;
  out.status = outcome_t::failed;
  out.code = std::string(code_decision_failed);
  out.message = std::move(message);
  out.after = std::move(r);
  return out;
}

decision_result done(review r) {
  decision_result out;
  out.after = std::move(r);
  return out;
}

/// The engine's reason without the statement echoed after it: the review shows the DDL.
std::string reason_of(const std::exception& e) {
  std::string s = e.what();
  if (auto at = s.rfind(" (in: "); at != std::string::npos)
    s.erase(at);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

dialects::table_ref bookkeeping_ref() {
  return {"", std::string(decisions_schema), std::string(decisions_table)};
}

void ensure_bookkeeping(sinks::warehouse& wh) {
  const auto& d = wh.dialect();
  const std::vector<std::string> ddl{
      d.create_schema(decisions_schema),
      fmt::format("CREATE TABLE IF NOT EXISTS {} (decision_id VARCHAR PRIMARY KEY, "
                  "review VARCHAR, ddl VARCHAR)",
                  d.qualified(bookkeeping_ref()))};
  // Two connections creating it at once: PostgreSQL lets one of them fail on the
  // catalog's unique index; the second attempt finds it.
  try {
    wh.execute(ddl);
  } catch (const sinks::sink_error&) {
    wh.execute(ddl);
  }
}

/// True when the target recorded the decision: its DDL committed.
bool target_recorded(sinks::warehouse& wh, const std::string& decision_id) {
  if (!wh.describe(bookkeeping_ref()))
    return false;
  const auto& d = wh.dialect();
  auto rows = wh.query(fmt::format("SELECT decision_id FROM {} WHERE decision_id = {}",
                                   d.qualified(bookkeeping_ref()), d.literal(decision_id)));
  return !rows.empty();
}

storage::status write(storage::state_store& store, const review& r) { return save_review(store, r); }

/// A statement that fails unless the target table has every column the source table has
/// after the held change: run after a decision's DDL, in its transaction, for a table
/// that resumes by replaying its changes (no resync). A DDL of comments only, or one that
/// leaves out a column the rows carry (the new name of a renamed column), would otherwise
/// resume the table and make the target refuse its next change, which stops the stream
/// for every table. Empty when the review does not say (recorded before 2026-12-08).
std::string resume_probe(const review& r, const decision_plan& p, const dialects::dialect& d) {
  if (p.resync || r.hold.requires_resync())
    return {};
  const auto detail = nlohmann::json::parse(r.hold.detail(), nullptr, false);
  if (!detail.is_object() || !detail.contains("target_name") || !detail.contains("columns_after") ||
      !detail["columns_after"].is_string())
    return {};
  const auto columns = nlohmann::json::parse(detail["columns_after"].get<std::string>(), nullptr, false);
  if (!columns.is_array() || columns.empty())
    return {};
  std::string list;
  for (const auto& c : columns)
    if (c.is_object() && c.contains("name") && c["name"].is_string())
      list += (list.empty() ? "" : ", ") + d.quote(c["name"].get<std::string>());
  if (list.empty())
    return {};
  const dialects::table_ref where{detail.value("target_catalog", std::string()),
                                  detail.value("target_schema", std::string()),
                                  detail.value("target_name", std::string())};
  return fmt::format("SELECT {} FROM {} WHERE 1 = 0", list, d.qualified(where));
}

constexpr std::string_view resume_probe_advice =
    "the target table must have every column the source table has after the change for the "
    "table to resume; edit the DDL to make them (e.g. the rename the proposal makes), resync "
    "the table, or remove it";

decision_result storage_failed(const storage::error& e, std::optional<review> r = std::nullopt) {
  return failed(fmt::format("the review could not be recorded: {}", e.message), std::move(r));
}

decision_plan plan_of(const review& r) {
  decision_plan p;
  p.kind = parse_decision_kind(r.note.decision).value_or(decision_kind::apply_edited);
  p.ddl = r.hold.applied_ddl();
  p.resync = p.kind == decision_kind::resync || p.kind == decision_kind::resync_edited;
  p.run_ddl = !r.note.ddl_ran && !comment_only(p.ddl);
  return p;
}

// ---- request and result files --------------------------------------------------------------

std::string escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  return out;
}

std::string unescape(std::string_view v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size()) {
      const char n = v[++i];
      out += n == 'n' ? '\n' : n == 'r' ? '\r' : n;
    } else {
      out += v[i];
    }
  }
  return out;
}

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// key=value lines, values escaped.
std::vector<std::pair<std::string, std::string>> parse_lines(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    auto eol = text.find('\n');
    auto line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    auto eq = line.find('=');
    if (eq != std::string_view::npos)
      out.emplace_back(std::string(line.substr(0, eq)), unescape(line.substr(eq + 1)));
  }
  return out;
}

void write_atomically(const fs::path& dir, const std::string& name, const std::string& content) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const auto tmp = dir / (name + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out)
      throw std::runtime_error(fmt::format("cannot write {}: check that the directory is writable",
                                           tmp.string()));
  }
  fs::rename(tmp, dir / name, ec);
  if (ec)
    throw std::runtime_error(fmt::format("cannot write {}: {}", (dir / name).string(), ec.message()));
}

std::string_view status_word(outcome_t s) {
  switch (s) {
    case outcome_t::done: return "done";
    case outcome_t::refused: return "refused";
    case outcome_t::failed: return "failed";
  }
  return "failed";
}

}  // namespace

// ---- opening targets ---------------------------------------------------------------------

target_opener opener_for(std::vector<sinks::warehouse_options> targets) {
  return [targets = std::move(targets)](const std::string& name) -> std::unique_ptr<sinks::warehouse> {
    for (const auto& t : targets) {
      if (t.name != name)
        continue;
      if (auto k = parse_target_kind(t.dialect); k && is_event_target(*k))
        return nullptr;
      return sinks::open_warehouse(t);
    }
    throw sinks::sink_error(fmt::format(
        "target '{}' is not defined in flotilla.toml; add its [targets.{}] section again or "
        "remove the table's review",
        name, name));
  };
}

// ---- decisions ---------------------------------------------------------------------------

decision_result recover_review(storage::state_store& store, const target_opener& open,
                               const review& r, std::int64_t now_us) {
  if (r.hold.state() != pb::HOLD_STATE_APPLYING || r.note.phase != "ddl")
    return done(r);
  const auto p = plan_of(r);
  review next;
  if (!p.run_ddl) {
    next = decision_succeeded(r, p, now_us);
  } else {
    try {
      auto wh = open(r.hold.target());
      if (wh && target_recorded(*wh, r.decision_id()))
        next = decision_succeeded(r, p, now_us);
      else
        next = decision_interrupted(r, now_us);
    } catch (const std::exception& e) {
      return failed(fmt::format("the interrupted decision on {} cannot be resolved yet: {}",
                                r.name(), reason_of(e)),
                    r);
    }
  }
  if (auto st = write(store, next); !st)
    return storage_failed(st.error(), r);
  return done(next);
}

std::vector<decision_result> recover_interrupted(storage::state_store& store,
                                                 const target_opener& open, std::int64_t now_us,
                                                 const std::function<bool(const review&)>& mine) {
  std::vector<decision_result> out;
  auto all = list_reviews(store);
  if (!all) {
    out.push_back(storage_failed(all.error()));
    return out;
  }
  for (const auto& r : *all) {
    if (mine && !mine(r))
      continue;
    if (r.hold.state() == pb::HOLD_STATE_APPLYING && r.note.phase == "ddl") {
      out.push_back(recover_review(store, open, r, now_us));
    } else if (r.note.resync == resync_state::running && is_open(r.hold.state())) {
      // Whoever holds the store for writing runs every resync there is: one marked
      // running now belongs to a process that is gone.
      const review next = resync_interrupted(r, now_us);
      if (auto st = write(store, next); !st)
        out.push_back(storage_failed(st.error(), r));
      else
        out.push_back(done(next));
    }
  }
  return out;
}

decision_result carry_out(storage::state_store& store, const target_opener& open,
                          std::string_view target, std::string_view table, const decision& d,
                          std::int64_t now_us) {
  auto loaded = load_review(store, target, table);
  if (!loaded)
    return storage_failed(loaded.error());
  if (!*loaded)
    return refused(code_unknown_review,
                   fmt::format("No review of {} on target '{}'; `flotilla review list` shows "
                               "the held tables.",
                               table, target));
  review r = std::move(**loaded);

  // This process holds the store: a decision still "running its DDL" belongs to a
  // process that died. Settle it from the target before deciding again.
  if (r.hold.state() == pb::HOLD_STATE_APPLYING && r.note.phase == "ddl") {
    auto rec = recover_review(store, open, r, now_us);
    if (rec.status != outcome_t::done)
      return rec;
    r = *rec.after;
  }

  const review same[] = {r};
  auto plan = check_decision(r, d, same);
  if (!plan)
    return refused(plan.error().code, plan.error().message, plan.error().hint, r);

  if (plan->remove) {
    review next = begin_decision(r, *plan, now_us);
    // Its changes after the schema change are never applied on this target.
    if (auto st = store.clear_held_changes(target, table); !st)
      return storage_failed(st.error(), r);
    if (auto st = write(store, next); !st)
      return storage_failed(st.error(), r);
    return done(next);
  }

  if (!plan->run_ddl) {
    // Nothing runs on the target; it must take the table's rows as they are now. An
    // unreachable target is not checked here: the stream names it when it starts.
    std::unique_ptr<sinks::warehouse> wh;
    try {
      wh = open(std::string(target));
    } catch (const std::exception&) {
    }
    if (wh)
      if (const std::string probe = resume_probe(r, *plan, wh->dialect()); !probe.empty()) {
        try {
          (void)wh->query(probe);
        } catch (const std::exception& e) {
          review next = decision_failed(
              begin_decision(r, *plan, now_us), *plan,
              fmt::format("{}: {}", resume_probe_advice, reason_of(e)), now_us);
          if (auto st = write(store, next); !st)
            return storage_failed(st.error(), r);
          return failed(next.hold.error(), next);
        }
      }
    review next = decision_succeeded(begin_decision(r, *plan, now_us), *plan, now_us);
    if (auto st = write(store, next); !st)
      return storage_failed(st.error(), r);
    return done(next);
  }

  std::unique_ptr<sinks::warehouse> wh;
  try {
    wh = open(std::string(target));
  } catch (const std::exception& e) {
    review next = decision_failed(begin_decision(r, *plan, now_us), *plan, reason_of(e), now_us);
    if (auto st = write(store, next); !st)
      return storage_failed(st.error(), r);
    return failed(next.hold.error(), next);
  }
  if (!wh)
    return refused(code_event_target_ddl,
                   fmt::format("Target '{}' is an event stream: it runs no DDL. Apply a "
                               "comment-only DDL, resync, or remove the table.",
                               target),
                   {}, r);

  try {
    ensure_bookkeeping(*wh);
  } catch (const std::exception& e) {
    review next = decision_failed(begin_decision(r, *plan, now_us), *plan,
                                  fmt::format("cannot create the decisions' bookkeeping table: {}",
                                              reason_of(e)),
                                  now_us);
    if (auto st = write(store, next); !st)
      return storage_failed(st.error(), r);
    return failed(next.hold.error(), next);
  }

  // Recorded before the DDL runs: after a crash the review says what was being run.
  review started = begin_decision(r, *plan, now_us);
  if (auto st = write(store, started); !st)
    return storage_failed(st.error(), r);

  const auto& dl = wh->dialect();
  std::vector<std::string> statements;
  if (dl.name() == "postgres")
    statements.push_back(
        fmt::format("SET LOCAL statement_timeout = {}", dl.literal(decision_timeout)));
  statements.push_back(plan->ddl);
  const std::string probe = resume_probe(r, *plan, dl);
  if (!probe.empty())
    statements.push_back(probe);
  statements.push_back(fmt::format("INSERT INTO {} VALUES ({}, {}, {})",
                                   dl.qualified(bookkeeping_ref()),
                                   dl.literal(started.decision_id()), dl.literal(started.name()),
                                   dl.literal(plan->ddl)));
  try {
    wh->execute(statements);
  } catch (const std::exception& e) {
    review next = decision_failed(started, *plan, reason_of(e), now_us);
    if (auto st = write(store, next); !st)
      return storage_failed(st.error(), started);
    return failed(next.hold.error(), next);
  }
  review next = decision_succeeded(started, *plan, now_us);
  if (auto st = write(store, next); !st)
    return storage_failed(st.error(), started);
  return done(next);
}

// ---- the inbox ---------------------------------------------------------------------------

fs::path inbox_dir(const fs::path& state_dir) { return state_dir / "reviews" / "inbox"; }
fs::path results_dir(const fs::path& state_dir) { return state_dir / "reviews" / "results"; }

std::string submit_request(const fs::path& state_dir, decision_request request) {
  static std::atomic<unsigned> counter{0};
  if (request.id.empty()) {
    const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    request.id = fmt::format("{:020}-{}-{}", now, ::getpid(), counter++);
  }
  const std::string content = fmt::format(
      "id={}\ntarget={}\ntable={}\ndecision={}\nddl={}\n", escape(request.id),
      escape(request.target), escape(request.table), to_string(request.what.kind),
      escape(request.what.ddl));
  write_atomically(inbox_dir(state_dir), request.id + ".req", content);
  return request.id;
}

namespace {

void write_result(const fs::path& state_dir, const std::string& id, const decision_result& r) {
  std::string content = fmt::format("status={}\ncode={}\nmessage={}\nhint={}\n",
                                    status_word(r.status), escape(r.code), escape(r.message),
                                    escape(r.hint));
  if (r.after)
    content += fmt::format("state={}\nerror={}\n", state_name(r.after->hold.state()),
                           escape(r.after->hold.error()));
  try {
    write_atomically(results_dir(state_dir), id + ".result", content);
  } catch (const std::exception&) {
    // nop: the review's state in the store tells the outcome as well
  }
}

std::vector<fs::path> inbox_files(const fs::path& state_dir, std::string_view extension) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(inbox_dir(state_dir), ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == extension)
      out.push_back(it->path());
  std::sort(out.begin(), out.end());  // ids begin with the submission time
  return out;
}

}  // namespace

std::vector<decision_result> process_inbox(storage::state_store& store, const target_opener& open,
                                           const fs::path& state_dir,
                                           const std::function<std::int64_t()>& now_us,
                                           const std::function<bool(const std::string&)>& streams_source) {
  std::vector<decision_result> out;
  std::error_code ec;
  // Claimed by a stream that stopped before it finished them.
  for (const auto& path : inbox_files(state_dir, ".taken")) {
    auto r = failed(
        "The stream stopped while carrying out this decision; `flotilla review show` tells "
        "whether its DDL ran. Decide again if the review still accepts a decision.");
    write_result(state_dir, path.stem().string(), r);
    fs::remove(path, ec);
    out.push_back(std::move(r));
  }
  for (const auto& path : inbox_files(state_dir, ".req")) {
    fs::path taken = path;
    taken.replace_extension(".taken");
    fs::rename(path, taken, ec);
    if (ec)
      continue;  // withdrawn meanwhile
    decision_request req;
    req.id = path.stem().string();
    std::string kind;
    if (auto text = read_file(taken))
      for (auto& [k, v] : parse_lines(*text)) {
        if (k == "target")
          req.target = v;
        else if (k == "table")
          req.table = v;
        else if (k == "decision")
          kind = v;
        else if (k == "ddl")
          req.what.ddl = v;
      }
    decision_result r;
    const std::string source = req.table.substr(0, req.table.find('.'));
    if (streams_source && !req.table.empty() && !streams_source(source)) {
      r = refused(code_stream_not_taking,
                  fmt::format("The running stream does not stream source '{}' (it was started "
                              "with a --filter that leaves it out): no stream would replay the "
                              "changes kept for {} or copy it. Nothing ran.",
                              source, req.table),
                  fmt::format("Start `flotilla stream` for source '{}' (stop the running one "
                              "first, or give it the source), or stop the running stream and "
                              "decide again: with no stream running, the decision is carried "
                              "out at once and the stream replays it when it starts.",
                              source));
    } else if (auto k = parse_decision_kind(kind); k && !req.target.empty() && !req.table.empty()) {
      req.what.kind = *k;
      r = carry_out(store, open, req.target, req.table, req.what, now_us());
    } else {
      r = refused(code_unknown_review,
                  fmt::format("The decision request {} cannot be read; decide again.", path.string()));
    }
    write_result(state_dir, req.id, r);
    fs::remove(taken, ec);
    out.push_back(std::move(r));
  }
  return out;
}

bool withdraw_request(const fs::path& state_dir, std::string_view id) {
  const auto path = inbox_dir(state_dir) / (std::string(id) + ".req");
  const auto gone = inbox_dir(state_dir) / (std::string(id) + ".withdrawn");
  std::error_code ec;
  fs::rename(path, gone, ec);
  if (ec)
    return false;
  fs::remove(gone, ec);
  return true;
}

std::optional<decision_result> read_result(const fs::path& state_dir, std::string_view id) {
  auto text = read_file(results_dir(state_dir) / (std::string(id) + ".result"));
  if (!text)
    return std::nullopt;
  decision_result r;
  for (auto& [k, v] : parse_lines(*text)) {
    if (k == "status")
      r.status = v == "done" ? outcome_t::done : v == "refused" ? outcome_t::refused : outcome_t::failed;
    else if (k == "code")
      r.code = v;
    else if (k == "message")
      r.message = v;
    else if (k == "hint")
      r.hint = v;
  }
  return r;
}

}  // namespace flotilla::cdc
