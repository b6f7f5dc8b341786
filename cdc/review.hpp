#pragma once
/// Reviews of held changes (seed 003) as a pure state machine: the states and their
/// labels, the decisions, the refusals, and each transition. No I/O and no clock: the
/// caller passes `now_us`. cdc/review_store.hpp keeps reviews in the state store and
/// cdc/decide.hpp carries decisions out on the targets.
///
/// A review is a hold record (proto/state.proto HoldRecord, keyed by target and table)
/// plus its note: the bookkeeping of the decision in progress and of the resync, kept
/// beside the record and written in the same batch (state_store::put_hold_review).
///
///   awaiting_review ──apply──▶ applying(ddl) ──ok──▶ applying(replay) ──stream──▶ resumed
///         │  ▲                     │   └─ok, requires resync / resync──▶ awaiting_resync
///         │  └──────────────── failed ◀─┘                                   │ stream copies
///         └──remove (any open state but applying)──▶ removed                ▼
///                                                                          resumed

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "storage/state_store.hpp"

namespace flotilla::cdc {

namespace pb = storage::pb;

/// "paused: awaiting review", "applying", "paused: last decision failed",
/// "paused: awaiting resync", "resumed", "removed from pipeline".
[[nodiscard]] std::string_view state_label(pb::HoldState s);
/// awaiting_review, applying, ... (the HoldState's name, for JSON).
[[nodiscard]] std::string_view state_name(pb::HoldState s);
/// Open reviews hold their table; resumed and removed ones are closed.
[[nodiscard]] bool is_open(pb::HoldState s);
/// "rename column", "alter type", "drop column", "key change": the kind in words.
[[nodiscard]] std::string kind_label(std::string_view kind);

/// Edited DDL can be up to this many characters.
inline constexpr std::size_t max_ddl_chars = 65536;

enum class decision_kind { apply_proposed, apply_edited, resync, resync_edited, remove };

[[nodiscard]] std::string_view to_string(decision_kind k);
[[nodiscard]] std::optional<decision_kind> parse_decision_kind(std::string_view s);

struct decision {
  decision_kind kind = decision_kind::apply_proposed;
  std::string ddl;  ///< apply_edited and resync_edited: the edited DDL
};

enum class resync_state { none, requested, running, failed, done };

[[nodiscard]] std::string_view to_string(resync_state s);

/// The review's bookkeeping beside its hold record.
struct review_note {
  /// created_at_us of the hold this note belongs to; a note of another hold is ignored.
  std::int64_t hold_created_at_us = 0;
  std::string decision;   ///< the last decision: apply_proposed, resync, ... ("" none yet)
  /// While the state is applying: "ddl" while the DDL runs, "replay" once it ran and the
  /// stream replays the kept changes.
  std::string phase;
  std::int64_t decided_at_us = 0;  ///< when the last decision began: part of its id
  bool ddl_ran = false;  ///< applied_ddl was applied (ran, or held only comments): never again
  resync_state resync = resync_state::none;
  std::string resync_operation;  ///< the stream's name for the copy ("resync-<n>")
  std::string resync_error;

  [[nodiscard]] std::string serialize() const;
  /// Unknown lines are skipped, so an older build reads a newer note.
  [[nodiscard]] static review_note parse(std::string_view text);
  friend bool operator==(const review_note&, const review_note&) = default;
};

struct review {
  pb::HoldRecord hold;  ///< target and table are hold.target() / hold.table()
  review_note note;

  /// "<target> <table>": how the command line names a review.
  [[nodiscard]] std::string name() const;
  /// A short id for the command line: 8 hex digits of a hash of target and table.
  [[nodiscard]] std::string short_id() const;
  /// The id of the decision in progress (target, table, decided_at_us): what the
  /// target's bookkeeping records with the DDL, so a restart never runs it twice.
  [[nodiscard]] std::string decision_id() const;
  /// "Resync <operation>: <state>", or empty when no resync was asked for.
  [[nodiscard]] std::string resync_status() const;
  /// True while applied_ddl is DDL that was tried and rolled back ("Tried DDL").
  [[nodiscard]] bool ddl_was_tried() const;
};

/// The review note as stored, or a fresh one when the stored note belongs to another
/// hold (or none exists).
[[nodiscard]] review_note note_for(const pb::HoldRecord& hold, const std::optional<std::string>& stored);

/// A decision refused before anything runs. The message is seed 003's.
struct refusal {
  std::string code;     ///< FLT-V0xx
  std::string message;  ///< "This review is applying; it does not accept a decision."
  std::string hint;     ///< may be empty: "The proposal needs an edit first (see its comments)."
};

// ---- refusal codes and messages -------------------------------------------------------
inline constexpr std::string_view code_needs_edit = "FLT-V001";
inline constexpr std::string_view code_wrong_state = "FLT-V002";
inline constexpr std::string_view code_too_long = "FLT-V003";
inline constexpr std::string_view code_resync_needs_edit = "FLT-V004";
inline constexpr std::string_view code_resync_ddl_bound = "FLT-V005";
inline constexpr std::string_view code_resync_bound = "FLT-V006";
inline constexpr std::string_view code_resync_failed = "FLT-V007";
inline constexpr std::string_view code_not_earliest = "FLT-V008";
inline constexpr std::string_view code_no_ddl = "FLT-V009";
inline constexpr std::string_view code_transaction_control = "FLT-V010";
inline constexpr std::string_view code_unknown_review = "FLT-V011";
inline constexpr std::string_view code_event_target_ddl = "FLT-V012";
/// The running stream did not take a queued decision in time (seed 003's "agent is not
/// online").
inline constexpr std::string_view code_stream_not_taking = "FLT-V013";
/// A decision that ran and failed (exit 1): "apply DDL failed: <reason>".
inline constexpr std::string_view code_decision_failed = "FLT-V020";

inline constexpr std::string_view needs_edit_message =
    "The proposed DDL needs an edit before it can be applied (see its comments); submit the "
    "edited DDL.";
inline constexpr std::string_view needs_edit_hint = "The proposal needs an edit first (see its comments).";
inline constexpr std::string_view resync_needs_edit_message = "Edit the target DDL before resync.";
inline constexpr std::string_view too_long_message = "The DDL is longer than 65536 characters.";
inline constexpr std::string_view resync_ddl_bound_message =
    "This review already applied target DDL; resync must use that exact DDL.";
inline constexpr std::string_view apply_ddl_bound_message =
    "This review already applied target DDL; a decision must use that exact DDL. Make any "
    "further change on the target by hand, then apply again to replay the kept changes, or "
    "resync the table.";
inline constexpr std::string_view resync_bound_message =
    "This review already has a bound resync operation; wait for its result.";
inline constexpr std::string_view resync_failed_message =
    "This operation cannot be restarted from the review card; reload the pipeline to recover "
    "this table.";
/// "This review is <state>; it does not accept a decision." (applying: and that
/// `flotilla stream` carries its decision out)
[[nodiscard]] std::string wrong_state_message(pb::HoldState s);
/// The decisions an open review accepts now, in words for a message ("apply, edit, resync
/// or remove"; "resync or remove" awaiting a resync or after a replay stopped; "remove
/// (or a `flotilla stream --reload`)" after a failed resync; edit or remove for a
/// proposal that needs an edit; "" while applying: the decision is taken, and the stream
/// carries it out).
[[nodiscard]] std::string_view decisions_accepted(const review& r);

/// What carrying out an accepted decision does.
struct decision_plan {
  decision_kind kind = decision_kind::apply_proposed;
  /// The DDL shown as Applied DDL (or Tried DDL after a failure).
  std::string ddl;
  /// Run `ddl` on the target: false when it is comment-only or already ran.
  bool run_ddl = false;
  bool resync = false;  ///< copy the table again after the DDL
  bool remove = false;  ///< stop applying the table on this target
};

/// Checks a decision against the review and the open reviews of the same table on the
/// same target (`same_table`, the review itself may be among them): earliest first.
/// Returns what to do, or the refusal.
[[nodiscard]] std::expected<decision_plan, refusal> check_decision(
    const review& r, const decision& d, std::span<const review> same_table = {});

// ---- transitions: each returns the review to write --------------------------------------

/// Creates the review of a held change: state awaiting_review, timestamps `now_us`.
[[nodiscard]] review open_review(pb::HoldRecord draft, std::int64_t now_us);
/// The decision begins: remove closes the review at once (removed from pipeline); every
/// other decision moves to applying (phase "ddl") with applied_ddl recorded before the
/// DDL runs, so a restart knows what was being run.
[[nodiscard]] review begin_decision(const review& r, const decision_plan& p, std::int64_t now_us);
/// The DDL ran (or there was none): applying (phase "replay") for the stream to replay
/// the kept changes, or awaiting_resync when the change requires a resync or the
/// decision is a resync (then the resync is requested).
[[nodiscard]] review decision_succeeded(const review& r, const decision_plan& p, std::int64_t now_us);
/// The DDL failed and was rolled back: paused: last decision failed, error
/// "apply DDL failed: <reason>", applied_ddl kept as the tried DDL.
[[nodiscard]] review decision_failed(const review& r, const decision_plan& p, std::string_view reason,
                                     std::int64_t now_us);
/// A restart found the decision's DDL in progress and the target has no record of it:
/// it changed nothing. paused: last decision failed, saying so.
[[nodiscard]] review decision_interrupted(const review& r, std::int64_t now_us);
/// The stream could not replay the kept changes on the target (a DDL edited to leave the
/// target short of a column they name, say); nothing of them was applied: paused: last
/// decision failed, saying so. The table stays held.
[[nodiscard]] review replay_failed(const review& r, std::string_view reason, std::int64_t now_us);
/// The replay reached a kept change that stops the stream (a type change the target cannot
/// make, say): the changes before it were applied, the table stays held at it, and the
/// review is paused: last decision failed, saying so and what to do, so it takes a
/// decision again (remove, resync).
[[nodiscard]] review replay_stopped(const review& r, std::string_view reason, std::int64_t now_us);
/// The stream replayed every kept change: resumed (closed).
[[nodiscard]] review replay_finished(const review& r, std::int64_t now_us);
/// The stream started copying the table again.
[[nodiscard]] review resync_started(const review& r, std::string operation, std::int64_t now_us);
/// A resync found running when no process runs it (the stream that copied was killed):
/// its copy's transaction never committed. The review says so, no resync is bound to it
/// any more, and it takes a decision again (seed 003: "A decision interrupted by an agent
/// restart says so; decide again").
[[nodiscard]] review resync_interrupted(const review& r, std::int64_t now_us);
/// The copy ended: resumed on success; otherwise the review stays paused: awaiting
/// resync with "resync failed: <reason>", and only a reload recovers the table.
[[nodiscard]] review resync_finished(const review& r, bool ok, std::string_view reason,
                                     std::int64_t now_us);
/// A reload copies every table again and closes every open review (resumed).
[[nodiscard]] review closed_by_reload(const review& r, std::int64_t now_us);

/// True when the stream should replay the review's kept changes now (applying, after
/// the DDL ran).
[[nodiscard]] bool ready_to_replay(const review& r);
/// True when the stream should copy the table again now (a resync was asked for and
/// has not started).
[[nodiscard]] bool resync_requested(const review& r);
/// True while the review holds its table on its target: the stream keeps the table's
/// changes instead of applying them.
[[nodiscard]] bool holds_table(const review& r);

/// Refuses DDL holding BEGIN, COMMIT, ROLLBACK, START TRANSACTION or END statements:
/// Flotilla runs the DDL in one transaction of its own.
[[nodiscard]] bool has_transaction_control(std::string_view ddl);

}  // namespace flotilla::cdc
