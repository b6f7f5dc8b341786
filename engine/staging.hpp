#pragma once
/// Staged data: the rows of one table as extracted, kept in a local file until they are
/// committed to the target. The source-drift gate (seed 004) looks at this landed data
/// before any target is written; when the gate fails a table, the file is kept so that
/// `flotilla retry` loads it instead of extracting again (docs/events.md, "Retry").
///
/// Format (little-endian, one file per table and run): "FLTSTG2\n", the column count
/// and each column (name, portable type text, flags: nullable, key), then batches (row count, then
/// each cell as a tag byte and its payload), then an end mark with the row total, then
/// the CRC-32 (zlib's) of every byte after the magic. A file without its end mark is
/// incomplete (a crash while staging), one whose CRC differs is damaged: both are
/// refused, before the load that reads them commits. "FLTSTG1\n" files (no CRC) are read
/// as before.
/// Files are written under a temporary name, fsync'ed and renamed: a staged file that
/// exists is complete.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>

#include "schema/rows.hpp"
#include "schema/table.hpp"

namespace flotilla::engine {

struct staging_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Writes one staged file. Not thread-safe; one writer per file.
class staged_writer {
 public:
  /// Creates `<path>.tmp` (and its directory). Throws staging_error naming the path.
  staged_writer(std::filesystem::path path, const schema::table_schema& columns);
  ~staged_writer();  ///< without finish(): removes the temporary file
  staged_writer(const staged_writer&) = delete;
  staged_writer& operator=(const staged_writer&) = delete;

  void write(const schema::row_batch& batch);
  /// Ends the file, syncs it and renames it to its final path.
  void finish();
  [[nodiscard]] std::uint64_t rows() const { return rows_; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  void put(const void* data, std::size_t n);
  void flush();

  std::filesystem::path path_;
  std::filesystem::path tmp_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  std::size_t width_ = 0;
  std::uint64_t rows_ = 0;
  std::uint32_t crc_ = 0;  ///< of every byte written after the magic
  bool finished_ = false;
};

/// The columns a staged file holds (its header). Throws staging_error.
[[nodiscard]] schema::table_schema staged_columns(const std::filesystem::path& path);

/// Checks a staged file whole before anything is done with its rows (a retry's DDL runs
/// before them): its magic and its CRC. Throws staging_error, naming it, as read_staged
/// would once part of it was loaded.
void verify_staged(const std::filesystem::path& path);

/// Reads a staged file's batches of at most `batch_rows` rows; `consume` returning false
/// stops early. Returns the rows read. Throws staging_error for a missing, truncated or
/// corrupt file, naming it.
std::uint64_t read_staged(const std::filesystem::path& path, std::size_t batch_rows,
                          const std::function<bool(schema::row_batch&&)>& consume);

}  // namespace flotilla::engine
