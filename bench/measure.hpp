#pragma once
/// Measuring one execution: every timed path runs in its own child process (a step of
/// flotilla-bench itself, or `flotilla run`), so its CPU time and peak memory are its
/// own and nothing of an earlier path lingers in the next one's figures.
///
/// A step prints one JSON object as its last stdout line: {"wall_s", "cpu_s", "work", ...}
/// for its timed section; the parent adds the peak RSS the kernel reports for the child.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::bench {

/// A finished child process.
struct child_result {
  int exit_code = -1;             ///< exit status, or 128 + signal
  double wall_s = 0;              ///< fork to reap, seen by the parent
  double cpu_s = 0;               ///< user + system time of the child (all its threads)
  std::int64_t peak_rss_kb = 0;   ///< ru_maxrss of the child
  int signal = 0;                 ///< the signal that ended it, or 0
  std::string out;                ///< stdout
  std::string err;                ///< stderr

  /// The last non-empty line of stdout parsed as JSON (a step's result), if any.
  [[nodiscard]] std::optional<nlohmann::json> result_line() const;
  /// Exit code and the tail of stderr, for error messages.
  [[nodiscard]] std::string describe_failure() const;
};

struct child_options {
  std::string cwd;                           ///< Default: inherit
  std::map<std::string, std::string> env;    ///< added to the environment. Default: none
  /// Run in a process group of its own: for a program that signals its whole group when
  /// it fails (pgcopydb sends SIGTERM to "all processes in our process group"), which
  /// would end this harness and whatever started it. The launcher passes a Ctrl-C or
  /// SIGTERM it gets on to that group. Such a program runs under a guard that ends the
  /// workers it forked when the harness is killed (they would go on as orphans).
  bool own_group = false;
};

/// Forks the process that starts every later child (run_child), while this one is still
/// small. A child forked from a large process pays for copying its page tables (~50 ms
/// from 600 MB here), inside the timed section, and the kernel counts the parent's
/// resident memory at the fork in the child's ru_maxrss (exec keeps the high-water mark
/// of the replaced image), so a path run after a memory-hungry one would report that
/// scenario's memory as its own. Call it first, before any scenario. The launcher
/// ignores SIGINT and SIGTERM (a Ctrl-C reaches the child it runs, whose signals are at
/// their defaults) and exits when this process closes its end.
void start_launcher();

/// Runs argv[0] (searched in PATH when it has no slash) with the arguments and waits.
/// Never throws for a failing child; throws std::runtime_error when it cannot start.
[[nodiscard]] child_result run_child(const std::vector<std::string>& argv,
                                     const child_options& options = {});

/// `sh -c script`, for pipelines such as pg_dump | psql.
[[nodiscard]] child_result run_shell(const std::string& script, const child_options& options = {});

/// This executable's path (/proc/self/exe), for re-running itself as a step.
[[nodiscard]] std::string self_path();

/// CPU time (user + system, all threads) of this process so far, in seconds.
[[nodiscard]] double process_cpu_seconds();

/// Wall clock and CPU time of a step's timed section.
class stopwatch {
 public:
  stopwatch() : wall0_(std::chrono::steady_clock::now()), cpu0_(process_cpu_seconds()) {}
  [[nodiscard]] double wall_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
  }
  [[nodiscard]] double cpu_s() const { return process_cpu_seconds() - cpu0_; }

 private:
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_;
};

/// One timed execution of a path.
struct measurement {
  double wall_s = 0;
  double cpu_s = 0;
  std::int64_t peak_rss_kb = 0;
  double work = 0;        ///< rows, tables or events done in wall_s
  nlohmann::json detail;  ///< the step's own figures (breakdowns, counts)
};

/// Median, min and max of a set of figures.
struct spread {
  double median = 0;
  double min = 0;
  double max = 0;
  std::size_t n = 0;
};
[[nodiscard]] spread spread_of(std::vector<double> values);

}  // namespace flotilla::bench
