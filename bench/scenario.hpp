#pragma once
/// The scenarios of flotilla-bench, their options and what they share.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/report.hpp"

namespace flotilla::bench {

/// Sizes and repetitions. Every field has the full-size default; --smoke swaps in
/// tiny sizes that check the harness end to end in seconds.
struct bench_options {
  std::size_t runs = 3;    ///< measured runs of each path. Default: 3
  std::size_t warmup = 1;  ///< unmeasured runs first. Default: 1
  std::uint64_t rows = 1'000'000;        ///< copy-wide: rows of the one table. Default: 1,000,000
  std::uint64_t fleet_rows = 1'000'000;  ///< fleet-scale: total rows of every split. Default: 1,000,000
  /// fleet-scale: one client with this many tables each. Default: 1, 100, 1000, 10000
  std::vector<std::uint64_t> fleet_tables{1, 100, 1000, 10000};
  /// fleet-scale: also this many clients x tables ("100x100"; empty: none). Default: 100x100
  std::string fleet_grid = "100x100";
  /// fleet-scale: the warehouse, duckdb, postgres or sqlite. Default: duckdb
  std::string fleet_target = "duckdb";
  /// fleet-scale, DuckDB target: the block size of both paths' new files (the target's
  /// block_size key). 0: the sink's default for a new file (65536). Default: 0
  std::uint32_t fleet_block_size = 0;
  /// fleet-scale: "rerun" (a run after a point's first loads into the tables the one
  /// before left) or "fresh" (both paths' targets and Flotilla's state are emptied before
  /// every run, untimed: each run is a first load). Default: rerun
  std::string fleet_mode = "rerun";
  /// Zipf exponent of client and table sizes (0: even split). Default: 0.8
  double skew = 0.8;
  std::string prune_grid = "100x100";     ///< prune: clients x tables. Default: 100x100
  std::uint64_t prune_rows = 1'000'000;   ///< prune: total rows of the fleet. Default: 1,000,000
  std::uint64_t drift_tables = 10'000;    ///< drift-check: PostgreSQL tables. Default: 10,000
  std::uint64_t events = 200'000;         ///< kafka-events: events per run. Default: 200,000
  std::vector<std::uint64_t> peer_tables{100, 1000};  ///< peer: table counts. Default: 100, 1000
  std::uint64_t peer_rows = 3'000;        ///< peer: mean rows per table. Default: 3,000
  bool smoke = false;                     ///< tiny sizes, one run, no warm-up. Default: false
  bool require_pg = false;  ///< a missing FLOTILLA_PG_DSN fails instead of skipping. Default: false
  bool keep = false;        ///< keep the scratch directory and databases. Default: false
  std::string out_dir = "bench-out";      ///< results, plot, scratch. Default: ./bench-out
  std::string flotilla_bin;               ///< Default: `flotilla` beside this executable

  void apply_smoke();
};

struct bench_context {
  bench_options opt;
  std::string scratch;                ///< <out>/work: data files, targets, state
  std::optional<std::string> pg_dsn;  ///< FLOTILLA_PG_DSN
  std::string db_prefix;              ///< names of the bench's own databases
  [[nodiscard]] std::string runs_text() const;  ///< "3 runs after 1 warm-up"
};

struct scenario {
  std::string_view name;
  std::string_view summary;
  std::function<scenario_result(bench_context&)> run;
};

[[nodiscard]] const std::vector<scenario>& all_scenarios();

scenario_result run_copy_wide(bench_context& ctx);
scenario_result run_fleet_scale(bench_context& ctx);
scenario_result run_prune(bench_context& ctx);
scenario_result run_drift_check(bench_context& ctx);
scenario_result run_kafka_events(bench_context& ctx);
/// FLOTILLA_BENCH_KAFKA_BATCH as a batch size; 0 when unset. Throws std::invalid_argument
/// naming it when it is not a whole number of at least 1 (checked before any scenario).
std::size_t kafka_batch_from_env();
/// The tools the peer scenario needs that are not on PATH, as a message naming them and
/// their Debian packages; empty when all are there. pgcopydb counts only when
/// `need_pgcopydb` (--require-pg: a CI run must measure every peer).
[[nodiscard]] std::string missing_peer_tools(bool need_pgcopydb);
scenario_result run_peer(bench_context& ctx);

/// Set by SIGINT or SIGTERM (Ctrl-C): the run stops before the next timed path, its
/// scenario fails ("interrupted"), and the harness cleans up after itself and exits 130.
[[nodiscard]] bool interrupted();
/// What interrupted the run, for messages: "Ctrl-C" (SIGINT) or "SIGTERM".
[[nodiscard]] std::string_view interrupt_name();
/// Installs the handlers that set interrupted().
void catch_interrupts();

/// `count` times: calls each body in order (run i of every path back to back), first
/// `warmup` times unrecorded. Bodies return their measurement, or nullopt to skip.
/// Throws when interrupted() before a body.
void interleave(std::size_t warmup, std::size_t runs,
                const std::vector<std::pair<series*, std::function<measurement()>>>& bodies);

/// "100x100" -> {100, 100}; throws on malformed text.
[[nodiscard]] std::pair<std::size_t, std::size_t> parse_grid(const std::string& text);

}  // namespace flotilla::bench
