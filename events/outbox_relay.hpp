#pragma once
/// Delivers the outbox (storage's `outbox` family) to the event sinks, in sequence
/// order, and removes an entry only once every sink acknowledged it. Events wait there
/// across runs while a sink is down, so none is lost and the next run sends them first.
///
/// Within a run, the first failed delivery ends delivery for the rest of the run:
/// everything from the first unacknowledged event on stays in the outbox, so no later
/// event of a table can overtake an earlier one. A new relay (the next run) starts over,
/// except that a sink that acknowledged entries another sink did not is not sent them
/// again: its progress is kept in the store (state_store::outbox_sent_through).
///
/// Ownership and threads: one relay per run, owned by run_events (or a test). drain()
/// may be called from any thread (calls are serialized); start() runs the same drain on a
/// background thread, woken by notify() and every poll interval, so events reach the
/// sinks while the run goes on. Shutdown: finish() stops the thread and delivers what is
/// left; the destructor stops the thread without waiting for delivery.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "events/errc.hpp"
#include "events/sink.hpp"

namespace flotilla::events {

struct relay_options {
  /// Outbox entries read and handed to the sinks per round, in one deliver() each: a sink
  /// produces them all and waits for their acknowledgements once, so a backlog costs one
  /// wait (~25-50 ms with Kafka) per this many entries; with 5,000 the waits took most of
  /// the delivery time. 100,000 is librdkafka's own queue limit
  /// (queue.buffering.max.messages). Bounds the relay's memory (~0.5 KB per entry).
  /// Default: 100000
  std::size_t batch_size = 100000;
  /// How often the background thread looks at the outbox when nobody notified it.
  /// Default: 200 ms
  std::chrono::milliseconds poll_interval{200};
};

/// The outcome of a relay's deliveries so far.
struct drain_report {
  std::uint64_t delivered = 0;     ///< entries delivered and removed from the outbox by this relay
  std::uint64_t pending = 0;       ///< entries left in the outbox (undelivered), as of the report
  std::optional<error> failure{};  ///< why delivery stopped; empty when everything went out

  [[nodiscard]] bool ok() const { return !failure.has_value(); }
};

class outbox_relay {
 public:
  /// `store` must outlive the relay. With no sinks, nothing is delivered or removed.
  outbox_relay(storage::state_store& store, std::vector<std::unique_ptr<event_sink>> sinks,
               relay_options options = {});
  ~outbox_relay();
  outbox_relay(const outbox_relay&) = delete;
  outbox_relay& operator=(const outbox_relay&) = delete;

  /// Delivers every entry in the outbox, oldest first, waiting at most `timeout` for the
  /// sinks to acknowledge (default: the longest delivery timeout of the sinks). After a
  /// failure in this relay it returns at once with that failure.
  [[nodiscard]] drain_report drain(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Starts delivering in the background.
  void start();
  /// Wakes the background thread: new entries are in the outbox.
  void notify();
  /// Stops the background thread, then drains what is left (unless delivery already
  /// failed in this relay) and reports the totals. The run's last call.
  [[nodiscard]] drain_report finish(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  [[nodiscard]] bool has_sinks() const { return !sinks_.empty(); }
  [[nodiscard]] const std::vector<std::unique_ptr<event_sink>>& sinks() const { return sinks_; }

 private:
  void run_background();
  drain_report drain_locked(std::chrono::milliseconds timeout);
  std::uint64_t pending_count();

  storage::state_store& store_;
  std::vector<std::unique_ptr<event_sink>> sinks_;
  relay_options options_;

  std::mutex drain_mu_;                      // one drain at a time; guards the fields below
  std::vector<std::uint64_t> sent_through_;  // per sink: acknowledged through this sequence
  bool holding_ = false;                     // a rejected sink keeps every entry in the outbox
  std::uint64_t removed_through_ = 0;
  std::uint64_t delivered_ = 0;
  std::optional<error> failure_;

  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool notified_ = false;
  std::thread thread_;
};

}  // namespace flotilla::events
