#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "schema/packed.hpp"

using namespace flotilla::schema;

namespace {

std::vector<column> sample() {
  return {column{"id", portable_type::of(type_kind::bigint), false, true},
          column{"total", portable_type::decimal(12, 2), true, false},
          column{"name with \"quotes\" and ünïcode", portable_type::varchar(8), true, false},
          column{"", portable_type::of(type_kind::timestamp_tz), false, false},
          column{"k2", portable_type::of(type_kind::bigint), true, true}};
}

}  // namespace

TEST_CASE("packed columns unpack to the same columns, in order, flags included") {
  auto packed = pack_columns(sample());
  REQUIRE(packed.has_value());
  packed_reader reader;
  auto back = reader.unpack(*packed);
  REQUIRE(back.has_value());
  CHECK(*back == sample());
  // The same reader again (its type spellings now known) gives the same.
  CHECK(reader.unpack(*packed) == back);
  // No columns: an empty string, unpacking to none.
  CHECK(pack_columns({}) == std::string());
  CHECK(reader.unpack("")->empty());
}

TEST_CASE("a name holding a NUL byte is not packable") {
  std::vector<column> bad = {column{std::string("a\0b", 3), portable_type::of(type_kind::bigint)}};
  CHECK_FALSE(pack_columns(bad).has_value());
}

TEST_CASE("malformed packed columns do not unpack") {
  const std::string good = *pack_columns(sample());
  const std::vector<std::string> malformed = {
      std::string("id"),                               // no NUL after the name
      std::string("id\0bigint", 9),                    // no NUL after the type
      std::string("id\0bigint\0", 10),                 // no flag byte
      std::string("id\0bigint\0" "7", 11),             // a flag byte out of range
      std::string("id\0no such type\0" "1", 17),       // a type that does not parse
      good + std::string("x\0bigint", 8),              // a good prefix, then a torn column
  };
  for (const auto& m : malformed) {
    INFO(m);
    packed_reader reader;
    CHECK_FALSE(reader.unpack(m).has_value());
  }
}
