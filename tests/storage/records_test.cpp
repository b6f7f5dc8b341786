#include <algorithm>

#include <catch2/catch.hpp>

#include <rocksdb/db.h>

#include "storage/state_store.hpp"
#include "tests/storage/raw_store.hpp"
#include "tests/storage/support.hpp"

using namespace flotilla::storage;
using flotilla::storage::test::open_store;
using flotilla::storage::test::temp_dir;
using flotilla::storage::test::with_raw_store;

namespace {

pb::Watermark sample_watermark() {
  pb::Watermark w;
  w.set_cursor_column("updated_at");
  w.set_value("2024-05-01 10:00:00");
  w.set_updated_run_id("run-1");
  w.set_updated_at_us(1'700'000'000'000'000);
  return w;
}

pb::ChangeMarker sample_marker() {
  pb::ChangeMarker m;
  m.set_marker("pages=12;changes=345");
  m.set_run_id("run-1");
  return m;
}

pb::SchemaBaseline sample_baseline() {
  pb::SchemaBaseline b;
  auto* id = b.add_columns();
  id->set_name("id");
  id->set_type("bigint");
  id->set_nullable(false);
  id->set_key(true);
  auto* amount = b.add_columns();
  amount->set_name("amount");
  amount->set_type("decimal(18,2)");
  amount->set_nullable(true);
  b.set_hints_hash("h:abc123");
  b.set_run_id("run-1");
  b.set_recorded_at_us(42);
  return b;
}

pb::TableResult sample_result() {
  pb::TableResult r;
  r.set_table("staging__us_west__shop.orders");
  r.set_source("shop");
  r.set_status("copied");
  r.set_rows(120);
  r.set_started_at_us(1);
  r.set_finished_at_us(2);
  auto* col = r.add_observed_schema();
  col->set_name("status");
  col->set_type("int");
  r.set_has_observed_schema(true);
  auto* action = r.add_actions();
  action->set_action("alter_column_types");
  action->set_reason("column 'status' changed STRING -> INT");
  return r;
}

pb::StagedEntry sample_staged() {
  pb::StagedEntry s;
  s.set_run_id("run-1");
  s.set_target("warehouse");
  s.set_location("staging__us_west__shop.orders__flotilla_stage");
  s.set_rows(120);
  s.set_watermark_value("2024-05-01 10:00:00");
  return s;
}

pb::CdcPosition sample_position() {
  pb::CdcPosition p;
  p.set_position("0/16B3748");
  p.set_slot("flotilla_shop");
  return p;
}

template <class Record>
void check_round_trip(state_store& store, const Record& record) {
  REQUIRE(store.put("shop.orders", record));
  auto back = store.get<Record>("shop.orders");
  REQUIRE(back.has_value());
  REQUIRE(back->has_value());
  CHECK((*back)->SerializeAsString() == record.SerializeAsString());
  REQUIRE(store.remove<Record>("shop.orders"));
  auto gone = store.get<Record>("shop.orders");
  REQUIRE(gone.has_value());
  CHECK_FALSE(gone->has_value());
}

}  // namespace

TEST_CASE("every per-table record kind reads back as it was written") {
  temp_dir dir;
  auto store = open_store(dir);
  check_round_trip(store, sample_watermark());
  check_round_trip(store, sample_marker());
  check_round_trip(store, sample_baseline());
  check_round_trip(store, sample_result());
  check_round_trip(store, sample_staged());
  check_round_trip(store, sample_position());
}

TEST_CASE("names, markers and messages that are not UTF-8 read back byte for byte") {
  // Source identifiers and error texts are bytes: a SQLite table may be named anything.
  const std::string name = "s.\xff\xfeorders", text = "bad byte \xc3( in 'caf\xe9'";
  temp_dir dir;
  auto store = open_store(dir);
  auto result = sample_result();
  result.set_table(name);
  result.set_source_table(name);
  result.set_error(text);
  result.mutable_observed_schema(0)->set_name(text);
  check_round_trip(store, result);
  auto marker = sample_marker();
  marker.set_marker("pages=12;\x80\x81");
  check_round_trip(store, marker);
  pb::SourceCatalog c;
  c.add_tables()->set_name(name);
  REQUIRE(store.put("shop", c));
  auto back = store.get<pb::SourceCatalog>("shop");
  REQUIRE(back.has_value());
  REQUIRE(back->has_value());
  CHECK((*back)->tables(0).name() == name);
}

TEST_CASE("a kept source catalog reads back as it was written, under the source's name") {
  temp_dir dir;
  auto store = open_store(dir);
  pb::SourceCatalog c;
  c.set_file_marker("sqlite:1:2:3:4;c:00");
  c.set_adapter("sqlite");
  c.set_location("/data/shop.db");
  c.set_reader("sqlite-catalog/1");
  auto* t = c.add_tables();
  t->set_name("orders");
  t->set_marker("sqlite:1:2:3:4;c:00;s:01");
  t->set_has_marker(true);
  t->set_columns(std::string("id\0bigint\0" "2", 11));
  REQUIRE(store.put("shop", c));
  auto back = store.get<pb::SourceCatalog>("shop");
  REQUIRE(back.has_value());
  REQUIRE(back->has_value());
  CHECK((*back)->SerializeAsString() == c.SerializeAsString());
  CHECK_FALSE(store.get<pb::CdcPosition>("shop")->has_value());  // its own family
}

TEST_CASE("reading many tables at once gives each key what read_table gives it") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.put("shop.orders", sample_watermark()));
  REQUIRE(store.put("shop.orders", sample_marker()));
  REQUIRE(store.put("shop.orders", sample_result()));
  REQUIRE(store.put("shop.customers", sample_marker()));
  REQUIRE(store.put("shop.customers", sample_baseline()));
  REQUIRE(store.put("shop.customers", sample_staged()));
  const std::vector<std::string> keys = {"shop.orders", "shop.missing", "shop.customers"};
  auto many = store.read_tables(keys);
  REQUIRE(many.has_value());
  REQUIRE(many->size() == 3);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto one = store.read_table(keys[i]);
    REQUIRE(one.has_value());
    const auto& m = (*many)[i];
    auto same = [](const auto& a, const auto& b) {
      return a.has_value() == b.has_value() &&
             (!a || a->SerializeAsString() == b->SerializeAsString());
    };
    CHECK(same(m.watermark, one->watermark));
    CHECK(same(m.marker, one->marker));
    CHECK(same(m.baseline, one->baseline));
    CHECK(same(m.result, one->result));
    CHECK(same(m.staged, one->staged));
  }
  CHECK((*many)[0].marker.has_value());
  CHECK_FALSE((*many)[1].marker.has_value());
  CHECK((*many)[2].staged.has_value());
  // Without the drift records: the same watermarks, markers and staged entries, and
  // neither baselines nor results.
  auto lean = store.read_tables(keys, false);
  REQUIRE(lean.has_value());
  REQUIRE(lean->size() == 3);
  CHECK((*lean)[0].watermark.has_value());
  CHECK((*lean)[0].marker.has_value());
  CHECK_FALSE((*lean)[0].result.has_value());
  CHECK((*lean)[2].marker.has_value());
  CHECK((*lean)[2].staged.has_value());
  CHECK_FALSE((*lean)[2].baseline.has_value());
  CHECK(store.read_tables({})->empty());
  const std::vector<std::string> bad = {"shop.orders", ""};
  auto refused = store.read_tables(bad);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == errc::invalid_key);
}

TEST_CASE("reading a long run of keys in order finds each key's own records") {
  // Enough keys in order that the records are read by walking each family's key range:
  // stored keys nobody asks for, short and long gaps, a repeated key, keys before, after
  // and between the stored ones.
  temp_dir dir;
  auto store = open_store(dir);
  auto name = [](int i) {
    auto digits = std::to_string(i);
    return "shop.t" + std::string(5 - digits.size(), '0') + digits;
  };
  for (int i = 0; i < 400; ++i) {
    auto m = sample_marker();
    m.set_marker("marker of " + name(i));
    REQUIRE(store.put(name(i), m));
    if (i % 3 == 0) {
      auto w = sample_watermark();
      w.set_value("watermark of " + name(i));
      REQUIRE(store.put(name(i), w));
    }
  }
  std::vector<std::string> keys = {"shop.a"};  // before every stored key
  for (int i = 0; i < 40; ++i)
    keys.push_back(name(i));            // every key: the walk steps from one to the next
  keys.push_back(name(40) + "x");       // between two stored keys
  keys.push_back(name(45));             // a short gap
  keys.push_back(name(45));             // the same key twice
  keys.push_back(name(200));            // a long gap: crossed by a seek
  for (int i = 390; i < 400; ++i)
    keys.push_back(name(i));
  keys.push_back("shop.zzz");           // after every stored key
  REQUIRE(std::is_sorted(keys.begin(), keys.end()));
  auto many = store.read_tables(keys);
  REQUIRE(many.has_value());
  REQUIRE(many->size() == keys.size());
  std::size_t markers = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto one = store.read_table(keys[i]);
    REQUIRE(one.has_value());
    const auto& m = (*many)[i];
    INFO(keys[i]);
    REQUIRE(m.marker.has_value() == one->marker.has_value());
    REQUIRE(m.watermark.has_value() == one->watermark.has_value());
    if (m.marker) {
      ++markers;
      CHECK(m.marker->marker() == "marker of " + keys[i]);
    }
    if (m.watermark)
      CHECK(m.watermark->value() == "watermark of " + keys[i]);
  }
  CHECK(markers == keys.size() - 3);
  CHECK_FALSE((*many)[0].marker.has_value());
  CHECK((*many)[1].watermark.has_value());  // t00000
  CHECK_FALSE((*many)[2].watermark.has_value());  // t00001
}

TEST_CASE("a record never written reads as absent") {
  temp_dir dir;
  auto store = open_store(dir);
  auto w = store.get<pb::Watermark>("shop.nothing");
  REQUIRE(w.has_value());
  CHECK_FALSE(w->has_value());
}

TEST_CASE("the same key in different families holds different records") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.put("shop.orders", sample_watermark()));
  REQUIRE(store.put("shop.orders", sample_marker()));
  CHECK(store.get<pb::Watermark>("shop.orders")->value().value() == "2024-05-01 10:00:00");
  CHECK(store.get<pb::ChangeMarker>("shop.orders")->value().marker() == "pages=12;changes=345");
  CHECK_FALSE(store.get<pb::TableResult>("shop.orders")->has_value());
}

TEST_CASE("listing by prefix returns one source's records in key order") {
  temp_dir dir;
  auto store = open_store(dir);
  for (auto key : {"shop.orders", "crm.leads", "shop.customers", "shopx.items"})
    REQUIRE(store.put(key, sample_baseline()));
  auto shop = store.list<pb::SchemaBaseline>("shop.");
  REQUIRE(shop.has_value());
  REQUIRE(shop->size() == 2);
  CHECK((*shop)[0].key == "shop.customers");
  CHECK((*shop)[1].key == "shop.orders");
  CHECK((*shop)[1].record.columns_size() == 2);
  auto all = store.list<pb::SchemaBaseline>();
  REQUIRE(all.has_value());
  CHECK(all->size() == 4);
}

TEST_CASE("an empty key or one holding a NUL byte is refused") {
  temp_dir dir;
  auto store = open_store(dir);
  auto empty = store.put("", sample_watermark());
  REQUIRE_FALSE(empty.has_value());
  CHECK(empty.error().code == errc::invalid_key);
  auto nul = store.get<pb::Watermark>(std::string("a\0b", 3));
  REQUIRE_FALSE(nul.has_value());
  CHECK(nul.error().code == errc::invalid_key);
  CHECK_THAT(nul.error().message, Catch::Contains("a\\x00b"));
}

TEST_CASE("reopening the store after closing it keeps every record") {
  temp_dir dir;
  {
    auto store = open_store(dir);
    REQUIRE(store.put("shop.orders", sample_watermark()));
    REQUIRE(store.put("shop.orders", sample_marker()));
    REQUIRE(store.put("shop.orders", sample_baseline()));
    REQUIRE(store.put("shop.orders", sample_result()));
    REQUIRE(store.put("shop.orders", sample_staged()));
    REQUIRE(store.put("shop", sample_position()));
    pb::RunRecord run;
    run.set_run_id("run-1");
    run.set_status("success");
    run.set_started_at_us(10);
    *run.add_tables() = sample_result();
    REQUIRE(store.put_run(run));
    pb::OutboxEntry event;
    event.set_key("shop.orders");
    event.set_payload("{}");
    REQUIRE(store.append_outbox({&event, 1}));
    pb::HoldRecord hold;
    hold.set_state(pb::HOLD_STATE_AWAITING_REVIEW);
    pb::HeldChange change;
    change.set_payload("c1");
    REQUIRE(store.put_hold("warehouse", "shop.orders", hold, {&change, 1}));
    REQUIRE(store.close());
  }
  auto store = open_store(dir);
  auto state = store.read_table("shop.orders");
  REQUIRE(state.has_value());
  CHECK(state->watermark.has_value());
  CHECK(state->marker.has_value());
  CHECK(state->baseline.has_value());
  CHECK(state->result.has_value());
  CHECK(state->staged.has_value());
  CHECK(store.get<pb::CdcPosition>("shop")->has_value());
  CHECK(store.latest_run_id()->value() == "run-1");
  CHECK(store.get_run("run-1")->value().tables_size() == 1);
  CHECK(store.outbox_size().value() == 1);
  CHECK(store.get_hold("warehouse", "shop.orders")->has_value());
  CHECK(store.held_change_count("warehouse", "shop.orders").value() == 1);
}

TEST_CASE("a read-only store sees the records and refuses writes") {
  temp_dir dir;
  {
    auto store = open_store(dir);
    REQUIRE(store.put("shop.orders", sample_watermark()));
  }
  store_options options;
  options.read_only = true;
  auto store = open_store(dir, options);
  CHECK(store.get<pb::Watermark>("shop.orders")->has_value());
  auto put = store.put("shop.orders", sample_marker());
  REQUIRE_FALSE(put.has_value());
  CHECK(put.error().code == errc::read_only);
}

TEST_CASE("opening a missing store read-only fails with not_found") {
  temp_dir dir;
  store_options options;
  options.read_only = true;
  auto store = state_store::open(dir.state(), options);
  REQUIRE_FALSE(store.has_value());
  CHECK(store.error().code == errc::not_found);
  CHECK_THAT(store.error().message, Catch::Contains(dir.state().string()));
}

TEST_CASE("a store from a newer layout is refused with a clear message") {
  temp_dir dir;
  { auto store = open_store(dir); }
  // Write the layout version the way a future release would.
  with_raw_store(dir, [](rocksdb::DB& db) {
    REQUIRE(db.Put(rocksdb::WriteOptions{}, "format", "2").ok());
  });
  auto store = state_store::open(dir.state());
  REQUIRE_FALSE(store.has_value());
  CHECK(store.error().code == errc::version_mismatch);
  CHECK_THAT(store.error().message, Catch::Contains("layout version 2"));
}
