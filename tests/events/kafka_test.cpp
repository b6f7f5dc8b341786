// Events through Kafka: librdkafka's mock cluster as the broker, a real consumer
// (assign(), no group join) reading them back.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "events/kafka_sink.hpp"
#include "events/run_events.hpp"
#include "tests/events/support.hpp"

using namespace flotilla::events;
using namespace flotilla::events::test;
using namespace std::chrono_literals;
namespace config = flotilla::config;

namespace {

config::project project_for(const temp_dir& dir, std::string brokers, std::string topic,
                            config::event_format format = config::event_format::json,
                            std::map<std::string, std::string> settings = {}) {
  config::project p;
  p.name = "acme";
  p.state_dir = (dir.path() / ".flotilla").string();
  p.events.kafka =
      config::kafka_options{std::move(brokers), std::move(topic), format, std::move(settings)};
  return p;
}

/// run_started, then `tables` tables each emitting table_started, schema_action and
/// table_finished from its own thread, then run_finished.
void emit_run(run_events& ev, int tables, const std::string& source = "shop") {
  REQUIRE(ev.emit(
      run_started({.command = "run", .tables_selected = static_cast<std::uint64_t>(tables)})));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < tables; ++t)
    threads.emplace_back([&, t] {
      const std::string table = "t" + std::to_string(t);
      failures += !ev.emit(table_started(source, table, "s." + table, "full"));
      failures += !ev.emit(
          schema_action(source, table,
                        {.action = "add_columns", .column = "c", .to = "text", .reason = "added"}));
      failures += !ev.emit(table_finished(source, table, {.status = "copied", .rows = 10}));
    });
  for (auto& th : threads)
    th.join();
  CHECK(failures == 0);
  REQUIRE(ev.emit(
      run_finished({.status = "success", .tables_copied = static_cast<std::uint64_t>(tables)})));
}

pb::Event decode(const consumed& m) {
  auto e = m.headers.at("content-type") == "application/json" ? from_json(m.value)
                                                              : from_protobuf(m.value);
  REQUIRE(e.has_value());
  return *e;
}

/// Every key's messages sit on one partition, and in offset order they are in the
/// order given by `before` (a strict weak order on events).
template <class Before>
void check_order_per_key(const std::vector<consumed>& msgs, Before before) {
  std::map<std::string, std::pair<std::int32_t, pb::Event>> last;
  for (const auto& m : msgs) {
    pb::Event e = decode(m);
    CHECK(m.key == event_key(e));
    auto it = last.find(m.key);
    if (it != last.end()) {
      CHECK(it->second.first == m.partition);
      INFO(m.key << ": " << it->second.second.sequence() << " then " << e.sequence());
      CHECK(before(it->second.second, e));
    }
    last[m.key] = {m.partition, e};
  }
}

bool same_run_in_sequence(const pb::Event& a, const pb::Event& b) {
  return a.run_id() == b.run_id() && a.sequence() < b.sequence();
}

}  // namespace

TEST_CASE("every event reaches Kafka keyed by table, in order per key, as its NDJSON line") {
  mock_kafka kafka("flotilla.events", 3);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto p = project_for(dir, kafka.bootstraps(), kafka.topic(), config::event_format::json,
                       {{"linger.ms", "5"}, {"client.id", "flotilla-test"}});
  auto ev = run_events::open(&store, p, "run-1");
  REQUIRE(ev.has_value());
  emit_run(**ev, 6);
  auto report = (*ev)->finish();
  INFO((report.errors.empty() ? "" : report.errors[0].text()));
  REQUIRE(report.ok());
  CHECK(report.emitted == 20);
  CHECK(report.delivered == 20);
  CHECK(report.pending == 0);
  CHECK(store.outbox_size().value() == 0);

  auto lines = read_lines(report.log_path);
  REQUIRE(lines.size() == 20);
  auto msgs = consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), 20);
  REQUIRE(msgs.size() == 20);  // each exactly once
  std::set<std::uint64_t> seen;
  std::set<std::int32_t> partitions;
  for (const auto& m : msgs) {
    pb::Event e = decode(m);
    REQUIRE(e.sequence() >= 1);
    REQUIRE(e.sequence() <= 20);
    CHECK(m.value == lines[e.sequence() - 1]);  // byte for byte the NDJSON line
    CHECK(m.headers.at("content-type") == "application/json");
    CHECK(m.headers.at("flotilla-event-type") == e.type());
    CHECK(m.headers.at("flotilla-run-id") == "run-1");
    CHECK(m.timestamp_ms == e.timestamp_us() / 1000);
    CHECK(e.project() == "acme");
    seen.insert(e.sequence());
    partitions.insert(m.partition);
  }
  CHECK(seen.size() == 20);
  CHECK(partitions.size() > 1);  // the keys spread over the partitions
  check_order_per_key(msgs, same_run_in_sequence);
  // A table's events: started, action, finished.
  std::vector<std::string> t3;
  for (const auto& m : msgs)
    if (m.key == "shop.t3")
      t3.push_back(decode(m).type());
  CHECK(t3 == std::vector<std::string>{"table_started", "schema_action", "table_finished"});
}

TEST_CASE("format = protobuf sends the serialized Event with the NDJSON line's fields") {
  mock_kafka kafka("events.pb", 2);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto ev = run_events::open(
      &store, project_for(dir, kafka.bootstraps(), kafka.topic(), config::event_format::protobuf),
      "run-pb");
  REQUIRE(ev.has_value());
  emit_run(**ev, 2);
  auto report = (*ev)->finish();
  REQUIRE(report.ok());
  auto lines = read_lines(report.log_path);
  auto msgs = consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), lines.size());
  REQUIRE(msgs.size() == lines.size());
  for (const auto& m : msgs) {
    CHECK(m.headers.at("content-type") == "application/x-protobuf");
    auto e = from_protobuf(m.value);
    REQUIRE(e.has_value());
    auto line = from_json(lines[e->sequence() - 1]);
    REQUIRE(line.has_value());
    CHECK(e->SerializeAsString() == line->SerializeAsString());
  }
  check_order_per_key(msgs, same_run_in_sequence);
}

TEST_CASE("a JSON sink and a protobuf sink beside it each send their own format as the outbox holds it") {
  mock_kafka kafka("flotilla.events", 2);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  std::vector<std::unique_ptr<event_sink>> sinks;
  for (const auto format : {config::event_format::json, config::event_format::protobuf}) {
    auto sink = kafka_sink::create({kafka.bootstraps(), kafka.topic(), format, {}});
    REQUIRE(sink.has_value());
    sinks.push_back(std::move(*sink));
  }
  auto ev = run_events::open(&store, dir.path() / "events.ndjson", "run-mixed", "acme",
                             std::move(sinks), true, {.deliver_in_background = false});
  REQUIRE(ev.has_value());
  emit_run(**ev, 3);
  // Nothing delivered yet: each entry holds the NDJSON line and the serialized Event.
  auto pending = store.scan_outbox();
  REQUIRE(pending.has_value());
  REQUIRE(pending->size() == 11);
  std::map<std::string, std::string> protobuf_of_line;
  for (const auto& e : *pending) {
    CHECK(e.format() == flotilla::storage::pb::PAYLOAD_FORMAT_JSON);
    REQUIRE_FALSE(e.protobuf_payload().empty());
    const auto line = from_json(e.payload());
    const auto decoded = from_protobuf(e.protobuf_payload());
    REQUIRE(line.has_value());
    REQUIRE(decoded.has_value());
    CHECK(decoded->SerializeAsString() == line->SerializeAsString());
    protobuf_of_line[e.payload()] = e.protobuf_payload();
  }
  auto report = (*ev)->finish();
  REQUIRE(report.ok());
  CHECK(report.delivered == 11);
  CHECK(store.outbox_size().value() == 0);

  const auto lines = read_lines(report.log_path);
  REQUIRE(lines.size() == 11);
  auto msgs = consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), 22);
  REQUIRE(msgs.size() == 22);
  std::set<std::string> json_sent, protobuf_sent;
  for (const auto& m : msgs) {
    const bool json = m.headers.at("content-type") == "application/json";
    (json ? json_sent : protobuf_sent).insert(m.value);
    const auto e = json ? from_json(m.value) : from_protobuf(m.value);
    REQUIRE(e.has_value());
    CHECK(m.headers.at("flotilla-event-type") == e->type());
    CHECK(m.headers.at("flotilla-run-id") == "run-mixed");
    CHECK(m.key == event_key(*e));
  }
  // Byte for byte what the run wrote: its log's lines, and the Events stored beside them.
  CHECK(json_sent == std::set<std::string>(lines.begin(), lines.end()));
  std::set<std::string> stored;
  for (const auto& [line, bytes] : protobuf_of_line)
    stored.insert(bytes);
  CHECK(protobuf_sent == stored);
}

TEST_CASE(
    "a broker that is down: a clear error, every event kept, sent first and in order next run") {
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  const std::string down = "127.0.0.1:" + std::to_string(closed_port());
  std::size_t first_run = 0;
  {
    auto ev = run_events::open(&store,
                               project_for(dir, down, "flotilla.events", config::event_format::json,
                                           {{"message.timeout.ms", "1500"}}),
                               "run-1");
    REQUIRE(ev.has_value());
    emit_run(**ev, 3);
    const auto start = std::chrono::steady_clock::now();
    auto report = (*ev)->finish();
    CHECK(std::chrono::steady_clock::now() - start < 10s);  // waits message.timeout.ms, not 5 min
    REQUIRE(report.errors.size() == 1);
    const auto& e = report.errors[0];
    CHECK(e.code == errc::broker_unreachable);
    CHECK(e.transient());
    INFO(e.text());
    CHECK_THAT(e.text(), Catch::StartsWith("FLT-E001: Kafka (brokers " + down +
                                           ", topic flotilla.events) did not acknowledge"));
    CHECK_THAT(e.message, Catch::Contains("Connection refused"));
    CHECK_THAT(e.message, Catch::Contains("Check that the brokers are up and reachable"));
    CHECK_THAT(e.message, Catch::Contains("kept in the outbox"));
    CHECK(report.delivered == 0);
    first_run = report.emitted;
    CHECK(first_run == 12);  // 11 run events and the events_undelivered notice
    CHECK(report.pending == first_run);
    CHECK(store.outbox_size().value() == first_run);
    // The message counts what the outbox keeps, the notice included.
    CHECK_THAT(e.message, Catch::Contains("12 event(s) are kept in the outbox"));
    // The NDJSON file says it too, as its last line.
    auto lines = read_lines(report.log_path);
    REQUIRE(lines.size() == first_run);
    auto last = from_json(lines.back());
    REQUIRE(last.has_value());
    CHECK(last->type() == "events_undelivered");
    CHECK(last->events_undelivered().error_code() == "FLT-E001");
    CHECK(last->events_undelivered().sink() == "kafka");
    CHECK(last->events_undelivered().pending() == 12);  // itself included
    CHECK_THAT(last->events_undelivered().error(), Catch::Contains("Connection refused"));
  }

  // The broker is back (a new address, as after a failover): the backlog goes first.
  mock_kafka kafka("flotilla.events", 3);
  auto ev = run_events::open(&store, project_for(dir, kafka.bootstraps(), kafka.topic()), "run-2");
  REQUIRE(ev.has_value());
  emit_run(**ev, 3);
  auto report = (*ev)->finish();
  REQUIRE(report.ok());
  CHECK(report.delivered == first_run + 11);
  CHECK(report.pending == 0);
  CHECK(store.outbox_size().value() == 0);
  auto msgs = consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), first_run + 11);
  REQUIRE(msgs.size() == first_run + 11);
  // Per table: every run-1 event before any run-2 event, each run in sequence order.
  check_order_per_key(msgs, [](const pb::Event& a, const pb::Event& b) {
    return a.run_id() == b.run_id() ? a.sequence() < b.sequence()
                                    : (a.run_id() == "run-1" && b.run_id() == "run-2");
  });
  std::vector<std::string> t0;
  for (const auto& m : msgs)
    if (m.key == "shop.t0") {
      auto e = decode(m);
      t0.push_back(e.run_id() + ":" + e.type());
    }
  CHECK(t0 == std::vector<std::string>{"run-1:table_started", "run-1:schema_action",
                                       "run-1:table_finished", "run-2:table_started",
                                       "run-2:schema_action", "run-2:table_finished"});
}

TEST_CASE("a stop asked for ends the wait for a broker that is down; the events stay kept") {
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  const std::string down = "127.0.0.1:" + std::to_string(closed_port());
  auto ev = run_events::open(&store,
                             project_for(dir, down, "flotilla.events", config::event_format::json,
                                         {{"message.timeout.ms", "20000"}}),
                             "run-1");
  REQUIRE(ev.has_value());
  emit_run(**ev, 2);
  std::atomic<bool> stop{true};
  set_stop_request(&stop);
  const auto start = std::chrono::steady_clock::now();
  auto report = (*ev)->finish();
  const auto took = std::chrono::steady_clock::now() - start;
  set_stop_request(nullptr);
  CHECK(took < 5s);  // not message.timeout.ms
  REQUIRE(report.errors.size() == 1);
  INFO(report.errors[0].text());
  CHECK_THAT(report.errors[0].message,
             Catch::Contains("the run was stopped (Ctrl-C or SIGTERM) while kafka"));
  CHECK_THAT(report.errors[0].message, Catch::Contains("2 s after the stop") &&
                                           !Catch::Contains("within 20000 ms"));
  CHECK(report.delivered == 0);
  CHECK(report.pending == report.emitted);
  CHECK(store.outbox_size().value() == report.emitted);
}

TEST_CASE("a stop asked for while tables copied still delivers to a healthy broker") {
  // Ctrl-C during the copy: the tables stop, and their events still reach a broker that
  // answers, though its first delivery may pause about a second.
  mock_kafka kafka("flotilla.events", 1);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto ev = run_events::open(&store,
                             project_for(dir, kafka.bootstraps(), kafka.topic(),
                                         config::event_format::json, {}),
                             "run-1");
  REQUIRE(ev.has_value());
  emit_run(**ev, 3);
  std::atomic<bool> stop{true};
  set_stop_request(&stop);
  auto report = (*ev)->finish();
  set_stop_request(nullptr);
  INFO((report.errors.empty() ? std::string() : report.errors[0].text()));
  CHECK(report.ok());
  CHECK(report.delivered == report.emitted);
  CHECK(report.pending == 0);
  CHECK(consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), report.emitted).size() ==
        report.emitted);
}

TEST_CASE("a broker taken down mid-life keeps the events until it is back") {
  mock_kafka kafka("flotilla.events", 2);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto p = project_for(dir, kafka.bootstraps(), kafka.topic(), config::event_format::json,
                       {{"message.timeout.ms", "1500"}});
  REQUIRE(rd_kafka_mock_broker_set_down(kafka.cluster(), 1) == RD_KAFKA_RESP_ERR_NO_ERROR);
  std::uint64_t kept = 0;
  {
    auto ev = run_events::open(&store, p, "run-1");
    REQUIRE(ev.has_value());
    emit_run(**ev, 2);
    auto report = (*ev)->finish();
    REQUIRE_FALSE(report.ok());
    CHECK(report.errors[0].code == errc::broker_unreachable);
    kept = report.pending;
    CHECK(kept == report.emitted);
  }
  REQUIRE(rd_kafka_mock_broker_set_up(kafka.cluster(), 1) == RD_KAFKA_RESP_ERR_NO_ERROR);
  auto ev = run_events::open(&store, p, "run-2");
  REQUIRE(ev.has_value());
  emit_run(**ev, 2);
  auto report = (*ev)->finish();
  INFO((report.errors.empty() ? "" : report.errors[0].text()));
  REQUIRE(report.ok());
  CHECK(store.outbox_size().value() == 0);
  auto msgs = consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), kept + 8);
  CHECK(msgs.size() >= kept + 8);  // at least once: nothing lost
  std::set<std::pair<std::string, std::uint64_t>> distinct;
  for (const auto& m : msgs) {
    auto e = decode(m);
    distinct.insert({e.run_id(), e.sequence()});
  }
  CHECK(distinct.size() == kept + 8);
}

TEST_CASE("a broker that refuses the events is FLT-E002; they stay in the outbox") {
  mock_kafka kafka("flotilla.events", 1);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto p = project_for(dir, kafka.bootstraps(), kafka.topic(), config::event_format::json,
                       {{"message.timeout.ms", "3000"}});
  std::vector<rd_kafka_resp_err_t> errs(50, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  rd_kafka_mock_push_request_errors_array(kafka.cluster(), 0 /* Produce */, errs.size(),
                                          errs.data());
  std::uint64_t kept = 0;
  {
    auto ev = run_events::open(&store, p, "run-1");
    REQUIRE(ev.has_value());
    emit_run(**ev, 1);
    auto report = (*ev)->finish();
    REQUIRE(report.errors.size() == 1);
    const auto& e = report.errors[0];
    INFO(e.text());
    CHECK(e.code == errc::broker_refused);
    CHECK_FALSE(e.transient());
    CHECK_THAT(e.text(), Catch::StartsWith("FLT-E002: Kafka (brokers " + kafka.bootstraps()));
    CHECK_THAT(e.message, Catch::Contains("uthoriz"));
    kept = report.pending;
    CHECK(kept == report.emitted);
  }
  rd_kafka_mock_clear_request_errors(kafka.cluster(), 0);
  auto ev = run_events::open(&store, p, "run-2");
  REQUIRE(ev.has_value());
  auto report = (*ev)->finish();
  REQUIRE(report.ok());
  CHECK(report.delivered == kept);
  auto msgs = consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), kept);
  REQUIRE(msgs.size() == kept);
  check_order_per_key(msgs, same_run_in_sequence);
}

TEST_CASE("an event over message.max.bytes is FLT-E002 naming it, its size and the setting") {
  mock_kafka kafka("flotilla.events", 1);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto small = project_for(dir, kafka.bootstraps(), kafka.topic(), config::event_format::json,
                           {{"message.max.bytes", "1000"}});
  std::uint64_t kept = 0;
  {
    auto ev = run_events::open(&store, small, "run-1");
    REQUIRE(ev.has_value());
    REQUIRE((*ev)->emit(run_started({"run", {"client=" + std::string(3000, 'x')}, 1, ""})));
    auto report = (*ev)->finish();
    REQUIRE(report.errors.size() == 1);
    const auto& e = report.errors[0];
    INFO(e.text());
    CHECK(e.code == errc::broker_refused);
    CHECK_THAT(e.message, Catch::Contains("refused event '") &&
                              Catch::Contains("(run_started, ") &&
                              Catch::Contains("bytes, sequence 1 of run run-1)") &&
                              Catch::Contains("message.max.bytes (set to 1000)") &&
                              Catch::Contains("as too large") &&
                              Catch::Contains("\"message.max.bytes\"") &&
                              !Catch::Contains("Check that the topic exists"));
    kept = report.pending;  // the event, and the events_undelivered note about it
    CHECK(kept >= 1);
  }
  // Raised, the same event goes.
  auto large = project_for(dir, kafka.bootstraps(), kafka.topic(), config::event_format::json,
                           {{"message.max.bytes", "100000"}});
  auto ev = run_events::open(&store, large, "run-2");
  REQUIRE(ev.has_value());
  auto report = (*ev)->finish();
  INFO((report.errors.empty() ? "" : report.errors[0].text()));
  CHECK(report.ok());
  CHECK(report.delivered == kept);
  CHECK(consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), kept).size() == kept);
}

TEST_CASE("pass-through settings reach librdkafka; brokers and idempotence are not negotiable") {
  config::kafka_options o{
      "127.0.0.1:9092",
      "t",
      config::event_format::json,
      {{"linger.ms", "5"}, {"compression.type", "lz4"}, {"enable.idempotence", "true"}}};
  auto ok = kafka_sink::create(o);
  REQUIRE(ok.has_value());
  CHECK((*ok)->destination() == "brokers 127.0.0.1:9092, topic t");
  CHECK((*ok)->delivery_timeout() == 30000ms);

  o.settings = {{"message.timeout.ms", "1234"}};
  CHECK(kafka_sink::create(o).value()->delivery_timeout() == 1234ms);
  // librdkafka's "no limit": the run waits its default.
  o.settings = {{"message.timeout.ms", "0"}};
  CHECK(kafka_sink::create(o).value()->delivery_timeout() == 30000ms);
  // A setting the idempotent producer cannot take is named with its value.
  o.settings = {{"acks", "0"}};
  auto acks = kafka_sink::create(o);
  REQUIRE_FALSE(acks.has_value());
  CHECK(acks.error().code == errc::sink_config);
  CHECK_THAT(acks.error().text(),
             Catch::StartsWith("FLT-E003: events.kafka.settings.\"acks\" = \"0\": the Kafka "
                               "producer could not be created") &&
                 Catch::Contains("correct or remove the setting"));

  o.settings = {{"no.such.setting", "1"}};
  auto unknown = kafka_sink::create(o);
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.error().code == errc::sink_config);
  CHECK_THAT(unknown.error().text(),
             Catch::StartsWith("FLT-E003: events.kafka.settings.\"no.such.setting\" = \"1\""));
  // A secret's value is not repeated (a misspelled password setting is rejected).
  o.settings = {{"sasl.pasword", "KSecret1"}};
  auto secret = kafka_sink::create(o);
  REQUIRE_FALSE(secret.has_value());
  CHECK_THAT(secret.error().text(), Catch::Contains("\"sasl.pasword\" = \"***\"") &&
                                        !Catch::Contains("KSecret1"));
  // Every rejected setting is named at once.
  o.settings = {{"bogus.key", "1"}, {"linger.ms", "-5"}};
  auto two = kafka_sink::create(o);
  REQUIRE_FALSE(two.has_value());
  CHECK_THAT(two.error().message, Catch::Contains("\"bogus.key\" = \"1\"") &&
                                      Catch::Contains("; also events.kafka.settings.\"linger.ms\" = \"-5\""));

  o.settings = {{"enable.idempotence", "false"}};
  auto off = kafka_sink::create(o);
  REQUIRE_FALSE(off.has_value());
  CHECK_THAT(off.error().message, Catch::Contains("idempotent"));

  o.settings = {{"bootstrap.servers", "x:1"}};
  auto brokers = kafka_sink::create(o);
  REQUIRE_FALSE(brokers.has_value());
  CHECK_THAT(brokers.error().message, Catch::Contains("events.kafka.brokers"));
  // The same brokers said twice: no conflict.
  o.settings = {{"bootstrap.servers", o.brokers}};
  CHECK(kafka_sink::create(o).has_value());
}

TEST_CASE("a rejected Kafka setting loses no event: they wait in the outbox for a fixed config") {
  mock_kafka kafka("flotilla.events", 2);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  std::uint64_t kept = 0;
  {
    auto ev =
        run_events::open(&store,
                         project_for(dir, kafka.bootstraps(), kafka.topic(),
                                     config::event_format::json, {{"linger.ms", "not a number"}}),
                         "run-1");
    REQUIRE(ev.has_value());
    emit_run(**ev, 1);
    auto report = (*ev)->finish();
    REQUIRE(report.errors.size() == 1);
    CHECK(report.errors[0].code == errc::sink_config);
    kept = report.pending;
    CHECK(kept == report.emitted);
    auto last = from_json(read_lines(report.log_path).back());
    REQUIRE(last.has_value());
    CHECK(last->events_undelivered().error_code() == "FLT-E003");
  }
  auto ev = run_events::open(&store, project_for(dir, kafka.bootstraps(), kafka.topic()), "run-2");
  REQUIRE(ev.has_value());
  auto report = (*ev)->finish();
  REQUIRE(report.ok());
  CHECK(report.delivered == kept);
  CHECK(consume(kafka.bootstraps(), kafka.topic(), kafka.partitions(), kept).size() == kept);
}

TEST_CASE("table events written with the table's state commit reach Kafka after it") {
  mock_kafka kafka("flotilla.events", 1);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto ev = run_events::open(&store, project_for(dir, kafka.bootstraps(), kafka.topic()), "run-1");
  REQUIRE(ev.has_value());
  REQUIRE((*ev)->emit(table_started("shop", "orders", "s.orders", "full")));
  flotilla::storage::table_commit commit;
  commit.result.set_status("copied");
  REQUIRE((*ev)->emit_with(commit, table_finished("shop", "orders", {.status = "copied"})));
  CHECK(commit.events.size() == 1);
  REQUIRE(store.commit_table("shop.orders", commit));
  auto report = (*ev)->finish();
  REQUIRE(report.ok());
  auto msgs = consume(kafka.bootstraps(), kafka.topic(), 1, 2);
  REQUIRE(msgs.size() == 2);
  CHECK(decode(msgs[0]).type() == "table_started");
  CHECK(decode(msgs[1]).type() == "table_finished");
}
