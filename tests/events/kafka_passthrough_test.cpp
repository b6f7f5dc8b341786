// The Kafka sink sends an outbox entry already in its format as it is, reading only the
// headers from it; every other entry is decoded and encoded once, as before. Either way
// the messages are the same as a full decode and re-encode would give.
#include <catch2/catch.hpp>

#include <map>

#include "events/event.hpp"
#include "events/kafka_sink.hpp"
#include "tests/events/support.hpp"

using namespace flotilla::events;
using namespace flotilla::events::test;
namespace config = flotilla::config;
namespace spb = flotilla::storage::pb;

namespace {

pb::Event sample(int i) {
  pb::Event e = i % 2 == 0 ? table_started("shop", "t" + std::to_string(i), "s.t", "full")
                           : table_finished("shop", "t" + std::to_string(i),
                                            {.status = "copied", .rows = 7, .target_table = "s.t\u00fc"});
  e.set_type(i % 2 == 0 ? "table_started" : "table_finished");
  e.set_run_id("run-\"" + std::to_string(i));
  e.set_project("acme");
  e.set_sequence(static_cast<std::uint64_t>(i + 1));
  e.set_timestamp_us(1'796'061'662'000'000 + i * 1001);
  return e;
}

spb::OutboxEntry entry(std::uint64_t seq, std::string payload, spb::PayloadFormat f) {
  spb::OutboxEntry o;
  o.set_sequence(seq);
  o.set_key("k" + std::to_string(seq));
  o.set_payload(std::move(payload));
  o.set_format(f);
  return o;
}

/// Delivers `batch` through a sink of `format` and returns the messages by key.
std::map<std::string, consumed> deliver_all(const std::vector<spb::OutboxEntry>& batch,
                                            config::event_format format) {
  mock_kafka kafka("passthrough", 1);
  auto sink = kafka_sink::create({kafka.bootstraps(), kafka.topic(), format, {}});
  REQUIRE(sink.has_value());
  const auto d = (*sink)->deliver(batch, std::chrono::seconds(10));
  REQUIRE_FALSE(d.failure.has_value());
  REQUIRE(d.delivered == batch.size());
  std::map<std::string, consumed> out;
  for (auto& m : consume(kafka.bootstraps(), kafka.topic(), 1, batch.size()))
    out.emplace(m.key, std::move(m));
  REQUIRE(out.size() == batch.size());
  return out;
}

}  // namespace

TEST_CASE("JSON lines go to a JSON sink as they are, with the headers of the decoded event") {
  std::vector<spb::OutboxEntry> batch;
  for (int i = 0; i < 6; ++i)
    batch.push_back(entry(i + 1, to_json(sample(i)), spb::PAYLOAD_FORMAT_JSON));
  // Lines the header scan leaves to the full decode: an escaped header field, a
  // fractional timestamp, a null type, extra whitespace and an unknown field.
  batch.push_back(entry(7, R"({"run_id":"r\u0031","timestamp_us":5000,"type":"table_started","source":"s"})",
                        spb::PAYLOAD_FORMAT_JSON));
  batch.push_back(entry(8, R"({"timestamp_us":2.5e6,"type":"x","newer_field":[1,{"a":null}]})",
                        spb::PAYLOAD_FORMAT_JSON));
  batch.push_back(entry(9, " {\"type\":null, \"run_id\":\"r9\", \"timestamp_us\":9999} \n",
                        spb::PAYLOAD_FORMAT_JSON));
  // Not an event: sent untouched, with empty headers.
  batch.push_back(entry(10, "{\"type\":\"x\",", spb::PAYLOAD_FORMAT_JSON));
  batch.push_back(entry(11, "{\"type\":5}", spb::PAYLOAD_FORMAT_JSON));
  batch.push_back(entry(12, "{\"type\":\"bad \xff utf-8\"}", spb::PAYLOAD_FORMAT_JSON));
  batch.push_back(entry(13, "[1,2]", spb::PAYLOAD_FORMAT_JSON));

  const auto got = deliver_all(batch, config::event_format::json);
  for (const auto& e : batch) {
    CAPTURE(e.payload());
    const auto& m = got.at(e.key());
    const auto decoded = from_json(e.payload());
    if (!decoded) {
      CHECK(m.value == e.payload());
      CHECK(m.headers.at("content-type") == "application/octet-stream");
      CHECK(m.headers.at("flotilla-event-type").empty());
      CHECK(m.headers.at("flotilla-run-id").empty());
      continue;
    }
    CHECK(m.headers.at("content-type") == "application/json");
    CHECK(m.headers.at("flotilla-event-type") == decoded->type());
    CHECK(m.headers.at("flotilla-run-id") == decoded->run_id());
    CHECK(m.timestamp_ms == decoded->timestamp_us() / 1000);
    const auto sent = from_json(m.value);
    REQUIRE(sent.has_value());
    CHECK(to_json(*sent) == to_json(*decoded));
    if (e.sequence() <= 6)
      CHECK(m.value == e.payload());  // what to_json wrote goes out byte for byte
  }
}

TEST_CASE("the sink encodes each event once when the outbox holds the other format") {
  std::vector<spb::OutboxEntry> batch;
  for (int i = 0; i < 4; ++i)
    batch.push_back(entry(i + 1, to_protobuf(sample(i)), spb::PAYLOAD_FORMAT_PROTOBUF));
  for (int i = 4; i < 8; ++i)
    batch.push_back(entry(i + 1, to_json(sample(i)), spb::PAYLOAD_FORMAT_JSON));
  SECTION("to JSON") {
    const auto got = deliver_all(batch, config::event_format::json);
    for (int i = 0; i < 8; ++i) {
      const auto& m = got.at("k" + std::to_string(i + 1));
      CHECK(m.value == to_json(sample(i)));
      CHECK(m.headers.at("flotilla-run-id") == sample(i).run_id());
    }
  }
  SECTION("to protobuf") {
    const auto got = deliver_all(batch, config::event_format::protobuf);
    for (int i = 0; i < 8; ++i) {
      const auto& m = got.at("k" + std::to_string(i + 1));
      CHECK(m.value == to_protobuf(sample(i)));
      CHECK(m.headers.at("content-type") == "application/x-protobuf");
      CHECK(m.headers.at("flotilla-event-type") == sample(i).type());
      CHECK(m.timestamp_ms == sample(i).timestamp_us() / 1000);
    }
  }
}

TEST_CASE("entries written with their headers go out with them, in either format") {
  // What a run writes (outbox_entry): the headers beside the payload, read from neither.
  std::vector<spb::OutboxEntry> batch;
  for (int i = 0; i < 8; ++i) {
    auto e = i % 2 == 0 ? outbox_entry(sample(i), to_json(sample(i)), spb::PAYLOAD_FORMAT_JSON)
                        : outbox_entry(sample(i), to_protobuf(sample(i)), spb::PAYLOAD_FORMAT_PROTOBUF);
    REQUIRE(e.has_headers());
    e.set_sequence(static_cast<std::uint64_t>(i + 1));
    batch.push_back(std::move(e));
  }
  for (const auto format : {config::event_format::json, config::event_format::protobuf}) {
    const bool json = format == config::event_format::json;
    CAPTURE(json);
    const auto got = deliver_all(batch, format);
    for (int i = 0; i < 8; ++i) {
      const auto& m = got.at(batch[static_cast<std::size_t>(i)].key());
      CHECK(m.value == (json ? to_json(sample(i)) : to_protobuf(sample(i))));
      CHECK(m.headers.at("content-type") == (json ? "application/json" : "application/x-protobuf"));
      CHECK(m.headers.at("flotilla-event-type") == sample(i).type());
      CHECK(m.headers.at("flotilla-run-id") == sample(i).run_id());
      CHECK(m.timestamp_ms == sample(i).timestamp_us() / 1000);
    }
  }
}

TEST_CASE("an entry holding both formats goes to each sink in its own format, byte for byte") {
  // What a run writes when a JSON and a protobuf sink are configured: the JSON line, and
  // the serialized Event beside it. Stored with its run id last, out of field order, the
  // Event shows its bytes are sent as stored, not decoded and encoded again.
  std::vector<spb::OutboxEntry> batch;
  for (int i = 0; i < 4; ++i) {
    auto e = outbox_entry(sample(i), to_json(sample(i)), spb::PAYLOAD_FORMAT_JSON);
    pb::Event rest = sample(i), run_id;
    rest.clear_run_id();
    run_id.set_run_id(sample(i).run_id());
    e.set_protobuf_payload(to_protobuf(rest) + to_protobuf(run_id));
    e.set_sequence(static_cast<std::uint64_t>(i + 1));
    batch.push_back(std::move(e));
  }
  REQUIRE(from_protobuf(batch[0].protobuf_payload()).has_value());
  REQUIRE(to_protobuf(*from_protobuf(batch[0].protobuf_payload())) != batch[0].protobuf_payload());
  const auto json = deliver_all(batch, config::event_format::json);
  const auto protobuf = deliver_all(batch, config::event_format::protobuf);
  for (int i = 0; i < 4; ++i) {
    const auto& e = batch[static_cast<std::size_t>(i)];
    CHECK(json.at(e.key()).value == e.payload());
    CHECK(json.at(e.key()).headers.at("content-type") == "application/json");
    CHECK(protobuf.at(e.key()).value == e.protobuf_payload());
    CHECK(protobuf.at(e.key()).headers.at("content-type") == "application/x-protobuf");
    CHECK(protobuf.at(e.key()).headers.at("flotilla-event-type") == sample(i).type());
    CHECK(protobuf.at(e.key()).timestamp_ms == sample(i).timestamp_us() / 1000);
  }
}
