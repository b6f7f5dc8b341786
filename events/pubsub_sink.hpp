#pragma once
/// Google Cloud Pub/Sub (`[events.pubsub]`) over its REST API (v1), with libcurl: the
/// client publishes messages in order with ordering keys; the event sink delivers the
/// outbox through it. libcurl's headers stay in pubsub_sink.cpp.
///
/// - Endpoint: `emulator_host` (or the PUBSUB_EMULATOR_HOST environment variable, as
///   Google's client libraries read it) -> `http://<host:port>`, and the topic is
///   created when missing; otherwise `https://pubsub.googleapis.com` with the OAuth
///   access token in GOOGLE_OAUTH_ACCESS_TOKEN (the topic must exist).
/// - Ordering key: "<source>.<table>" for table events, the run id for run-level ones
///   (the key Kafka uses), so a subscription with message ordering receives one
///   table's events in order. Messages go out one request at a time, in sequence.
/// - Data: the NDJSON line (format = json) or the serialized Event (protobuf);
///   attributes `content-type`, `flotilla-event-type`, `flotilla-run-id`.
///
/// Ownership and threads: one owner; publish()/deliver() from one thread at a time.

#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "config/model.hpp"
#include "events/sink.hpp"

namespace flotilla::events {

struct pubsub_message {
  std::string data;  ///< raw bytes; base64-encoded on the wire
  std::string ordering_key;
  std::map<std::string, std::string> attributes;
};

struct pubsub_target {
  std::string emulator_host;  ///< "host:port"; empty: the real service
  std::string project;
  std::string topic;
  std::chrono::milliseconds timeout{30000};  ///< per request
};

class pubsub_client {
 public:
  /// Checks the settings (FLT-E003: no project or topic, no token for the real
  /// service). Opens no connection.
  [[nodiscard]] static result<std::unique_ptr<pubsub_client>> create(pubsub_target target);
  ~pubsub_client();
  pubsub_client(const pubsub_client&) = delete;
  pubsub_client& operator=(const pubsub_client&) = delete;

  /// Publishes `messages` in order, in requests of at most 1,000 messages, each waiting
  /// for the service's answer. Returns how many were acknowledged (a prefix) and, when
  /// not all, why: FLT-E001 (no answer: down, unreachable, timeout) or FLT-E002 (an
  /// error answer, with the service's message).
  struct outcome {
    std::size_t acknowledged = 0;
    std::optional<error> failure;
  };
  [[nodiscard]] outcome publish(std::span<const pubsub_message> messages);

  /// Creates the topic when missing (the emulator starts empty). FLT-E001 / FLT-E002.
  [[nodiscard]] status ensure_topic();

  /// "emulator 127.0.0.1:8085, project p, topic t".
  [[nodiscard]] std::string destination() const;
  [[nodiscard]] const pubsub_target& target() const { return target_; }

 private:
  explicit pubsub_client(pubsub_target target, std::string base_url, std::string token);
  struct http_result;
  http_result request(const std::string& method, const std::string& url, const std::string& body);

  pubsub_target target_;
  std::string base_url_;
  std::string token_;
  void* curl_ = nullptr;  // CURL*, reused: one connection kept alive
  bool topic_checked_ = false;
};

class pubsub_sink final : public event_sink {
 public:
  [[nodiscard]] static result<std::unique_ptr<pubsub_sink>> create(
      const config::pubsub_options& options);

  [[nodiscard]] std::string_view kind() const override { return "pubsub"; }
  [[nodiscard]] std::string destination() const override;
  [[nodiscard]] std::chrono::milliseconds delivery_timeout() const override;
  [[nodiscard]] delivery deliver(std::span<const storage::pb::OutboxEntry> batch,
                                 std::chrono::milliseconds timeout) override;

 private:
  pubsub_sink(std::unique_ptr<pubsub_client> client, config::event_format format);
  std::unique_ptr<pubsub_client> client_;
  config::event_format format_;
};

}  // namespace flotilla::events
