// Pure conversions: decimals, dates and times, uuids, COPY text, DSN redaction, and the
// type-name tables of each engine.

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "sources/copy_text.hpp"
#include "sources/errors.hpp"
#include "sources/type_mapping.hpp"
#include "sources/values.hpp"

using namespace flotilla::sources;
using flotilla::schema::portable_type;
using flotilla::schema::type_kind;

TEST_CASE("decimal text is normalised to exactly the declared scale") {
  CHECK(normalize_decimal("12.5", 2) == "12.50");
  CHECK(normalize_decimal("-12.5", 2) == "-12.50");
  CHECK(normalize_decimal("12", 3) == "12.000");
  CHECK(normalize_decimal("+0.1", 1) == "0.1");
  CHECK(normalize_decimal("-0.001", 2) == "0.00");
  CHECK(normalize_decimal("000123.4500", 2) == "123.45");
  CHECK(normalize_decimal(".5", 1) == "0.5");
  CHECK(normalize_decimal("1.5e3", 2) == "1500.00");
  CHECK(normalize_decimal("15E-3", 3) == "0.015");
  CHECK(normalize_decimal("7", 0) == "7");
  CHECK(normalize_decimal("12345678901234567890123456789.123456789", 9) ==
        "12345678901234567890123456789.123456789");
}

TEST_CASE("extra decimal digits round half away from zero") {
  CHECK(normalize_decimal("1.005", 2) == "1.01");
  CHECK(normalize_decimal("-1.005", 2) == "-1.01");
  CHECK(normalize_decimal("1.004", 2) == "1.00");
  CHECK(normalize_decimal("9.995", 2) == "10.00");
  CHECK(normalize_decimal("-99.5", 0) == "-100");
}

TEST_CASE("malformed decimal text has no decimal") {
  for (const char* bad : {"", "abc", "1.2.3", "1e", "--1", "NaN", "Infinity", "1,5", "1e5000"})
    CHECK_FALSE(normalize_decimal(bad, 2).has_value());
}

TEST_CASE("a double becomes the decimal its shortest text spells") {
  CHECK(decimal_from_double(0.1, 2) == "0.10");
  CHECK(decimal_from_double(12.34, 2) == "12.34");
  CHECK(decimal_from_double(-7.25, 1) == "-7.3");
  CHECK(decimal_from_double(1e20, 0) == "100000000000000000000");
  // Beyond 2^53 too: the shortest digits, not the double's exact binary expansion.
  CHECK(decimal_from_double(1e23, 2) == "100000000000000000000000.00");
  CHECK(decimal_from_double(1e28, 10) == "10000000000000000000000000000.0000000000");
  CHECK(decimal_from_double(-1.2345e22, 1) == "-12345000000000000000000.0");
  CHECK(decimal_from_double(1.5e-7, 10) == "0.0000001500");
  CHECK(decimal_from_double(123456789012345.67, 2) == "123456789012345.67");
  CHECK(decimal_from_double(0.5e-20, 2) == "0.00");
  CHECK_FALSE(decimal_from_double(std::numeric_limits<double>::quiet_NaN(), 2).has_value());
  CHECK_FALSE(decimal_from_double(std::numeric_limits<double>::infinity(), 2).has_value());
}

TEST_CASE("a double near a decimal of its scale, or too coarse for one, becomes the same decimal") {
  // The common case (the double nearest to some n / 10^scale) is formatted from n; these
  // check it agrees with the shortest text everywhere it applies and where it does not.
  CHECK(decimal_from_double(1.005, 2) == "1.01");  // 1.00499999999999989..., spelled 1.005
  CHECK(decimal_from_double(0.125, 2) == "0.13");
  CHECK(decimal_from_double(-0.125, 2) == "-0.13");
  CHECK(decimal_from_double(-0.001, 2) == "0.00");
  CHECK(decimal_from_double(-0.0, 2) == "0.00");
  CHECK(decimal_from_double(99999999.99, 2) == "99999999.99");
  CHECK(decimal_from_double(-1234567890.12, 2) == "-1234567890.12");
  CHECK(decimal_from_double(0.1 + 0.2, 2) == "0.30");
  CHECK(decimal_from_double(45035996273704.96, 2) == "45035996273704.96");
  CHECK(decimal_from_double(1e17, 2) == "100000000000000000.00");
  CHECK(decimal_from_double(123456789012345678.0, 0) == "123456789012345680");
  CHECK(decimal_from_double(5e-324, 3) == "0.000");
  CHECK(decimal_from_double(2.5, 0) == "3");
}

TEST_CASE("plain decimal text rounds, pads and drops its leading zeros") {
  CHECK(normalize_decimal("00012.5", 2) == "12.50");
  CHECK(normalize_decimal("+0.005", 2) == "0.01");
  CHECK(normalize_decimal("-0.004", 2) == "0.00");
  CHECK(normalize_decimal("-0.005", 2) == "-0.01");
  CHECK(normalize_decimal("-999.999", 2) == "-1000.00");
  CHECK(normalize_decimal("12.", 1) == "12.0");
  CHECK(normalize_decimal("7", 0) == "7");
  CHECK(normalize_decimal(" 7.25 ", 1) == "7.3");
  CHECK(normalize_decimal("-.5", 0) == "-1");
}

TEST_CASE("scaled integers format as plain decimals") {
  CHECK(format_scaled(-1250, 2) == "-12.50");
  CHECK(format_scaled(5, 3) == "0.005");
  CHECK(format_scaled(-5, 3) == "-0.005");
  CHECK(format_scaled(0, 2) == "0.00");
  CHECK(format_scaled(42, 0) == "42");
  const __int128 big = static_cast<__int128>(1) << 100;
  CHECK(format_scaled(big, 0) == "1267650600228229401496703205376");
  CHECK(format_scaled(-big, 4) == "-126765060022822940149670320.5376");
}

TEST_CASE("a timestamp past 64 bits of microseconds is no timestamp, never one wrapped to BC") {
  // 294247-01-10 04:00:54.775807 is the last microsecond 64 bits hold.
  CHECK(normalize_timestamp("294247-01-10 04:00:54", false) == "294247-01-10 04:00:54");
  CHECK_FALSE(normalize_timestamp("294247-01-11 00:00:00", false).has_value());
  CHECK_FALSE(normalize_timestamp("300000-01-01 00:00:00+00", true).has_value());
  CHECK_FALSE(normalize_timestamp("-290309-01-01 00:00:00", false).has_value());
  CHECK_FALSE(normalize_date("999999-12-31").has_value());
  CHECK(micros_from_unix_seconds(1) == 1'000'000);
  CHECK_FALSE(micros_from_unix_seconds(std::int64_t{1} << 60).has_value());
}

TEST_CASE("timestamps in the common text forms normalise to one form") {
  CHECK(normalize_timestamp("2024-01-02 03:04:05", false) == "2024-01-02 03:04:05");
  CHECK(normalize_timestamp("2024-01-02T03:04:05.120", false) == "2024-01-02 03:04:05.12");
  CHECK(normalize_timestamp("2024-01-02", false) == "2024-01-02 00:00:00");
  CHECK(normalize_timestamp("2024-01-02 03:04", false) == "2024-01-02 03:04:00");
  CHECK(normalize_timestamp("2024-01-02 03:04:05.1234567", false) == "2024-01-02 03:04:05.123456");
  CHECK(normalize_timestamp("2024-01-02T03:04:05Z", true) == "2024-01-02 03:04:05+00");
  CHECK(normalize_timestamp("2024-01-02 03:04:05", true) == "2024-01-02 03:04:05+00");
  CHECK(normalize_timestamp("2024-01-02 03:04:05.5+02:00", true) == "2024-01-02 01:04:05.5+00");
  CHECK(normalize_timestamp("2024-01-01 23:30:00-0130", true) == "2024-01-02 01:00:00+00");
  CHECK(normalize_timestamp("2024-03-01 00:30:00+01", true) == "2024-02-29 23:30:00+00");
  CHECK_FALSE(normalize_timestamp("2024-02-30 00:00:00", false).has_value());
  CHECK_FALSE(normalize_timestamp("yesterday", false).has_value());
  CHECK_FALSE(normalize_timestamp("2024-01-02 25:00:00", false).has_value());
}

TEST_CASE("a timestamp already in the normal form comes back as it is") {
  CHECK(normalize_timestamp("2024-02-29 23:59:59.999999", false) == "2024-02-29 23:59:59.999999");
  CHECK(normalize_timestamp("2024-02-29 23:59:59.5", true) == "2024-02-29 23:59:59.5+00");
  CHECK(normalize_timestamp("0000-01-01 00:00:00", false) == "0000-01-01 00:00:00");
  CHECK(normalize_timestamp("2024-01-02 03:04:05.50", false) == "2024-01-02 03:04:05.5");
  CHECK(normalize_timestamp("2024-01-02 03:04:05.", false) == std::nullopt);
  CHECK(normalize_timestamp("2023-02-29 00:00:00", false) == std::nullopt);
  CHECK(normalize_timestamp("2024-01-02 23:60:00", false) == std::nullopt);
  CHECK(normalize_timestamp("2024-01-02 03:04:05.1234560", false) == "2024-01-02 03:04:05.123456");
}

TEST_CASE("dates and times normalise and format") {
  CHECK(normalize_date("2024-01-02") == "2024-01-02");
  CHECK(normalize_date("2024-01-02 00:00:00") == "2024-01-02");
  CHECK(normalize_time("03:04") == "03:04:00");
  CHECK(normalize_time("03:04:05.000100") == "03:04:05.0001");
  CHECK(normalize_time("24:00:00") == "24:00:00");
  CHECK(format_date(0) == "1970-01-01");
  CHECK(format_date(-1) == "1969-12-31");
  CHECK(format_timestamp(-1, false) == "1969-12-31 23:59:59.999999");
  CHECK(format_timestamp(1'700'000'000'000'000, true) == "2023-11-14 22:13:20+00");
  CHECK(format_time(86'400'000'000) == "24:00:00");
  CHECK(micros_from_julian_day(2440587.5) == 0);
}

TEST_CASE("uuids come out lower case with dashes") {
  CHECK(normalize_uuid("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11") ==
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  CHECK(normalize_uuid("{a0eebc999c0b4ef8bb6d6bb9bd380a11}") ==
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  CHECK_FALSE(normalize_uuid("not-a-uuid").has_value());
  const unsigned char raw[16] = {0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
                                 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11};
  CHECK(format_uuid(raw) == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
}

TEST_CASE("cursor values have one text form") {
  using flotilla::schema::value;
  CHECK(cursor_text(value::of_int(-42)) == "-42");
  CHECK(cursor_text(value::of_real(0.1)) == "0.1");
  CHECK(cursor_text(value::of_text("2024-01-02 03:04:05+00")) == "2024-01-02 03:04:05+00");
  CHECK(parse_double(shortest_double(0.1 + 0.2)) == 0.1 + 0.2);
}

TEST_CASE("numbers parse with surrounding spaces, a plus sign and the special doubles") {
  CHECK(parse_int64(" \t42\n") == 42);
  CHECK(parse_int64("+7") == 7);
  CHECK(parse_int64("-9223372036854775808") == std::numeric_limits<std::int64_t>::min());
  CHECK_FALSE(parse_int64("9223372036854775808").has_value());  // out of range
  CHECK(parse_int64("9223372036854775807") == std::numeric_limits<std::int64_t>::max());
  CHECK_FALSE(parse_int64("-9223372036854775809").has_value());
  CHECK_FALSE(parse_int64("10000000000000000000").has_value());  // 20 digits
  CHECK(parse_int64("0012") == 12);
  CHECK(parse_int64("-0") == 0);
  CHECK_FALSE(parse_int64("-").has_value());
  CHECK_FALSE(parse_int64("").has_value());
  CHECK_FALSE(parse_int64("12a").has_value());
  CHECK_FALSE(parse_int64("4 2").has_value());
  CHECK_FALSE(parse_int64("  ").has_value());
  CHECK_FALSE(parse_int64("\xa0" "1").has_value());  // not a space in the C locale
  CHECK(parse_double(" 1.5e3 ") == 1500.0);
  CHECK(parse_double("+0.25") == 0.25);
  CHECK(parse_double("-2") == -2.0);
  CHECK(parse_double("Infinity") == std::numeric_limits<double>::infinity());
  CHECK(parse_double("+inf") == std::numeric_limits<double>::infinity());
  CHECK(parse_double("-Infinity") == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(*parse_double("NaN")));
  CHECK_FALSE(parse_double("1e999").has_value());  // out of range, not infinity
  CHECK_FALSE(parse_double("1.5x").has_value());
  CHECK_FALSE(parse_double("").has_value());
  CHECK_FALSE(parse_double("+").has_value());
}

TEST_CASE("COPY text rows split on tabs and unescape") {
  std::vector<std::pair<std::string, bool>> fields;
  split_copy_row("1\t\\N\ta\\tb\\nc\\\\d\t", [&](std::size_t, std::string_view t, bool null) {
    std::string out;
    unescape_copy(t, out);
    fields.emplace_back(out, null);
  });
  REQUIRE(fields.size() == 4);
  CHECK(fields[0] == std::pair<std::string, bool>{"1", false});
  CHECK(fields[1].second);
  CHECK(fields[2].first == "a\tb\nc\\d");
  CHECK(fields[3] == std::pair<std::string, bool>{"", false});
  std::string out;
  unescape_copy("\\101\\x42\\r", out);
  CHECK(out == "AB\r");
  CHECK(decode_bytea_hex("\\x00ff41") == std::string("\0\xff" "A", 3));
  CHECK_FALSE(decode_bytea_hex("00ff").has_value());
}

TEST_CASE("passwords never appear in a redacted dsn") {
  CHECK(error::redact_dsn("postgresql://shop:s3cret@db.example:5432/shop") ==
        "postgresql://shop:***@db.example:5432/shop");
  CHECK(error::redact_dsn("postgresql://shop@db/shop?password=s3cret&sslmode=require") ==
        "postgresql://shop@db/shop?password=***&sslmode=require");
  CHECK(error::redact_dsn("host=db user=shop password='s3 cret' dbname=shop") ==
        "host=db user=shop password=*** dbname=shop");
  CHECK(error::redact_dsn("host=db password = s3cret") == "host=db password = ***");
  CHECK(error::redact_dsn("postgresql://db/shop") == "postgresql://db/shop");
  // The client key's passphrase is a secret too.
  CHECK(error::redact_dsn("postgresql://u:pw@h/db?sslkey=/k&sslpassword=Key9&sslmode=require") ==
        "postgresql://u:***@h/db?sslkey=/k&sslpassword=***&sslmode=require");
  CHECK(error::redact_dsn("host=h password=x sslpassword='a b' dbname=d") ==
        "host=h password=*** sslpassword=*** dbname=d");
}

namespace {

struct mapping {
  const char* declared;
  portable_type expected;
};

portable_type of(type_kind k) { return portable_type::of(k); }

}  // namespace

TEST_CASE("sqlite declared types map like sqlite affinity, with well-known names exact") {
  const mapping table[] = {
      {"INTEGER", of(type_kind::int32)},          {"INT", of(type_kind::int32)},
      {"BIGINT", of(type_kind::bigint)},          {"SMALLINT", of(type_kind::smallint)},
      {"TINYINT", of(type_kind::smallint)},       {"unsigned big int", of(type_kind::bigint)},
      {"DECIMAL(12,2)", portable_type::decimal(12, 2)},
      {"numeric( 10 , 3 )", portable_type::decimal(10, 3)},
      {"DECIMAL", portable_type::decimal(38, 9)}, {"VARCHAR(20)", portable_type::varchar(20)},
      {"NVARCHAR(5)", portable_type::varchar(5)}, {"CHARACTER(3)", portable_type::varchar(3)},
      {"TEXT", of(type_kind::text)},              {"CLOB", of(type_kind::text)},
      {"BOOLEAN", of(type_kind::boolean)},        {"DATE", of(type_kind::date)},
      {"DATETIME", of(type_kind::timestamp_ntz)}, {"TIMESTAMP", of(type_kind::timestamp_ntz)},
      {"TIMESTAMPTZ", of(type_kind::timestamp_tz)},
      {"timestamp with time zone", of(type_kind::timestamp_tz)},
      {"TIME", of(type_kind::time)},              {"JSON", of(type_kind::json)},
      {"BLOB", of(type_kind::bytes)},             {"UUID", of(type_kind::uuid)},
      {"REAL", of(type_kind::float64)},           {"DOUBLE", of(type_kind::float64)},
      {"FLOAT", of(type_kind::float64)},          {"DOUBLE PRECISION", of(type_kind::float64)},
      // affinity rules for names SQLite does not know
      {"MEDIUMINT UNSIGNED", of(type_kind::bigint)}, {"POINT", of(type_kind::bigint)},
      {"VARYING CHARACTER(255)", portable_type::varchar(255)},
      {"LONGTEXT", of(type_kind::text)},          {"MEDIUMBLOB", of(type_kind::bytes)},
      {"FLOATING", of(type_kind::float64)},       {"MONEY", of(type_kind::text)},
      {"", of(type_kind::text)},
  };
  for (const auto& m : table) {
    INFO(m.declared);
    CHECK(map_sqlite_type(m.declared) == m.expected);
  }
}

TEST_CASE("duckdb types map to portable types") {
  const mapping table[] = {
      {"BOOLEAN", of(type_kind::boolean)},        {"TINYINT", of(type_kind::smallint)},
      {"SMALLINT", of(type_kind::smallint)},      {"INTEGER", of(type_kind::int32)},
      {"BIGINT", of(type_kind::bigint)},          {"UINTEGER", of(type_kind::bigint)},
      {"UBIGINT", portable_type::decimal(20, 0)}, {"HUGEINT", portable_type::decimal(39, 0)},
      {"FLOAT", of(type_kind::float32)},          {"DOUBLE", of(type_kind::float64)},
      {"DECIMAL(18,3)", portable_type::decimal(18, 3)},
      {"VARCHAR", of(type_kind::text)},           {"DATE", of(type_kind::date)},
      {"TIME", of(type_kind::time)},              {"TIMESTAMP", of(type_kind::timestamp_ntz)},
      {"TIMESTAMP_NS", of(type_kind::timestamp_ntz)},
      {"TIMESTAMP WITH TIME ZONE", of(type_kind::timestamp_tz)},
      {"JSON", of(type_kind::json)},              {"UUID", of(type_kind::uuid)},
      {"BLOB", of(type_kind::bytes)},             {"INTEGER[]", of(type_kind::json)},
      {"STRUCT(a INTEGER, b VARCHAR)", of(type_kind::json)},
      {"MAP(VARCHAR, INTEGER)", of(type_kind::json)},
      {"INTERVAL", of(type_kind::text)},          {"TIME WITH TIME ZONE", of(type_kind::text)},
      {"ENUM('a', 'b')", of(type_kind::text)},
  };
  for (const auto& m : table) {
    INFO(m.declared);
    CHECK(map_duckdb_type(m.declared) == m.expected);
  }
}

TEST_CASE("postgres types map to portable types") {
  const mapping table[] = {
      {"boolean", of(type_kind::boolean)},        {"smallint", of(type_kind::smallint)},
      {"integer", of(type_kind::int32)},          {"bigint", of(type_kind::bigint)},
      {"real", of(type_kind::float32)},           {"double precision", of(type_kind::float64)},
      {"numeric(12,2)", portable_type::decimal(12, 2)}, {"numeric", of(type_kind::text)},
      {"character varying(20)", portable_type::varchar(20)},
      {"character varying", of(type_kind::text)}, {"character(3)", portable_type::varchar(3)},
      {"text", of(type_kind::text)},              {"date", of(type_kind::date)},
      {"time without time zone", of(type_kind::time)},
      {"time(3) without time zone", of(type_kind::time)},
      {"time with time zone", of(type_kind::text)},
      {"timestamp without time zone", of(type_kind::timestamp_ntz)},
      {"timestamp(3) without time zone", of(type_kind::timestamp_ntz)},
      {"timestamp with time zone", of(type_kind::timestamp_tz)},
      {"timestamp(0) with time zone", of(type_kind::timestamp_tz)},
      {"json", of(type_kind::json)},              {"jsonb", of(type_kind::json)},
      {"uuid", of(type_kind::uuid)},              {"bytea", of(type_kind::bytes)},
      {"integer[]", of(type_kind::text)},         {"interval", of(type_kind::text)},
      {"money", of(type_kind::text)},
  };
  for (const auto& m : table) {
    INFO(m.declared);
    CHECK(map_postgres_type(m.declared) == m.expected);
  }
}
