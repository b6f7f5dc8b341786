#include "bench/kafka.hpp"

#include <stdexcept>

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

namespace flotilla::bench {

struct kafka_mock_cluster::impl {
  rd_kafka_t* rk = nullptr;
  rd_kafka_mock_cluster_t* cluster = nullptr;
  ~impl() {
    if (cluster)
      rd_kafka_mock_cluster_destroy(cluster);
    if (rk)
      rd_kafka_destroy(rk);
  }
};

kafka_mock_cluster::kafka_mock_cluster(int brokers, const std::string& topic, int partitions)
    : impl_(std::make_unique<impl>()) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
  impl_->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (impl_->rk == nullptr)
    throw std::runtime_error(std::string("librdkafka: ") + err);
  impl_->cluster = rd_kafka_mock_cluster_new(impl_->rk, brokers);
  if (impl_->cluster == nullptr)
    throw std::runtime_error("librdkafka: cannot start a mock cluster");
  bootstraps_ = rd_kafka_mock_cluster_bootstraps(impl_->cluster);
  if (rd_kafka_mock_topic_create(impl_->cluster, topic.c_str(), partitions, 1) !=
      RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error("librdkafka: cannot create topic " + topic + " on the mock cluster");
}

kafka_mock_cluster::~kafka_mock_cluster() = default;

namespace {

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* r = static_cast<kafka_produce_result*>(opaque);
  if (m->err)
    ++r->failed;
  else
    ++r->delivered;
}

}  // namespace

kafka_produce_result raw_kafka_produce(const std::string& bootstraps, const std::string& topic,
                                       const std::vector<kafka_event>& events, bool idempotent) {
  kafka_produce_result result;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps.c_str(), err, sizeof err) !=
      RD_KAFKA_CONF_OK)
    throw std::runtime_error(std::string("librdkafka: ") + err);
  if (idempotent &&
      rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof err) != RD_KAFKA_CONF_OK)
    throw std::runtime_error(std::string("librdkafka: ") + err);
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_opaque(conf, &result);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr)
    throw std::runtime_error(std::string("librdkafka: ") + err);
  static constexpr std::string_view content_type = "application/json";
  for (const auto& e : events) {
    for (;;) {
      const auto rc = rd_kafka_producev(
          rk, RD_KAFKA_V_TOPIC(topic.c_str()),
          RD_KAFKA_V_KEY(const_cast<char*>(e.key.data()), e.key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(e.payload.data()), e.payload.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_TIMESTAMP(e.timestamp_ms),
          RD_KAFKA_V_HEADER("content-type", content_type.data(),
                            static_cast<ssize_t>(content_type.size())),
          RD_KAFKA_V_HEADER("flotilla-event-type", e.type.data(), static_cast<ssize_t>(e.type.size())),
          RD_KAFKA_V_HEADER("flotilla-run-id", e.run_id.data(), static_cast<ssize_t>(e.run_id.size())),
          RD_KAFKA_V_END);
      if (rc == RD_KAFKA_RESP_ERR_NO_ERROR)
        break;
      if (rc != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_destroy(rk);
        throw std::runtime_error(std::string("librdkafka produce: ") + rd_kafka_err2str(rc));
      }
      rd_kafka_poll(rk, 10);  // queue full: serve delivery reports, then retry
    }
    rd_kafka_poll(rk, 0);
  }
  const auto fr = rd_kafka_flush(rk, 120'000);
  rd_kafka_destroy(rk);
  if (fr != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error(std::string("librdkafka flush: ") + rd_kafka_err2str(fr));
  return result;
}

}  // namespace flotilla::bench
