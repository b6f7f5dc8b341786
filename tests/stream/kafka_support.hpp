#pragma once
// librdkafka's in-process mock cluster for the stream tests, and a real consumer that
// reads a topic back (assign(), every partition, from the beginning).
#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

namespace flotilla::stream_test {

inline void quiet_kafka_log(const rd_kafka_t*, int, const char*, const char*) {}

struct mock_cluster {
  rd_kafka_t* owner = nullptr;
  rd_kafka_mock_cluster_t* cluster = nullptr;
  explicit mock_cluster(const std::string& topic = "changes", int partitions = 2) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet_kafka_log);
    owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    REQUIRE(owner != nullptr);
    cluster = rd_kafka_mock_cluster_new(owner, 1);
    REQUIRE(cluster != nullptr);
    REQUIRE(rd_kafka_mock_topic_create(cluster, topic.c_str(), partitions, 1) ==
            RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  ~mock_cluster() {
    rd_kafka_mock_cluster_destroy(cluster);
    rd_kafka_destroy(owner);
  }
  mock_cluster(const mock_cluster&) = delete;
  mock_cluster& operator=(const mock_cluster&) = delete;
  [[nodiscard]] std::string bootstraps() const {
    return rd_kafka_mock_cluster_bootstraps(cluster);
  }
};

struct kafka_record {
  std::string key;
  std::string value;
  int partition = -1;
  std::string content_type;
};

/// Every message of `topic` (partitions 0..partitions-1), polling until `expect` arrived
/// or `within` passed. Within a partition, in offset order.
inline std::vector<kafka_record> read_topic(const std::string& bootstraps, const std::string& topic,
                                            int partitions, std::size_t expect,
                                            std::chrono::seconds within = std::chrono::seconds(20)) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "group.id", "stream-test", err, sizeof err);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
  rd_kafka_conf_set_log_cb(conf, quiet_kafka_log);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE(rk != nullptr);
  rd_kafka_poll_set_consumer(rk);
  auto* parts = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p)
    rd_kafka_topic_partition_list_add(parts, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  REQUIRE(rd_kafka_assign(rk, parts) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(parts);
  std::vector<kafka_record> out;
  const auto end = std::chrono::steady_clock::now() + within;
  while (out.size() < expect && std::chrono::steady_clock::now() < end) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      kafka_record r;
      if (m->key)
        r.key.assign(static_cast<const char*>(m->key), m->key_len);
      r.value.assign(static_cast<const char*>(m->payload), m->len);
      r.partition = m->partition;
      rd_kafka_headers_t* h = nullptr;
      const void* v = nullptr;
      std::size_t n = 0;
      if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR &&
          rd_kafka_header_get_last(h, "content-type", &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR)
        r.content_type.assign(static_cast<const char*>(v), n);
      out.push_back(std::move(r));
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

}  // namespace flotilla::stream_test
