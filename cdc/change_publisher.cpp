#include "cdc/change_publisher.hpp"

#include <librdkafka/rdkafka.h>

#include <stdexcept>

#include <fmt/format.h>

#include "config/secret_key.hpp"
#include "events/pubsub_sink.hpp"

namespace flotilla::cdc {
namespace {

std::string_view content_type(config::event_format f) {
  return f == config::event_format::json ? "application/json" : "application/x-protobuf";
}

// ---- Kafka ---------------------------------------------------------------------------

class kafka_out final : public change_publisher {
 public:
  kafka_out(const config::kafka_options& o, std::string what)
      : brokers_(o.brokers), topic_(o.topic), format_(o.format), what_(std::move(what)) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    auto set = [&](const std::string& k, const std::string& v) {
      if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        throw std::runtime_error(fmt::format("{} setting '{}' = '{}' is refused by librdkafka: {}",
                                             what_, k, v, err));
      }
    };
    // As [events.kafka]: the producer is always idempotent (a table's events stay in order
    // across retries); a setting that says otherwise is refused, not overridden unseen.
    if (auto it = o.settings.find("enable.idempotence"); it != o.settings.end() &&
                                                         it->second != "true") {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(fmt::format(
          "{} setting 'enable.idempotence' = '{}': change events are always produced "
          "idempotently (each table's events stay in order across retries); remove the setting",
          what_, it->second));
    }
    set("message.timeout.ms", "30000");
    for (const auto& [k, v] : o.settings) {
      set(k, v);
      if (k == "message.timeout.ms")
        timeout_ms_ = std::stoi(v);
    }
    set("bootstrap.servers", o.brokers);
    set("enable.idempotence", "true");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
    rd_kafka_conf_set_opaque(conf, this);
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk_ == nullptr) {
      // librdkafka names the settings at odds (`message.timeout.ms` must be greater than
      // `linger.ms`): the ones flotilla.toml sets, with their values, and what to do.
      std::string named;
      for (const auto& [k, v] : o.settings)
        if (std::string_view(err).find("`" + k + "`") != std::string_view::npos)
          named += fmt::format("{}\"{}\" = \"{}\"", named.empty() ? "" : ", ", k,
                               config::names_secret(k) ? std::string("***") : v);
      throw std::runtime_error(fmt::format(
          "FLT-E003: {}: the Kafka producer could not be created: {}; correct or remove {} in "
          "flotilla.toml, then start the stream again",
          what_, err, named.empty() ? std::string("the settings") : "the setting " + named));
    }
  }
  ~kafka_out() override {
    if (rkt_)
      rd_kafka_topic_destroy(rkt_);
    if (rk_)
      rd_kafka_destroy(rk_);
  }
  kafka_out(const kafka_out&) = delete;
  kafka_out& operator=(const kafka_out&) = delete;

  [[nodiscard]] std::string destination() const override {
    return fmt::format("Kafka (brokers {}, topic {})", brokers_, topic_);
  }
  [[nodiscard]] config::event_format format() const override { return format_; }

  void publish(const std::vector<change_message>& messages) override {
    if (messages.empty())
      return;
    ensure_partitions();
    failed_ = 0;
    first_error_.clear();
    too_large_.clear();
    const auto ct = content_type(format_);
    for (const auto& m : messages) {
      // One partition per table: its row and schema change events stay in order.
      std::uint32_t h = 2166136261u;
      for (char c : m.table)
        h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
      const auto partition = static_cast<std::int32_t>(h % partitions_);
      while (true) {
        auto e = rd_kafka_producev(
            rk_, RD_KAFKA_V_TOPIC(topic_.c_str()), RD_KAFKA_V_PARTITION(partition),
            RD_KAFKA_V_KEY(m.key.data(), m.key.size()),
            RD_KAFKA_V_VALUE(const_cast<char*>(m.value.data()), m.value.size()),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_HEADER("content-type", ct.data(), static_cast<ssize_t>(ct.size())),
            RD_KAFKA_V_HEADER("flotilla-event-type", m.type.data(),
                              static_cast<ssize_t>(m.type.size())),
            RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
          break;
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
          rd_kafka_poll(rk_, 50);
          continue;
        }
        if (e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
          throw change_refused(too_large(m.key, m.value.size(), rd_kafka_err2str(e)));
        throw std::runtime_error(fmt::format("{}: a change event was refused: {}", destination(),
                                             rd_kafka_err2str(e)));
      }
      rd_kafka_poll(rk_, 0);
    }
    const auto flushed = rd_kafka_flush(rk_, timeout_ms_ + 1000);
    if (flushed != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::runtime_error(fmt::format(
          "{}: change events were not acknowledged in time ({}); check that the brokers are "
          "reachable",
          destination(), rd_kafka_err2str(flushed)));
    if (failed_ > 0 && !too_large_.empty())
      throw change_refused(too_large_);
    if (failed_ > 0)
      throw std::runtime_error(fmt::format("{}: {} change event(s) were not delivered: {}",
                                           destination(), failed_, first_error_));
  }

 private:
  /// What to say of an event too large for the brokers: which, how large, and what to do.
  [[nodiscard]] std::string too_large(std::string_view key, std::size_t bytes,
                                      std::string_view reason) const {
    return fmt::format(
        "{}: the change event keyed {} ({} bytes) is larger than the brokers accept ({}); it "
        "would be refused at every start, and the events after it wait behind it. Raise the "
        "topic's max.message.bytes (and message.max.bytes in {}), or "
        "leave the table out (exclude it), or change the row at the source, then restart the "
        "stream (with --reload when the table is left out or the row changed)",
        destination(), key.size() > 200 ? std::string(key.substr(0, 200)) + "..." : std::string(key),
        bytes, reason,
        // "target 'bus'" for a stream target; else the change events beside a warehouse.
        what_.starts_with("target '") && what_.ends_with("'")
            ? "[targets." + what_.substr(8, what_.size() - 9) + ".settings]"
            : std::string("[events.kafka.settings]"));
  }

  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<kafka_out*>(opaque);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
      return;
    if (self->failed_++ == 0)
      self->first_error_ = rd_kafka_err2str(m->err);
    if (m->err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE && self->too_large_.empty())
      self->too_large_ = self->too_large(
          std::string_view(static_cast<const char*>(m->key), m->key_len), m->len,
          rd_kafka_err2str(m->err));
  }

  /// The topic's partition count, read once (the topic is created by the broker's
  /// auto-creation or beforehand).
  void ensure_partitions() {
    if (partitions_ > 0)
      return;
    rkt_ = rd_kafka_topic_new(rk_, topic_.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    auto e = rd_kafka_metadata(rk_, 0, rkt_, &md, timeout_ms_);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::runtime_error(fmt::format(
          "{}: cannot read the topic's partitions ({}); check that the brokers are reachable",
          destination(), rd_kafka_err2str(e)));
    int n = 0;
    for (int i = 0; i < md->topic_cnt; ++i)
      if (topic_ == md->topics[i].topic && md->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
        n = md->topics[i].partition_cnt;
    rd_kafka_metadata_destroy(md);
    if (n <= 0)
      throw std::runtime_error(fmt::format(
          "{}: the topic does not exist and was not created; create it (or enable "
          "auto.create.topics.enable on the brokers)",
          destination()));
    partitions_ = static_cast<std::uint32_t>(n);
  }

  std::string too_large_;  ///< an event the brokers refused as too large, said
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_topic_t* rkt_ = nullptr;
  std::string brokers_;
  std::string topic_;
  config::event_format format_;
  std::string what_;
  int timeout_ms_ = 30000;
  std::uint32_t partitions_ = 0;
  std::size_t failed_ = 0;
  std::string first_error_;
};

// ---- Pub/Sub -------------------------------------------------------------------------

class pubsub_out final : public change_publisher {
 public:
  pubsub_out(const config::pubsub_options& o, std::string what) : format_(o.format) {
    events::pubsub_target t;
    t.emulator_host = o.emulator_host;
    t.project = o.project;
    t.topic = o.topic;
    // "target 'ps'" for a stream target: its section; else the events' own.
    if (what.starts_with("target '") && what.ends_with("'"))
      t.section = "[targets." + what.substr(8, what.size() - 9) + "]";
    auto c = events::pubsub_client::create(t);
    if (!c)
      throw std::runtime_error(
          fmt::format("{}: {} [{}]", what, c.error().message, events::code_name(c.error().code)));
    client_ = std::move(*c);
  }

  [[nodiscard]] std::string destination() const override {
    return "Pub/Sub (" + client_->destination() + ")";
  }
  [[nodiscard]] config::event_format format() const override { return format_; }

  void publish(const std::vector<change_message>& messages) override {
    if (messages.empty())
      return;
    if (!topic_ready_) {
      if (auto st = client_->ensure_topic(); !st)
        fail(st.error(), named(st.error().message));
      topic_ready_ = true;
    }
    std::vector<events::pubsub_message> out;
    out.reserve(messages.size());
    const std::string ct{content_type(format_)};
    for (const auto& m : messages) {
      events::pubsub_message x{m.value, m.table, {{"content-type", ct}, {"flotilla-event-type", m.type}}};
      if (m.key.size() <= 1024)  // the service's limit for an attribute value
        x.attributes.emplace("flotilla-key", m.key);
      out.push_back(std::move(x));
    }
    auto r = client_->publish(out);
    if (r.failure)
      fail(*r.failure, fmt::format("{}: {} of {} change event(s) acknowledged: {}", destination(),
                                   r.acknowledged, out.size(), r.failure->message));
  }

 private:
  /// Thrown as the caller codes it: a refusal (FLT-E002) as change_refused, anything else
  /// (FLT-E001, not answered) as a runtime_error; the code is the caller's to write.
  [[noreturn]] static void fail(const events::error& e, std::string message) {
    if (e.code == events::errc::broker_refused)
      throw change_refused(std::move(message));
    throw std::runtime_error(std::move(message));
  }

  /// The client's message, which names the destination itself ("Pub/Sub (emulator ...)
  /// did not answer ..."), without naming it twice.
  [[nodiscard]] std::string named(const std::string& message) const {
    const std::string where = destination();
    return message.starts_with(where) ? message : where + ": " + message;
  }

  std::unique_ptr<events::pubsub_client> client_;
  config::event_format format_;
  bool topic_ready_ = false;
};

/// [events.kafka] and [events.pubsub] both beside a relational target: every batch goes
/// to each, in that order, and counts as sent once both acknowledged it (a failure of
/// the second sends the batch to both again after a restart: at least once, as each is).
class fan_out final : public change_publisher {
 public:
  explicit fan_out(std::vector<std::unique_ptr<change_publisher>> to) : to_(std::move(to)) {}

  void publish(const std::vector<change_message>& messages) override {
    for (auto& p : to_)
      p->publish(messages);
  }
  [[nodiscard]] std::string destination() const override {
    std::string out;
    for (const auto& p : to_)
      out += (out.empty() ? "" : " and ") + p->destination();
    return out;
  }
  [[nodiscard]] config::event_format format() const override { return to_.front()->format(); }

 private:
  std::vector<std::unique_ptr<change_publisher>> to_;
};

}  // namespace

std::string side_formats_conflict(const config::project& p) {
  const auto& kafka = p.events.kafka;
  const auto& pubsub = p.events.pubsub;
  if (!kafka || !pubsub || kafka->format == pubsub->format)
    return {};
  return fmt::format(
      "[events.kafka] has format = \"{}\" and [events.pubsub] format = \"{}\": the stream "
      "publishes each change event once, in one encoding, beside a relational target; give "
      "both the same format",
      config::to_string(kafka->format), config::to_string(pubsub->format));
}

std::unique_ptr<change_publisher> side_publisher(const config::project& p) {
  const auto* kafka = p.events.kafka ? &*p.events.kafka : nullptr;
  const auto* pubsub = p.events.pubsub ? &*p.events.pubsub : nullptr;
  if (std::string conflict = side_formats_conflict(p); !conflict.empty())
    throw std::runtime_error(conflict);
  std::vector<std::unique_ptr<change_publisher>> to;
  if (kafka)
    to.push_back(kafka_publisher(*kafka, "[events.kafka]"));
  if (pubsub)
    to.push_back(pubsub_publisher(*pubsub, "[events.pubsub]"));
  if (to.empty())
    return nullptr;
  if (to.size() == 1)
    return std::move(to.front());
  return std::make_unique<fan_out>(std::move(to));
}

std::unique_ptr<change_publisher> kafka_publisher(const config::kafka_options& o, std::string what) {
  return std::make_unique<kafka_out>(o, std::move(what));
}

std::unique_ptr<change_publisher> pubsub_publisher(const config::pubsub_options& o,
                                                   std::string what) {
  return std::make_unique<pubsub_out>(o, std::move(what));
}

}  // namespace flotilla::cdc
