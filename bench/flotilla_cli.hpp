#pragma once
/// Driving `flotilla` the way users do: write a flotilla.toml, run
/// `flotilla -c flotilla.toml run --output json` as a child process, and read its run
/// JSON. Wall time, CPU time and peak RSS are the whole process's, startup included.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/measure.hpp"

namespace flotilla::bench {

struct toml_source {
  std::string name;
  std::string adapter;  ///< sqlite, postgres
  std::string path;     ///< sqlite
  std::string dsn;      ///< postgres
  std::vector<std::string> include;  ///< empty: every table
  std::map<std::string, std::string> tags;
  bool prune_unchanged = true;
};

struct toml_target {
  std::string dialect;  ///< duckdb, postgres, sqlite
  std::string path;
  std::string dsn;
  std::string schema = "{source}";
  std::uint32_t block_size = 0;  ///< duckdb: block_size (0: not written)
};

/// Writes a flotilla.toml with one target named "warehouse".
void write_config(const std::string& path, const toml_target& target,
                  const std::vector<toml_source>& sources);

/// The outcome of `flotilla run|plan --output json`.
struct flotilla_outcome {
  std::string executable;  ///< the flotilla run (--flotilla)
  std::string verb;        ///< run, plan
  child_result process;
  nlohmann::json run;   ///< the run JSON (null when the output was not JSON)
  std::map<std::string, std::size_t> statuses;  ///< copied/pruned/failed/... -> tables
  std::uint64_t rows = 0;
  std::size_t tables = 0;

  [[nodiscard]] std::string status_text() const;  ///< "9900 pruned, 100 copied"
  /// The first failed table's error, or the process failure.
  [[nodiscard]] std::string first_error() const;
};

/// Runs `flotilla -c config <verb> --output json <extra...>`.
[[nodiscard]] flotilla_outcome run_flotilla(const std::string& flotilla_bin,
                                            const std::string& config, const std::string& verb,
                                            const std::vector<std::string>& extra = {});

/// A measurement of a flotilla run: whole-process wall, CPU and peak RSS; `work` is the
/// run's rows, or its tables when `count_tables`. Throws when the run did not succeed
/// or its table statuses differ from `expect` (status -> tables; empty: all copied).
[[nodiscard]] measurement measure_flotilla(const flotilla_outcome& o, bool count_tables,
                                           const std::map<std::string, std::size_t>& expect);

}  // namespace flotilla::bench
