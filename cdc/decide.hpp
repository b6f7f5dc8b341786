#pragma once
/// Carrying out review decisions (seed 003) on the targets, and the inbox through which
/// `flotilla review` hands decisions to a running `flotilla stream`.
///
/// A decision runs its DDL once on the target, in one transaction: PostgreSQL with
/// SET LOCAL statement_timeout = '10min', DuckDB in one transaction of its own. The
/// same transaction records the decision's id in the target's bookkeeping table
/// (`_flotilla._flotilla_reviews`), and the review records the DDL (state applying)
/// before it runs, so a decision interrupted by a restart is resolved from the target:
/// recorded there means it ran (never run it again), absent means it changed nothing.
///
/// Blocking (RocksDB, target connections): call from an I/O thread. The process that
/// holds the state store's lock is the only one that carries decisions out; callers
/// must not carry out two decisions of the same review at once (process_inbox runs
/// them one after another).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cdc/review.hpp"
#include "sinks/warehouse.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cdc {

/// Opens a connection to a target by its [targets] name. Returns nullptr for an event
/// target (kafka, pubsub), which runs no DDL. Throws sinks::sink_error when the target
/// is unknown or cannot be reached.
using target_opener = std::function<std::unique_ptr<sinks::warehouse>(const std::string& target)>;

/// An opener over the given targets (name, dialect, path, dsn): dialect duckdb or
/// postgres opens the warehouse; kafka and pubsub give nullptr.
[[nodiscard]] target_opener opener_for(std::vector<sinks::warehouse_options> targets);

/// Schema and table of the decisions' bookkeeping on a relational target.
inline constexpr std::string_view decisions_schema = "_flotilla";
inline constexpr std::string_view decisions_table = "_flotilla_reviews";
/// The statement timeout of a decision's transaction on PostgreSQL.
inline constexpr std::string_view decision_timeout = "10min";

struct decision_result {
  enum class outcome {
    done,     ///< carried out (or queued: see `queued`)
    refused,  ///< refused before anything ran (exit 2)
    failed,   ///< ran and failed, or the target could not be reached (exit 1)
  };
  outcome status = outcome::done;
  std::string code;     ///< FLT-V0xx for refusals and failures; empty when done
  std::string message;  ///< the refusal or the error
  std::string hint;
  std::optional<review> after;  ///< the review as written, when it exists
  bool queued = false;  ///< handed to the running stream, not carried out yet

  [[nodiscard]] int exit_code() const {
    return status == outcome::done ? 0 : status == outcome::refused ? 2 : 1;
  }
};

/// Checks and carries out one decision on the review of (target, table). A review left
/// in applying by an interrupted decision is resolved first (recover_review).
[[nodiscard]] decision_result carry_out(storage::state_store& store, const target_opener& open,
                                        std::string_view target, std::string_view table,
                                        const decision& d, std::int64_t now_us);

/// Resolves a review whose decision was interrupted while its DDL ran (state applying,
/// phase "ddl"): the target's bookkeeping says whether the DDL committed. Returns the
/// review as written; unchanged when nothing was interrupted. Fails when the target
/// cannot be reached (the review stays as it is; try again later).
[[nodiscard]] decision_result recover_review(storage::state_store& store, const target_opener& open,
                                             const review& r, std::int64_t now_us);

/// recover_review for every review (those `mine` takes, when given): what the stream
/// calls once at start, before it applies anything. Each (source, target) pair of a
/// stream recovers its own tables' reviews: another pair, started beside it, may be
/// carrying one of its own out already.
[[nodiscard]] std::vector<decision_result> recover_interrupted(
    storage::state_store& store, const target_opener& open, std::int64_t now_us,
    const std::function<bool(const review&)>& mine = {});

// ---- the inbox: decisions for a running stream ------------------------------------------

/// A decision written by `flotilla review` while another process holds the store.
struct decision_request {
  std::string id;  ///< unique; the file name and the result's name
  std::string target;
  std::string table;
  decision what;
};

/// <state_dir>/reviews/inbox: pending requests, one file each.
[[nodiscard]] std::filesystem::path inbox_dir(const std::filesystem::path& state_dir);
/// <state_dir>/reviews/results: one file per carried-out request, named by its id.
[[nodiscard]] std::filesystem::path results_dir(const std::filesystem::path& state_dir);

/// Writes the request atomically (temporary file, then rename) and returns its id
/// (given, or made from the clock and the process id). Throws std::runtime_error naming
/// the directory when it cannot be written.
std::string submit_request(const std::filesystem::path& state_dir, decision_request request);

/// Carries out every pending request in submission order, writes each result file and
/// removes the request. The running stream calls this whenever it has a moment
/// (between batches), from the thread that owns the store's writes. `now_us` gives the
/// time of each decision.
///
/// A request is claimed (renamed from <id>.req to <id>.taken) before it is read, so a
/// request is either carried out or withdrawn (withdraw_request), never both. A claimed
/// request found at the start belongs to a stream that stopped while carrying it out:
/// its result says so (the review itself is settled by recover_interrupted).
/// `streams_source`, when given, says whether this stream streams a source: a decision
/// about a table of another (a stream started with --filter leaving it out) is refused at
/// once, since no stream would replay its kept changes or copy it.
std::vector<decision_result> process_inbox(
    storage::state_store& store, const target_opener& open, const std::filesystem::path& state_dir,
    const std::function<std::int64_t()>& now_us,
    const std::function<bool(const std::string&)>& streams_source = {});

/// Withdraws a request the stream has not claimed yet. True when withdrawn; false when
/// the stream already took it (its result will follow) or it does not exist.
[[nodiscard]] bool withdraw_request(const std::filesystem::path& state_dir, std::string_view id);

/// The result of a request, once the stream carried it out.
[[nodiscard]] std::optional<decision_result> read_result(const std::filesystem::path& state_dir,
                                                         std::string_view id);

}  // namespace flotilla::cdc
