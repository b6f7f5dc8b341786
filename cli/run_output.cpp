#include "cli/run_output.hpp"

#include <iterator>
#include <map>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "cli/fleet_builder.hpp"
#include "cli/verbs.hpp"
#include "events/event.hpp"
#include "events/source_drift.hpp"

namespace flotilla::cli {
namespace {

/// Pretty-printed JSON as nlohmann's dump(2) lays it out: every member or element on its
/// own line, indented two spaces per level, empty containers as `{}` and `[]`. Members
/// are written in the order given, so callers give them in sorted order.
class pretty_json {
 public:
  /// `depth`: the nesting level the first value is written at (its lines are indented
  /// two spaces per level).
  explicit pretty_json(std::string& out, std::size_t depth = 0) : out_(out), depth_(depth) {}

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }

  /// The next member's key (a plain identifier: no escaping needed).
  pretty_json& key(std::string_view k) {
    separate();
    out_ += '"';
    out_ += k;
    out_ += "\": ";
    after_key_ = true;
    return *this;
  }

  void string(std::string_view s) {
    element();
    events::append_json_string(out_, s);
  }
  void number(std::uint64_t v) {
    element();
    fmt::format_to(std::back_inserter(out_), "{}", v);
  }
  void boolean(bool v) {
    element();
    out_ += v ? "true" : "false";
  }
  void null() {
    element();
    out_ += "null";
  }
  /// A value already written, at this nesting level, by another pretty_json.
  void raw(const std::string& text) {
    element();
    out_ += text;
  }

 private:
  // A value: after its key in an object; in an array it starts a new line.
  void element() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    separate();
  }
  void separate() {
    if (open_.empty())
      return;
    out_ += open_.back()++ ? ",\n" : "\n";
    out_.append(2 * (depth_ + open_.size()), ' ');
  }
  void open(char c) {
    element();
    out_ += c;
    open_.push_back(0);
  }
  void close(char c) {
    const bool any = open_.back() > 0;
    open_.pop_back();
    if (any) {
      out_ += '\n';
      out_.append(2 * (depth_ + open_.size()), ' ');
    }
    out_ += c;
  }

  std::string& out_;
  std::size_t depth_;
  std::vector<std::size_t> open_;  // members or elements written so far, per open level
  bool after_key_ = false;
};

void write_source_drift(pretty_json& w, const events::drift_verdict& v) {
  w.begin_object();
  w.key("baseline_run_id").string(v.baseline_run_id);
  w.key("changes").begin_array();
  for (const auto& c : v.changes) {
    w.begin_object();
    w.key("column").string(c.column);
    w.key("from").string(c.from);
    w.key("kind").string(events::to_string(c.kind));
    w.key("to").string(c.to);
    w.end_object();
  }
  w.end_array();
  w.key("decision").string(events::to_string(v.decision));
  w.key("hints_hash").string(v.hints_hash);
  w.key("policy").string(v.policy == config::drift_policy::fail ? "fail" : "warn");
  w.end_object();
}

void write_table(pretty_json& w, const actors::table_report& t, const std::string& target) {
  const auto& o = t.outcome;
  w.begin_object();
  w.key("error");
  if (o.error)
    w.string(*o.error);
  else
    w.null();
  if (!o.error_code.empty())
    w.key("error_code").string(o.error_code);
  if (o.plan)
    w.key("load").string(engine::to_string(o.plan->load));
  if (!t.not_pruned.empty())
    w.key("not_pruned").string(t.not_pruned);
  if (o.recovered) {
    // An earlier run's commit the state store did not record (killed in between).
    w.key("recovered");
    w.begin_object();
    w.key("rows").number(o.recovered->rows);
    w.key("run_id").string(o.recovered->run_id);
    w.key("watermark").string(o.recovered->watermark);
    w.end_object();
  }
  if (o.reused_staged)
    w.key("reused_staged").boolean(true);
  w.key("rows").number(o.rows);
  w.key("source").string(t.source);
  if (const auto* v = drift_verdict_of(o)) {
    w.key("source_drift");
    write_source_drift(w, *v);
  }
  w.key("source_table").string(t.table);
  w.key("status").string(engine::to_string(o.status));
  w.key("table").string(target);
  if (o.plan && !o.plan->warnings.empty()) {
    w.key("warnings").begin_array();
    for (const auto& x : o.plan->warnings)
      w.string(x);
    w.end_array();
  }
  w.end_object();
}

/// The drift actions taken: a copied table's, and a failed one's whose DDL had run (a
/// refused table took none).
template <class Each>
void for_each_action(const std::vector<actors::pipeline_report>& reports, Each&& each) {
  for (const auto& p : reports)
    for (const auto& t : p.tables)
      if (t.outcome.plan &&
          (t.outcome.status == engine::table_status::copied || t.outcome.ddl_applied))
        for (const auto& s : t.outcome.plan->drift.steps)
          each(t, s);
}

void write_events(pretty_json& w, const run_events_section& e) {
  w.begin_object();
  if (e.opened) {
    w.key("delivered").number(e.delivered);
    w.key("emitted").number(e.emitted);
  }
  w.key("errors").begin_array();
  for (const auto& x : e.errors)
    w.string(x);
  w.end_array();
  if (e.opened) {
    w.key("log").string(e.log);
    w.key("pending").number(e.pending);
  }
  w.end_object();
}

}  // namespace

run_summary summarize(const std::vector<actors::pipeline_report>& reports) {
  run_summary s;
  for (const auto& p : reports) {
    if (p.error)
      ++s.failed;
    for (const auto& t : p.tables) {
      const auto& o = t.outcome;
      if (const auto* v = drift_verdict_of(o); v && v->checked()) {
        ++s.source_checked;
        s.source_drifted += v->drifted() ? 1 : 0;
      }
      if (o.plan) {
        s.tables_checked += o.plan->drift_checked ? 1 : 0;
        s.tables_drifted += o.plan->drifted() ? 1 : 0;
      }
      if (o.status == engine::table_status::failed || o.status == engine::table_status::skipped)
        ++s.failed;  // a skipped table did not get its data: the run is not a success
      else
        ++s.ok;
    }
  }
  s.status = s.failed == 0 ? "success" : (s.ok == 0 ? "failed" : "partial");
  return s;
}

std::string run_tables_json(const std::vector<actors::pipeline_report>& reports) {
  std::size_t tables = 0;
  for (const auto& p : reports)
    tables += p.tables.size();
  std::string out;
  out.reserve(16 + tables * 256);
  pretty_json w(out, 1);
  w.begin_array();
  for (const auto& p : reports)
    for (const auto& t : p.tables)
      write_table(w, t, display_name(t.target));
  w.end_array();
  return out;
}

std::string run_json_text(const std::string& run_id,
                          const std::vector<actors::pipeline_report>& reports,
                          const run_summary& summary, const std::optional<std::string>& retry_of,
                          const run_events_section& events,
                          const std::string& tables) {
  std::string out;
  out.reserve(1024 + tables.size());
  pretty_json w(out);
  w.begin_object();
  if (const std::string warnings = config_warnings_json(); !warnings.empty())
    w.key("config_warnings").raw(warnings);
  w.key("drift").begin_object();
  w.key("actions_taken").begin_array();
  for_each_action(reports, [&](const actors::table_report& t, const schema::evolution_step& s) {
    w.begin_object();
    w.key("action").string(schema::seed_action(s.action));
    if (!s.also.empty()) {
      w.key("also").begin_array();
      for (const auto& a : s.also)
        w.string(a);
      w.end_array();
    }
    w.key("column").string(s.column);
    w.key("reason").string(s.reason);
    // Two sources may load tables of one name into different targets: which one it was.
    w.key("source").string(t.source);
    w.key("source_table").string(t.table);
    w.key("step").string(schema::to_string(s.action));
    w.key("table").string(display_name(t.target));
    w.end_object();
  });
  w.end_array();
  w.key("tables_checked").number(summary.tables_checked);
  w.key("tables_drifted").number(summary.tables_drifted);
  w.end_object();
  // Always there, empty when every source's tables were listed: scripts read it as is.
  w.key("errors").begin_array();
  for (const auto& p : reports)
    if (p.error) {
      w.begin_object();
      w.key("error").string(*p.error);
      w.key("error_code").string("FLT-R002");  // the source's catalog could not be read
      w.key("source").string(p.source);
      w.end_object();
    }
  w.end_array();
  w.key("events");
  write_events(w, events);
  if (retry_of)
    w.key("retry_of").string(*retry_of);
  w.key("run_id").string(run_id);
  // Only when the gate ran: with on_source_drift = ignore the run JSON is what it was
  // before the gate existed (seed 004).
  if (summary.source_checked > 0) {
    w.key("source_drift").begin_object();
    w.key("tables_checked").number(summary.source_checked);
    w.key("tables_drifted").number(summary.source_drifted);
    w.end_object();
  }
  if (const std::string warnings = source_warnings_json(); !warnings.empty())
    w.key("source_warnings").raw(warnings);
  w.key("status").string(summary.status);
  w.key("tables").raw(tables);
  w.end_object();
  return out;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        out += fmt::format("\\x{:02x}", c);
      else
        out += text[i];
      ++i;
      continue;
    }
    // A byte that starts no valid UTF-8 sequence is escaped too: raw, it would make the
    // output binary to grep, and show as a replacement character.
    const std::size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                            : c >= 0xf0 && c <= 0xf4                            ? 4
                                                                                : 0;
    bool valid = len != 0 && i + len <= text.size();
    for (std::size_t k = 1; valid && k < len; ++k)
      valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    if (!valid) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

std::string printable_message(std::string_view text) {
  // Line by line through printable(), the breaks (and the blanks around them) as "; ".
  // A break inside a quoted name ('new\ncol') is the name's own: escaped, as printable()
  // escapes it, so the name shown is the name.
  std::string out;
  const auto quoted_break = [&](std::size_t nl) {
    std::size_t quotes = 0;
    for (std::size_t i = 0; i < nl; ++i)
      quotes += text[i] == '\'' ? 1 : 0;
    return quotes % 2 == 1 && text.find('\'', nl) != std::string_view::npos;
  };
  while (!text.empty()) {
    auto nl = text.find('\n');
    while (nl != std::string_view::npos && quoted_break(nl))
      nl = text.find('\n', nl + 1);
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.remove_suffix(1);
    if (!out.empty())
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
        line.remove_prefix(1);
    if (!out.empty() && !line.empty())
      out += "; ";
    out += printable(line);
  }
  return out;
}

void print_run_text(const std::string& run_id, const std::vector<actors::pipeline_report>& reports,
                    const run_summary& summary, const run_events_section& events) {
  std::size_t copied = 0, pruned = 0, failed = 0, skipped = 0, held = 0;
  std::uint64_t rows = 0;
  for (const auto& p : reports)
    for (const auto& t : p.tables) {
      const auto s = t.outcome.status;
      copied += s == engine::table_status::copied;
      pruned += s == engine::table_status::pruned;
      failed += s == engine::table_status::failed;
      skipped += s == engine::table_status::skipped;
      held += s == engine::table_status::held;
      rows += t.outcome.rows;
    }
  // A name two tables of the run share (same-named tables in two targets) is told apart
  // by its source table, as plan shows it.
  std::map<std::string, int> named;
  for (const auto& p : reports)
    for (const auto& t : p.tables)
      ++named[display_name(t.target)];
  for_each_action(reports, [&](const actors::table_report& t, const schema::evolution_step& s) {
    std::string reason = s.reason;
    for (const auto& a : s.also)  // a drop_and_recreate's other changes, as plan shows them
      reason += "; also " + a;
    const std::string name = display_name(t.target);
    fmt::print("{:<20} {}{}  {}\n", schema::to_string(s.action), printable(name),
               named[name] > 1 ? printable(fmt::format(" (from {}.{})", t.source, t.table)) : "",
               printable_message(reason));
  });
  for (const auto& p : reports)
    for (const auto& t : p.tables)
      if (t.outcome.plan && t.outcome.status != engine::table_status::failed)
        for (const auto& x : t.outcome.plan->warnings)
          fmt::print("warning  {}  {}\n", printable(display_name(t.target)), printable_message(x));
  // A retry's table loaded from what the failed run staged: a value fixed at the source
  // since is not in it.
  for (const auto& p : reports)
    for (const auto& t : p.tables)
      if (t.outcome.reused_staged && t.outcome.status == engine::table_status::copied)
        fmt::print("staged  {}  loaded the rows the failed run read and staged, not read from "
                   "the source again; `flotilla run` reads what changed there since\n",
                   printable(display_name(t.target)));
  for (const auto& p : reports)
    for (const auto& t : p.tables)
      if (t.outcome.status == engine::table_status::failed ||
          t.outcome.status == engine::table_status::held)
        fmt::print("{}  {}  {}{}\n",
                   t.outcome.status == engine::table_status::held ? "held  " : "failed",
                   printable(display_name(t.target)),
                   t.outcome.error_code.empty() ? "" : t.outcome.error_code + ": ",
                   printable_message(t.outcome.error.value_or("")));
  // Tables a stop left unstarted: named, as the JSON names them (the first ones of a long
  // list: a stopped fleet's thousands would bury the rest).
  constexpr std::size_t skipped_named = 20;
  std::size_t skipped_said = 0;
  for (const auto& p : reports)
    for (const auto& t : p.tables)
      if (t.outcome.status == engine::table_status::skipped && skipped_said++ < skipped_named)
        fmt::print("skipped  {}  {}\n", printable(display_name(t.target)),
                   printable_message(t.outcome.error.value_or("not started")));
  if (skipped_said > skipped_named)
    fmt::print("skipped  ... and {} more table(s): the run's JSON (--output json, or "
               ".flotilla/runs/{}/run.json) lists them; `flotilla retry` copies them\n",
               skipped_said - skipped_named, run_id);
  for (const auto& p : reports)
    if (p.error)
      fmt::print("failed  source {}  {}\n", printable(p.source), printable_message(*p.error));
  for (const auto& e : events.errors)
    fmt::print("events  {}\n", e);
  // Events an earlier run could not deliver wait in the outbox for a sink that is no
  // longer configured.
  if (events.opened && events.errors.empty() && events.pending > 0 && !events.sinks)
    fmt::print("warning  events  {} event(s) wait in the outbox for delivery, and flotilla.toml "
               "configures no event sink ([events.kafka], [events.pubsub]) now: they are kept "
               "until one is configured again, and the next run then delivers them first\n",
               events.pending);
  std::size_t failed_sources = 0;
  for (const auto& p : reports)
    failed_sources += p.error ? 1 : 0;
  const std::string sources_failed =
      failed_sources == 0 ? std::string() : fmt::format(", {} source(s) failed", failed_sources);
  const std::string source_drift =
      summary.source_checked == 0
          ? std::string()
          : fmt::format("; source drift: {} checked, {} drifted", summary.source_checked,
                        summary.source_drifted);
  // The tables' status stands; the exit status (1) and this line say the events did not
  // all go out.
  // The event log itself unwritable (FLT-E004): said as such, not as events left over.
  const bool log_failed = std::any_of(events.errors.begin(), events.errors.end(),
                                      [](const std::string& e) { return e.starts_with("FLT-E004"); });
  const std::string undelivered =
      events.errors.empty() ? std::string()
      : log_failed || !events.opened
          ? std::string("; events: the run's event log could not be written, see the error "
                        "above")
      : events.pending == 0
          ? std::string("; events: none left to deliver, see the errors above")
          : fmt::format("; events: {} not delivered, kept in the outbox for the next run",
                        events.pending);
  // Held tables (a stream's review, FLT-V014) are named above and counted when there are.
  const std::string held_count = held == 0 ? std::string() : fmt::format(", {} held", held);
  fmt::print("Run {}  {}: {} copied, {} pruned, {} failed, {} skipped{}{}, {} rows; drift: {} "
             "checked, {} drifted{}{}\n",
             run_id, summary.status, copied, pruned, failed, skipped, held_count, sources_failed, rows,
             summary.tables_checked, summary.tables_drifted, source_drift, undelivered);
}

}  // namespace flotilla::cli
