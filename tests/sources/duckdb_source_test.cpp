// The duckdb adapter against real DuckDB files.

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "sources/source.hpp"
#include "tests/sources/support.hpp"

using namespace flotilla::sources;
using namespace flotilla::sources::testing;
using flotilla::schema::portable_type;
using flotilla::schema::type_kind;
using flotilla::schema::value;

namespace {

std::unique_ptr<source> open_duckdb(const std::string& path) {
  source_options o;
  o.name = "lake";
  o.adapter = "duckdb";
  o.path = path;
  return open_source(o);
}

}  // namespace

TEST_CASE("the duckdb catalog lists tables and views of every schema with portable types") {
  temp_dir dir;
  const auto db = dir.file("lake.duckdb");
  duckdb_exec(db, R"(
    CREATE SCHEMA sales;
    CREATE TABLE sales.orders (
      id INTEGER PRIMARY KEY, customer BIGINT NOT NULL, qty SMALLINT, tiny TINYINT,
      total DECIMAL(12,2), big DECIMAL(38,10), name VARCHAR, paid BOOLEAN, day DATE, t TIME,
      ts TIMESTAMP, at_ns TIMESTAMP_NS, at_tz TIMESTAMPTZ, doc JSON, raw BLOB, ref UUID,
      ratio FLOAT, weight DOUBLE, huge HUGEINT, ubig UBIGINT, tags VARCHAR[],
      props STRUCT(a INTEGER, b VARCHAR), span INTERVAL);
    CREATE TABLE main.lines (order_id INTEGER, line INTEGER, PRIMARY KEY (order_id, line));
    CREATE VIEW sales.big_orders AS SELECT id, total FROM sales.orders;
  )");
  auto src = open_duckdb(db);
  CHECK(src->adapter() == "duckdb");
  const catalog cat = src->read_catalog();
  REQUIRE(cat.tables.size() == 3);
  const auto& lines = find_table(cat, "main.lines");
  CHECK(lines.columns.key() == std::vector<std::string>{"order_id", "line"});
  CHECK(find_table(cat, "sales.big_orders").columns.columns.size() == 2);
  // A view has no change marker (what it reads may change while the file does not): it is
  // never pruned. The tables have one.
  CHECK_FALSE(find_table(cat, "sales.big_orders").marker.has_value());
  CHECK(lines.marker.has_value());

  const auto& orders = find_table(cat, "sales.orders");
  CHECK(orders.schema == "sales");
  CHECK(orders.marker.has_value());
  const std::vector<std::pair<std::string, portable_type>> expected{
      {"id", portable_type::of(type_kind::int32)},
      {"customer", portable_type::of(type_kind::bigint)},
      {"qty", portable_type::of(type_kind::smallint)},
      {"tiny", portable_type::of(type_kind::smallint)},
      {"total", portable_type::decimal(12, 2)},
      {"big", portable_type::decimal(38, 10)},
      {"name", portable_type::of(type_kind::text)},
      {"paid", portable_type::of(type_kind::boolean)},
      {"day", portable_type::of(type_kind::date)},
      {"t", portable_type::of(type_kind::time)},
      {"ts", portable_type::of(type_kind::timestamp_ntz)},
      {"at_ns", portable_type::of(type_kind::timestamp_ntz)},
      {"at_tz", portable_type::of(type_kind::timestamp_tz)},
      {"doc", portable_type::of(type_kind::json)},
      {"raw", portable_type::of(type_kind::bytes)},
      {"ref", portable_type::of(type_kind::uuid)},
      {"ratio", portable_type::of(type_kind::float32)},
      {"weight", portable_type::of(type_kind::float64)},
      {"huge", portable_type::decimal(39, 0)},
      {"ubig", portable_type::decimal(20, 0)},
      {"tags", portable_type::of(type_kind::json)},
      {"props", portable_type::of(type_kind::json)},
      {"span", portable_type::of(type_kind::text)},
  };
  REQUIRE(orders.columns.columns.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].first);
    CHECK(orders.columns.columns[i].name == expected[i].first);
    CHECK(orders.columns.columns[i].type == expected[i].second);
  }
  CHECK(orders.columns.key() == std::vector<std::string>{"id"});
  CHECK_FALSE(find_column(orders, "customer").nullable);
  CHECK(find_column(orders, "qty").nullable);
}

TEST_CASE("duckdb values come out exactly as the portable types represent them") {
  temp_dir dir;
  const auto db = dir.file("values.duckdb");
  duckdb_exec(db, R"(
    CREATE TABLE v (id INTEGER, total DECIMAL(12,2), big DECIMAL(38,10), small DECIMAL(4,1),
                    paid BOOLEAN, day DATE, t TIME, ts TIMESTAMP, at_ns TIMESTAMP_NS,
                    at_tz TIMESTAMPTZ, name VARCHAR, raw BLOB, ref UUID, doc JSON,
                    ratio FLOAT, weight DOUBLE, huge HUGEINT, ubig UBIGINT, tags INTEGER[],
                    props STRUCT(a INTEGER, b VARCHAR), tiny TINYINT, u32 UINTEGER);
    INSERT INTO v VALUES
      (1, 12.5, 12345678901234567890.0123456789, -0.5, true, DATE '2024-01-02',
       TIME '03:04:05.25', TIMESTAMP '2024-01-02 03:04:05.123456',
       TIMESTAMP_NS '2024-01-02 03:04:05.123456789', TIMESTAMPTZ '2024-01-02 03:04:05.5+02',
       'ünïcødé ✓ 日本, longer than twelve bytes', '\x00\xFF\x00'::BLOB,
       'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"a":[1,2]}', 1.1, 0.1,
       170141183460469231731687303715884105727, 18446744073709551615, [1, 2, NULL],
       {'a': 1, 'b': 'x'}, -128, 4294967295),
      (2, -1234567890.99, -0.0000000001, 999.9, false, DATE '1969-12-31', TIME '00:00:00',
       TIMESTAMP '1969-12-31 23:59:59.999999', NULL, TIMESTAMPTZ '2024-06-30 23:59:59+00',
       'short', ''::BLOB, NULL, NULL, -2.5, -1e300, -1, 0, [], NULL, 0, 0),
      (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  )");
  auto src = open_duckdb(db);
  const catalog cat = src->read_catalog();
  const auto r = read_all(*src, find_table(cat, "v"));
  REQUIRE(r.rows.size() == 3);

  const auto& a = r.rows[0];
  CHECK(a[0] == integer(1));
  CHECK(a[1] == text("12.50"));
  CHECK(a[2] == text("12345678901234567890.0123456789"));
  CHECK(a[3] == text("-0.5"));
  CHECK(a[4] == boolean(true));
  CHECK(a[5] == text("2024-01-02"));
  CHECK(a[6] == text("03:04:05.25"));
  CHECK(a[7] == text("2024-01-02 03:04:05.123456"));
  CHECK(a[8] == text("2024-01-02 03:04:05.123456"));  // nanoseconds truncate to micros
  CHECK(a[9] == text("2024-01-02 01:04:05.5+00"));
  CHECK(a[10] == text("ünïcødé ✓ 日本, longer than twelve bytes"));
  CHECK(a[11] == text(std::string("\0\xff\0", 3)));
  CHECK(a[12] == text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
  CHECK(a[13] == text("{\"a\":[1,2]}"));
  CHECK(a[14] == real(static_cast<double>(1.1f)));
  CHECK(a[15] == real(0.1));
  CHECK(a[16] == text("170141183460469231731687303715884105727"));
  CHECK(a[17] == text("18446744073709551615"));
  CHECK(a[18] == text("[1,2,null]"));
  CHECK(a[19] == text("{\"a\":1,\"b\":\"x\"}"));
  CHECK(a[20] == integer(-128));
  CHECK(a[21] == integer(4294967295));

  const auto& b = r.rows[1];
  CHECK(b[1] == text("-1234567890.99"));
  CHECK(b[2] == text("-0.0000000001"));
  CHECK(b[3] == text("999.9"));
  CHECK(b[4] == boolean(false));
  CHECK(b[5] == text("1969-12-31"));
  CHECK(b[6] == text("00:00:00"));
  CHECK(b[7] == text("1969-12-31 23:59:59.999999"));
  CHECK(b[9] == text("2024-06-30 23:59:59+00"));
  CHECK(b[10] == text("short"));
  CHECK(b[11] == text(""));
  CHECK(b[14] == real(-2.5));
  CHECK(b[15] == real(-1e300));
  CHECK(b[16] == text("-1"));
  CHECK(b[18] == text("[]"));

  for (std::size_t i = 1; i < r.rows[2].size(); ++i) {
    INFO("column " << i);
    CHECK(r.rows[2][i] == null());
  }
}

TEST_CASE("a duckdb read casts to a contract type exactly") {
  temp_dir dir;
  const auto db = dir.file("contract.duckdb");
  duckdb_exec(db, R"(
    CREATE TABLE t (amount DOUBLE, n VARCHAR, ts TIMESTAMP, d DECIMAL(10,4));
    INSERT INTO t VALUES (2.675, '42', TIMESTAMP '2024-01-02 03:04:05', 1.2345);
  )");
  auto src = open_duckdb(db);
  const catalog cat = src->read_catalog();
  read_request req;
  req.table = &find_table(cat, "t");
  req.columns.columns = {{"amount", portable_type::decimal(18, 2)},
                         {"n", portable_type::of(type_kind::bigint)},
                         {"ts", portable_type::of(type_kind::timestamp_tz)},
                         {"d", portable_type::decimal(12, 2)},
                         {"amount", portable_type::of(type_kind::text)}};
  std::vector<value> row;
  src->read(req, [&](flotilla::schema::row_batch&& b) {
    for (std::size_t c = 0; c < b.width; ++c)
      row.push_back(b.at(0, c));
    return true;
  });
  REQUIRE(row.size() == 5);
  CHECK(row[0] == text("2.68"));
  CHECK(row[1] == integer(42));
  CHECK(row[2] == text("2024-01-02 03:04:05+00"));
  CHECK(row[3] == text("1.23"));
  CHECK(row[4] == text("2.675"));
}

TEST_CASE("an incremental duckdb read returns rows after the watermark in cursor order") {
  temp_dir dir;
  const auto db = dir.file("inc.duckdb");
  duckdb_exec(db, R"(
    CREATE TABLE events (id INTEGER, updated_at TIMESTAMPTZ, amount DECIMAL(8,2), what VARCHAR);
    INSERT INTO events VALUES
      (1, '2024-01-03 00:00:00+00', 3.00, 'c'), (2, '2024-01-01 00:00:00+00', 1.00, 'a'),
      (3, '2024-01-02 00:00:00.5+00', 2.50, 'b'), (4, NULL, NULL, 'no cursor');
  )");
  auto src = open_duckdb(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "events");

  auto first = read_all(*src, t, {"id"}, "updated_at");
  CHECK(first.rows.size() == 4);
  CHECK(first.result.max_cursor == "2024-01-03 00:00:00+00");
  auto next = read_all(*src, t, {"id", "what"}, "updated_at", "2024-01-01 00:00:00+00");
  REQUIRE(next.rows.size() == 2);
  CHECK(next.rows[0][1] == text("b"));
  CHECK(next.rows[1][1] == text("c"));
  CHECK(next.result.max_cursor == "2024-01-03 00:00:00+00");
  CHECK(read_all(*src, t, {"id"}, "updated_at", *next.result.max_cursor).rows.empty());

  auto by_amount = read_all(*src, t, {"what"}, "amount", "1.00");
  REQUIRE(by_amount.rows.size() == 2);
  CHECK(by_amount.result.max_cursor == "3.00");
}

TEST_CASE("a duckdb TIMESTAMP_NS cursor keeps its nanoseconds in the watermark, so the last "
          "row is not read again") {
  temp_dir dir;
  const auto db = dir.file("ns.duckdb");
  duckdb_exec(db, R"(
    CREATE TABLE evs (ts TIMESTAMP_NS, v VARCHAR);
    INSERT INTO evs VALUES ('2024-01-01 00:00:00.123456789', 'a'),
                           ('2024-01-01 00:00:00.123456788', 'b');
  )");
  auto src = open_duckdb(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "evs");
  for (const std::vector<std::string>& columns :
       {std::vector<std::string>{"ts", "v"}, std::vector<std::string>{"v"}}) {
    CAPTURE(columns.size());
    auto first = read_all(*src, t, columns, "ts");
    REQUIRE(first.rows.size() == 2);
    if (columns.size() == 2)  // loaded truncated to the microsecond, as documented
      CHECK(first.rows[1][0] == text("2024-01-01 00:00:00.123456"));
    CHECK(first.result.max_cursor == "2024-01-01 00:00:00.123456789");
    CHECK(read_all(*src, t, columns, "ts", *first.result.max_cursor).rows.empty());
    // A row a nanosecond later is past it.
    auto past = read_all(*src, t, columns, "ts", "2024-01-01 00:00:00.123456788");
    REQUIRE(past.rows.size() == 1);
    CHECK(past.rows[0].back() == text("a"));
  }
}

TEST_CASE("duckdb nested values are valid JSON: null elements, and non-finite doubles as "
          "strings") {
  temp_dir dir;
  const auto db = dir.file("nested.duckdb");
  duckdb_exec(db, R"(
    CREATE TABLE j (id INTEGER, jl JSON[], s STRUCT(d DOUBLE, t VARCHAR), l DOUBLE[]);
    INSERT INTO j VALUES
      (1, ['{"a":1}'::JSON, NULL], {'d': 'nan', 't': 'NaN"x:Infinity'}, [1.5, 'inf'::DOUBLE, '-inf'::DOUBLE]),
      (2, NULL, {'d': 2.5, 't': NULL}, []);
  )");
  auto src = open_duckdb(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "j");
  CHECK(find_column(t, "jl").type == portable_type::of(type_kind::json));
  const auto r = read_all(*src, t, {"jl", "s", "l"});
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0][0] == text(R"([{"a":1},null])"));
  // A string that spells NaN stays as it is; only the bare doubles become strings.
  CHECK(r.rows[0][1] == text(R"({"d":"NaN","t":"NaN\"x:Infinity"})"));
  CHECK(r.rows[0][2] == text(R"([1.5,"Infinity","-Infinity"])"));
  CHECK(r.rows[1][0] == null());
  CHECK(r.rows[1][1] == text(R"({"d":2.5,"t":null})"));
  CHECK(r.rows[1][2] == text("[]"));
}

TEST_CASE("duckdb rows arrive in batches of batch_rows across vector boundaries") {
  temp_dir dir;
  const auto db = dir.file("batches.duckdb");
  duckdb_exec(db, "CREATE TABLE n AS SELECT i, i::VARCHAR AS s FROM range(10000) t(i);");
  auto src = open_duckdb(db);
  const catalog cat = src->read_catalog();
  auto r = read_all(*src, find_table(cat, "n"), {}, "i", std::nullopt, 3000);
  CHECK(r.batches == 4);
  REQUIRE(r.rows.size() == 10000);
  for (std::size_t i = 0; i < r.rows.size(); ++i)
    if (r.rows[i][0] != integer(static_cast<std::int64_t>(i)) ||
        r.rows[i][1] != text(std::to_string(i)))
      FAIL("row " << i << " out of order or wrong");
  CHECK(r.result.max_cursor == "9999");
  CHECK(r.result.rows == 10000);
}

TEST_CASE("the duckdb marker stays the same without a write and changes after one") {
  temp_dir dir;
  const auto db = dir.file("marker.duckdb");
  duckdb_exec(db, "CREATE TABLE a (x INTEGER); CREATE TABLE b (y INTEGER); INSERT INTO a VALUES (1);");
  auto marker = [&](const std::string& table) {
    auto src = open_duckdb(db);
    auto cat = src->read_catalog();
    return cat.find(table)->marker;
  };
  const auto a1 = marker("a");
  const auto b1 = marker("b");
  REQUIRE(a1.has_value());
  CHECK(marker("a") == a1);
  CHECK(a1 != b1);

  duckdb_exec(db, "UPDATE a SET x = 2;");
  const auto a2 = marker("a");
  CHECK(a2 != a1);
  CHECK(marker("b") != b1);  // file-level: every table's marker moves
  CHECK(marker("a") == a2);

  duckdb_exec(db, "ALTER TABLE b ADD COLUMN z VARCHAR;");
  CHECK(marker("b") != b1);
}

TEST_CASE("hostile duckdb schema, table and column names are quoted") {
  temp_dir dir;
  const auto db = dir.file("hostile.duckdb");
  duckdb_exec(db, R"(
    CREATE SCHEMA "s ""1""; x";
    CREATE TABLE "s ""1""; x"."we""ird; DROP TABLE y; --" ("a ""b""; c" INTEGER, "select" VARCHAR);
    INSERT INTO "s ""1""; x"."we""ird; DROP TABLE y; --" VALUES (1, 'from'), (2, 'where');
    CREATE TABLE y (keep INTEGER);
  )");
  auto src = open_duckdb(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "s \"1\"; x.we\"ird; DROP TABLE y; --");
  auto r = read_all(*src, t, {"select", "a \"b\"; c"}, "a \"b\"; c", "1");
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0] == std::vector<value>{text("where"), integer(2)});
  CHECK(src->read_catalog().find("main.y") != nullptr);
}

TEST_CASE("duckdb read errors name the source, table and file") {
  temp_dir dir;
  const auto db = dir.file("err.duckdb");
  duckdb_exec(db, "CREATE TABLE t (x INTEGER);");
  auto src = open_duckdb(db);
  const catalog cat = src->read_catalog();
  source_table gone = find_table(cat, "t");
  gone.name = "missing";
  CHECK_THROWS_WITH(read_all(*src, gone),
                    Catch::Contains("table 'main.missing' of source 'lake'") &&
                        Catch::Contains("err.duckdb") && Catch::Contains("missing"));
  write_file(dir.file("junk.duckdb"), std::string(8192, 'x'));
  auto junk = open_duckdb(dir.file("junk.duckdb"));
  CHECK_THROWS_WITH(junk->read_catalog(),
                    Catch::Contains("source 'lake'") && Catch::Contains("junk.duckdb") &&
                        Catch::Contains("the file is not a DuckDB database"));
  // A CSV file given to the duckdb adapter: said so, with the adapter that reads it.
  write_file(dir.file("rows.csv"), "id,v\n1,a\n");
  auto csv = open_duckdb(dir.file("rows.csv"));
  CHECK_THROWS_WITH(csv->read_catalog(), Catch::Contains("the file is not a DuckDB database") &&
                                             Catch::Contains("adapter = \"csv\"") &&
                                             !Catch::Contains("in-memory"));
  // A damaged file: its reason and what to do, without DuckDB's stack trace or the advice
  // meant for a file another process holds.
  {
    std::string bytes;
    {
      std::ifstream in(db, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    REQUIRE(bytes.size() > 8200);
    bytes[4200] ^= 0x5a;  // inside the first database header, under its checksum
    bytes[8200] ^= 0x5a;  // and the second
    write_file(dir.file("damaged.duckdb"), bytes);
  }
  auto damaged = open_duckdb(dir.file("damaged.duckdb"));
  try {
    (void)damaged->read_catalog();
    FAIL("a damaged file was read");
  } catch (const std::exception& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("damaged.duckdb"));
    CHECK_THAT(message, !Catch::Contains("Stack Trace"));
    CHECK_THAT(message, !Catch::Contains("open for writing"));
  }
}
