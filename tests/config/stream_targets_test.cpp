// Kafka and Pub/Sub stream targets (`[targets.NAME] dialect = "kafka" | "pubsub"`) and a
// capture source's `stream_to`.
#include <string>

#include <catch2/catch.hpp>

#include "config/load.hpp"
#include "tests/config/helpers.hpp"

using namespace flotilla::config;
using namespace flotilla::config::testing;

TEST_CASE("kafka and pubsub targets load as event targets a capture source streams to") {
  auto r = load_project_text(std::string{one_target} + R"toml(
[targets.bus]
dialect = "kafka"
brokers = ["k1:9092", "k2:9092"]
topic = "changes"
format = "protobuf"
settings = { "linger.ms" = 5 }

[targets.ps]
dialect = "pubsub"
project = "acme-prod"
topic = "changes"
emulator_host = "127.0.0.1:8085"

[sources.shop]
adapter = "postgres"
dsn = "postgresql://127.0.0.1/shop"
capture = "logical"
target = "wh"
stream_to = ["bus", "ps"]

[sources.crm]
adapter = "postgres"
dsn = "postgresql://127.0.0.1/crm"
capture = "logical"
target = "bus"
)toml",
                             "/srv/flotilla.toml");
  INFO(all_messages(r));
  REQUIRE(r.ok());
  const project& p = *r.model;
  REQUIRE(p.targets.size() == 1);  // warehouses only
  REQUIRE(p.event_targets.size() == 2);
  const auto* bus = p.find_event_target("bus");
  REQUIRE(bus);
  CHECK(bus->kind == "kafka");
  REQUIRE(bus->kafka);
  CHECK(bus->kafka->brokers == "k1:9092,k2:9092");
  CHECK(bus->kafka->topic == "changes");
  CHECK(bus->kafka->format == event_format::protobuf);
  CHECK(bus->kafka->settings.at("linger.ms") == "5");
  const auto* ps = p.find_event_target("ps");
  REQUIRE(ps);
  CHECK(ps->kind == "pubsub");
  REQUIRE(ps->pubsub);
  CHECK(ps->pubsub->project == "acme-prod");
  CHECK(ps->pubsub->emulator_host == "127.0.0.1:8085");
  CHECK(p.stream_targets_of(*p.find_source("shop")) ==
        std::vector<std::string>{"wh", "bus", "ps"});
  // A source streaming only to Kafka has no warehouse: `flotilla run` leaves it out.
  CHECK(p.target_of(*p.find_source("crm")) == nullptr);
  CHECK(p.stream_targets_of(*p.find_source("crm")) == std::vector<std::string>{"bus"});
}

TEST_CASE("an event target needs a capture source, and stream_to names defined targets") {
  auto r = load_project_text(std::string{one_target} + R"toml(
[targets.bus]
dialect = "kafka"
brokers = "k1:9092"
topic = "changes"

[sources.files]
adapter = "sqlite"
path = "a.db"
target = "bus"

[sources.shop]
adapter = "postgres"
dsn = "postgresql://127.0.0.1/shop"
capture = "logical"
target = "wh"
stream_to = ["buss"]
)toml",
                             "/srv/flotilla.toml");
  REQUIRE_FALSE(r.ok());
  const std::string all = all_messages(r);
  INFO(all);
  const auto* na = find_code(r, errc::not_applicable);
  REQUIRE(na);
  CHECK(na->message.find("source 'files' names target 'bus', a kafka event stream; only a "
                         "source with capture = \"logical\" publishes to it") != std::string::npos);
  const auto* unknown = find_code(r, errc::unknown_target);
  REQUIRE(unknown);
  CHECK(unknown->key == "sources.shop.stream_to[0]");
  CHECK(unknown->message.find("did you mean 'bus'?") != std::string::npos);
}

TEST_CASE("a kafka target reports its missing keys and refuses warehouse keys") {
  auto r = load_project_text(std::string{one_target} + R"toml(
[targets.bus]
dialect = "kafka"
path = "x.db"
)toml",
                             "/srv/flotilla.toml");
  REQUIRE_FALSE(r.ok());
  const std::string all = all_messages(r);
  INFO(all);
  CHECK(all.find("targets.bus.brokers") != std::string::npos);
  CHECK(all.find("targets.bus.topic") != std::string::npos);
  CHECK(all.find("targets.bus.path") != std::string::npos);
}
