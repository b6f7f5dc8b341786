// `flotilla stream`: change-data capture until Ctrl-C or SIGTERM (docs/cdc.md).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cdc/change_publisher.hpp"
#include "cdc/stream.hpp"
#include "cli/fleet_builder.hpp"
#include "cli/stop_signals.hpp"
#include "cli/run_output.hpp"
#include "cli/verbs.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {
namespace {

std::atomic<bool> g_stop{false};

struct stream_args {
  std::vector<std::string> filters;
  std::string output = "text";
  bool reload = false;
  bool setup_sql = false;
};

/// Tables, held tables and changes/s on a terminal; quiet when piped.
class stream_progress_line {
 public:
  explicit stream_progress_line(cdc::stream_progress& p) : p_(p) {
    if (!live_terminal())
      return;
    thread_ = std::thread([this] {
      std::uint64_t last = 0;
      auto last_at = std::chrono::steady_clock::now();
      double rate = 0;
      while (!stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        auto now = std::chrono::steady_clock::now();
        const std::uint64_t c = p_.changes.load();
        const double secs = std::chrono::duration<double>(now - last_at).count();
        rate = secs > 0 ? static_cast<double>(c - last) / secs : 0;
        last = c;
        last_at = now;
        fmt::print(stderr, "\r\x1b[Ktables {} ({} held)  copied {} rows  changes {}  {:.0f}/s",
                   p_.tables.load(), p_.tables_held.load(), p_.copied_rows.load(), c, rate);
      }
      fmt::print(stderr, "\r\x1b[K");
    });
  }
  ~stream_progress_line() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }

 private:
  cdc::stream_progress& p_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int do_stream(const global_options& g, const stream_args& a) {
  std::vector<config::filter> filters;
  auto project = load_or_report(g, a.filters, filters);
  if (!project)
    return 2;
  // One replication slot carries all of a source's changes: a stream of some of its
  // tables would confirm the slot past the others' changes (lost to every later stream),
  // and a reload of some would set the source up again without the others.
  for (const auto& f : filters)
    if (f.key == "table") {
      fmt::print(stderr,
                 "--filter table={}: `flotilla stream` streams a source's tables together, "
                 "through the one replication slot that carries all of its changes; a stream "
                 "of some of them would move the slot past the others' changes, and a "
                 "--reload of some would leave the others uncaptured. Select whole sources "
                 "(--filter source=NAME or a tag), and leave a table out of the stream with "
                 "exclude = [...] in its [sources.NAME] of flotilla.toml\n",
                 f.value);
      note_refusal("", fmt::format("--filter table={}: `flotilla stream` streams a source's "
                                   "tables together; select whole sources (--filter "
                                   "source=NAME or a tag) and leave tables out with exclude",
                                   f.value));
      return 2;
    }
  if (a.setup_sql) {
    try {
      const std::string sql = cdc::capture_setup_sql(*project, filters);
      if (sql.empty()) {
        fmt::print(stderr, "no selected source has capture = \"logical\"; set it on a postgres "
                           "source in flotilla.toml\n");
        note_refusal("", "no selected source has capture = \"logical\"; set it on a postgres "
                         "source in flotilla.toml");
        return 2;
      }
      fmt::print("{}", sql);
      return 0;
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}\n", e.what());
      return 1;
    }
  }
  // Beside a warehouse target the stream publishes each change event once, in one
  // encoding, to [events.kafka] and [events.pubsub] both: a configuration error.
  const auto beside_a_warehouse = [&] {
    for (const auto& src : project->sources)
      if (src.capture == "logical")
        if (const auto* t = project->target_of(src);
            t && t->dialect != "kafka" && t->dialect != "pubsub")
          return true;
    return false;
  };
  if (const std::string why = cdc::side_formats_conflict(*project);
      !why.empty() && beside_a_warehouse()) {
    // A configuration error, reported as the loader reports one (FLT-C005, the key).
    fmt::print(stderr, "{}: error FLT-C005: events.pubsub.format: {}\n", g.config_path, why);
    note_refusal("FLT-C005", why, g.config_path, 0, 0, "events.pubsub.format");
    return 2;
  }
  auto store = open_state(*project, true);
  if (!store)
    return 2;
  cdc::stream_progress progress;
  cdc::stream_options o;
  o.project = project;
  o.filters = filters;
  o.store = store.get();
  o.run_id = new_run_id();
  o.reload = a.reload;
  o.cancel = &g_stop;
  o.progress = &progress;
  static const std::string stopping = fmt::format(
      "{}flotilla: stopping: the stream ends once the changes it holds are applied; a second "
      "Ctrl-C or SIGTERM stops at once\n",
      live_terminal() ? "\n" : "");
  on_stop_signals(g_stop,
                  "flotilla: stream stopped at once by a second signal: it starts again from "
                  "its saved position, sending the changes after it again\n",
                  stopping.c_str());
  const auto started = std::chrono::steady_clock::now();
  cdc::stream_summary summary;
  {
    stream_progress_line line(progress);
    summary = cdc::run_stream(o);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (summary.exit_code == 2) {  // nothing was streamed
    for (const auto& s : summary.sources)
      if (s.error) {
        fmt::print(stderr, "{}\n", printable_message(*s.error));
        note_refusal("", *s.error);
      }
    return 2;
  }
  // A stop's reason once, though several of the source's targets report it.
  std::set<std::string> said;
  const auto say = [&](const std::string& error) {
    if (said.insert(error).second)
      fmt::print(stderr, "{}\n", printable_message(error));
  };
  if (a.output == "json") {
    nlohmann::json j{{"run_id", o.run_id},
                     {"status", summary.exit_code == 0 ? "stopped" : "failed"},
                     {"changes", progress.changes.load()},
                     {"transactions", progress.transactions.load()},
                     {"copied_rows", progress.copied_rows.load()},
                     {"seconds", secs}};
    nlohmann::json sources = nlohmann::json::array();
    for (const auto& s : summary.sources) {
      // On stderr too, as in text: a stop's reason reaches a terminal or a log either way.
      if (s.error)
        say(*s.error);
      nlohmann::json tables = nlohmann::json::array();
      for (const auto& t : s.tables)
        tables.push_back({{"table", t.target},
                          {"source_table", t.table},
                          {"state", t.state},
                          {"changes", t.changes},
                          {"copied_rows", t.copied_rows}});
      sources.push_back({{"source", s.source},
                         {"target", s.target},
                         {"slot", s.slot},
                         {"position", s.position.empty() ? nlohmann::json(nullptr)
                                                         : nlohmann::json(s.position)},
                         {"status", s.status},
                         {"error", s.error ? nlohmann::json(*s.error) : nlohmann::json(nullptr)},
                         {"tables", tables}});
    }
    j["sources"] = sources;
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    for (const auto& s : summary.sources) {
      if (s.error)
        say(*s.error);
      if (!s.source.empty())
        fmt::print("source {}  target {}  slot {}  position {}  {}\n", s.source, s.target, s.slot,
                   s.position.empty() ? "none" : s.position, s.status);
      for (const auto& t : s.tables)
        if (t.state != "streaming")
          fmt::print("  {}  {}\n", t.state, printable(t.target));
    }
    fmt::print("Stream {}: {} changes in {} transactions, {} rows copied, {:.1f} s\n", o.run_id,
               progress.changes.load(), progress.transactions.load(), progress.copied_rows.load(),
               secs);
  }
  return summary.exit_code;
}

}  // namespace

verb stream_verb() {
  auto args = std::make_shared<stream_args>();
  auto sub = std::make_shared<CLI::App*>(nullptr);
  auto glob = std::make_shared<global_options*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options& g) {
        *glob = &g;
        auto* s = app.add_subcommand("stream", "change-data capture; runs until stopped");
        s->add_option("--filter", args->filters,
                      "select whole sources: tag=value, source=... (not table=: a source's "
                      "tables stream together)");
        s->add_option("--output", args->output, "text or json (final summary)")
            ->check(CLI::IsMember({"text", "json"}));
        s->add_flag("--reload", args->reload,
                    "clear every hold and copy every table again from a fresh snapshot");
        auto* reload = s->get_option("--reload");
        s->add_flag("--setup-sql", args->setup_sql,
                     "print the SQL a superuser runs once so that a user that is not one can "
                     "stream each selected source, then exit")
            ->excludes(reload);
        *sub = s;
      },
      [=] { return *sub && (*sub)->parsed(); },
      [=] { return do_stream(**glob, *args); }};
}

}  // namespace flotilla::cli
