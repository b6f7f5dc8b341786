#pragma once
/// Where the stream publishes change events: a Kafka topic or a Google Pub/Sub topic,
/// either as a stream target of its own (`[targets.NAME] dialect = "kafka" | "pubsub"`)
/// or beside a relational target (`[events.kafka]`, `[events.pubsub]`, or both). docs/cdc.md describes the events.
///
/// Ordering: every event of one table goes out in source order. On Kafka the message
/// key is the row key ("<source>.<table>:{...}", the table name for keyless tables and
/// table-level events) and the partition is chosen by the table, so a table's row and
/// schema change events share one partition and stay in order. On Pub/Sub the ordering
/// key is "<source>.<table>" (subscribe with message ordering).
///
/// librdkafka and libcurl stay in change_publisher.cpp and events/pubsub_sink.cpp.
///
/// Ownership and threads: owned by one source stream and used from its thread only.
/// Shutdown: the destructor drops what was not acknowledged (the stream sends it again
/// after a restart, since nothing after an unacknowledged publish is committed).

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/model.hpp"

namespace flotilla::cdc {

struct change_message {
  std::string key;    ///< Kafka message key
  std::string table;  ///< "<source>.<table>": Pub/Sub ordering key, Kafka partition choice
  std::string type;   ///< row_change | truncate | schema_change (an attribute / header)
  std::string value;  ///< the encoded event (JSON or protobuf)
};

/// A change event the destination refuses for what it is (too large for the broker): a
/// later start would be refused the same, so the stream stops naming the event and what
/// to do, rather than promising a retry.
struct change_refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class change_publisher {
 public:
  virtual ~change_publisher() = default;
  /// Sends `messages` in order and returns once every one is acknowledged. Throws
  /// std::runtime_error naming the destination and the reason otherwise.
  virtual void publish(const std::vector<change_message>& messages) = 0;
  /// "Kafka (brokers 127.0.0.1:9092, topic changes)".
  [[nodiscard]] virtual std::string destination() const = 0;
  [[nodiscard]] virtual config::event_format format() const = 0;
};

/// Throws std::runtime_error naming the setting librdkafka refused.
[[nodiscard]] std::unique_ptr<change_publisher> kafka_publisher(const config::kafka_options& o,
                                                                std::string what);
/// Throws std::runtime_error (FLT-E00x text) when the settings are incomplete or the
/// topic cannot be created on the emulator.
[[nodiscard]] std::unique_ptr<change_publisher> pubsub_publisher(const config::pubsub_options& o,
                                                                 std::string what);

/// Why the stream cannot publish beside a relational target: [events.kafka] and
/// [events.pubsub] both configured with different formats (each change event is encoded
/// once). Empty when it can.
[[nodiscard]] std::string side_formats_conflict(const config::project& p);

/// The change events published beside a relational target: [events.kafka],
/// [events.pubsub], or both (each batch to Kafka, then Pub/Sub); null when neither is
/// configured. Throws std::runtime_error when both are and their formats differ.
[[nodiscard]] std::unique_ptr<change_publisher> side_publisher(const config::project& p);

}  // namespace flotilla::cdc
