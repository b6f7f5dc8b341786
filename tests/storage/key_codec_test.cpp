#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "storage/key_codec.hpp"

using namespace flotilla::storage;

TEST_CASE("big-endian sequence keys sort in numeric order") {
  std::vector<std::uint64_t> numbers = {0, 1, 2, 255, 256, 65535, 65536, 1ULL << 40,
                                        ~0ULL - 1, ~0ULL};
  std::vector<std::string> encoded;
  for (auto n : numbers)
    encoded.push_back(keys::be64(n));
  CHECK(std::is_sorted(encoded.begin(), encoded.end()));
  for (std::size_t i = 0; i < numbers.size(); ++i)
    CHECK(keys::read_be64(encoded[i]) == numbers[i]);
  CHECK_FALSE(keys::read_be64("short").has_value());
}

TEST_CASE("a table key is the source and the table joined by a dot") {
  CHECK(keys::table_key("shop", "orders") == "shop.orders");
  CHECK(keys::table_key("shop", "public.orders") == "shop.public.orders");
}

TEST_CASE("names must be non-empty and free of NUL bytes") {
  CHECK(keys::valid_name("shop.orders"));
  CHECK_FALSE(keys::valid_name(""));
  CHECK_FALSE(keys::valid_name(std::string("a\0b", 3)));
}

TEST_CASE("the kept changes of one held table are contiguous and in sequence order") {
  // "t.a" and "t.a2" share a prefix; the NUL separator keeps their queues apart.
  std::vector<std::string> all = {
      keys::hold_queue("wh", "t.a", 2),  keys::hold_queue("wh", "t.a2", 1),
      keys::hold_queue("wh", "t.a", 10), keys::hold_queue("wh", "t.a", 1),
      keys::hold_queue("wh2", "t.a", 1),
  };
  std::sort(all.begin(), all.end());
  CHECK(all[0] == keys::hold_queue("wh", "t.a", 1));
  CHECK(all[1] == keys::hold_queue("wh", "t.a", 2));
  CHECK(all[2] == keys::hold_queue("wh", "t.a", 10));
  CHECK(all[3] == keys::hold_queue("wh", "t.a2", 1));
  CHECK(all[4] == keys::hold_queue("wh2", "t.a", 1));
  auto prefix = keys::hold_queue_prefix("wh", "t.a");
  auto upper = keys::prefix_successor(prefix);
  CHECK(all[2] < upper);
  CHECK(all[3] >= upper);
}

TEST_CASE("a hold record key splits back into target and table") {
  auto parts = keys::parse_hold_record(keys::hold_record("warehouse", "shop.orders"));
  REQUIRE(parts.has_value());
  CHECK(parts->target == "warehouse");
  CHECK(parts->table == "shop.orders");
  CHECK_FALSE(keys::parse_hold_record("xwarehouse").has_value());
}

TEST_CASE("the run index orders runs by start time") {
  auto a = keys::run_index(1'000, "zzz");
  auto b = keys::run_index(2'000, "aaa");
  CHECK(a < b);
  auto parts = keys::parse_run_index(b);
  REQUIRE(parts.has_value());
  CHECK(parts->started_at_us == 2'000);
  CHECK(parts->run_id == "aaa");
}

TEST_CASE("the successor of a prefix bounds every key that starts with it") {
  CHECK(keys::prefix_successor("ab") == "ac");
  CHECK(keys::prefix_successor(std::string("a\xff", 2)) == "b");
  CHECK(keys::prefix_successor(std::string("\xff\xff", 2)).empty());
}

TEST_CASE("keys print with unprintable bytes escaped") {
  CHECK(keys::printable(std::string("q\0x", 3)) == "q\\x00x");
}
