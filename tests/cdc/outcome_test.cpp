// Seed 002, row by row: what the stream does with each source schema change on each
// kind of target. Pure: no database. Each row names the change, the target and the
// expected outcome with its exact statements (or hold kind, or stop code).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cdc/ddl_changes.hpp"
#include "cdc/outcome.hpp"
#include "sources/type_mapping.hpp"

using namespace flotilla;
using namespace flotilla::cdc;

namespace {

const std::string lsn = "0/16B3748";

schema::portable_type ty(const std::string& s) {
  auto t = schema::parse_type(s);
  REQUIRE(t.has_value());
  return *t;
}

captured_column column(std::string name, const std::string& type, bool nullable = true,
                       bool key = false) {
  captured_column c;
  c.name = std::move(name);
  c.type = ty(type);
  c.nullable = nullable;
  c.key = key;
  return c;
}

/// public.orders (id int key, note varchar(100), total decimal(10,2) NOT NULL, qty int,
/// code text).
captured_table orders() {
  return captured_table{"shop",
                        "public.orders",
                        {column("id", "int", false, true), column("note", "varchar(100)"),
                         column("total", "decimal(10,2)", false), column("qty", "int"),
                         column("code", "text")}};
}

/// public.events: no key.
captured_table events_table() {
  return captured_table{"shop", "public.events", {column("at", "timestamp_tz"), column("what", "text")}};
}

target_info target(target_kind k) {
  return target_info{"wh", k, dialects::table_ref{"", "s", "orders"}, std::nullopt};
}

outcome decide(const change_kind& c, target_kind k, const captured_table& t = orders()) {
  return decide_outcome(t, source_change{c, lsn}, target(k));
}

applied as_applied(const outcome& o) {
  INFO("outcome index " << o.index()
                        << (std::holds_alternative<stopped>(o) ? " stop: " + std::get<stopped>(o).message
                            : std::holds_alternative<held>(o) ? " held: " + std::get<held>(o).hold.reason()
                                                              : std::string()));
  REQUIRE(std::holds_alternative<applied>(o));
  return std::get<applied>(o);
}
storage::pb::HoldRecord as_held(const outcome& o) {
  INFO("outcome index " << o.index()
                        << (std::holds_alternative<stopped>(o) ? " stop: " + std::get<stopped>(o).message
                                                               : std::string()));
  REQUIRE(std::holds_alternative<held>(o));
  return std::get<held>(o).hold;
}
stopped as_stopped(const outcome& o) {
  INFO("outcome index " << o.index());
  REQUIRE(std::holds_alternative<stopped>(o));
  return std::get<stopped>(o);
}

std::string stop_shape(const std::string& reason) {
  return "PostgreSQL logical schema history gap for 'public.orders': " + reason +
         ". No successor plan, row output, or checkpoint was published.";
}

constexpr auto pg = target_kind::postgres;
constexpr auto duck = target_kind::duckdb;
constexpr auto kafka = target_kind::kafka;
constexpr auto pubsub = target_kind::pubsub;

/// A source column as the DDL capture reports it.
source_column src(std::string name, int attnum, std::string type, bool key = false) {
  source_column c;
  c.name = std::move(name);
  c.attnum = attnum;
  c.type = std::move(type);
  c.not_null = key;
  c.key = key;
  return c;
}

}  // namespace

// ---- applied: statements per target ------------------------------------------------------

TEST_CASE("seed 002 rows applied on the target, with the exact statements per target") {
  struct row {
    std::string what;
    change_kind change;
    target_kind target;
    std::vector<std::string> statements;
  };
  captured_column memo = column("memo", "text");
  captured_column flag = column("flag", "int", false);
  flag.default_expr = "0";
  flag.default_value = "0";
  captured_column label = column("label", "varchar(20)");
  label.default_expr = "'n/a'::character varying";
  label.default_value = "n/a";
  const std::vector<row> rows{
      {"ADD COLUMN nullable", add_column{memo}, pg,
       {R"(ALTER TABLE "s"."orders" ADD COLUMN "memo" TEXT)"}},
      {"ADD COLUMN nullable", add_column{memo}, duck,
       {R"(ALTER TABLE "s"."orders" ADD COLUMN "memo" VARCHAR)"}},
      {"ADD COLUMN nullable", add_column{memo}, kafka, {}},
      {"ADD COLUMN NOT NULL with a constant default", add_column{flag}, pg,
       {R"(ALTER TABLE "s"."orders" ADD COLUMN "flag" INTEGER NOT NULL DEFAULT CAST('0' AS INTEGER))",
        R"(ALTER TABLE "s"."orders" ALTER COLUMN "flag" DROP DEFAULT)"}},
      {"ADD COLUMN NOT NULL with a constant default", add_column{flag}, duck,
       {R"(ALTER TABLE "s"."orders" ADD COLUMN "flag" INTEGER DEFAULT CAST('0' AS INTEGER))",
        R"(ALTER TABLE "s"."orders" ALTER COLUMN "flag" DROP DEFAULT)",
        R"(ALTER TABLE "s"."orders" ALTER COLUMN "flag" SET NOT NULL)"}},
      {"ADD COLUMN NOT NULL with a constant default", add_column{flag}, pubsub, {}},
      {"ADD COLUMN nullable with a constant default: existing rows get it", add_column{label}, pg,
       {R"(ALTER TABLE "s"."orders" ADD COLUMN "label" VARCHAR(20) DEFAULT CAST('n/a' AS VARCHAR(20)))",
        R"(ALTER TABLE "s"."orders" ALTER COLUMN "label" DROP DEFAULT)"}},
      {"DROP COLUMN outside the key", drop_column{"note"}, pg,
       {R"(ALTER TABLE "s"."orders" DROP COLUMN "note")"}},
      {"DROP COLUMN outside the key", drop_column{"note"}, duck,
       {R"(ALTER TABLE "s"."orders" DROP COLUMN "note")"}},
      {"DROP COLUMN outside the key", drop_column{"note"}, kafka, {}},
      {"rename outside the key", rename_column{"note", "notes"}, pg,
       {R"(ALTER TABLE "s"."orders" RENAME COLUMN "note" TO "notes")"}},
      {"rename outside the key", rename_column{"note", "notes"}, duck,
       {R"(ALTER TABLE "s"."orders" RENAME COLUMN "note" TO "notes")"}},
      {"rename outside the key", rename_column{"note", "notes"}, kafka, {}},
      {"rename to another case: PostgreSQL names are case-sensitive", rename_column{"note", "Qty"},
       pg, {R"(ALTER TABLE "s"."orders" RENAME COLUMN "note" TO "Qty")"}},
      {"larger integer type", alter_type{"qty", ty("bigint")}, pg,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "qty" TYPE BIGINT USING "qty"::BIGINT)"}},
      {"larger integer type", alter_type{"qty", ty("bigint")}, duck,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "qty" TYPE BIGINT)"}},
      {"larger integer type", alter_type{"qty", ty("bigint")}, kafka, {}},
      {"larger integer type of a key column", alter_type{"id", ty("bigint")}, pg,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "id" TYPE BIGINT USING "id"::BIGINT)"}},
      {"longer varchar", alter_type{"note", ty("varchar(200)")}, pg,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "note" TYPE VARCHAR(200) USING "note"::VARCHAR(200))"}},
      {"longer varchar: DuckDB keeps VARCHAR, nothing to apply", alter_type{"note", ty("varchar(200)")},
       duck, {}},
      {"shorter varchar: no cast, so a value that does not fit fails the change",
       alter_type{"note", ty("varchar(50)")}, pg,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "note" TYPE VARCHAR(50))"}},
      {"shorter varchar: DuckDB keeps VARCHAR and cuts the longer values as the source did",
       alter_type{"note", ty("varchar(50)")}, duck,
       {R"(UPDATE "s"."orders" SET "note" = left("note", 50) WHERE length("note") > 50)"}},
      {"shorter variable-length: text to varchar", alter_type{"code", ty("varchar(10)")}, pg,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "code" TYPE VARCHAR(10))"}},
      {"more decimal precision", alter_type{"total", ty("decimal(12,2)")}, pg,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "total" TYPE NUMERIC(12,2))"}},
      {"more decimal precision", alter_type{"total", ty("decimal(12,2)")}, duck,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "total" TYPE DECIMAL(12,2))"}},
      {"smaller decimal scale: values that would round fail the change",
       alter_type{"total", ty("decimal(10,1)")}, pg,
       {R"(DO $flotilla$ BEGIN IF EXISTS (SELECT 1 FROM "s"."orders" WHERE "total" <> round("total", 1)) THEN RAISE EXCEPTION '%', 'column total holds a value with more than 1 decimal places; it does not fit NUMERIC(10,1)'; END IF; END $flotilla$)",
        R"(ALTER TABLE "s"."orders" ALTER COLUMN "total" TYPE NUMERIC(10,1))"}},
      {"smaller decimal scale: values that would round fail the change",
       alter_type{"total", ty("decimal(10,1)")}, duck,
       {R"(SELECT error('column total holds a value with more than 1 decimal places; it does not fit DECIMAL(10,1)') WHERE EXISTS (SELECT 1 FROM "s"."orders" WHERE "total" <> round("total", 1)))",
        R"(ALTER TABLE "s"."orders" ALTER COLUMN "total" TYPE DECIMAL(10,1))"}},
      {"NULL to NOT NULL", set_nullability{"note", false}, pg,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "note" SET NOT NULL)"}},
      {"NULL to NOT NULL", set_nullability{"note", false}, duck,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "note" SET NOT NULL)"}},
      {"NOT NULL to NULL", set_nullability{"total", true}, pg,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "total" DROP NOT NULL)"}},
      {"NOT NULL to NULL", set_nullability{"total", true}, duck,
       {R"(ALTER TABLE "s"."orders" ALTER COLUMN "total" DROP NOT NULL)"}},
      {"nullability on an event target", set_nullability{"note", false}, kafka, {}},
      {"default added", set_default{"qty", "1"}, pg, {}},
      {"default changed", set_default{"qty", "2"}, duck, {}},
      {"default dropped", set_default{"qty", ""}, kafka, {}},
      {"index created, row key unchanged", index_change{"orders_note_idx", false, ""}, pg, {}},
      {"index dropped, row key unchanged", index_change{"orders_note_idx", false, ""}, duck, {}},
      {"new table on the source", new_table{"public.refunds"}, pg, {}},
      {"TRUNCATE on a relational target", truncate_table{}, pg,
       {R"(TRUNCATE TABLE "s"."orders")"}},
      {"TRUNCATE on a relational target", truncate_table{}, duck,
       {R"(TRUNCATE TABLE "s"."orders")"}},
  };
  for (const auto& r : rows) {
    SECTION(r.what + " on " + std::string(to_string(r.target))) {
      const auto& a = as_applied(decide(r.change, r.target));
      CHECK(a.statements == r.statements);
      CHECK_FALSE(a.truncate_event_key.has_value());
    }
  }
}

TEST_CASE("a column name cannot end the scale check's DO block early") {
  captured_table t{"shop", "public.orders",
                   {column("id", "int", false, true), column("a$flotilla$b", "decimal(10,2)")}};
  const auto a = as_applied(decide(alter_type{"a$flotilla$b", ty("decimal(10,1)")}, pg, t));
  REQUIRE(a.statements.size() == 2);
  CHECK_THAT(a.statements[0], Catch::StartsWith("DO $flotilla1$ BEGIN IF EXISTS"));
  CHECK_THAT(a.statements[0], Catch::EndsWith("END IF; END $flotilla1$"));
}

TEST_CASE("an applied change with nothing to apply says why") {
  CHECK(as_applied(decide(set_default{"qty", "1"}, pg)).note ==
        "nothing to apply: target columns carry no defaults");
  CHECK(as_applied(decide(index_change{"i", false, ""}, duck)).note ==
        "nothing to apply: the row key stays the same");
  CHECK_THAT(as_applied(decide(new_table{"public.refunds"}, pg)).note,
             Catch::Contains("public.refunds is not captured until it is added"));
  CHECK_THAT(as_applied(decide(alter_type{"note", ty("varchar(200)")}, duck)).note,
             Catch::Contains("as VARCHAR"));
}

TEST_CASE("TRUNCATE of a keyless table on Kafka or Pub/Sub is a truncate event keyed by the table name") {
  for (auto k : {kafka, pubsub}) {
    const auto& a = as_applied(decide(truncate_table{}, k, events_table()));
    CHECK(a.statements.empty());
    REQUIRE(a.truncate_event_key.has_value());
    CHECK(*a.truncate_event_key == "public.events");
  }
}

// ---- stops -------------------------------------------------------------------------------

TEST_CASE("seed 002 rows that stop the pipeline before the change, with the seed's message shape") {
  struct row {
    std::string what;
    change_kind change;
    std::string_view code;
    std::string reason_part;
  };
  captured_column created = column("created", "timestamp_tz");
  created.default_expr = "now()";
  created.default_constant = false;
  captured_column uid = column("uid", "uuid", false);
  uid.default_expr = "gen_random_uuid()";
  uid.default_constant = false;
  captured_column seq = column("seq", "bigint", false);
  seq.identity = true;
  const std::vector<row> rows{
      {"ADD COLUMN with a default that isn't a constant", add_column{created},
       code_volatile_default,
       "column 'created' was added with default now(), which is not a constant: its per-row "
       "values exist only in the physical rewrite. Use a constant literal default"},
      {"ADD COLUMN NOT NULL with a volatile default", add_column{uid}, code_volatile_default,
       "its per-row values exist only in the physical rewrite"},
      {"ADD COLUMN as an identity column", add_column{seq}, code_volatile_default,
       "column 'seq' was added as an identity column"},
      {"int to varchar", alter_type{"qty", ty("varchar(10)")}, code_type_change,
       "column 'qty' changed type int -> varchar(10), which the stream cannot carry"},
      {"bigint to int (smaller integer)", alter_type{"id", ty("smallint")}, code_type_change,
       "column 'id' changed type int -> smallint"},
      {"timestamp to date", alter_type{"code", ty("date")}, code_type_change, "text -> date"},
      {"collation change", column_property_change{"code", "collation", "\"C\" -> \"de_DE\""},
       code_column_property, "the collation of column 'code' changed"},
      {"identity change", column_property_change{"id", "identity", ""}, code_column_property,
       "the identity of column 'id' changed"},
      {"computed column change", column_property_change{"qty", "generated", ""},
       code_column_property, "the generated of column 'qty' changed"},
      {"DROP TABLE of a captured table", drop_table{}, code_table_dropped,
       "captured table public.orders was dropped"},
      {"rename of a captured table", rename_table{"public.orders_old"}, code_table_renamed,
       "captured table public.orders was renamed to public.orders_old"},
      {"partition attached", partition_change{"ATTACH PARTITION orders_2026"}, code_partition,
       "a partition was attached to or detached from public.orders"},
  };
  for (const auto& r : rows) {
    for (auto k : {pg, duck, kafka}) {
      SECTION(r.what + " on " + std::string(to_string(k))) {
        const auto& s = as_stopped(decide(r.change, k));
        CHECK(s.code == r.code);
        CHECK_THAT(s.reason, Catch::Contains(r.reason_part));
        CHECK(s.message == stop_shape(s.reason));
        CHECK_FALSE(s.remedy.empty());
      }
    }
  }
}

TEST_CASE("a precision or scale change of a decimal key column stops the pipeline") {
  captured_table t{"shop", "public.orders", {column("ref", "decimal(10,2)", false, true), column("v", "int")}};
  for (auto k : {pg, duck, kafka}) {
    const auto& s = as_stopped(decide(alter_type{"ref", ty("decimal(12,2)")}, k, t));
    CHECK(s.code == code_key_decimal);
  }
}

TEST_CASE("TRUNCATE of a keyed table stops on Kafka and Pub/Sub") {
  for (auto k : {kafka, pubsub}) {
    const auto& s = as_stopped(decide(truncate_table{}, k));
    CHECK(s.code == code_truncate_keyed_event);
    CHECK_THAT(s.reason, Catch::Contains("has a row key"));
  }
}

TEST_CASE("a target table altered by hand stops at the change") {
  const auto base = orders();
  auto pg_shape = [&] {
    schema::table_schema s;
    for (const auto& c : base.columns)
      s.columns.push_back(schema::column{c.name, c.type, c.nullable, c.key});
    return s;
  };
  auto with_actual = [&](schema::table_schema actual) {
    auto t = target(pg);
    t.actual = std::move(actual);
    return decide_outcome(base, source_change{drop_column{"note"}, lsn}, t);
  };
  SECTION("the expected shape applies") {
    CHECK(std::holds_alternative<applied>(with_actual(pg_shape())));
  }
  SECTION("a column added in advance") {
    auto s = pg_shape();
    s.columns.push_back(schema::column{"memo", ty("text"), true, false});
    const auto& st = as_stopped(with_actual(s));
    CHECK(st.code == code_target_shape);
    CHECK_THAT(st.reason, Catch::Contains("column \"memo\" is not expected"));
    CHECK(st.remedy == "Undo the manual change on the target table, then start the stream again");
  }
  SECTION("a column retyped by hand") {
    auto s = pg_shape();
    s.columns[3].type = ty("bigint");
    CHECK_THAT(as_stopped(with_actual(s)).reason,
               Catch::Contains("column \"qty\" is BIGINT, expected INTEGER"));
  }
  SECTION("a column a review's edited DDL made wider") {
    auto s = pg_shape();
    s.columns[3].type = ty("bigint");
    auto t = target(pg);
    t.actual = s;
    t.edited_ddl = "ALTER TABLE s.orders ALTER COLUMN \"QTY\" TYPE bigint";
    CHECK(std::holds_alternative<applied>(
        decide_outcome(base, source_change{drop_column{"note"}, lsn}, t)));
    // Narrower than the source, or a column the edit names only as part of a word: stops.
    t.actual->columns[3].type = ty("smallint");
    CHECK(as_stopped(decide_outcome(base, source_change{drop_column{"note"}, lsn}, t)).code ==
          code_target_shape);
    // Another kind of type than the proposal's (text, or numeric where it proposed text):
    // the edit's choice, kept.
    t.actual->columns[3].type = ty("text");
    t.edited_ddl = "ALTER TABLE s.orders ALTER COLUMN \"QTY\" TYPE text";
    CHECK(std::holds_alternative<applied>(
        decide_outcome(base, source_change{drop_column{"note"}, lsn}, t)));
    t.actual->columns[3].type = ty("bigint");
    t.edited_ddl = "ALTER TABLE s.orders ALTER COLUMN qty_total TYPE bigint";
    CHECK(as_stopped(decide_outcome(base, source_change{drop_column{"note"}, lsn}, t)).code ==
          code_target_shape);
  }
  SECTION("a column a review's edited DDL added") {
    auto s = pg_shape();
    s.columns.push_back(schema::column{"loaded_note", ty("text"), true, false});
    auto t = target(pg);
    t.actual = s;
    CHECK(as_stopped(decide_outcome(base, source_change{drop_column{"note"}, lsn}, t)).code ==
          code_target_shape);
    t.edited_ddl = "ALTER TABLE s.orders ADD COLUMN \"loaded_note\" text";
    CHECK(std::holds_alternative<applied>(
        decide_outcome(base, source_change{drop_column{"note"}, lsn}, t)));
  }
  SECTION("a column dropped by hand") {
    auto s = pg_shape();
    s.columns.erase(s.columns.begin() + 4);
    CHECK_THAT(as_stopped(with_actual(s)).reason, Catch::Contains("column \"code\" is missing"));
  }
  SECTION("the stream's own bookkeeping columns are not a difference") {
    auto s = pg_shape();
    s.columns.push_back(schema::column{"__flotilla_lsn", ty("text"), true, false});
    CHECK(std::holds_alternative<applied>(with_actual(s)));
  }
  SECTION("the new column added in advance, before its ADD COLUMN") {
    auto s = pg_shape();
    s.columns.push_back(schema::column{"memo", ty("text"), true, false});
    auto t = target(pg);
    t.actual = s;
    const auto o = decide_outcome(base, source_change{add_column{column("memo", "text")}, lsn}, t);
    CHECK(as_stopped(o).code == code_target_shape);
  }
}

TEST_CASE("several changes in one ALTER TABLE meet the target as it was before the statement") {
  const std::vector<source_column> before{src("id", 1, "integer", true),
                                          src("v", 2, "character varying(10)"),
                                          src("b", 3, "integer")};
  ddl_event e;
  e.command_tag = "ALTER TABLE";
  e.object_type = "table";
  e.object_identity = "public.t";
  e.schema = "public";
  e.table = "t";
  e.ddl = "ALTER TABLE t ALTER COLUMN v TYPE varchar(50), ALTER COLUMN b TYPE bigint, "
          "ADD COLUMN c int";
  e.columns = {src("id", 1, "integer", true), src("v", 2, "character varying(50)"),
               src("b", 3, "bigint"), src("c", 4, "integer")};
  auto t = target(pg);
  t.actual = schema::table_schema{{schema::column{"id", ty("int"), false, true},
                                   schema::column{"v", ty("varchar(10)"), true, false},
                                   schema::column{"b", ty("int"), true, false}}};
  const auto o = decide_ddl("shop", "public.t", before, e, lsn, t);
  CHECK(as_applied(o).statements.size() == 3);

  // A target changed by hand is still caught, before the statement's first change.
  t.actual->columns[2].type = ty("bigint");
  CHECK(as_stopped(decide_ddl("shop", "public.t", before, e, lsn, t)).code == code_target_shape);
}

TEST_CASE("a type change with USING rewrites every value the stream never carries: it stops") {
  const std::vector<source_column> before{src("id", 1, "integer", true), src("qty", 2, "integer")};
  ddl_event e;
  e.command_tag = "ALTER TABLE";
  e.object_type = "table";
  e.schema = "public";
  e.table = "t";
  const auto t = target(pg);
  const auto decide = [&](std::string ddl, std::string qty_type) {
    e.ddl = std::move(ddl);
    e.columns = {src("id", 1, "integer", true), src("qty", 2, std::move(qty_type))};
    return decide_ddl("shop", "public.t", before, e, lsn, t);
  };
  // A widening the target could make, and the same type: the values changed all the same.
  const auto& widened = as_stopped(decide("ALTER TABLE t ALTER COLUMN qty TYPE bigint USING qty * 100",
                                          "bigint"));
  CHECK(widened.code == code_type_change);
  CHECK_THAT(widened.reason, Catch::Contains("column qty") && Catch::Contains("USING"));
  CHECK_THAT(widened.remedy, Catch::Contains("--reload"));
  CHECK(as_stopped(decide("alter table t alter \"qty\" set data type int using qty + 1",
                          "integer")).code == code_type_change);
  // Several columns in one statement: the one with USING is named.
  e.columns = {src("id", 1, "bigint", true), src("qty", 2, "numeric(14,0)")};
  e.ddl = "ALTER TABLE t ALTER COLUMN id TYPE bigint, ALTER COLUMN qty TYPE numeric(14,0) "
          "USING qty::numeric";
  CHECK_THAT(as_stopped(decide_ddl("shop", "public.t", before, e, lsn, t)).reason,
             Catch::Contains("column qty was retyped"));
  // Without USING, a widening applies as before; USING INDEX is no rewrite of values.
  CHECK(as_applied(decide("ALTER TABLE t ALTER COLUMN qty TYPE bigint", "bigint")).statements.size() ==
        1);
  CHECK(std::holds_alternative<applied>(
      decide("ALTER TABLE t ADD CONSTRAINT u UNIQUE USING INDEX t_qty", "integer")));
  // Run inside a DO block (a migration's dynamic SQL): its text cannot show whether the
  // retype had USING, so it stops too; a DO block adding a column is applied.
  const auto& hidden = as_stopped(decide(
      "DO $$ DECLARE s text; BEGIN FOR s IN SELECT stmt FROM migrations LOOP EXECUTE s; END "
      "LOOP; END $$",
      "bigint"));
  CHECK(hidden.code == code_type_change);
  CHECK_THAT(hidden.reason, Catch::Contains("column qty was retyped (integer -> bigint)") &&
                                Catch::Contains("DO block"));
  CHECK_THAT(hidden.remedy, Catch::Contains("--reload"));
  e.ddl = "DO $$ BEGIN EXECUTE 'ALTER TABLE t ADD COLUMN w int'; END $$";
  e.columns = {src("id", 1, "integer", true), src("qty", 2, "integer"), src("w", 3, "integer")};
  CHECK(std::holds_alternative<applied>(decide_ddl("shop", "public.t", before, e, lsn, t)));
}

TEST_CASE("ATTACH or DETACH PARTITION on a captured table stops the stream; other DDL does not") {
  source_column id;
  id.name = "id";
  id.attnum = 1;
  id.type = "bigint";
  id.not_null = id.key = true;
  ddl_event e;
  e.command_tag = "ALTER TABLE";
  e.object_type = "table";
  e.schema = "public";
  e.table = "m";
  e.columns = {id};
  const auto t = target(pg);
  const auto stop_of = [&](std::string ddl) {
    e.ddl = std::move(ddl);
    return decide_ddl("shop", "public.m", {id}, e, lsn, t);
  };
  const auto& a = as_stopped(stop_of(
      "create table p3 (like m); alter table m attach   partition \"P 3\"\"x\" for values in (3)"));
  CHECK(a.code == code_partition);
  CHECK_THAT(a.message, Catch::Contains("(ATTACH PARTITION \"P 3\"\"x\")"));
  CHECK(as_stopped(stop_of("ALTER TABLE m DETACH PARTITION m_1 CONCURRENTLY")).code ==
        code_partition);
  // Nothing about partitions: a change with nothing to apply.
  CHECK(as_applied(stop_of("ALTER TABLE m SET (fillfactor = 70)")).statements.empty());
  // A column change in a query string that attaches elsewhere is that column change.
  source_column c;
  c.name = "c";
  c.attnum = 2;
  c.type = "integer";
  e.columns = {id, c};
  CHECK(as_applied(stop_of("ALTER TABLE m ADD COLUMN c int; ALTER TABLE o ATTACH PARTITION o1 "
                           "DEFAULT")).statements.size() == 1);
}

// ---- held for review -----------------------------------------------------------------------

TEST_CASE("DROP COLUMN of a key column is held: drop with a comment that the key must be recreated first") {
  captured_table t{"shop", "public.orders",
                   {column("id", "int", false, true), column("line", "int", false, true),
                    column("v", "text")}};
  SECTION("postgres") {
    const auto& h = as_held(decide(drop_column{"line"}, pg, t));
    CHECK(h.kind() == "drop_column");
    CHECK(h.state() == storage::pb::HOLD_STATE_AWAITING_REVIEW);
    CHECK(h.target() == "wh");
    CHECK(h.table() == "shop.public.orders");
    CHECK(h.position() == lsn);
    CHECK(h.source_change() == "public.orders: column line dropped (source LSN 0/16B3748)");
    CHECK(h.proposed_ddl() ==
          "-- \"line\" is part of the row key: the key constraint must be dropped and created "
          "again first.\n"
          "-- PostgreSQL drops the primary key with its column; create it again over the "
          "remaining key columns.\n"
          "ALTER TABLE \"s\".\"orders\" DROP COLUMN \"line\";\n"
          "ALTER TABLE \"s\".\"orders\" ADD PRIMARY KEY (\"id\");");
    CHECK_FALSE(needs_edit(h.proposed_ddl()));
    CHECK(h.requires_resync());
    CHECK_THAT(h.data_consequence(), Catch::StartsWith("Requires table resync."));
    CHECK_THAT(h.data_consequence(),
               Catch::Contains("Values in the dropped column are discarded on the target."));
  }
  SECTION("postgres, the source's whole primary key dropped with the column") {
    const auto& h = as_held(decide(drop_column{"line", std::vector<std::string>{}}, pg, t));
    CHECK(h.proposed_ddl() ==
          "-- \"line\" is part of the row key: the key constraint must be dropped and created "
          "again first.\n"
          "-- PostgreSQL drops the primary key with its column; the source table has no row key "
          "now, and the target follows it.\n"
          "ALTER TABLE \"s\".\"orders\" DROP COLUMN \"line\";");
    CHECK_THAT(h.data_consequence(), Catch::Contains("The row key changes to none"));
    const auto& dk = as_held(decide(drop_column{"line", std::vector<std::string>{}}, duck, t));
    CHECK_THAT(dk.proposed_ddl(), !Catch::Contains("PRIMARY KEY"));
  }
  SECTION("duckdb rebuilds the table without the column") {
    const auto& h = as_held(decide(drop_column{"line"}, duck, t));
    CHECK(h.kind() == "drop_column");
    CHECK_THAT(h.proposed_ddl(), Catch::StartsWith("-- \"line\" is part of the row key: the key "
                                                   "constraint must be dropped and created again first."));
    CHECK_THAT(h.proposed_ddl(), Catch::Contains("PRIMARY KEY (\"id\")"));
    CHECK_THAT(h.proposed_ddl(), Catch::Contains("DROP TABLE \"s\".\"orders\";"));
  }
  SECTION("kafka") {
    const auto& h = as_held(decide(drop_column{"line"}, kafka, t));
    CHECK(h.proposed_ddl() == no_target_ddl);
    CHECK(h.requires_resync());
  }
}

TEST_CASE("a rename of a key column is always held for review") {
  for (auto k : {pg, duck}) {
    const auto& h = as_held(decide(rename_column{"id", "order_id"}, k));
    CHECK(h.kind() == "rename_column");
    CHECK(h.source_change() == "public.orders: column id renamed to order_id (source LSN 0/16B3748)");
    CHECK(h.proposed_ddl() == R"(ALTER TABLE "s"."orders" RENAME COLUMN "id" TO "order_id";)");
    CHECK_FALSE(h.requires_resync());
    CHECK_THAT(h.data_consequence(), Catch::Contains("resumes exactly at the change"));
    CHECK_THAT(h.reason(), Catch::Contains("part of the row key"));
  }
  const auto& h = as_held(decide(rename_column{"id", "order_id"}, kafka));
  CHECK(h.proposed_ddl() == no_target_ddl);
  CHECK_FALSE(needs_edit(h.proposed_ddl()));
}

TEST_CASE("a type change DuckDB cannot make exactly (key column) is held with a rebuild proposal") {
  const auto& h = as_held(decide(alter_type{"id", ty("bigint")}, duck));
  CHECK(h.kind() == "alter_type");
  CHECK_THAT(h.reason(), Catch::Contains("refuses ALTER COLUMN ... TYPE on a column of the primary key"));
  CHECK_THAT(h.proposed_ddl(), Catch::Contains("\"id\" BIGINT NOT NULL"));
  CHECK_FALSE(h.requires_resync());
  CHECK_FALSE(needs_edit(h.proposed_ddl()));
}

TEST_CASE("a column name that collides on the target is held: rename at the source, then resync") {
  SECTION("rename") {
    const auto& h = as_held(decide(rename_column{"note", "Qty"}, duck));
    CHECK(h.kind() == "rename_column");
    CHECK_THAT(h.reason(), Catch::Contains("collides with column 'qty'"));
    CHECK(h.requires_resync());
    // Nothing to run on the target: the proposal's way out is a resync, which it allows.
    CHECK_FALSE(needs_edit(h.proposed_ddl()));
    CHECK_THAT(h.proposed_ddl(), Catch::Contains("then resync this review") &&
                                     Catch::EndsWith(std::string(no_target_ddl)));
  }
  SECTION("added column") {
    const auto& h = as_held(decide(add_column{column("QTY", "int")}, duck));
    CHECK(h.kind() == "add_column");
    CHECK_FALSE(needs_edit(h.proposed_ddl()));
    CHECK(h.requires_resync());
    // A copy of the table would need both names again: the way out is at the source.
    CHECK_THAT(h.proposed_ddl(), Catch::Contains("at the source") &&
                                     Catch::Contains("ALTER TABLE \"public\".\"orders\" RENAME "
                                                     "COLUMN \"QTY\" TO \"QTY_2\"") &&
                                     !Catch::Contains("ADD COLUMN"));
  }
  SECTION("a hostile source table name is quoted in the statement to run at the source") {
    auto t = orders();
    t.name = "Sc \"h.T'b\"l; --";
    const auto& h = as_held(decide(add_column{column("QTY", "int")}, duck, t));
    CHECK_THAT(h.proposed_ddl(),
               Catch::Contains("--   ALTER TABLE \"Sc \"\"h\".\"T'b\"\"l; --\" RENAME COLUMN"));
  }
}

TEST_CASE("an added column in a collation the target does not support is held") {
  auto c = column("title", "text");
  c.collation = "de_DE";
  const auto& h = as_held(decide(add_column{c}, duck));
  CHECK(h.kind() == "add_column");
  CHECK_THAT(h.proposed_ddl(), Catch::StartsWith("-- The source column is in collation \"de_DE\""));
  CHECK(needs_edit(h.proposed_ddl()));
  CHECK_FALSE(h.requires_resync());
  // PostgreSQL keeps the collation.
  CHECK(as_applied(decide(add_column{c}, pg)).statements ==
        std::vector<std::string>{R"(ALTER TABLE "s"."orders" ADD COLUMN "title" TEXT COLLATE "de_DE")"});
  // "C" too: byte order, which the database's default (another locale) is not. DuckDB
  // compares text in byte order: it takes the column as it is.
  c.collation = "C";
  CHECK(as_applied(decide(add_column{c}, pg)).statements ==
        std::vector<std::string>{R"(ALTER TABLE "s"."orders" ADD COLUMN "title" TEXT COLLATE "C")"});
  CHECK(std::holds_alternative<applied>(decide(add_column{c}, duck)));
  c.collation = "";
  CHECK(as_applied(decide(add_column{c}, pg)).statements ==
        std::vector<std::string>{R"(ALTER TABLE "s"."orders" ADD COLUMN "title" TEXT)"});
}

TEST_CASE("a primary key change is held, needs a fresh copy, and asks for the target key change by hand") {
  for (auto k : {pg, duck, kafka}) {
    const auto& h = as_held(decide(key_change{{"id", "code"}, "primary key orders_pkey redefined"}, k));
    CHECK(h.kind() == "key_change");
    CHECK_THAT(h.reason(), Catch::EndsWith("Restore the row key on the source, then reload the table."));
    CHECK(h.requires_resync());
    CHECK_THAT(h.data_consequence(), Catch::StartsWith("Requires table resync."));
    CHECK(comment_only(h.proposed_ddl()));
    if (k != kafka) {
      CHECK(needs_edit(h.proposed_ddl()));
      CHECK_THAT(h.proposed_ddl(), Catch::Contains("Write the matching target key change by hand"));
      CHECK_THAT(h.proposed_ddl(), Catch::Contains(R"(-- ALTER TABLE "s"."orders" ADD PRIMARY KEY ("id", "code");)"));
    }
  }
  // A change to the index serving as the row key is a key change.
  CHECK(as_held(decide(index_change{"orders_pkey", true, ""}, pg)).kind() == "key_change");
  CHECK(as_held(decide(key_change{{}, ""}, pg)).source_change() ==
        "public.orders: row key dropped (source LSN 0/16B3748)");
}

TEST_CASE("a key added to a keyless table is held for a fresh copy, with nothing to restore or "
          "drop") {
  for (auto k : {pg, duck}) {
    const auto& h = as_held(decide(key_change{{"at"}, "primary key redefined"}, k, events_table()));
    CHECK(h.kind() == "key_change");
    CHECK(h.requires_resync());
    CHECK_THAT(h.reason(), Catch::Contains("a primary key was added: (at)") &&
                               Catch::EndsWith("Resync the table (it is copied again with its "
                                               "key), or remove it.") &&
                               !Catch::Contains("Restore the row key"));
    CHECK_THAT(h.proposed_ddl(), !Catch::Contains("DROP CONSTRAINT") &&
                                     !Catch::Contains("cannot drop a key"));
    // On PostgreSQL the statement is ready; on DuckDB, which adds no key in place, the
    // resync's copy makes the table with its key: either way resync takes the proposal
    // without an edit, as the reason says.
    if (k == pg)
      CHECK_THAT(h.proposed_ddl(), Catch::Contains("ADD PRIMARY KEY (\"at\")"));
    else
      CHECK_THAT(h.proposed_ddl(), Catch::Contains("copies the table anew, with its key") &&
                                       Catch::EndsWith(std::string(no_target_ddl)));
    CHECK_FALSE(needs_edit(h.proposed_ddl()));
  }
}

// ---- helpers -------------------------------------------------------------------------------

TEST_CASE("comment-only DDL and proposals that need an edit") {
  CHECK(comment_only("-- a\n-- b\n"));
  CHECK(comment_only(" ;\n-- only\n;"));
  CHECK(comment_only(""));
  CHECK_FALSE(comment_only("-- a\nALTER TABLE t ADD COLUMN c INT"));
  CHECK(needs_edit("-- The source column is NOT NULL: add a DEFAULT, or add it NULL, before applying."));
  CHECK_FALSE(needs_edit(no_target_ddl));
  CHECK_FALSE(needs_edit("-- why\n-- no target DDL needed\n"));
  CHECK_FALSE(needs_edit("ALTER TABLE t DROP COLUMN c;"));
}

TEST_CASE("apply_change gives the shape after the change") {
  auto t = apply_change(orders(), rename_column{"note", "notes"});
  REQUIRE(t.find("notes"));
  CHECK_FALSE(t.find("note"));
  t = apply_change(t, alter_type{"qty", ty("bigint")});
  CHECK(t.find("qty")->type == ty("bigint"));
  t = apply_change(t, key_change{{"code"}, ""});
  CHECK(t.to_schema().key() == std::vector<std::string>{"code"});
  t = apply_change(t, drop_column{"total"});
  CHECK(t.columns.size() == 4);
  CHECK(parse_target_kind("postgresql") == pg);
  CHECK_FALSE(parse_target_kind("sqlite").has_value());
}

TEST_CASE("a schema change event publishes the DDL of the query string, not its other statements") {
  CHECK(ddl_statements("alter table items add column w int; update items set v='z' where id=1") ==
        "alter table items add column w int");
  // Semicolons in strings, dollar quotes and comments do not split; comments before a
  // statement stay with it.
  CHECK(ddl_statements("-- migrate\nALTER TABLE t ADD COLUMN a text DEFAULT 'x;y'; "
                       "INSERT INTO t VALUES ('a;b'); COMMENT ON TABLE t IS $c$one; two$c$;") ==
        "-- migrate\nALTER TABLE t ADD COLUMN a text DEFAULT 'x;y'; "
        "COMMENT ON TABLE t IS $c$one; two$c$");
  CHECK(ddl_statements("/* x; */ alter table t drop column b") == "/* x; */ alter table t drop column b");
  // No DDL at the top level (it ran inside a DO block): nothing of the text, whose other
  // statements may carry data of tables not captured.
  CHECK(ddl_statements("SELECT 1") == ddl_not_shown);
  CHECK(ddl_statements("DO $$ BEGIN INSERT INTO secrets VALUES ('alice', 'pw'); ALTER TABLE "
                       "items ADD COLUMN z int; END $$;") == ddl_not_shown);
}

TEST_CASE("a primary key given to a keyless table is said added, not redefined") {
  ddl_event e;
  e.command_tag = "ALTER TABLE";
  e.object_type = "table";
  e.schema = "public";
  e.table = "logs";
  e.ddl = "ALTER TABLE logs ADD PRIMARY KEY (msg)";
  e.columns = {src("msg", 1, "text", true), src("n", 2, "integer")};
  const std::vector<source_column> keyless{src("msg", 1, "text"), src("n", 2, "integer")};
  const auto added = to_source_changes("public.logs", keyless, e, lsn);
  REQUIRE(added.size() == 1);
  REQUIRE(std::holds_alternative<key_change>(added[0].change));
  CHECK(std::get<key_change>(added[0].change).detail == "primary key added");
  // Over a key the table had: redefined.
  const std::vector<source_column> keyed{src("msg", 1, "text"), src("n", 2, "integer", true)};
  const auto moved = to_source_changes("public.logs", keyed, e, lsn);
  const auto key = std::find_if(moved.begin(), moved.end(), [](const source_change& c) {
    return std::holds_alternative<key_change>(c.change);
  });
  REQUIRE(key != moved.end());
  CHECK(std::get<key_change>(key->change).detail == "primary key redefined");
}

TEST_CASE("a literal default is constant even when PostgreSQL wrote it into every row") {
  // ADD COLUMN ... DEFAULT 5 in a statement that also retypes another column (or a
  // domain with a check) rewrites the table: atthasmissing is false, yet every row holds
  // the literal. A call (now(), gen_random_uuid()) stays per-row.
  const auto column_with = [](std::string expr, bool has_missing) {
    source_column c;
    c.name = "k";
    c.attnum = 2;
    c.type = "text";
    c.default_expr = std::move(expr);
    c.has_missing = has_missing;
    return c;
  };
  struct row {
    std::string expr;
    std::optional<std::string> value;
  };
  for (const auto& [expr, value] : std::vector<row>{
           {"5", "5"},
           {"-1.5", "-1.5"},
           {"true", "true"},
           {"'it''s'::text", "it's"},
           {"'2020-02-03'::date", "2020-02-03"},
           {"'x'::character varying", "x"},
           {"now()", std::nullopt},
           {"gen_random_uuid()", std::nullopt},
           {"('a'::text || 'b'::text)", std::nullopt},
           {"'a\\b'::text", std::nullopt},
       }) {
    CAPTURE(expr);
    const auto t = to_captured("shop", "public.t", {column_with(expr, false)});
    const auto* c = &t.columns.front();
    CHECK(c->default_constant == value.has_value());
    if (value)
      CHECK(c->default_value == value);
  }
}

TEST_CASE("a bytea column added with a constant default gives DuckDB's rows the same bytes") {
  // PostgreSQL's text of the value is "\xdead"; DuckDB reads "\xde" as one byte and "ad"
  // as two more, so each byte is written "\xHH".
  auto c = column("raw", "bytes");
  c.default_expr = "'\\xdead'::bytea";
  c.default_constant = true;
  c.default_value = "\\xdead";
  const auto duck_sql = as_applied(decide(add_column{c}, duck)).statements;
  REQUIRE_FALSE(duck_sql.empty());
  CHECK_THAT(duck_sql.front(), Catch::Contains(R"(DEFAULT CAST('\xde\xad' AS BLOB))"));
  const auto pg_sql = as_applied(decide(add_column{c}, pg)).statements;
  REQUIRE_FALSE(pg_sql.empty());
  CHECK_THAT(pg_sql.front(), Catch::Contains(R"(DEFAULT CAST(E'\\xdead' AS BYTEA))"));
}

TEST_CASE("a decimal widened past DuckDB's 38 digits is held for an edit, not applied at 38") {
  const auto h = as_held(decide(alter_type{"total", ty("decimal(40,2)")}, target_kind::duckdb));
  CHECK(h.kind() == "alter_type");
  CHECK_THAT(h.reason(), Catch::Contains("38 digits"));
  CHECK(needs_edit(h.proposed_ddl()));
  CHECK_THAT(h.proposed_ddl(), Catch::Contains("TYPE VARCHAR"));
  // PostgreSQL makes the change exactly.
  const auto a = as_applied(decide(alter_type{"total", ty("decimal(40,2)")}, target_kind::postgres));
  REQUIRE(a.statements.size() == 1);
  CHECK_THAT(a.statements[0], Catch::Contains("NUMERIC(40,2)"));
}

TEST_CASE("a decimal column added past DuckDB's 38 digits is held for an edit, not made at 38") {
  auto c = column("e", "decimal(40,5)");
  c.default_expr = "1.5";
  c.default_constant = true;
  c.default_value = "1.5";
  const auto h = as_held(decide(add_column{c}, duck));
  CHECK(h.kind() == "add_column");
  CHECK_THAT(h.reason(), Catch::Contains("38 digits"));
  CHECK(needs_edit(h.proposed_ddl()));
  CHECK_THAT(h.proposed_ddl(), Catch::Contains("ADD COLUMN \"e\" VARCHAR DEFAULT '1.5'"));
  // PostgreSQL adds it exactly.
  const auto a = as_applied(decide(add_column{c}, pg));
  REQUIRE_FALSE(a.statements.empty());
  CHECK_THAT(a.statements.front(), Catch::Contains("NUMERIC(40,5)"));
}

TEST_CASE("a BC date or timestamp default gives DuckDB's rows the BC value") {
  auto d = column("born", "date");
  d.default_expr = "'0044-03-15 BC'::date";
  d.default_constant = true;
  d.default_value = "0044-03-15 BC";
  const auto duck_sql = as_applied(decide(add_column{d}, duck)).statements;
  REQUIRE_FALSE(duck_sql.empty());
  CHECK_THAT(duck_sql.front(), Catch::Contains("'-0043-03-15'"));
  auto t = column("at", "timestamp_ntz");
  t.default_expr = "'0100-01-01 10:00:00 BC'::timestamp";
  t.default_constant = true;
  t.default_value = "0100-01-01 10:00:00 BC";
  const auto ts_sql = as_applied(decide(add_column{t}, duck)).statements;
  REQUIRE_FALSE(ts_sql.empty());
  CHECK_THAT(ts_sql.front(), Catch::Contains("'-0099-01-01 10:00:00'"));
  // PostgreSQL reads its own text.
  const auto pg_sql = as_applied(decide(add_column{d}, pg)).statements;
  REQUIRE_FALSE(pg_sql.empty());
  CHECK_THAT(pg_sql.front(), Catch::Contains("0044-03-15 BC"));
}

TEST_CASE("a decimal retyped to an unbounded numeric is named as the source names it") {
  const auto& h = as_held(decide(alter_type{"total", ty("text"), "numeric"}, pg));
  CHECK_THAT(h.reason(), Catch::Contains("-> numeric (a numeric without precision") &&
                             !Catch::Contains("-> text,"));
}

TEST_CASE("fewer fractional-second digits on a time, timestamp or interval column stop the "
          "stream: the source rounded every value where no change event says so") {
  ddl_event e;
  e.command_tag = "ALTER TABLE";
  e.object_type = "table";
  e.schema = "public";
  e.table = "tp";
  const auto lsn = std::string("0/16B3748");
  struct row {
    std::string before, after;
    bool rounds;
  };
  for (const auto& [before, after, rounds] : std::vector<row>{
           {"time without time zone", "time(0) without time zone", true},
           {"timestamp(3) with time zone", "timestamp(1) with time zone", true},
           {"interval", "interval(0)", true},
           {"timestamp without time zone", "timestamp(0) without time zone", true},
           {"time(0) without time zone", "time(3) without time zone", false},
           {"timestamp(2) without time zone", "timestamp without time zone", false},
       }) {
    INFO(before << " -> " << after);
    e.columns = {src("id", 1, "integer", true), src("t", 2, after)};
    const std::vector<source_column> was{src("id", 1, "integer", true), src("t", 2, before)};
    const auto changes = to_source_changes("public.tp", was, e, lsn);
    REQUIRE(changes.size() == 1);
    REQUIRE(std::holds_alternative<alter_type>(changes[0].change));
    CHECK(std::get<alter_type>(changes[0].change).rounds == rounds);
    captured_table t{"shop", "public.tp", {column("id", "int", false, true), column("t", "text")}};
    t.columns[1].type = flotilla::sources::map_postgres_type(before);
    for (auto k : {pg, duck, kafka}) {
      const auto o = decide(changes[0].change, k, t);
      if (rounds) {
        const auto s = as_stopped(o);
        CHECK(s.code == "FLT-H002");
        CHECK_THAT(s.reason, Catch::Contains("rounded every stored value") &&
                                 Catch::Contains(after));
      } else {
        CHECK_FALSE(std::holds_alternative<stopped>(o));
      }
    }
  }
}

TEST_CASE("a type change PostgreSQL makes by rewriting every value into other text stops the "
          "stream; one that keeps every value goes on") {
  ddl_event e;
  e.command_tag = "ALTER TABLE";
  e.object_type = "table";
  e.schema = "public";
  e.table = "tp";
  struct row {
    std::string before, after, says;  // says: empty when it goes on
  };
  for (const auto& [before, after, says] : std::vector<row>{
           {"character(5)", "character(8)", "pads every stored value"},
           {"character(8)", "character varying(10)", "trailing spaces"},
           {"character(8)", "text", "trailing spaces"},
           {"character varying(8)", "character(8)", "pads every stored value"},
           {"interval", "interval year to month", "fields interval year to month"},
           {"interval", "interval day to second", "fields"},
           {"inet", "cidr", "as a network"},
           {"json", "jsonb", "as jsonb keeps it"},
           {"interval year to month", "interval", ""},
           {"character varying(5)", "character varying(8)", ""},
           {"jsonb", "json", ""},
           {"cidr", "inet", ""},
       }) {
    INFO(before << " -> " << after);
    e.columns = {src("id", 1, "integer", true), src("t", 2, after)};
    const std::vector<source_column> was{src("id", 1, "integer", true), src("t", 2, before)};
    const auto changes = to_source_changes("public.tp", was, e, "0/16B3748");
    REQUIRE(changes.size() == 1);
    REQUIRE(std::holds_alternative<alter_type>(changes[0].change));
    captured_table t{"shop", "public.tp", {column("id", "int", false, true), column("t", "text")}};
    t.columns[1].type = flotilla::sources::map_postgres_type(before);
    for (auto k : {pg, duck, kafka}) {
      const auto o = decide(changes[0].change, k, t);
      if (!says.empty()) {
        const auto s = as_stopped(o);
        CHECK(s.code == "FLT-H002");
        CHECK_THAT(s.reason, Catch::Contains(says) && Catch::Contains("not in the change stream"));
      } else {
        CHECK_FALSE(std::holds_alternative<stopped>(o));
      }
    }
  }
}

TEST_CASE("a decimal given a numeric without precision is held with the column as text "
          "proposed, not stopped; an event target carries it as text") {
  const alter_type c{"total", flotilla::sources::map_postgres_type("numeric"), "numeric",
                     "numeric(10,2)"};
  for (auto k : {pg, duck}) {
    const auto& h = as_held(decide(c, k));
    CHECK(h.kind() == "alter_type");
    CHECK_FALSE(h.requires_resync());
    CHECK_THAT(h.reason(), Catch::Contains("a numeric without precision") &&
                               !Catch::Contains("cannot carry"));
    CHECK_FALSE(needs_edit(h.proposed_ddl()));
    CHECK_THAT(h.proposed_ddl(), Catch::Contains("ALTER COLUMN \"total\" TYPE"));
  }
  CHECK(std::holds_alternative<applied>(decide(c, kafka)));
}
