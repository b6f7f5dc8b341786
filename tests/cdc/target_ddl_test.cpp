// Seed 002's statements run on real targets: every applied change leaves the target table
// in exactly the shape the change gives the source table, a change that does not fit the
// data fails and changes nothing, and the held proposals that are not comment-only run.
#include <catch2/catch.hpp>

#include "cdc/outcome.hpp"
#include "tests/cdc/support.hpp"

using namespace flotilla;
using namespace flotilla::cdc;
using flotilla::test::test_target;

namespace {

schema::portable_type ty(const std::string& s) {
  auto t = schema::parse_type(s);
  REQUIRE(t.has_value());
  return *t;
}

captured_column column(std::string name, const std::string& type, bool nullable = true, bool key = false) {
  captured_column c;
  c.name = std::move(name);
  c.type = ty(type);
  c.nullable = nullable;
  c.key = key;
  return c;
}

/// (id int key, line int key, note varchar(100), total decimal(10,2) NOT NULL, qty int)
captured_table before() {
  return captured_table{"shop", "public.orders",
                        {column("id", "int", false, true), column("line", "int", false, true),
                         column("note", "varchar(100)"), column("total", "decimal(10,2)", false),
                         column("qty", "int")}};
}

void create(const test_target& t, const captured_table& c) {
  auto wh = t.open();
  wh->execute({wh->dialect().create_table(t.table(), c.to_schema())});
  wh->execute({"INSERT INTO " + t.qualified() + " VALUES (1, 1, 'a', 12.50, 3), (2, 1, 'b', 7.20, NULL)"});
}

/// The target's shape as names, canonical types and nullability.
struct shape_col {
  std::string name;
  schema::portable_type type;
  bool nullable;
  friend bool operator==(const shape_col&, const shape_col&) = default;
};
std::vector<shape_col> expected(const test_target& t, const captured_table& c) {
  auto wh = t.open();
  std::vector<shape_col> out;
  for (const auto& col : c.columns)
    out.push_back({col.name, wh->dialect().canonical(col.type), col.nullable && !col.key});
  return out;
}
std::vector<shape_col> live(const test_target& t) {
  auto s = t.open()->describe(t.table());
  REQUIRE(s.has_value());
  std::vector<shape_col> out;
  for (const auto& c : s->columns)
    out.push_back({c.name, c.type, c.nullable});
  return out;
}

std::string text(const std::vector<shape_col>& s) {
  std::string out;
  for (const auto& c : s)
    out += c.name + " " + schema::to_string(c.type) + (c.nullable ? "" : " NOT NULL") + "; ";
  return out;
}

outcome decide(const test_target& t, const change_kind& change) {
  auto info = t.info();
  info.actual = t.open()->describe(t.table());
  return decide_outcome(before(), source_change{change, "0/1"}, info);
}

}  // namespace

TEST_CASE("applied changes leave the target in the source's new shape, on PostgreSQL and DuckDB") {
  captured_column flag = column("flag", "int", false);
  flag.default_expr = "7";
  flag.default_value = "7";
  struct row {
    std::string what;
    change_kind change;
  };
  const std::vector<row> rows{
      {"add nullable column", add_column{column("memo", "text")}},
      {"add NOT NULL column with a constant default", add_column{flag}},
      {"drop column outside the key", drop_column{"note"}},
      {"rename outside the key", rename_column{"note", "notes"}},
      {"larger integer", alter_type{"qty", ty("bigint")}},
      {"longer varchar", alter_type{"note", ty("varchar(200)")}},
      {"shorter varchar", alter_type{"note", ty("varchar(10)")}},
      {"more decimal precision", alter_type{"total", ty("decimal(14,2)")}},
      {"smaller decimal scale, values fit", alter_type{"total", ty("decimal(10,1)")}},
      {"set NOT NULL", set_nullability{"note", false}},
      {"drop NOT NULL", set_nullability{"total", true}},
      {"truncate", truncate_table{}},
  };
  for (const std::string engine : {"postgres", "duckdb"}) {
    for (const auto& r : rows) {
      SECTION(engine + ": " + r.what) {
        test_target t(engine);
        create(t, before());
        auto o = decide(t, r.change);
        REQUIRE(std::holds_alternative<applied>(o));
        const auto& a = std::get<applied>(o);
        t.open()->execute(a.statements);
        const auto want = expected(t, apply_change(before(), r.change));
        const auto got = live(t);
        INFO("want " << text(want) << "\ngot  " << text(got));
        CHECK(got == want);
        if (std::holds_alternative<add_column>(r.change) && !std::get<add_column>(r.change).column.nullable)
          CHECK(t.count("SELECT 1 FROM " + t.qualified() + " WHERE flag = 7") == 2);
        if (std::holds_alternative<truncate_table>(r.change))
          CHECK(t.count("SELECT 1 FROM " + t.qualified()) == 0);
        else
          CHECK(t.count("SELECT 1 FROM " + t.qualified()) == 2);
      }
    }
  }
}

TEST_CASE("a change whose data does not fit fails and changes nothing") {
  struct row {
    std::string what;
    change_kind change;
    std::vector<std::string> engines;
  };
  const std::vector<row> rows{
      {"shorter varchar than a value", alter_type{"note", ty("varchar(2)")}, {"postgres"}},
      {"smaller scale than a value", alter_type{"total", ty("decimal(10,0)")}, {"postgres", "duckdb"}},
      {"NOT NULL over a NULL", set_nullability{"qty", false}, {"postgres", "duckdb"}},
  };
  for (const auto& r : rows) {
    for (const auto& engine : r.engines) {
      SECTION(engine + ": " + r.what) {
        test_target t(engine);
        create(t, before());
        const auto& change = r.change;
        t.exec("UPDATE " + t.qualified() + " SET note = 'abc' WHERE id = 1");
        auto o = decide(t, change);
        REQUIRE(std::holds_alternative<applied>(o));
        const auto shape = live(t);
        CHECK_THROWS_AS(t.open()->execute(std::get<applied>(o).statements), sinks::sink_error);
        CHECK(live(t) == shape);
      }
    }
  }
}

TEST_CASE("held proposals that are not comment-only run on the target") {
  struct row {
    std::string what;
    change_kind change;
    std::string engine;
  };
  const std::vector<row> rows{
      {"drop a key column", drop_column{"line"}, "postgres"},
      {"drop a key column", drop_column{"line"}, "duckdb"},
      {"rename a key column", rename_column{"id", "order_id"}, "postgres"},
      {"rename a key column", rename_column{"id", "order_id"}, "duckdb"},
      {"widen a key column", alter_type{"id", ty("bigint")}, "duckdb"},
  };
  for (const auto& r : rows) {
    SECTION(r.engine + ": " + r.what) {
      test_target t(r.engine);
      create(t, before());
      auto o = decide(t, r.change);
      REQUIRE(std::holds_alternative<held>(o));
      const auto& ddl = std::get<held>(o).hold.proposed_ddl();
      REQUIRE_FALSE(needs_edit(ddl));
      INFO(ddl);
      t.open()->execute({ddl});
      auto after = apply_change(before(), r.change);
      CHECK(live(t) == expected(t, after));
      auto s = t.open()->describe(t.table());
      CHECK(s->key() == after.to_schema().key());
      CHECK(t.count("SELECT 1 FROM " + t.qualified()) == 2);
    }
  }
}

TEST_CASE("a name holding a line break cannot end a proposal's comment and run as SQL") {
  for (const std::string engine : {"postgres", "duckdb"}) {
    SECTION(engine) {
      test_target t(engine);
      auto wh = t.open();
      const std::string victim = wh->dialect().quote(t.table().schema) + ".victim";
      const std::string hostile = "k\nDROP TABLE " + victim + "; --";
      const captured_table c{"shop", "public.orders",
                             {column(hostile, "int", false, true), column("v", "text")}};
      wh->execute({wh->dialect().create_table(t.table(), c.to_schema()),
                   "INSERT INTO " + t.qualified() + " VALUES (1, 'a')",
                   "CREATE TABLE " + victim + " (i int)"});
      auto info = t.info();
      info.actual = wh->describe(t.table());
      auto o = decide_outcome(c, source_change{drop_column{hostile}, "0/1"}, info);
      REQUIRE(std::holds_alternative<held>(o));
      const auto& ddl = std::get<held>(o).hold.proposed_ddl();
      INFO(ddl);
      CHECK_THAT(ddl, Catch::Contains("-- \"k\\x0aDROP TABLE"));
      if (!needs_edit(ddl))
        t.open()->execute({ddl});
      CHECK(t.count("SELECT 1 FROM " + victim) == 0);  // still there
      CHECK(t.count("SELECT 1 FROM " + t.qualified()) == 1);
    }
  }
}
