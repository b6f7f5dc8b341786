#pragma once
/// `flotilla stream`: change-data capture from every selected PostgreSQL source with
/// `capture = "logical"` into its target, until stopped. docs/cdc.md describes it.
///
/// Ownership and threads: run_stream owns everything it opens. Each (source, target)
/// pair streams on its own thread with its own slot and connections (source,
/// replication, target); its tables are plain state objects (drift state, change queue,
/// hold) owned by that thread. A source's targets are independent: one holding a table
/// (or failing) does not pause the others' copies of it.
/// Shutdown: when `cancel` becomes true every source finishes the batch it is applying,
/// saves its position and closes its connections; run_stream then returns.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/model.hpp"
#include "config/selection.hpp"

namespace flotilla::storage {
class state_store;
}

namespace flotilla::cdc {

/// Live counters for the progress line; updated by the source threads.
struct stream_progress {
  std::atomic<std::uint64_t> tables = 0;
  std::atomic<std::uint64_t> tables_held = 0;
  std::atomic<std::uint64_t> changes = 0;       ///< row changes applied to targets
  std::atomic<std::uint64_t> transactions = 0;  ///< source transactions applied
  std::atomic<std::uint64_t> copied_rows = 0;   ///< rows of initial copies
};

struct stream_options {
  std::shared_ptr<const config::project> project;
  std::vector<config::filter> filters;
  storage::state_store* store = nullptr;
  std::string run_id;
  /// Clear every hold and copy every table again from a fresh snapshot. Default: false
  bool reload = false;
  /// Set to stop; checked between messages and batches. Required.
  const std::atomic<bool>* cancel = nullptr;
  stream_progress* progress = nullptr;  ///< Default: none
  /// Row changes gathered before a target commit. Default: 20000
  std::size_t batch_changes = 20000;
  /// Longest wait before an incomplete batch is committed, in ms. Default: 200
  int batch_ms = 200;
  /// Called between batches with the state directory (for the review inbox). Default: none
  std::function<void()> between_batches;
};

struct table_summary {
  std::string source;
  std::string table;   ///< on the source: "public.orders"
  std::string target;  ///< "schema.table" on the target
  std::string state;   ///< streaming | held | removed | stopped
  std::uint64_t changes = 0;
  std::uint64_t copied_rows = 0;
};

struct source_summary {
  std::string source;
  std::string slot;
  std::string position;  ///< last confirmed position
  std::string status;    ///< stopped | failed
  std::optional<std::string> error;
  std::vector<table_summary> tables;
  std::string target;  ///< the [targets] name this stream applies to
};

struct stream_summary {
  std::vector<source_summary> sources;
  /// 0: stopped by a signal with everything saved; 1: a source failed or stopped at a
  /// change; 2: nothing to stream (no source with capture = "logical" selected).
  int exit_code = 0;
};

/// `flotilla stream --setup-sql`: for each selected source with capture = "logical", the
/// SQL a superuser runs once so that the source's user streams it without being a
/// superuser (ddl_capture_setup_sql), after a comment naming the source. Connects to each
/// source to learn its user and database; throws when one is unreachable.
[[nodiscard]] std::string capture_setup_sql(const config::project& p,
                                            const std::vector<config::filter>& filters);

[[nodiscard]] stream_summary run_stream(const stream_options& options);

}  // namespace flotilla::cdc
