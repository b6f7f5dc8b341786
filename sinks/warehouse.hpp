#pragma once
/// A warehouse writer (duckdb, postgres, sqlite): reads live table schemas, runs DDL
/// and loads rows. Blocking; used only from detached I/O actors. Errors are thrown as
/// sink_error and become the table's failure at the actor boundary.

#include <atomic>
#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dialects/dialect.hpp"
#include "schema/rows.hpp"
#include "schema/table.hpp"

namespace flotilla::sinks {

struct sink_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether a describe() error says that a column of the live table has a type Flotilla
/// cannot map: the table exists and was read, unlike a target that cannot be read.
[[nodiscard]] bool is_unmappable_column(std::string_view message);

/// Whether a describe() error says that the target table's name is held by another kind
/// of object (a view, an index, a sequence): nothing may be loaded there, nor dropped.
[[nodiscard]] bool is_not_a_table(std::string_view message);

enum class load_mode {
  replace,  ///< full refresh: load a staging table, swap it in atomically at commit
  append,   ///< insert the rows into the live table
  merge,    ///< upsert by unique_key: a rerun never duplicates rows
};

struct load_request {
  dialects::table_ref target;
  schema::table_schema columns;  ///< the batch's columns, in order; the live table may have more
  load_mode mode = load_mode::replace;
  std::vector<std::string> unique_key;  ///< merge only
  /// State written in the same target transaction as the rows (the table's
  /// watermark, so a crash between target and RocksDB commits is repaired on rerun).
  std::optional<std::string> commit_token;
  /// With commit_token: the token the run read before this load (nullopt: none was
  /// committed). A target another process's session may still commit to (PostgreSQL: a
  /// killed run's server session finishing its COMMIT) fails the load instead of
  /// committing when the token is no longer that one: the rows of both would be there.
  bool guard_token = false;
  std::optional<std::string> expected_token;
  /// Merge only: the live table has columns the load does not carry (dropped at the
  /// source, added by hand). A row arriving again then updates only the loaded columns,
  /// so those columns keep their values, rather than being deleted and inserted anew.
  bool keeps_other_columns = false;
  /// Merge only: the load replaces every live row (a full refresh with a unique_key: the
  /// table holds the rows read, one per key, the last one read), in one transaction.
  bool replace_rows = false;
  /// Merge only: the rows read are every row of the source (no watermark: a first
  /// incremental read into an existing table, a rewritten source, a new cursor_column).
  /// Live rows with a NULL in the key, which no arriving row matches, are deleted first:
  /// the read brings each of them again, which would otherwise be added once more.
  bool replaces_null_keys = false;
  /// With replace_rows: the live table is dropped and created anew with these columns
  /// first, in the load's transaction (a drop_and_recreate), so a crash leaves it as it
  /// was. Default: emptied (DELETE) instead.
  std::optional<schema::table_schema> recreate_as;
  /// What was made by hand on the live table (warehouse::hand_made_indexes: its names and
  /// the statements that made them): made again last in the load's transaction, after
  /// the rows and the swap, when the load replaces the table (a staging table swapped in,
  /// the table made again); nothing when it empties the table in place and keeps it.
  std::vector<std::string> hand_made_names;
  std::vector<std::string> hand_made_sql;
};

/// Loads one table. Nothing is visible to readers before commit(); a writer destroyed
/// without commit() rolls back and leaves the live table as it was.
class table_writer {
 public:
  virtual ~table_writer() = default;
  virtual void write(const schema::row_batch& batch) = 0;
  /// Replaces the commit token written with the rows (the watermark is known only once
  /// the rows are read). The load must have been begun with a token (any value).
  virtual void set_commit_token(std::string token) = 0;
  virtual void commit() = 0;
  [[nodiscard]] virtual std::uint64_t rows() const = 0;
  /// After commit(): the names of what the load made again on the table it replaced
  /// (load_request::hand_made_names); empty when it kept the table.
  [[nodiscard]] virtual std::vector<std::string> made_again() const { return {}; }
};

class warehouse {
 public:
  virtual ~warehouse() = default;
  [[nodiscard]] virtual const dialects::dialect& dialect() const = 0;
  /// Creates `schema` when missing, in its own transaction and safe against another
  /// connection creating it at the same time. Default: the dialect's CREATE SCHEMA IF
  /// NOT EXISTS.
  virtual void ensure_schema(const std::string& schema);
  /// The live table's schema (types parsed back through the dialect), or nullopt
  /// when the table does not exist. Throws sink_error when it cannot be read.
  [[nodiscard]] virtual std::optional<schema::table_schema> describe(
      const dialects::table_ref& table) = 0;
  /// Several tables of one schema described by one catalog query: for each table of
  /// `names` that exists, its schema as describe() returns it, or the message describe()
  /// would have thrown for it (a column type Flotilla cannot map); a table absent from
  /// the answer does not exist. nullopt: the engine has no such query (default), describe
  /// each table instead. Throws sink_error when the query fails.
  using described_tables = std::map<std::string, std::expected<schema::table_schema, std::string>>;
  [[nodiscard]] virtual std::optional<described_tables> describe_tables(
      const std::string& catalog, const std::string& schema, const std::vector<std::string>& names);
  /// Runs statements in order, in one transaction where the engine allows.
  virtual void execute(const std::vector<std::string>& statements) = 0;
  [[nodiscard]] virtual std::unique_ptr<table_writer> begin_load(const load_request& request) = 0;
  /// The commit token last committed with `table`'s rows, if any.
  [[nodiscard]] virtual std::optional<std::string> committed_token(
      const dialects::table_ref& table) = 0;
  /// Every commit token the target keeps, by the qualified table name (the dialect's
  /// qualified()), read by one query: empty when none was committed. nullopt: the engine
  /// has no such query (default).
  [[nodiscard]] virtual std::optional<std::map<std::string, std::string>> committed_tokens() {
    return std::nullopt;
  }
  /// Runs one query and returns its rows, each value in the engine's own text form
  /// (NULL as nullopt). For inspection tools and tests; loads never go through it.
  /// Default: throws sink_error (the engine offers no query path).
  [[nodiscard]] virtual std::vector<std::vector<std::optional<std::string>>> query(
      const std::string& sql);
  /// Rows a load's writer may take in at once before its write returns (DuckDB compresses
  /// and writes a whole row group inside the append that fills it). A copy queues at
  /// least this many rows from its reader, so the reader keeps reading meanwhile.
  /// Default: 0
  [[nodiscard]] virtual std::size_t write_burst_rows() const { return 0; }
  /// Whether a full refresh that keeps the live table `table`'s columns as they are
  /// empties it and loads it in place, in the load's transaction, instead of loading a
  /// staging table and swapping it in (PostgreSQL: a small plain table, see
  /// warehouse_options::in_place_max_bytes). begin_load asks it; a plan asks it to show
  /// the statements the load will run. Engines whose dialect replaces_in_place() always
  /// do, whatever this says. Default: false
  [[nodiscard]] virtual bool empties_in_place(const dialects::table_ref& table);
  /// An index made on the live table by hand (CREATE INDEX), not by Flotilla (the key).
  struct hand_made_index {
    std::string name;
    std::string create_sql;  ///< the statement that made it, as the engine keeps it
    std::string drop_sql;
  };
  /// The indexes made by hand on `table`, where a schema change would lose them or be
  /// refused for them: a rebuild drops them with the old table (DuckDB, SQLite), and
  /// DuckDB refuses to retype a column an index depends on. The engine makes them again
  /// after the change (dropping them first for a retype), in its transaction. Default:
  /// none (PostgreSQL retypes in place and keeps its indexes).
  [[nodiscard]] virtual std::vector<hand_made_index> hand_made_indexes(
      const dialects::table_ref& table);
  /// Whether a full refresh that replaces the live table (a swap, or a table made again)
  /// makes again what hand_made_indexes() lists (PostgreSQL, SQLite). DuckDB's refresh
  /// replaces the table as dbt's table materialization does (docs/dialects.md).
  /// Default: false
  [[nodiscard]] virtual bool keeps_hand_made_on_replace() const { return false; }
  /// After a schema change of `table`: views of its database that no longer read (a
  /// DuckDB view keeps the column types it was made with, and fails once they change)
  /// made again from their own statement, so they read the table as it is now. Returns
  /// the views made again. Default: none (PostgreSQL refuses a change a view depends
  /// on; SQLite views read the table as it is).
  [[nodiscard]] virtual std::vector<std::string> rebind_views(const dialects::table_ref& table);
  /// Whether an index on a column stops `ALTER COLUMN ... TYPE` (DuckDB). Default: false
  [[nodiscard]] virtual bool index_blocks_retype() const { return false; }
};

/// Block size of a DuckDB file the sink creates when the target sets none; the bench's
/// raw paths use it too. DuckDB's own, 256 KiB, gives every table of a few rows at least
/// one block for its data and one for its key's index, on disk and in memory: 10,000
/// tables of 100 rows made a 5.3 GB file. With 64 KiB, 1,000 such tables load 30–40%
/// faster in half the memory and a third of the disk, while a 1M-row copy is 2–4% slower
/// (16 KiB makes large tables 20–50% slower, in files 3x larger). docs/sinks.md, "DuckDB's
/// block size".
inline constexpr std::uint32_t duckdb_default_block_size = 65536;

struct warehouse_options {
  std::string name;     ///< the target's name in flotilla.toml, for messages
  std::string dialect;  ///< duckdb, postgres, sqlite
  std::string path;     ///< duckdb, sqlite file
  std::string dsn;      ///< postgres connection string
  /// duckdb: block size of a file the sink creates (config::target_config::block_size),
  /// which an existing file must have. 0: none set; a new file gets 64 KiB blocks and an
  /// existing one keeps its own.
  std::uint32_t block_size = 0;
  /// postgres: the largest live table (its heap, in bytes) a full refresh empties and
  /// reloads in place, when it keeps the table's columns as they are
  /// (config::target_config::in_place_max_bytes). 0: every full refresh swaps.
  std::uint64_t in_place_max_bytes = 1048576;
};

/// The run's stop request (the first Ctrl-C or SIGTERM). A PostgreSQL statement batch
/// that waits on the server (a lock held by another session, say) when it is set is
/// cancelled there, so its transaction rolls back instead of committing later: the
/// batch ends with COMMIT, and the server would otherwise run it to the end, even after
/// the process is gone. Null (the default): nothing is cancelled.
void set_stop_request(const std::atomic<bool>* stop) noexcept;

/// Opens a warehouse connection. Plan-only dialects (snowflake, bigquery, databricks,
/// trino) are refused with an error saying they are plan-only.
[[nodiscard]] std::unique_ptr<warehouse> open_warehouse(const warehouse_options& options);

}  // namespace flotilla::sinks
