// warehouse::describe_tables: several tables of a schema in one catalog query, each
// exactly as describe() reads it.

#include "tests/sinks/sink_fixture.hpp"

using namespace flotilla;
using namespace flotilla::sinks;
using namespace flotilla::sinks::testing;

namespace {

/// What describe() throws for `table` (empty when it does not throw).
std::string describe_error(warehouse& wh, const dialects::table_ref& table) {
  try {
    (void)wh.describe(table);
  } catch (const sink_error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("describe_tables reads each table of a schema as describe does") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto& d = wh->dialect();
  const std::vector<std::string> names{"orders", "t\"; DROP TABLE x; --'\xc3\xbc", "back\\slash",
                                       "view_of_orders", "missing"};
  const auto orders = target.table(names[0]);
  auto keyed = cols({col("id", "bigint"), col("amount", "decimal(12,2)"), col("note", "text")});
  keyed.columns[0].key = true;
  keyed.columns[0].nullable = false;
  load(*wh, orders, keyed, load_mode::replace, {{I(1), T("1.50"), T("a")}});
  load(*wh, target.table(names[1]), cols({col("it's", "int"), col("ts", "timestamp_ntz")}),
       load_mode::replace, {{I(1), N()}});
  load(*wh, target.table(names[2]), cols({col("b", "bool")}), load_mode::replace, {{B(true)}});
  wh->execute({d.add_column(orders, col("later", "double"))});
  if (target.engine() != "sqlite")
    wh->execute({"CREATE VIEW " + d.qualified(target.table(names[3])) + " AS SELECT id, note FROM " +
                 d.qualified(orders)});

  const std::string schema = target.table(names[0]).schema;
  // DuckDB reads its catalog functions from 1,000 names on (fewer: DESCRIBE per table).
  std::vector<std::string> asked = names;
  for (int i = 0; asked.size() < 1000; ++i)
    asked.push_back("absent_" + std::to_string(i));
  if (target.engine() == "duckdb")
    CHECK_FALSE(wh->describe_tables("", schema, names).has_value());
  const auto all = wh->describe_tables("", schema, asked);
  REQUIRE(all.has_value());
  for (const auto& n : names) {
    CAPTURE(n);
    if (n == names[3] && target.engine() != "sqlite") {
      // A view holds the name: both say so alike (FLT-S015), neither reads it as a table.
      const std::string error = describe_error(*wh, target.table(n));
      CHECK(error.find("is a view, not a table Flotilla can load into") != std::string::npos);
      CHECK(is_not_a_table(error));
      REQUIRE(all->contains(n));
      REQUIRE_FALSE(all->at(n).has_value());
      CHECK(all->at(n).error() == error);
      continue;
    }
    const auto one = wh->describe(target.table(n));
    const auto it = all->find(n);
    CHECK(one.has_value() == (it != all->end()));
    if (one && it != all->end()) {
      REQUIRE(it->second.has_value());
      CHECK(*it->second == *one);
    }
  }
  REQUIRE(all->contains(names[0]));
  CHECK((*all->at(names[0])).columns.at(0).key);
  CHECK_FALSE((*all->at(names[0])).columns.at(0).nullable);
  CHECK((*all->at(names[0])).columns.size() == 4);
  CHECK_FALSE(all->contains("missing"));
  CHECK_FALSE(all->contains("absent_0"));
  if (target.engine() == "postgres")
    CHECK(wh->describe_tables("", schema, {})->empty());
}

TEST_CASE("DuckDB's describe_tables answers each name as DuckDB matches it, and keeps a table "
          "with an unmappable column apart") {
  test_target target("duckdb");
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto mixed = target.table("Mixed_Case");
  const auto odd = target.table("odd");
  load(*wh, mixed, cols({col("id", "bigint", true), col("Note", "text")}), load_mode::replace,
       {{I(1), T("a")}});
  load(*wh, odd, cols({col("id", "int")}), load_mode::replace, {{I(1)}});
  wh->execute({"ALTER TABLE " + d.qualified(odd) + " ADD COLUMN s STRUCT(a INTEGER)"});
  const std::string expected = describe_error(*wh, odd);
  REQUIRE_FALSE(expected.empty());
  std::vector<std::string> names{"mixed_case", "MIXED_CASE", "Mixed_Case", "odd"};
  for (int i = 0; names.size() < 1000; ++i)
    names.push_back("absent_" + std::to_string(i));
  const auto all = wh->describe_tables("", mixed.schema, names);
  REQUIRE(all.has_value());
  CHECK(all->size() == 4);
  const auto one = wh->describe(mixed);
  REQUIRE(one.has_value());
  for (const char* n : {"mixed_case", "MIXED_CASE", "Mixed_Case"}) {
    CAPTURE(n);
    REQUIRE(all->contains(n));
    REQUIRE(all->at(n).has_value());
    CHECK(*all->at(n) == *one);
    CHECK(all->at(n)->columns.at(0).key);
    CHECK_FALSE(all->at(n)->columns.at(0).nullable);
    CHECK(all->at(n)->columns.at(1).name == "Note");
  }
  REQUIRE(all->contains("odd"));
  REQUIRE_FALSE(all->at("odd").has_value());
  CHECK(all->at("odd").error() == expected);
}

TEST_CASE("SQLite's describe_tables answers each name as SQLite matches it, reads a declared "
          "type as describe does, and only the tables asked for") {
  test_target target("sqlite");
  auto wh = target.open();
  const auto mixed = target.table("Mixed_Case");
  const auto odd = target.table("odd");
  load(*wh, mixed, cols({col("id", "bigint", true), col("Note", "text")}), load_mode::replace,
       {{I(1), T("a")}});
  wh->execute({"CREATE TABLE " + wh->dialect().qualified(odd) + " (id INTEGER, p POINT)",
               "CREATE TABLE " + wh->dialect().qualified(target.table("not_asked")) + " (x INT)"});
  // "odd" asked twice is read once.
  const std::vector<std::string> names{"mixed_case", "MIXED_CASE", "odd", "missing", "odd\"x",
                                       "odd"};
  const auto all = wh->describe_tables("", mixed.schema, names);
  REQUIRE(all.has_value());
  CHECK(all->size() == 3);
  const auto one = wh->describe(mixed);
  REQUIRE(one.has_value());
  for (const char* n : {"mixed_case", "MIXED_CASE"}) {
    CAPTURE(n);
    REQUIRE(all->contains(n));
    REQUIRE(all->at(n).has_value());
    CHECK(*all->at(n) == *one);
    CHECK(all->at(n)->columns.at(0).key);
    CHECK(all->at(n)->columns.at(1).name == "Note");
  }
  // SQLite takes any declared type; the dialect reads an unknown one by its affinity.
  const auto odd_one = wh->describe(odd);
  REQUIRE(odd_one.has_value());
  REQUIRE(all->contains("odd"));
  REQUIRE(all->at("odd").has_value());
  CHECK(*all->at("odd") == *odd_one);
  CHECK(all->at("odd")->columns.size() == 2);
  CHECK(wh->describe_tables("", mixed.schema, {})->empty());
  // A name that is not UTF-8 cannot travel as JSON: the tables are described one by one.
  CHECK_FALSE(wh->describe_tables("", mixed.schema, {"bad\xff"}).has_value());
}

TEST_CASE("describe_tables keeps a table with an unmappable column apart from the others") {
  test_target target("postgres");
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto good = target.table("good");
  const auto odd = target.table("odd");
  load(*wh, good, cols({col("id", "int")}), load_mode::replace, {{I(1)}});
  load(*wh, odd, cols({col("id", "int")}), load_mode::replace, {{I(1)}});
  wh->execute({"ALTER TABLE " + d.qualified(odd) + " ADD COLUMN p point"});
  const std::string expected = describe_error(*wh, odd);
  REQUIRE_FALSE(expected.empty());
  const auto all = wh->describe_tables("", good.schema, {"good", "odd"});
  REQUIRE(all.has_value());
  REQUIRE(all->at("good").has_value());
  REQUIRE_FALSE(all->at("odd").has_value());
  CHECK(all->at("odd").error() == expected);
}

TEST_CASE("describe_tables puts each table's columns in their order when the server returns "
          "them in another, and names the first unmappable column") {
  test_target target("postgres");
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto moved = target.table("moved");
  const auto odd = target.table("odd");
  load(*wh, moved, cols({col("a", "int"), col("b", "int"), col("c", "text")}), load_mode::replace,
       {{I(1), I(2), T("x")}});
  load(*wh, odd, cols({col("id", "int")}), load_mode::replace, {{I(1)}});
  wh->execute({"ALTER TABLE " + d.qualified(odd) + " ADD COLUMN x point, ADD COLUMN y box"});

  // A connection whose planner joins by hashing: pg_attribute's rows come in their stored
  // order. A changed type writes a column's catalog row anew, most often after the table's
  // other rows; where the server put it elsewhere, the type is changed again.
  ::setenv("PGOPTIONS",
           "-c enable_nestloop=off -c enable_mergejoin=off -c enable_indexscan=off "
           "-c enable_bitmapscan=off",
           1);
  auto hashing = target.open();
  ::unsetenv("PGOPTIONS");
  auto stored_order = [&](const dialects::table_ref& t) {
    std::string names;
    for (const auto& r : hashing->query(
             "SELECT a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
             "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = " +
             d.literal(t.schema) + " AND c.relname = " + d.literal(t.name) + " AND a.attnum > 0"))
      names += r.at(0).value_or("?");
    return names;
  };
  for (int i = 0; i < 50 && stored_order(moved) == "abc"; ++i)
    wh->execute({"ALTER TABLE " + d.qualified(moved) + " ALTER COLUMN a TYPE " +
                 (i % 2 == 0 ? "bigint" : "integer")});
  for (int i = 0; i < 50 && stored_order(odd) != "idyx"; ++i)
    wh->execute({"ALTER TABLE " + d.qualified(odd) + " ALTER COLUMN x TYPE " +
                 (i % 2 == 0 ? "circle" : "polygon") + " USING NULL"});
  REQUIRE(stored_order(moved) != "abc");
  REQUIRE(stored_order(odd) == "idyx");
  const std::string expected = describe_error(*wh, odd);
  REQUIRE(expected.find("'x'") != std::string::npos);

  const auto all = hashing->describe_tables("", moved.schema, {"moved", "odd"});
  REQUIRE(all.has_value());
  REQUIRE(all->at("moved").has_value());
  CHECK(*all->at("moved") == *wh->describe(moved));
  CHECK(all->at("moved")->columns.at(0).name == "a");
  REQUIRE_FALSE(all->at("odd").has_value());
  CHECK(all->at("odd").error() == expected);
}

TEST_CASE("describe_tables reads more tables than one of its queries takes, through a cursor "
          "that leaves the connection as it found it") {
  test_target target("postgres");
  auto wh = target.open();
  const auto& d = wh->dialect();
  const std::string schema = target.table("x").schema;
  // 2,345 tables, table i with i % 20 + 1 columns: ~24,600 column rows, more than one
  // fetch of the cursor takes, so a table's columns may come in two fetches.
  load(*wh, target.table("seed"), cols({col("id", "int")}), load_mode::replace, {{I(1)}});
  wh->execute({"DO $$ BEGIN FOR i IN 1..2345 LOOP EXECUTE format('CREATE TABLE %I.%I (%s)', " +
               d.literal(schema) + ", 't' || i, (SELECT string_agg('c' || k || "
               "CASE k % 3 WHEN 0 THEN ' int' WHEN 1 THEN ' text' ELSE ' date' END, ', ' "
               "ORDER BY k) FROM generate_series(1, i % 20 + 1) k)); END LOOP; END $$"});
  std::vector<std::string> names;
  for (int i = 1; i <= 2345; ++i)
    names.push_back("t" + std::to_string(i));
  names.push_back("missing");
  auto check_all = [&](const warehouse::described_tables& all) {
    CHECK(all.size() == 2345);
    std::size_t columns = 0;
    for (int i = 1; i <= 2345; ++i) {
      CAPTURE(i);
      const auto it = all.find("t" + std::to_string(i));
      REQUIRE(it != all.end());
      REQUIRE(it->second.has_value());
      REQUIRE(it->second->columns.size() == static_cast<std::size_t>(i % 20 + 1));
      for (std::size_t k = 0; k < it->second->columns.size(); ++k)
        CHECK(it->second->columns[k].name == "c" + std::to_string(k + 1));
      columns += it->second->columns.size();
    }
    CHECK(columns > 16384);
    for (int i : {1, 999, 1000, 1001, 2000, 2001, 2345}) {
      const std::string name = "t" + std::to_string(i);
      CHECK(*all.at(name) == *wh->describe(target.table(name)));
    }
    CHECK_FALSE(all.contains("missing"));
  };
  // Outside a transaction: its own, closed afterwards (another session sees what this one
  // creates next, so nothing was left open).
  const auto all = wh->describe_tables("", schema, names);
  REQUIRE(all.has_value());
  check_all(*all);
  const auto after = target.table("after");
  load(*wh, after, cols({col("id", "int")}), load_mode::replace, {{I(1)}});
  auto other = target.open();
  CHECK(other->describe(after).has_value());
  // Inside an open transaction: the cursor is closed and the transaction goes on.
  const auto inside = target.table("inside");
  (void)wh->query("BEGIN");
  (void)wh->query("CREATE TABLE " + d.qualified(inside) + " (id int)");
  const auto again = wh->describe_tables("", schema, names);
  REQUIRE(again.has_value());
  check_all(*again);
  CHECK(wh->describe(inside).has_value());
  (void)wh->query("ROLLBACK");
  CHECK_FALSE(wh->describe(inside).has_value());
}

TEST_CASE("describe_tables reads each table's in-place check ahead for a plan, and describe "
          "for a load; each answer is used once, then the check is asked live") {
  test_target target("postgres");
  auto wh = target.open();
  const auto& d = wh->dialect();
  auto keyed = cols({col("id", "bigint"), col("note", "text")});
  keyed.columns[0].key = true;
  keyed.columns[0].nullable = false;
  const auto small = target.table("small"), keyless = target.table("keyless"),
             view = target.table("v");
  load(*wh, small, keyed, load_mode::replace, {{I(1), T("a")}});
  load(*wh, keyless, cols({col("id", "bigint")}), load_mode::replace, {{I(1)}});
  wh->execute({"CREATE VIEW " + d.qualified(view) + " AS SELECT 1 AS one"});
  // Asked live: a keyed table of one page is emptied in place; a keyless one never analyzed
  // and a view are not.
  CHECK(wh->empties_in_place(small));
  CHECK_FALSE(wh->empties_in_place(keyless));
  CHECK_FALSE(wh->empties_in_place(view));

  REQUIRE(wh->describe_tables("", small.schema, {"small", "keyless", "v"}).has_value());
  // A trigger after the read-ahead: the plan's answer is the one read ahead, once...
  wh->execute({"CREATE FUNCTION " + d.quote(small.schema) + ".nop() RETURNS trigger LANGUAGE "
               "plpgsql AS $$BEGIN RETURN NULL; END$$",
               "CREATE TRIGGER nop AFTER DELETE ON " + d.qualified(small) + " FOR EACH ROW "
               "EXECUTE FUNCTION " + d.quote(small.schema) + ".nop()"});
  CHECK(wh->empties_in_place(small));
  CHECK_FALSE(wh->empties_in_place(keyless));
  CHECK_FALSE(wh->empties_in_place(view));
  // ...then asked live again: the trigger counts.
  CHECK_FALSE(wh->empties_in_place(small));
  // A load describes its table first, which answers the check anew (no extra round trip).
  const auto other = target.table("other");
  load(*wh, other, keyed, load_mode::replace, {{I(1), T("a")}});
  REQUIRE(wh->describe_tables("", small.schema, {"small", "other"}).has_value());
  REQUIRE(wh->describe(small).has_value());
  CHECK_FALSE(wh->empties_in_place(small));  // the trigger, as the describe read it
  REQUIRE(wh->describe(other).has_value());
  wh->execute({"CREATE TRIGGER nop AFTER DELETE ON " + d.qualified(other) + " FOR EACH ROW "
               "EXECUTE FUNCTION " + d.quote(small.schema) + ".nop()"});
  CHECK(wh->empties_in_place(other));  // as the describe read it, before the trigger
  CHECK_FALSE(wh->empties_in_place(other));  // then live
}

TEST_CASE("an in-place check read ahead on one connection answers it on another connection to "
          "the same database with the same limit, once") {
  test_target target("postgres");
  auto reader = target.open();
  auto planner = target.open();
  target.in_place_max_bytes = 2 * 1048576;
  auto other_limit = target.open();
  const auto& d = reader->dialect();
  auto keyed = cols({col("id", "bigint"), col("note", "text")});
  keyed.columns[0].key = true;
  keyed.columns[0].nullable = false;
  const auto small = target.table("small");
  load(*reader, small, keyed, load_mode::replace, {{I(1), T("a")}});
  REQUIRE(reader->describe_tables("", small.schema, {"small"}).has_value());
  // A trigger after the read-ahead: only the answer read ahead still says "in place".
  reader->execute({"CREATE FUNCTION " + d.quote(small.schema) + ".nop() RETURNS trigger "
                   "LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$",
                   "CREATE TRIGGER nop AFTER DELETE ON " + d.qualified(small) + " FOR EACH ROW "
                   "EXECUTE FUNCTION " + d.quote(small.schema) + ".nop()"});
  CHECK_FALSE(other_limit->empties_in_place(small));  // another limit: asked live
  CHECK(planner->empties_in_place(small));             // the answer read ahead, once
  CHECK_FALSE(reader->empties_in_place(small));        // then live, on any connection
  CHECK_FALSE(planner->empties_in_place(small));
}

TEST_CASE("describe finds a table by its schema when other schemas hold tables of the same "
          "name, through the generic plan PostgreSQL caches") {
  test_target target("postgres");
  auto wh = target.open();
  // Every client's schema holds the same table names; each here with its own columns.
  const std::vector<dialects::table_ref> same{target.table("same"),
                                              target.table_in(target.table("x").schema + "_b",
                                                              "same"),
                                              target.table_in(target.table("x").schema + "_c",
                                                              "same")};
  for (std::size_t i = 0; i < same.size(); ++i) {
    wh->execute({"CREATE SCHEMA IF NOT EXISTS " + wh->dialect().quote(same[i].schema)});
    load(*wh, same[i], cols({col("id", "int"), col("only_" + std::to_string(i), "text")}),
         load_mode::replace, {{I(1), T("x")}});
  }
  // The plan PostgreSQL switches a prepared statement to after five executions, at once.
  ::setenv("PGOPTIONS", "-c plan_cache_mode=force_generic_plan", 1);
  auto generic = target.open();
  ::unsetenv("PGOPTIONS");
  REQUIRE(generic->query("SHOW plan_cache_mode").at(0).at(0) == "force_generic_plan");
  for (int round = 0; round < 3; ++round)
    for (std::size_t i = 0; i < same.size(); ++i) {
      CAPTURE(round, i);
      const auto t = generic->describe(same[i]);
      REQUIRE(t.has_value());
      REQUIRE(t->columns.size() == 2);
      CHECK(t->columns[1].name == "only_" + std::to_string(i));
    }
  CHECK_FALSE(generic->describe({"", target.table("x").schema + "_absent", "same"}).has_value());
  CHECK_FALSE(generic->describe(target.table("other")).has_value());
  // pg_class is searched by schema and name together, not by name in every schema.
  std::string plan;
  for (const auto& r : generic->query("EXPLAIN (COSTS OFF) EXECUTE flotilla_describe(" +
                                      wh->dialect().literal(same[0].schema) +
                                      ", 'same', 1048576)"))
    plan += r.at(0).value_or("") + "\n";
  CAPTURE(plan);
  CHECK(plan.find("Index Cond: ((relname = $2) AND (relnamespace = ") != std::string::npos);
}
