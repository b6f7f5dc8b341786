// Full refresh, append and merge loads against real DuckDB, PostgreSQL and SQLite.

#include "tests/sinks/sink_fixture.hpp"

using namespace flotilla;
using namespace flotilla::sinks;
using namespace flotilla::sinks::testing;

namespace {

schema::table_schema people() { return cols({col("id", "bigint", true), col("name", "text")}); }

std::vector<std::vector<value>> people_rows(int from, int to, const std::string& tag) {
  std::vector<std::vector<value>> out;
  for (int i = from; i <= to; ++i)
    out.push_back({I(i), T(tag + std::to_string(i))});
  return out;
}

std::vector<std::string> names(warehouse& wh, const dialects::table_ref& t) {
  const auto& d = wh.dialect();
  return column_of(wh.query("SELECT " + d.quote("name") + " FROM " + d.qualified(t) +
                            " ORDER BY " + d.quote("id")));
}

}  // namespace

TEST_CASE("a full refresh creates the table and loads its rows") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("people");
  REQUIRE_FALSE(wh->describe(t).has_value());

  load(*wh, t, people(), load_mode::replace, people_rows(1, 3, "a"));
  CHECK(names(*wh, t) == std::vector<std::string>{"a1", "a2", "a3"});
  CHECK_FALSE(wh->describe(target.table("people__flotilla_staging")).has_value());
}

TEST_CASE("a full refresh replaces the rows only when it commits") {
  test_target target(GENERATE(from_range(engines())));
  // PostgreSQL empties a small live table in place, or swaps (in_place_max_bytes = 0).
  target.in_place_max_bytes = GENERATE(std::uint64_t{0}, std::uint64_t{1} << 20);
  CAPTURE(target.engine(), target.in_place_max_bytes);
  auto wh = target.open();
  auto reader = target.open();
  const auto t = target.table("people");
  load(*wh, t, people(), load_mode::replace, people_rows(1, 3, "old"));

  load_request r{t, people(), load_mode::replace, {}, std::nullopt};
  {
    auto w = wh->begin_load(r);
    w->write(batch(people_rows(1, 5, "new")));
    // A reader sees the old table, whole, while the new rows load.
    CHECK(names(*reader, t) == std::vector<std::string>{"old1", "old2", "old3"});
    CHECK(w->rows() == 5);
  }  // destroyed without commit: rolled back
  CHECK(names(*reader, t) == std::vector<std::string>{"old1", "old2", "old3"});
  CHECK_FALSE(wh->describe(target.table("people__flotilla_staging")).has_value());

  {
    auto w = wh->begin_load(r);
    w->write(batch(people_rows(1, 2, "new")));
    w->write(batch(people_rows(3, 5, "new")));
    w->commit();
  }
  CHECK(names(*reader, t) == std::vector<std::string>{"new1", "new2", "new3", "new4", "new5"});

  // A second refresh of a swapped-in table works too (no name left behind collides).
  load(*wh, t, people(), load_mode::replace, people_rows(7, 8, "again"));
  CHECK(names(*reader, t) == std::vector<std::string>{"again7", "again8"});
  if (target.engine() == "postgres") {
    // The swapped-in table's key index is named after the live table, not the staging one.
    const auto& d = wh->dialect();
    CHECK(column_of(wh->query("SELECT indexname FROM pg_indexes WHERE schemaname = " +
                              d.literal(t.schema) + " AND tablename = 'people'")) ==
          std::vector<std::string>{"people_pkey"});
  }
}

TEST_CASE("a first full refresh creates the table in its own transaction, with no staging table") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  auto reader = target.open();
  const auto t = target.table("people");
  const auto staging = target.table("people__flotilla_staging");
  load_request r{t, people(), load_mode::replace, {}, std::nullopt};
  {
    auto w = wh->begin_load(r);
    w->write(batch(people_rows(1, 3, "new")));
    // Not there for a reader before the commit.
    CHECK_FALSE(reader->describe(t).has_value());
  }  // destroyed without commit: rolled back, nothing left
  CHECK_FALSE(reader->describe(t).has_value());
  CHECK_FALSE(reader->describe(staging).has_value());

  {
    auto w = wh->begin_load(r);
    w->write(batch(people_rows(1, 3, "new")));
    w->commit();
  }
  CHECK(names(*reader, t) == std::vector<std::string>{"new1", "new2", "new3"});
  REQUIRE(reader->describe(t).has_value());
  CHECK(*reader->describe(t) == people());
  CHECK_FALSE(reader->describe(staging).has_value());
  if (target.engine() == "postgres") {
    // Created under its own name, its key index has that name from the start.
    const auto& d = wh->dialect();
    CHECK(column_of(wh->query("SELECT indexname FROM pg_indexes WHERE schemaname = " +
                              d.literal(t.schema) + " AND tablename = 'people'")) ==
          std::vector<std::string>{"people_pkey"});
  }
}

TEST_CASE("a PostgreSQL table named like another table's key index takes its name; the index "
          "moves to the next free one") {
  test_target target("postgres");
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto orders = target.table("orders");
  const auto orders_pkey = target.table("orders_pkey");
  load(*wh, orders, people(), load_mode::replace, people_rows(1, 2, "o"));
  // "orders_pkey" is the index PostgreSQL made for orders' key, and "orders_pkey1" a
  // table already: each mode creating a table of that name finds it taken.
  load(*wh, target.table("orders_pkey1"), people(), load_mode::replace, people_rows(1, 1, "x"));
  const load_mode mode =
      GENERATE(load_mode::replace, load_mode::append, load_mode::merge);
  CAPTURE(static_cast<int>(mode));
  // The name reads as free, not as an index holding it (FLT-S015): the load moves it aside.
  CHECK_FALSE(wh->describe(orders_pkey).has_value());
  const auto ahead = wh->describe_tables("", orders_pkey.schema, {orders_pkey.name});
  REQUIRE(ahead.has_value());
  CHECK_FALSE(ahead->contains(orders_pkey.name));
  load_request r{orders_pkey, people(), mode, {}, std::nullopt};
  if (mode == load_mode::merge)
    r.unique_key = {"id"};
  {
    auto w = wh->begin_load(r);
    w->write(batch(people_rows(5, 6, "k")));
    w->commit();
  }
  CHECK(names(*wh, orders_pkey) == std::vector<std::string>{"k5", "k6"});
  CHECK(names(*wh, orders) == std::vector<std::string>{"o1", "o2"});
  CHECK(column_of(wh->query("SELECT indexname FROM pg_indexes WHERE schemaname = " +
                            d.literal(orders.schema) + " AND tablename = 'orders'")) ==
        std::vector<std::string>{"orders_pkey2"});
  // orders refreshed and swapped again keeps working beside the table of that name.
  load(*wh, orders, people(), load_mode::replace, people_rows(3, 3, "p"));
  CHECK(names(*wh, orders) == std::vector<std::string>{"p3"});
}

TEST_CASE("a connection creates a new schema once for its first loads; a schema dropped under it "
          "is created again after one failed load") {
  const std::string engine = GENERATE(std::string("duckdb"), std::string("postgres"));
  test_target target(engine);
  CAPTURE(engine);
  auto wh = target.open();
  auto other = target.open();
  const auto a = target.table("a"), b = target.table("b"), c = target.table("c");
  load(*wh, a, people(), load_mode::replace, people_rows(1, 2, "a"));
  load(*wh, b, people(), load_mode::replace, people_rows(1, 2, "b"));
  CHECK(names(*other, b) == std::vector<std::string>{"b1", "b2"});

  // Another connection drops the schema: this connection took it for granted, so the next
  // first load may fail, naming the table; the load after it creates the schema again.
  other->execute({"DROP SCHEMA " + other->dialect().quote(a.schema) + " CASCADE"});
  try {
    load(*wh, c, people(), load_mode::replace, people_rows(1, 2, "c"));
  } catch (const sink_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("\"c\""));
    load(*wh, c, people(), load_mode::replace, people_rows(1, 2, "c"));
  }
  CHECK(names(*other, c) == std::vector<std::string>{"c1", "c2"});
}

TEST_CASE("a SQLite full refresh empties a live table of the same columns, re-creates any other") {
  test_target target("sqlite");
  auto wh = target.open();
  const auto t = target.table("people");
  const auto schema_version = [&] { return column_of(wh->query("PRAGMA schema_version")).at(0); };
  load(*wh, t, people(), load_mode::replace, people_rows(1, 3, "old"));
  const auto before = schema_version();

  // Same columns: the rows are replaced and the table's definition is not touched.
  load(*wh, t, people(), load_mode::replace, people_rows(4, 5, "new"));
  CHECK(names(*wh, t) == std::vector<std::string>{"new4", "new5"});
  CHECK(schema_version() == before);

  // A new column: the table is re-created with it, in the same load.
  auto wider = people();
  wider.columns.push_back(col("email", "text"));
  load(*wh, t, wider, load_mode::replace, {{I(6), T("n6"), T("n6@x.io")}});
  CHECK(names(*wh, t) == std::vector<std::string>{"n6"});
  CHECK(schema_version() != before);
  REQUIRE(wh->describe(t).has_value());
  CHECK(*wh->describe(t) == wider);
}

TEST_CASE("a PostgreSQL full refresh keeps the grants on the table it replaces") {
  test_target target("postgres");
  // Swapped (in_place_max_bytes = 0) or emptied in place.
  target.in_place_max_bytes = GENERATE(std::uint64_t{0}, std::uint64_t{1} << 20);
  CAPTURE(target.in_place_max_bytes);
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("people");
  const std::string role = "flotilla_reader_" + unique_suffix();
  load(*wh, t, people(), load_mode::replace, people_rows(1, 2, "a"));
  wh->execute({"CREATE ROLE " + d.quote(role),
               "GRANT USAGE ON SCHEMA " + d.quote(t.schema) + " TO " + d.quote(role),
               "GRANT SELECT, UPDATE ON " + d.qualified(t) + " TO " + d.quote(role) +
                   " WITH GRANT OPTION"});
  const auto privileges = [&] {
    return column_of(wh->query(
        "SELECT privilege_type || ':' || is_grantable FROM information_schema.role_table_grants "
        "WHERE grantee = " + d.literal(role) + " AND table_schema = " + d.literal(t.schema) +
        " AND table_name = 'people' ORDER BY 1"));
  };
  CHECK(privileges() == std::vector<std::string>{"SELECT:YES", "UPDATE:YES"});

  // Twice: the staging table swapped in gets them; a table without grants of its own stays
  // without (the second table, never granted).
  load(*wh, t, people(), load_mode::replace, people_rows(1, 3, "b"));
  load(*wh, t, people(), load_mode::replace, people_rows(1, 4, "c"));
  CHECK(names(*wh, t) == std::vector<std::string>{"c1", "c2", "c3", "c4"});
  CHECK(privileges() == std::vector<std::string>{"SELECT:YES", "UPDATE:YES"});
  const auto plain = target.table("plain");
  load(*wh, plain, people(), load_mode::replace, people_rows(1, 1, "p"));
  load(*wh, plain, people(), load_mode::replace, people_rows(1, 1, "q"));
  CHECK(wh->query("SELECT relacl IS NULL FROM pg_class WHERE oid = to_regclass(" +
                  d.literal(d.qualified(plain)) + ")") ==
        rows_t{{std::optional<std::string>("t")}});

  wh->execute({"DROP SCHEMA " + d.quote(t.schema) + " CASCADE",
               "DROP ROLE " + d.quote(role)});
}

TEST_CASE("a PostgreSQL full refresh empties a small live table of the same columns in place; "
          "a larger one, a changed one, or one with a trigger is swapped") {
  test_target target("postgres");
  auto wh = target.open();
  auto reader = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("people");
  const auto view = target.table("people_view");
  const auto oid = [&] {
    return column_of(reader->query("SELECT to_regclass(" + d.literal(d.qualified(t)) +
                                   ")::oid::text")).at(0);
  };
  load(*wh, t, people(), load_mode::replace, people_rows(1, 3, "a"));
  wh->execute({"CREATE VIEW " + d.qualified(view) + " AS SELECT " + d.quote("name") + " FROM " +
               d.qualified(t)});
  const auto first = oid();

  // Same columns, 8 KiB of rows: emptied and loaded in place, in one transaction. The
  // table is the same one (same oid), so the view over it keeps working; readers see the
  // old rows until the commit.
  {
    auto w = wh->begin_load(load_request{t, people(), load_mode::replace, {}, std::nullopt});
    w->write(batch(people_rows(1, 2, "b")));
    CHECK(names(*reader, t) == std::vector<std::string>{"a1", "a2", "a3"});
    w->commit();
  }
  CHECK(oid() == first);
  CHECK(column_of(reader->query("SELECT " + d.quote("name") + " FROM " + d.qualified(view) +
                                " ORDER BY 1")) == std::vector<std::string>{"b1", "b2"});
  CHECK_FALSE(reader->describe(target.table("people__flotilla_staging")).has_value());
  REQUIRE(reader->describe(t).has_value());
  CHECK(*reader->describe(t) == people());  // the key stays

  // A new column: the staging table and its swap, as before (the view has to go first).
  wh->execute({"DROP VIEW " + d.qualified(view)});
  auto wider = people();
  wider.columns.push_back(col("email", "text"));
  load(*wh, t, wider, load_mode::replace, {{I(6), T("n6"), T("n6@x.io")}});
  CHECK(names(*reader, t) == std::vector<std::string>{"n6"});
  const auto second = oid();
  CHECK(second != first);

  // A trigger of its own: a DELETE would fire it, so the table is swapped.
  wh->execute({"CREATE FUNCTION " + d.quote(t.schema) + ".nop() RETURNS trigger LANGUAGE plpgsql "
               "AS $$BEGIN RETURN NULL; END$$",
               "CREATE TRIGGER nop AFTER DELETE ON " + d.qualified(t) + " FOR EACH ROW EXECUTE "
               "FUNCTION " + d.quote(t.schema) + ".nop()"});
  load(*wh, t, wider, load_mode::replace, {{I(7), T("n7"), T("n7@x.io")}});
  CHECK(names(*reader, t) == std::vector<std::string>{"n7"});
  const auto third = oid();
  CHECK(third != second);

  // A hostile name is emptied in place like any other: quoted everywhere, the same table.
  const auto hostile = target.table("t\"; DROP TABLE x; --'\xc3\xbc");
  load(*wh, hostile, people(), load_mode::replace, people_rows(1, 2, "h"));
  const auto hostile_oid = [&] {
    return column_of(reader->query("SELECT to_regclass(" + d.literal(d.qualified(hostile)) +
                                   ")::oid::text")).at(0);
  };
  const auto hostile_first = hostile_oid();
  CHECK(wh->empties_in_place(hostile));
  load(*wh, hostile, people(), load_mode::replace, people_rows(3, 3, "h"));
  CHECK(names(*reader, hostile) == std::vector<std::string>{"h3"});
  CHECK(hostile_oid() == hostile_first);

  // Larger than in_place_max_bytes (one 8 KiB page against 1 byte): swapped.
  target.in_place_max_bytes = 1;
  auto strict = target.open();
  load(*strict, t, wider, load_mode::replace, {{I(8), T("n8"), T("n8@x.io")}});
  CHECK(names(*reader, t) == std::vector<std::string>{"n8"});
  CHECK(oid() != third);
}

TEST_CASE("a PostgreSQL full refresh empties a table a view is built on in place whatever its "
          "size; a swap the view blocks fails saying what to do, and keeps the old rows") {
  test_target target("postgres");
  target.in_place_max_bytes = 1;  // every table is larger than this
  auto wh = target.open();
  auto reader = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("people");
  const auto view = target.table("people_view");
  const auto oid = [&] {
    return column_of(reader->query("SELECT to_regclass(" + d.literal(d.qualified(t)) +
                                   ")::oid::text")).at(0);
  };
  load(*wh, t, people(), load_mode::replace, people_rows(1, 3, "a"));
  // Without a view, larger than the limit: swapped.
  auto before = oid();
  load(*wh, t, people(), load_mode::replace, people_rows(1, 3, "b"));
  CHECK(oid() != before);
  // With a view over it: emptied in place, the view answers the new rows.
  wh->execute({"CREATE VIEW " + d.qualified(view) + " AS SELECT " + d.quote("name") + " FROM " +
               d.qualified(t)});
  before = oid();
  CHECK(wh->empties_in_place(t));
  load(*wh, t, people(), load_mode::replace, people_rows(4, 5, "c"));
  CHECK(oid() == before);
  CHECK(column_of(reader->query("SELECT " + d.quote("name") + " FROM " + d.qualified(view) +
                                " ORDER BY 1")) == std::vector<std::string>{"c4", "c5"});

  // Every refresh swapped (0): the view blocks the swap's DROP. The error says what depends
  // on the table and what to do, not the server's advice to cascade; nothing is lost.
  target.in_place_max_bytes = 0;
  auto swapping = target.open();
  try {
    load(*swapping, t, people(), load_mode::replace, people_rows(6, 6, "d"));
    FAIL("the swap should have failed on the view");
  } catch (const std::exception& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("people_view depends on table"));
    CHECK_THAT(message, Catch::Contains(
                            "never drops what depends on it (no CASCADE): drop the objects "
                            "DETAIL names before the run and create them again after it"));
    CHECK_THAT(message, !Catch::Contains("Use DROP ... CASCADE"));
    // The statement that failed, not the whole batch sent with it (the grants' DO block).
    CHECK_THAT(message, Catch::Contains("(in: DROP TABLE"));
    CHECK_THAT(message, !Catch::Contains("DECLARE"));
  }
  CHECK(names(*reader, t) == std::vector<std::string>{"c4", "c5"});
  wh->execute({"DROP VIEW " + d.qualified(view)});
}

TEST_CASE("a PostgreSQL full refresh empties a keyless table in place once its size is known, "
          "and swaps it while it is published, which a DELETE could not empty") {
  test_target target("postgres");
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("keyless");
  const auto keyless = cols({col("id", "bigint"), col("name", "text")});
  const auto oid = [&] {
    return column_of(wh->query("SELECT to_regclass(" + d.literal(d.qualified(t)) +
                               ")::oid::text")).at(0);
  };
  load(*wh, t, keyless, load_mode::replace, people_rows(1, 3, "a"));
  // Never vacuumed or analyzed (no key was built), its size is unknown: swapped.
  auto before = oid();
  load(*wh, t, keyless, load_mode::replace, people_rows(1, 3, "a"));
  CHECK(oid() != before);
  // Analyzed, and nothing published: emptied in place.
  wh->execute({"ANALYZE " + d.qualified(t)});
  before = oid();
  load(*wh, t, keyless, load_mode::replace, people_rows(1, 3, "a"));
  CHECK(oid() == before);
  wh->execute({"ANALYZE " + d.qualified(t)});
  const std::string publication = "flotilla_pub_" + unique_suffix();
  wh->execute({"CREATE PUBLICATION " + d.quote(publication) + " FOR TABLE " + d.qualified(t)});
  // PostgreSQL refuses to DELETE from it ("does not have a replica identity and publishes
  // deletes"): the refresh takes the staging table and its swap.
  CHECK_THROWS(wh->execute({"DELETE FROM " + d.qualified(t)}));
  CHECK_NOTHROW(load(*wh, t, keyless, load_mode::replace, people_rows(4, 5, "b")));
  CHECK(names(*wh, t) == std::vector<std::string>{"b4", "b5"});
  CHECK(oid() != before);
  wh->execute({"DROP PUBLICATION " + d.quote(publication)});
}

TEST_CASE("a full refresh drops a staging table left over from a crash") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("people");
  load(*wh, t, people(), load_mode::replace, people_rows(1, 2, "old"));
  const auto leftover = target.table("people__flotilla_staging");
  wh->execute({wh->dialect().create_table(leftover, cols({col("junk", "int")}))});
  REQUIRE(wh->describe(leftover).has_value());

  load(*wh, t, people(), load_mode::replace, people_rows(1, 1, "new"));
  CHECK(names(*wh, t) == std::vector<std::string>{"new1"});
  CHECK_FALSE(wh->describe(leftover).has_value());
}

TEST_CASE("a full refresh keeps live columns the source no longer has, filled with NULL") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("people");
  const auto wide = cols({col("id", "bigint", true), col("legacy", "int"), col("name", "text")});
  load(*wh, t, wide, load_mode::replace, {{I(1), I(42), T("a")}});

  load(*wh, t, people(), load_mode::replace, people_rows(1, 2, "b"));
  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  REQUIRE(live->columns.size() == 3);
  CHECK(live->columns[0].name == "id");
  CHECK(live->columns[1].name == "legacy");
  CHECK(live->columns[2].name == "name");
  const auto& d = wh->dialect();
  CHECK(column_of(wh->query("SELECT " + d.quote("legacy") + " FROM " + d.qualified(t))) ==
        std::vector<std::string>{"NULL", "NULL"});
  CHECK(names(*wh, t) == std::vector<std::string>{"b1", "b2"});
}

TEST_CASE("an append adds rows to the live table and creates it when missing") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("events");
  load(*wh, t, people(), load_mode::append, people_rows(1, 2, "a"));
  load(*wh, t, people(), load_mode::append, people_rows(3, 4, "a"));
  CHECK(count(*wh, t) == 4);

  {
    auto w = wh->begin_load(load_request{t, people(), load_mode::append, {}, std::nullopt});
    w->write(batch(people_rows(5, 9, "x")));
  }  // not committed
  CHECK(count(*wh, t) == 4);
}

TEST_CASE("an append fills live columns missing from the batch with NULL") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("events");
  const auto wide = cols({col("id", "bigint"), col("extra", "text"), col("name", "text")});
  load(*wh, t, wide, load_mode::append, {{I(1), T("e"), T("a")}});
  load(*wh, t, people(), load_mode::append, {{I(2), T("b")}});
  const auto& d = wh->dialect();
  CHECK(column_of(wh->query("SELECT " + d.quote("extra") + " FROM " + d.qualified(t) +
                            " ORDER BY " + d.quote("id"))) ==
        std::vector<std::string>{"e", "NULL"});
}

TEST_CASE("a merge upserts by unique key and a rerun never duplicates rows") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("customers");
  load(*wh, t, people(), load_mode::merge, people_rows(1, 3, "v1_"), {"id"});
  CHECK(names(*wh, t) == std::vector<std::string>{"v1_1", "v1_2", "v1_3"});

  auto changes = people_rows(2, 4, "v2_");
  load(*wh, t, people(), load_mode::merge, changes, {"id"});
  load(*wh, t, people(), load_mode::merge, changes, {"id"});  // the rerun after a crash
  CHECK(names(*wh, t) == std::vector<std::string>{"v1_1", "v2_2", "v2_3", "v2_4"});
  CHECK_FALSE(wh->describe(target.table("customers__flotilla_merge")).has_value());
}

TEST_CASE("a merge keeps the last version of a key that arrives twice in one load") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("customers");
  load_request r{t, people(), load_mode::merge, {"id"}, std::nullopt};
  auto w = wh->begin_load(r);
  w->write(batch({{I(1), T("first")}, {I(2), T("only")}}));
  w->write(batch({{I(1), T("second")}}));
  w->commit();
  CHECK(names(*wh, t) == std::vector<std::string>{"second", "only"});
}

TEST_CASE("a merge on a composite key matches every key column") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("lines");
  const auto s = cols({col("order_id", "int"), col("line", "int"), col("qty", "int")});
  load(*wh, t, s, load_mode::merge, {{I(1), I(1), I(5)}, {I(1), I(2), I(6)}}, {"order_id", "line"});
  load(*wh, t, s, load_mode::merge, {{I(1), I(2), I(9)}, {I(2), I(1), I(1)}}, {"order_id", "line"});
  const auto& d = wh->dialect();
  CHECK(column_of(wh->query("SELECT " + d.quote("qty") + " FROM " + d.qualified(t) + " ORDER BY " +
                            d.quote("order_id") + ", " + d.quote("line"))) ==
        std::vector<std::string>{"5", "9", "1"});
}

TEST_CASE("a merge into a live table with more columns than the load keeps their values") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("lines");
  const auto& d = wh->dialect();
  // A column the source dropped since (`note`), and a composite key.
  const auto wide = cols({col("order_id", "int"), col("line", "int"), col("qty", "int"),
                          col("note", "text")});
  load(*wh, t, wide, load_mode::merge,
       {{I(1), I(1), I(5), T("keep")}, {I(1), I(2), I(6), T("also")},
        {N(), I(3), I(7), T("null key")}},
       {"order_id", "line"});
  const auto narrow = cols({col("order_id", "int"), col("line", "int"), col("qty", "int")});
  load_request r{t, narrow, load_mode::merge, {"order_id", "line"}, std::nullopt};
  r.keeps_other_columns = true;
  for (int rerun = 0; rerun < 2; ++rerun) {  // the rerun after a crash changes nothing
    auto w = wh->begin_load(r);
    w->write(batch({{I(1), I(2), I(8)}, {I(2), I(1), I(1)}, {N(), I(3), I(9)}}));
    w->write(batch({{I(1), I(2), I(9)}}));  // the last version of a key wins
    w->commit();
  }
  const auto rows = wh->query(
      "SELECT " + d.quote("qty") + ", " + d.quote("note") + " FROM " + d.qualified(t) +
      " ORDER BY " + d.quote("order_id") + " IS NULL, " + d.quote("order_id") + ", " +
      d.quote("line") + ", " + d.quote("qty"));
  std::vector<std::string> got;
  for (const auto& row : rows)
    got.push_back(row.at(0).value_or("NULL") + "/" + row.at(1).value_or("NULL"));
  // A NULL in the key matches nothing: each load inserts that row again.
  CHECK(got == std::vector<std::string>{"5/keep", "9/also", "1/NULL", "7/null key", "9/NULL",
                                        "9/NULL"});
  CHECK_FALSE(wh->describe(target.table("lines__flotilla_merge")).has_value());
}

TEST_CASE("a SQLite merge finds the live rows to replace through the key's index") {
  // SQLite runs a correlated EXISTS as a nested loop over both tables: a merge of 16,000
  // rows into 50,000 took 30 s that way.
  test_target target("sqlite");
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("lines");
  const auto incoming = target.table("lines_incoming");
  const auto s = cols({col("order_id", "int"), col("line", "int"), col("qty", "int")});
  // Created as a run creates it, the unique key its primary key.
  wh->execute({d.create_table(
      t, cols({col("order_id", "int", true), col("line", "int", true), col("qty", "int")}))});
  load(*wh, t, s, load_mode::merge, {{I(1), I(1), I(5)}}, {"order_id", "line"});
  load(*wh, incoming, s, load_mode::replace, {{I(1), I(1), I(7)}});
  for (const std::vector<std::string>& key :
       {std::vector<std::string>{"order_id", "line"}, std::vector<std::string>{"order_id"}}) {
    CAPTURE(key.size());
    std::string plan;
    for (const auto& row : wh->query("EXPLAIN QUERY PLAN " + d.delete_matching(t, incoming, key)))
      plan += row.at(3).value_or("") + "\n";
    CAPTURE(plan);
    CHECK_THAT(plan, Catch::StartsWith("SEARCH " + t.name + " USING INDEX"));
    CHECK_THAT(plan, !Catch::Contains("SCAN " + t.name + "\n"));
  }
}

TEST_CASE("a merge without a unique key is refused before anything is written") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("customers");
  CHECK_THROWS_WITH(wh->begin_load(load_request{t, people(), load_mode::merge, {}, std::nullopt}),
                    Catch::Contains("unique_key"));
  CHECK_THROWS_WITH(
      wh->begin_load(load_request{t, people(), load_mode::merge, {"nope"}, std::nullopt}),
      Catch::Contains("'nope'"));
  CHECK_FALSE(wh->describe(t).has_value());
}

TEST_CASE("the commit token is stored with the rows and read back") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("orders");
  const auto other = target.table("other");
  CHECK_FALSE(wh->committed_token(t).has_value());

  load(*wh, t, people(), load_mode::append, people_rows(1, 2, "a"), {}, "watermark=2");
  CHECK(wh->committed_token(t) == "watermark=2");
  CHECK_FALSE(wh->committed_token(other).has_value());

  {
    auto w = wh->begin_load(
        load_request{t, people(), load_mode::append, {}, std::string("watermark=9")});
    w->write(batch(people_rows(3, 9, "a")));
  }  // a crash before commit: neither rows nor token
  CHECK(wh->committed_token(t) == "watermark=2");
  CHECK(count(*wh, t) == 2);

  load(*wh, t, people(), load_mode::merge, people_rows(2, 4, "b"), {"id"}, "it's \"4\"");
  load(*wh, t, people(), load_mode::replace, people_rows(1, 1, "c"), {}, "");
  load(*wh, other, people(), load_mode::replace, people_rows(1, 1, "c"), {}, "o");
  CHECK(wh->committed_token(t) == "");
  CHECK(wh->committed_token(other) == "o");

  auto again = target.open();
  CHECK(again->committed_token(t) == "");
}

TEST_CASE("a writer that fails on a value rolls back and the table stays as it was") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("orders");
  const auto s = cols({col("id", "bigint", true), col("day", "date")});
  load(*wh, t, s, load_mode::append, {{I(1), T("2024-01-01")}});
  auto w = wh->begin_load(load_request{t, s, load_mode::append, {}, std::nullopt});
  CHECK_THROWS_AS(
      [&] {
        w->write(batch({{I(2), T("2024-01-02")}, {N(), T("2024-01-02")}}));
        w->commit();
      }(),
      sink_error);
  CHECK_THROWS_AS(w->commit(), sink_error);
  w.reset();
  CHECK(count(*wh, t) == 1);
  // The connection is usable again.
  load(*wh, t, s, load_mode::append, {{I(3), T("2024-01-03")}});
  CHECK(count(*wh, t) == 2);
}

TEST_CASE("a second load on the same connection waits for the first to finish") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto t = target.table("orders");
  auto w = wh->begin_load(load_request{t, people(), load_mode::append, {}, std::nullopt});
  CHECK_THROWS_AS(wh->begin_load(load_request{t, people(), load_mode::append, {}, std::nullopt}),
                  sink_error);
  CHECK_THROWS_AS(wh->execute({"SELECT 1"}), sink_error);
  w->commit();
  CHECK_NOTHROW(wh->execute({"SELECT 1"}));
}

TEST_CASE("a NUL byte in a text value fails a PostgreSQL load, saying so and what to do") {
  test_target target("postgres");
  auto wh = target.open();
  const auto t = target.table("nul_text");
  CHECK_THROWS_WITH(load(*wh, t, cols({col("id", "int"), col("v", "text")}), load_mode::replace,
                         {{I(1), T("ok")}, {I(2), T(std::string("a\0b", 3))}}),
                    Catch::Contains("NUL byte (0x00)") &&
                        Catch::Contains("column \"v\"") && Catch::Contains("row 2 of the load") &&
                        Catch::Contains("remove it at the source"));
}

TEST_CASE("a PostgreSQL text column refuses a value that is not UTF-8, naming its row and "
          "column and the bytes pin") {
  // PostgreSQL's own refusal named only the COPY line, and the run said to correct it on
  // the target.
  test_target target("postgres");
  auto wh = target.open();
  const auto t = target.table("bad_utf8");
  CHECK_THROWS_WITH(load(*wh, t, cols({col("id", "int"), col("v", "text")}), load_mode::replace,
                         {{I(1), T("plain \xc3\xa9")}, {I(2), T("a\xff" "b")}}),
                    Catch::Contains("row 2 of the load, column \"v\": the value is not UTF-8 text") &&
                        Catch::Contains("columns = { v = \"bytes\" }"));
}

TEST_CASE("a DuckDB text column refuses a value that is not UTF-8, naming its row and column "
          "and the bytes pin") {
  test_target target("duckdb");
  auto wh = target.open();
  const auto t = target.table("notes");
  try {
    load(*wh, t, people(), load_mode::replace,
         {{I(1), T("plain \xc3\xa9")}, {I(2), T(std::string("\xff" "A\x00", 3))}});
    FAIL("a value that is not UTF-8 was loaded");
  } catch (const std::exception& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("row 2 of the load, column 'name': the value is not UTF-8 text"));
    CHECK_THAT(message, Catch::Contains("columns = { name = \"bytes\" }"));
  }
  // Valid UTF-8 of every length loads as it is; nothing of the failed load is left.
  const std::string mixed = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 0123456789";
  load(*wh, t, people(), load_mode::replace, {{I(1), T(mixed)}});
  CHECK(names(*wh, t) == std::vector<std::string>{mixed});
  // Overlong forms and surrogates are not UTF-8 either.
  for (const std::string& bad : {std::string("\xc0\xaf"), std::string("\xed\xa0\x80"),
                                std::string("\xf4\x90\x80\x80"), std::string("ab\xe2\x82")}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(load(*wh, t, people(), load_mode::replace, {{I(1), T(bad)}}),
                      Catch::Contains("not UTF-8"));
  }
}

namespace {

/// An append of `rows` whose commit writes `token`, guarded by `expected` when given.
load_request token_append(const flotilla::dialects::table_ref& t, std::string token,
                          std::optional<std::string> expected = std::nullopt) {
  load_request r{t, people(), load_mode::append, {}, std::move(token)};
  r.guard_token = expected.has_value();
  r.expected_token = std::move(expected);
  return r;
}

void append_committed(warehouse& wh, const load_request& r,
                      const std::vector<std::vector<value>>& rows) {
  auto w = wh.begin_load(r);
  w->write(batch(rows));
  w->commit();
}

void check_commit_refused(table_writer& w) {
  try {
    w.commit();
    FAIL("the commit went through");
  } catch (const sink_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("the table's commit token changed") &&
                             Catch::Contains("nothing of this load was committed") &&
                             !Catch::Contains("invalid input syntax"));
  }
}

}  // namespace

TEST_CASE("an append whose commit token another run changed since its run read it commits "
          "nothing") {
  // Two runs of one table at once (two projects on one target), or a killed run's server
  // session finishing its COMMIT after a rerun read the token: the rows of both would be
  // there (a keyless append twice).
  for (const char* kind : {"sqlite", "postgres"}) {
    INFO(kind);
    test_target target(kind);
    auto wh = target.open();
    auto other = target.open();
    const auto t = target.table("events");
    append_committed(*wh, token_append(t, "seq=2"), people_rows(1, 2, "a"));
    REQUIRE(wh->committed_token(t) == "seq=2");
    const load_request next = token_append(t, "seq=4", "seq=2");
    if (std::string_view(kind) == "sqlite") {
      // The other run commits first; this one's load then holds the write lock.
      append_committed(*other, next, people_rows(3, 4, "r"));
      auto w = wh->begin_load(next);
      w->write(batch(people_rows(8, 9, "b")));
      check_commit_refused(*w);
    } else {
      // The other session commits while this load is open.
      auto w = wh->begin_load(next);
      w->write(batch(people_rows(8, 9, "b")));
      load_request racing = next;
      racing.guard_token = false;
      append_committed(*other, racing, people_rows(3, 4, "r"));
      check_commit_refused(*w);
    }
    CHECK(names(*other, t) == std::vector<std::string>{"a1", "a2", "r3", "r4"});
    CHECK(wh->committed_token(t) == "seq=4");
    // The token as expected: the guarded commit goes through.
    append_committed(*wh, token_append(t, "seq=5", "seq=4"), people_rows(5, 5, "c"));
    auto all = names(*other, t);
    std::sort(all.begin(), all.end());
    CHECK(all == std::vector<std::string>{"a1", "a2", "c5", "r3", "r4"});
    CHECK(wh->committed_token(t) == "seq=5");
  }
}
