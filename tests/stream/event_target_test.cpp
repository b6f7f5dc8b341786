// Kafka and Pub/Sub as stream targets of their own (`[targets.NAME] dialect = "kafka" |
// "pubsub"`): the snapshot as "read" events, then every change in source order per table,
// keyed by row key (the table name for keyless tables and table-level events); seed
// 002's truncate rule; positions that survive a kill -9. Kafka is librdkafka's mock
// cluster read back by a real consumer; Pub/Sub is the real emulator.
#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cdc/decide.hpp"
#include "proto/changes.pb.h"
#include "storage/state_store.hpp"
#include "tests/events/pubsub_emulator.hpp"
#include "tests/stream/kafka_support.hpp"
#include "tests/stream/support.hpp"

using namespace flotilla::stream_test;
using namespace std::chrono_literals;

namespace {

std::string kafka_target(const mock_cluster& k, const std::string& format = "json") {
  return "\n[targets.bus]\ndialect = \"kafka\"\nbrokers = \"" + k.bootstraps() +
         "\"\ntopic = \"bus\"\nformat = \"" + format + "\"\n";
}

/// The changes kept for the held orders table on `target` (0 while none, or unreadable).
std::uint64_t kept_on(const fixture& f, const std::string& target) {
  auto store = flotilla::storage::state_store::open(f.dir() + "/.flotilla/state",
                                                    {.read_only = true});
  return store ? store->held_change_count(target, "shop.public.orders").value_or(0) : 0;
}

std::string what(const nlohmann::json& e) {
  return e.contains("op") ? e["op"].get<std::string>() : e["type"].get<std::string>();
}

}  // namespace

TEST_CASE("a Kafka target gets the snapshot, then every change in order on one partition per "
          "table",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 3);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a'), (2, 'b')");
  pg_exec(f.source(), "CREATE TABLE logs (msg text, n int)");  // no key
  pg_exec(f.source(), "INSERT INTO logs VALUES ('boot', 1)");
  stream_process p(f);
  // The snapshot: 3 read events.
  auto snap = read_topic(kafka.bootstraps(), "bus", 3, 3);
  INFO(p.err());
  REQUIRE(snap.size() == 3);
  pg_exec(f.source(), "INSERT INTO orders VALUES (3, 'c')");
  pg_exec(f.source(), "UPDATE orders SET note = 'x' WHERE id = 1");
  pg_exec(f.source(), "DELETE FROM orders WHERE id = 2");
  pg_exec(f.source(), "ALTER TABLE orders ADD COLUMN qty int");
  pg_exec(f.source(), "INSERT INTO orders VALUES (4, 'd', 5)");
  pg_exec(f.source(), "INSERT INTO logs VALUES ('tick', 2)");
  pg_exec(f.source(), "UPDATE logs SET n = 3 WHERE msg = 'tick'");
  pg_exec(f.source(), "DELETE FROM logs WHERE msg = 'boot'");
  pg_exec(f.source(), "TRUNCATE logs");
  auto all = read_topic(kafka.bootstraps(), "bus", 3, 12);
  CHECK(p.stop() == 0);
  INFO(p.err());
  REQUIRE(all.size() == 12);

  std::map<std::string, std::vector<std::string>> ops;  // per table, in partition order
  std::map<std::string, std::set<int>> partitions;
  std::map<std::string, std::vector<std::string>> keys;
  nlohmann::json last_order;
  std::vector<nlohmann::json> logs;
  for (const auto& r : all) {
    CHECK(r.content_type == "application/json");
    auto e = nlohmann::json::parse(r.value);
    const std::string table = e["table"];
    ops[table].push_back(what(e));
    if (table == "public.logs")
      logs.push_back(e);
    partitions[table].insert(r.partition);
    keys[table].push_back(r.key);
    CHECK(e["source"] == "shop");
    CHECK(e["target"] == "bus");
    if (table == "public.orders")
      last_order = e;
  }
  CHECK(ops["public.orders"] == std::vector<std::string>{"read", "read", "insert", "update",
                                                          "delete", "schema_change", "insert"});
  CHECK(ops["public.logs"] ==
        std::vector<std::string>{"read", "insert", "update", "delete", "truncate"});
  // One partition per table: a table's row and schema change events stay in order.
  CHECK(partitions["public.orders"].size() == 1);
  CHECK(partitions["public.logs"].size() == 1);
  // Row events keyed by row key; table-level events and keyless tables by the table name.
  CHECK(keys["public.orders"][0] == "shop.public.orders:{\"id\":\"1\"}");
  CHECK(keys["public.orders"][5] == "shop.public.orders");
  for (const auto& k : keys["public.logs"])
    CHECK(k == "shop.public.logs");
  // Rows after the added column carry it.
  CHECK(last_order["row"]["qty"] == "5");
  CHECK(last_order["key"]["id"] == "4");
  // A keyless table's update and delete say which row: the whole old row.
  REQUIRE(logs.size() == 5);
  CHECK(logs[2]["old_key"] == nlohmann::json{{"msg", "tick"}, {"n", "2"}});
  CHECK(logs[2]["row"] == nlohmann::json{{"msg", "tick"}, {"n", "3"}});
  CHECK(logs[3]["key"] == nlohmann::json{{"msg", "boot"}, {"n", "1"}});
}

TEST_CASE("changes of one transaction share its position and differ by their place in it",
          "[stream][event-target]") {
  // Two updates of one row in one transaction had the same position and key: a consumer
  // dropping repeats by them, as the docs said, dropped the second.
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE acct (id int PRIMARY KEY, balance int)");
  pg_exec(f.source(), "INSERT INTO acct VALUES (1, 100)");
  stream_process p(f);
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 1).size() == 1);
  pg_exec(f.source(), "BEGIN; UPDATE acct SET balance = 50 WHERE id = 1; "
                      "UPDATE acct SET balance = 0 WHERE id = 1; COMMIT");
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 3);
  CHECK(p.stop() == 0);
  REQUIRE(all.size() == 3);
  const auto snap = nlohmann::json::parse(all[0].value);
  const auto a = nlohmann::json::parse(all[1].value);
  const auto b = nlohmann::json::parse(all[2].value);
  CHECK_FALSE(snap.contains("change"));  // a snapshot row has no transaction
  CHECK(a["position"] == b["position"]);
  REQUIRE(a.contains("change"));
  REQUIRE(b.contains("change"));
  // Numbered from 1 in the first transaction of a session too (the relation message
  // PostgreSQL sends first is no change).
  CHECK(a["change"] == 1);
  CHECK(b["change"] == 2);
  CHECK(b["row"]["balance"] == "0");
}

TEST_CASE("a Kafka target stops at a truncate of a keyed table (seed 002)",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
  stream_process p(f);
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 1).size() == 1);
  pg_exec(f.source(), "INSERT INTO orders VALUES (2, 'b')");
  pg_exec(f.source(), "TRUNCATE orders");
  CHECK(p.wait(60s) == 1);
  const std::string err = p.err();
  INFO(err);
  CHECK(err.find("FLT-H007") != std::string::npos);
  CHECK(err.find("TRUNCATE of public.orders, which has a row key, cannot be published as keyed "
                 "events on kafka target 'bus'") != std::string::npos);
  CHECK(err.find("No successor plan, row output, or checkpoint was published.") !=
        std::string::npos);
  // Nothing of the truncate went out; the insert before it did.
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 3, 3s);
  REQUIRE(all.size() == 2);
  CHECK(nlohmann::json::parse(all[1].value)["op"] == "insert");
}

TEST_CASE("a Kafka target in protobuf format sends ChangeEvent messages",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka, "protobuf"), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  stream_process p(f);
  // Wait for the stream to be set up (past the slot's consistent point), then change: a
  // row written before it would go out as the snapshot's "read".
  REQUIRE(confirmed(f, 120s));
  pg_exec(f.source(), "INSERT INTO orders VALUES (7, NULL)");
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 1);
  CHECK(p.stop() == 0);
  REQUIRE(all.size() == 1);
  CHECK(all[0].content_type == "application/x-protobuf");
  flotilla::changes::v1::ChangeEvent e;
  REQUIRE(e.ParseFromString(all[0].value));
  CHECK(e.type() == "row_change");
  CHECK(e.op() == "insert");
  CHECK(e.table() == "public.orders");
  REQUIRE(e.row_size() == 2);
  CHECK(e.row(0).column() == "id");
  CHECK(e.row(0).text() == "7");
  CHECK(e.row(1).column() == "note");
  CHECK(e.row(1).is_null());
  REQUIRE(e.key_size() == 1);
  CHECK(e.key(0).text() == "7");
}

TEST_CASE("a Kafka target resumes after kill -9 without losing a change or copying again",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY)");
  pg_exec(f.source(), "INSERT INTO orders SELECT g FROM generate_series(1, 100) g");
  {
    stream_process p(f);
    REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 100).size() == 100);
    pg_exec(f.source(), "INSERT INTO orders SELECT g FROM generate_series(101, 150) g");
    REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 150).size() == 150);
    p.kill9();
  }
  pg_exec(f.source(), "INSERT INTO orders SELECT g FROM generate_series(151, 200) g");
  stream_process p(f);
  std::set<int> ids;
  std::size_t reads = 0;
  REQUIRE(eventually([&] {
    ids.clear();
    reads = 0;
    for (const auto& r : read_topic(kafka.bootstraps(), "bus", 1, 1000, 2s)) {
      auto e = nlohmann::json::parse(r.value);
      ids.insert(std::stoi(e["row"]["id"].get<std::string>()));
      reads += e["op"] == "read";
    }
    return ids.size() == 200;
  }));
  CHECK(p.stop() == 0);
  CHECK(reads == 100);  // the restart did not copy the table again
  CHECK(*ids.begin() == 1);
  CHECK(*ids.rbegin() == 200);
}

TEST_CASE("a source streams to a warehouse and a Kafka target independently",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, "stream_to = [\"bus\"]\n" + kafka_target(kafka));
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
  stream_process p(f);
  REQUIRE(eventually([&] {
    auto r = pg_try_rows(f.target(), "SELECT count(*) FROM st_shop.orders");
    return r && (*r)[0][0] == "1";
  }));
  // The Kafka target's own copy too: its slot then passed its consistent point, so the
  // next insert is streamed to it, not read by its copy.
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 1).size() == 1);
  pg_exec(f.source(), "INSERT INTO orders VALUES (2, 'b')");
  REQUIRE(eventually([&] {
    auto r = pg_try_rows(f.target(), "SELECT count(*) FROM st_shop.orders");
    return r && (*r)[0][0] == "2";
  }));
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 2);
  REQUIRE(all.size() == 2);
  CHECK(what(nlohmann::json::parse(all[0].value)) == "read");
  CHECK(what(nlohmann::json::parse(all[1].value)) == "insert");
  // Each target has its own slot.
  auto slots = pg_query(f.source(), "SELECT slot_name FROM pg_replication_slots WHERE slot_name "
                                    "LIKE '" + f.slot() + "%' ORDER BY 1");
  REQUIRE(slots.size() == 2);
  CHECK(slots[0][0] == f.slot());
  CHECK(slots[1][0] == f.slot() + "_bus");
  CHECK(p.stop() == 0);
}

TEST_CASE("a Pub/Sub target publishes every change with the table as ordering key",
          "[stream][event-target][pubsub]") {
  flotilla::test::pubsub_emulator emu;
  const std::string project = "flotilla-test";
  emu.create_subscription(project, "changes", "changes-sub", true);
  fixture f(false,
            "\n[targets.ps]\ndialect = \"pubsub\"\nproject = \"" + project +
                "\"\ntopic = \"changes\"\nemulator_host = \"" + emu.host() + "\"\n",
            "ps");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
  pg_exec(f.source(), "CREATE TABLE logs (msg text)");
  stream_process p(f);
  auto first = emu.pull(project, "changes-sub", 1, 60s);
  INFO(p.err());
  REQUIRE(first.size() == 1);
  pg_exec(f.source(), "UPDATE orders SET note = 'b' WHERE id = 1");
  pg_exec(f.source(), "INSERT INTO orders VALUES (2, 'c')");
  pg_exec(f.source(), "INSERT INTO logs VALUES ('x')");
  pg_exec(f.source(), "TRUNCATE logs");
  auto rest = emu.pull(project, "changes-sub", 4, 30s);
  CHECK(p.stop() == 0);
  REQUIRE(rest.size() == 4);
  std::map<std::string, std::vector<std::string>> by_key;
  for (const auto& m : first)
    by_key[m.ordering_key].push_back(what(nlohmann::json::parse(m.data)));
  for (const auto& m : rest) {
    CHECK(m.attributes.at("content-type") == "application/json");
    by_key[m.ordering_key].push_back(what(nlohmann::json::parse(m.data)));
  }
  CHECK(by_key["shop.public.orders"] == std::vector<std::string>{"read", "update", "insert"});
  CHECK(by_key["shop.public.logs"] == std::vector<std::string>{"insert", "truncate"});
}

TEST_CASE("[events.kafka] and [events.pubsub] beside a warehouse target both get every change",
          "[stream][event-target][pubsub]") {
  flotilla::test::pubsub_emulator emu;
  const std::string project = "flotilla-side";
  emu.create_subscription(project, "side", "side-sub", true);
  mock_cluster kafka("side", 1);
  const std::string events = "\n[events.kafka]\nbrokers = \"" + kafka.bootstraps() +
                             "\"\ntopic = \"side\"\n\n[events.pubsub]\nproject = \"" + project +
                             "\"\ntopic = \"side\"\nemulator_host = \"" + emu.host() + "\"\n";
  SECTION("the same events, in the same order, on both; the snapshot's rows as read events") {
    fixture f(false, events);
    pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
    pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
    stream_process p(f);
    REQUIRE(eventually([&] { return pg_try_rows(f.target(), "SELECT 1 FROM st_shop.orders").has_value(); }));
    pg_exec(f.source(), "INSERT INTO orders VALUES (2, 'b')");
    pg_exec(f.source(), "UPDATE orders SET note = 'c' WHERE id = 1");
    auto on_kafka = read_topic(kafka.bootstraps(), "side", 1, 3);
    auto on_pubsub = emu.pull(project, "side-sub", 3, 30s);
    CHECK(p.stop() == 0);
    INFO(p.err());
    REQUIRE(on_kafka.size() == 3);
    REQUIRE(on_pubsub.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(on_pubsub[i].data == on_kafka[i].value);
      CHECK(on_pubsub[i].ordering_key == "shop.public.orders");
    }
    const auto first = nlohmann::json::parse(on_pubsub[0].data);
    CHECK(what(first) == "read");  // a consumer builds its copy from the topic
    CHECK(first["row"]["note"] == "a");
    CHECK(what(nlohmann::json::parse(on_pubsub[1].data)) == "insert");
    CHECK(what(nlohmann::json::parse(on_pubsub[2].data)) == "update");
  }
  SECTION("two encodings: the stream refuses to start (exit 2), naming both sections") {
    fixture f(false, events + "format = \"protobuf\"\n");
    pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
    stream_process p(f);
    CHECK(p.wait(60s) == 2);
    CHECK_THAT(p.err(), Catch::Contains("[events.kafka] has format = \"json\" and "
                                        "[events.pubsub] format = \"protobuf\""));
  }
}

TEST_CASE("a change held on one target pauses the table there only; the other target goes on",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(true, "stream_to = [\"bus\"]\n" + kafka_target(kafka));
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
  stream_process p(f);
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 1).size() == 1);
  // The DuckDB stream's initial copy done too (its position saved after it): a change
  // made before that would wait for the copy's lock, and a stop then end the copy.
  REQUIRE(set_up(f));
  // DuckDB cannot retype a key column in place: held there; Kafka needs no change.
  pg_exec(f.source(), "ALTER TABLE orders ALTER COLUMN id TYPE bigint");
  pg_exec(f.source(), "INSERT INTO orders VALUES (2, 'b')");
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 3);
  INFO(p.err());
  REQUIRE(all.size() == 3);
  CHECK(what(nlohmann::json::parse(all[1].value)) == "schema_change");
  CHECK(nlohmann::json::parse(all[2].value)["row"]["id"] == "2");
  auto hold = [&](const std::string& target) {
    auto store = flotilla::storage::state_store::open(f.dir() + "/.flotilla/state",
                                                      {.read_only = true});
    REQUIRE(store);
    auto h = store->get_hold(target, "shop.public.orders");
    REQUIRE(h);
    return *h;
  };
  REQUIRE(eventually([&] { return hold("wh").has_value(); }));
  CHECK(hold("wh")->state() == flotilla::storage::pb::HOLD_STATE_AWAITING_REVIEW);
  CHECK_FALSE(hold("bus").has_value());
  CHECK(p.stop() == 0);
  CHECK(duckdb_query(f.duckdb_file(), "SELECT id FROM st_shop.orders ORDER BY id") ==
        rows{{"1"}});
}

TEST_CASE("a key column renamed at the source is published as a schema change once its review "
          "is applied, before the changes kept meanwhile",
          "[stream][event-target]") {
  // Seed 002 on an event target: a key column's rename holds for review (its events are
  // keyed by that column); the applied review tells consumers of the rename first.
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
  stream_process p(f);
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 1).size() == 1);
  pg_exec(f.source(), "ALTER TABLE orders RENAME COLUMN id TO order_id");
  pg_exec(f.source(), "INSERT INTO orders VALUES (2, 'kept')");
  auto hold_state = [&] { return hold_state_in(f, "bus", "shop.public.orders"); };
  REQUIRE(eventually(
      [&] { return hold_state() == flotilla::storage::pb::HOLD_STATE_AWAITING_REVIEW; }));
  flotilla::cdc::submit_request(std::filesystem::path(f.dir()) / ".flotilla",
                                {"", "bus", "shop.public.orders",
                                 {flotilla::cdc::decision_kind::apply_proposed, ""}});
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 3);
  INFO(p.err());
  CHECK(p.stop() == 0);
  REQUIRE(all.size() == 3);
  auto change = nlohmann::json::parse(all[1].value);
  CHECK(change["type"] == "schema_change");
  CHECK(change["outcome"] == "applied");
  CHECK(change["ddl"].get<std::string>().find("RENAME COLUMN id TO order_id") !=
        std::string::npos);
  CHECK(change["columns"] == nlohmann::json::array({"order_id", "note"}));
  CHECK(all[1].key == "shop.public.orders");
  CHECK(change["change"] == 1);  // the rename is its transaction's first change
  auto kept = nlohmann::json::parse(all[2].value);
  CHECK(what(kept) == "insert");
  CHECK(kept["key"] == nlohmann::json{{"order_id", "2"}});
  CHECK(hold_state() == flotilla::storage::pb::HOLD_STATE_RESUMED);
}

TEST_CASE("changes a transaction made before a held key rename are published before its schema "
          "change, under the old key",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a'), (2, 'b')");
  stream_process p(f);
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 2).size() == 2);
  pg_exec(f.source(), "BEGIN; UPDATE orders SET note = 'b2' WHERE id = 2; "
                      "ALTER TABLE orders RENAME COLUMN id TO oid; "
                      "INSERT INTO orders VALUES (4, 'd'); COMMIT");
  auto hold_state = [&] { return hold_state_in(f, "bus", "shop.public.orders"); };
  REQUIRE(eventually(
      [&] { return hold_state() == flotilla::storage::pb::HOLD_STATE_AWAITING_REVIEW; }));
  flotilla::cdc::submit_request(std::filesystem::path(f.dir()) / ".flotilla",
                                {"", "bus", "shop.public.orders",
                                 {flotilla::cdc::decision_kind::apply_proposed, ""}});
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 5);
  INFO(p.err());
  CHECK(p.stop() == 0);
  REQUIRE(all.size() == 5);
  auto update = nlohmann::json::parse(all[2].value);
  CHECK(what(update) == "update");
  CHECK(update["key"] == nlohmann::json{{"id", "2"}});
  CHECK(update["change"] == 1);
  auto change = nlohmann::json::parse(all[3].value);
  CHECK(change["type"] == "schema_change");
  CHECK(change["change"] == 2);
  auto insert = nlohmann::json::parse(all[4].value);
  CHECK(what(insert) == "insert");
  CHECK(insert["key"] == nlohmann::json{{"oid", "4"}});
  CHECK(insert["change"] == 3);
}

TEST_CASE("a reload first tells the consumers to drop the table: the truncate a keyed table's "
          "TRUNCATE stopped at, then the rows as they are",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a'), (2, 'b')");
  {
    stream_process p(f);
    REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 2).size() == 2);  // the snapshot
    // A keyed table's TRUNCATE cannot be said as keyed events: the stream stops (seed 002).
    pg_exec(f.source(), "BEGIN; TRUNCATE orders; INSERT INTO orders VALUES (7, 'after'); COMMIT");
    CHECK(p.wait(30s) == 1);
    CHECK(p.err().find("--reload") != std::string::npos);
  }
  stream_process p(f, {"--reload"});
  // Read 4: the first snapshot's 2, then the reload's truncate and its one row.
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 4);
  CHECK(p.stop() == 0);
  INFO(p.err());
  REQUIRE(all.size() == 4);
  std::vector<std::string> ops;
  for (const auto& r : all)
    ops.push_back(what(nlohmann::json::parse(r.value)));
  CHECK(ops == std::vector<std::string>{"read", "read", "truncate", "read"});
  CHECK(nlohmann::json::parse(all[3].value)["row"]["id"] == "7");
  CHECK(all[2].key == "shop.public.orders");  // keyed by the table, as a truncate is
}

TEST_CASE("an event too large for the brokers stops the stream with FLT-E002, naming it and what "
          "to do",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE logs (msg text, n int)");
  stream_process p(f);
  pg_exec(f.source(), "INSERT INTO logs VALUES ('small', 1)");
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 1).size() == 1);
  // ~1.6 MB of text: over the brokers' limit.
  pg_exec(f.source(), "INSERT INTO logs SELECT string_agg(md5(g::text), '') , 2 "
                      "FROM generate_series(1, 50000) g");
  CHECK(p.wait(60s) == 1);
  INFO(p.err());
  CHECK(p.err().find("FLT-E002") != std::string::npos);
  CHECK(p.err().find("larger than the brokers accept") != std::string::npos);
  CHECK(p.err().find("the next start sends them again") == std::string::npos);
  // The setting to raise is the stream target's own.
  CHECK(p.err().find("message.max.bytes in [targets.bus.settings]") != std::string::npos);
}

TEST_CASE("a primary key changed at the source is published as a schema change before its "
          "resync's rows",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
  stream_process p(f);
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 1).size() == 1);
  pg_exec(f.source(), "ALTER TABLE orders DROP CONSTRAINT orders_pkey, ADD PRIMARY KEY (id, note)");
  auto hold_state = [&] { return hold_state_in(f, "bus", "shop.public.orders"); };
  REQUIRE(eventually(
      [&] { return hold_state() == flotilla::storage::pb::HOLD_STATE_AWAITING_REVIEW; }));
  flotilla::cdc::submit_request(std::filesystem::path(f.dir()) / ".flotilla",
                                {"", "bus", "shop.public.orders",
                                 {flotilla::cdc::decision_kind::resync, ""}});
  // The first snapshot's read, then the key change, the resync's truncate and its read.
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 4);
  INFO(p.err());
  CHECK(p.stop() == 0);
  std::vector<std::string> ops;
  for (const auto& r : all)
    ops.push_back(what(nlohmann::json::parse(r.value)));
  CHECK(ops == std::vector<std::string>{"read", "schema_change", "truncate", "read"});
  REQUIRE(all.size() == 4);
  auto change = nlohmann::json::parse(all[1].value);
  CHECK(change["outcome"] == "applied");
  CHECK(change["ddl"].get<std::string>().find("ADD PRIMARY KEY (id, note)") != std::string::npos);
  CHECK(change["columns"] == nlohmann::json::array({"id", "note"}));
  CHECK(nlohmann::json::parse(all[3].value)["key"] == nlohmann::json{{"id", "1"}, {"note", "a"}});
}

TEST_CASE("a start after a copy killed midway tells the consumers to drop what it published "
          "first: a keyless table's rows are not kept twice",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE logs (msg text, n int)");  // no key
  pg_exec(f.source(), "INSERT INTO logs VALUES ('a', 1), ('b', 2)");
  {
    ::setenv("FLOTILLA_CRASH_AT", "after_table_copy", 1);
    stream_process p(f);
    ::unsetenv("FLOTILLA_CRASH_AT");
    CHECK(p.wait(60s) != 0);  // killed once the table's rows were published
  }
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 2).size() == 2);
  stream_process p(f);
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 5);
  INFO(p.err());
  CHECK(p.stop() == 0);
  std::vector<std::string> ops;
  for (const auto& r : all)
    ops.push_back(what(nlohmann::json::parse(r.value)));
  CHECK(ops == std::vector<std::string>{"read", "read", "truncate", "read", "read"});
  // A start after one that finished its copy publishes no snapshot again.
  stream_process again(f);
  pg_exec(f.source(), "INSERT INTO logs VALUES ('c', 3)");
  auto later = read_topic(kafka.bootstraps(), "bus", 1, 6);
  CHECK(again.stop() == 0);
  REQUIRE(later.size() == 6);
  CHECK(what(nlohmann::json::parse(later[5].value)) == "insert");
}

TEST_CASE("a kept truncate of a keyed table a Kafka replay reaches stops the stream once, and "
          "leaves the review open to a decision; the next start streams again",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "CREATE TABLE items (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a'); INSERT INTO items VALUES (1, 'i')");
  auto hold_state = [&] { return hold_state_in(f, "bus", "shop.public.orders"); };
  {
    stream_process p(f);
    REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 2).size() == 2);
    pg_exec(f.source(), "ALTER TABLE orders RENAME COLUMN id TO oid");
    pg_exec(f.source(), "INSERT INTO orders VALUES (2, 'kept')");
    pg_exec(f.source(), "TRUNCATE orders");
    pg_exec(f.source(), "INSERT INTO orders VALUES (3, 'after')");
    REQUIRE(eventually(
        [&] { return hold_state() == flotilla::storage::pb::HOLD_STATE_AWAITING_REVIEW; }));
    REQUIRE(eventually([&] { return kept_on(f, "bus") == 3; }));
    flotilla::cdc::submit_request(std::filesystem::path(f.dir()) / ".flotilla",
                                  {"", "bus", "shop.public.orders",
                                   {flotilla::cdc::decision_kind::apply_proposed, ""}});
    // Stopped at the truncate (seed 002), the insert before it published ...
    CHECK(p.wait(60s) == 1);
    CHECK_THAT(p.err(), Catch::Contains("FLT-H007"));
  }
  // ... and the review takes a decision again instead of staying applying.
  CHECK(hold_state() == flotilla::storage::pb::HOLD_STATE_LAST_DECISION_FAILED);
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 4, 5s);
  INFO(all.size());
  REQUIRE(all.size() >= 4);
  CHECK(nlohmann::json::parse(all[2].value)["type"] == "schema_change");
  auto kept = nlohmann::json::parse(all[3].value);
  CHECK(what(kept) == "insert");
  CHECK(kept["key"] == nlohmann::json{{"oid", "2"}});
  // The next start streams the other tables while the review waits.
  stream_process again(f);
  pg_exec(f.source(), "INSERT INTO items VALUES (2, 'streams')");
  bool items_streamed = false;
  for (const auto& m : read_topic(kafka.bootstraps(), "bus", 1, 5, 30s)) {
    const auto e = nlohmann::json::parse(m.value);
    items_streamed = items_streamed || (e.value("table", "") == "public.items" &&
                                        e.contains("op") && e["op"] == "insert");
  }
  CHECK(items_streamed);
  CHECK(hold_state() == flotilla::storage::pb::HOLD_STATE_LAST_DECISION_FAILED);
  INFO(again.err());
  CHECK(again.stop() == 0);
}

TEST_CASE("a review a replay opens keeps its change's place: its schema change event carries "
          "`change` as every other does",
          "[stream][event-target]") {
  mock_cluster kafka("bus", 1);
  fixture f(false, kafka_target(kafka), "bus");
  pg_exec(f.source(), "CREATE TABLE orders (id int PRIMARY KEY, note text)");
  pg_exec(f.source(), "INSERT INTO orders VALUES (1, 'a')");
  stream_process p(f);
  REQUIRE(read_topic(kafka.bootstraps(), "bus", 1, 1).size() == 1);
  auto hold_of = [&]() -> std::optional<flotilla::storage::pb::HoldRecord> {
    auto store = flotilla::storage::state_store::open(f.dir() + "/.flotilla/state",
                                                      {.read_only = true});
    if (!store)
      return std::nullopt;
    auto h = store->get_hold("bus", "shop.public.orders");
    return h && *h ? std::optional(**h) : std::nullopt;
  };
  pg_exec(f.source(), "ALTER TABLE orders RENAME COLUMN id TO oid");
  // The second rename is the second change of its transaction.
  pg_exec(f.source(), "BEGIN; INSERT INTO orders VALUES (2, 'b'); "
                      "ALTER TABLE orders RENAME COLUMN oid TO id; COMMIT");
  REQUIRE(eventually([&] { return kept_on(f, "bus") == 2; }));
  const auto first = hold_of();
  REQUIRE(first);
  flotilla::cdc::submit_request(std::filesystem::path(f.dir()) / ".flotilla",
                                {"", "bus", "shop.public.orders",
                                 {flotilla::cdc::decision_kind::apply_proposed, ""}});
  // Held again at the second rename, under a new review.
  REQUIRE(eventually([&] {
    const auto h = hold_of();
    return h && h->position() != first->position() &&
           h->state() == flotilla::storage::pb::HOLD_STATE_AWAITING_REVIEW;
  }));
  flotilla::cdc::submit_request(std::filesystem::path(f.dir()) / ".flotilla",
                                {"", "bus", "shop.public.orders",
                                 {flotilla::cdc::decision_kind::apply_proposed, ""}});
  auto all = read_topic(kafka.bootstraps(), "bus", 1, 4);
  INFO(p.err());
  CHECK(p.stop() == 0);
  REQUIRE(all.size() == 4);
  std::vector<nlohmann::json> changes;
  for (const auto& m : all) {
    auto e = nlohmann::json::parse(m.value);
    if (e.value("type", "") == "schema_change")
      changes.push_back(e);
  }
  REQUIRE(changes.size() == 2);
  CHECK(changes[0]["change"] == 1);
  CHECK(changes[1]["change"] == 2);
  CHECK(changes[1]["ddl"].get<std::string>().find("RENAME COLUMN oid TO id") != std::string::npos);
}
