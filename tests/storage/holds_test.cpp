#include <catch2/catch.hpp>

#include <vector>

#include "storage/state_store.hpp"
#include "tests/storage/support.hpp"

using namespace flotilla::storage;
using flotilla::storage::test::open_store;
using flotilla::storage::test::temp_dir;

namespace {

pb::HoldRecord make_hold(std::string kind) {
  pb::HoldRecord h;
  h.set_state(pb::HOLD_STATE_AWAITING_REVIEW);
  h.set_kind(std::move(kind));
  h.set_proposed_ddl("ALTER TABLE orders RENAME COLUMN note TO notes");
  h.set_requires_resync(false);
  h.set_position("0/16B3748");
  return h;
}

std::vector<pb::HeldChange> changes(int from, int to) {
  std::vector<pb::HeldChange> out;
  for (int i = from; i < to; ++i) {
    pb::HeldChange c;
    c.set_position("lsn" + std::to_string(i));
    c.set_payload("change " + std::to_string(i));
    out.push_back(c);
  }
  return out;
}

}  // namespace

TEST_CASE("a hold reads back by target and table") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.put_hold("warehouse", "shop.orders", make_hold("rename_column")));
  auto hold = store.get_hold("warehouse", "shop.orders");
  REQUIRE(hold.has_value());
  REQUIRE(hold->has_value());
  CHECK((*hold)->kind() == "rename_column");
  CHECK((*hold)->state() == pb::HOLD_STATE_AWAITING_REVIEW);
  CHECK_FALSE(store.get_hold("other", "shop.orders")->has_value());
}

TEST_CASE("holds are listed by target and table, for all targets or one") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.put_hold("wh", "shop.orders", make_hold("a")));
  REQUIRE(store.put_hold("wh", "crm.leads", make_hold("b")));
  REQUIRE(store.put_hold("wh2", "shop.orders", make_hold("c")));
  REQUIRE(store.append_held_changes("wh", "crm.leads", changes(0, 3)));
  auto all = store.list_holds();
  REQUIRE(all.has_value());
  REQUIRE(all->size() == 3);
  CHECK((*all)[0].target == "wh");
  CHECK((*all)[0].table == "crm.leads");
  CHECK((*all)[1].table == "shop.orders");
  CHECK((*all)[2].target == "wh2");
  auto wh = store.list_holds("wh");
  REQUIRE(wh.has_value());
  CHECK(wh->size() == 2);
  auto none = store.list_holds("w");
  REQUIRE(none.has_value());
  CHECK(none->empty());
}

TEST_CASE("kept changes come back in the order they were held") {
  temp_dir dir;
  auto store = open_store(dir);
  auto first = changes(0, 1);
  CHECK(store.put_hold("wh", "shop.orders", make_hold("alter_type"), first).value() == 1);
  CHECK(store.append_held_changes("wh", "shop.orders", changes(1, 12)).value() == 12);
  REQUIRE(store.append_held_changes("wh", "shop.orders2", changes(100, 105)));
  auto kept = store.scan_held_changes("wh", "shop.orders");
  REQUIRE(kept.has_value());
  REQUIRE(kept->size() == 12);
  for (std::size_t i = 0; i < kept->size(); ++i) {
    CHECK((*kept)[i].sequence() == i + 1);
    CHECK((*kept)[i].payload() == "change " + std::to_string(i));
  }
  auto page = store.scan_held_changes("wh", "shop.orders", 9, 2);
  REQUIRE(page.has_value());
  REQUIRE(page->size() == 2);
  CHECK((*page)[0].sequence() == 10);
  CHECK(store.held_change_count("wh", "shop.orders2").value() == 5);
}

TEST_CASE("applied changes are removed and later ones keep their sequence") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.append_held_changes("wh", "shop.orders", changes(0, 5)));
  REQUIRE(store.remove_held_changes_through("wh", "shop.orders", 3));
  auto kept = store.scan_held_changes("wh", "shop.orders");
  REQUIRE(kept->size() == 2);
  CHECK(kept->front().sequence() == 4);
  REQUIRE(store.clear_held_changes("wh", "shop.orders"));
  CHECK(store.held_change_count("wh", "shop.orders").value() == 0);
  CHECK(store.append_held_changes("wh", "shop.orders", changes(5, 6)).value() == 6);
}

TEST_CASE("held changes and their sequence survive reopening") {
  temp_dir dir;
  {
    auto store = open_store(dir);
    REQUIRE(store.put_hold("wh", "shop.orders", make_hold("drop_column"), changes(0, 3)));
  }
  auto store = open_store(dir);
  CHECK(store.held_change_count("wh", "shop.orders").value() == 3);
  CHECK(store.append_held_changes("wh", "shop.orders", changes(3, 4)).value() == 4);
  auto kept = store.scan_held_changes("wh", "shop.orders");
  REQUIRE(kept->size() == 4);
  CHECK(kept->back().payload() == "change 3");
}

TEST_CASE("removing a hold removes its kept changes and restarts its sequence") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.put_hold("wh", "shop.orders", make_hold("key_change"), changes(0, 3)));
  REQUIRE(store.put_hold("wh", "shop.orders2", make_hold("key_change"), changes(0, 2)));
  REQUIRE(store.remove_hold("wh", "shop.orders"));
  CHECK_FALSE(store.get_hold("wh", "shop.orders")->has_value());
  CHECK(store.held_change_count("wh", "shop.orders").value() == 0);
  CHECK(store.held_change_count("wh", "shop.orders2").value() == 2);
  CHECK(store.append_held_changes("wh", "shop.orders", changes(0, 1)).value() == 1);
}

TEST_CASE("a hold with an empty target is refused") {
  temp_dir dir;
  auto store = open_store(dir);
  auto put = store.put_hold("", "shop.orders", make_hold("x"));
  REQUIRE_FALSE(put.has_value());
  CHECK(put.error().code == errc::invalid_key);
}
