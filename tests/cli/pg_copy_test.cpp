// PostgreSQL into PostgreSQL: rows pass through as COPY text when nothing needs
// converting. Every value must arrive exactly as the source holds it.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <libpq-fe.h>

#include <fmt/core.h>

#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

const std::vector<std::string> k_columns{"i",  "b",  "s",  "n",  "v",  "t",  "f", "d",
                                         "ts", "tz", "by", "u",  "r",  "dp", "iv"};

// Every column of the table as one text per column, NULLs marked, in key order.
std::vector<std::string> column_texts(const std::string& table) {
  std::vector<std::string> out;
  for (const auto& c : k_columns) {
    auto r = pg_query(pg_dsn(), fmt::format("SELECT coalesce(string_agg(coalesce({0}::text, "
                                            "'<null>'), '|' ORDER BY id), '') FROM {1}",
                                            "\"" + c + "\"", table));
    out.push_back(c + "=" + (r.empty() ? "?" : r[0][0]));
  }
  return out;
}

}  // namespace

TEST_CASE("a PostgreSQL table copies into PostgreSQL with every value exact") {
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0}", s));
  pg_exec(pg_dsn(), fmt::format(R"(
    CREATE TABLE {0}."Odd ""name""; --" (
      id integer PRIMARY KEY, i integer, b bigint, s smallint, n numeric(12,2),
      v varchar(20), t text, f boolean, d date, ts timestamp, tz timestamptz, "by" bytea,
      u uuid, r real, dp double precision, iv interval);
    INSERT INTO {0}."Odd ""name""; --" VALUES
      (1, -2147483648, 9223372036854775807, -32768, -1234567890.12, 'tab	here',
       E'line\nbreak \\ back\\slash "quote'' \t\r end', true, '0001-01-01', '1999-12-31 23:59:59.999999',
       '2024-02-29 12:00:00.5+05:30', E'\\x00ff5c0a09', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
       3.4028235e38, 0.1, '1 year 2 mons 3 days 04:05:06.7'),
      (2, NULL, NULL, NULL, NULL, NULL, '', false, NULL, NULL, NULL, '', NULL, 'NaN', '-Infinity',
       NULL),
      (3, 0, 0, 0, 0.00, 'ünïcødé ✓', '\N', NULL, '2262-04-11', '1970-01-01 00:00:00',
       '1970-01-01 00:00:00+00', NULL, NULL, -0.0, 1e-300, '-1 days');
    CREATE TABLE {0}.bad (id integer PRIMARY KEY, n numeric(12,2));
    INSERT INTO {0}.bad VALUES (1, 1.5), (2, 'NaN');
    CREATE TABLE {0}.docs (id integer PRIMARY KEY, j jsonb, t text);
    INSERT INTO {0}.docs VALUES (1, '{{"a": [1, "x\ty"], "b": null}}', E'tab\there'),
                                (2, NULL, NULL);
  )", s));
  w.write("flotilla.toml", fmt::format(R"([project]
name = "pgcopy"

[targets.wh]
dialect = "postgres"
dsn = "{0}"
schema = "{2}"

[sources.app]
adapter = "postgres"
dsn = "{0}"
include = ["{1}.*"]
)",
                                       pg_dsn(), s, t));
  int rc = -1;
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 1);  // the NaN table fails, the other copies
  const auto* odd = find_table(run, t + ".Odd \"name\"; --");
  REQUIRE(odd != nullptr);
  CHECK((*odd)["status"] == "copied");
  CHECK((*odd)["rows"] == 3);
  const std::string src_table = fmt::format("{}.\"Odd \"\"name\"\"; --\"", s);
  const std::string dst_table = fmt::format("{}.\"Odd \"\"name\"\"; --\"", t);
  CHECK(column_texts(dst_table) == column_texts(src_table));
  // Rows pass through as binary COPY where both sides have the same types, as text where
  // they do not (JSON is read as text, loaded as jsonb): both exact.
  const auto* docs = find_table(run, t + ".docs");
  REQUIRE(docs != nullptr);
  CHECK((*docs)["status"] == "copied");
  const auto docs_of = [](const std::string& schema) {
    return pg_query(pg_dsn(), "SELECT string_agg(id || ':' || coalesce(j::text, '<null>') || "
                              "':' || coalesce(t, '<null>'), '|' ORDER BY id) FROM " +
                                  schema + ".docs");
  };
  CHECK(docs_of(t) == docs_of(s));

  // A decimal with no decimal representation fails its table, naming the column, as the
  // value path does; nothing of it is loaded.
  const auto* bad = find_table(run, t + ".bad");
  REQUIRE(bad != nullptr);
  CHECK((*bad)["status"] == "failed");
  CHECK((*bad)["error"].get<std::string>().find("'n'") != std::string::npos);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT count(*) FROM pg_tables WHERE schemaname = '{}' "
                                       "AND tablename = 'bad'", t)) ==
        std::vector<std::vector<std::string>>{{"0"}});

  // A second run copies again (full refresh through the staging swap): still exact.
  pg_exec(pg_dsn(), fmt::format("DELETE FROM {}.bad WHERE id = 2", s));
  pg_exec(pg_dsn(), fmt::format("UPDATE {} SET t = E'x\\ty' WHERE id = 2", src_table));
  run = flotilla_json(w, {"run", "--no-prune"}, &rc);
  CHECK(rc == 0);
  CHECK(column_texts(dst_table) == column_texts(src_table));
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT n::text FROM {}.bad", t)) ==
        std::vector<std::vector<std::string>>{{"1.50"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a PostgreSQL column dropped and added again under its name and type is not pruned") {
  // No row counter moves and the table keeps its storage, but every value of the column
  // changed (to its default).
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.k (id int PRIMARY KEY, b text); INSERT INTO {0}.k "
                                "VALUES (1, 'old'), (2, 'old')",
                                s));
  w.write("flotilla.toml",
          fmt::format("[project]\nname = \"p\"\n\n[targets.wh]\ndialect = \"postgres\"\n"
                      "dsn = \"{0}\"\nschema = \"{2}\"\n\n[sources.app]\nadapter = \"postgres\"\n"
                      "dsn = \"{0}\"\ninclude = [\"{1}.*\"]\nprune_unchanged = true\n",
                      pg_dsn(), s, t));
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  REQUIRE((*find_table(flotilla_json(w, {"run"}), t + ".k"))["status"] == "pruned");
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0}.k DROP COLUMN b; "
                                "ALTER TABLE {0}.k ADD COLUMN b text DEFAULT 'new'", s));
  auto third = flotilla_json(w, {"run"});
  INFO(third.dump(2));
  CHECK((*find_table(third, t + ".k"))["status"] == "copied");
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT string_agg(b, ',') FROM {}.k", t)) ==
        std::vector<std::vector<std::string>>{{"new,new"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a table that cannot be pruned says why (seed 001: no change marker)") {
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.t (id int PRIMARY KEY); INSERT INTO {0}.t "
                                "VALUES (1); CREATE VIEW {0}.vw AS SELECT * FROM {0}.t",
                                s));
  w.write("flotilla.toml",
          fmt::format("[project]\nname = \"p\"\n\n[targets.wh]\ndialect = \"postgres\"\n"
                      "dsn = \"{0}\"\nschema = \"{2}\"\n\n[sources.app]\nadapter = \"postgres\"\n"
                      "dsn = \"{0}\"\ninclude = [\"{1}.*\"]\nprune_unchanged = true\n",
                      pg_dsn(), s, t));
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  auto second = flotilla_json(w, {"run"});
  CHECK((*find_table(second, t + ".t"))["status"] == "pruned");
  CHECK_FALSE(find_table(second, t + ".t")->contains("not_pruned"));
  const auto& vw = *find_table(second, t + ".vw");
  CHECK(vw["status"] == "copied");
  CHECK_THAT(vw["not_pruned"].get<std::string>(), Catch::Contains("no change marker"));
  auto plan = run_flotilla(w, {"plan", "--explain"});
  CHECK(plan.out.find("not pruned  the source offers no change marker") != std::string::npos);
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a json value PostgreSQL's json refuses fails naming the text pin, which loads it") {
  const std::string s = "pgjs_" + unique_suffix();
  const std::string t = "pgjt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.docs (id int PRIMARY KEY, j json);"
                                "INSERT INTO {0}.docs VALUES (1, '{{\"a\":\"\\u0000\"}}')",
                                s));
  workdir w;
  const std::string base = fmt::format(
      "[targets.wh]\ndialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"\n\n"
      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{}\"\ninclude = [\"{}.docs\"]\n",
      pg_dsn(), t, pg_dsn(), s);
  w.write("flotilla.toml", base);
  int code = 0;
  auto run = flotilla_json(w, {"run"}, &code);
  CHECK(code == 1);
  REQUIRE(run["tables"].size() == 1);
  CHECK_THAT(run["tables"][0]["error"].get<std::string>(),
             Catch::Contains("columns = { j = \"text\" }") &&
                 !Catch::Contains("correct the cause on the target"));
  w.write("flotilla.toml", base + fmt::format("[sources.app.tables.\"{}.docs\"]\n"
                                              "columns = {{ j = \"text\" }}\n",
                                              s));
  run = flotilla_json(w, {"run"}, &code);
  CHECK(code == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT j FROM {}.docs", t))[0][0] ==
        "{\"a\":\"\\u0000\"}");
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("an inheritance parent whose rows repeat its key fails with advice about the rows "
          "read, on DuckDB and PostgreSQL targets") {
  const std::string s = "pgsrc_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.animals (id int PRIMARY KEY, name text);"
                                "CREATE TABLE {0}.dogs (breed text) INHERITS ({0}.animals);"
                                "INSERT INTO {0}.animals VALUES (1, 'generic');"
                                "INSERT INTO {0}.dogs VALUES (1, 'rex', 'lab')",
                                s));
  for (const std::string target : {"duckdb", "postgres"}) {
    INFO(target);
    workdir w;
    const std::string t = "pgtgt_" + unique_suffix();
    w.write("flotilla.toml",
            fmt::format("[targets.wh]\n{}\n\n[sources.app]\nadapter = \"postgres\"\n"
                        "dsn = \"{}\"\ninclude = [\"{}.animals\"]\n",
                        target == "duckdb"
                            ? std::string("dialect = \"duckdb\"\npath = \"wh.duckdb\"")
                            : fmt::format("dialect = \"postgres\"\ndsn = \"{}\"\nschema = \"{}\"",
                                          pg_dsn(), t),
                        pg_dsn(), s));
    int code = 0;
    auto run = flotilla_json(w, {"run"}, &code);
    CHECK(code == 1);
    REQUIRE(run["tables"].size() == 1);
    const std::string error = run["tables"][0]["error"].get<std::string>();
    CHECK_THAT(error, Catch::Contains("repeat a key") && Catch::Contains("inheritance") &&
                          Catch::Contains("unique_key") &&
                          !Catch::Contains("correct the cause on the target"));
    if (target == "postgres")
      pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", t));
  }
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE", s));
}

TEST_CASE("dates before year 1 keep their era from PostgreSQL to DuckDB and back") {
  // PostgreSQL writes "0044-03-15 BC"; DuckDB reads that text as 44 AD and writes
  // "-0043-03-15" (ISO years), which PostgreSQL refuses.
  workdir w;
  const std::string s = "bcsrc_" + unique_suffix();
  const std::string t = "bctgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.d (id integer PRIMARY KEY, d date, ts timestamp, "
                                "tz timestamptz);"
                                "INSERT INTO {0}.d VALUES (1, '0044-03-15 BC', '0044-03-15 "
                                "12:00:00 BC', '0001-01-01 00:00:00+00 BC'), (2, '2000-01-01', "
                                "'0001-01-01 00:00:00', '2000-01-01 00:00:00+00')",
                                s));
  w.write("flotilla.toml", fmt::format(R"([targets.lake]
dialect = "duckdb"
path = "lake.duckdb"
schema = "arch"

[targets.pg]
dialect = "postgres"
dsn = "{0}"
schema = "{2}"

[sources.app]
adapter = "postgres"
dsn = "{0}"
include = ["{1}.d"]
target = "lake"

[sources.back]
adapter = "duckdb"
path = "lake.duckdb"
include = ["arch.d"]
target = "pg"
)",
                                       pg_dsn(), s, t));
  int rc = -1;
  auto first = flotilla_json(w, {"run", "--filter", "source=app"}, &rc);
  INFO(first.dump());
  CHECK(rc == 0);
  CHECK(duckdb_query(w.file("lake.duckdb"),
                     "SELECT CAST(d AS VARCHAR), CAST(ts AS VARCHAR), year(d), "
                     "CAST(tz AS VARCHAR) FROM arch.d ORDER BY id") ==
        std::vector<std::vector<std::string>>{
            {"0044-03-15 (BC)", "0044-03-15 (BC) 12:00:00", "-43", "0001-01-01 (BC) 00:00:00+00"},
            {"2000-01-01", "0001-01-01 00:00:00", "2000", "2000-01-01 00:00:00+00"}});
  auto back = flotilla_json(w, {"run", "--filter", "source=back"}, &rc);
  INFO(back.dump());
  CHECK(rc == 0);
  const auto texts = [&](const std::string& schema) {
    return pg_query(pg_dsn(), fmt::format("SET TIME ZONE 'UTC'; SELECT d::text, ts::text, "
                                          "tz::text FROM {}.d ORDER BY id",
                                          schema));
  };
  CHECK(texts(t) == texts(s));
  CHECK(texts(t)[0][0] == "0044-03-15 BC");
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; DROP SCHEMA IF EXISTS {1} "
                                "CASCADE",
                                s, t));
}

TEST_CASE("an incremental PostgreSQL table emptied and refilled is read in full when keyed, and "
          "said once when not") {
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.keyed (id int PRIMARY KEY, at int); "
                                "CREATE TABLE {0}.loose (id int, at int); "
                                "INSERT INTO {0}.keyed VALUES (1, 100), (2, 200); "
                                "INSERT INTO {0}.loose VALUES (1, 100), (2, 200)",
                                s));
  w.write("flotilla.toml",
          fmt::format("[project]\nname = \"p\"\n\n[targets.wh]\ndialect = \"postgres\"\n"
                      "dsn = \"{0}\"\nschema = \"{2}\"\n\n[sources.app]\nadapter = \"postgres\"\n"
                      "dsn = \"{0}\"\ninclude = [\"{1}.*\"]\nprune_unchanged = true\n\n"
                      "[sources.app.tables.\"{1}.keyed\"]\ncursor_column = \"at\"\n\n"
                      "[sources.app.tables.\"{1}.loose\"]\ncursor_column = \"at\"\n",
                      pg_dsn(), s, t));
  const auto ids = [&](const std::string& table) {
    return pg_query(pg_dsn(), fmt::format("SELECT string_agg(id::text, ',' ORDER BY id) "
                                          "FROM {}.{}", t, table))[0][0];
  };
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  REQUIRE(ids("keyed") == "1,2");
  // TRUNCATE keeps the table (its oid) but not its rows: the refill's cursor values sit
  // below the watermark (200), where a read past it finds nothing.
  pg_exec(pg_dsn(), fmt::format("TRUNCATE {0}.keyed, {0}.loose; "
                                "INSERT INTO {0}.keyed VALUES (3, 50), (2, 60); "
                                "INSERT INTO {0}.loose VALUES (3, 50)",
                                s));
  auto second = flotilla_json(w, {"run"});
  INFO(second.dump(2));
  const auto& keyed = *find_table(second, t + ".keyed");
  CHECK(keyed["status"] == "copied");
  CHECK(keyed["rows"] == 2);
  REQUIRE(keyed.contains("warnings"));
  CHECK_THAT(keyed["warnings"][0].get<std::string>(),
             Catch::Contains("emptied or rewritten") && Catch::Contains("at = 200"));
  // Merged on the key: the rows loaded before stay, the refilled ones are there.
  CHECK(ids("keyed") == "1,2,3");
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT at FROM {}.keyed WHERE id = 2", t)) ==
        std::vector<std::vector<std::string>>{{"60"}});
  // Without a key a full read would repeat the rows kept: the watermark stays, and the
  // run says what it cannot read.
  const auto& loose = *find_table(second, t + ".loose");
  CHECK(loose["status"] == "copied");
  CHECK(loose["rows"] == 0);
  REQUIRE(loose.contains("warnings"));
  CHECK_THAT(loose["warnings"][0].get<std::string>(),
             Catch::Contains("emptied or rewritten") && Catch::Contains("are not read") &&
                 Catch::Contains("unique_key"));
  CHECK(ids("loose") == "1,2");
  // Said once: the next run, the source changed again past the watermark, is an increment.
  pg_exec(pg_dsn(), fmt::format("INSERT INTO {0}.loose VALUES (4, 300); "
                                "INSERT INTO {0}.keyed VALUES (4, 300)", s));
  auto third = flotilla_json(w, {"run"});
  INFO(third.dump(2));
  // (The keyed table's read includes the row at its watermark, 60, as every merge does.)
  const auto& keyed3 = *find_table(third, t + ".keyed");
  CHECK(keyed3["load"] == "merge");
  CHECK(keyed3["rows"] == 2);
  CHECK_FALSE(keyed3.contains("warnings"));
  const auto& loose3 = *find_table(third, t + ".loose");
  CHECK(loose3["load"] == "incremental");
  CHECK(loose3["rows"] == 1);
  CHECK_FALSE(loose3.contains("warnings"));
  CHECK(ids("loose") == "1,2,4");
  CHECK(ids("keyed") == "1,2,3,4");
  // Rewritten by a type change the target takes by copying the table anew: every row is
  // read, and nothing says rows are left unread.
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0}.loose ALTER COLUMN id TYPE varchar(10)", s));
  auto fourth = flotilla_json(w, {"run", "--allow-type-change-rebuild"});
  INFO(fourth.dump(2));
  const auto& loose4 = *find_table(fourth, t + ".loose");
  CHECK(loose4["status"] == "copied");
  CHECK(loose4["load"] == "full_refresh");
  CHECK(loose4["rows"] == 2);
  CHECK_THAT(loose4.value("warnings", nlohmann::json::array()).dump(),
             !Catch::Contains("are not read"));
  CHECK(ids("loose") == "3,4");
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("an incremental PostgreSQL table created anew is read in full, not past the old "
          "table's watermark") {
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.ev (id int, at int); "
                                "INSERT INTO {0}.ev VALUES (1, 100), (2, 200)",
                                s));
  w.write("flotilla.toml",
          fmt::format("[project]\nname = \"p\"\n\n[targets.wh]\ndialect = \"postgres\"\n"
                      "dsn = \"{0}\"\nschema = \"{2}\"\n\n[sources.app]\nadapter = \"postgres\"\n"
                      "dsn = \"{0}\"\ninclude = [\"{1}.ev\"]\nprune_unchanged = true\n\n"
                      "[sources.app.tables.\"{1}.ev\"]\ncursor_column = \"at\"\n",
                      pg_dsn(), s, t));
  const auto ids = [&] {
    return pg_query(pg_dsn(), fmt::format("SELECT string_agg(id::text, ',' ORDER BY id) "
                                          "FROM {}.ev", t))[0][0];
  };
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  REQUIRE(ids() == "1,2");
  // An append past the watermark loads as an increment.
  pg_exec(pg_dsn(), fmt::format("INSERT INTO {}.ev VALUES (3, 300)", s));
  auto second = flotilla_json(w, {"run"});
  CHECK((*find_table(second, t + ".ev"))["load"] == "incremental");
  CHECK((*find_table(second, t + ".ev"))["rows"] == 1);
  CHECK_FALSE(find_table(second, t + ".ev")->contains("warnings"));
  CHECK(ids() == "1,2,3");
  // Dropped and created again, its rows below the old watermark (300): a read past it
  // would load nothing.
  pg_exec(pg_dsn(), fmt::format("DROP TABLE {0}.ev; CREATE TABLE {0}.ev (id int, at int); "
                                "INSERT INTO {0}.ev VALUES (10, 50), (11, 60)",
                                s));
  auto plan = run_flotilla(w, {"plan"});
  CHECK_THAT(plan.out, Catch::Contains("created anew"));
  auto third = flotilla_json(w, {"run"});
  INFO(third.dump(2));
  const auto& ev = *find_table(third, t + ".ev");
  CHECK(ev["status"] == "copied");
  CHECK(ev["load"] == "full_refresh");
  CHECK(ev["rows"] == 2);
  REQUIRE(ev.contains("warnings"));
  CHECK_THAT(ev["warnings"][0].get<std::string>(),
             Catch::Contains("created anew") && Catch::Contains("at = 300"));
  CHECK(ids() == "10,11");
  // The new table's watermark is its own: the next append is an increment again.
  pg_exec(pg_dsn(), fmt::format("INSERT INTO {}.ev VALUES (12, 70)", s));
  auto fourth = flotilla_json(w, {"run"});
  CHECK((*find_table(fourth, t + ".ev"))["load"] == "incremental");
  CHECK((*find_table(fourth, t + ".ev"))["rows"] == 1);
  CHECK(ids() == "10,11,12");
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("DuckDB to PostgreSQL: TIMESTAMP_NS infinities stay infinite, and a text holding a NUL "
          "loads through the bytes pin the refusal names") {
  workdir w;
  const std::string t = "nstgt_" + unique_suffix();
  duckdb_exec(w.file("src.duckdb"),
              "CREATE TABLE t (id INTEGER, ts TIMESTAMP_NS, s VARCHAR);"
              "INSERT INTO t VALUES (1, '1969-12-31 23:59:59.999999999', 'a' || chr(0) || 'b'),"
              "(2, 'infinity', 'x'), (3, '-infinity', NULL)");
  const auto config = [&](const std::string& pins) {
    w.write("flotilla.toml", fmt::format(R"([targets.pg]
dialect = "postgres"
dsn = "{0}"
schema = "{1}"
[sources.lake]
adapter = "duckdb"
path = "src.duckdb"
target = "pg"
include = ["t"]
{2})",
                                         pg_dsn(), t, pins));
  };
  config("");
  int rc = -1;
  auto refused = flotilla_json(w, {"run"}, &rc);
  INFO(refused.dump());
  CHECK(rc == 1);
  const std::string error = refused["tables"][0]["error"].get<std::string>();
  CHECK_THAT(error, Catch::Contains("columns = { s = \"bytes\" }"));
  config("[sources.lake.tables.t]\ncolumns = { s = \"bytes\" }\n");
  auto loaded = flotilla_json(w, {"run"}, &rc);
  INFO(loaded.dump());
  CHECK(rc == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT id::text, ts::text, coalesce(encode(s, 'hex'), "
                                       "'-') FROM {}.t ORDER BY id",
                                       t)) ==
        std::vector<std::vector<std::string>>{{"1", "1969-12-31 23:59:59.999999", "610062"},
                                              {"2", "infinity", "78"},
                                              {"3", "-infinity", "-"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", t));
}


TEST_CASE("Ctrl-C while a PostgreSQL commit batch waits on a lock cancels it: the target is "
          "unchanged, then and after the lock is released") {
  // The batch (the merge's statements, then COMMIT) was sent as one query: the process
  // went on waiting for it, and a second Ctrl-C left the server to commit it once the
  // lock went, after flotilla had said the target was unchanged.
  workdir w;
  const std::string schema = "cancel_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE", schema));
  sqlite_exec(w.file("src.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, up INTEGER);"
                                "INSERT INTO t VALUES (1, 'old', 1), (2, 'old', 1);");
  w.write("flotilla.toml", fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{}\"\n"
                                       "schema = \"{}\"\n[sources.s]\nadapter = \"sqlite\"\n"
                                       "path = \"src.db\"\n[sources.s.tables.t]\n"
                                       "cursor_column = \"up\"\nunique_key = [\"id\"]\n",
                                       pg_dsn(), schema));
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  sqlite_exec(w.file("src.db"), "UPDATE t SET v = 'new', up = 2 WHERE id = 1");

  PGconn* lock = PQconnectdb(pg_dsn().c_str());
  REQUIRE(PQstatus(lock) == CONNECTION_OK);
  auto exec = [&](const std::string& sql) {
    PGresult* r = PQexec(lock, sql.c_str());
    const auto st = PQresultStatus(r);
    PQclear(r);
    REQUIRE((st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK));
  };
  exec(fmt::format("BEGIN; LOCK TABLE {}.t IN ACCESS EXCLUSIVE MODE", schema));
  background_flotilla run(w, {"run", "--output", "json"});
  // Until the run's statement waits on the lock.
  bool waiting = false;
  for (int i = 0; i < 600 && !waiting; ++i) {
    waiting = pg_query(pg_dsn(), fmt::format("SELECT count(*) FROM pg_locks WHERE NOT granted "
                                             "AND relation = '{}.t'::regclass",
                                             schema))[0][0] != "0";
    if (!waiting)
      ::usleep(50'000);
  }
  REQUIRE(waiting);
  run.signal(SIGINT);
  const int code = run.wait(60);
  INFO(run.err());
  REQUIRE(code == 1);  // it ended, with the lock still held
  auto j = nlohmann::json::parse(run.out());
  const auto* t = find_table(j, schema + ".t");
  REQUIRE(t != nullptr);
  CHECK((*t)["status"] == "failed");
  CHECK_THAT((*t)["error"].get<std::string>(),
             Catch::Contains("stopped by the user before commit; the target is unchanged"));
  // Its own code: no error of the target's (FLT-R001) for a script to act on.
  CHECK((*t)["error_code"] == "FLT-R008");
  exec("COMMIT");
  PQfinish(lock);
  // Nothing of the run's is left on the server to commit later (its sessions end as the
  // server notices the process gone).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = pg_query(pg_dsn(), fmt::format("SELECT count(*) FROM pg_stat_activity WHERE query "
                                          "LIKE '%{}.%' AND pid <> pg_backend_pid()",
                                          schema))[0][0] == "0";
    if (!gone)
      ::usleep(50'000);
  }
  CHECK(gone);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT string_agg(v, ',' ORDER BY id) FROM {}.t",
                                       schema)) == std::vector<std::vector<std::string>>{{"old,old"}});
  // The next run loads the change.
  REQUIRE(run_flotilla(w, {"run"}).exit_code == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT string_agg(v, ',' ORDER BY id) FROM {}.t",
                                       schema)) == std::vector<std::vector<std::string>>{{"new,old"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE", schema));
}

TEST_CASE("a confirmed rebuild the target refuses says to retry with the confirmation") {
  workdir w;
  const std::string s = "pgrb_" + unique_suffix();
  const std::string t = "pgrt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.gr (id int PRIMARY KEY, qty int);"
                                "INSERT INTO {0}.gr VALUES (1, 5)",
                                s));
  const std::string base = fmt::format(
      "[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n\n"
      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\ninclude = [\"{1}.gr\"]\n",
      pg_dsn(), s, t);
  w.write("flotilla.toml", base);
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // A view on the target table keeps PostgreSQL from dropping it for the rebuild.
  pg_exec(pg_dsn(), fmt::format("CREATE VIEW {0}.gr_v AS SELECT * FROM {0}.gr", t));
  w.write("flotilla.toml", base + fmt::format("[sources.app.tables.\"{}.gr\"]\n"
                                              "columns = {{ qty = \"decimal(12,2)\" }}\n",
                                              s));
  auto run = flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 1);
  CHECK_THAT((*find_table(run, t + ".gr"))["error"].get<std::string>(),
             Catch::Contains("`flotilla retry --allow-type-change-rebuild`"));
  pg_exec(pg_dsn(), fmt::format("DROP VIEW {}.gr_v", t));
  auto retry = flotilla_json(w, {"retry", "--allow-type-change-rebuild"}, &rc);
  INFO(retry.dump(2));
  CHECK(rc == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT qty::text FROM {}.gr", t)) ==
        std::vector<std::vector<std::string>>{{"5.00"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("plan --sql names a long table's staging table as the load does, never the live "
          "table") {
  // Plan showed `<63-byte name>__flotilla_staging`, which PostgreSQL cuts to the live
  // table's own name: run as shown, its DROP TABLE dropped the live table.
  workdir w;
  const std::string t = "pgtgt_" + unique_suffix();
  const std::string name(63, 't');
  sqlite_exec(w.file("src.db"), fmt::format("CREATE TABLE \"{0}\" (id INTEGER PRIMARY KEY, v INT);"
                                            "INSERT INTO \"{0}\" VALUES (1, 2)",
                                            name));
  w.write("flotilla.toml",
          fmt::format("[project]\nname = \"p\"\n\n[targets.wh]\ndialect = \"postgres\"\n"
                      "dsn = \"{0}\"\nschema = \"{1}\"\nin_place_max_bytes = 0\n\n"
                      "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\n",
                      pg_dsn(), t));
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  const auto plan = flotilla_json(w, {"plan", "--sql", "--no-prune"});
  INFO(plan.dump(2));
  const auto* table = find_table(plan, t + "." + name);
  REQUIRE(table != nullptr);
  std::string staging;
  for (const auto& statement : (*table)["sql"]) {
    const std::string sql = statement.get<std::string>();
    const auto end = sql.find("__flotilla_staging\"");
    if (end == std::string::npos)
      continue;
    const auto begin = sql.rfind('"', end) + 1;
    staging = sql.substr(begin, end + std::string_view("__flotilla_staging").size() - begin);
  }
  REQUIRE(!staging.empty());
  CHECK(staging.size() <= 63);
  CHECK(staging.find("_" + std::string(20, 't')) == std::string::npos);
  // The staging table the load makes has that name: an event trigger records it.
  pg_exec(pg_dsn(), fmt::format(
                        "CREATE TABLE {0}.seen (name text); CREATE FUNCTION {0}.note() RETURNS "
                        "event_trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO {0}.seen SELECT "
                        "object_identity FROM pg_event_trigger_ddl_commands() WHERE command_tag "
                        "= 'CREATE TABLE'; END $$; CREATE EVENT TRIGGER {0}_note ON "
                        "ddl_command_end EXECUTE FUNCTION {0}.note()",
                        t));
  sqlite_exec(w.file("src.db"), fmt::format("INSERT INTO \"{}\" VALUES (2, 3)", name));
  const auto run = flotilla_json(w, {"run", "--no-prune"});
  pg_exec(pg_dsn(), fmt::format("DROP EVENT TRIGGER {}_note", t));
  CHECK(run["status"] == "success");
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT count(*) FROM {}.seen WHERE name LIKE '%' || {} || '%'",
                                       t, "'" + staging + "'")) ==
        std::vector<std::vector<std::string>>{{"1"}});
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT count(*) FROM {}.\"{}\"", t, name)) ==
        std::vector<std::vector<std::string>>{{"2"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE", t));
}

TEST_CASE("a source table locked by another session fails its read after the lock timeout, "
          "naming the wait; the fleet's other tables copy") {
  // The read waited for the lock without end: an idle transaction that had altered one
  // table held the whole run. The wait is bounded (60 s unless set; here the DSN's 1 s).
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.locked (id int PRIMARY KEY); INSERT INTO "
                                "{0}.locked VALUES (1); CREATE TABLE {0}.free (id int PRIMARY "
                                "KEY); INSERT INTO {0}.free VALUES (1), (2)",
                                s));
  const std::string dsn = pg_dsn() + (pg_dsn().find('?') == std::string::npos ? "?" : "&") +
                          "options=-c%20lock_timeout%3D1s";
  w.write("flotilla.toml",
          fmt::format("[project]\nname = \"p\"\n\n[targets.wh]\ndialect = \"duckdb\"\n"
                      "path = \"wh.duckdb\"\nschema = \"{2}\"\n\n[sources.app]\n"
                      "adapter = \"postgres\"\ndsn = \"{0}\"\ninclude = [\"{1}.*\"]\n",
                      dsn, s, t));
  PGconn* lock = PQconnectdb(pg_dsn().c_str());
  REQUIRE(PQstatus(lock) == CONNECTION_OK);
  PGresult* r = PQexec(lock, fmt::format("BEGIN; LOCK TABLE {}.locked IN ACCESS EXCLUSIVE MODE",
                                         s).c_str());
  REQUIRE(PQresultStatus(r) == PGRES_COMMAND_OK);
  PQclear(r);
  int rc = -1;
  const auto j = flotilla_json(w, {"run"}, &rc);
  PQfinish(lock);
  INFO(j.dump(2));
  CHECK(rc == 1);
  const auto* locked = find_table(j, t + ".locked");
  REQUIRE(locked != nullptr);
  CHECK((*locked)["status"] == "failed");
  CHECK_THAT((*locked)["error"].get<std::string>(),
             Catch::Contains("lock timeout") && Catch::Contains("another session held a lock") &&
                 Catch::Contains("flotilla retry"));
  CHECK((*find_table(j, t + ".free"))["status"] == "copied");
  // The lock gone, retry copies it.
  const auto retried = flotilla_json(w, {"retry"}, &rc);
  CHECK(rc == 0);
  CHECK((*find_table(retried, t + ".locked"))["status"] == "copied");
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE", s));
}

TEST_CASE("contract generate declares neither of two source tables whose names differ only in "
          "case: a section for one would apply to both") {
  // It wrote the section of `orders`, which then applied to `Orders` too and failed it.
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.\"Orders\" (id int PRIMARY KEY, total int);"
                                "CREATE TABLE {0}.orders (id int PRIMARY KEY, note text);"
                                "INSERT INTO {0}.\"Orders\" VALUES (1, 10);"
                                "INSERT INTO {0}.orders VALUES (1, 'n')",
                                s));
  const std::string toml =
      fmt::format("[project]\nname = \"p\"\n\n[targets.wh]\ndialect = \"postgres\"\n"
                  "dsn = \"{0}\"\nschema = \"{2}\"\n\n[sources.app]\nadapter = \"postgres\"\n"
                  "dsn = \"{0}\"\ninclude = [\"{1}.*\"]\n",
                  pg_dsn(), s, t);
  w.write("flotilla.toml", toml);
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  const auto r = run_flotilla(w, {"contract", "generate", "--write", "--output", "json"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& row : j["tables"]) {
    CHECK(row["status"] == "undeclarable");
    CHECK_THAT(row["error"].get<std::string>(), Catch::Contains("differs only in case"));
  }
  std::ifstream in(w.file("flotilla.toml"));
  const std::string after((std::istreambuf_iterator<char>(in)), {});
  CHECK(after == toml);
  const auto again = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("contract diff finds the live table of a source table whose schema name holds a dot, "
          "as run names it") {
  // `"s.1".t` lands in <target schema>.t; the contract commands looked for `1.t`.
  workdir w;
  const std::string s = "pgsrc." + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS \"{0}\" CASCADE; CREATE SCHEMA \"{0}\";"
                                "CREATE TABLE \"{0}\".t (id int PRIMARY KEY, v text);"
                                "INSERT INTO \"{0}\".t VALUES (1, 'a')",
                                s));
  w.write("flotilla.toml",
          fmt::format("[project]\nname = \"p\"\n\n[targets.wh]\ndialect = \"postgres\"\n"
                      "dsn = \"{0}\"\nschema = \"{2}\"\n\n[sources.app]\nadapter = \"postgres\"\n"
                      "dsn = \"{0}\"\ninclude = [\"{1}.*\"]\n",
                      pg_dsn(), s, t));
  int rc = -1;
  const auto run = flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  const std::string table = run["tables"][0]["table"];
  CHECK(table == t + ".t");
  const auto diff = run_flotilla(w, {"contract", "diff", "--output", "json"});
  INFO(diff.out << diff.err);
  CHECK(diff.exit_code == 0);
  const auto j = nlohmann::json::parse(diff.out);
  REQUIRE(j["tables"].size() == 1);
  CHECK(j["tables"][0]["table"] == table);
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA \"{}\" CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a full refresh into a PostgreSQL table a view is built on survives NOT NULL and key "
          "changes at the source: the table is emptied in place, the view kept") {
  workdir w;
  const std::string s = "pgnn_" + unique_suffix();
  const std::string t = "pgnt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.t (id int PRIMARY KEY, a text);"
                                "INSERT INTO {0}.t VALUES (1, 'x'), (2, 'y')",
                                s));
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n"
                      "\n"
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\n"
                      "include = [\"{1}.t\"]\n",
                      pg_dsn(), s, t));
  int rc = -1;
  REQUIRE((flotilla_json(w, {"run"}, &rc), rc == 0));
  pg_exec(pg_dsn(), fmt::format("CREATE VIEW {0}.v AS SELECT * FROM {0}.t", t));
  const auto not_null = [&](const std::string& column) {
    return pg_query(pg_dsn(), fmt::format("SELECT a.attnotnull::text FROM pg_attribute a WHERE "
                                          "a.attrelid = '{}.t'::regclass AND a.attname = '{}'",
                                          t, column))[0][0];
  };
  const auto through_view = [&] {
    return pg_query(pg_dsn(), fmt::format("SELECT id::text, coalesce(a, '<null>') FROM {}.v "
                                          "ORDER BY id",
                                          t));
  };
  // NOT NULL set at the source: the live table stays as permissive as it is.
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0}.t ALTER COLUMN a SET NOT NULL;"
                                "INSERT INTO {0}.t VALUES (3, 'z')",
                                s));
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  CHECK(through_view() == std::vector<std::vector<std::string>>{{"1", "x"}, {"2", "y"}, {"3", "z"}});
  CHECK(not_null("a") == "false");
  // Dropped again, on a live column that is NOT NULL by now: relaxed in place.
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0}.t ALTER COLUMN a DROP NOT NULL;"
                                "INSERT INTO {0}.t VALUES (4, NULL)",
                                s));
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {}.t ALTER COLUMN a SET NOT NULL", t));
  run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  CHECK(through_view().size() == 4);
  CHECK(not_null("a") == "false");
  // The source's key dropped, and its rows repeating what was a key: the live key goes.
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0}.t DROP CONSTRAINT t_pkey;"
                                "INSERT INTO {0}.t VALUES (1, 'again')",
                                s));
  run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  CHECK(through_view().size() == 5);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT count(*)::text FROM pg_constraint WHERE conrelid = "
                                       "'{}.t'::regclass AND contype = 'p'",
                                       t))[0][0] == "0");
  // A key again at the source, on other columns: the live table takes it, in place.
  pg_exec(pg_dsn(), fmt::format("DELETE FROM {0}.t WHERE a = 'again';"
                                "ALTER TABLE {0}.t ADD PRIMARY KEY (id)",
                                s));
  run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                                       "WHERE conrelid = '{}.t'::regclass AND contype = 'p'",
                                       t)) ==
        std::vector<std::vector<std::string>>{{"PRIMARY KEY (id)"}});
  CHECK(through_view().size() == 4);
  // The same table's rows, source and target.
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT id::text, coalesce(a, '<null>') FROM {}.t ORDER "
                                       "BY id, a",
                                       t)) ==
        pg_query(pg_dsn(), fmt::format("SELECT id::text, coalesce(a, '<null>') FROM {}.t ORDER "
                                       "BY id, a",
                                       s)));
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a section for \"public.Orders\" configures that table alone, not public.orders "
          "beside it") {
  workdir w;
  const std::string s = "pgcs_" + unique_suffix();
  const std::string t = "pgct_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.\"Orders\" (id int, a text);"
                                "CREATE TABLE {0}.orders (id int, b text);"
                                "INSERT INTO {0}.\"Orders\" VALUES (1, 'A');"
                                "INSERT INTO {0}.orders VALUES (2, 'B')",
                                s));
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n\n"
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\n"
                      "include = [\"{1}.*\"]\n\n"
                      "[sources.app.tables.\"{1}.Orders\"]\ncontract = \"enforced\"\n"
                      "columns = {{ id = \"int\" }}\n",
                      pg_dsn(), s, t));
  int rc = -1;
  const auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT * FROM {}.\"Orders\"", t)) ==
        std::vector<std::vector<std::string>>{{"1"}});
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT * FROM {}.orders", t)) ==
        std::vector<std::vector<std::string>>{{"2", "B"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a PostgreSQL full refresh that swaps the table makes again what was made by hand on "
          "it: indexes, triggers, constraints, defaults, row-level security, policies, comments") {
  workdir w;
  const std::string s = "pghm_" + unique_suffix();
  const std::string t = "pght_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.acct (id int PRIMARY KEY, tenant text, v text);"
                                "INSERT INTO {0}.acct VALUES (1, 'a', 'x'), (2, 'b', 'y')",
                                s));
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n"
                      "in_place_max_bytes = 0\n\n"  // every full refresh swaps
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\n"
                      "include = [\"{1}.acct\"]\n",
                      pg_dsn(), s, t));
  int rc = -1;
  REQUIRE((flotilla_json(w, {"run"}, &rc), rc == 0));
  pg_exec(pg_dsn(), fmt::format(
                        "CREATE TABLE {0}.audit (n int);"
                        "CREATE FUNCTION {0}.count_rows() RETURNS trigger LANGUAGE plpgsql AS "
                        "$$BEGIN INSERT INTO {0}.audit VALUES (1); RETURN NULL; END$$;"
                        "CREATE TRIGGER tr_audit AFTER INSERT ON {0}.acct FOR EACH STATEMENT "
                        "EXECUTE FUNCTION {0}.count_rows();"
                        "CREATE INDEX ix_tenant ON {0}.acct (tenant);"
                        "ALTER TABLE {0}.acct ADD CONSTRAINT ck_tenant CHECK (tenant <> '');"
                        "ALTER TABLE {0}.acct ALTER COLUMN v SET DEFAULT 'd';"
                        "ALTER TABLE {0}.acct ENABLE ROW LEVEL SECURITY;"
                        "CREATE POLICY only_a ON {0}.acct FOR SELECT TO PUBLIC USING (tenant = 'a');"
                        "COMMENT ON TABLE {0}.acct IS 'accounts';"
                        "COMMENT ON COLUMN {0}.acct.v IS 'it''s v';"
                        // A serial column by hand: its sequence goes with the old table.
                        "ALTER TABLE {0}.acct ADD COLUMN n serial;"
                        // An index on the defaulted column; a grant on a column; a foreign
                        // key to another table.
                        "CREATE INDEX ix_v ON {0}.acct (v);"
                        "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                        "'flotilla_test_reader') THEN CREATE ROLE flotilla_test_reader; END IF; "
                        "END$$;"
                        "GRANT UPDATE (v) ON {0}.acct TO flotilla_test_reader;"
                        "CREATE TABLE {0}.tenants (tenant text PRIMARY KEY);"
                        "INSERT INTO {0}.tenants VALUES ('a');"
                        "ALTER TABLE {0}.acct ADD CONSTRAINT fk_tenant FOREIGN KEY (tenant) "
                        "REFERENCES {0}.tenants (tenant) NOT VALID",
                        t));
  pg_exec(pg_dsn(), fmt::format("UPDATE {}.acct SET v = 'x2' WHERE id = 1", s));
  // plan --sql prints each statement with its own lines: the swap's DO block as it runs.
  const auto plan = run_flotilla(w, {"plan", "--sql"});
  INFO(plan.out);
  CHECK(plan.exit_code == 0);
  CHECK(plan.out.find("\\x0a") == std::string::npos);
  CHECK(plan.out.find("sql  DO $flotilla$\n") != std::string::npos);
  CHECK(plan.out.find("     DECLARE\n") != std::string::npos);
  const auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  REQUIRE(rc == 0);
  const auto* table = find_table(run, t + ".acct");
  REQUIRE(table != nullptr);
  CHECK(table->value("load", "") == "full_refresh");
  const std::string warnings = (*table)["warnings"].dump();
  for (const char* made : {"index ix_tenant", "trigger tr_audit", "constraint ck_tenant",
                           "default of v", "row level security", "policy only_a", "comment",
                           "index ix_v", "grant on v", "foreign key fk_tenant"})
    CHECK(warnings.find(made) != std::string::npos);
  const auto one = [&](const std::string& sql) { return pg_query(pg_dsn(), sql)[0][0]; };
  const std::string rel = fmt::format("'{}.acct'::regclass", t);
  CHECK(one("SELECT count(*)::text FROM pg_indexes WHERE schemaname = '" + t +
            "' AND indexname = 'ix_tenant'") == "1");
  CHECK(one("SELECT count(*)::text FROM pg_trigger WHERE tgrelid = " + rel +
            " AND tgname = 'tr_audit'") == "1");
  CHECK(one("SELECT count(*)::text FROM pg_constraint WHERE conrelid = " + rel +
            " AND conname IN ('ck_tenant', 'acct_pkey')") == "2");
  CHECK(one("SELECT relrowsecurity::text FROM pg_class WHERE oid = " + rel) == "true");
  CHECK(one("SELECT count(*)::text FROM pg_policy WHERE polrelid = " + rel) == "1");
  CHECK(one("SELECT obj_description(" + rel + ", 'pg_class')") == "accounts");
  CHECK(one("SELECT col_description(" + rel + ", 3)") == "it's v");
  CHECK(one("SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = " + rel) == "'d'::text");
  CHECK(warnings.find("default of n") == std::string::npos);
  CHECK(one("SELECT count(*)::text FROM information_schema.column_privileges WHERE table_schema "
            "= '" + t + "' AND table_name = 'acct' AND column_name = 'v' AND grantee = "
            "'flotilla_test_reader' AND privilege_type = 'UPDATE'") == "1");
  // Made again NOT VALID: the loaded rows (tenant 'b' has no row in tenants) stay.
  CHECK(one("SELECT convalidated::text FROM pg_constraint WHERE conrelid = " + rel +
            " AND conname = 'fk_tenant'") == "false");
  // Made after the rows: the statement trigger did not fire for the load.
  CHECK(one("SELECT count(*)::text FROM " + t + ".audit") == "0");
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT id::text, v FROM {}.acct ORDER BY id", t)) ==
        std::vector<std::vector<std::string>>{{"1", "x2"}, {"2", "y"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a merge into a table another table's foreign key refers to says to make the key "
          "deferrable, which lets the merge through") {
  workdir w;
  const std::string s = "pgfk_" + unique_suffix();
  const std::string t = "pgft_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.cust (id int PRIMARY KEY, name text, up int);"
                                "INSERT INTO {0}.cust VALUES (1, 'a', 1), (2, 'b', 2)",
                                s));
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n\n"
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\n"
                      "include = [\"{1}.cust\"]\n[sources.app.tables.\"{1}.cust\"]\n"
                      "cursor_column = \"up\"\nunique_key = [\"id\"]\n",
                      pg_dsn(), s, t));
  int rc = -1;
  REQUIRE((flotilla_json(w, {"run"}, &rc), rc == 0));
  pg_exec(pg_dsn(), fmt::format("CREATE TABLE {0}.orders (oid int PRIMARY KEY, cust_id int "
                                "CONSTRAINT orders_cust REFERENCES {0}.cust (id));"
                                "INSERT INTO {0}.orders VALUES (10, 2)",
                                t));
  pg_exec(pg_dsn(), fmt::format("UPDATE {}.cust SET name = 'b2', up = 3 WHERE id = 2", s));
  auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 1);
  const auto* table = find_table(run, t + ".cust");
  REQUIRE(table != nullptr);
  CHECK_THAT((*table)["error"].get<std::string>(),
             Catch::Contains("a foreign key of another table refers to") &&
                 Catch::Contains("DEFERRABLE INITIALLY DEFERRED"));
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {}.orders ALTER CONSTRAINT orders_cust DEFERRABLE "
                                "INITIALLY DEFERRED",
                                t));
  run = flotilla_json(w, {"retry"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT id::text, name FROM {}.cust ORDER BY id", t)) ==
        std::vector<std::vector<std::string>>{{"1", "a"}, {"2", "b2"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", t, s));
}

TEST_CASE("a table whose last trigger was dropped (relhastriggers still set) with a view over it "
          "is refreshed in place") {
  workdir w;
  const std::string s = "pgdt_" + unique_suffix();
  const std::string t = "pgdu_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.k (id int PRIMARY KEY, v text);"
                                "INSERT INTO {0}.k VALUES (1, 'a')",
                                s));
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n\n"
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\n"
                      "include = [\"{1}.k\"]\n",
                      pg_dsn(), s, t));
  int rc = -1;
  REQUIRE((flotilla_json(w, {"run"}, &rc), rc == 0));
  pg_exec(pg_dsn(), fmt::format("CREATE VIEW {0}.kv AS SELECT * FROM {0}.k;"
                                "CREATE FUNCTION {0}.f() RETURNS trigger LANGUAGE plpgsql AS "
                                "'BEGIN RETURN NEW; END';"
                                "CREATE TRIGGER tg BEFORE INSERT ON {0}.k FOR EACH ROW EXECUTE "
                                "FUNCTION {0}.f();"
                                "DROP TRIGGER tg ON {0}.k; ANALYZE {0}.k",
                                t));
  REQUIRE(pg_query(pg_dsn(), fmt::format("SELECT relhastriggers::text FROM pg_class WHERE oid = "
                                         "'{}.k'::regclass",
                                         t))[0][0] == "true");
  pg_exec(pg_dsn(), fmt::format("UPDATE {}.k SET v = 'new'", s));
  const auto run = flotilla_json(w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 0);
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT v FROM {}.kv", t)) ==
        std::vector<std::vector<std::string>>{{"new"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", t, s));
}

TEST_CASE("a PostgreSQL cursor value of NaN or infinity is never the watermark: later rows still "
          "arrive, and an append table with one fails, loading nothing") {
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.f (id int PRIMARY KEY, c float8, v text); "
                                "INSERT INTO {0}.f VALUES (1, 1.5, 'a'), (2, 'NaN', 'nan'); "
                                "CREATE TABLE {0}.t (id int PRIMARY KEY, c timestamptz, v text); "
                                "INSERT INTO {0}.t VALUES (1, '2024-01-01', 'a'), (2, 'infinity', 'open'); "
                                "CREATE TABLE {0}.e (id int, c timestamp); "
                                "INSERT INTO {0}.e VALUES (1, '2024-01-01'), (2, 'infinity'); "
                                // An unconstrained numeric reads as text; the server sorts it
                                // as a number.
                                "CREATE TABLE {0}.n (id int PRIMARY KEY, c numeric, v text); "
                                "INSERT INTO {0}.n VALUES (1, 1.5, 'a'), (2, 'Infinity', 'inf')",
                                s));
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n\n"
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\ninclude = [\"{1}.*\"]\n\n"
                      "[sources.app.tables.\"{1}.f\"]\ncursor_column = \"c\"\n"
                      "[sources.app.tables.\"{1}.t\"]\ncursor_column = \"c\"\n"
                      "[sources.app.tables.\"{1}.e\"]\ncursor_column = \"c\"\n"
                      "[sources.app.tables.\"{1}.n\"]\ncursor_column = \"c\"\n",
                      pg_dsn(), s, t));
  const auto ids = [&](const std::string& table) {
    return pg_query(pg_dsn(), fmt::format("SELECT coalesce(string_agg(id::text, ',' ORDER BY "
                                          "id), '') FROM {}.{}", t, table))[0][0];
  };
  int rc = -1;
  auto first = flotilla_json(w, {"run"}, &rc);
  INFO(first.dump(2));
  CHECK(rc == 1);
  const auto& e = *find_table(first, t + ".e");
  CHECK(e["status"] == "failed");
  CHECK_THAT(e["error"].get<std::string>(),
             Catch::Contains("in 1 row(s) (the first found: infinity)") && Catch::Contains("unique_key"));
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT to_regclass('{}.e') IS NULL", t))[0][0] == "t");
  pg_exec(pg_dsn(), fmt::format("INSERT INTO {0}.f VALUES (3, 2.5, 'later'); "
                                "INSERT INTO {0}.t VALUES (3, '2025-01-01', 'later'); "
                                "INSERT INTO {0}.n VALUES (3, 2.5, 'later')", s));
  auto second = flotilla_json(w, {"run"}, &rc);
  INFO(second.dump(2));
  for (const char* name : {"f", "t", "n"}) {
    INFO(name);
    const auto& r = *find_table(second, t + "." + name);
    CHECK(r["status"] == "copied");
    REQUIRE(r.contains("warnings"));
    CHECK_THAT(r["warnings"][0].get<std::string>(), Catch::Contains("read and merged again each run"));
    CHECK(ids(name) == "1,2,3");
  }
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a keyless incremental table whose cursor column changed type says only that it reads "
          "every row") {
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.a (id int, c int); "
                                "INSERT INTO {0}.a SELECT g, g FROM generate_series(1, 10) g",
                                s));
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n\n"
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\ninclude = [\"{1}.*\"]\n\n"
                      "[sources.app.tables.\"{1}.a\"]\ncursor_column = \"c\"\n",
                      pg_dsn(), s, t));
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  // The retype rewrites the table (a new relfilenode) and changes the cursor's family.
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0}.a ALTER COLUMN c TYPE text USING c::text; "
                                "INSERT INTO {0}.a VALUES (11, '11')", s));
  for (const char* verb : {"plan", "run"}) {
    INFO(verb);
    auto out = flotilla_json(w, {verb});
    INFO(out.dump(2));
    const auto& r = *find_table(out, t + ".a");
    REQUIRE(r.contains("warnings"));
    std::string all;
    for (const auto& x : r["warnings"])
      all += x.get<std::string>() + "\n";
    CHECK_THAT(all, Catch::Contains("changed type since the watermark") &&
                        !Catch::Contains("are not read"));
  }
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT count(*) FROM {}.a", t))[0][0] == "11");
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}

TEST_CASE("a cursor column dropped at the source and added again is not read past its old "
          "watermark") {
  workdir w;
  const std::string s = "pgsrc_" + unique_suffix();
  const std::string t = "pgtgt_" + unique_suffix();
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0};"
                                "CREATE TABLE {0}.r (id int PRIMARY KEY, c int, v text); "
                                "INSERT INTO {0}.r SELECT g, 100 + g, 'v' || g FROM "
                                "generate_series(1, 3) g",
                                s));
  w.write("flotilla.toml",
          fmt::format("[targets.wh]\ndialect = \"postgres\"\ndsn = \"{0}\"\nschema = \"{2}\"\n\n"
                      "[sources.app]\nadapter = \"postgres\"\ndsn = \"{0}\"\ninclude = [\"{1}.*\"]\n\n"
                      "[sources.app.tables.\"{1}.r\"]\ncursor_column = \"c\"\n",
                      pg_dsn(), s, t));
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0}.r DROP COLUMN c; INSERT INTO {0}.r VALUES (4, 'v4')", s));
  int rc = -1;
  auto failed = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(failed, t + ".r"))["error_code"] == "FLT-S010");
  // Failed again while the column is still gone: nothing says it is back.
  auto still = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(still, t + ".r"))["error_code"] == "FLT-S010");
  CHECK_THAT((*find_table(still, t + ".r")).value("warnings", nlohmann::json::array()).dump(),
             !Catch::Contains("is there again"));
  pg_exec(pg_dsn(), fmt::format("ALTER TABLE {0}.r ADD COLUMN c int; UPDATE {0}.r SET c = id; "
                                "INSERT INTO {0}.r VALUES (5, 'v5', 5)", s));
  auto again = flotilla_json(w, {"run"}, &rc);
  INFO(again.dump(2));
  CHECK(rc == 0);
  CHECK_THAT((*find_table(again, t + ".r"))["warnings"][0].get<std::string>(),
             Catch::Contains("was dropped at the source") && Catch::Contains("reads every row again"));
  CHECK(pg_query(pg_dsn(), fmt::format("SELECT string_agg(id || ':' || c, ',' ORDER BY id) FROM {}.r", t)) ==
        std::vector<std::vector<std::string>>{{"1:1,2:2,3:3,4:4,5:5"}});
  pg_exec(pg_dsn(), fmt::format("DROP SCHEMA {} CASCADE; DROP SCHEMA {} CASCADE", s, t));
}
