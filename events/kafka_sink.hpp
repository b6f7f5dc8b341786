#pragma once
/// The Kafka event sink (`[events.kafka]`), on librdkafka's C API. librdkafka's headers
/// stay in kafka_sink.cpp.
///
/// - Idempotent producer (`enable.idempotence = true`, not negotiable): retries never
///   duplicate or reorder a partition's messages.
/// - Key: "<source>.<table>" for table events, the run id for run-level ones, so one
///   table's events land on one partition, in order.
/// - Value: the serialized `flotilla.events.v1.Event` (format = protobuf) or its NDJSON
///   line (format = json), whatever form the outbox holds it in.
/// - Headers: `content-type` (application/json | application/x-protobuf),
///   `flotilla-event-type`, `flotilla-run-id`; the message timestamp is the event's.
/// - `[events.kafka.settings]` pass through to librdkafka first; `bootstrap.servers`
///   comes from `brokers` and `enable.idempotence` is forced on (setting either in
///   `settings` is error FLT-E003). `message.timeout.ms` defaults to 30000 here (not
///   librdkafka's 300000) and is how long a run waits for acknowledgements.
///
/// Ownership and threads: owned by the run's outbox_relay; deliver() runs on one thread
/// at a time. librdkafka's own threads connect lazily: create() opens no connection.
/// Shutdown: the destructor purges what was not acknowledged (it stays in the outbox)
/// and destroys the producer.

#include <chrono>
#include <map>
#include <memory>
#include <vector>
#include <utility>

#include "config/model.hpp"
#include "events/sink.hpp"

namespace flotilla::events {

class kafka_sink final : public event_sink {
 public:
  /// Builds the producer. FLT-E003 when librdkafka rejects a setting (naming the key,
  /// the value and librdkafka's reason) or when `settings` tries to set the brokers or
  /// turn idempotence off.
  [[nodiscard]] static result<std::unique_ptr<kafka_sink>> create(
      const config::kafka_options& options);
  /// The settings librdkafka refuses as it is given them (an unknown property, a value out
  /// of its range), each with librdkafka's reason, and those at odds with the idempotent
  /// producer the sink uses (enable.idempotence off, acks other than all); no producer is
  /// made, no broker asked.
  /// For flotilla.toml's check when it is read.
  [[nodiscard]] static std::vector<std::pair<std::string, std::string>> rejected_settings(
      const std::map<std::string, std::string>& settings);

  ~kafka_sink() override;
  kafka_sink(const kafka_sink&) = delete;
  kafka_sink& operator=(const kafka_sink&) = delete;

  [[nodiscard]] std::string_view kind() const override { return "kafka"; }
  [[nodiscard]] bool wants_json() const override;
  [[nodiscard]] std::string destination() const override;
  [[nodiscard]] std::chrono::milliseconds delivery_timeout() const override;
  /// Failures: FLT-E001 when no broker acknowledged in time (down, unreachable: the
  /// reason librdkafka gave, e.g. "Connection refused"), FLT-E002 when a broker answered
  /// with an error (unknown topic, authorization, message too large) or the producer hit
  /// a fatal error.
  [[nodiscard]] delivery deliver(std::span<const storage::pb::OutboxEntry> batch,
                                 std::chrono::milliseconds timeout) override;

  /// The producer's state, defined in kafka_sink.cpp (its librdkafka callbacks reach it).
  struct impl;

 private:
  explicit kafka_sink(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace flotilla::events
