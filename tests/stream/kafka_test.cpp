// `flotilla stream` with [events.kafka]: every applied change is also published, keyed by
// table and row key, before the target commits. librdkafka's in-process mock cluster
// stands in for the brokers; a real consumer reads the events back.
#include <chrono>
#include <map>

#include <catch2/catch.hpp>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <nlohmann/json.hpp>

#include "tests/stream/support.hpp"

using namespace flotilla::stream_test;
using namespace std::chrono_literals;

namespace {

void quiet(const rd_kafka_t*, int, const char*, const char*) {}

struct mock_cluster {
  rd_kafka_t* owner = nullptr;
  rd_kafka_mock_cluster_t* cluster = nullptr;
  mock_cluster() {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, quiet);
    owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    REQUIRE(owner != nullptr);
    cluster = rd_kafka_mock_cluster_new(owner, 1);
    REQUIRE(cluster != nullptr);
    REQUIRE(rd_kafka_mock_topic_create(cluster, "changes", 2, 1) == RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  ~mock_cluster() {
    rd_kafka_mock_cluster_destroy(cluster);
    rd_kafka_destroy(owner);
  }
  [[nodiscard]] std::string bootstraps() const { return rd_kafka_mock_cluster_bootstraps(cluster); }
};

/// Every message of the topic (both partitions), polling until `expect` arrived or 20 s.
std::vector<std::pair<std::string, nlohmann::json>> read_all(const std::string& bootstraps,
                                                             std::size_t expect) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "group.id", "stream-test", err, sizeof err);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
  rd_kafka_conf_set_log_cb(conf, quiet);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE(rk != nullptr);
  rd_kafka_poll_set_consumer(rk);
  auto* parts = rd_kafka_topic_partition_list_new(2);
  for (int p = 0; p < 2; ++p)
    rd_kafka_topic_partition_list_add(parts, "changes", p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  REQUIRE(rd_kafka_assign(rk, parts) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(parts);
  std::vector<std::pair<std::string, nlohmann::json>> out;
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (out.size() < expect && std::chrono::steady_clock::now() < end) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
      out.emplace_back(std::string(static_cast<const char*>(m->key), m->key_len),
                       nlohmann::json::parse(std::string(static_cast<const char*>(m->payload), m->len)));
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

}  // namespace

TEST_CASE("with [events.kafka] every applied change is published, keyed by row key, in order",
          "[stream]") {
  mock_cluster kafka;
  fixture f(false, "\n[events.kafka]\nbrokers = \"" + kafka.bootstraps() +
                       "\"\ntopic = \"changes\"\nformat = \"json\"\n");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  stream_process p(f);
  REQUIRE(eventually([&] {
    auto r = pg_try_rows(f.target(), "SELECT 1 FROM st_shop.orders");
    return r.has_value();
  }));
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a'), (2, 'b')");
  pg_exec(f.source(), "UPDATE orders SET note = 'c' WHERE id = 1");
  pg_exec(f.source(), "DELETE FROM orders WHERE id = 2");
  pg_exec(f.source(), "ALTER TABLE orders ADD COLUMN qty int");
  pg_exec(f.source(), "TRUNCATE orders");
  auto events = read_all(kafka.bootstraps(), 6);
  CHECK(p.stop() == 0);
  INFO(p.err());
  REQUIRE(events.size() == 6);
  std::map<std::string, std::vector<std::string>> by_key;
  for (const auto& [key, e] : events)
    by_key[key].push_back(e.contains("op") ? e["op"].get<std::string>() : e["type"].get<std::string>());
  CHECK(by_key["shop.public.orders:{\"id\":\"1\"}"] == std::vector<std::string>{"insert", "update"});
  CHECK(by_key["shop.public.orders:{\"id\":\"2\"}"] == std::vector<std::string>{"insert", "delete"});
  CHECK(by_key["shop.public.orders"] == std::vector<std::string>{"schema_change", "truncate"});
}
