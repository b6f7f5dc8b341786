#pragma once
/// The project model loaded from flotilla.toml: plain, immutable once loaded (the loader
/// hands it out as shared_ptr<const project>, so actors on any thread may read it).
/// Each options field says its default. Paths are already resolved against the config
/// file's directory. docs/configuration.md is the reference of every key.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "schema/types.hpp"

namespace flotilla::config {

// ---- policy values ----------------------------------------------------------------

/// contract (seed 000): what is the source of truth for a table's columns.
enum class contract_mode : std::uint8_t {
  none,      ///< the live table; declared columns only pin types
  enforced,  ///< the declared columns; undeclared source columns are not loaded
};

/// on_schema_change (seed 000): what a new source column does.
enum class schema_change_policy : std::uint8_t {
  append_new_columns,  ///< added to the table (nullable)
  ignore,              ///< left out
  fail,                ///< stops the table
};

/// type_change_rebuild (seed 000): whether a type change that rebuilds the table may run.
enum class rebuild_policy : std::uint8_t {
  require_confirmation,  ///< needs --allow-type-change-rebuild
  allow,                 ///< runs
  deny,                  ///< stops the table
};

/// on_source_drift (seed 004): the run-time gate against the accepted baseline.
enum class drift_policy : std::uint8_t {
  ignore,  ///< no check at all
  warn,    ///< event and warning, the table succeeds
  fail,    ///< the table fails until `flotilla schema accept`
};

enum class adapter_kind : std::uint8_t { sqlite, duckdb, postgres, csv, json };

enum class event_format : std::uint8_t { json, protobuf };

[[nodiscard]] std::string_view to_string(contract_mode v);
[[nodiscard]] std::string_view to_string(schema_change_policy v);
[[nodiscard]] std::string_view to_string(rebuild_policy v);
[[nodiscard]] std::string_view to_string(drift_policy v);
[[nodiscard]] std::string_view to_string(adapter_kind v);
[[nodiscard]] std::string_view to_string(event_format v);

/// True for adapters that read a file or directory (sqlite, duckdb, csv, json).
[[nodiscard]] bool is_file_adapter(adapter_kind a);

/// Canonical dialect names, in the order the docs list them.
inline constexpr std::string_view executed_dialects[] = {"duckdb", "postgres", "sqlite"};
inline constexpr std::string_view plan_only_dialects[] = {"snowflake", "bigquery", "databricks",
                                                          "trino"};

/// The canonical name of a dialect name or alias ("postgresql", "pg" -> "postgres";
/// case-insensitive), or empty when unknown.
[[nodiscard]] std::string canonical_dialect(std::string_view name);

/// True when Flotilla can run against the dialect (duckdb, postgres, sqlite); the other
/// dialects are plan-only.
[[nodiscard]] bool is_executed_dialect(std::string_view canonical);

// ---- sections ---------------------------------------------------------------------

/// Where a section or key was written, for diagnostics raised after loading.
struct position {
  std::uint32_t line = 0;    ///< 1-based; 0 when unknown
  std::uint32_t column = 0;  ///< 1-based; 0 when unknown
};

/// The policy keys that may be set on [project], a source, or a table section. Unset
/// fields inherit (table -> source -> project -> built-in default; see policy.hpp).
struct policy_overrides {
  std::optional<contract_mode> contract;                 ///< Default: inherit (none)
  std::optional<schema_change_policy> on_schema_change;  ///< Default: inherit (append_new_columns)
  /// Default: inherit (allow without a contract, require_confirmation with one: enforced or declared columns)
  std::optional<rebuild_policy> type_change_rebuild;
  std::optional<bool> auto_widen;             ///< Default: inherit (false)
  std::optional<drift_policy> on_source_drift;  ///< Default: inherit (ignore)
  std::optional<bool> prune_unchanged;        ///< Default: inherit (false)
};

/// One declared column of a table section: `columns = { total = "decimal(18,2)" }`.
struct declared_column {
  std::string name;
  schema::portable_type type;  ///< parsed with schema::parse_type
  std::string type_text;       ///< as written in the file
};

/// `[sources.NAME.tables."schema.table"]` (or bare `tables.orders`).
struct table_config {
  /// The section name as written: "public.orders" or "orders". Matched against the
  /// source's catalog names by the rule in selection.hpp.
  std::string name;
  std::string description;              ///< Default: ""
  std::string cursor_column;            ///< empty: full refresh. Default: ""
  std::vector<std::string> unique_key;  ///< merge key. Default: none
  std::vector<declared_column> columns; ///< in declaration order. Default: none
  /// Declared columns the loader reported (bad type) and left out of `columns`.
  std::size_t columns_rejected = 0;
  policy_overrides policy;              ///< Default: all inherited
  position at;                          ///< the section header
  position cursor_column_at;            ///< where cursor_column is set; else `at`
  position unique_key_at;               ///< where unique_key is set; else `at`
  position on_source_drift_at;          ///< where on_source_drift is set; else `at`
};

/// `[targets.NAME]`: a warehouse.
struct target_config {
  std::string name;
  std::string dialect;   ///< canonical: duckdb, postgres, sqlite, snowflake, bigquery, databricks, trino
  bool executed = false; ///< duckdb, postgres, sqlite; others are plan-only
  std::string path;      ///< duckdb/sqlite database file, absolute. Default: ""
  std::string dsn;       ///< postgres connection string. Default: ""
  std::string database;  ///< database/catalog/project the schemas live in (key `database` or `catalog`). Default: ""
  /// Template of the target schema over the source name and its tags:
  /// "staging__{region}__{source}". sqlite has no schemas: the expansion prefixes the
  /// table name instead ("<schema>__<table>"). Default: "{source}"
  std::string schema = "{source}";
  position schema_at;  ///< where `schema` is set; the section header when it is not
  /// duckdb: the storage block size, in bytes, of a database file Flotilla creates (16384,
  /// 32768, 65536, 131072 or 262144); an existing file must have it. 0: not set: a new
  /// file gets 65536, an existing one keeps its own. Default: 0
  std::uint32_t block_size = 0;
  /// postgres: a full refresh of a live table of at most this many bytes (its heap), whose
  /// columns the refresh keeps as they are, empties it and loads it in place, in one
  /// transaction; a larger one loads a staging table and swaps it in. 0: always swap.
  /// Default: 1048576 (1 MiB)
  std::uint64_t in_place_max_bytes = 1048576;
  position at;
};

/// `[sources.NAME]`: one source of the fleet.
struct source_config {
  std::string name;
  adapter_kind adapter = adapter_kind::sqlite;
  std::string path;     ///< file adapters: database file, csv/json file or directory, absolute. Default: ""
  std::string dsn;      ///< postgres. Default: ""
  std::string capture;  ///< "logical" (postgres only): change-data capture. Default: "" (none)
  std::string target;   ///< name of a [targets] section. Default: the only target
  /// More targets `flotilla stream` applies the changes to (warehouses or event streams),
  /// each independently: its own slot, positions and holds. Default: none
  std::vector<std::string> stream_to;
  std::map<std::string, std::string> tags;  ///< Default: none
  std::vector<std::string> include{"*"};    ///< names or `*` globs. Default: ["*"]
  std::vector<std::string> exclude;         ///< names or `*` globs. Default: none
  position exclude_at;                      ///< where `exclude` is set
  position tags_at;                         ///< where `tags` is set; else the section header
  policy_overrides policy;                  ///< Default: all inherited from [project]
  std::uint32_t batch_rows = 8192;          ///< rows per read batch. Default: 8192
  std::vector<table_config> tables;         ///< per-table sections, in file order
  /// Index of `tables` for find_table (selection.hpp), built by the loader or by
  /// index_tables(); when empty, find_table scans. Default: empty
  std::unordered_map<std::string, std::uint32_t> table_lookup;
  position at;
};

/// `[events.kafka]`.
struct kafka_options {
  std::string brokers;  ///< bootstrap.servers; an array is joined with ','. Required
  std::string topic;    ///< Required
  event_format format = event_format::json;  ///< Default: json
  /// Pass-through librdkafka settings (`[events.kafka.settings]`); numbers and booleans
  /// are written as strings. Default: none
  std::map<std::string, std::string> settings;
};

/// `[events.pubsub]`.
struct pubsub_options {
  std::string project;        ///< Google Cloud project. Required
  std::string topic;          ///< Required
  std::string emulator_host;  ///< "host:port" of the Pub/Sub emulator. Default: "" (real service)
  event_format format = event_format::json;  ///< Default: json
};

/// `[targets.NAME]` with `dialect = "kafka"` or `"pubsub"`: an event stream that
/// `flotilla stream` publishes row and schema change events to (docs/cdc.md).
struct event_target_config {
  std::string name;
  std::string kind;  ///< "kafka" | "pubsub"
  std::optional<kafka_options> kafka;    ///< kind kafka
  std::optional<pubsub_options> pubsub;  ///< kind pubsub
  position at;
};

struct events_options {
  std::optional<kafka_options> kafka;    ///< Default: no Kafka sink
  std::optional<pubsub_options> pubsub;  ///< Default: no Pub/Sub sink
};

/// `[io]`.
struct io_options {
  /// Concurrent blocking connections (detached I/O actors) per source or target
  /// endpoint. Default: 4
  std::uint32_t max_connections_per_endpoint = 4;
};

/// `[resilience]` and `[policy]`: the drift-governance gate of seed 001.
struct governance_options {
  /// When true, only provably additive changes that a grant allows are applied;
  /// anything else fails the table for review. Default: false
  bool auto_apply_additive_drift = false;
  std::vector<std::string> grants;  ///< e.g. "schema_change.additive". Default: none
};

/// The whole project.
struct project {
  std::string config_path;  ///< the file as given (-c)
  std::string config_dir;   ///< absolute directory of the file; relative paths resolve here
  std::string name;         ///< Default: the name of config_dir
  bool name_given = false;  ///< [project] name is set (not the directory's name)
  std::string state_dir;    ///< absolute. Default: "<config_dir>/.flotilla"
  /// Runs whose records and directories are kept: after each run, older ones are removed
  /// (never the latest). 0 keeps every run. Default: 1000
  std::uint32_t keep_runs = 1000;
  /// Fleet-wide policy defaults: [project] may set every policy key. Default: all unset
  policy_overrides policy;
  std::vector<target_config> targets;  ///< in file order
  std::vector<source_config> sources;  ///< in file order
  std::vector<event_target_config> event_targets;  ///< in file order
  governance_options governance;
  events_options events;
  io_options io;

  [[nodiscard]] const target_config* find_target(std::string_view name) const;
  [[nodiscard]] const source_config* find_source(std::string_view name) const;
  [[nodiscard]] const event_target_config* find_event_target(std::string_view name) const;
  /// Every target `flotilla stream` applies a capture source's changes to: `target`
  /// first, then `stream_to`, without repeats.
  [[nodiscard]] std::vector<std::string> stream_targets_of(const source_config& s) const;
  /// The target a source writes to (never null once the project loaded without errors).
  [[nodiscard]] const target_config* target_of(const source_config& s) const;
};

}  // namespace flotilla::config
