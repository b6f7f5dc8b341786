// The postgres adapter against the real test server (FLOTILLA_PG_DSN). Each test works in
// a schema of its own, so concurrent runs on the shared server never meet.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>
#include <tuple>

#include <fmt/core.h>
#include <unistd.h>

#include "sources/source.hpp"
#include "tests/sources/support.hpp"

using namespace flotilla::sources;
using namespace flotilla::sources::testing;
using flotilla::schema::portable_type;
using flotilla::schema::type_kind;
using flotilla::schema::value;

namespace {

std::unique_ptr<source> open_pg(const std::string& dsn, const std::string& name = "shop") {
  source_options o;
  o.name = name;
  o.adapter = "postgres";
  o.dsn = dsn;
  return open_source(o);
}

portable_type of(type_kind k) { return portable_type::of(k); }

/// The test server's DSN, connecting as `role` instead.
std::string dsn_as(const std::string& dsn, const std::string& role) {
  std::string out;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), nullptr);
  REQUIRE(options != nullptr);
  for (auto* o = options; o->keyword; ++o)
    if (o->val && std::string(o->keyword) != "user")
      out += std::string(o->keyword) + "='" + o->val + "' ";
  PQconninfoFree(options);
  return out + "user=" + role;
}

}  // namespace

TEST_CASE("the postgres catalog lists every user table with portable types and its key") {
  pg_schema s;
  s.exec(R"(
    CREATE DOMAIN positive_money AS numeric(10,2) NOT NULL CHECK (VALUE > 0);
    CREATE DOMAIN refund_money AS positive_money CHECK (VALUE < 1000);
    CREATE DOMAIN short_code AS varchar(8);
    CREATE DOMAIN sku_code AS short_code;
    CREATE TABLE orders (
      id integer PRIMARY KEY, customer bigint NOT NULL, qty smallint, total numeric(12,2),
      loose numeric, code varchar(20), note text, flag char(3), paid boolean, day date,
      t time, at timestamp, at_tz timestamptz, doc json, docb jsonb, raw bytea, ref uuid,
      ratio real, weight double precision, tags integer[], span interval, price positive_money,
      refund refund_money, sku sku_code);
    CREATE TABLE lines (order_id integer, line integer, sku text, PRIMARY KEY (order_id, line));
    CREATE VIEW big_orders AS SELECT id, total FROM orders;
    CREATE TABLE events (id bigint, at date) PARTITION BY RANGE (at);
    CREATE TABLE events_2024 PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
  )");
  auto src = open_pg(s.dsn());
  CHECK(src->adapter() == "postgres");
  const catalog cat = src->read_catalog();
  const auto& orders = find_table(cat, s.name() + ".orders");
  CHECK(orders.schema == s.name());
  CHECK(orders.marker.has_value());
  CHECK_FALSE(orders.inferred);
  const std::vector<std::pair<std::string, portable_type>> expected{
      {"id", of(type_kind::int32)},
      {"customer", of(type_kind::bigint)},
      {"qty", of(type_kind::smallint)},
      {"total", portable_type::decimal(12, 2)},
      {"loose", of(type_kind::text)},
      {"code", portable_type::varchar(20)},
      {"note", of(type_kind::text)},
      {"flag", portable_type::varchar(3)},
      {"paid", of(type_kind::boolean)},
      {"day", of(type_kind::date)},
      {"t", of(type_kind::time)},
      {"at", of(type_kind::timestamp_ntz)},
      {"at_tz", of(type_kind::timestamp_tz)},
      {"doc", of(type_kind::json)},
      {"docb", of(type_kind::json)},
      {"raw", of(type_kind::bytes)},
      {"ref", of(type_kind::uuid)},
      {"ratio", of(type_kind::float32)},
      {"weight", of(type_kind::float64)},
      {"tags", of(type_kind::text)},
      {"span", of(type_kind::text)},
      {"price", portable_type::decimal(10, 2)},
      {"refund", portable_type::decimal(10, 2)},  // a domain over a domain: its base type
      {"sku", portable_type::varchar(8)},
  };
  REQUIRE(orders.columns.columns.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].first);
    CHECK(orders.columns.columns[i].name == expected[i].first);
    CHECK(orders.columns.columns[i].type == expected[i].second);
  }
  CHECK(orders.columns.key() == std::vector<std::string>{"id"});
  CHECK_FALSE(find_column(orders, "customer").nullable);
  CHECK_FALSE(find_column(orders, "price").nullable);  // NOT NULL from the domain
  CHECK_FALSE(find_column(orders, "refund").nullable);  // ... from the domain under it
  CHECK(find_column(orders, "qty").nullable);

  CHECK(find_table(cat, s.name() + ".lines").columns.key() ==
        std::vector<std::string>{"order_id", "line"});
  const auto& view = find_table(cat, s.name() + ".big_orders");
  CHECK(view.columns.columns.size() == 2);
  CHECK_FALSE(view.marker.has_value());  // a view has no statistics: always copied
  // A partitioned table is one table; its partitions are not listed on their own.
  CHECK(cat.find(s.name() + ".events") != nullptr);
  CHECK(cat.find(s.name() + ".events_2024") == nullptr);
  for (const auto& t : cat.tables)
    CHECK_FALSE((t.schema == "pg_catalog" || t.schema == "information_schema"));
}

TEST_CASE("the postgres catalog leaves out Flotilla's own schema (the DDL log, bookkeeping)") {
  pg_schema s;
  const std::string own = "_flotilla.probe_" + s.name();
  s.exec("CREATE SCHEMA IF NOT EXISTS _flotilla; CREATE TABLE " + own + " (id int)");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  s.exec("DROP TABLE " + own);
  for (const auto& t : cat.tables)
    CHECK(t.schema != "_flotilla");
}

TEST_CASE("postgres values come out exactly as the portable types represent them") {
  pg_schema s;
  s.exec(R"(
    CREATE TABLE v (id integer, total numeric(12,2), big numeric(38,10), paid boolean,
                    day date, t time, at timestamp, at_tz timestamptz, name text,
                    code varchar(10), raw bytea, ref uuid, doc json, docb jsonb,
                    ratio real, weight double precision, n bigint, tags integer[], span interval);
    INSERT INTO v VALUES
      (1, 12.5, 12345678901234567890.0123456789, true, '2024-01-02', '03:04:05.25',
       '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.5+02',
       E'ünïcødé ✓ 日本 tab\there nl\nhere back\\slash cr\rend', 'short', '\x00ff00'::bytea,
       'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"a": [1, 2]}', '{"b": 1, "a": 2}',
       1.1, 0.1, 9007199254740993, '{1,2,NULL}', '1 day 02:00:00'),
      (2, -1234567890.99, -0.0000000001, false, '1969-12-31', '00:00:00',
       '1969-12-31 23:59:59.999999', '2024-06-30 23:59:59-01', '', '', ''::bytea, NULL, NULL,
       NULL, -2.5, -1e300, -1, '{}', '00:00:00'),
      (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL);
  )");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  const auto r = read_all(*src, find_table(cat, s.name() + ".v"), {}, "id");
  REQUIRE(r.rows.size() == 3);
  CHECK(r.result.max_cursor == "3");

  const auto& a = r.rows[0];
  CHECK(a[0] == integer(1));
  CHECK(a[1] == text("12.50"));
  CHECK(a[2] == text("12345678901234567890.0123456789"));
  CHECK(a[3] == boolean(true));
  CHECK(a[4] == text("2024-01-02"));
  CHECK(a[5] == text("03:04:05.25"));
  CHECK(a[6] == text("2024-01-02 03:04:05.123456"));
  CHECK(a[7] == text("2024-01-02 01:04:05.5+00"));
  CHECK(a[8] == text("ünïcødé ✓ 日本 tab\there nl\nhere back\\slash cr\rend"));
  CHECK(a[9] == text("short"));
  CHECK(a[10] == text(std::string("\0\xff\0", 3)));
  CHECK(a[11] == text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
  CHECK(a[12] == text("{\"a\": [1, 2]}"));
  CHECK(a[13] == text("{\"a\": 2, \"b\": 1}"));
  CHECK(a[14] == real(static_cast<double>(1.1f)));
  CHECK(a[15] == real(0.1));
  CHECK(a[16] == integer(9007199254740993));
  CHECK(a[17] == text("{1,2,NULL}"));
  CHECK(a[18] == text("1 day 02:00:00"));

  const auto& b = r.rows[1];
  CHECK(b[1] == text("-1234567890.99"));
  CHECK(b[2] == text("-0.0000000001"));
  CHECK(b[3] == boolean(false));
  CHECK(b[4] == text("1969-12-31"));
  CHECK(b[5] == text("00:00:00"));
  CHECK(b[6] == text("1969-12-31 23:59:59.999999"));
  CHECK(b[7] == text("2024-07-01 00:59:59+00"));
  CHECK(b[8] == text(""));
  CHECK(b[10] == text(""));
  CHECK(b[14] == real(-2.5));
  CHECK(b[15] == real(-1e300));

  for (std::size_t i = 1; i < r.rows[2].size(); ++i) {
    INFO("column " << i);
    CHECK(r.rows[2][i] == null());
  }
}

TEST_CASE("postgres integers read exactly up to the limits of their types") {
  pg_schema s;
  s.exec(R"(
    CREATE TABLE n (id integer, s smallint, i integer, b bigint);
    INSERT INTO n VALUES
      (1, -32768, -2147483648, -9223372036854775808),
      (2, 32767, 2147483647, 9223372036854775807),
      (3, 0, -1, 1000000000000000000),
      (4, -7, 10, -999999999999999999);
  )");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  const auto r = read_all(*src, find_table(cat, s.name() + ".n"), {}, "id");
  REQUIRE(r.rows.size() == 4);
  using lim = std::numeric_limits<std::int64_t>;
  CHECK(r.rows[0] == std::vector<value>{integer(1), integer(-32768), integer(-2147483648LL), integer(lim::min())});
  CHECK(r.rows[1] == std::vector<value>{integer(2), integer(32767), integer(2147483647), integer(lim::max())});
  CHECK(r.rows[2] == std::vector<value>{integer(3), integer(0), integer(-1), integer(1000000000000000000)});
  CHECK(r.rows[3] == std::vector<value>{integer(4), integer(-7), integer(10), integer(-999999999999999999)});
}

TEST_CASE("a postgres read casts to a contract type exactly") {
  pg_schema s;
  s.exec(R"(
    CREATE TABLE t (amount double precision, n text, at timestamp, loose numeric, note text);
    INSERT INTO t VALUES (2.675, '42', '2024-01-02 03:04:05', 1.23456789012345678901, 'a\b');
  )");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  read_request req;
  req.table = &find_table(cat, s.name() + ".t");
  req.columns.columns = {{"amount", portable_type::decimal(18, 2)},
                         {"n", of(type_kind::bigint)},
                         {"at", of(type_kind::timestamp_tz)},
                         {"loose", of(type_kind::text)},
                         {"note", of(type_kind::bytes)}};
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
  CHECK(row[3] == text("1.23456789012345678901"));
  CHECK(row[4] == text("a\\b"));
}

TEST_CASE("a postgres real or double read as text keeps its own digits") {
  pg_schema s;
  s.exec("CREATE TABLE f (r real, d double precision); "
         "INSERT INTO f VALUES ('3.4e38', 'NaN'), (0.1, 1.5);");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  read_request req;
  req.table = &find_table(cat, s.name() + ".f");
  req.columns.columns = {{"r", of(type_kind::text)}, {"d", of(type_kind::text)}};
  std::vector<value> cells;
  src->read(req, [&](flotilla::schema::row_batch&& b) {
    for (std::size_t i = 0; i < b.rows(); ++i)
      for (std::size_t c = 0; c < b.width; ++c)
        cells.push_back(b.at(i, c));
    return true;
  });
  CHECK(cells == std::vector<value>{text("3.4e+38"), text("NaN"), text("0.1"), text("1.5")});
}

TEST_CASE("an incremental postgres read returns rows after the watermark in cursor order") {
  pg_schema s;
  s.exec(R"(
    CREATE TABLE events (id integer, updated_at timestamptz, amount numeric(8,2), what text);
    INSERT INTO events VALUES
      (1, '2024-01-03 00:00:00+00', 3.00, 'c'), (2, '2024-01-01 00:00:00+00', 1.00, 'a'),
      (3, '2024-01-02 00:00:00.5+00', 2.50, 'b'), (4, NULL, NULL, 'no cursor');
  )");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, s.name() + ".events");

  auto first = read_all(*src, t, {"id"}, "updated_at");
  CHECK(first.rows.size() == 4);
  CHECK(first.result.max_cursor == "2024-01-03 00:00:00+00");
  auto next = read_all(*src, t, {"what", "id"}, "updated_at", "2024-01-01 00:00:00+00");
  REQUIRE(next.rows.size() == 2);
  CHECK(next.rows[0][0] == text("b"));
  CHECK(next.rows[1][0] == text("c"));
  CHECK(next.result.max_cursor == "2024-01-03 00:00:00+00");
  CHECK(read_all(*src, t, {"id"}, "updated_at", *next.result.max_cursor).rows.empty());

  auto by_amount = read_all(*src, t, {"what"}, "amount", "1.00");
  REQUIRE(by_amount.rows.size() == 2);
  CHECK(by_amount.result.max_cursor == "3.00");

  // A cursor_column spelled in another case still finds its column.
  auto other_case = read_all(*src, t, {"id"}, "Updated_At", "2024-01-02 00:00:00.5+00");
  REQUIRE(other_case.rows.size() == 1);
  CHECK(other_case.rows[0][0] == integer(1));
}

TEST_CASE("an incremental postgres read goes on from a watermark before the year 1") {
  pg_schema s;
  s.exec(R"(
    CREATE TABLE old_ts (id integer, at timestamp, day date, at_tz timestamptz);
    INSERT INTO old_ts VALUES
      (1, '0100-01-01 00:00:00 BC', '0100-01-01 BC', '0100-01-01 00:00:00+00 BC'),
      (2, '0044-03-15 12:00:00 BC', '0044-03-15 BC', '0044-03-15 12:00:00+00 BC'),
      (3, '0010-01-01 00:00:00 BC', '0010-01-01 BC', '0010-01-01 00:00:00+00 BC'),
      (4, '2024-01-01 00:00:00', '2024-01-01', '2024-01-01 00:00:00+00');
  )");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, s.name() + ".old_ts");
  // The values, and so the watermark, are ISO text ("-0043" is 44 BC), which PostgreSQL
  // does not read: the read must still go on after it, not fail on every later run.
  auto first = read_all(*src, t, {"id", "at"}, "at", std::string("-0099-01-01 00:00:00"));
  REQUIRE(first.rows.size() == 3);
  CHECK(first.rows[0][1] == text("-0043-03-15 12:00:00"));
  for (const char* cursor : {"at", "day", "at_tz"}) {
    const std::string watermark = std::string(cursor) == "day"   ? "-0043-03-15"
                                  : std::string(cursor) == "at"  ? "-0043-03-15 12:00:00"
                                                                 : "-0043-03-15 12:00:00+00";
    INFO(cursor);
    auto next = read_all(*src, t, {"id"}, cursor, watermark);
    REQUIRE(next.rows.size() == 2);
    CHECK(next.rows[0][0] == integer(3));
    CHECK(next.rows[1][0] == integer(4));
  }
}

TEST_CASE("postgres rows arrive in batches of batch_rows and reading stops when asked") {
  pg_schema s;
  s.exec("CREATE TABLE n AS SELECT i, i::text AS s FROM generate_series(1, 1000) AS g(i)");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, s.name() + ".n");
  auto all = read_all(*src, t, {}, "i", std::nullopt, 300);
  CHECK(all.batches == 4);
  CHECK(all.rows.size() == 1000);

  read_request req;
  req.table = &t;
  req.columns = t.columns;
  req.batch_rows = 300;
  std::size_t calls = 0;
  src->read(req, [&](flotilla::schema::row_batch&&) { return ++calls < 2; });
  CHECK(calls == 2);
  // The source is still usable after an abandoned read.
  CHECK(read_all(*src, t).rows.size() == 1000);

  // COPY text batches: whole lines, batch_rows of them, and the same early stop.
  req.copy_text = true;
  std::vector<std::size_t> sizes;
  std::string text;
  src->read(req, [&](flotilla::schema::row_batch&& b) {
    CHECK(b.cells.empty());
    sizes.push_back(b.rows());
    text += b.copy_text;
    return true;
  });
  CHECK(sizes == std::vector<std::size_t>{300, 300, 300, 100});
  CHECK(std::count(text.begin(), text.end(), '\n') == 1000);
  CHECK(("\n" + text).find("\n1000\t1000\n") != std::string::npos);
  calls = 0;
  src->read(req, [&](flotilla::schema::row_batch&&) { return ++calls < 2; });
  CHECK(calls == 2);
  CHECK(read_all(*src, t).rows.size() == 1000);

  // Binary COPY batches: whole tuples without the stream's header and trailer, each
  // 2 + 2 * 4 bytes of field count and lengths plus the values.
  req.copy_binary = true;
  sizes.clear();
  std::string tuples;
  src->read(req, [&](flotilla::schema::row_batch&& b) {
    CHECK(b.copy_binary);
    CHECK(b.cells.empty());
    sizes.push_back(b.rows());
    tuples += b.copy_text;
    return true;
  });
  CHECK(sizes == std::vector<std::size_t>{300, 300, 300, 100});
  std::size_t text_bytes = 0;
  for (int i = 1; i <= 1000; ++i)
    text_bytes += std::to_string(i).size();
  CHECK(tuples.size() == 1000 * (2 + 8 + 4) + text_bytes);
  CHECK(tuples.substr(0, 2) == std::string("\0\2", 2));
  CHECK(tuples.find("PGCOPY") == std::string::npos);
  calls = 0;
  src->read(req, [&](flotilla::schema::row_batch&&) { return ++calls < 2; });
  CHECK(calls == 2);
  CHECK(read_all(*src, t).rows.size() == 1000);
}

TEST_CASE("the postgres marker stays the same without a write and changes after one") {
  pg_schema s;
  s.exec("CREATE TABLE a (x integer); CREATE TABLE b (y integer); INSERT INTO a VALUES (1);");
  s.flush_stats();
  auto marker = [&](const std::string& table) {
    auto src = open_pg(s.dsn());
    return src->read_catalog().find(s.name() + "." + table)->marker;
  };
  const auto a1 = marker("a");
  const auto b1 = marker("b");
  REQUIRE(a1.has_value());
  CHECK(marker("a") == a1);
  CHECK(a1 != b1);

  SECTION("an insert, update or delete changes only that table's marker") {
    s.exec("UPDATE a SET x = 2");
    s.flush_stats();
    const auto a2 = marker("a");
    CHECK(a2 != a1);
    CHECK(marker("b") == b1);
    s.exec("DELETE FROM a");
    s.flush_stats();
    CHECK(marker("a") != a2);
    s.exec("INSERT INTO b VALUES (1)");
    s.flush_stats();
    CHECK(marker("b") != b1);
  }
  SECTION("truncate and shape changes change the marker") {
    s.exec("TRUNCATE a");
    CHECK(marker("a") != a1);
    s.exec("ALTER TABLE b ADD COLUMN z text");
    CHECK(marker("b") != b1);
  }
}

TEST_CASE("no postgres marker where the counters cannot see every change of the copy") {
  pg_schema s;
  s.exec("CREATE TABLE p (id integer PRIMARY KEY, v text); CREATE TABLE c () INHERITS (p);"
         "CREATE TABLE lone (x integer); INSERT INTO p VALUES (1, 'a'); INSERT INTO c VALUES (2, 'b');");
  s.flush_stats();
  auto src = open_pg(s.dsn());
  auto cat = src->read_catalog();
  // The parent's copy reads its child's rows, which the parent's counters do not count.
  CHECK_FALSE(cat.find(s.name() + ".p")->marker.has_value());
  CHECK(cat.find(s.name() + ".c")->marker.has_value());
  CHECK(cat.find(s.name() + ".lone")->marker.has_value());
  // Statistics off: the counters stand still, so no table gets a marker.
  auto off = open_pg(s.dsn() + (s.dsn().find('?') == std::string::npos ? "?" : "&") +
                     "options=-c%20track_counts%3Doff");
  auto without = off->read_catalog();
  CHECK_FALSE(without.find(s.name() + ".lone")->marker.has_value());
}

TEST_CASE("hostile postgres schema, table and column names are quoted") {
  pg_schema s;
  const std::string weird_schema = s.name() + " \"q\"; x";
  s.exec("CREATE SCHEMA \"" + s.name() + " \"\"q\"\"; x\"");
  s.exec("CREATE TABLE \"" + s.name() + " \"\"q\"\"; x\".\"we\"\"ird; DROP TABLE y; --\" "
         "(\"a \"\"b\"\"; c\" integer, \"select\" text, \"Mixed Case\" text)");
  s.exec("INSERT INTO \"" + s.name() + " \"\"q\"\"; x\".\"we\"\"ird; DROP TABLE y; --\" VALUES "
         "(1, 'from', 'x'), (2, 'where', 'it''s')");
  s.exec("CREATE TABLE y (keep integer)");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, weird_schema + ".we\"ird; DROP TABLE y; --");
  auto r = read_all(*src, t, {"Mixed Case", "select", "a \"b\"; c"}, "a \"b\"; c", "1");
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0] == std::vector<value>{text("it's"), text("where"), integer(2)});
  CHECK(src->read_catalog().find(s.name() + ".y") != nullptr);
  s.exec("DROP SCHEMA \"" + s.name() + " \"\"q\"\"; x\" CASCADE");
}

TEST_CASE("an unreachable postgres server is reported without the password") {
  auto src = open_pg("postgresql://flotilla:s3cret@127.0.0.1:1/shop");
  try {
    (void)src->read_catalog();
    FAIL("expected an error");
  } catch (const source_error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith("cannot connect to source 'shop' "
                                       "(postgresql://flotilla:***@127.0.0.1:1/shop): "));
    CHECK_THAT(what, Catch::Contains("refused") && Catch::EndsWith("; check dsn"));
    CHECK_THAT(what, !Catch::Contains("s3cret"));
  }
}

TEST_CASE("a DSN libpq cannot parse is not repeated with its password") {
  // libpq quotes a malformed URI whole in its message.
  auto src = open_pg("postgresql://u:S3cretC@[::1:1/db");
  try {
    (void)src->read_catalog();
    FAIL("expected an error");
  } catch (const source_error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("IPv6") && !Catch::Contains("S3cret"));
    CHECK_THAT(what, Catch::Contains("postgresql://u:***@[::1:1/db"));
  }
}

TEST_CASE("postgres read errors name the source and table") {
  pg_schema s;
  s.exec("CREATE TABLE t (x integer)");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  source_table gone = find_table(cat, s.name() + ".t");
  s.exec("DROP TABLE t");
  CHECK_THROWS_WITH(read_all(*src, gone),
                    Catch::Contains("cannot read table '" + s.name() + ".t' of source 'shop'") &&
                        Catch::Contains("does not exist"));
}

TEST_CASE("one catalog query reads hundreds of postgres tables") {
  pg_schema s;
  s.exec(
      "DO $$ BEGIN FOR i IN 1..500 LOOP EXECUTE format('CREATE TABLE t%s (id bigint PRIMARY "
      "KEY, name text, amount numeric(12,2), at timestamptz)', i); END LOOP; END $$");
  auto src = open_pg(s.dsn());
  const auto start = std::chrono::steady_clock::now();
  const catalog cat = src->read_catalog();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  std::size_t mine = 0;
  for (const auto& t : cat.tables)
    if (t.schema == s.name()) {
      ++mine;
      CHECK(t.columns.columns.size() == 4);
    }
  CHECK(mine == 500);
  // The server returns them in creation order (t1, t2, ..., t10); the catalog lists them
  // by schema and name (t1, t10, t100, t101, ...), as every adapter does.
  CHECK(std::ranges::is_sorted(cat.tables, [](const source_table& a, const source_table& b) {
    return std::tie(a.schema, a.name) < std::tie(b.schema, b.name);
  }));
  const auto first = std::ranges::find(cat.tables, s.name(), &source_table::schema);
  REQUIRE(std::distance(first, cat.tables.end()) >= 3);
  CHECK(first[0].name == "t1");
  CHECK(first[1].name == "t10");
  CHECK(first[2].name == "t100");
  WARN("postgres catalog: " << cat.tables.size() << " tables in " << us << " us ("
                            << us / static_cast<long>(cat.tables.size()) << " us per table)");
}

TEST_CASE("a postgres cursor read as text still goes in the column's own order") {
  // A bare numeric reads as text: ordered by that text, 99 would come last and be the
  // watermark, and the next read would take 100 again.
  pg_schema s;
  s.exec("CREATE TABLE " + s.name() + ".nm (id int, n numeric);"
         "INSERT INTO " + s.name() + ".nm VALUES (1, 9), (2, 10), (3, 99), (4, 100)");
  auto src = open_pg(s.dsn());
  const catalog cat = src->read_catalog();
  const auto& nm = find_table(cat, s.name() + ".nm");
  CHECK(find_column(nm, "n").type == of(type_kind::text));
  auto r = read_all(*src, nm, {"id", "n"}, "n");
  REQUIRE(r.rows.size() == 4);
  CHECK(r.result.max_cursor == "100");
  r = read_all(*src, nm, {"id"}, "n", "99");
  CHECK(r.rows.size() == 1);
  CHECK(r.result.max_cursor == "100");
}

TEST_CASE("a postgres table whose row-level security would hide rows from the role fails its "
          "read saying how to read every row, rather than copying some") {
  pg_schema s;
  const std::string role = "flotilla_rls_" + unique_suffix();
  s.exec("CREATE ROLE " + role + " LOGIN");
  s.exec("CREATE TABLE accounts (id int PRIMARY KEY, owner text);"
         "INSERT INTO accounts VALUES (1, 'alice'), (2, 'bob'), (3, 'carol');"
         "ALTER TABLE accounts ENABLE ROW LEVEL SECURITY;"
         "CREATE POLICY only_alice ON accounts FOR SELECT USING (owner = 'alice');"
         "GRANT USAGE ON SCHEMA " + s.name() + " TO " + role + ";"
         "GRANT SELECT ON accounts TO " + role);
  const std::string as_role = dsn_as(s.dsn(), role);
  {
    auto src = open_pg(as_role);
    const catalog cat = src->read_catalog();
    const auto& t = find_table(cat, s.name() + ".accounts");
    CHECK_THROWS_WITH(read_all(*src, t),
                      Catch::Contains("table '" + s.name() + ".accounts'") &&
                          Catch::Contains("row-level security") &&
                          Catch::Contains("give that role BYPASSRLS"));
  }
  s.exec("ALTER ROLE " + role + " BYPASSRLS");
  {
    auto src = open_pg(as_role);
    const catalog cat = src->read_catalog();
    CHECK(read_all(*src, find_table(cat, s.name() + ".accounts")).rows.size() == 3);
  }
  s.exec("DROP OWNED BY " + role + "; DROP ROLE " + role);
}

TEST_CASE("the postgres catalog marks a table the role may not read, so a plan shows it failing") {
  pg_schema s;
  const std::string role = "flotilla_ro_" + unique_suffix();
  s.exec("CREATE ROLE " + role + " LOGIN");
  s.exec("CREATE TABLE open_t (id int); CREATE TABLE closed_t (id int);"
         "CREATE TABLE some_t (id int, secret text);"
         "GRANT USAGE ON SCHEMA " + s.name() + " TO " + role + ";"
         "GRANT SELECT ON open_t TO " + role + ";"
         "GRANT SELECT (id) ON some_t TO " + role);
  {
    auto src = open_pg(dsn_as(s.dsn(), role));
    const catalog cat = src->read_catalog();
    CHECK(find_table(cat, s.name() + ".open_t").unreadable.empty());
    CHECK_THAT(find_table(cat, s.name() + ".closed_t").unreadable,
               Catch::Contains("permission denied: the role Flotilla connects as may not read it") &&
                   Catch::Contains("GRANT SELECT ON \"" + s.name() + "\".\"closed_t\""));
    // Some columns granted: the table is still unreadable as a whole, naming one column.
    CHECK_THAT(find_table(cat, s.name() + ".some_t").unreadable,
               Catch::Contains("may not read its column 'secret'"));
  }
  s.exec("DROP OWNED BY " + role + "; DROP ROLE " + role);
}

TEST_CASE("a PostgreSQL DSN names its database in one spelling, as libpq reads it") {
  const std::string one = postgres_database("postgresql://postgres@127.0.0.1:54329/wh");
  CHECK(one == "127.0.0.1:54329/wh");
  CHECK(postgres_database("postgres://postgres@localhost:54329/wh?connect_timeout=5") == one);
  CHECK(postgres_database("host=127.0.0.1 port=54329 dbname=wh user=postgres") == one);
  CHECK(postgres_database("postgresql://postgres@127.0.0.1:54329/w%68") == one);
  CHECK(postgres_database("postgresql://postgres@127.0.0.1:54329/WH") != one);
  CHECK(postgres_database("postgresql://wh@127.0.0.1") == "127.0.0.1:5432/wh");
  CHECK(postgres_database("host=a,b dbname=wh").empty());
  CHECK(postgres_database("not a dsn =").empty());
}

TEST_CASE("a PostgreSQL DSN's search_path names the schema unqualified names land in") {
  CHECK(postgres_default_schema("postgresql://postgres@127.0.0.1:54329/wh") == "public");
  CHECK(postgres_default_schema("postgresql://p@h/wh?options=-csearch_path%3Dstage,public") ==
        "stage");
  CHECK(postgres_default_schema("host=h dbname=wh options='-c search_path=Stage'") == "stage");
  CHECK(postgres_default_schema("host=h dbname=wh options='--search_path=\"Stage\"'") == "Stage");
  CHECK(postgres_default_schema("host=h dbname=wh options='-c search_path=$user,public'") ==
        "public");
  CHECK(postgres_default_schema("host=h options='-c statement_timeout=5'") == "public");
}

namespace {

/// A PostgreSQL primary and its hot standby of their own (tests/sources/scripts/
/// standby_pair.sh), stopped and removed at scope exit.
class standby_pair {
 public:
  // Ports below Linux's ephemeral range (32768 on): a client connection's local port
  // there once took the primary's (bind: "Address already in use"). Another pair of
  // ports is tried should one still be taken.
  standby_pair() : dir_("/tmp/flotilla-standby-" + unique_suffix()) {
    std::string cmd;
    for (int attempt = 0; attempt < 4; ++attempt) {
      primary_port_ = 30000 + static_cast<int>((::getpid() + attempt * 97) % 400) * 2;
      standby_port_ = primary_port_ + 1;
      cmd = fmt::format("{}/tests/sources/scripts/standby_pair.sh start {} {} {} >{}.log 2>&1",
                        FLOTILLA_SOURCE_DIR, dir_, primary_port_, standby_port_, dir_);
      if (std::system(cmd.c_str()) == 0)
        return;
      (void)std::system(fmt::format("{}/tests/sources/scripts/standby_pair.sh stop {} "
                                    ">/dev/null 2>&1",
                                    FLOTILLA_SOURCE_DIR, dir_)
                            .c_str());
    }
    INFO(cmd);
    FAIL("the standby pair did not start: see " + dir_ + ".log");
  }
  standby_pair(const standby_pair&) = delete;
  standby_pair& operator=(const standby_pair&) = delete;
  ~standby_pair() {
    const std::string cmd = fmt::format("{}/tests/sources/scripts/standby_pair.sh stop {} "
                                        ">/dev/null 2>&1; rm -f {}.log",
                                        FLOTILLA_SOURCE_DIR, dir_, dir_);
    (void)std::system(cmd.c_str());
  }
  [[nodiscard]] std::string primary() const { return dsn(primary_port_); }
  [[nodiscard]] std::string standby() const { return dsn(standby_port_); }

 private:
  static std::string dsn(int port) {
    return fmt::format("postgresql://postgres@127.0.0.1:{}/postgres", port);
  }
  std::string dir_;
  int primary_port_ = 0;
  int standby_port_ = 0;
};

/// The first value of `sql`'s first row on `dsn`; empty on an error (for polling).
std::string pg_value(const std::string& dsn, const std::string& sql) {
  PGconn* c = PQconnectdb(dsn.c_str());
  std::string out;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
      out = PQgetvalue(r, 0, 0);
    else if (PQresultStatus(r) == PGRES_COMMAND_OK)
      out = "ok";
    PQclear(r);
  }
  PQfinish(c);
  return out;
}

bool standby_has(const std::string& dsn, const std::string& count) {
  for (int i = 0; i < 300; ++i) {
    if (pg_value(dsn, "SELECT count(*) FROM t") == count)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string marker_of_t(const std::string& dsn) {
  auto src = open_pg(dsn);
  const auto cat = src->read_catalog();
  for (const auto& t : cat.tables)
    if (t.name == "t")
      return t.marker.value_or("");
  return "";
}

}  // namespace

TEST_CASE("a hot standby's table counts as changed once the standby replays a change to it") {
  // A standby's statistics count none of the changes it replays from its primary: a
  // marker made of them alone would prune a read replica's tables for good.
  standby_pair pair;
  REQUIRE(pg_value(pair.primary(), "CREATE TABLE t (id int PRIMARY KEY); "
                                   "INSERT INTO t VALUES (1)") == "ok");
  REQUIRE(standby_has(pair.standby(), "1"));
  const std::string before = marker_of_t(pair.standby());
  REQUIRE_FALSE(before.empty());
  REQUIRE(pg_value(pair.primary(), "INSERT INTO t VALUES (2)") == "ok");
  REQUIRE(standby_has(pair.standby(), "2"));
  CHECK(pg_value(pair.standby(), "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 't'") ==
        "0");  // what the marker cannot go by
  const std::string after = marker_of_t(pair.standby());
  CHECK(after != before);
  // On the primary, the marker has no replay position in it.
  CHECK(marker_of_t(pair.primary()).find("replay") == std::string::npos);
  CHECK(after.find("replay") != std::string::npos);
}
