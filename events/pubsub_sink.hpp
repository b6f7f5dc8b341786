#pragma once
/// Google Cloud Pub/Sub (`[events.pubsub]`) over its REST API (v1), with libcurl: the
/// client publishes messages in order with ordering keys; the event sink delivers the
/// outbox through it. libcurl's headers stay in pubsub_sink.cpp.
///
/// - Endpoint: `emulator_host` (or the PUBSUB_EMULATOR_HOST environment variable, as
///   Google's client libraries read it) -> `http://<host:port>`, no credentials, and the
///   topic is created when missing (the emulator starts empty); otherwise
///   `https://pubsub.googleapis.com` with the OAuth access token in
///   GOOGLE_OAUTH_ACCESS_TOKEN, and the topic must exist (a publisher needs only
///   `pubsub.topics.publish`).
/// - Ordering key: "<source>.<table>" for table events, the run id for run-level ones
///   (the key Kafka uses), so a subscription with message ordering receives one
///   table's events in order. Requests go out one at a time, in sequence order, each
///   waiting for the service's answer before the next.
/// - Data: the NDJSON line (format = json) or the serialized Event (protobuf);
///   attributes `content-type`, `flotilla-event-type`, `flotilla-run-id`.
/// - Errors: FLT-E001 when the service did not answer (down, unreachable, timeout) or
///   answered 429/5xx (after retries: transient), FLT-E002 when it refused (4xx: topic or
///   project missing, permission, invalid name, too large), FLT-E003 for settings
///   (no project or topic, no token for the real service). Each names the destination
///   and says what to do.
///
/// Ownership and threads: one owner; publish()/deliver() from one thread at a time.
/// create() opens no connection; one HTTP connection is kept alive between requests.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "config/model.hpp"
#include "events/sink.hpp"

namespace flotilla::events {

struct pubsub_message {
  std::string data;  ///< raw bytes; base64-encoded on the wire
  std::string ordering_key;
  std::map<std::string, std::string> attributes;
};

struct pubsub_target {
  std::string emulator_host;  ///< "host:port"; empty: PUBSUB_EMULATOR_HOST, else the service
  std::string project;
  std::string topic;
  /// The service's base URL when not on the emulator (a regional endpoint such as
  /// "https://europe-west1-pubsub.googleapis.com", or a test server). Default:
  /// "https://pubsub.googleapis.com"
  std::string endpoint;
  /// Bearer token for the service. Default: GOOGLE_OAUTH_ACCESS_TOKEN
  std::string access_token;
  /// How long publish() may take in all, and each request at most. Default: 30 s
  std::chrono::milliseconds timeout{30000};
  /// The flotilla.toml section that sets these, as messages name it.
  std::string section = "[events.pubsub]";
};

class pubsub_client {
 public:
  /// Checks the settings (FLT-E003: no project or topic, no token for the real
  /// service). Opens no connection.
  [[nodiscard]] static result<std::unique_ptr<pubsub_client>> create(pubsub_target target);
  ~pubsub_client();
  pubsub_client(const pubsub_client&) = delete;
  pubsub_client& operator=(const pubsub_client&) = delete;

  /// Publishes `messages` in order, in requests of at most 1,000 messages and 9 MB, each
  /// waiting for the service's answer; on the emulator the topic is created first.
  /// Answers 429 and 5xx are retried (twice, with a short back-off) within `timeout`
  /// (default: target().timeout). Returns how many were acknowledged (a prefix) and,
  /// when not all, why: FLT-E001 (no answer: down, unreachable, timeout; or still
  /// 429/5xx) or FLT-E002 (an error answer, with the service's message).
  struct outcome {
    std::size_t acknowledged = 0;
    std::optional<error> failure;
  };
  [[nodiscard]] outcome publish(std::span<const pubsub_message> messages,
                                std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Emulator: creates the topic when missing (it starts empty). Service: checks that the
  /// topic exists (needs `pubsub.topics.get`; publish() does not call it there).
  /// FLT-E001 / FLT-E002.
  [[nodiscard]] status ensure_topic();

  /// True when talking to the emulator.
  [[nodiscard]] bool emulator() const { return !target_.emulator_host.empty(); }

  /// "emulator 127.0.0.1:8085, topic projects/p/topics/t" or
  /// "https://pubsub.googleapis.com, topic projects/p/topics/t".
  [[nodiscard]] std::string destination() const;
  [[nodiscard]] const pubsub_target& target() const { return target_; }

 private:
  explicit pubsub_client(pubsub_target target, std::string base_url, std::string token);
  struct http_result;
  http_result request(const std::string& method, const std::string& url, const std::string& body,
                      std::chrono::milliseconds timeout);
  /// The error for a failed request: `doing` ("sending the events") for no answer,
  /// `object` ("the events") for an error answer.
  [[nodiscard]] error failure(const http_result& r, std::string_view doing,
                              std::string_view object) const;

  pubsub_target target_;
  std::string base_url_;
  std::string token_;
  void* curl_ = nullptr;  // CURL*, reused: one connection kept alive
  bool topic_checked_ = false;
};

class pubsub_sink final : public event_sink {
 public:
  /// From `[events.pubsub]`. FLT-E003 as pubsub_client::create.
  [[nodiscard]] static result<std::unique_ptr<pubsub_sink>> create(
      const config::pubsub_options& options);
  /// With every client setting (endpoint, token, timeout) at hand.
  [[nodiscard]] static result<std::unique_ptr<pubsub_sink>> create(pubsub_target target,
                                                                   config::event_format format);

  [[nodiscard]] std::string_view kind() const override { return "pubsub"; }
  [[nodiscard]] bool wants_json() const override { return format_ == config::event_format::json; }
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
