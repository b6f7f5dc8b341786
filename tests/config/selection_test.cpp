#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "config/load.hpp"
#include "config/selection.hpp"
#include "tests/config/helpers.hpp"

using namespace flotilla::config;
using namespace flotilla::config::testing;

namespace {

table_config section(std::string name, std::string description = "") {
  table_config t;
  t.name = std::move(name);
  t.description = std::move(description);
  return t;
}

source_config make_source(std::string name, std::map<std::string, std::string> tags) {
  source_config s;
  s.name = std::move(name);
  s.tags = std::move(tags);
  s.adapter = adapter_kind::postgres;  // schema.table names
  return s;
}

std::vector<filter> filters(std::initializer_list<const char*> texts) {
  std::vector<filter> out;
  for (const char* t : texts) {
    auto f = parse_filter(t);
    REQUIRE(f.has_value());
    out.push_back(*f);
  }
  return out;
}

using names = std::vector<std::string>;

}  // namespace

TEST_CASE("a filter parses into key and value, trimming spaces and keeping later '='") {
  CHECK(parse_filter("client=acme") == filter{"client", "acme"});
  CHECK(parse_filter(" region = us_* ") == filter{"region", "us_*"});
  CHECK(parse_filter("table=a=b") == filter{"table", "a=b"});
}

TEST_CASE("a filter with an empty value (an unset shell variable) is FLT-C020, saying what to "
          "give") {
  for (const char* text : {"client=", "table= ", "source="}) {
    auto f = parse_filter(text);
    REQUIRE_FALSE(f.has_value());
    CHECK(f.error().code == errc::invalid_filter);
    CHECK_THAT(f.error().message, Catch::Contains("has an empty value"));
  }
  CHECK_THAT(parse_filter("table=").error().message, Catch::Contains("the table name to select"));
}

TEST_CASE("a filter without '=' or with an empty key is FLT-C020") {
  auto f = parse_filter("client");
  REQUIRE_FALSE(f.has_value());
  CHECK(f.error().code == errc::invalid_filter);
  CHECK(f.error().value == "client");
  CHECK(f.error().message.find("no '='") != std::string::npos);
  CHECK(format(f.error()).find("FLT-C020") != std::string::npos);

  auto g = parse_filter("=acme");
  REQUIRE_FALSE(g.has_value());
  CHECK(g.error().code == errc::invalid_filter);

  auto all = parse_filters({"client=acme", "oops", "=x"});
  REQUIRE_FALSE(all.has_value());
  CHECK(all.error().size() == 2);
  auto ok = parse_filters({"client=acme", "table=orders"});
  REQUIRE(ok.has_value());
  CHECK(ok->size() == 2);
}

TEST_CASE("glob patterns match any run of characters with '*'") {
  CHECK(glob_match("acme", "acme"));
  CHECK_FALSE(glob_match("acme", "acme2"));
  CHECK(glob_match("ac*", "acme"));
  CHECK(glob_match("*me", "acme"));
  CHECK(glob_match("a*m*e", "acme"));
  CHECK(glob_match("*", ""));
  CHECK(glob_match("us_*_1", "us_west_1"));
  CHECK_FALSE(glob_match("us_*_1", "us_west_2"));
  CHECK_FALSE(glob_match("Acme", "acme"));  // tag values compare exactly
}

TEST_CASE("filters on tags and source rule sources in or out, all having to match") {
  auto acme = make_source("shop_acme", {{"client", "acme"}, {"region", "us_west"}});
  auto globex = make_source("shop_globex", {{"client", "globex"}});
  CHECK(source_may_match(acme, {}));
  CHECK(source_may_match(acme, filters({"client=acme"})));
  CHECK_FALSE(source_may_match(globex, filters({"client=acme"})));
  CHECK(source_may_match(acme, filters({"client=acme", "region=us_*"})));
  CHECK_FALSE(source_may_match(acme, filters({"client=acme", "region=eu"})));
  // A tag the source lacks rules it out.
  CHECK_FALSE(source_may_match(globex, filters({"region=*"})));
  CHECK(source_may_match(acme, filters({"source=shop_*"})));
  CHECK_FALSE(source_may_match(acme, filters({"source=shop_globex"})));
  // Table filters are left to select_tables.
  CHECK(source_may_match(acme, filters({"table=nothing"})));
}

TEST_CASE("a filter key no source has is FLT-C021 with a suggestion") {
  project p;
  p.sources.push_back(make_source("a", {{"client", "acme"}}));
  p.sources.push_back(make_source("b", {{"region", "eu"}}));
  CHECK(check_filters(p, filters({"client=acme", "source=a", "table=x"})).empty());
  auto ds = check_filters(p, filters({"clinet=acme"}));
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].code == errc::unknown_filter_key);
  CHECK(ds[0].message.find("did you mean 'client'?") != std::string::npos);
  // Known keys whose values no source has, alone or together: FLT-C023.
  ds = check_filters(p, filters({"client=acmee"}));
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].code == errc::filter_selects_nothing);
  CHECK(ds[0].message == "no source has client = 'acmee' (did you mean 'acme'?); the values in "
                         "flotilla.toml: acme");
  ds = check_filters(p, filters({"client=acme", "region=eu"}));
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message.find("no source matches all the filters together") != std::string::npos);
  // Each filter named with the sources it matches alone.
  CHECK(ds[0].message.find("client=acme selects a; region=eu selects b") != std::string::npos);
  // A table filter alone never rules a source out here.
  CHECK(check_filters(p, filters({"table=nothing"})).empty());
}

TEST_CASE("table names match whole or by their table part when only one side is qualified") {
  CHECK(table_name_matches("orders", "orders"));
  CHECK(table_name_matches("orders", "public.orders"));
  CHECK(table_name_matches("public.orders", "orders"));
  CHECK(table_name_matches("public.orders", "public.orders"));
  CHECK_FALSE(table_name_matches("audit.orders", "public.orders"));
  CHECK(table_name_matches("ORDERS", "public.orders"));  // case-insensitive
  CHECK(table_name_matches("*", "public.orders"));
  CHECK(table_name_matches("*", "orders"));
  CHECK(table_name_matches("tmp_*", "public.tmp_x"));
  CHECK(table_name_matches("public.*", "public.anything"));
  CHECK_FALSE(table_name_matches("public.*", "audit.anything"));
  CHECK_FALSE(table_name_matches("order", "public.orders"));
}

TEST_CASE("include, exclude and table sections select tables in catalog order") {
  auto r = load_project_text(std::string{one_target} + R"toml(
[sources.shop]
adapter = "postgres"
dsn = "postgresql://x"
include = ["orders", "cust*"]
exclude = ["customers_old", "audit.*"]

[sources.shop.tables.payments]
unique_key = "id"
)toml",
                             "/w/flotilla.toml");
  INFO(all_messages(r));
  REQUIRE(r.ok());
  const source_config& s = r.model->sources[0];
  const names catalog{"public.orders",   "public.customers", "public.customers_old",
                      "public.payments", "public.refunds",   "audit.orders"};
  // payments has a section, so it is selected although include omits it.
  CHECK(select_tables(s, catalog, {}) ==
        names{"public.orders", "public.customers", "public.payments"});
  CHECK(select_tables(s, catalog, filters({"table=*orders"})) == names{"public.orders"});
  CHECK(select_tables(s, catalog, filters({"table=public.pay*"})) == names{"public.payments"});
  CHECK(select_tables(s, catalog, filters({"table=orders", "table=cust*"})).empty());
  CHECK(select_tables(s, catalog, filters({"source=other"})).empty());
  // The same selection as positions in the catalog.
  CHECK(select_table_indices(s, catalog, {}) == std::vector<std::size_t>{0, 1, 3});
  CHECK(select_table_indices(s, catalog, filters({"table=public.pay*"})) ==
        std::vector<std::size_t>{3});
  CHECK(select_table_indices(s, catalog, filters({"source=other"})).empty());
}

TEST_CASE("the default include selects every table and exclude still applies") {
  source_config s = make_source("files", {});
  s.exclude = {"tmp_*"};
  CHECK(select_tables(s, {"orders", "tmp_load", "customers"}, {}) == names{"orders", "customers"});
}

TEST_CASE("exclude wins over a table section") {
  source_config s = make_source("files", {});
  s.include = {"orders"};
  s.exclude = {"payments"};
  s.tables.push_back(section("payments"));
  CHECK(select_tables(s, {"orders", "payments"}, {}) == names{"orders"});
}

TEST_CASE("a table section is found exactly first, then by the name rule") {
  source_config s = make_source("pg", {});
  s.tables.push_back(section("orders", "bare"));
  s.tables.push_back(section("audit.orders", "audit"));
  REQUIRE(find_table(s, "audit.orders") != nullptr);
  CHECK(find_table(s, "audit.orders")->description == "audit");
  CHECK(find_table(s, "public.orders")->description == "bare");
  CHECK(find_table(s, "Orders")->description == "bare");
  CHECK(find_table(s, "refunds") == nullptr);

  // The index the loader builds gives the same answers as the scan.
  index_tables(s);
  REQUIRE_FALSE(s.table_lookup.empty());
  CHECK(find_table(s, "audit.orders")->description == "audit");
  CHECK(find_table(s, "AUDIT.ORDERS")->description == "audit");
  CHECK(find_table(s, "public.orders")->description == "bare");
  CHECK(find_table(s, "Orders")->description == "bare");
  CHECK(find_table(s, "refunds") == nullptr);
  s.tables.push_back(section("sales.refunds", "qualified"));
  index_tables(s);
  CHECK(find_table(s, "refunds")->description == "qualified");
  CHECK(find_table(s, "other.refunds") == nullptr);
}

TEST_CASE("on a source of bare names a dot is part of the name: names compare whole") {
  // A file stem `sales.2024` (or a SQLite table "x.orders") was split as schema.table:
  // its section, include entry or table= filter also took `2024` (or `orders`).
  for (auto adapter : {adapter_kind::csv, adapter_kind::json, adapter_kind::sqlite}) {
    source_config s = make_source("files", {});
    s.adapter = adapter;
    s.tables.push_back(section("sales.2024", "dotted"));
    for (int indexed = 0; indexed < 2; ++indexed) {
      if (indexed)
        index_tables(s);
      REQUIRE(find_table(s, "sales.2024") != nullptr);
      CHECK(find_table(s, "SALES.2024")->description == "dotted");
      CHECK(find_table(s, "2024") == nullptr);
    }
    const std::vector<std::string> names{"sales.2024", "2024", "other"};
    s.include = {};
    CHECK(select_tables(s, names, {}) == std::vector<std::string>{"sales.2024"});
    s.include = {"*"};
    CHECK(select_tables(s, names, filters({"table=sales.2024"})) ==
          std::vector<std::string>{"sales.2024"});
    CHECK(select_tables(s, names, filters({"table=sales.*"})) ==
          std::vector<std::string>{"sales.2024"});
    CHECK(select_tables(s, names, filters({"table=sal*"})) == std::vector<std::string>{"sales.2024"});
    s.exclude = {"archive.2024"};
    CHECK(select_tables(s, names, {}).size() == 3);
    CHECK(unmatched_table_names(s, names, {}).empty());
  }
  // On a source of schema.table names, the rule stays: `orders` takes `public.orders`.
  CHECK(table_name_matches("public.orders", "orders"));
  CHECK_FALSE(table_name_matches("sales.2024", "2024", true));
}

TEST_CASE("a schema template expands the source name and its tags") {
  auto s = make_source("shop", {{"region", "us_west"}, {"client", "acme"}});
  target_config t;
  t.name = "wh";
  t.dialect = "duckdb";
  t.schema = "staging__{region}__{source}";
  CHECK(target_schema(t, s) == "staging__us_west__shop");
  t.schema = "{client}";
  CHECK(target_schema(t, s) == "acme");
  t.schema = "raw";
  CHECK(target_schema(t, s) == "raw");
}

TEST_CASE("a schema template naming a missing tag is an error naming the placeholder") {
  auto s = make_source("shop", {{"client", "acme"}});
  auto e = expand_template("staging__{region}__{source}", s);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().code == errc::unknown_placeholder);
  CHECK(e.error().placeholder == "region");
  CHECK(e.error().message.find("shop") != std::string::npos);
  target_config t;
  t.name = "wh";
  t.schema = "staging__{region}";
  CHECK_THROWS_AS(target_schema(t, s), std::invalid_argument);
  CHECK(expand_template("a{b", s).error().code == errc::malformed_template);
  CHECK(expand_template("a}b", s).error().code == errc::malformed_template);
  CHECK(expand_template("a{}b", s).error().code == errc::malformed_template);
  CHECK(template_placeholders("x{a}y{b}") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("a DuckDB schema named like a database gets the file's database as catalog") {
  CHECK(duckdb_database_name("/data/wh.duckdb") == "wh");
  CHECK(duckdb_database_name("dw.v2.duckdb") == "dw");
  CHECK(duckdb_database_name("/x.d/.hidden.duckdb") == "hidden");
  CHECK(duckdb_database_name("noext") == "noext");
  CHECK(duckdb_database_name("/srv/main.duckdb") == "main_db");
  CHECK(duckdb_database_name("temp.db") == "temp_db");
  CHECK(duckdb_database_name(":memory:") == "memory");
  auto s = make_source("shop", {});
  target_config t;
  t.name = "wh";
  t.dialect = "duckdb";
  t.path = "/data/wh.duckdb";
  for (const char* schema : {"wh", "Wh", "system", "TEMP"}) {
    t.schema = schema;
    CHECK(target_table(t, s, "orders").catalog == "wh");
  }
  t.schema = "{source}";
  CHECK(target_table(t, s, "orders").catalog.empty());
  t.schema = "wh";
  t.database = "other";
  CHECK(target_table(t, s, "orders").catalog == "other");
  t.dialect = "postgres";
  t.database.clear();
  CHECK(target_table(t, s, "orders").catalog.empty());
}

TEST_CASE("target tables keep the table part in the schema, or prefix it on sqlite") {
  auto s = make_source("shop", {{"region", "us_west"}});
  s.adapter = adapter_kind::postgres;
  target_config t;
  t.name = "wh";
  t.dialect = "duckdb";
  t.database = "acme_warehouse";
  t.schema = "staging__{region}__{source}";
  auto n = target_table(t, s, "public.orders");
  CHECK(n.catalog == "acme_warehouse");
  CHECK(n.schema == "staging__us_west__shop");
  CHECK(n.name == "orders");
  t.dialect = "sqlite";
  t.database.clear();
  n = target_table(t, s, "orders");
  CHECK(n.schema.empty());
  CHECK(n.name == "staging__us_west__shop__orders");
  t.schema = "";
  CHECK(target_table(t, s, "orders").name == "orders");
}

TEST_CASE("a dot in a bare source name is part of the table's name") {
  // SQLite, CSV and JSON tables have no schema: "a.b" is one table, not b in schema a.
  auto s = make_source("shop", {});
  s.adapter = adapter_kind::sqlite;
  target_config t;
  t.name = "wh";
  t.dialect = "sqlite";
  t.schema = "s";
  CHECK(target_table(t, s, "a.b").name == "s__a.b");
  CHECK(target_table(t, s, "b").name == "s__b");
  t.dialect = "postgres";
  CHECK(target_table(t, s, "a.b").name == "a.b");
  s.adapter = adapter_kind::postgres;
  CHECK(target_table(t, s, "a.b").name == "b");
}

TEST_CASE("filters on a fleet with no sources are no error: the run selects nothing") {
  // FLT-C023 said "each matches some source alone" of a fleet that has none.
  project p;
  auto filters = parse_filters({"table=orders", "source=shop"});
  REQUIRE(filters);
  CHECK(check_filters(p, *filters).empty());
}

TEST_CASE("a missing table is offered a catalog name only when its own name is alike") {
  // "public.gone" was offered "public.Foo": the shared "public." made them look alike.
  auto s = make_source("pg", {});
  s.include = {"public.gone", "public.ordrs"};
  const auto unmatched =
      unmatched_table_names(s, {"public.Foo", "public.nn", "public.orders"}, {});
  REQUIRE(unmatched.size() == 2);
  CHECK(unmatched[0].name == "public.gone");
  CHECK(unmatched[0].nearest.empty());
  CHECK(unmatched[1].nearest == "public.orders");
}

TEST_CASE("a table renamed in its schema is offered its new name there, not a table of "
          "another schema with the old name") {
  // crm.orders renamed crm.orders_v2, beside main.orders: another table, whose rows the
  // section's settings must not be pointed at.
  auto s = make_source("dk", {});
  s.include = {"crm.orders", "sales.ordrs", "gone.orders"};
  const auto unmatched = unmatched_table_names(
      s, {"crm.orders_v2", "main.orders", "sales.orders", "crm.customers"}, {});
  REQUIRE(unmatched.size() == 3);
  CHECK(unmatched[0].nearest == "crm.orders_v2");
  CHECK(unmatched[1].nearest == "sales.orders");
  // Nothing in its own schema: a table of that name elsewhere is still offered.
  CHECK(!unmatched[2].nearest.empty());
}

TEST_CASE("a table renamed with a suffix is offered before a shorter name that ends with it") {
  // orders renamed orders_v2 beside a view v_orders: the view is shorter, but a rename
  // keeps the name's start more often than a view's prefix does.
  auto s = make_source("sq", {});
  s.include = {"orders", "items"};
  const auto unmatched =
      unmatched_table_names(s, {"v_orders", "orders_v2", "customers", "old_items"}, {});
  REQUIRE(unmatched.size() == 2);
  CHECK(unmatched[0].nearest == "orders_v2");
  // With no name starting so, one ending so is still offered.
  CHECK(unmatched[1].nearest == "old_items");
}

TEST_CASE("a section spelled exactly as one of two tables whose names differ only in case is "
          "that table's alone") {
  source_config s = make_source("pg", {});
  s.include.clear();  // the sections alone select
  s.tables.push_back(section("public.Orders", "upper"));
  const std::vector<std::string> catalog{"public.Orders", "public.orders"};
  REQUIRE(find_table(s, "public.Orders", catalog) != nullptr);
  CHECK(find_table(s, "public.Orders", catalog)->description == "upper");
  CHECK(find_table(s, "public.orders", catalog) == nullptr);
  // Alone in its catalog, the other spelling still finds it (ASCII case-insensitively).
  CHECK(find_table(s, "public.orders", {"public.orders"})->description == "upper");
  CHECK(select_tables(s, catalog, {}) == names{"public.Orders"});
  // A section for each: each its own, whichever the index found first.
  s.tables.push_back(section("public.orders", "lower"));
  index_tables(s);
  CHECK(find_table(s, "public.orders", catalog)->description == "lower");
  CHECK(find_table(s, "public.Orders", catalog)->description == "upper");
  // A bare section spelled as one table part.
  source_config b = make_source("pg", {});
  b.tables.push_back(section("Orders", "bare upper"));
  CHECK(find_table(b, "audit.orders", {"public.Orders", "audit.orders"}) == nullptr);
  CHECK(find_table(b, "public.Orders", {"public.Orders", "audit.orders"})->description ==
        "bare upper");
}

TEST_CASE("a schema-qualified exclude does not hide a misspelled bare name from the report") {
  // "audit.*" excludes audit's tables; a bare "customrs" or section "ordrs" could be any
  // schema's: still missing, still said (FLT-R005).
  auto s = make_source("pg", {});
  s.include = {"customrs", "sales.customers"};
  s.exclude = {"audit.*"};
  s.tables.push_back(section("ordrs", "typo"));
  const auto unmatched = unmatched_table_names(
      s, {"public.orders", "audit.orders", "sales.customers"}, {});
  std::vector<std::string> names;
  for (const auto& u : unmatched)
    names.push_back(u.name);
  CHECK(std::find(names.begin(), names.end(), "customrs") != names.end());
  CHECK(std::find(names.begin(), names.end(), "ordrs") != names.end());
  // A qualified name the exclude covers is left out on purpose: not said.
  s.include = {"audit.gone"};
  s.tables.clear();
  CHECK(unmatched_table_names(s, {"public.orders", "audit.orders"}, {}).empty());
  CHECK_FALSE(pattern_covers_name("audit.*", "orders", false));
  CHECK(pattern_covers_name("audit.*", "audit.orders", false));
  CHECK(pattern_covers_name("ord*", "orders", false));
}
