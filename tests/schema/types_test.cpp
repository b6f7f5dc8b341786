#include <catch2/catch.hpp>

#include "schema/types.hpp"

using namespace flotilla::schema;

TEST_CASE("every portable type name parses and prints back the same") {
  for (const char* name : {"bool", "smallint", "int", "bigint", "float", "double", "decimal(18,2)",
                           "varchar(20)", "text", "date", "time", "timestamp_ntz", "timestamp_tz",
                           "json", "bytes", "uuid"}) {
    auto t = parse_type(name);
    REQUIRE(t.has_value());
    CHECK(to_string(*t) == name);
  }
}
