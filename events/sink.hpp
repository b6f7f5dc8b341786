#pragma once
/// An event sink: somewhere the run's events are delivered (kafka_sink.hpp,
/// pubsub_sink.hpp). The
/// outbox relay (outbox_relay.hpp) hands each sink the outbox's entries in sequence
/// order and removes an entry once every sink has acknowledged it.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "events/errc.hpp"
#include "events/event.hpp"
#include "storage/state_store.hpp"

namespace flotilla::events {

/// The outbox entry of the stamped event `e` (its sequence, timestamp and run id set):
/// its key, `payload` (e in `format`), and the headers a sink sends beside the payload.
[[nodiscard]] storage::pb::OutboxEntry outbox_entry(const pb::Event& e, std::string payload,
                                                    storage::pb::PayloadFormat format);

/// The payload of `entry` in the format a sink sends (JSON when `want_json`, else the
/// serialized Event), when the entry holds it with its headers (outbox_entry): the sink
/// sends it and the headers as they are. Null when the sink must read the entry back.
[[nodiscard]] const std::string* ready_payload(const storage::pb::OutboxEntry& entry,
                                               bool want_json);

/// The run's stop flag (Ctrl-C, SIGTERM), which a sink waiting for acknowledgements heeds:
/// once it is set, a wait gives up after a short first round (~100 ms), so a healthy
/// broker still takes the events and an unreachable one does not hold the stop. Null
/// (the default): nothing asks.
void set_stop_request(const std::atomic<bool>* stop) noexcept;
/// Whether the flag set_stop_request gave is set.
[[nodiscard]] bool stop_requested() noexcept;

/// What one deliver() call achieved.
struct delivery {
  /// Sequence of the last entry of the longest acknowledged prefix of the batch; 0 when
  /// not even the first entry was acknowledged.
  std::uint64_t delivered_through = 0;
  /// Entries in that prefix.
  std::size_t delivered = 0;
  /// Why the rest of the batch was not delivered; empty when all of it was.
  std::optional<error> failure{};
};

/// Ownership and threads: owned by one outbox_relay, which calls it from one thread at a
/// time. Shutdown: the destructor abandons anything not yet acknowledged (it stays in
/// the outbox).
class event_sink {
 public:
  virtual ~event_sink() = default;

  /// "kafka", "pubsub".
  [[nodiscard]] virtual std::string_view kind() const = 0;
  /// Where the events go, for messages: "brokers 127.0.0.1:9092, topic flotilla.events".
  [[nodiscard]] virtual std::string destination() const = 0;
  /// True when the sink sends events as NDJSON lines (format = json): an outbox whose
  /// sinks all want JSON stores the line itself, which such a sink sends as it is.
  /// Default: false
  [[nodiscard]] virtual bool wants_json() const { return false; }
  /// True for a sink whose configuration was rejected (rejected_sink): it is sent nothing,
  /// and holds every entry in the outbox until a run with a working configuration
  /// delivers it. Default: false
  [[nodiscard]] virtual bool holds_only() const { return false; }
  /// How long one deliver() waits for acknowledgements by default.
  [[nodiscard]] virtual std::chrono::milliseconds delivery_timeout() const = 0;
  /// Sends `batch` (ascending sequences) in order and waits until every entry is
  /// acknowledged or failed, at most `timeout`. Entries after the first one that was not
  /// acknowledged may or may not have arrived: the relay sends them again later (at least
  /// once delivery).
  [[nodiscard]] virtual delivery deliver(std::span<const storage::pb::OutboxEntry> batch,
                                         std::chrono::milliseconds timeout) = 0;
};

/// A configured sink that could not be set up (FLT-E003): the outbox keeps every entry for
/// it, so the first run with a working configuration delivers them, while the sinks
/// beside it deliver as usual.
class rejected_sink final : public event_sink {
 public:
  rejected_sink(std::string kind, std::string destination)
      : kind_(std::move(kind)), destination_(std::move(destination)) {}
  [[nodiscard]] std::string_view kind() const override { return kind_; }
  [[nodiscard]] std::string destination() const override { return destination_; }
  [[nodiscard]] bool holds_only() const override { return true; }
  [[nodiscard]] std::chrono::milliseconds delivery_timeout() const override {
    return std::chrono::milliseconds(0);
  }
  [[nodiscard]] delivery deliver(std::span<const storage::pb::OutboxEntry>,
                                 std::chrono::milliseconds) override {
    return {};
  }

 private:
  std::string kind_;
  std::string destination_;
};

}  // namespace flotilla::events
