#pragma once
/// Runs a fleet: the fleet supervisor, one pipeline per source, one table actor per
/// table, and the detached I/O actors that do every blocking call. This header is free
/// of CAF so the command line compiles without it.
///
/// Ownership: run_fleet creates the actor system, blocks the calling thread until every
/// pipeline has reported, and shuts the system down before it returns.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/copy.hpp"
#include "sinks/warehouse.hpp"
#include "sources/source.hpp"

namespace flotilla::actors {

/// One table the pipeline hands to a table actor.
struct table_spec {
  engine::table_job job;
  std::size_t target_index = 0;
  /// prune_unchanged is on for this table (and not turned off by --no-prune).
  bool prune = false;
  /// The marker recorded at the last successful copy, when it ran under the same settings.
  std::optional<std::string> last_marker;
  /// Hash of the settings the copy runs under (ChangeMarker.settings).
  std::string settings_hash;
  /// A copy is recorded, under other settings: the table is not pruned.
  bool settings_changed = false;
  /// Another selected table lands on the same target table: why this one is refused
  /// (FLT-R006). Empty: none.
  std::string conflict;
  /// The target table it lands on, as claims tell target tables apart (target database
  /// and table): recorded with its commit, so a table another one loaded since is not
  /// pruned (table_commit::claim). Empty: not recorded.
  std::string claim;
  /// Staged data an earlier run kept for this table (StagedEntry.location); the file is
  /// removed once the table commits. Empty: none.
  std::string staged_path;
  /// An open review of the stream holds the table on its target: why. The table is
  /// reported held and nothing is copied. Empty: not held.
  std::string held;
  /// Why a table prune_unchanged would otherwise skip is copied (the run JSON's
  /// not_pruned), where the marker alone does not say. Empty: the marker decides.
  std::string not_pruned;
  /// The source reads a file a target of the project writes: its file marker changes
  /// with every run's own writes there (said when the table is not pruned).
  bool source_is_target_file = false;
};

struct pipeline_spec {
  sources::source_options source;
  /// Selects the tables of the catalog and builds their specs; the catalog is not used
  /// afterwards, so it may move tables out of it. Runs in an I/O actor, so it may read
  /// local state. Throwing fails the whole source.
  std::function<std::vector<table_spec>(sources::catalog&)> select;
  /// Kept catalogs, for sources that offer a whole-source marker
  /// (sources::source::file_marker). `kept_catalog(marker, version)` returns the catalog
  /// kept for this source when it was read at that marker by that adapter version;
  /// otherwise the source's catalog is read and, when it carries a file marker, handed
  /// to `keep_catalog(catalog, version)`. A source without such a marker that reuses
  /// known tables (csv, json) is handed `kept_catalog("", version)` and has its catalog
  /// kept by every read. Both run in the catalog reader; either may be empty (plan and
  /// --no-prune always read the source).
  std::function<std::optional<sources::catalog>(const std::string& marker, std::string_view version)>
      kept_catalog;
  std::function<void(const sources::catalog&, std::string_view version)> keep_catalog;
  /// Retry: when the source cannot be opened or its catalog read, the catalog of the
  /// tables to retry, each with the columns of its staged data, if every one of them has
  /// staged data to load (nullopt otherwise: the source is needed). Their loads never
  /// read the source. Empty: the source is always needed.
  std::function<std::optional<sources::catalog>()> staged_catalog;
  /// Sources whose tables land in the same target schema form a claim group
  /// (fleet_spec::resolve_claims): their tables start copying once every member's catalog
  /// is in, so that which of two clashing tables loads does not depend on whose catalog
  /// came first. `no_group`: none (the common case, e.g. a template with {source}).
  static constexpr std::size_t no_group = static_cast<std::size_t>(-1);
  std::size_t claim_group = no_group;
};

struct target_spec {
  sinks::warehouse_options options;
  /// Detached I/O actors (and connections) for this target. Default: 4
  std::size_t workers = 4;
  /// The workers share one connection to the target, one at a time (SQLite: one writer,
  /// and each connection keeps its own copy of the schema), and each reads its table's
  /// source while another loads (engine::table_job::target_lock).
  bool share_connection = false;
};

struct progress {
  /// Sources whose catalog is in (read, or failed), of the fleet's pipelines: until all
  /// are, tables_total counts only theirs.
  std::atomic<std::uint64_t> sources_read{0};
  std::atomic<std::uint64_t> sources_total{0};
  std::atomic<std::uint64_t> tables_total{0};
  std::atomic<std::uint64_t> tables_done{0};
  std::atomic<std::uint64_t> rows{0};
};

struct table_report {
  std::string source;
  std::string table;  ///< the source table, "schema.name"
  dialects::table_ref target;
  engine::table_outcome outcome;
  std::optional<std::string> marker;  ///< the marker seen this run
  /// Why a table whose prune_unchanged is on was copied, not pruned (seed 001: a source
  /// without a change marker says so); empty when pruning was off or it was pruned.
  std::string not_pruned;
};

struct pipeline_report {
  std::string source;
  std::optional<std::string> error;  ///< the source could not be read at all
  std::vector<table_report> tables;
};

struct fleet_spec {
  std::vector<target_spec> targets;
  std::vector<pipeline_spec> pipelines;
  bool plan_only = false;
  /// Called in the I/O actor right after a table's target commit, before the table is
  /// reported: writes watermark, marker and result to local state in one batch.
  std::function<void(const table_spec&, table_report&)> on_committed;
  /// Called in the I/O actor when a table's copy failed, before it is reported (keeps
  /// the staged data of a table the drift gate failed).
  std::function<void(const table_spec&, table_report&)> on_failed;
  progress* progress_counters = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  /// Members per claim group (pipeline_spec::claim_group), and what decides the group's
  /// clashes once every member's tables are selected: called with the members in
  /// `pipelines` order; it sets
  /// table_spec::conflict on the tables that must not load.
  std::vector<std::size_t> claim_group_sizes;
  /// `members`: the tables of the group's members, in flotilla.toml's order, null for a
  /// member whose catalog could not be read; `sources`: each member's source name.
  std::function<void(const std::vector<std::vector<table_spec>*>& members,
                     const std::vector<std::string>& sources)>
      resolve_claims;
  /// Detached actors reading source catalogs. Default: 2
  std::size_t catalog_readers = 2;
  /// Scheduler threads. Default: the number of cores
  std::size_t scheduler_threads = 0;
  /// Print to stderr, per source, whether its catalog was read from the source or a
  /// kept one was used (FLOTILLA_TRACE_CATALOG=1). Default: false
  bool trace_catalogs = false;
};

/// Runs the fleet and returns one report per pipeline, in the spec's order.
[[nodiscard]] std::vector<pipeline_report> run_fleet(const fleet_spec& spec);

}  // namespace flotilla::actors
