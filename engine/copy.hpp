#pragma once
/// The copy of one table: describe the target, plan, run the DDL, stream the rows
/// through the table's change queue, commit. Blocking: runs only in I/O actors.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/planner.hpp"
#include "sinks/warehouse.hpp"
#include "sources/source.hpp"

namespace flotilla::engine {

struct table_job {
  std::string source_name;
  std::string target_name;  ///< the target's name in flotilla.toml
  sources::source_table table;  ///< the table's catalog slice
  dialects::table_ref target;
  table_settings settings;
  std::optional<std::string> watermark;  ///< last committed cursor value
  std::size_t batch_rows = 8192;
  std::size_t queue_batches = 4;
  /// Rows written so far, for progress. May be null.
  std::atomic<std::uint64_t>* rows_progress = nullptr;
  /// Set by Ctrl-C: the copy stops before its commit and rolls back. May be null.
  const std::atomic<bool>* cancel = nullptr;
};

enum class table_status { copied, pruned, failed, skipped, held };
[[nodiscard]] std::string_view to_string(table_status s);

struct table_outcome {
  table_status status = table_status::failed;
  std::uint64_t rows = 0;
  std::optional<std::string> error;
  std::string error_code;
  std::optional<table_plan> plan;
  std::optional<std::string> new_watermark;  ///< to record after the target commit
};

/// Plans the table against the live target, without changing anything.
[[nodiscard]] table_plan plan_against_target(sinks::warehouse& wh, const table_job& job);

/// Copies one table. Never throws: failures come back in the outcome.
[[nodiscard]] table_outcome copy_table(sources::source& src, sinks::warehouse& wh,
                                       const table_job& job);

}  // namespace flotilla::engine
