#include <catch2/catch.hpp>

#include "schema/calendar.hpp"
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

TEST_CASE("type names are case-insensitive and allow spaces around parameters") {
  CHECK(parse_type("DECIMAL( 12 , 2 )") == portable_type::decimal(12, 2));
  CHECK(parse_type("VarChar(8)") == portable_type::varchar(8));
  CHECK(parse_type(" Timestamp_TZ ") == portable_type::of(type_kind::timestamp_tz));
}

TEST_CASE("aliases resolve to their portable type") {
  CHECK(parse_type("integer") == portable_type::of(type_kind::int32));
  CHECK(parse_type("boolean") == portable_type::of(type_kind::boolean));
  CHECK(parse_type("string") == portable_type::of(type_kind::text));
  CHECK(parse_type("numeric(10,3)") == portable_type::decimal(10, 3));
  CHECK(parse_type("varchar") == portable_type::of(type_kind::text));
  CHECK(parse_type("decimal(7)") == portable_type::decimal(7, 0));
}

TEST_CASE("an unknown type name is an error that names it and lists the valid ones") {
  auto t = parse_type("strng");
  REQUIRE_FALSE(t.has_value());
  CHECK_THAT(t.error().message, Catch::Contains("'strng'"));
  CHECK_THAT(t.error().message, Catch::Contains("timestamp_tz"));
  CHECK_THAT(t.error().message, Catch::Contains("decimal(p,s)"));
}

TEST_CASE("malformed parameters are errors naming the type") {
  for (const char* bad : {"decimal(0,0)", "decimal(10,11)", "decimal(80,2)", "decimal(a,b)",
                          "varchar(0)", "varchar(-3)", "int(4)", "decimal(12,2", "text()"}) {
    INFO(bad);
    auto t = parse_type(bad);
    REQUIRE_FALSE(t.has_value());
    CHECK_THAT(t.error().message, Catch::Contains(bad));
  }
}

TEST_CASE("numeric and string families are classified") {
  CHECK(is_integer(type_kind::smallint));
  CHECK(integer_rank(type_kind::int32) < integer_rank(type_kind::bigint));
  CHECK(is_numeric(type_kind::decimal));
  CHECK_FALSE(is_numeric(type_kind::text));
  CHECK(is_string(type_kind::varchar));
  CHECK_FALSE(is_string(type_kind::json));
}

TEST_CASE("dates before year 1 convert between PostgreSQL's era text and ISO years") {
  using flotilla::schema::iso_from_pg_era;
  using flotilla::schema::pg_era_from_iso;
  CHECK(iso_from_pg_era("0044-03-15 BC") == "-0043-03-15");
  CHECK(iso_from_pg_era("0001-01-01 00:00:00+00 BC") == "0000-01-01 00:00:00+00");
  CHECK(iso_from_pg_era("4713-11-24 12:30:00.5 BC") == "-4712-11-24 12:30:00.5");
  CHECK(iso_from_pg_era("2000-01-01") == std::nullopt);
  CHECK(iso_from_pg_era("infinity") == std::nullopt);
  CHECK(pg_era_from_iso("-0043-03-15") == "0044-03-15 BC");
  CHECK(pg_era_from_iso("0000-01-01 00:00:00+00") == "0001-01-01 00:00:00+00 BC");
  CHECK(pg_era_from_iso("0001-01-01") == std::nullopt);
  CHECK(pg_era_from_iso("-infinity") == std::nullopt);
  for (const char* iso : {"-0043-03-15", "0000-12-31 23:59:59", "-12345-01-01"})
    CHECK(iso_from_pg_era(*pg_era_from_iso(iso)) == iso);
}
