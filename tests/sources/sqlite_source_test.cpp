// The sqlite adapter against real SQLite files.

#include <catch2/catch.hpp>

#include <fstream>

#include "sources/source.hpp"
#include "tests/sources/support.hpp"

using namespace flotilla::sources;
using namespace flotilla::sources::testing;
using flotilla::schema::portable_type;
using flotilla::schema::type_kind;

namespace {

std::unique_ptr<source> open_sqlite(const std::string& path, const std::string& name = "shop") {
  source_options o;
  o.name = name;
  o.adapter = "sqlite";
  o.path = path;
  return open_source(o);
}

}  // namespace

TEST_CASE("the sqlite catalog lists every table with portable types and its key") {
  temp_dir dir;
  const auto db = dir.file("shop.db");
  sqlite_exec(db, R"(
    CREATE TABLE orders (
      id INTEGER PRIMARY KEY, customer BIGINT NOT NULL, qty SMALLINT, total DECIMAL(12,2),
      code VARCHAR(20), note TEXT, paid BOOLEAN, day DATE, at DATETIME, at_tz TIMESTAMPTZ,
      doc JSON, raw BLOB, ref UUID, ratio REAL, weight DOUBLE, price FLOAT, anything);
    CREATE TABLE lines (order_id INTEGER, line INTEGER, sku TEXT, PRIMARY KEY (order_id, line));
    CREATE INDEX lines_sku ON lines (sku);
    CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 100;
    CREATE VIRTUAL TABLE docs USING fts5(body);
  )");
  auto src = open_sqlite(db);
  CHECK(src->adapter() == "sqlite");
  const catalog cat = src->read_catalog();
  REQUIRE(cat.tables.size() == 2);  // no views, virtual or shadow tables, sqlite_ internals
  CHECK(cat.tables[0].name == "lines");
  CHECK(cat.tables[0].schema.empty());
  CHECK(cat.tables[0].columns.key() == std::vector<std::string>{"order_id", "line"});

  const auto& orders = find_table(cat, "orders");
  CHECK_FALSE(orders.inferred);
  CHECK(orders.marker.has_value());
  const std::vector<std::pair<std::string, portable_type>> expected{
      {"id", portable_type::of(type_kind::bigint)},  // INTEGER PRIMARY KEY: the rowid
      {"customer", portable_type::of(type_kind::bigint)},
      {"qty", portable_type::of(type_kind::smallint)},
      {"total", portable_type::decimal(12, 2)},
      {"code", portable_type::varchar(20)},
      {"note", portable_type::of(type_kind::text)},
      {"paid", portable_type::of(type_kind::boolean)},
      {"day", portable_type::of(type_kind::date)},
      {"at", portable_type::of(type_kind::timestamp_ntz)},
      {"at_tz", portable_type::of(type_kind::timestamp_tz)},
      {"doc", portable_type::of(type_kind::json)},
      {"raw", portable_type::of(type_kind::bytes)},
      {"ref", portable_type::of(type_kind::uuid)},
      {"ratio", portable_type::of(type_kind::float64)},
      {"weight", portable_type::of(type_kind::float64)},
      {"price", portable_type::of(type_kind::float64)},
      {"anything", portable_type::of(type_kind::text)},
  };
  REQUIRE(orders.columns.columns.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].first);
    CHECK(orders.columns.columns[i].name == expected[i].first);
    CHECK(orders.columns.columns[i].type == expected[i].second);
  }
  CHECK(orders.columns.key() == std::vector<std::string>{"id"});
  // Only a one-column INTEGER key is the rowid: a composite key's columns stay int.
  CHECK(find_column(cat.tables[0], "order_id").type == portable_type::of(type_kind::int32));
  CHECK_FALSE(find_column(orders, "id").nullable);
  CHECK_FALSE(find_column(orders, "customer").nullable);
  CHECK(find_column(orders, "qty").nullable);
}

TEST_CASE("sqlite values come out exactly as the portable types represent them") {
  temp_dir dir;
  const auto db = dir.file("values.db");
  sqlite_exec(db, R"(
    CREATE TABLE v (id INTEGER PRIMARY KEY, total DECIMAL(12,2), paid BOOLEAN, at DATETIME,
                    at_tz TIMESTAMPTZ, day DATE, t TIME, name TEXT, raw BLOB, ref UUID,
                    doc JSON, ratio REAL, n BIGINT);
    INSERT INTO v VALUES
      (1, 12.5, 1, '2024-01-02 03:04:05', '2024-01-02T03:04:05.5+02:00', '2024-01-02',
       '03:04:05', 'plain', x'00ff00', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"a": [1, 2]}',
       0.1, 9007199254740993),
      (2, '-0.5', 0, '2024-01-02T03:04:05.123456Z', '2024-06-30 23:59:59', '2024-02-29 00:00:00',
       '23:59:59.25', 'ünïcødé ✓ 日本', CAST('text as bytes' AS BLOB),
       x'a0eebc999c0b4ef8bb6d6bb9bd380a11', '[]', -2.5, -1),
      (3, 7, 'true', 1700000000, 1700000000, 1699920000, NULL, '', x'', NULL, NULL, 1e300, 0),
      (4, -1234567890.126, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  )");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto r = read_all(*src, find_table(cat, "v"));
  REQUIRE(r.rows.size() == 4);
  CHECK(r.result.rows == 4);
  CHECK_FALSE(r.result.max_cursor.has_value());

  const auto& a = r.rows[0];
  CHECK(a[0] == integer(1));
  CHECK(a[1] == text("12.50"));
  CHECK(a[2] == boolean(true));
  CHECK(a[3] == text("2024-01-02 03:04:05"));
  CHECK(a[4] == text("2024-01-02 01:04:05.5+00"));
  CHECK(a[5] == text("2024-01-02"));
  CHECK(a[6] == text("03:04:05"));
  CHECK(a[7] == text("plain"));
  CHECK(a[8] == text(std::string("\0\xff\0", 3)));
  CHECK(a[9] == text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
  CHECK(a[10] == text("{\"a\": [1, 2]}"));
  CHECK(a[11] == real(0.1));
  CHECK(a[12] == integer(9007199254740993));

  const auto& b = r.rows[1];
  CHECK(b[1] == text("-0.50"));
  CHECK(b[2] == boolean(false));
  CHECK(b[3] == text("2024-01-02 03:04:05.123456"));
  CHECK(b[4] == text("2024-06-30 23:59:59+00"));
  CHECK(b[5] == text("2024-02-29"));
  CHECK(b[6] == text("23:59:59.25"));
  CHECK(b[7] == text("ünïcødé ✓ 日本"));
  CHECK(b[8] == text("text as bytes"));
  CHECK(b[9] == text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
  CHECK(b[11] == real(-2.5));
  CHECK(b[12] == integer(-1));

  const auto& c = r.rows[2];
  CHECK(c[1] == text("7.00"));
  CHECK(c[2] == boolean(true));
  CHECK(c[3] == text("2023-11-14 22:13:20"));  // unix seconds
  CHECK(c[4] == text("2023-11-14 22:13:20+00"));
  CHECK(c[5] == text("2023-11-14"));  // unix seconds of its midnight
  CHECK(c[6] == null());
  CHECK(c[7] == text(""));
  CHECK(c[8] == text(""));
  CHECK(c[11] == real(1e300));

  const auto& d = r.rows[3];
  CHECK(d[1] == text("-1234567890.13"));
  for (std::size_t i = 2; i < d.size(); ++i) {
    INFO("column " << i);
    CHECK(d[i] == null());
  }
}

TEST_CASE("a sqlite read into reused batches gives the values a fresh read gives") {
  // Each batch comes back as the next one to fill, so every cell is written over a cell
  // of another row: a different kind, a longer or shorter string, or a null.
  temp_dir dir;
  const auto db = dir.file("reuse.db");
  sqlite_exec(db, R"(
    CREATE TABLE v (id INTEGER PRIMARY KEY, total DECIMAL(12,2), paid BOOLEAN, at DATETIME,
                    at_tz TIMESTAMPTZ, name TEXT, ratio REAL, anything);
    INSERT INTO v VALUES
      (1, 12.5, 1, '2024-01-02 03:04:05.5', '2024-01-02 03:04:05', 'a long name past SSO', 0.1, 'x'),
      (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
      (3, '-0.5', 0, '2024-01-02T03:04:05Z', '2024-01-02 03:04:05+02:00', '', -2.5, 7),
      (4, 99999.994, 'true', 1700000000, 1700000000, 'ünïcødé ✓', 1e300, 2.5);
  )");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "v");
  const auto fresh = read_all(*src, t, {}, {}, std::nullopt, 3);

  for (std::size_t batch_rows : {1, 2, 3}) {
    CAPTURE(batch_rows);
    read_request req;
    req.table = &t;
    req.columns = t.columns;
    req.batch_rows = batch_rows;
    std::optional<flotilla::schema::row_batch> spent;
    req.spent_batch = [&] {
      auto b = spent ? std::move(*spent) : flotilla::schema::row_batch{};
      spent.reset();
      return b;
    };
    std::vector<std::vector<value>> rows;
    src->read(req, [&](flotilla::schema::row_batch&& b) {
      for (std::size_t r = 0; r < b.rows(); ++r)
        rows.emplace_back(b.cells.begin() + static_cast<std::ptrdiff_t>(r * b.width),
                          b.cells.begin() + static_cast<std::ptrdiff_t>((r + 1) * b.width));
      spent = std::move(b);
      return true;
    });
    CHECK(rows == fresh.rows);
  }
}

TEST_CASE("a sqlite read returns the requested columns in the requested order") {
  temp_dir dir;
  const auto db = dir.file("order.db");
  sqlite_exec(db, "CREATE TABLE t (a INTEGER, b TEXT, c REAL); INSERT INTO t VALUES (1, 'x', 2.5);");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto r = read_all(*src, find_table(cat, "t"), {"c", "a"});
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0] == std::vector<flotilla::schema::value>{real(2.5), integer(1)});
}

TEST_CASE("sqlite generated columns, virtual and stored, are listed and read like any other") {
  temp_dir dir;
  const auto db = dir.file("generated.db");
  sqlite_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, a INT, "
                  "b INT GENERATED ALWAYS AS (a * 2) VIRTUAL, "
                  "c TEXT GENERATED ALWAYS AS ('v' || a) STORED, d REAL);"
                  "INSERT INTO t (id, a, d) VALUES (1, 1, 0.5), (2, 2, NULL);");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "t");
  REQUIRE(t.columns.columns.size() == 5);
  CHECK(find_column(t, "b").type == portable_type::of(type_kind::int32));
  CHECK(find_column(t, "c").type == portable_type::of(type_kind::text));
  CHECK(t.columns.columns[4].name == "d");  // in declaration order
  const auto r = read_all(*src, t, {"id", "b", "c"});
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0] == std::vector<flotilla::schema::value>{integer(1), integer(2), text("v1")});
  CHECK(r.rows[1] == std::vector<flotilla::schema::value>{integer(2), integer(4), text("v2")});
}

TEST_CASE("a contract type other than the declared one converts exactly") {
  temp_dir dir;
  const auto db = dir.file("contract.db");
  sqlite_exec(db, "CREATE TABLE t (amount REAL, n TEXT); INSERT INTO t VALUES (0.1, '42'), (2.675, '-7');");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  read_request req;
  req.table = &find_table(cat, "t");
  req.columns.columns = {{"amount", portable_type::decimal(18, 2)},
                         {"n", portable_type::of(type_kind::bigint)}};
  std::vector<std::vector<flotilla::schema::value>> rows;
  src->read(req, [&](flotilla::schema::row_batch&& b) {
    for (std::size_t r = 0; r < b.rows(); ++r)
      rows.push_back({b.at(r, 0), b.at(r, 1)});
    return true;
  });
  REQUIRE(rows.size() == 2);
  CHECK(rows[0][0] == text("0.10"));
  CHECK(rows[0][1] == integer(42));
  CHECK(rows[1][0] == text("2.68"));  // the decimal 2.675, not the double 2.67499999...
  CHECK(rows[1][1] == integer(-7));
}

TEST_CASE("an incremental sqlite read returns rows after the watermark in cursor order") {
  temp_dir dir;
  const auto db = dir.file("inc.db");
  sqlite_exec(db, R"(
    CREATE TABLE events (id INTEGER PRIMARY KEY, updated_at DATETIME, seq BIGINT, what TEXT);
    INSERT INTO events VALUES
      (1, '2024-01-03 00:00:00', 30, 'c'), (2, '2024-01-01 00:00:00', 10, 'a'),
      (3, '2024-01-02 00:00:00.5', 20, 'b'), (4, NULL, NULL, 'no cursor');
  )");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "events");

  SECTION("by a timestamp cursor") {
    auto first = read_all(*src, t, {"id", "what"}, "updated_at");
    REQUIRE(first.rows.size() == 4);  // the first read copies everything
    CHECK(first.result.max_cursor == "2024-01-03 00:00:00");
    auto next = read_all(*src, t, {"id", "updated_at"}, "updated_at", "2024-01-01 00:00:00");
    REQUIRE(next.rows.size() == 2);
    CHECK(next.rows[0][0] == integer(3));
    CHECK(next.rows[0][1] == text("2024-01-02 00:00:00.5"));
    CHECK(next.rows[1][0] == integer(1));
    CHECK(next.result.max_cursor == "2024-01-03 00:00:00");
    auto none = read_all(*src, t, {"id"}, "updated_at", *next.result.max_cursor);
    CHECK(none.rows.empty());
    CHECK_FALSE(none.result.max_cursor.has_value());
  }
  SECTION("by an integer cursor") {
    auto next = read_all(*src, t, {"what", "seq"}, "seq", "15");
    REQUIRE(next.rows.size() == 2);
    CHECK(next.rows[0][0] == text("b"));
    CHECK(next.rows[1][0] == text("c"));
    CHECK(next.result.max_cursor == "30");
  }
}

TEST_CASE("a sqlite cursor column holding numbers and text fails the read naming both, since "
          "SQLite orders every number before every text") {
  temp_dir dir;
  const auto db = dir.file("mixed.db");
  sqlite_exec(db, "CREATE TABLE ev (id INTEGER PRIMARY KEY, ts DATETIME, n REAL);"
                  "INSERT INTO ev VALUES (1, '2024-06-01 00:00:00', 1.5), (2, 1800000000, 2);");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "ev");
  // Read past a text watermark, the later row (unix seconds: 2027) would sort below it.
  for (const std::optional<std::string> after :
       {std::optional<std::string>(), std::optional<std::string>("2024-06-01 00:00:00")}) {
    CHECK_THROWS_WITH(
        after ? read_all(*src, t, {"id"}, "ts", *after) : read_all(*src, t, {"id"}, "ts"),
        Catch::Contains("table 'ev' of source 'shop'") &&
            Catch::Contains("cursor column 'ts' holds values of two kinds, integer (1800000000) "
                            "and text (2024-06-01 00:00:00)") &&
            Catch::Contains("UPDATE \"ev\" SET \"ts\" = datetime(\"ts\", 'unixepoch')"));
  }
  // Integers and reals are one kind: they compare as numbers.
  CHECK(read_all(*src, t, {"id"}, "n", "1.5").rows.size() == 1);
  // One form throughout reads as before.
  sqlite_exec(db, "UPDATE ev SET ts = datetime(ts, 'unixepoch') WHERE typeof(ts) = 'integer';");
  const auto r = read_all(*src, t, {"id"}, "ts", "2024-06-01 00:00:00");
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0][0] == integer(2));
}

TEST_CASE("sqlite rows arrive in batches of batch_rows and reading stops when asked") {
  temp_dir dir;
  const auto db = dir.file("batches.db");
  sqlite_exec(db, R"(
    CREATE TABLE n (i INTEGER);
    WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000)
    INSERT INTO n SELECT x FROM c;
  )");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "n");
  auto all = read_all(*src, t, {}, "i", std::nullopt, 300);
  CHECK(all.batches == 4);
  CHECK(all.rows.size() == 1000);
  CHECK(all.result.max_cursor == "1000");

  read_request req;
  req.table = &t;
  req.columns = t.columns;
  req.batch_rows = 300;
  std::size_t calls = 0;
  std::vector<std::size_t> sizes;
  src->read(req, [&](flotilla::schema::row_batch&& b) {
    sizes.push_back(b.rows());
    return ++calls < 2;
  });
  CHECK(sizes == std::vector<std::size_t>{300, 300});
}

TEST_CASE("the sqlite marker stays the same without a write and changes after one") {
  temp_dir dir;
  const auto db = dir.file("marker.db");
  sqlite_exec(db, "CREATE TABLE a (x INTEGER); CREATE TABLE b (y INTEGER); INSERT INTO a VALUES (1);");
  auto marker = [&](const std::string& table) {
    auto src = open_sqlite(db);
    return src->read_catalog().find(table)->marker;
  };
  const auto a1 = marker("a");
  const auto b1 = marker("b");
  REQUIRE(a1.has_value());
  CHECK(marker("a") == a1);
  CHECK(a1 != b1);  // the column list is part of it

  // A write to the file changes every table's marker (the marker is file-level), even an
  // overwrite of the same size within one clock tick.
  sqlite_exec(db, "UPDATE a SET x = 2;");
  const auto a2 = marker("a");
  CHECK(a2 != a1);
  CHECK(marker("b") != b1);
  CHECK(marker("a") == a2);

  sqlite_exec(db, "ALTER TABLE b ADD COLUMN z TEXT;");
  CHECK(marker("b") != b1);
}

TEST_CASE("the sqlite marker follows commits in WAL mode") {
  temp_dir dir;
  const auto db = dir.file("wal.db");
  sqlite3* writer = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &writer) == SQLITE_OK);
  auto exec = [&](const char* sql) { REQUIRE(sqlite3_exec(writer, sql, nullptr, nullptr, nullptr) == SQLITE_OK); };
  exec("PRAGMA journal_mode=WAL; CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);");
  auto marker = [&] {
    auto src = open_sqlite(db);
    auto cat = src->read_catalog();
    auto r = read_all(*src, find_table(cat, "a"));
    return std::make_pair(cat.find("a")->marker, r.rows.size());
  };
  // The writer keeps its connection open, so commits stay in the -wal file.
  const auto m1 = marker();
  CHECK(marker() == m1);
  exec("UPDATE a SET x = 3;");
  const auto m2 = marker();
  CHECK(m2.first != m1.first);
  CHECK(marker() == m2);
  exec("INSERT INTO a VALUES (2);");
  const auto m3 = marker();
  CHECK(m3.first != m2.first);
  CHECK(m3.second == 2);
  sqlite3_close(writer);
}

TEST_CASE("a WAL database read after its -wal and -shm were removed keeps its marker") {
  // The last connection to close removes them; a reader creates them again, empty.
  temp_dir dir;
  const auto db = dir.file("wal.db");
  sqlite_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);");
  REQUIRE_FALSE(std::filesystem::exists(db + "-wal"));
  auto marker = [&] {
    auto src = open_sqlite(db);
    auto cat = src->read_catalog();
    (void)read_all(*src, find_table(cat, "a"));
    return cat.find("a")->marker;
  };
  const auto m1 = marker();
  CHECK(marker() == m1);
  // A commit goes to the -wal (the writer keeps it open): seen.
  sqlite3* writer = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &writer) == SQLITE_OK);
  REQUIRE(sqlite3_exec(writer, "INSERT INTO a VALUES (2);", nullptr, nullptr, nullptr) == SQLITE_OK);
  const auto m2 = marker();
  CHECK(m2 != m1);
  CHECK(marker() == m2);
  sqlite3_close(writer);
}

TEST_CASE("the sqlite file marker is the catalog's and begins every table marker") {
  temp_dir dir;
  const auto db = dir.file("file.db");
  sqlite_exec(db, "CREATE TABLE a (x INTEGER); CREATE TABLE b (y TEXT); INSERT INTO a VALUES (1);");
  auto src = open_sqlite(db);
  CHECK_FALSE(src->catalog_version().empty());
  const auto before = src->file_marker();
  REQUIRE(before.has_value());
  const catalog cat = src->read_catalog();
  CHECK(cat.file_marker == before);
  CHECK(src->file_marker() == before);  // reading the catalog changes nothing
  for (const auto& t : cat.tables) {
    REQUIRE(t.marker.has_value());
    CHECK(t.marker->rfind(*before + ";s:", 0) == 0);
  }
  sqlite_exec(db, "ALTER TABLE b ADD COLUMN z TEXT;");
  CHECK(src->file_marker() != before);
  sqlite_exec(db, "INSERT INTO a VALUES (2);");
  const auto after = src->file_marker();
  CHECK(after != before);
  CHECK(src->read_catalog().file_marker == after);
}

TEST_CASE("adapters whose catalog is not one file offer no file marker") {
  temp_dir dir;
  const auto csv = dir.file("orders.csv");
  {
    std::ofstream(csv) << "id,name\n1,a\n";
  }
  source_options o;
  o.name = "files";
  o.adapter = "csv";
  o.path = csv;
  auto src = open_source(o);
  CHECK_FALSE(src->file_marker().has_value());
  CHECK_FALSE(src->read_catalog().file_marker.has_value());
}

TEST_CASE("hostile sqlite table and column names are quoted") {
  temp_dir dir;
  const auto db = dir.file("hostile.db");
  sqlite_exec(db, R"(
    CREATE TABLE "we""ird; DROP TABLE x; --" ("a ""b""; c" INTEGER, "select" TEXT, "sp ace" TEXT);
    INSERT INTO "we""ird; DROP TABLE x; --" VALUES (1, 'from', 'x'), (2, 'where', 'y');
    CREATE TABLE x (keep INTEGER);
  )");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "we\"ird; DROP TABLE x; --");
  CHECK(t.columns.columns[0].name == "a \"b\"; c");
  auto r = read_all(*src, t, {"sp ace", "a \"b\"; c", "select"}, "a \"b\"; c", "1");
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0] == std::vector<flotilla::schema::value>{text("y"), integer(2), text("where")});
  CHECK(src->read_catalog().find("x") != nullptr);
}

TEST_CASE("a sqlite value that is not its declared type names table, column and row") {
  temp_dir dir;
  const auto db = dir.file("bad.db");
  sqlite_exec(db, "CREATE TABLE t (n INTEGER, d DECIMAL(8,2)); INSERT INTO t VALUES (1, '1.5'), (2, 'n/a');");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  CHECK_THROWS_WITH(read_all(*src, find_table(cat, "t")),
                    Catch::Contains("source 'shop'") && Catch::Contains("table 't'") &&
                        Catch::Contains("column 'd'") && Catch::Contains("row 2") &&
                        Catch::Contains("'n/a'") && Catch::Contains("decimal(8,2)"));
}

TEST_CASE("a sqlite DATE value with a time of day fails naming it, rather than losing the time") {
  temp_dir dir;
  const auto db = dir.file("dates.db");
  sqlite_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE);");
  auto src = open_sqlite(db);
  // Text, text with an offset, unix seconds and a julian day: each holds a time of day
  // (or, moved to UTC, another date).
  for (const std::string v : {"'2024-01-02 23:30:00'", "'2024-01-02T00:00:00-05:00'",
                              "1700000000", "2460000.75"}) {
    CAPTURE(v);
    sqlite_exec(db, "DROP TABLE IF EXISTS t; CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE);"
                    "INSERT INTO t VALUES (1, '2024-01-02'), (2, " + v + ");");
    const catalog cat = src->read_catalog();
    CHECK_THROWS_WITH(read_all(*src, find_table(cat, "t")),
                      Catch::Contains("column 'd', row 2") &&
                          Catch::Contains("holds a time of day, which a date would drop") &&
                          Catch::Contains("columns = { d = \"timestamp_ntz\" }"));
  }
  // Midnight, in any of those forms, is the date.
  sqlite_exec(db, "DROP TABLE t; CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE);"
                  "INSERT INTO t VALUES (1, '2024-01-02 00:00:00'), (2, 1699920000), "
                  "(3, 2460000.5), (4, '2024-01-02T05:00:00+05:00');");
  const catalog cat = src->read_catalog();
  const auto r = read_all(*src, find_table(cat, "t"), {"d"});
  REQUIRE(r.rows.size() == 4);
  CHECK(r.rows[0][0] == text("2024-01-02"));
  CHECK(r.rows[1][0] == text("2023-11-14"));
  CHECK(r.rows[2][0] == text("2023-02-25"));  // SQLite: date(2460000.5)
  CHECK(r.rows[3][0] == text("2024-01-02"));
}

TEST_CASE("a NULL in a sqlite primary key other than INTEGER PRIMARY KEY fails naming the row "
          "and the fix") {
  temp_dir dir;
  const auto db = dir.file("nullkey.db");
  sqlite_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT);"
                  "INSERT INTO t VALUES (1, 'a'), (NULL, 'b');");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  CHECK_THROWS_WITH(read_all(*src, find_table(cat, "t")),
                    Catch::Contains("row 2 holds NULL in column 'id' of the table's primary key") &&
                        Catch::Contains("DELETE FROM \"t\" WHERE \"id\" IS NULL"));
  // Without the key column, the rows read.
  CHECK(read_all(*src, find_table(cat, "t"), {"v"}).rows.size() == 2);
}

TEST_CASE("a sqlite JSON column holding text that is not JSON fails naming the value and the pin") {
  temp_dir dir;
  const auto db = dir.file("docs.db");
  sqlite_exec(db, "CREATE TABLE docs (id INTEGER, body JSON); INSERT INTO docs VALUES "
                  "(1, '{\"ok\": true}'), (2, NULL), (3, 'not json');");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  CHECK_THROWS_WITH(read_all(*src, find_table(cat, "docs")),
                    Catch::Contains("column 'body'") && Catch::Contains("row 3") &&
                        Catch::Contains("'not json'") && Catch::Contains("body = \"text\""));
  sqlite_exec(db, "UPDATE docs SET body = '[1, \"two\"]' WHERE id = 3;");
  auto r = read_all(*src, find_table(src->read_catalog(), "docs"));
  REQUIRE(r.rows.size() == 3);
  CHECK(r.rows[2][1] == text("[1, \"two\"]"));
}

TEST_CASE("a missing sqlite file is reported with the source and path") {
  temp_dir dir;
  CHECK_THROWS_AS(open_sqlite(dir.file("nope.db")), source_error);
  CHECK_THROWS_WITH(open_sqlite(dir.file("nope.db")),
                    Catch::Contains("source 'shop'") && Catch::Contains("nope.db") &&
                        Catch::Contains("check path"));
  write_file(dir.file("junk.db"), std::string(4096, 'x'));
  auto src = open_sqlite(dir.file("junk.db"));
  CHECK_THROWS_WITH(src->read_catalog(), Catch::Contains("source 'shop'") &&
                                             Catch::Contains("junk.db"));
  // A directory, which SQLite calls a disk I/O error: said as what it is.
  std::filesystem::create_directories(dir.file("a_dir"));
  const auto open_dir = [&] { return open_sqlite(dir.file("a_dir"))->read_catalog(); };
  CHECK_THROWS_WITH(open_dir(), Catch::Contains("the path is a directory") &&
                                    !Catch::Contains("disk I/O"));
}

TEST_CASE("unknown adapters and missing options are configuration errors") {
  source_options o;
  o.name = "shop";
  o.adapter = "oracle";
  CHECK_THROWS_WITH(open_source(o), Catch::Contains("unknown adapter 'oracle'") &&
                                        Catch::Contains("sqlite, duckdb, postgres, csv, json"));
  o.adapter = "sqlite";
  CHECK_THROWS_WITH(open_source(o), Catch::Contains("has no path"));
  o.adapter = "postgres";
  CHECK_THROWS_WITH(open_source(o), Catch::Contains("has no dsn"));
}

TEST_CASE("a NUMERIC column without precision refuses a value it would round, naming the pin") {
  // Read as decimal(38,9), 0.123456789123 loaded as 0.123456789: digits lost, silently.
  temp_dir dir;
  const auto path = dir.file("n.db");
  sqlite_exec(path, "CREATE TABLE t (id INTEGER PRIMARY KEY, h NUMERIC, p NUMERIC(12,2));"
                 "INSERT INTO t VALUES (1, 0.1 + 0.2, 10.5), (2, 1234.5, 3.14159);");
  auto src = open_sqlite(path);
  const catalog cat = src->read_catalog();
  // Binary noise past 15 digits rounds (0.30000000000000004 -> 0.300000000); a declared
  // scale rounds as declared.
  auto r = read_all(*src, find_table(cat, "t"));
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0][1] == text("0.300000000"));
  CHECK(r.rows[1][2] == text("3.14"));
  sqlite_exec(path, "INSERT INTO t VALUES (3, 0.123456789123, 1)");
  CHECK_THROWS_WITH(read_all(*src, find_table(src->read_catalog(), "t")),
                    Catch::Contains("column 'h', row 3: value 0.123456789123 has more decimal "
                                    "places") &&
                        Catch::Contains("h = \"double\""));
}

TEST_CASE("a sqlite read refused by one column names the other columns' refused values too") {
  temp_dir dir;
  const auto db = dir.file("messy.db");
  sqlite_exec(db, R"(
    CREATE TABLE m (id INTEGER PRIMARY KEY, qty INTEGER, day DATE, note TEXT, paid BOOLEAN);
    INSERT INTO m VALUES (1, 5, '2024-01-01', 'a', 1), (2, 'N/A', '2024-01-02', 'b', 0),
                         (3, 7, '2024-02-30', 'c', 1), (4, 'x', '2024-01-04', 'd', 'maybe');
  )");
  auto src = open_sqlite(db);
  const catalog cat = src->read_catalog();
  const auto& m = find_table(cat, "m");
  // One run names qty (row 2) first, then day (row 3) and paid (row 4): three pins, once.
  CHECK_THROWS_WITH(read_all(*src, m),
                    Catch::Contains("column 'qty', row 2: value 'N/A'") &&
                        Catch::Contains("other columns of table 'm' refuse values too") &&
                        Catch::Contains("column 'day', row 3: value '2024-02-30'") &&
                        Catch::Contains("column 'paid', row 4: value 'maybe'") &&
                        !Catch::Contains("column 'note'"));
}
