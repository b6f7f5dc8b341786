#pragma once
/// Steps: the timed paths that run inside a child process, `flotilla-bench step <name>
/// key=value...`. Each one sets up what must not be timed (generating rows in memory),
/// runs its timed section, and prints one JSON line: {"wall_s", "cpu_s", "work", ...}.
///
///   raw-read-sqlite    path table                  raw-read-pg      dsn table
///   raw-write-duckdb   path schema table rows seed raw-write-pg     dsn schema table rows seed
///   copy               source_adapter source_path|source_dsn table
///                      target_dialect target_path|target_dsn target_schema target_table
///   raw-fleet-copy     dir (*.db files) duckdb     raw-catalog-sqlite dir
///   raw-catalog-pg     dsn                         drift-check      src_dsn dst_dsn dst_schema
///   kafka-raw          bootstrap topic events      count-target     dialect path|dsn (untimed)

#include <map>
#include <string>
#include <vector>

#include "bench/measure.hpp"

namespace flotilla::bench {

using step_args = std::map<std::string, std::string>;

/// Runs a step in this process and prints its result line. Returns the exit code.
int run_step(const std::string& name, const step_args& args);

/// Runs a step in a child process (this executable) and returns its measurement:
/// the step's own timed section, the child's peak RSS. Throws std::runtime_error when
/// the step fails, with its stderr.
[[nodiscard]] measurement measure_step(const std::string& name, const step_args& args);

/// "key=value" arguments -> map.
[[nodiscard]] step_args parse_step_args(const std::vector<std::string>& args);

}  // namespace flotilla::bench
