#include <catch2/catch.hpp>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "storage/state_store.hpp"
#include "tests/storage/support.hpp"

using namespace flotilla::storage;
using flotilla::storage::test::open_store;
using flotilla::storage::test::temp_dir;

namespace {

std::vector<pb::OutboxEntry> events(int from, int to) {
  std::vector<pb::OutboxEntry> out;
  for (int i = from; i < to; ++i) {
    pb::OutboxEntry e;
    e.set_key("k" + std::to_string(i));
    e.set_topic("flotilla.events");
    e.set_payload("event " + std::to_string(i));
    e.set_format(pb::PAYLOAD_FORMAT_JSON);
    out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("outbox entries come back in the order they were appended") {
  temp_dir dir;
  auto store = open_store(dir);
  auto first = events(0, 3);
  auto second = events(3, 300);
  CHECK(store.append_outbox(first).value() == 3);
  CHECK(store.append_outbox(second).value() == 300);
  auto all = store.scan_outbox();
  REQUIRE(all.has_value());
  REQUIRE(all->size() == 300);
  for (std::size_t i = 0; i < all->size(); ++i) {
    CHECK((*all)[i].sequence() == i + 1);
    CHECK((*all)[i].payload() == "event " + std::to_string(i));
  }
  CHECK((*all)[0].topic() == "flotilla.events");
  CHECK((*all)[0].format() == pb::PAYLOAD_FORMAT_JSON);
  auto page = store.scan_outbox(10, 5);
  REQUIRE(page.has_value());
  REQUIRE(page->size() == 5);
  CHECK(page->front().sequence() == 11);
  CHECK(page->back().sequence() == 15);
}

TEST_CASE("removing delivered outbox entries keeps the rest") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.append_outbox(events(0, 10)));
  REQUIRE(store.remove_outbox_through(4));
  CHECK(store.outbox_size().value() == 6);
  auto rest = store.scan_outbox();
  REQUIRE(rest.has_value());
  CHECK(rest->front().sequence() == 5);
  REQUIRE(store.remove_outbox_through(2));  // already gone: nothing happens
  CHECK(store.outbox_size().value() == 6);
}

TEST_CASE("outbox order and sequence survive reopening") {
  temp_dir dir;
  {
    auto store = open_store(dir);
    REQUIRE(store.append_outbox(events(0, 5)));
    REQUIRE(store.remove_outbox_through(2));
  }
  {
    auto store = open_store(dir);
    CHECK(store.last_outbox_sequence() == 5);
    CHECK(store.append_outbox(events(5, 7)).value() == 7);
    auto all = store.scan_outbox();
    REQUIRE(all.has_value());
    REQUIRE(all->size() == 5);
    CHECK(all->front().sequence() == 3);
    CHECK(all->back().sequence() == 7);
    CHECK(all->back().payload() == "event 6");
  }
}

TEST_CASE("a drained outbox never reuses a sequence after reopening") {
  temp_dir dir;
  {
    auto store = open_store(dir);
    REQUIRE(store.append_outbox(events(0, 4)));
    REQUIRE(store.remove_outbox_through(4));
    CHECK(store.outbox_size().value() == 0);
  }
  auto store = open_store(dir);
  CHECK(store.append_outbox(events(0, 1)).value() == 5);
}

TEST_CASE("concurrent appends are seen without gaps by a consumer that removes what it read") {
  temp_dir dir;
  store_options options;
  options.sync_writes = false;
  auto store = open_store(dir, options);
  constexpr int writers = 4;
  constexpr int per_writer = 250;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < per_writer; ++i) {
        auto batch = events(w * per_writer + i, w * per_writer + i + 1);
        if (!store.append_outbox(batch))
          ++failures;  // Catch2 assertions are not thread-safe: count, check after join
      }
    });
  std::set<std::uint64_t> delivered;
  std::uint64_t last = 0;
  bool ordered = true;
  while (delivered.size() < writers * per_writer && failures.load() == 0) {
    auto page = store.scan_outbox(0, 64);
    REQUIRE(page.has_value());
    for (const auto& e : *page) {
      if (e.sequence() <= last)
        ordered = false;
      last = e.sequence();
      delivered.insert(e.sequence());
    }
    if (!page->empty())
      REQUIRE(store.remove_outbox_through(page->back().sequence()));
  }
  for (auto& t : threads)
    t.join();
  REQUIRE(failures.load() == 0);
  CHECK(ordered);
  CHECK(delivered.size() == writers * per_writer);
  CHECK(*delivered.rbegin() == writers * per_writer);
  CHECK(store.outbox_size().value() == 0);
}
