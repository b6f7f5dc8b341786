#pragma once
/// Running tables: what `run` and `retry` share (cli/run_verb.cpp).

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/verbs.hpp"

namespace flotilla::cli {

struct run_request {
  std::vector<std::string> filters;  ///< --filter arguments
  std::string output = "text";       ///< text | json
  bool no_prune = false;
  bool full_refresh = false;  ///< --full-refresh (a retry takes the retried run's)
  bool allow_rebuild = false;  ///< --allow-type-change-rebuild
  std::string command = "run";  ///< recorded in the run record and events: run | retry
  std::string retry_of;         ///< retry: the run it retries
  /// retry: only these tables ("<source>.<table>", "<source>.*"), loading staged data
  std::set<std::string> only;
  bool reuse_staged = false;
  /// retry: the runs whose staged data it loads (the retried run and those it retried)
  std::set<std::string> staged_runs;
};

/// A run record's status while its run has not finished: "running" (recorded at its
/// start; still so when the process was killed) or "interrupted" (so marked by the next).
[[nodiscard]] inline bool unfinished_run_status(std::string_view status) {
  return status == "running" || status == "interrupted";
}

/// Runs the selected tables, records the run, writes its events, prints the result.
/// Returns the exit code (0 success, 1 a table failed, 2 configuration).
[[nodiscard]] int execute_run(const global_options& g, const run_request& request);

}  // namespace flotilla::cli
