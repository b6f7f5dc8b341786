// The csv and json adapters against real files.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <zlib.h>
#include <zstd.h>

#include <fmt/format.h>

#include "sources/source.hpp"
#include "tests/sources/support.hpp"

using namespace flotilla::sources;
using namespace flotilla::sources::testing;
using flotilla::schema::portable_type;
using flotilla::schema::type_kind;
using flotilla::schema::value;

namespace {

std::unique_ptr<source> open_files(const std::string& adapter, const std::string& path) {
  source_options o;
  o.name = "drops";
  o.adapter = adapter;
  o.path = path;
  return open_source(o);
}

portable_type of(type_kind k) { return portable_type::of(k); }

/// Why a table cannot load: its catalog's reason, or else its read's error; "" if it loads.
std::string failure_of(source& src, const source_table& table) {
  if (!table.unreadable.empty())
    return table.unreadable;
  try {
    (void)read_all(src, table);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("csv column types are inferred by duckdb and each file is a table") {
  temp_dir dir;
  write_file(dir.file("orders.csv"),
             "id,amount,name,day,at,paid\n"
             "1,12.5,Ann,2024-01-02,2024-01-02 03:04:05,true\n"
             "2,-3.25,\"Bob, Jr.\",2024-01-03,2024-01-03 00:00:00.5,false\n"
             "3,,,,,\n");
  write_file(dir.file("customers.csv"), "id,name\n1,x\n");
  write_file(dir.file("notes.txt"), "not a table\n");
  auto src = open_files("csv", dir.path.string());
  CHECK(src->adapter() == "csv");
  const catalog cat = src->read_catalog();
  REQUIRE(cat.tables.size() == 2);
  CHECK(cat.tables[0].name == "customers");
  const auto& orders = find_table(cat, "orders");
  CHECK(orders.inferred);
  CHECK(orders.schema.empty());
  CHECK(orders.marker.has_value());
  const std::vector<std::pair<std::string, portable_type>> expected{
      {"id", of(type_kind::bigint)},        {"amount", of(type_kind::float64)},
      {"name", of(type_kind::text)},        {"day", of(type_kind::date)},
      {"at", of(type_kind::timestamp_ntz)}, {"paid", of(type_kind::boolean)},
  };
  REQUIRE(orders.columns.columns.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].first);
    CHECK(orders.columns.columns[i].name == expected[i].first);
    CHECK(orders.columns.columns[i].type == expected[i].second);
    CHECK(orders.columns.columns[i].nullable);
  }

  const auto r = read_all(*src, orders);
  REQUIRE(r.rows.size() == 3);
  CHECK(r.rows[0] == std::vector<value>{integer(1), real(12.5), text("Ann"), text("2024-01-02"),
                                        text("2024-01-02 03:04:05"), boolean(true)});
  CHECK(r.rows[1] == std::vector<value>{integer(2), real(-3.25), text("Bob, Jr."),
                                        text("2024-01-03"), text("2024-01-03 00:00:00.5"),
                                        boolean(false)});
  CHECK(r.rows[2] == std::vector<value>{integer(3), null(), null(), null(), null(), null()});
}

TEST_CASE("a csv read parses the file with the dialect and types its catalog found") {
  // A semicolon file with CRLF line ends, quoted delimiters and a quote doubled inside a
  // value: the catalog finds all of it from every row, and the read (which does not
  // infer again) parses the file the same way.
  temp_dir dir;
  write_file(dir.file("t.csv"),
             "id;day;note\r\n1;2024-03-15;\"a;b\"\r\n2;2023-12-31;\"say \"\"hi\"\"\"\r\n3;;\r\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "t");
  REQUIRE(t.unreadable.empty());
  CHECK_THAT(t.reader, Catch::Contains("auto_detect = false") && Catch::Contains("delim = ';'"));
  CHECK(find_column(t, "day").type == of(type_kind::date));
  const auto r = read_all(*src, t);
  REQUIRE(r.rows.size() == 3);
  CHECK(r.rows[0] == std::vector<value>{integer(1), text("2024-03-15"), text("a;b")});
  CHECK(r.rows[1] == std::vector<value>{integer(2), text("2023-12-31"), text("say \"hi\"")});
  CHECK(r.rows[2] == std::vector<value>{integer(3), null(), null()});
  // A column read as another type than inferred (a pin) is parsed as that type.
  read_request req;
  req.table = &t;
  req.columns = t.columns;
  req.columns.columns[1].type = of(type_kind::text);
  std::vector<value> days;
  (void)src->read(req, [&](flotilla::schema::row_batch&& b) {
    for (std::size_t i = 0; i < b.rows(); ++i)
      days.push_back(b.at(i, 1));
    return true;
  });
  CHECK(days == std::vector<value>{text("2024-03-15"), text("2023-12-31"), null()});
}

TEST_CASE("a csv value in single quotes keeps them, and a one-column file is not split on ';' or '|'") {
  // RFC 4180 quotes with '"' only: left to DuckDB's sniffer, 'A1' was read with "'" as
  // the quote and loaded as A1. A one-column file's header holds no delimiter, so the
  // comma is its delimiter: a URL's query (x=1;y=2) or a|b in a value is not split.
  temp_dir dir;
  write_file(dir.file("codes.csv"), "id,code\n1,'A1'\n2,B2\n");
  write_file(dir.file("urls.csv"), "url\nhttp://a.com/?x=1;y=2\nhttp://b.com/?x=3;y=4\n");
  write_file(dir.file("pipes.csv"), "name\na|b\nc|d\n");
  write_file(dir.file("title.csv"), "My report\na,b\n1,2\n");
  write_file(dir.file("title_semi.csv"), "Report\nid;name\n1;a\n2;b\n");
  write_file(dir.file("title_tab.csv"), "Exported 2024-01-01\nid\tname\n1\ta\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& codes = find_table(cat, "codes");
  REQUIRE(codes.unreadable.empty());
  const auto c = read_all(*src, codes);
  REQUIRE(c.rows.size() == 2);
  CHECK(c.rows[0] == std::vector<value>{integer(1), text("'A1'")});
  for (const char* name : {"urls", "pipes"}) {
    INFO(name);
    const auto& t = find_table(cat, name);
    REQUIRE(t.unreadable.empty());
    REQUIRE(t.columns.columns.size() == 1);
    const auto r = read_all(*src, t);
    REQUIRE(r.rows.size() == 2);
    CHECK(r.rows[0][0] == (std::string(name) == "urls" ? text("http://a.com/?x=1;y=2") : text("a|b")));
  }
  // A title line above the header still fails, saying so.
  for (const char* name : {"title", "title_semi", "title_tab"}) {
    INFO(name);
    CHECK_THAT(find_table(cat, name).unreadable, Catch::Contains("if those lines are a title"));
  }
}

TEST_CASE("a blank line of a one-column csv file is no row, as in a file of more columns") {
  temp_dir dir;
  write_file(dir.file("ids.csv"), "id\n1\n\n2\n\n\n");
  write_file(dir.file("names.csv"), "name\r\nx\r\n\r\n\"\"\r\ny\r\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto ids = read_all(*src, find_table(cat, "ids"));
  CHECK(ids.rows == std::vector<std::vector<value>>{{integer(1)}, {integer(2)}});
  // A quoted empty value is a value: an empty string.
  const auto names = read_all(*src, find_table(cat, "names"));
  CHECK(names.rows == std::vector<std::vector<value>>{{text("x")}, {text("")}, {text("y")}});
}

TEST_CASE("csv dates and timestamps written day- or month-first are text, as written") {
  // 01/02/2024 reads as 1 February or 2 January: DuckDB's sniffer guessed the order from
  // the values, so one file read day-first and the next, once it held 12/25/2024,
  // month-first, changing dates already loaded. Only ISO dates (and timestamps that
  // begin with the year) are inferred; an ISO column beside a US one stays a date.
  temp_dir dir;
  write_file(dir.file("a.csv"), "id,us,iso,at\n1,01/02/2024,2024-03-15,01-02-2024 11:00:00 AM\n"
                                "2,03/04/2024,2024-03-16,03-04-2024 10:00:00 PM\n");
  write_file(dir.file("b.csv"), "id,us,at\n1,01/02/2024,2024-01-02 11:00:00\n"
                                "2,12/25/2024,2024-12-25 22:00:00.5\n");
  // The sniffer guesses one timestamp format for the file: an ISO column after a US one
  // is typed as an ISO timestamp column still.
  write_file(dir.file("c.csv"), "id,local,created\n1,20.03.2024 10:00:00,2024-03-15T10:00:00\n"
                                "2,21.03.2024 09:00:00,2024-03-16T11:00:00+01:00\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& a = find_table(cat, "a");
  REQUIRE(a.unreadable.empty());
  CHECK(find_column(a, "us").type == of(type_kind::text));
  CHECK(find_column(a, "iso").type == of(type_kind::date));
  CHECK(find_column(a, "at").type == of(type_kind::text));
  const auto ra = read_all(*src, a);
  REQUIRE(ra.rows.size() == 2);
  CHECK(ra.rows[0] == std::vector<value>{integer(1), text("01/02/2024"), text("2024-03-15"),
                                         text("01-02-2024 11:00:00 AM")});
  const auto& b = find_table(cat, "b");
  CHECK(find_column(b, "us").type == of(type_kind::text));
  CHECK(find_column(b, "at").type == of(type_kind::timestamp_ntz));
  const auto rb = read_all(*src, b);
  REQUIRE(rb.rows.size() == 2);
  CHECK(rb.rows[1] == std::vector<value>{integer(2), text("12/25/2024"),
                                         text("2024-12-25 22:00:00.5")});
  const auto& c = find_table(cat, "c");
  CHECK(find_column(c, "local").type == of(type_kind::text));
  CHECK(find_column(c, "created").type == of(type_kind::timestamp_tz));
  const auto rc = read_all(*src, c);
  REQUIRE(rc.rows.size() == 2);
  CHECK(rc.rows[0][1] == text("20.03.2024 10:00:00"));
}

TEST_CASE("json dates and timestamps are inferred only from their ISO forms") {
  temp_dir dir;
  write_file(dir.file("e.ndjson"),
             "{\"id\": 1, \"d\": \"2024-03-15\", \"us\": \"01/02/2024\", \"at\": \"01-02-2024 11:00:00 AM\", \"ts\": \"2024-01-02 03:04:05\", \"ms\": \"2024-03-15 10:00:00.250\"}\n"
             "{\"id\": 2, \"d\": \"2024-03-16\", \"us\": \"03/04/2024\", \"at\": \"03-04-2024 10:00:00 PM\", \"ts\": \"2024-01-03 00:00:00\", \"ms\": \"2024-03-16 11:30:00.5\"}\n");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& e = find_table(cat, "e");
  CHECK(find_column(e, "d").type == of(type_kind::date));
  CHECK(find_column(e, "us").type == of(type_kind::text));
  CHECK(find_column(e, "at").type == of(type_kind::text));
  CHECK(find_column(e, "ts").type == of(type_kind::timestamp_ntz));
  CHECK(find_column(e, "ms").type == of(type_kind::timestamp_ntz));
  // Values with and without fractions of a second, which no one format of the reader's
  // reads: still timestamps.
  write_file(dir.file("mix.ndjson"), "{\"id\": 1, \"ts\": \"2024-03-15 10:00:00\"}\n"
                                     "{\"id\": 2, \"ts\": \"2024-03-16 11:30:00.5\"}\n");
  const catalog again = src->read_catalog();
  CHECK(find_column(find_table(again, "mix"), "ts").type == of(type_kind::timestamp_ntz));
  CHECK(read_all(*src, find_table(again, "mix")).rows[1][1] == text("2024-03-16 11:30:00.5"));
  const auto r = read_all(*src, e);
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0] == std::vector<value>{integer(1), text("2024-03-15"), text("01/02/2024"),
                                        text("01-02-2024 11:00:00 AM"),
                                        text("2024-01-02 03:04:05"),
                                        text("2024-03-15 10:00:00.25")});
}

TEST_CASE("json timestamps in ISO-8601 with T and an offset are timestamps, as in csv") {
  // What JavaScript's toISOString() writes, and most APIs: the reader's own inference
  // left it text.
  temp_dir dir;
  write_file(dir.file("api.ndjson"),
             "{\"id\": 1, \"at\": \"2024-03-15T10:00:00Z\", \"local\": \"2024-03-15T10:00:00\", "
             "\"off\": \"2024-03-15T10:00:00+02:00\", \"odd\": \"2024-03-15T10:00\"}\n"
             "{\"id\": 2, \"at\": \"2024-03-15T11:30:00.123Z\", \"local\": \"2024-03-15 10:00:01.5\", "
             "\"off\": null, \"odd\": \"2024-03-15T10:00\"}\n");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "api");
  CHECK(find_column(t, "at").type == of(type_kind::timestamp_tz));
  CHECK(find_column(t, "local").type == of(type_kind::timestamp_ntz));
  CHECK(find_column(t, "off").type == of(type_kind::timestamp_tz));
  CHECK(find_column(t, "odd").type == of(type_kind::text));  // no seconds: not ISO enough
  const auto r = read_all(*src, t);
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0] == std::vector<value>{integer(1), text("2024-03-15 10:00:00+00"),
                                        text("2024-03-15 10:00:00"), text("2024-03-15 08:00:00+00"),
                                        text("2024-03-15T10:00")});
  CHECK(r.rows[1][1] == text("2024-03-15 11:30:00.123+00"));
  CHECK(r.rows[1][2] == text("2024-03-15 10:00:01.5"));
}

TEST_CASE("json timestamps all in whole seconds with a Z keep their UTC offset") {
  // DuckDB's JSON reader types these TIMESTAMP, dropping the Z; a later value with
  // another offset would then have outgrown the column.
  temp_dir dir;
  write_file(dir.file("feed.ndjson"), "{\"id\": 1, \"ts\": \"2024-01-01T10:00:00Z\"}\n"
                                      "{\"id\": 2, \"ts\": \"2024-01-01T11:00:00Z\"}\n");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "feed");
  CHECK(find_column(t, "ts").type == of(type_kind::timestamp_tz));
  const auto r = read_all(*src, t);
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0][1] == text("2024-01-01 10:00:00+00"));
}

TEST_CASE("a csv or json file changed after its catalog was read fails the read") {
  // Read with the catalog's header order and types, a file replaced in between would
  // load a's values as b's: the read refuses it, and the next run reads it afresh.
  temp_dir dir;
  write_file(dir.file("t.csv"), "a,b\n1,10\n2,20\n");
  write_file(dir.file("e.ndjson"), "{\"a\": 1}\n");
  auto csv = open_files("csv", dir.path.string());
  auto json = open_files("json", dir.path.string());
  const catalog cc = csv->read_catalog();
  const catalog jc = json->read_catalog();
  CHECK(read_all(*csv, find_table(cc, "t")).rows.size() == 2);
  write_file(dir.file("t.csv.new"), "b,a\n10,1\n20,2\n");
  std::filesystem::rename(dir.file("t.csv.new"), dir.file("t.csv"));
  write_file(dir.file("e.ndjson"), "{\"a\": 1.75}\n");
  CHECK_THROWS_WITH(read_all(*csv, find_table(cc, "t")),
                    Catch::Contains("t.csv") && Catch::Contains("the file changed after this run read its columns"));
  CHECK_THROWS_WITH(read_all(*json, find_table(jc, "e")),
                    Catch::Contains("the file changed after this run read its columns"));
  const catalog again = csv->read_catalog();
  const auto r = read_all(*csv, find_table(again, "t"));
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0] == std::vector<value>{integer(10), integer(1)});
}

TEST_CASE("a json record with an empty key fails its table") {
  // DuckDB names such a column C1, which no record has: it would load as NULLs. The
  // message names the line of the first one; a key ending in an escaped quote is not one.
  temp_dir dir;
  write_file(dir.file("e.ndjson"), "{\"id\": 0, \"a\\\"\": 5}\n"
                                   "{\"id\": 1, \"\": \"five\"}\n{\"id\": 2, \"\": \"six\"}\n");
  write_file(dir.file("ok.ndjson"), "{\"id\": 1, \"C1\": \"named so\"}\n");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "e").unreadable,
             Catch::Contains("e.ndjson") && Catch::Contains("line 2: a record has an empty key"));
  const auto& ok = find_table(cat, "ok");
  REQUIRE(ok.unreadable.empty());
  CHECK(read_all(*src, ok).rows[0] == std::vector<value>{integer(1), text("named so")});
}

TEST_CASE("a json record repeating a key fails its table, naming the line, in Flotilla's words") {
  // DuckDB's advice named its reader's options (ignore_errors would drop the record).
  temp_dir dir;
  write_file(dir.file("events.ndjson"), "{\"id\":1,\"a\":1}\n{\"id\":2,\"a\":2}\n{\"id\":3,\"a\":3,\"a\":4}\n");
  auto src = open_files("json", dir.path.string());
  std::string error;
  try {
    const catalog cat = src->read_catalog();
    error = find_table(cat, "events").unreadable;
    if (error.empty())
      (void)read_all(*src, find_table(cat, "events"));
  } catch (const std::exception& e) {
    error = e.what();
  }
  CHECK_THAT(error, Catch::Contains("events.ndjson") &&
                        Catch::Contains("line 3 repeats key \"a\" in one record") &&
                        !Catch::Contains("ignore_errors"));
}

TEST_CASE("a json record that is not an object fails its table, naming its line") {
  // Left to DuckDB's guess, one such line made the whole file one `json` column: the
  // table lost its columns and every row its values.
  temp_dir dir;
  write_file(dir.file("lines.json"), "{\"id\": 1, \"name\": \"a\"}\n\n{\"id\": 2, \"name\": \"b\"}\n"
                                     "[3, \"c\"]\n");
  write_file(dir.file("number.json"), "{\"id\": 1}\n42\n");
  // Records that are all empty objects: objects, but no key makes a column.
  write_file(dir.file("empty.json"), "{}\n{}\n");
  write_file(dir.file("array.json"), "[{\"id\": 1}, {\"id\": 2}, \"three\"]");
  // A UTF-8 BOM before the array: read as the array of records it is.
  write_file(dir.file("bom.json"), "\xEF\xBB\xBF[{\"id\": 1, \"v\": \"a\"},\n {\"id\": 2, \"v\": \"b\"}]\n");
  write_file(dir.file("pretty.json"), "{\n  \"id\": 1,\n  \"tags\": [\n    1\n  ]\n}\n{\"id\": 2, \"tags\": []}\n");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "lines").unreadable,
             Catch::Contains("lines.json") &&
                 Catch::Contains("line 4 holds an array ([3, \"c\"]), not a JSON object") &&
                 Catch::Contains("must be one record"));
  CHECK_THAT(find_table(cat, "number").unreadable,
             Catch::Contains("line 2 holds a number (42), not a JSON object"));
  CHECK_THAT(find_table(cat, "empty").unreadable,
             Catch::Contains("no record of the file has a key") &&
                 !Catch::Contains("not a JSON object"));
  CHECK_THAT(find_table(cat, "array").unreadable,
             Catch::Contains("record 3 of the file's array is a string, not a JSON object"));
  // A record spread over several lines is one record: its lines are no values of their own.
  const auto& bom = find_table(cat, "bom");
  REQUIRE(bom.unreadable.empty());
  const auto bom_rows = read_all(*src, bom).rows;
  REQUIRE(bom_rows.size() == 2);
  CHECK(bom_rows[1] == std::vector<value>{integer(2), text("b")});
  const auto& pretty = find_table(cat, "pretty");
  REQUIRE(pretty.unreadable.empty());
  CHECK(read_all(*src, pretty).rows.size() == 2);
}

TEST_CASE("a json record that is null fails its table at the read; a null inside a value does not") {
  // DuckDB loads a null record as a row of NULLs.
  temp_dir dir;
  write_file(dir.file("lines.json"), "{\"id\": 1}\n  null \n");
  write_file(dir.file("array.json"), "[{\"id\": 1},\n null]");
  write_file(dir.file("inner.json"), "{\"id\": 1, \"tags\": [\n  null\n], \"s\": \"{[\"}\n{\"id\": 2, \"tags\": []}\n");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THROWS_WITH(read_all(*src, find_table(cat, "lines")),
                    Catch::Contains("line 2 holds null, not a JSON object"));
  CHECK_THROWS_WITH(read_all(*src, find_table(cat, "array")),
                    Catch::Contains("record 2 of the file's array is null"));
  CHECK(read_all(*src, find_table(cat, "inner")).rows.size() == 2);
}

TEST_CASE("a single csv file is one table named after its stem") {
  temp_dir dir;
  write_file(dir.file("daily sales.csv"), "amount,note\n1.50,ünïcødé ✓\n");
  auto src = open_files("csv", dir.file("daily sales.csv"));
  const catalog cat = src->read_catalog();
  REQUIRE(cat.tables.size() == 1);
  const auto& t = cat.tables[0];
  CHECK(t.name == "daily sales");
  // A contract can ask for the exact decimal the file spells.
  read_request req;
  req.table = &t;
  req.columns.columns = {{"amount", portable_type::decimal(10, 2)}, {"note", of(type_kind::text)}};
  std::vector<value> row;
  src->read(req, [&](flotilla::schema::row_batch&& b) {
    row = {b.at(0, 0), b.at(0, 1)};
    return true;
  });
  CHECK(row == std::vector<value>{text("1.50"), text("ünïcødé ✓")});
}

TEST_CASE("hidden files in a csv or json directory are no tables; one named as path is") {
  temp_dir dir;
  write_file(dir.file("orders.csv"), "id\n1\n");
  // A Mac's metadata beside a copied file (not text at all), and a file a sync tool is
  // still writing.
  write_file(dir.file("._orders.csv"), std::string("\0\5\26\7\0\2\0\0", 8));
  write_file(dir.file(".orders.csv"), "id\n1\n2\n");
  write_file(dir.file(".events.ndjson"), "{\"id\": 1}\n");
  write_file(dir.file("events.ndjson"), "{\"id\": 2}\n");
  const catalog csv = open_files("csv", dir.path.string())->read_catalog();
  REQUIRE(csv.tables.size() == 1);
  CHECK(csv.tables[0].name == "orders");
  const catalog json = open_files("json", dir.path.string())->read_catalog();
  REQUIRE(json.tables.size() == 1);
  CHECK(json.tables[0].name == "events");
  auto one = open_files("csv", dir.file(".orders.csv"));
  const catalog named = one->read_catalog();
  REQUIRE(named.tables.size() == 1);
  CHECK(named.tables[0].name == ".orders");
  CHECK(read_all(*one, named.tables[0]).rows.size() == 2);
}

namespace {

void write_gzip(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, content.data(), static_cast<unsigned>(content.size())) ==
          static_cast<int>(content.size()));
  gzclose(f);
}

void write_zstd(const std::string& path, const std::string& content) {
  std::string packed(ZSTD_compressBound(content.size()), '\0');
  const auto n = ZSTD_compress(packed.data(), packed.size(), content.data(), content.size(), 3);
  REQUIRE_FALSE(ZSTD_isError(n));
  packed.resize(n);
  write_file(path, packed);
}

}  // namespace

TEST_CASE("a compressed csv or json file gets every check an unpacked one gets, named as it is") {
  temp_dir dir;
  // Two keys differing by case: unpacked, the file fails; read compressed by DuckDB alone,
  // the second one's values were lost.
  write_gzip(dir.file("cc.ndjson.gz"), "{\"id\":1,\"Name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}\n");
  auto cc = open_files("json", dir.file("cc.ndjson.gz"));
  const catalog cat = cc->read_catalog();
  REQUIRE(cat.tables.size() == 1);
  CHECK(cat.tables[0].name == "cc");
  CHECK_THAT(cat.tables[0].unreadable,
             Catch::Contains("differ only in case") && Catch::Contains(dir.file("cc.ndjson.gz")) &&
                 !Catch::Contains("flotilla-unpacked"));
  // A JSON array cut short.
  write_gzip(dir.file("cut.json.gz"), "[{\"id\":1},\n{\"id\":2},\n");
  auto cut_src = open_files("json", dir.file("cut.json.gz"));
  const catalog cut = cut_src->read_catalog();
  CHECK_THAT(failure_of(*cut_src, cut.tables[0]), Catch::Contains("cut short") && Catch::Contains("cut.json.gz"));
  // A blank line of a one-column file is no row, compressed or not.
  write_zstd(dir.file("v.csv.zst"), "v\na\n\nb\n");
  auto v = open_files("csv", dir.file("v.csv.zst"));
  const catalog vc = v->read_catalog();
  REQUIRE(vc.tables.size() == 1);
  CHECK(vc.tables[0].name == "v");
  CHECK(vc.tables[0].unreadable.empty());
  const auto rows = read_all(*v, vc.tables[0]);
  CHECK(rows.rows == std::vector<std::vector<value>>{{text("a")}, {text("b")}});
  // An unchanged compressed file keeps its marker from run to run (prune_unchanged).
  const catalog again = open_files("csv", dir.file("v.csv.zst"))->read_catalog();
  REQUIRE(again.tables[0].marker.has_value());
  CHECK(again.tables[0].marker == vc.tables[0].marker);
  // A file whose name says zstd and is not: named, with what to do.
  write_file(dir.file("bad.csv.zst"), "id\n1\n");
  CHECK_THROWS_WITH(open_files("csv", dir.file("bad.csv.zst"))->read_catalog(),
                    Catch::Contains("bad.csv.zst") && Catch::Contains("not a zstd file"));
  write_file(dir.file("bad.csv.gz"), "id\n1\n");
  CHECK_THROWS_WITH(open_files("csv", dir.file("bad.csv.gz"))->read_catalog(),
                    Catch::Contains("bad.csv.gz") && Catch::Contains("not a gzip file"));
}

TEST_CASE("json and ndjson files are inferred, nested values read as json") {
  temp_dir dir;
  write_file(dir.file("events.ndjson"),
             "{\"id\": 1, \"kind\": \"click\", \"at\": \"2024-01-02 03:04:05\", \"ctx\": {\"x\": [1, 2]}, \"score\": 1.5}\n"
             "{\"id\": 2, \"kind\": null, \"at\": \"2024-01-03 00:00:00\", \"ctx\": {\"x\": []}, \"score\": null}\n");
  write_file(dir.file("users.json"), R"([{"id": 7, "name": "Zoë", "admin": true}])");
  auto src = open_files("json", dir.path.string());
  CHECK(src->adapter() == "json");
  const catalog cat = src->read_catalog();
  REQUIRE(cat.tables.size() == 2);
  const auto& events = find_table(cat, "events");
  CHECK(events.inferred);
  CHECK(find_column(events, "id").type == of(type_kind::bigint));
  CHECK(find_column(events, "kind").type == of(type_kind::text));
  CHECK(find_column(events, "at").type == of(type_kind::timestamp_ntz));
  CHECK(find_column(events, "ctx").type == of(type_kind::json));
  CHECK(find_column(events, "score").type == of(type_kind::float64));
  const auto r = read_all(*src, events, {"id", "ctx", "kind", "at"}, "id", "1");
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0] == std::vector<value>{integer(2), text("{\"x\":[]}"), null(),
                                        text("2024-01-03 00:00:00")});
  CHECK(r.result.max_cursor == "2");

  const auto users = read_all(*src, find_table(cat, "users"));
  REQUIRE(users.rows.size() == 1);
  CHECK(users.rows[0] == std::vector<value>{integer(7), text("Zoë"), boolean(true)});
}

TEST_CASE("a malformed csv row is an error naming the file and the line") {
  temp_dir dir;
  std::string content = "id,name,amount\n";
  for (int i = 1; i <= 50; ++i)
    content += std::to_string(i) + ",n" + std::to_string(i) + "," + std::to_string(i) + ".5\n";
  content += "51,x,1,extra\n52,y,2\n";
  write_file(dir.file("bad.csv"), content);
  write_file(dir.file("good.csv"), "id\n1\n");
  // A surplus field on the last line: DuckDB's sniffer would skip every line before it.
  write_file(dir.file("last.csv"), "id,name\n1,alice\n2,bob\n3,carol,x,y\n");
  auto src = open_files("csv", dir.path.string());
  // The malformed file's table says why it cannot be read; the source's others can.
  const catalog cat = src->read_catalog();
  const auto& bad = find_table(cat, "bad");
  CHECK_THAT(bad.unreadable, Catch::Contains("table 'bad' of source 'drops'") &&
                                 Catch::Contains("bad.csv") && Catch::Contains("Line: 52") &&
                                 Catch::Contains("51,x,1,extra"));
  CHECK(bad.columns.columns.empty());
  CHECK_FALSE(bad.marker);
  CHECK(find_table(cat, "good").unreadable.empty());
  CHECK_THAT(find_table(cat, "last").unreadable, Catch::Contains("Line: 4"));
  CHECK(read_all(*src, find_table(cat, "good")).rows.size() == 1);
}

TEST_CASE("a csv line ending in a surplus delimiter fails the table naming the line, rather "
          "than loading each line as one value") {
  temp_dir dir;
  // DuckDB's sniffer settles on one column, named after the header line, holding whole
  // lines; its strict read takes the surplus delimiter. Neither may load.
  write_file(dir.file("orders.csv"), "id,name,amount\n1,alice,10\n2,bob,20,\n3,carol,30\n");
  write_file(dir.file("semi.csv"), "id;name\r\n1;a\r\n\r\n2;b;\r\n3;c\r\n");
  write_file(dir.file("good.csv"), "id,name\n1,\"a,\nb\"\n\n2,c\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "orders").unreadable,
             Catch::Contains("line 3 has 4 field(s) where the header (line 1) has 3") &&
                 Catch::Contains("remove a ',' at the end of a line"));
  CHECK(find_table(cat, "orders").columns.columns.empty());
  // The line as counted in the file (CRLF, an empty line), the delimiter the header's.
  CHECK_THAT(find_table(cat, "semi").unreadable,
             Catch::Contains("line 4 has 3 field(s) where the header (line 1) has 2") &&
                 Catch::Contains("remove a ';'"));
  const auto& good = find_table(cat, "good");
  CHECK(good.unreadable.empty());
  CHECK(good.columns.columns.size() == 2);
}

TEST_CASE("a surplus field on the last line of a file of numbers names that line, not the header") {
  temp_dir dir;
  write_file(dir.file("lastextra.csv"), "id,a\n1,2\n2,3\n3,4,5\n");
  write_file(dir.file("noheader.csv"), "1,2\n2,3\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "lastextra").unreadable,
             !Catch::Contains("numbers only") &&
                 (Catch::Contains("line 4") || Catch::Contains("Line: 4")));
  CHECK_THAT(find_table(cat, "noheader").unreadable, Catch::Contains("numbers only"));
}

TEST_CASE("csv dates infinity, -infinity and epoch load as themselves, not as 1900-01-01") {
  temp_dir dir;
  write_file(dir.file("d.csv"), "id,d\n1,2024-01-01\n2,infinity\n3,-infinity\n4,epoch\n5,2024-1-5\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "d");
  CHECK(find_column(t, "d").type == of(type_kind::date));
  const auto r = read_all(*src, t);
  REQUIRE(r.rows.size() == 5);
  CHECK(r.rows[0][1] == text("2024-01-01"));
  CHECK(r.rows[1][1] == text("infinity"));
  CHECK(r.rows[2][1] == text("-infinity"));
  CHECK(r.rows[3][1] == text("1970-01-01"));
  CHECK(r.rows[4][1] == text("2024-01-05"));
}

TEST_CASE("a csv quote is escaped by doubling it only: backslashes in quoted values are kept") {
  temp_dir dir;
  write_file(dir.file("paths.csv"), "id,path\n1,\"C:\\Users\\bob\"\n2,\"a \"\"q\"\" b\\\"\n");
  // One backslash-escaped quote: the value closes its quote early, so the file fails
  // naming the line, rather than every quoted value losing its backslashes.
  write_file(dir.file("mixed.csv"), "id,path\n1,\"C:\\Users\\bob\"\n2,\"he said \\\"hi\\\"\"\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto r = read_all(*src, find_table(cat, "paths"));
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0][1] == text("C:\\Users\\bob"));
  CHECK(r.rows[1][1] == text("a \"q\" b\\"));
  CHECK_THAT(failure_of(*src, find_table(cat, "mixed")), Catch::Contains("mixed.csv") &&
                         Catch::Contains("line: 3;", Catch::CaseSensitive::No) &&
                         Catch::Contains("unterminated quote"));
}

TEST_CASE("a UTF-16 csv file, or one with a line over 2 MiB, fails its table saying so") {
  temp_dir dir;
  // "id,v\n1,a\n" in UTF-16LE with its byte order mark.
  std::string utf16 = "\xff\xfe";
  for (char c : std::string("id,v\n1,a\n")) {
    utf16 += c;
    utf16 += '\0';
  }
  write_file(dir.file("wide.csv"), utf16);
  write_file(dir.file("bare.csv"), utf16.substr(2));  // no byte order mark
  write_file(dir.file("long.csv"),
             "id,big\n1," + std::string(100, 'x') + "\n2," + std::string(2'200'000, 'y') + "\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "wide").unreadable,
             Catch::Contains("UTF-16") && Catch::Contains("iconv -f utf-16 -t utf-8") &&
                 !Catch::Contains("latin1"));
  CHECK_THAT(find_table(cat, "bare").unreadable,
             Catch::Contains("UTF-16 text without a byte order mark") &&
                 Catch::Contains("iconv -f utf-16le -t utf-8"));
  CHECK_THAT(find_table(cat, "long").unreadable,
             Catch::Contains("line 3 is longer than the 2 MiB") && !Catch::Contains("max_line_size"));
}

TEST_CASE("a file whose name holds pattern characters is read as itself, never as a pattern") {
  // DuckDB's readers take `[1]` and `*` for a pattern: orders[1].csv read orders1.csv.
  temp_dir dir;
  std::filesystem::create_directories(dir.path / "in");
  write_file((dir.path / "in" / "orders[1].csv").string(), "id,v\n1,own\n2,own\n");
  write_file((dir.path / "in" / "orders1.csv").string(), "id,v\n9,other\n");
  write_file((dir.path / "in" / "ev*.csv").string(), "id,v\n5,star\n");
  write_file((dir.path / "in" / "ev1.csv").string(), "id,v\n6,one\n");
  auto src = open_files("csv", (dir.path / "in").string());
  const catalog cat = src->read_catalog();
  REQUIRE(cat.tables.size() == 4);
  const auto bracket = read_all(*src, find_table(cat, "orders[1]"));
  REQUIRE(bracket.rows.size() == 2);
  CHECK(bracket.rows[0][1] == text("own"));
  const auto star = read_all(*src, find_table(cat, "ev*"));
  REQUIRE(star.rows.size() == 1);
  CHECK(star.rows[0][1] == text("star"));
  // An error names the file, not the link it is read through.
  write_file((dir.path / "in" / "bad[2].csv").string(), "id,v\n1,\"open\n");
  auto again = open_files("csv", (dir.path / "in").string());
  const catalog cat2 = again->read_catalog();
  CHECK_THAT(failure_of(*again, find_table(cat2, "bad[2]")),
             Catch::Contains("bad[2].csv") && !Catch::Contains("flotilla-unpacked"));
}

TEST_CASE("a csv column of hexadecimal or binary codes is text, loaded as written") {
  // DuckDB's sniffer types 0x1F as an integer, and its cast reads it as 31.
  temp_dir dir;
  write_file(dir.file("codes.csv"), "id,code,n\n1,0x00,5\n2,0x1F,6\n3,0b101,7\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const source_table& codes = find_table(cat, "codes");
  CHECK(codes.columns.find("code", flotilla::schema::name_rule::case_sensitive)->type.kind ==
        flotilla::schema::type_kind::text);
  CHECK(codes.columns.find("n", flotilla::schema::name_rule::case_sensitive)->type.kind ==
        flotilla::schema::type_kind::bigint);
  const auto r = read_all(*src, codes);
  REQUIRE(r.rows.size() == 3);
  CHECK(r.rows[1][1] == text("0x1F"));
  CHECK(r.rows[2][1] == text("0b101"));
}

TEST_CASE("a csv file whose extension is upper case is a table, read as any other") {
  temp_dir dir;
  write_file(dir.file("a.csv"), "id,v\n1,x\n");
  write_file(dir.file("UPPER.CSV"), "id,w\n1,y\n2,z\n");
  write_file(dir.file("notes.txt"), "id\n1\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  REQUIRE(cat.tables.size() == 2);
  const source_table& upper = find_table(cat, "UPPER");
  CHECK(upper.unreadable.empty());
  CHECK(read_all(*src, upper).rows.size() == 2);
}

TEST_CASE("a database or binary file under a csv source fails its table naming what it is") {
  temp_dir dir;
  write_file(dir.file("db.csv"), std::string("SQLite format 3\0", 16) + std::string(200, '\0'));
  write_file(dir.file("duck.csv"), std::string(8, '\x01') + "DUCK" + std::string(200, '\0'));
  write_file(dir.file("pq.csv"), "PAR1" + std::string(200, '\0'));
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "db").unreadable,
             Catch::Contains("the file is a SQLite database, not text") &&
                 Catch::Contains("adapter = \"sqlite\"") && !Catch::Contains("UTF-16"));
  CHECK_THAT(find_table(cat, "duck").unreadable,
             Catch::Contains("the file is a DuckDB database, not text"));
  CHECK_THAT(find_table(cat, "pq").unreadable, Catch::Contains("Parquet"));
}

TEST_CASE("a csv record over 2 MiB in short lines (a quoted value spanning them) names its line") {
  temp_dir dir;
  std::string value;
  for (int i = 0; i < 3000; ++i)
    value += std::string(999, 'y') + "\n";
  write_file(dir.file("ml.csv"), "id,big\n1,\"" + value + "\"\n2,z\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(failure_of(*src, find_table(cat, "ml")), Catch::Contains("the record that begins on line 2 is longer than the 2 MiB") &&
                          !Catch::Contains("max_line_size") && !Catch::Contains("yyyyyyyy"));
}

TEST_CASE("a '#' in a csv file is a value, never a comment") {
  temp_dir dir;
  write_file(dir.file("orders.csv"), "order_no,amount\n1001,5.00\n#1002,7.50\n1003,9.25\n");
  write_file(dir.file("tags.csv"), "id,v\n1,a\n#2,b\n3,c#tag\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto orders = read_all(*src, find_table(cat, "orders"), {"order_no"});
  REQUIRE(orders.rows.size() == 3);
  CHECK(orders.rows[1][0] == text("#1002"));
  const auto tags = read_all(*src, find_table(cat, "tags"));
  REQUIRE(tags.rows.size() == 3);
  CHECK(tags.rows[1][0] == text("#2"));
  CHECK(tags.rows[2][1] == text("c#tag"));
}

TEST_CASE("a malformed csv row beyond DuckDB's default sample fails the table with its line") {
  temp_dir dir;
  std::string content = "id,name\n";
  for (int i = 1; i <= 30000; ++i)
    content += std::to_string(i) + ",n" + std::to_string(i) + "\n";
  content += "30001,x,surplus\n";
  write_file(dir.file("late.csv"), content);
  auto src = open_files("csv", dir.file("late.csv"));
  const catalog cat = src->read_catalog();
  // The whole file is sniffed, so the catalog already knows (plan shows it).
  const auto& t = find_table(cat, "late");
  CHECK_THAT(t.unreadable, Catch::Contains("table 'late' of source 'drops'") &&
                               Catch::Contains("late.csv") && Catch::Contains("Line: 30002"));
}

TEST_CASE("csv and ndjson types come from every row: a later value is never cast to a guess "
          "made from the first ones") {
  temp_dir dir;
  std::string csv = "id,amount,paid_on\n", ndjson;
  for (int i = 0; i < 25000; ++i) {
    csv += std::to_string(i) + "," + std::to_string(i) + ",2024-01-01\n";
    ndjson += "{\"id\": " + std::to_string(i) + ", \"kind\": \"view\"}\n";
  }
  csv += "25000,1.75,2024-03-05 17:45:00\n";
  ndjson += "{\"id\": 25000, \"kind\": \"buy\", \"coupon\": \"X1\"}\n";
  write_file(dir.file("pay.csv"), csv);
  write_file(dir.file("events.ndjson"), ndjson);
  {
    auto src = open_files("csv", dir.file("pay.csv"));
    const catalog cat = src->read_catalog();
    const auto& t = find_table(cat, "pay");
    CHECK(find_column(t, "amount").type == portable_type::of(type_kind::float64));
    CHECK(find_column(t, "paid_on").type == portable_type::of(type_kind::timestamp_ntz));
    const auto r = read_all(*src, t, {"amount", "paid_on"});
    REQUIRE(r.rows.size() == 25001);
    CHECK(r.rows.back()[0] == real(1.75));
    CHECK(r.rows.back()[1] == text("2024-03-05 17:45:00"));
  }
  {
    auto src = open_files("json", dir.file("events.ndjson"));
    const catalog cat = src->read_catalog();
    const auto& t = find_table(cat, "events");
    REQUIRE(t.columns.find("coupon", flotilla::schema::name_rule::case_sensitive) != nullptr);
    const auto r = read_all(*src, t, {"coupon"});
    REQUIRE(r.rows.size() == 25001);
    CHECK(r.rows.back()[0] == text("X1"));
  }
}

TEST_CASE("a csv value that opens a quote and never closes it fails the read with its line") {
  // DuckDB's sniffer settles on no quoting for such a file, which would load `"bob` and
  // cut the value at the comma; the read names the line instead.
  temp_dir dir;
  write_file(dir.file("t.csv"), "id,name,note\n1,ann,ok\n2,\"bob,late\n3,cy,fine\n");
  write_file(dir.file("s.csv"), "id;name\n1;x\n2;\"y\n");
  write_file(dir.file("s2.csv"), "id;name\n1;alice\n2;\"bob;late\n3;carol\n");
  // Quotes inside a value, and values quoted properly, still read.
  write_file(dir.file("inch.csv"), "id,len\n1,5\"\n2,7\n");
  write_file(dir.file("ok.csv"), "id,name\n1,\"a,b\"\n2,c\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  // The catalog finds it (it reads the dialect), so the table fails before any read.
  CHECK_THAT(find_table(cat, "t").unreadable,
             Catch::Contains("t.csv") && Catch::Contains("line 3: a value opens a double quote"));
  CHECK_THAT(find_table(cat, "s").unreadable, Catch::Contains("line 3:"));
  // DuckDB reads that one as a single column of whole lines: its header says otherwise.
  CHECK_THAT(find_table(cat, "s2").unreadable, Catch::Contains("line 3: a value opens"));
  const auto inch = read_all(*src, find_table(cat, "inch"));
  REQUIRE(inch.rows.size() == 2);
  CHECK(inch.rows[0][1] == text("5\""));
  const auto ok = read_all(*src, find_table(cat, "ok"));
  REQUIRE(ok.rows.size() == 2);
  CHECK(ok.rows[0][1] == text("a,b"));
}

TEST_CASE("decimal_fit counts the digits a file's numbers need, or none for a non-decimal") {
  temp_dir dir;
  write_file(dir.file("n.csv"), "a,b,c\n12.50,1.5e3,1\n-0003.1,2,\n+.125,x,2\n");
  write_file(dir.file("j.json"), "{\"a\": 12.50, \"b\": 1.5}\n{\"a\": -3.125, \"b\": "
                                 "1.1234567890123456789}\n");
  auto csv = open_files("csv", dir.file("n.csv"));
  const catalog cat = csv->read_catalog();
  const auto fit = csv->decimal_fit(find_table(cat, "n"), {"a", "b", "c"});
  REQUIRE(fit.size() == 3);
  REQUIRE(fit[0]);
  CHECK(fit[0]->integer == 2);
  CHECK(fit[0]->scale == 3);  // "+.125"; "12.50" keeps the 2 it was written with
  CHECK_FALSE(fit[1]);        // an exponent, and text
  REQUIRE(fit[2]);            // whole numbers and an empty value
  CHECK(fit[2]->scale == 0);
  auto json = open_files("json", dir.file("j.json"));
  const catalog jc = json->read_catalog();
  const auto jf = json->decimal_fit(find_table(jc, "j"), {"a", "b"});
  REQUIRE(jf[0]);
  CHECK(jf[0]->integer == 2);
  CHECK(jf[0]->scale == 3);
  CHECK_FALSE(jf[1]);  // more digits than a double keeps: none claimed
}

TEST_CASE("a json number too long for a double, read as text, asks only for a json string") {
  // The text pin is there already: a JSON number is read as a double before it becomes
  // text, so only the file can keep its digits.
  temp_dir dir;
  write_file(dir.file("n.json"), "[{\"id\": 1, \"q\": 12345678901234567890.123}]\n");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& n = find_table(cat, "n");
  read_request req;
  req.table = &n;
  req.columns = n.columns;
  for (auto& c : req.columns.columns)
    if (c.name == "q")
      c.type = of(type_kind::text);
  CHECK_THROWS_WITH(src->read(req, [](flotilla::schema::row_batch&&) { return true; }),
                    Catch::Contains("write that number as a JSON string") &&
                        Catch::Contains("the text column 'q' keeps exactly") &&
                        !Catch::Contains("columns = {"));
}

TEST_CASE("malformed json is an error naming the file and the line") {
  temp_dir dir;
  write_file(dir.file("bad.ndjson"), "{\"a\": 1}\n{\"a\": 2}\n{\"a\": \n");
  auto src = open_files("json", dir.path.string());
  CHECK_THAT(find_table(src->read_catalog(), "bad").unreadable,
             Catch::Contains("source 'drops'") && Catch::Contains("bad.ndjson") &&
                 Catch::Contains("line"));
}

TEST_CASE("malformed json names the line and column counted from the file's start") {
  temp_dir dir;
  std::string lines;
  for (int i = 1; i <= 3000; ++i)
    lines += i == 2999 ? "{\"id\": 2999, \"v\": x}\n"
                       : fmt::format("{{\"id\": {}, \"v\": {}}}\n", i, i);
  write_file(dir.file("late.json"), lines);
  // A bad first record, and records as one array over several lines.
  write_file(dir.file("first.json"), "{\"id\": 1, \"v\": x}\n{\"id\": 2, \"v\": 2}\n");
  write_file(dir.file("array.json"), "[\n  {\"id\": 1, \"v\": 1},\n  {\"id\": 2, \"v\": x}\n]\n");
  // An array cut short after a whole record, which DuckDB reads as the records before.
  write_file(dir.file("cut.json"), "[{\"id\": 1},\n{\"id\": 2},\n");
  for (const auto& [file, at] : std::vector<std::pair<std::string, std::string>>{
           {"late.json", "line 2999, column 19"},
           {"first.json", "line 1, column 16"},
           {"array.json", "line 3, column 18"},
           {"cut.json", "cut short"}}) {
    CAPTURE(file);
    auto src = open_files("json", dir.file(file));
    std::string message;
    try {
      const catalog cat = src->read_catalog();
      message = cat.tables.at(0).unreadable;
      if (message.empty())
        read_all(*src, cat.tables.at(0));
    } catch (const source_error& e) {
      message = e.what();
    }
    CHECK_THAT(message, Catch::Contains(file) && Catch::Contains("malformed JSON") &&
                            Catch::Contains(at));
  }
}

TEST_CASE("the file marker stays the same without a write and changes after one") {
  temp_dir dir;
  const auto path = dir.file("m.csv");
  write_file(path, "a,b\n1,2\n");
  write_file(dir.file("other.csv"), "a,b\n1,2\n");
  auto marker = [&](const std::string& table) {
    auto src = open_files("csv", dir.path.string());
    return src->read_catalog().find(table)->marker;
  };
  const auto m1 = marker("m");
  REQUIRE(m1.has_value());
  CHECK(marker("m") == m1);
  CHECK(marker("other") != m1);
  write_file(path, "a,b\n1,3\n");  // same size, possibly the same clock tick
  const auto m2 = marker("m");
  CHECK(m2 != m1);
  CHECK(marker("m") == m2);
  write_file(path, "a,b,c\n1,3,4\n");
  CHECK(marker("m") != m2);
}

TEST_CASE("hostile csv column names are quoted") {
  temp_dir dir;
  write_file(dir.file("h.csv"), "\"a \"\"b\"\"; c\",select,sp ace\n1,from,x\n2,where,y\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& t = find_table(cat, "h");
  REQUIRE(t.columns.columns.size() == 3);
  CHECK(t.columns.columns[0].name == "a \"b\"; c");
  auto r = read_all(*src, t, {"sp ace", "select"}, "a \"b\"; c", "1");
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0] == std::vector<value>{text("y"), text("where")});
}

TEST_CASE("a missing csv path is reported with the source and path") {
  temp_dir dir;
  CHECK_THROWS_WITH(open_files("csv", dir.file("nope")),
                    Catch::Contains("source 'drops'") && Catch::Contains("nope") &&
                        Catch::Contains("check path"));
}

TEST_CASE("a csv/json file whose column names differ only in case fails, naming both") {
  temp_dir dir;
  write_file(dir.file("cased.csv"), "id,a,A\n1,x,y\n");
  write_file(dir.file("real.csv"), "id,a,a_1\n1,x,y\n");  // a name of its own: loads
  write_file(dir.file("keys.json"), "{\"id\": 1, \"a\": \"x\", \"A\": \"y\"}\n");
  for (const char* adapter : {"csv", "json"}) {
    auto src = open_files(adapter, dir.path.string());
    const auto cat = src->read_catalog();
    if (std::string(adapter) == "csv") {
      CHECK_THAT(find_table(cat, "cased").unreadable,
                 Catch::Contains("columns 'a' and 'A' differ only in case") &&
                     Catch::Contains("cased.csv"));
      CHECK(find_table(cat, "real").unreadable.empty());
      CHECK(find_table(cat, "real").columns.columns.size() == 3);
    } else {
      CHECK_THAT(find_table(cat, "keys").unreadable,
                 Catch::Contains("columns 'a' and 'A' differ only in case"));
    }
  }
}

TEST_CASE("json objects nested in records read as they are, without other records' keys") {
  temp_dir dir;
  write_file(dir.file("docs.ndjson"), "{\"id\": 1, \"o\": {\"a\": 1}}\n"
                                      "{\"id\": 2, \"o\": {\"b\": [2, {\"c\": null}]}}\n"
                                      "{\"id\": 3, \"o\": {}}\n");
  write_file(dir.file("arr.json"), R"([{"id": 1, "o": {"a": 1}}, {"id": 2, "o": {"b": 2}}])");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& docs = find_table(cat, "docs");
  CHECK(find_column(docs, "o").type == of(type_kind::json));
  auto r = read_all(*src, docs, {"id", "o"});
  REQUIRE(r.rows.size() == 3);
  CHECK(r.rows[0][1] == text("{\"a\":1}"));
  CHECK(r.rows[1][1] == text("{\"b\":[2,{\"c\":null}]}"));
  CHECK(r.rows[2][1] == text("{}"));
  r = read_all(*src, find_table(cat, "arr"), {"id", "o"});
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0] == std::vector<value>{integer(1), text("{\"a\":1}")});
  CHECK(r.rows[1] == std::vector<value>{integer(2), text("{\"b\":2}")});
}

TEST_CASE("a csv whose header DuckDB would take from a later line fails the table, rather than "
          "leave out the lines before it") {
  temp_dir dir;
  write_file(dir.file("notes.csv"), "comment\nhello\nworld\nfine, thanks\n");
  write_file(dir.file("titled.csv"), "Report of 2024-01-01\nid,name\n1,a\n");
  write_file(dir.file("quoted.csv"), "\"id\",\"name\"\n1,a\n");
  write_file(dir.file("bom.csv"), "\xEF\xBB\xBFid,name\n1,a\n");
  write_file(dir.file("blank.csv"), "\n  \nid,name\n1,a\n");  // blank lines hold no rows
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "notes").unreadable,
             Catch::Contains("takes line 4 as the header and would leave out the 3 line(s)"));
  CHECK_THAT(find_table(cat, "titled").unreadable,
             Catch::Contains("takes line 2 as the header") &&
                 Catch::Contains("if those lines are a title, remove them from the file"));
  // A header on the first line, quoted or after a BOM, is the header.
  for (const char* ok : {"quoted", "bom", "blank"}) {
    CAPTURE(ok);
    const auto& t = find_table(cat, ok);
    CHECK(t.unreadable.empty());
    CHECK(read_all(*src, t).rows.size() == 1);
  }
}

TEST_CASE("a csv's first line is its header, numbers in it too; a first line of numbers only "
          "fails the table") {
  temp_dir dir;
  write_file(dir.file("pivot.csv"), "region,2023,2024\neast,10,20\nwest,30,40\n");
  write_file(dir.file("raw.csv"), "1,2\n3,4\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& pivot = find_table(cat, "pivot");
  REQUIRE(pivot.unreadable.empty());
  CHECK(find_column(pivot, "region").name == "region");
  CHECK(find_column(pivot, "2023").type == portable_type::of(type_kind::bigint));
  const auto rows = read_all(*src, pivot).rows;
  REQUIRE(rows.size() == 2);  // the header is no row
  CHECK(rows[0][0] == text("east"));
  CHECK_THAT(find_table(cat, "raw").unreadable,
             Catch::Contains("raw.csv") && Catch::Contains("holds numbers only") &&
                 Catch::Contains("add a header line"));
}

TEST_CASE("an empty csv or json file fails its table: it has no columns to load") {
  temp_dir dir;
  write_file(dir.file("empty.csv"), "");
  write_file(dir.file("blank.csv"), "\n\n");
  write_file(dir.file("ok.csv"), "id\n1\n");
  auto csv = open_files("csv", dir.path.string());
  const catalog cat = csv->read_catalog();
  for (const char* name : {"empty", "blank"}) {
    CAPTURE(name);
    CHECK_THAT(find_table(cat, name).unreadable, Catch::Contains("the file is empty"));
    CHECK(find_table(cat, name).columns.columns.empty());
  }
  CHECK(find_table(cat, "ok").unreadable.empty());
  temp_dir jdir;
  write_file(jdir.file("none.json"), "[]");
  write_file(jdir.file("nothing.ndjson"), "");
  write_file(jdir.file("one.ndjson"), "{\"id\": 1}\n");
  auto json = open_files("json", jdir.path.string());
  const catalog jcat = json->read_catalog();
  CHECK_THAT(find_table(jcat, "none").unreadable, Catch::Contains("the file is empty"));
  CHECK_THAT(find_table(jcat, "nothing").unreadable, Catch::Contains("the file is empty"));
  CHECK(find_table(jcat, "one").unreadable.empty());
}

TEST_CASE("a csv header naming a column twice, or leaving one unnamed, fails the table") {
  temp_dir dir;
  write_file(dir.file("twice.csv"), "a,a,b\n1,2,3\n");
  write_file(dir.file("unnamed.csv"), "a,b,\n1,2,3\n");
  write_file(dir.file("unnamed_first.csv"), ",x\n1,2\n");
  write_file(dir.file("headerless.csv"), "1,2\n3,4\n");  // no header: refused, see below
  write_file(dir.file("numbered.csv"), "a,a_1\n1,2\n");  // the file's own names
  // DuckDB's new name for the second "a" is taken: the one named twice is still "a".
  write_file(dir.file("twice_taken.csv"), "id;a;a;a_1\n1;x;y;z\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "twice").unreadable,
             Catch::Contains("the file has two columns named 'a'"));
  CHECK_THAT(find_table(cat, "twice_taken").unreadable,
             Catch::Contains("the file has two columns named 'a' "));
  CHECK_THAT(find_table(cat, "unnamed").unreadable,
             Catch::Contains("the file's header has no name for its column 3"));
  CHECK_THAT(find_table(cat, "unnamed_first").unreadable,
             Catch::Contains("the file's header has no name for its column 1"));
  CHECK(find_table(cat, "numbered").unreadable.empty());
  // DuckDB would name its columns column0, column1; the first line is the header.
  CHECK_THAT(find_table(cat, "headerless").unreadable, Catch::Contains("add a header line"));
}

TEST_CASE("a latin-1 csv fails saying it is not UTF-8 and how to convert it") {
  temp_dir dir;
  write_file(dir.file("latin1.csv"), "id,name\n1,caf\xe9\n");
  auto src = open_files("csv", dir.file("latin1.csv"));
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "latin1").unreadable,
             Catch::Contains("is not UTF-8 text") && Catch::Contains("iconv -f latin1 -t utf-8") &&
                 !Catch::Contains("ignore_errors"));
}

TEST_CASE("a csv or json number past a double's range fails the read, rather than load as an "
          "infinity or 0") {
  temp_dir dir;
  write_file(dir.file("big.csv"), "id,reading\n1,1e400\n2,2.5\n");
  write_file(dir.file("tiny.csv"), "id,reading\n1,-1e-400\n2,2.5\n");
  write_file(dir.file("fine.csv"), "id,reading\n1,1e300\n2,2.5e-300\n3,4.9e-324\n");
  write_file(dir.file("big.ndjson"), "{\"id\": 1, \"reading\": 2.5}\n{\"id\": 2, \"reading\": -1e999}\n");
  auto csv = open_files("csv", dir.path.string());
  const catalog cat = csv->read_catalog();
  CHECK_THROWS_WITH(read_all(*csv, find_table(cat, "big")),
                    Catch::Contains("column 'reading' holds the number 1e400, past the largest a "
                                    "double holds: it would load as inf"));
  CHECK_THROWS_WITH(read_all(*csv, find_table(cat, "tiny")),
                    Catch::Contains("below the smallest a double holds: it would load as 0"));
  CHECK(read_all(*csv, find_table(cat, "fine")).rows.size() == 3);  // a subnormal is a double
  auto json = open_files("json", dir.file("big.ndjson"));
  const catalog jcat = json->read_catalog();
  CHECK_THROWS_WITH(read_all(*json, find_table(jcat, "big")),
                    Catch::Contains("line 2: column 'reading' holds the number -1e999, past the "
                                    "largest a double holds: it would load as -inf"));
}

TEST_CASE("a csv of a header and no rows says so in the catalog") {
  temp_dir dir;
  write_file(dir.file("header.csv"), "id,sku\n");
  write_file(dir.file("rows.csv"), "id,sku\n1,a\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK(find_table(cat, "header").no_rows);
  CHECK(find_table(cat, "header").unreadable.empty());
  CHECK_FALSE(find_table(cat, "rows").no_rows);
}

TEST_CASE("a csv file whose last row has no line end is refused for an incremental read only") {
  temp_dir dir;
  write_file(dir.file("pay.csv"), "id,name,amount\n1,alice,10.25\n2,bob,20.50\n3,carol,30");
  write_file(dir.file("head.csv"), "id,name");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& pay = find_table(cat, "pay");
  // A full read takes the file as it is: the next one replaces it.
  CHECK(read_all(*src, pay).rows.size() == 3);
  // An incremental one would load the cut row once, for good: refused, naming the file.
  CHECK_THROWS_WITH(read_all(*src, pay, {}, "id", std::string("1")),
                    Catch::Contains(dir.file("pay.csv")) &&
                        Catch::Contains("its last line has no line end"));
  // A header alone, with no line end, cuts no row.
  CHECK(read_all(*src, find_table(cat, "head"), {}, "id").rows.empty());
  // Ended, the file reads.
  write_file(dir.file("pay.csv"), "id,name,amount\n1,alice,10.25\n2,bob,20.50\n3,carol,3000.75\n");
  const catalog again = src->read_catalog();
  const auto r = read_all(*src, find_table(again, "pay"), {}, "id", std::string("1"));
  REQUIRE(r.rows.size() == 2);
}

TEST_CASE("json records of 200 keys or more whose values share a type are records, not a map") {
  temp_dir dir;
  std::string line = "{";
  for (int i = 0; i < 250; ++i)
    line += fmt::format("{}\"field_{}\": \"v{}\"", i ? ", " : "", i, i);
  line += "}\n";
  write_file(dir.file("wide.json"), line + line + line);
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& wide = find_table(cat, "wide");
  INFO(wide.unreadable);
  REQUIRE(wide.unreadable.empty());
  REQUIRE(wide.columns.columns.size() == 250);
  const auto r = read_all(*src, wide);
  REQUIRE(r.rows.size() == 3);
  CHECK(r.rows[0][249] == text("v249"));
}

TEST_CASE("a json record nested deeper than the reader takes fails its table, named, not the "
          "process") {
  temp_dir dir;
  const int n = 15000;
  std::string deep = "{\"id\": 1, \"a\": ";
  for (int i = 0; i < n; ++i)
    deep += "{\"b\": ";
  deep += "1";
  deep += std::string(n, '}');
  deep += "}\n";
  write_file(dir.file("x.json"), "{\"id\": 0, \"s\": \"{{{{[[[\"}\n" + deep);
  write_file(dir.file("ok.json"), "{\"id\": 1}\n");
  auto src = open_files("json", dir.path.string());
  const catalog cat = src->read_catalog();
  const auto& x = find_table(cat, "x");
  CHECK_THAT(x.unreadable, Catch::Contains(dir.file("x.json")) &&
                               Catch::Contains("line 2 nests objects and arrays more than 1000 deep"));
  CHECK(find_table(cat, "ok").unreadable.empty());
  CHECK(read_all(*src, find_table(cat, "ok")).rows.size() == 1);
}

TEST_CASE("a json integer past 2^53 in a double column is refused, 2^53 + 1 too") {
  temp_dir dir;
  auto src = open_files("json", dir.path.string());
  for (const std::string v : {"9007199254740993", "-9007199254740993", "9007199254740995"}) {
    INFO(v);
    write_file(dir.file("p.json"), "{\"id\": 1, \"amount\": " + v + "}\n{\"id\": 2, \"amount\": 0.5}\n");
    const catalog cat = src->read_catalog();
    const auto& p = find_table(cat, "p");
    REQUIRE(p.unreadable.empty());
    CHECK_THROWS_WITH(read_all(*src, p), Catch::Contains("holds the integer " + v) &&
                                             Catch::Contains("past the 2^53"));
  }
  // 2^53 itself is exact in a double: it loads.
  write_file(dir.file("p.json"), "{\"id\": 1, \"amount\": 9007199254740992}\n{\"id\": 2, \"amount\": 0.5}\n");
  const catalog cat = src->read_catalog();
  CHECK(read_all(*src, find_table(cat, "p")).rows.size() == 2);
}

TEST_CASE("a csv header field left empty beside a field DuckDB's name for it takes is named as "
          "empty, not as a name given twice") {
  temp_dir dir;
  write_file(dir.file("col1b.csv"), "id,,column1\n1,2,3\n");
  write_file(dir.file("twice.csv"), "id,a,a\n1,2,3\n");
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "col1b").unreadable,
             Catch::Contains("the file's header has no name for its column 2"));
  CHECK_THAT(find_table(cat, "twice").unreadable, Catch::Contains("two columns named 'a'"));
}

TEST_CASE("a UTF-16 file is said to be one: big-endian without a mark, and with CRLF lines") {
  temp_dir dir;
  const auto utf16 = [](const std::string& text, bool big, bool mark) {
    std::string out;
    if (mark)
      out += big ? "\xfe\xff" : "\xff\xfe";
    for (const char c : text) {
      if (big)
        out += '\0';
      out += c;
      if (!big)
        out += '\0';
    }
    return out;
  };
  write_file(dir.file("be.csv"), utf16("id,name\n1,x\n2,y\n", true, false));
  write_file(dir.file("crlf.csv"), utf16("id,name\r\n1,x\r\n", false, true));
  auto src = open_files("csv", dir.path.string());
  const catalog cat = src->read_catalog();
  CHECK_THAT(find_table(cat, "be").unreadable,
             Catch::Contains("looks like UTF-16 text without a byte order mark"));
  const auto& crlf = find_table(cat, "crlf").unreadable;
  CHECK_THAT(crlf, Catch::Contains("UTF-16") && !Catch::Contains("CR alone"));
}
