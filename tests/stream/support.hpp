#pragma once
// Helpers for the change-stream tests: a source and a target database per test on the
// test server, `flotilla stream` as a child process, and bounded waits.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "storage/state_store.hpp"

#include <sys/types.h>

namespace flotilla::stream_test {

using rows = std::vector<std::vector<std::string>>;

/// FLOTILLA_PG_DSN with its database replaced by `db`.
std::string dsn_for(const std::string& db);
rows pg_query(const std::string& dsn, const std::string& sql);
void pg_exec(const std::string& dsn, const std::string& sql);
/// Runs `sql` without test assertions (for writer threads); returns the error or "".
std::string pg_try(const std::string& dsn, const std::string& sql);
/// The rows of a query, or nullopt when it fails (a table not created yet); no assertions.
std::optional<rows> pg_try_rows(const std::string& dsn, const std::string& sql);
rows duckdb_query(const std::string& file, const std::string& sql);

/// A fresh directory, a source and a target database, and a flotilla.toml capturing the
/// source into the target (postgres, or duckdb when `duckdb_target`). Drops the
/// databases and the slot at the end. `extra_toml` goes at the end of the source's
/// section; `source_target` is the source's `target` (another target is defined in
/// `extra_toml`).
class fixture {
 public:
  explicit fixture(bool duckdb_target = false, const std::string& extra_toml = "",
                   const std::string& source_target = "wh");
  ~fixture();
  fixture(const fixture&) = delete;
  fixture& operator=(const fixture&) = delete;

  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] const std::string& source() const { return source_dsn_; }
  [[nodiscard]] const std::string& target() const { return target_dsn_; }
  [[nodiscard]] std::string duckdb_file() const { return dir_ + "/wh.duckdb"; }
  [[nodiscard]] std::string slot() const { return "flotilla_" + project_ + "_shop"; }

 private:
  std::string dir_, project_, source_db_, target_db_, source_dsn_, target_dsn_;
};

/// `flotilla stream` running in the fixture's directory.
class stream_process {
 public:
  stream_process(const fixture& f, std::vector<std::string> args = {});
  ~stream_process();  ///< kills it when still running
  /// SIGTERM, then waits (at most 30 s); returns the exit code.
  int stop();
  void kill9();
  /// Waits for it to exit by itself (at most `timeout`); -1 on timeout.
  int wait(std::chrono::seconds timeout);
  [[nodiscard]] std::string out() const;
  [[nodiscard]] std::string err() const;

 private:
  pid_t pid_ = -1;
  std::string dir_;
  int status_ = -1;
};

/// The state of the hold of `table` ("shop.public.orders") on `target`, read from the
/// fixture's state store; UNSPECIFIED while there is none or the store cannot be read
/// (no assertions: for polling).
flotilla::storage::pb::HoldState hold_state_in(const fixture& f, const std::string& target,
                                               const std::string& table);

/// Polls `done` every 100 ms until it is true or `timeout` passed; returns its last value.
bool eventually(const std::function<bool()>& done,
                std::chrono::seconds timeout = std::chrono::seconds(30));

/// Whether the fixture's slot confirmed everything written on the source so far, within
/// `timeout`. True also means the slot passed its consistent point: a change made after
/// it reaches the stream, not the snapshot copy.
bool confirmed(const fixture& f, std::chrono::seconds timeout = std::chrono::seconds(30));

/// Whether the fixture's slot exists and passed its consistent point, within `timeout`: a
/// change committed after this reaches the stream, not the snapshot copy (a slot being
/// created shows before that, while it waits for the transactions then running).
bool slot_consistent(const fixture& f, std::chrono::seconds timeout = std::chrono::seconds(60));

/// Whether the stream set the fixture's source up within `timeout`: its initial copy done
/// and its position saved (a stop before leaves none, and the next start sets up anew).
bool set_up(const fixture& f, std::chrono::seconds timeout = std::chrono::seconds(30));

}  // namespace flotilla::stream_test
