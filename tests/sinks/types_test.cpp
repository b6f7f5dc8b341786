// Every portable type written and read back through the engine's own SQL, exactly; and
// live schemas parsed back through the dialect.

#include <limits>

#include "tests/sinks/sink_fixture.hpp"

using namespace flotilla;
using namespace flotilla::sinks;
using namespace flotilla::sinks::testing;

namespace {

schema::table_schema every_type() {
  return cols({
      col("c_bool", "bool"),
      col("c_small", "smallint"),
      col("c_int", "int"),
      col("c_big", "bigint"),
      col("c_float", "float"),
      col("c_double", "double"),
      col("c_dec", "decimal(18,2)"),
      col("c_wide", "decimal(38,10)"),
      col("c_vc", "varchar(20)"),
      col("c_text", "text"),
      col("c_date", "date"),
      col("c_time", "time"),
      col("c_ts", "timestamp_ntz"),
      col("c_tstz", "timestamp_tz"),
      col("c_json", "json"),
      col("c_bytes", "bytes"),
      col("c_uuid", "uuid"),
  });
}

const std::string raw_bytes("a\0b\xff\x01", 5);

/// The wide decimal of the first row: SQLite keeps 15 significant digits of a fraction
/// (it refuses more, see below), the others all 38.
std::string wide_decimal(const std::string& engine) {
  return engine == "sqlite" ? "123456789012.012" : "1234567890123456789012345678.0123456789";
}

std::vector<std::vector<value>> every_type_rows(const std::string& engine) {
  return {
      {B(true), I(-32768), I(-2147483648LL), I(std::numeric_limits<std::int64_t>::min()), R(1.5),
       R(0.1), T("-12.50"), T(wide_decimal(engine)),
       T("h\xc3\xa9llo 'x' \"y\""), T("tab\there\nnew\\line\r end"), T("2024-02-29"),
       T("13:45:30.123456"), T("2024-01-02 03:04:05.123456"), T("2024-01-02 03:04:05.123456+00"),
       T(R"({"a": [1, 2, {"b": null}]})"), T(raw_bytes), T("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")},
      {B(false), I(32767), I(2147483647), I(std::numeric_limits<std::int64_t>::max()), R(-0.25),
       R(-2.5), T("0.00"), T("-0.0000000001"), T(""), T(""), T("1970-01-01"), T("00:00:00"),
       T("1999-12-31 23:59:59"), T("1999-12-31 23:59:59+00"), T("[]"), T(""),
       T("00000000-0000-0000-0000-000000000000")},
      std::vector<value>(17, N()),
  };
}

/// The engine's text for every column, bytes as lower-case hex, NULL as "NULL".
rows_t read_back(warehouse& wh, const dialects::table_ref& t, const std::string& engine) {
  const auto& d = wh.dialect();
  std::string select;
  for (const auto& c : every_type().columns) {
    if (!select.empty())
      select += ", ";
    const std::string q = d.quote(c.name);
    if (c.type.kind == schema::type_kind::bytes)
      select += engine == "postgres" ? "encode(" + q + ", 'hex')"
                                     : "CASE WHEN " + q + " IS NULL THEN NULL ELSE lower(hex(" +
                                           q + ")) END";
    else if (engine == "postgres")
      select += q + "::text";
    else
      select += q;
  }
  return wh.query("SELECT " + select + " FROM " + d.qualified(t) + " ORDER BY " +
                  d.quote("c_small") + " NULLS LAST");
}

std::vector<std::string> expected_row(std::size_t r, const std::string& engine) {
  const std::string t = engine == "sqlite" ? "1" : "true";
  const std::string f = engine == "sqlite" ? "0" : "false";
  if (r == 0)
    return {t, "-32768", "-2147483648", "-9223372036854775808", "1.5", "0.1", "-12.50",
            wide_decimal(engine), "h\xc3\xa9llo 'x' \"y\"",
            "tab\there\nnew\\line\r end", "2024-02-29", "13:45:30.123456",
            "2024-01-02 03:04:05.123456",
            engine == "sqlite" ? "2024-01-02 03:04:05.123456+00:00" : "2024-01-02 03:04:05.123456+00",
            R"({"a": [1, 2, {"b": null}]})", "610062ff01", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"};
  if (r == 1)
    return {f, "32767", "2147483647", "9223372036854775807", "-0.25", "-2.5", "0.00",
            "-0.0000000001", "", "", "1970-01-01", "00:00:00", "1999-12-31 23:59:59",
            engine == "sqlite" ? "1999-12-31 23:59:59+00:00" : "1999-12-31 23:59:59+00", "[]", "",
            "00000000-0000-0000-0000-000000000000"};
  return std::vector<std::string>(17, "NULL");
}

}  // namespace

TEST_CASE("every portable type survives a load exactly, in every load mode") {
  test_target target(GENERATE(from_range(engines())));
  const load_mode mode = GENERATE(load_mode::replace, load_mode::append, load_mode::merge);
  CAPTURE(target.engine(), static_cast<int>(mode));
  auto wh = target.open();
  const auto t = target.table("all_types");
  load(*wh, t, every_type(), mode, every_type_rows(target.engine()), {"c_big"});

  const rows_t got = read_back(*wh, t, target.engine());
  REQUIRE(got.size() == 3);
  for (std::size_t r = 0; r < 3; ++r) {
    const auto want = expected_row(r, target.engine());
    const auto& cols = every_type().columns;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      CAPTURE(r, cols[c].name);
      if (target.engine() == "sqlite" && cols[c].type.kind == schema::type_kind::decimal &&
          got[r][c]) {
        // SQLite stores a DECIMAL(p,s) column's value as a number (NUMERIC affinity):
        // equal in value, not in text. See the [!mayfail] test below and docs/sinks.md.
        CHECK(std::stod(*got[r][c]) == Approx(std::stod(want[c])));
        continue;
      }
      CHECK(got[r][c].value_or("NULL") == want[c]);
    }
  }
}

TEST_CASE("a timestamp with time zone is stored as the instant it names") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("instants");
  load(*wh, t, cols({col("id", "int"), col("at", "timestamp_tz")}), load_mode::replace,
       {{I(1), T("2024-03-10 12:00:00+00")}});
  const auto& d = wh->dialect();
  const std::string at = d.quote("at");
  std::string sql;
  if (target.engine() == "duckdb")
    sql = "SELECT epoch(" + at + ") FROM " + d.qualified(t);
  else if (target.engine() == "postgres")
    sql = "SELECT extract(epoch FROM " + at + ")::bigint FROM " + d.qualified(t);
  else  // SQLite keeps the text, offset included, as its date functions read it
    sql = "SELECT " + at + " || ' ' || unixepoch(" + at + ") FROM " + d.qualified(t);
  const std::string got = wh->query(sql).at(0).at(0).value_or("NULL");
  if (target.engine() == "sqlite")
    CHECK(got == "2024-03-10 12:00:00+00:00 1710072000");
  else
    CHECK(std::stod(got) == 1710072000.0);
}

TEST_CASE("describe reads the live table's types back as the dialect's canonical types") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("all_types");
  load(*wh, t, every_type(), load_mode::replace, {});

  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  const auto want = every_type().columns;
  REQUIRE(live->columns.size() == want.size());
  for (std::size_t c = 0; c < want.size(); ++c) {
    CAPTURE(want[c].name, wh->dialect().physical_type(want[c].type));
    CHECK(live->columns[c].name == want[c].name);
    CHECK(live->columns[c].type == wh->dialect().canonical(want[c].type));
  }
}

TEST_CASE("describe says a table that does not exist is absent") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  CHECK_FALSE(wh->describe(target.table("nothing_here")).has_value());
  CHECK_FALSE(wh->describe(target.table_in("no_such_schema_" + unique_suffix(), "t")).has_value());
}

TEST_CASE("a value that does not fit its column fails the load with the column named") {
  test_target target(GENERATE(as<std::string>{}, "duckdb", "postgres"));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("small");
  const auto s = cols({col("n", "smallint")});
  auto w = wh->begin_load(load_request{t, s, load_mode::replace, {}, std::nullopt});
  CHECK_THROWS_AS(
      [&] {
        w->write(batch({{I(70000)}}));
        w->commit();
      }(),
      sink_error);
}

TEST_CASE("SQLite keeps a decimal's value exactly, or refuses it naming the column") {
  // Under DECIMAL(p,s) (NUMERIC affinity) SQLite turns the text into a number on insert:
  // an INTEGER for a whole number within 64 bits, a REAL (15 digits) for anything else.
  test_target target("sqlite");
  auto wh = target.open();
  const auto t = target.table("money");
  load(*wh, t, cols({col("d", "decimal(38,10)")}), load_mode::replace,
       {{T("-12.5000000000")}, {T("123456789012345678.0000000000")},
        {T("-0.0000000000000000000123")}, {T("12345678901.2345000000")},
        {T("9223372036854775807.0000000000")}, {T("-9223372036854775808.0000000000")}});
  const auto& d = wh->dialect();
  // 19 digits within 64 bits are an INTEGER too.
  CHECK(column_of(wh->query("SELECT CAST(" + d.quote("d") + " AS TEXT) FROM " + d.qualified(t) +
                            " ORDER BY rowid")) ==
        std::vector<std::string>{"-12.5", "123456789012345678", "-1.23e-20", "12345678901.2345",
                                 "9223372036854775807", "-9223372036854775808"});
  CHECK_THROWS_WITH(load(*wh, t, cols({col("d", "decimal(38,10)")}), load_mode::replace,
                         {{T("1.5")}, {T("1234567890123456789012345678.0123456789")}}),
                    Catch::Contains("column \"d\" holds 1234567890123456789012345678.0123456789") &&
                        Catch::Contains("cannot store exactly"));
  CHECK_THROWS_WITH(load(*wh, t, cols({col("d", "decimal(38,10)")}), load_mode::replace,
                         {{T("9223372036854775808.0000000000")}}),
                    Catch::Contains("cannot store exactly"));  // one past 2^63 - 1
  CHECK(column_of(wh->query("SELECT count(*) FROM " + d.qualified(t))) ==
        std::vector<std::string>{"6"});  // the failed loads changed nothing
}

TEST_CASE("DuckDB takes decimals, dates and timestamps in binary and other texts through its cast") {
  // Canonical texts (schema/rows.hpp) go into DuckDB's binary slots; a text in another
  // form, even in the middle of a chunk, goes in as text for DuckDB's own cast, as before.
  test_target target("duckdb");
  auto wh = target.open();
  const auto t = target.table("binary_slots");
  const auto s = cols({col("id", "int"), col("d4", "decimal(4,2)"), col("d9", "decimal(9,3)"),
                       col("d18", "decimal(18,2)"), col("d38", "decimal(38,10)"),
                       col("day", "date"), col("ts", "timestamp_ntz"),
                       col("tstz", "timestamp_tz")});
  std::vector<std::vector<value>> rows;
  // Over two chunks of canonical rows, so the fallback below starts mid-load.
  for (int i = 0; i < 2500; ++i)
    rows.push_back({I(i), T("-99.99"), T("123456.789"), T("-9999999999999999.99"),
                    T("-1234567890123456789012345678.0123456789"), T("0001-01-01"),
                    T("9999-12-31 23:59:59.999999"), T("1970-01-01 00:00:00.5+00")});
  rows.push_back({I(2500), T("1.5e1"), T("-5e-3"), T("+7"), T("12.3"), T("2024-02-29"),
                  T("2024-01-02T03:04:05"), T("2024-01-02 03:04:05+02")});
  rows.push_back({I(2501), T("00.10"), T("0"), T("-0.00"), T("1"), T("2000-01-01"),
                  T("2024-01-02 03:04:05.120"), T("2024-01-02 03:04:05.12+00")});
  rows.push_back({I(2502), N(), N(), N(), N(), N(), N(), N()});
  load(*wh, t, s, load_mode::replace, rows);

  const auto& d = wh->dialect();
  const auto got = wh->query("SELECT * FROM " + d.qualified(t) + " WHERE " + d.quote("id") +
                             " IN (0, 2499, 2500, 2501, 2502) ORDER BY " + d.quote("id"));
  REQUIRE(got.size() == 5);
  const std::vector<std::string> canonical{"-99.99", "123456.789", "-9999999999999999.99",
                                           "-1234567890123456789012345678.0123456789",
                                           "0001-01-01", "9999-12-31 23:59:59.999999",
                                           "1970-01-01 00:00:00.5+00"};
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < canonical.size(); ++c) {
      CAPTURE(r, c);
      CHECK(got[r][c + 1].value_or("NULL") == canonical[c]);
    }
  const std::vector<std::string> cast{"15.00", "-0.005", "7.00", "12.3000000000", "2024-02-29",
                                      "2024-01-02 03:04:05", "2024-01-02 01:04:05+00"};
  const std::vector<std::string> plain{"0.10", "0.000", "0.00", "1.0000000000", "2000-01-01",
                                       "2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12+00"};
  for (std::size_t c = 0; c < cast.size(); ++c) {
    CAPTURE(c);
    CHECK(got[2][c + 1].value_or("NULL") == cast[c]);
    CHECK(got[3][c + 1].value_or("NULL") == plain[c]);
    CHECK_FALSE(got[4][c + 1].has_value());
  }
  CHECK(count(*wh, t) == 2503);
}

TEST_CASE("DuckDB refuses a decimal with more fractional digits than its column keeps, "
          "instead of rounding it") {
  // A PostgreSQL numeric(60,40) lands as DECIMAL(38,38): DuckDB's cast from text would
  // round its 39th and 40th digits away.
  test_target target("duckdb");
  auto wh = target.open();
  const auto t = target.table("scale_capped");
  const auto s = cols({col("id", "int"), col("w", "decimal(38,38)")});
  // Zeros past the scale lose nothing: taken.
  load(*wh, t, s, load_mode::replace,
       {{I(1), T("0.12345678901234567890123456789012345678")},
        {I(2), T("0.500000000000000000000000000000000000000000")}});
  const auto& d = wh->dialect();
  CHECK(column_of(wh->query("SELECT CAST(" + d.quote("w") + " AS VARCHAR) FROM " +
                            d.qualified(t) + " ORDER BY " + d.quote("id"))) ==
        std::vector<std::string>{".12345678901234567890123456789012345678",  // DuckDB's text
                                 ".50000000000000000000000000000000000000"});
  CHECK_THROWS_WITH(
      load(*wh, t, s, load_mode::replace,
           {{I(1), T("0.5")}, {I(2), T("0.1234567890123456789012345678901234567891")}}),
      Catch::Contains("row 2: column \"w\" holds 0.1234567890123456789012345678901234567891") &&
          Catch::Contains("cannot store exactly") && Catch::Contains("columns = { w = \"text\" }"));
  CHECK(count(*wh, t) == 2);  // the failed load changed nothing
}

TEST_CASE("a decimal wider than its DuckDB column fails the load") {
  test_target target("duckdb");
  auto wh = target.open();
  const auto t = target.table("narrow_decimal");
  auto w = wh->begin_load(
      load_request{t, cols({col("d", "decimal(4,2)")}), load_mode::replace, {}, std::nullopt});
  CHECK_THROWS_AS(
      [&] {
        w->write(batch({{T("12.34")}, {T("123.45")}}));
        w->commit();
      }(),
      sink_error);
}

TEST_CASE("a DuckDB load refused by DuckDB's cast names the value refused, not the first "
          "value that went to the cast") {
  // '-infinity' is not a canonical timestamp: from it on the column goes in as text, which
  // DuckDB's cast takes. The year 294276 is past DuckDB's range: that is the value to name.
  test_target target("duckdb");
  auto wh = target.open();
  const auto t = target.table("cast_refused");
  const auto s = cols({col("id", "int"), col("ts", "timestamp_ntz")});
  CHECK_THROWS_WITH(
      load(*wh, t, s, load_mode::replace,
           {{I(1), T("2024-01-01 00:00:00")},
            {I(2), T("-infinity")},
            {I(3), T("0001-01-01 00:00:00")},
            {I(4), T("294276-12-31 23:59:59")}}),
      Catch::Contains("column \"ts\" holds a value its type cannot hold (TIMESTAMP: out of") &&
          Catch::Contains("row 4: value '294276-12-31 23:59:59'") &&
          !Catch::Contains("-infinity") && Catch::Contains("columns = { ts = \"text\" }") &&
          // DuckDB's words for it (the text it went in as, a column number) are left out.
          !Catch::Contains("got VARCHAR") && !Catch::Contains("for column 1"));
  // Without a value out of range, the same texts load.
  load(*wh, t, s, load_mode::replace,
       {{I(1), T("2024-01-01 00:00:00")}, {I(2), T("-infinity")}, {I(3), T("0001-01-01")}});
  CHECK(count(*wh, t) == 3);
}
