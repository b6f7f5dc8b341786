#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "storage/state_store.hpp"
#include "tests/storage/support.hpp"

using namespace flotilla::storage;
using flotilla::storage::test::open_store;
using flotilla::storage::test::temp_dir;

namespace {

table_commit make_commit(int n, std::string_view key) {
  table_commit c;
  c.watermark.emplace();
  c.watermark->set_cursor_column("id");
  c.watermark->set_value(std::to_string(n));
  c.marker.emplace();
  c.marker->set_marker("m" + std::to_string(n));
  c.result.set_status("copied");
  c.result.set_rows(static_cast<std::uint64_t>(n));
  pb::OutboxEntry event;
  event.set_key(std::string(key));
  event.set_payload("table_finished " + std::to_string(n));
  c.events.push_back(event);
  return c;
}

}  // namespace

TEST_CASE("commit_table writes watermark, marker, result and event and removes the staged entry") {
  temp_dir dir;
  auto store = open_store(dir);
  pb::StagedEntry staged;
  staged.set_location("orders__stage");
  REQUIRE(store.put("shop.orders", staged));
  auto commit = make_commit(7, "shop.orders");
  commit.baseline.emplace();
  commit.baseline->set_hints_hash("h1");
  REQUIRE(store.commit_table("shop.orders", commit));

  auto state = store.read_table("shop.orders");
  REQUIRE(state.has_value());
  REQUIRE(state->watermark.has_value());
  CHECK(state->watermark->value() == "7");
  REQUIRE(state->marker.has_value());
  CHECK(state->marker->marker() == "m7");
  REQUIRE(state->baseline.has_value());
  CHECK(state->baseline->hints_hash() == "h1");
  REQUIRE(state->result.has_value());
  CHECK(state->result->rows() == 7);
  CHECK_FALSE(state->staged.has_value());
  auto events = store.scan_outbox();
  REQUIRE(events.has_value());
  REQUIRE(events->size() == 1);
  CHECK((*events)[0].key() == "shop.orders");
  CHECK((*events)[0].sequence() == 1);
}

TEST_CASE("commit_table leaves unset parts and the staged entry alone when asked") {
  temp_dir dir;
  auto store = open_store(dir);
  pb::Watermark old;
  old.set_value("3");
  REQUIRE(store.put("shop.orders", old));
  pb::StagedEntry staged;
  staged.set_location("orders__stage");
  REQUIRE(store.put("shop.orders", staged));

  table_commit failed;
  failed.result.set_status("failed");
  failed.result.set_error("boom");
  failed.remove_staged = false;
  REQUIRE(store.commit_table("shop.orders", failed));

  auto state = store.read_table("shop.orders");
  REQUIRE(state.has_value());
  CHECK(state->watermark->value() == "3");
  CHECK_FALSE(state->marker.has_value());
  CHECK(state->result->status() == "failed");
  CHECK(state->staged.has_value());
  CHECK(store.outbox_size().value() == 0);
}

TEST_CASE("a reader never sees part of a table commit") {
  temp_dir dir;
  store_options options;
  options.sync_writes = false;  // speed: atomicity does not depend on fsync
  auto store = open_store(dir, options);
  constexpr int tables = 200;
  for (int i = 0; i < tables; ++i) {
    pb::StagedEntry staged;
    staged.set_location("stage" + std::to_string(i));
    REQUIRE(store.put("s.t" + std::to_string(i), staged));
  }

  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::atomic<int> seen_committed{0};
  std::thread reader([&] {
    while (!done.load()) {
      for (int i = 0; i < tables; ++i) {
        auto state = store.read_table("s.t" + std::to_string(i));
        if (!state) {
          ++torn;
          continue;
        }
        bool committed = state->watermark && state->marker && state->result && !state->staged;
        bool untouched = !state->watermark && !state->marker && !state->result && state->staged;
        if (committed)
          ++seen_committed;
        if (!committed && !untouched)
          ++torn;
      }
    }
  });
  for (int i = 0; i < tables; ++i) {
    auto key = "s.t" + std::to_string(i);
    REQUIRE(store.commit_table(key, make_commit(i, key)));
  }
  done = true;
  reader.join();
  CHECK(torn.load() == 0);
  CHECK(store.outbox_size().value() == tables);
}
