// `flotilla stream` with [events.kafka]: every applied change is also published, keyed by
// table and row key, before the target commits. librdkafka's in-process mock cluster
// stands in for the brokers; a real consumer reads the events back.
#include <chrono>
#include <map>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cdc/decide.hpp"
#include "storage/state_store.hpp"
#include "tests/stream/kafka_support.hpp"
#include "tests/stream/support.hpp"

using namespace flotilla::stream_test;
using namespace std::chrono_literals;

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
  std::vector<std::pair<std::string, nlohmann::json>> events;
  for (auto& r : read_topic(kafka.bootstraps(), "changes", 2, 6))
    events.emplace_back(r.key, nlohmann::json::parse(r.value));
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

TEST_CASE("with [events.kafka] a primary key change settled by a resync is published as a schema "
          "change before the resync's rows",
          "[stream]") {
  mock_cluster kafka;
  fixture f(false, "\n[events.kafka]\nbrokers = \"" + kafka.bootstraps() +
                       "\"\ntopic = \"changes\"\nformat = \"json\"\n");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
  stream_process p(f);
  REQUIRE(read_topic(kafka.bootstraps(), "changes", 2, 1).size() == 1);
  pg_exec(f.source(), "ALTER TABLE orders DROP CONSTRAINT orders_pkey, ADD PRIMARY KEY (id, note)");
  auto hold_state = [&] { return hold_state_in(f, "wh", "shop.public.orders"); };
  REQUIRE(eventually(
      [&] { return hold_state() == flotilla::storage::pb::HOLD_STATE_AWAITING_REVIEW; }));
  flotilla::cdc::submit_request(std::filesystem::path(f.dir()) / ".flotilla",
                                {"", "wh", "shop.public.orders",
                                 {flotilla::cdc::decision_kind::resync_edited,
                                  "-- the target table is copied again with its new key"}});
  REQUIRE(eventually([&] { return hold_state() == flotilla::storage::pb::HOLD_STATE_RESUMED; }));
  auto all = read_topic(kafka.bootstraps(), "changes", 2, 4);
  INFO(p.err());
  CHECK(p.stop() == 0);
  std::vector<std::string> ops;
  for (const auto& r : all) {
    auto e = nlohmann::json::parse(r.value);
    ops.push_back(e.contains("op") ? e["op"].get<std::string>() : e["type"].get<std::string>());
  }
  CHECK(ops == std::vector<std::string>{"read", "schema_change", "truncate", "read"});
}

TEST_CASE("a Kafka producer librdkafka refuses stops the stream with FLT-E003, naming the "
          "settings at odds",
          "[stream]") {
  mock_cluster kafka;
  fixture f(false, "\n[events.kafka]\nbrokers = \"" + kafka.bootstraps() +
                       "\"\ntopic = \"changes\"\n[events.kafka.settings]\n"
                       "\"message.timeout.ms\" = \"5000\"\n\"linger.ms\" = \"10000\"\n");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  stream_process p(f);
  CHECK(p.wait(std::chrono::seconds(60)) == 1);
  const std::string err = p.err();
  INFO(err);
  CHECK_THAT(err, Catch::Contains("FLT-E003") && Catch::Contains("\"linger.ms\" = \"10000\"") &&
                      Catch::Contains("correct or remove"));
}
