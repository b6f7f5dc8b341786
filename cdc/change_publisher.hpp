#pragma once
/// Publishes the stream's change events to the project's `[events.kafka]` topic: one
/// JSON message per applied row change, truncate and schema change, keyed by
/// "<source>.<table>" (plus the row key for row changes) so one row's changes stay in
/// order on one partition. Idempotent producer; `publish` returns once every message is
/// acknowledged, and throws otherwise. librdkafka stays in change_publisher.cpp.
///
/// Ownership and threads: owned by one source stream and used from its thread only.
/// Shutdown: the destructor drops what was not acknowledged (the stream sends it again
/// after a restart, since nothing after an unacknowledged publish is committed).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/model.hpp"

namespace flotilla::cdc {

class change_publisher {
 public:
  /// Throws std::runtime_error naming the setting librdkafka refused.
  explicit change_publisher(const config::kafka_options& options);
  ~change_publisher();
  change_publisher(const change_publisher&) = delete;
  change_publisher& operator=(const change_publisher&) = delete;

  /// (key, value) messages in order. Throws std::runtime_error with librdkafka's reason
  /// when one is not acknowledged within `message.timeout.ms` (default 30 s).
  void publish(const std::vector<std::pair<std::string, std::string>>& messages);
  [[nodiscard]] std::string destination() const;

  /// The producer and the current publish's delivery reports (its callback reaches it).
  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace flotilla::cdc
