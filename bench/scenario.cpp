#include "bench/scenario.hpp"

#include <charconv>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

namespace flotilla::bench {

namespace {
volatile std::sig_atomic_t interrupt_signal = 0;
extern "C" void on_interrupt(int sig) { interrupt_signal = sig; }
}  // namespace

bool interrupted() { return interrupt_signal != 0; }

std::string_view interrupt_name() {
  return interrupt_signal == SIGINT    ? "Ctrl-C"
         : interrupt_signal == SIGTERM ? "SIGTERM"
         : interrupt_signal == SIGHUP  ? "SIGHUP (the terminal closed)"
                                       : "a signal";
}

void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a wait for a child returns, and is retried
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // A closed terminal or a dropped SSH session stops a long run as Ctrl-C does: what
  // finished is written and the scratch databases dropped.
  ::sigaction(SIGHUP, &sa, nullptr);
}

void bench_options::apply_smoke() {
  smoke = true;
  runs = 1;
  warmup = 0;
  rows = 2'000;
  fleet_rows = 2'000;
  fleet_tables = {1, 10, 40};
  fleet_grid = "3x5";
  prune_grid = "4x5";
  prune_rows = 1'000;
  drift_tables = 40;
  events = 1'000;
  peer_tables = {3, 10};
  peer_rows = 50;
}

std::string bench_context::runs_text() const {
  return fmt::format("{} run{} after {} warm-up", opt.runs, opt.runs == 1 ? "" : "s", opt.warmup);
}

const std::vector<scenario>& all_scenarios() {
  static const std::vector<scenario> list = {
      {"copy-wide", "one wide table: SQLite -> DuckDB, PostgreSQL -> DuckDB, SQLite -> PostgreSQL",
       run_copy_wide},
      {"fleet-scale", "the same rows over 1 .. 10,000 tables (and clients x tables) via flotilla run",
       run_fleet_scale},
      {"prune", "10,000 unchanged tables with prune_unchanged; then 1% changed", run_prune},
      {"drift-check", "10,000 PostgreSQL tables: catalog read and drift evaluation", run_drift_check},
      {"kafka-events", "events/s through the Kafka sink vs plain librdkafka", run_kafka_events},
      {"peer", "PostgreSQL -> PostgreSQL vs pgcopydb and pg_dump | psql", run_peer},
  };
  return list;
}

void interleave(std::size_t warmup, std::size_t runs,
                const std::vector<std::pair<series*, std::function<measurement()>>>& bodies) {
  // On a terminal, one line on stderr that says which run of which path is going on and
  // how the last one went; nothing when stderr is a pipe or a file, or under TERM=dumb.
  static const bool terminal = ::isatty(STDERR_FILENO) == 1 && [] {
    const char* term = std::getenv("TERM");
    return term == nullptr || std::string_view(term) != "dumb";
  }();
  const std::size_t total = warmup + runs;
  std::size_t done = 0;
  std::string last;
  for (std::size_t i = 0; i < total; ++i)
    for (const auto& [s, body] : bodies) {
      if (terminal && s != nullptr) {
        std::string line = fmt::format(
            "   {} {}/{}: {} {} ...{}", i < warmup ? "warm-up" : "run",
            i < warmup ? i + 1 : i + 1 - warmup, i < warmup ? warmup : runs, s->group,
            s->variant, last.empty() ? "" : "  (previous: " + last + ")");
        if (line.size() > 119)  // one line, whatever the path's name: \r must reach its start
          line.resize(119);
        fmt::print(stderr, "\r\033[K{}", line);
        std::fflush(stderr);
      }
      // Each run starts with the dirty pages of the one before written out (outside the
      // timed section), as a scheduled run finds the machine: otherwise a path pays for
      // the writeback of the path before it (ext4 commits another process's dirty data
      // with the first fsync it is asked for), which measures the order of the paths.
      if (interrupted())
        throw std::runtime_error(
            fmt::format("interrupted ({}) before this path's run", interrupt_name()));
      ::sync();
      auto m = body();
      ++done;
      if (terminal && s != nullptr && m.wall_s > 0)
        last = fmt::format("{:.2f} s, {} {}/s", m.wall_s,
                           grouped(static_cast<std::uint64_t>(m.work / m.wall_s)), s->unit);
      if (i >= warmup && s != nullptr)
        s->runs.push_back(std::move(m));
    }
  if (terminal && done > 0) {
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

std::pair<std::size_t, std::size_t> parse_grid(const std::string& text) {
  const auto whole = [](std::string_view part, std::size_t& n) {
    const auto* end = part.data() + part.size();
    const auto [p, ec] = std::from_chars(part.data(), end, n);
    return ec == std::errc{} && p == end && n > 0;
  };
  const auto x = text.find('x');
  std::size_t c = 0;
  std::size_t t = 0;
  if (x == std::string::npos || !whole(std::string_view(text).substr(0, x), c) ||
      !whole(std::string_view(text).substr(x + 1), t))
    throw std::runtime_error("expected CLIENTSxTABLES, both whole numbers above 0 (e.g. "
                             "100x100), got '" + text + "'");
  return {c, t};
}

}  // namespace flotilla::bench
