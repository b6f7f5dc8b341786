#pragma once
/// Kafka pieces of the kafka-events scenario: librdkafka's own mock cluster (a real
/// Kafka protocol endpoint on loopback, no broker package needed), the event payloads,
/// and the raw producer every figure is compared with.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace flotilla::bench {

/// A mock cluster living in this process: owned by the scenario on the main thread,
/// torn down (with its librdkafka threads) by the destructor.
class kafka_mock_cluster {
 public:
  /// Starts `brokers` mock brokers and creates `topic` with `partitions` partitions.
  kafka_mock_cluster(int brokers, const std::string& topic, int partitions);
  ~kafka_mock_cluster();
  kafka_mock_cluster(const kafka_mock_cluster&) = delete;
  kafka_mock_cluster& operator=(const kafka_mock_cluster&) = delete;

  /// "127.0.0.1:port,..." for bootstrap.servers.
  [[nodiscard]] const std::string& bootstrap_servers() const { return bootstraps_; }

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::string bootstraps_;
};

/// One message as the Kafka event sink sends it: key "<source>.<table>", the event's
/// JSON line, its headers and timestamp.
struct kafka_event {
  std::string key;
  std::string payload;
  std::string type;    ///< header flotilla-event-type
  std::string run_id;  ///< header flotilla-run-id
  std::int64_t timestamp_ms = 0;
};

/// True when this build has Flotilla's Kafka event sink (the events module).
[[nodiscard]] bool have_kafka_sink();

/// The events of a run over count/2 tables (table_started, then table_finished or a
/// schema_action): built with Flotilla's own event builders and JSON encoding when the
/// events module is built, else JSON lines of the same shape.
[[nodiscard]] std::vector<kafka_event> make_events(std::uint64_t count);

struct kafka_produce_result {
  std::uint64_t delivered = 0;
  std::uint64_t failed = 0;
  double wall_s = 0;  ///< flotilla_kafka_deliver: its timed section (entries prepared before)
  double cpu_s = 0;
};

/// Plain librdkafka: produce every event to `topic` with the same key, value, headers
/// and timestamp as the sink, and wait for every delivery report (one flush at the end).
/// `idempotent` sets enable.idempotence, as the sink does; otherwise librdkafka's defaults.
[[nodiscard]] kafka_produce_result raw_kafka_produce(const std::string& bootstraps,
                                                     const std::string& topic,
                                                     const std::vector<kafka_event>& events,
                                                     bool idempotent);

/// Flotilla's Kafka event sink: the same events as outbox entries, handed to
/// kafka_sink::deliver in batches of `batch` (the outbox relay's batch size), as a run
/// does. Throws std::runtime_error when the sink is not built or delivery fails.
/// The outbox holds the events' JSON lines, which the sink sends as they are;
/// `mixed_outbox`: each entry also holds the serialized Event, as a run writes it when a
/// protobuf sink is configured beside the JSON one.
[[nodiscard]] kafka_produce_result flotilla_kafka_deliver(const std::string& bootstraps,
                                                          const std::string& topic,
                                                          std::uint64_t count, std::size_t batch,
                                                          bool mixed_outbox = false);

}  // namespace flotilla::bench
