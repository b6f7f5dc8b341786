#pragma once
/// Reviews in the state store: a hold record and its review note, per (target, table),
/// in the `holds` family (docs/state.md). Blocking RocksDB calls: call them from I/O
/// threads, never from scheduler threads. One process writes the store (its lock);
/// the stream is that process while it runs, `flotilla review` otherwise.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cdc/review.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cdc {

/// The DDL a resumed review ran in place of its proposal, after the edits of the table's
/// earlier reviews it carries (`earlier_edits`); empty when none is in force.
[[nodiscard]] std::string edited_ddl_of(const pb::HoldRecord& h);

/// Opens the review of a held change: writes the hold record (state awaiting_review,
/// timestamps `now_us`) with its first kept changes, then its note. Returns the review.
[[nodiscard]] storage::result<review> create_review(storage::state_store& store,
                                                    pb::HoldRecord draft,
                                                    std::span<const pb::HeldChange> kept,
                                                    std::int64_t now_us);

/// The review of (target, table); nullopt when the table was never held there.
[[nodiscard]] storage::result<std::optional<review>> load_review(const storage::state_store& store,
                                                                 std::string_view target,
                                                                 std::string_view table);

/// Every review (or one target's), ordered by (target, table).
[[nodiscard]] storage::result<std::vector<review>> list_reviews(const storage::state_store& store,
                                                                std::string_view target = {});

/// The finished reviews a later hold of their table replaced (or one target's), ordered
/// by (target, table, creation): shown by `review list`, closed, accepting no decision.
[[nodiscard]] storage::result<std::vector<review>> list_finished_reviews(
    const storage::state_store& store, std::string_view target = {});

/// Writes the review's record and note in one batch.
[[nodiscard]] storage::status save_review(storage::state_store& store, const review& r);

/// The stream replayed the kept changes through `last_sequence`: removes them and, in
/// the next write, closes the review as resumed.
[[nodiscard]] storage::status finish_replay(storage::state_store& store, const review& r,
                                            std::uint64_t last_sequence, std::int64_t now_us);

/// The resync copy of the table ended: on success the kept changes are dropped (the
/// copy holds them) and the review reads resumed; on failure it says so.
[[nodiscard]] storage::status finish_resync(storage::state_store& store, const review& r, bool ok,
                                            std::string_view reason, std::int64_t now_us);

}  // namespace flotilla::cdc
