#pragma once
/// Change markers (prune_unchanged): short strings that differ whenever a table's data
/// or shape may have changed. A marker that changes without a real change only costs a
/// copy; one that stays the same across a real change loses data, so every ingredient
/// errs towards changing.
///
/// File markers are taken BEFORE the catalog and rows are read, so a write that lands
/// during a run changes the next run's marker. Modification times come from a coarse
/// clock (a kernel tick), so two writes in one tick can share an mtime and, when the size
/// is unchanged too, look alike; the database markers therefore also read the engines'
/// own commit counters from the file headers, which change on every commit.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flotilla::sources {

/// Identity and modification state of a file, from stat(2).
struct file_state {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  /// The inode's change time: set by the kernel on every write and metadata change, so
  /// unlike mtime it cannot be set back (touch -d) to hide a rewrite.
  std::int64_t ctime_ns = 0;
};

[[nodiscard]] std::optional<file_state> stat_file(const std::string& path);

/// SQLite database file: identity and state of the file and of its "-wal" companion,
/// the file change counter (header offset 24, bumped by every commit in rollback-journal
/// mode) and the wal-index header in "-shm" (its change counter and frame count move
/// with every commit in WAL mode). nullopt when the file cannot be stat'ed.
[[nodiscard]] std::optional<std::string> sqlite_file_marker(const std::string& path);

/// DuckDB database file: identity and state of the file and of its ".wal" companion
/// (every commit appends to it until a checkpoint), and both database headers (their
/// iteration counter and checksum change with every checkpoint).
[[nodiscard]] std::optional<std::string> duckdb_file_marker(const std::string& path);

/// CSV/JSON file: identity, size, mtime and a hash of the first and last 64 KiB (catches
/// an in-place rewrite of the same size within one clock tick, near either end).
[[nodiscard]] std::optional<std::string> data_file_marker(const std::string& path);

/// Accumulates a table's column shape (names, declared types, nullability, key) or
/// other parts, and renders it as a fixed-width hash.
class shape_hash {
 public:
  void add(std::string_view part);
  [[nodiscard]] std::string hex() const;

 private:
  std::uint64_t h_ = 14695981039346656037ull;  // FNV-1a 64
};

}  // namespace flotilla::sources
