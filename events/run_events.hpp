#pragma once
/// The events of one run, end to end: every event emitted is stamped (run id, project,
/// per-run sequence from 1, timestamp), written as one line to the run's
/// `events.ndjson`, and — when an event sink is configured — appended to the outbox in
/// the state store, from where the outbox relay delivers it to every sink (Kafka,
/// Pub/Sub) while the run goes on. finish() waits for delivery: the run reports success only after it returns.
///
///   auto ev = events::run_events::open(store, project, run_id);    // at run start
///   ev->emit(events::run_started({...}));
///   ev->emit(events::table_started(...));        // from any thread, per table in order
///   ev->emit_with(commit, events::table_finished(...));  // in the table's state commit
///   ev->emit(events::run_finished({...}));
///   auto report = ev->finish();    // delivery outcome for the run JSON and exit code
///
/// Ownership and threads: one per run, owned by the command that runs it. emit() and
/// emit_with() may be called from any thread; one table's events must be emitted from
/// one thread at a time, in order (they are then delivered in that order). Shutdown:
/// finish() (or the destructor, which does not wait for delivery) stops the relay.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/model.hpp"
#include "events/errc.hpp"
#include "events/event.hpp"
#include "events/event_log.hpp"
#include "events/outbox_relay.hpp"
#include "events/sink.hpp"
#include "storage/state_store.hpp"

namespace flotilla::events {

struct run_events_options {
  /// Deliver while the run goes on (a background thread); false delivers in finish()
  /// only. Default: true
  bool deliver_in_background = true;
  relay_options relay{};  ///< Default: relay_options{}
};

/// The outcome of the run's event stream, for the run JSON and the exit code.
struct events_report {
  std::uint64_t emitted = 0;    ///< events written to events.ndjson
  std::uint64_t delivered = 0;  ///< outbox entries delivered by this run (older ones included)
  std::uint64_t pending = 0;    ///< outbox entries still undelivered
  /// Everything that went wrong: a sink's settings (FLT-E003), delivery (FLT-E001,
  /// FLT-E002), the NDJSON file (FLT-E004), the outbox (FLT-E005). Each also went to
  /// events.ndjson as an `events_undelivered` event when the file could take it.
  std::vector<error> errors{};
  std::filesystem::path log_path{};  ///< the run's events.ndjson

  /// True when every event reached every configured sink and the file.
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

/// Builds the sinks [events] configures: Kafka ([events.kafka]) and Pub/Sub
/// ([events.pubsub]). A sink whose settings are rejected is left out and its error
/// returned in `errors`.
[[nodiscard]] std::vector<std::unique_ptr<event_sink>> make_sinks(
    const config::events_options& options, std::vector<error>& errors);

class run_events {
 public:
  /// Opens `<state_dir>/runs/<run_id>/events.ndjson` and the sinks of [events]. Fails
  /// only when the file cannot be opened (FLT-E004). A sink whose settings are rejected
  /// (FLT-E003) does not fail it: its events still go to the outbox, to be delivered
  /// once the settings are fixed, and finish() reports the error. `store` may be null
  /// (no outbox: nothing is delivered); it must outlive the run_events.
  [[nodiscard]] static result<std::unique_ptr<run_events>> open(storage::state_store* store,
                                                                const config::project& project,
                                                                std::string run_id,
                                                                run_events_options options = {});

  /// Same with explicit sinks and file (tests; other front ends). `outbox` says whether
  /// events go to the outbox even when `sinks` is empty (a configured sink failed to build).
  [[nodiscard]] static result<std::unique_ptr<run_events>> open(
      storage::state_store* store, const std::filesystem::path& log_file, std::string run_id,
      std::string project, std::vector<std::unique_ptr<event_sink>> sinks, bool outbox,
      run_events_options options = {}, std::vector<error> setup_errors = {});

  ~run_events();
  run_events(const run_events&) = delete;
  run_events& operator=(const run_events&) = delete;

  /// Stamps `e`, writes its NDJSON line and appends it to the outbox. Returns the
  /// stamped event. Errors (FLT-E004, FLT-E005) are also kept for finish()'s report.
  [[nodiscard]] result<pb::Event> emit(pb::Event e);

  /// emit() of each event in order, with one write to events.ndjson and one outbox
  /// append for all of them. Returns the number emitted; on an outbox failure none of
  /// them reaches the outbox (all are in the file) and the error is returned (and kept).
  [[nodiscard]] result<std::size_t> emit_all(std::vector<pb::Event> events);

  /// One event of a batch: an Event, or a table_started/table_finished by its fields.
  using batch_event = std::variant<pb::Event, table_event_line>;
  /// emit_all of a batch that may hold table events by their fields. Without an outbox
  /// their lines are written straight from the fields (no Event is built); with one,
  /// each becomes the Event table_event_line::to_event() builds. The same lines either
  /// way.
  [[nodiscard]] result<std::size_t> emit_batch(std::vector<batch_event> events);

  /// Same as emit, but the outbox entry is added to `commit.events`, so commit_table writes it in
  /// the same batch as the table's state (the event exists exactly when the state does).
  [[nodiscard]] result<pb::Event> emit_with(storage::table_commit& commit, pb::Event e);

  /// Waits for the outbox to be delivered (at most `timeout`; default: the sinks'
  /// delivery timeout, message.timeout.ms for Kafka, 30 s unless set), stops the relay,
  /// and reports. When anything failed, an `events_undelivered` event per error is
  /// written to events.ndjson and the outbox (it reaches Kafka with the backlog). Call it
  /// once, after the last emit.
  [[nodiscard]] events_report finish(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Events emitted so far (the last sequence handed out).
  [[nodiscard]] std::uint64_t emitted() const;
  /// Numbers the next event after `sequence`: a run's events written again after a kill
  /// cut them short go on from the last one its file kept.
  void continue_after(std::uint64_t sequence);
  [[nodiscard]] const std::filesystem::path& log_path() const;
  [[nodiscard]] const std::string& run_id() const { return run_id_; }

 private:
  run_events(storage::state_store* store, event_log log, std::string run_id, std::string project,
             std::unique_ptr<outbox_relay> relay, bool outbox, bool json_payload,
             bool protobuf_payload, std::vector<error> setup_errors);

  /// Stamps and logs under the lock; returns the outbox entry to write (empty when the
  /// run has no outbox).
  result<storage::pb::OutboxEntry> record(pb::Event& e);
  /// Stamps `e` and appends its NDJSON line to `lines`; the outbox entry as record().
  /// `kept`: the caller reads `e` afterwards, so it must carry the run id and project.
  storage::pb::OutboxEntry stamp(pb::Event& e, std::string& lines, bool kept);
  void keep(const error& e);

  storage::state_store* store_;
  event_log log_;
  std::string run_id_;
  std::string project_;
  std::unique_ptr<outbox_relay> relay_;
  bool outbox_;
  /// What the outbox entries hold: the NDJSON line when a sink wants JSON, the serialized
  /// Event when one wants protobuf (or no sink is open), both when the sinks differ.
  bool json_payload_;
  bool protobuf_payload_;
  bool finished_ = false;

  mutable std::mutex mu_;  // sequence order = file order = outbox order
  std::uint64_t sequence_ = 0;
  std::vector<error> errors_;
};

}  // namespace flotilla::events
