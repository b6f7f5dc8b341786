#include "cdc/change_publisher.hpp"

#include <librdkafka/rdkafka.h>

#include <stdexcept>

#include <fmt/format.h>

namespace flotilla::cdc {

struct change_publisher::impl {
  rd_kafka_t* rk = nullptr;
  std::string brokers;
  std::string topic;
  int timeout_ms = 30000;
  // Delivery reports of the current publish (librdkafka calls back from poll/flush on
  // the publishing thread).
  std::size_t failed = 0;
  std::string first_error;

  ~impl() {
    if (rk)
      rd_kafka_destroy(rk);
  }
};

namespace {

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* p = static_cast<change_publisher::impl*>(opaque);
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (p->failed++ == 0)
      p->first_error = rd_kafka_err2str(m->err);
  }
}

void quiet_log(const rd_kafka_t*, int, const char*, const char*) {}

}  // namespace

change_publisher::change_publisher(const config::kafka_options& options)
    : impl_(std::make_unique<impl>()) {
  impl_->brokers = options.brokers;
  impl_->topic = options.topic;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  auto set = [&](const std::string& k, const std::string& v) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(fmt::format(
          "[events.kafka] setting '{}' = '{}' is refused by librdkafka: {}", k, v, err));
    }
  };
  set("message.timeout.ms", "30000");
  for (const auto& [k, v] : options.settings) {
    set(k, v);
    if (k == "message.timeout.ms")
      impl_->timeout_ms = std::stoi(v);
  }
  set("bootstrap.servers", options.brokers);
  set("enable.idempotence", "true");
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_log_cb(conf, quiet_log);
  rd_kafka_conf_set_opaque(conf, impl_.get());
  impl_->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (impl_->rk == nullptr)
    throw std::runtime_error(fmt::format("[events.kafka]: cannot create the producer: {}", err));
}

change_publisher::~change_publisher() = default;

std::string change_publisher::destination() const {
  return fmt::format("Kafka (brokers {}, topic {})", impl_->brokers, impl_->topic);
}

void change_publisher::publish(const std::vector<std::pair<std::string, std::string>>& messages) {
  impl_->failed = 0;
  impl_->first_error.clear();
  for (const auto& [key, value] : messages) {
    while (true) {
      auto e = rd_kafka_producev(
          impl_->rk, RD_KAFKA_V_TOPIC(impl_->topic.c_str()),
          RD_KAFKA_V_KEY(key.data(), key.size()), RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_HEADER("content-type", "application/json", -1), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        break;
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(impl_->rk, 50);
        continue;
      }
      throw std::runtime_error(fmt::format("{}: a change event was refused: {}", destination(),
                                           rd_kafka_err2str(e)));
    }
    rd_kafka_poll(impl_->rk, 0);
  }
  const auto flushed = rd_kafka_flush(impl_->rk, impl_->timeout_ms + 1000);
  if (flushed != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error(fmt::format("{}: change events were not acknowledged in time: {}",
                                         destination(), rd_kafka_err2str(flushed)));
  if (impl_->failed > 0)
    throw std::runtime_error(fmt::format("{}: {} change event(s) were not delivered: {}",
                                         destination(), impl_->failed, impl_->first_error));
}

}  // namespace flotilla::cdc
