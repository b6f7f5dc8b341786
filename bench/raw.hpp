#pragma once
/// The raw paths every scenario is compared with: what a hand-written program does with
/// each engine's own C API and nothing of Flotilla's — no portable row representation,
/// no conversions beyond the engine's native ones, no change queue, no actors.
///
///   SQLite read     sqlite3_step + sqlite3_column_* on every value
///   PostgreSQL read COPY (SELECT ...) TO STDOUT, each row received (not parsed)
///   DuckDB write    appender fed native data chunks (decimals as scaled integers,
///                   timestamps as microseconds): DuckDB's fastest ingest path
///   PostgreSQL write COPY ... FROM STDIN of text prepared before the clock starts
///
///   PostgreSQL -> DuckDB  the two together: COPY TO STDOUT parsed into native chunks on
///                   one thread, appended on another
///
/// All blocking and single-threaded but the last, run inside flotilla-bench step processes.

#include <cstdint>
#include <string>
#include <vector>

#include "bench/datagen.hpp"

namespace flotilla::bench {

struct raw_result {
  std::uint64_t rows = 0;
  std::uint64_t tables = 0;
  std::uint64_t checksum = 0;  ///< folds every value read, so nothing is optimised away
};

[[nodiscard]] raw_result raw_read_sqlite(const std::string& path, const std::string& table);
[[nodiscard]] raw_result raw_read_pg(const std::string& dsn, const std::string& qualified);

/// Rows held natively, as a program that already has its data in memory would.
[[nodiscard]] std::vector<wide_row> generate_rows(std::uint64_t rows, std::uint64_t seed);
/// COPY text of the rows, in chunks of about 1 MiB.
[[nodiscard]] std::vector<std::string> copy_text_chunks(const std::vector<wide_row>& rows);

/// Replaces `schema.table` in the DuckDB file with the rows, in one transaction, the
/// primary key added after them.
raw_result raw_write_duckdb(const std::string& path, const std::string& schema,
                            const std::string& table, const std::vector<wide_row>& rows);
/// Both engines at once, as a hand-written two-thread program would: a reader thread
/// parses the COPY text of the wide table `qualified` straight into native DuckDB data
/// chunks; this thread appends them to `schema.table` (replaced, one transaction).
raw_result raw_copy_pg_to_duckdb(const std::string& dsn, const std::string& qualified,
                                 const std::string& path, const std::string& schema,
                                 const std::string& table);
/// Replaces `schema.table` on PostgreSQL with the COPY text, in one transaction, the
/// primary key added after it.
raw_result raw_write_pg(const std::string& dsn, const std::string& schema, const std::string& table,
                        const std::vector<std::string>& chunks, std::uint64_t rows);

/// The block size of an existing DuckDB file.
[[nodiscard]] std::uint64_t duckdb_block_size(const std::string& path);

/// The raw fleet copy: every table of every SQLite file into DuckDB schema
/// <client> (the file's stem), one transaction per table (CREATE OR REPLACE, append,
/// commit), single-threaded. `block_size`: of a new file (0: the sink's default).
raw_result raw_copy_sqlite_fleet_to_duckdb(const std::vector<std::string>& sqlite_files,
                                           const std::string& duckdb_path,
                                           std::uint32_t block_size = 0);

/// The same into PostgreSQL: schema <client>, one transaction per table (DROP, CREATE,
/// COPY FROM STDIN of text built from the SQLite values, COMMIT), single-threaded.
raw_result raw_copy_sqlite_fleet_to_pg(const std::vector<std::string>& sqlite_files,
                                       const std::string& dsn);

/// The same into one SQLite file (tables "<client>__<table>", as Flotilla names them
/// there), with the sink's pragmas (WAL, synchronous = NORMAL): one transaction per table
/// (DROP, CREATE, one prepared INSERT bound per value), single-threaded, no rename.
raw_result raw_copy_sqlite_fleet_to_sqlite(const std::vector<std::string>& sqlite_files,
                                           const std::string& target_path);

/// Reads every file's catalog (tables and columns) with one query per file, and stats
/// the file: what any prune check has to do at least.
[[nodiscard]] raw_result raw_catalog_sqlite(const std::vector<std::string>& sqlite_files);

/// One pg_catalog query for every column of every user table of the database.
[[nodiscard]] raw_result raw_catalog_pg(const std::string& dsn);

}  // namespace flotilla::bench
