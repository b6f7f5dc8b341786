#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dialects/dialect.hpp"
#include "engine/planner.hpp"

using namespace flotilla;

namespace {
schema::portable_type T(const char* s) { return *schema::parse_type(s); }
schema::table_schema S(std::initializer_list<schema::column> c) { return schema::table_schema{c}; }
const dialects::table_ref orders{"", "staging__us_west__shop", "orders"};
}  // namespace

TEST_CASE("an absent target is created and loaded in the load's transaction, with no swap") {
  for (const char* name : {"duckdb", "postgres", "sqlite"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    const auto columns = S({{"id", T("int")}});
    auto p = engine::plan_table(columns, std::nullopt, engine::target_state::absent, *d, orders,
                                {});
    CHECK(p.shape_action == "create");
    CHECK(p.load == engine::load_kind::full_refresh);
    CHECK_FALSE(p.drift_checked);
    // A leftover staging table of an earlier crash goes; the table itself is created.
    REQUIRE(p.staging_sql.size() == 3);
    CHECK_THAT(p.staging_sql[0], Catch::Contains("DROP TABLE IF EXISTS") &&
                                     Catch::Contains("orders__flotilla_staging"));
    CHECK(p.staging_sql[1] == d->drop_table(orders));
    CHECK(p.staging_sql[2] == d->create_table(orders, columns));
    CHECK(p.swap_sql.empty());
    // The schema's statement is kept apart: a run sends it once per schema, not per table.
    CHECK(p.schema_sql == d->create_schema(orders.schema));
    for (const auto& sql : p.ddl)
      CHECK_THAT(sql, !Catch::Contains("CREATE SCHEMA"));
  }
}

TEST_CASE("a present target is refreshed through a staging table where the engine swaps") {
  auto d = *dialects::make_dialect("duckdb");
  const auto live = S({{"id", T("int")}});
  auto p = engine::plan_table(live, live, engine::target_state::present, *d, orders, {});
  CHECK(p.load == engine::load_kind::full_refresh);
  REQUIRE(p.staging_sql.size() == 2);
  CHECK_THAT(p.staging_sql[1], Catch::Contains("CREATE TABLE") &&
                                   Catch::Contains("orders__flotilla_staging"));
  CHECK_FALSE(p.swap_sql.empty());
}

TEST_CASE("a full refresh by a unique_key loads as a merge into the live table: no swap shown") {
  for (const char* name : {"duckdb", "postgres"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    const auto live = S({{"id", T("int")}, {"note", T("text")}});
    engine::table_settings settings;
    settings.unique_key = {"id"};
    auto p = engine::plan_table(live, live, engine::target_state::present, *d, orders, settings);
    CHECK(p.load == engine::load_kind::full_refresh);
    CHECK(p.unique_key == std::vector<std::string>{"id"});
    CHECK(p.swap_sql.empty());
    CHECK(p.staging_sql.empty());
  }
}

TEST_CASE("a SQLite full refresh loads the live table inside the load, with no swap") {
  auto d = *dialects::make_dialect("sqlite");
  const dialects::table_ref t{"", "", "staging__shop__orders"};
  const std::string staging = "DROP TABLE IF EXISTS \"staging__shop__orders__flotilla_staging\"";
  const auto live = S({{"id", T("int")}, {"note", T("text")}});

  // The live table has the columns loaded: it is emptied, its definition kept.
  auto same = engine::plan_table(live, live, engine::target_state::present, *d, t, {});
  CHECK(same.load == engine::load_kind::full_refresh);
  CHECK(same.staging_sql ==
        std::vector<std::string>{staging, "DELETE FROM \"staging__shop__orders\""});
  CHECK(same.swap_sql.empty());

  // A column added by the plan's DDL is part of the live table the load finds.
  auto added = engine::plan_table(S({{"id", T("int")}, {"note", T("text")}, {"qty", T("int")}}),
                                  live, engine::target_state::present, *d, t, {});
  CHECK(added.shape_action == "evolve");
  CHECK(added.staging_sql ==
        std::vector<std::string>{staging, "DELETE FROM \"staging__shop__orders\""});

  // Absent, or of other columns: dropped and created with the columns loaded.
  auto absent = engine::plan_table(live, std::nullopt, engine::target_state::absent, *d, t, {});
  CHECK(absent.staging_sql == std::vector<std::string>{staging,
                                                       "DROP TABLE IF EXISTS \"staging__shop__orders\"",
                                                       d->create_table(t, live)});
  auto retyped = S({{"id", T("int")}, {"note", T("varchar(10)")}});
  auto other = engine::plan_table(retyped, live, engine::target_state::present, *d, t, {});
  CHECK(other.staging_sql == std::vector<std::string>{staging,
                                                      "DROP TABLE IF EXISTS \"staging__shop__orders\"",
                                                      d->create_table(t, retyped)});
  CHECK(other.swap_sql.empty());
  // A NOT NULL the source gained is not added: the live table, more permissive, is kept
  // with its indexes and triggers, and emptied.
  auto not_null = S({{"id", T("int"), false, false}, {"note", T("text")}});
  auto kept = engine::plan_table(not_null, live, engine::target_state::present, *d, t, {});
  CHECK(kept.staging_sql ==
        std::vector<std::string>{staging, "DELETE FROM \"staging__shop__orders\""});
  auto keyed = S({{"id", T("int"), false, true}, {"note", T("text")}});
  // One it let go of cannot be dropped in place by SQLite: the table is made again.
  auto unkeyed = engine::plan_table(live, keyed, engine::target_state::present, *d, t, {});
  CHECK(unkeyed.staging_sql == std::vector<std::string>{staging,
                                                        "DROP TABLE IF EXISTS \"staging__shop__orders\"",
                                                        d->create_table(t, live)});
}

TEST_CASE("a full refresh the target empties in place runs DELETE and no swap, only while the "
          "live table keeps its columns") {
  auto d = *dialects::make_dialect("postgres");
  const auto live = S({{"id", T("bigint"), false, true}, {"note", T("text")}});
  engine::table_settings in_place;
  in_place.empties_in_place = true;
  auto same = engine::plan_table(live, live, engine::target_state::present, *d, orders, in_place);
  REQUIRE(same.staging_sql.size() == 3);
  CHECK(same.staging_sql[1] == "LOCK TABLE " + d->qualified(orders) + " IN SHARE ROW EXCLUSIVE MODE");
  CHECK(same.staging_sql[2] == "DELETE FROM " + d->qualified(orders));
  CHECK(same.swap_sql.empty());
  // The same table without the setting: the staging table and its swap.
  auto swapped = engine::plan_table(live, live, engine::target_state::present, *d, orders, {});
  CHECK_THAT(swapped.staging_sql.at(1), Catch::Contains("orders__flotilla_staging"));
  CHECK_FALSE(swapped.swap_sql.empty());
  // Another key: the live key is dropped in place, id's NOT NULL with it, and the new
  // key added.
  auto rekeyed = engine::plan_table(S({{"id", T("bigint")}, {"note", T("text"), false, true}}),
                                    live, engine::target_state::present, *d, orders, in_place);
  CHECK(rekeyed.swap_sql.empty());
  REQUIRE(rekeyed.staging_sql.size() == 6);
  CHECK_THAT(rekeyed.staging_sql[3], Catch::Contains("DROP CONSTRAINT %I"));
  CHECK(rekeyed.staging_sql[4] == d->drop_not_null(orders, "id"));
  CHECK(rekeyed.staging_sql[5] == "ALTER TABLE " + d->qualified(orders) + " ADD PRIMARY KEY (\"note\")");
  // Another type: the refreshed table differs from the live one, so it is swapped anyway.
  auto retyped = engine::plan_table(S({{"id", T("bigint"), false, true}, {"note", T("varchar(9)")}}),
                                    live, engine::target_state::present, *d, orders, in_place);
  CHECK_FALSE(retyped.swap_sql.empty());
}

TEST_CASE("an unreadable target is treated as absent and rebuilt") {
  auto d = *dialects::make_dialect("postgres");
  auto p = engine::plan_table(S({{"id", T("int")}}), std::nullopt, engine::target_state::unreadable,
                              *d, orders, {});
  CHECK(p.shape_action == "create");
  CHECK(p.reset_watermark);
}

TEST_CASE("a new column is added before an incremental load continues from the watermark") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings s;
  s.cursor_column = "updated_at";
  s.has_watermark = true;
  auto live = S({{"id", T("int")}, {"updated_at", T("timestamp_ntz")}});
  auto src = S({{"id", T("int")}, {"updated_at", T("timestamp_ntz")}, {"coupon", T("text")}});
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  CHECK(p.shape_action == "evolve");
  CHECK(p.load == engine::load_kind::incremental);
  CHECK(p.ddl.back() ==
        "ALTER TABLE \"staging__us_west__shop\".\"orders\" ADD COLUMN \"coupon\" VARCHAR");
  // Appended without a key: the rows loaded before keep NULL there, said with the fix.
  CHECK_FALSE(p.reset_watermark);
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Catch::Contains("column(s) 'coupon' added") &&
                                Catch::Contains("keep NULL") && Catch::Contains("unique_key"));
  // Merged on a key: every row is read again, so the rows loaded before get the source's
  // values for the new column (a default it was added with, seed 002).
  s.unique_key = {"id"};
  auto keyed = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  CHECK(keyed.load == engine::load_kind::merge);
  CHECK(keyed.reset_watermark);
  REQUIRE(keyed.warnings.size() == 1);
  CHECK_THAT(keyed.warnings[0], Catch::Contains("reads every row again"));
  // No column added: the load continues from the watermark.
  auto same = engine::plan_table(live, live, engine::target_state::present, *d, orders, s);
  CHECK_FALSE(same.reset_watermark);
  // Added by a run whose load then failed after its ALTER (the live table has it already):
  // the watermark's columns lack it, so every row is read again all the same.
  s.watermark_columns = std::vector<std::string>{"id", "updated_at"};
  auto after_failure = engine::plan_table(src, src, engine::target_state::present, *d, orders, s);
  CHECK(after_failure.drift.steps.empty());
  CHECK(after_failure.reset_watermark);
  REQUIRE(after_failure.warnings.size() == 1);
  CHECK_THAT(after_failure.warnings[0], Catch::Contains("'coupon' added"));
  // Once a load wrote it, it is no longer new.
  s.watermark_columns = std::vector<std::string>{"id", "updated_at", "coupon"};
  CHECK_FALSE(engine::plan_table(src, src, engine::target_state::present, *d, orders, s).reset_watermark);
}

TEST_CASE("an incremental table whose boolean, decimal or float column became text reads "
          "every row again when it merges; integers keep the watermark") {
  // The target converts the rows it holds with its own cast ('true', '1.500'), where the
  // source may give them another text ('1', '1.5'): merged on a key, every row is read again.
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings s;
  s.cursor_column = "updated_at";
  s.has_watermark = true;
  s.unique_key = {"id"};
  const std::string from = GENERATE(std::string("boolean"), std::string("decimal(10,3)"),
                                    std::string("double"));
  CAPTURE(from);
  auto live = S({{"id", T("int")}, {"v", T(from.c_str())}, {"updated_at", T("timestamp_ntz")}});
  auto src = S({{"id", T("int")}, {"v", T("text")}, {"updated_at", T("timestamp_ntz")}});
  auto keyed = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  CHECK(keyed.load == engine::load_kind::merge);
  CHECK(keyed.reset_watermark);
  REQUIRE(keyed.warnings.size() == 1);
  CHECK_THAT(keyed.warnings[0], Catch::Contains("column(s) 'v' now text") &&
                                    Catch::Contains("reads every row again"));
  // Appended without a key: said, with the fix.
  s.unique_key.clear();
  auto keyless = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  CHECK_FALSE(keyless.reset_watermark);
  REQUIRE(keyless.warnings.size() == 1);
  CHECK_THAT(keyless.warnings[0], Catch::Contains("'v' now text") && Catch::Contains("unique_key"));
  // Widened by a run whose load then failed after its ALTER (the live column is text
  // already): the watermark's recorded type says so, and every row is read again.
  s.unique_key = {"id"};
  s.watermark_columns = std::vector<std::string>{"id", "v", "updated_at"};
  s.watermark_column_types = std::vector<std::string>{"int", from, "timestamp_ntz"};
  auto after_failure = engine::plan_table(src, src, engine::target_state::present, *d, orders, s);
  CHECK(after_failure.drift.steps.empty());
  CHECK(after_failure.reset_watermark);
  REQUIRE(after_failure.warnings.size() == 1);
  CHECK_THAT(after_failure.warnings[0], Catch::Contains("'v' now text"));
  // Once a load wrote it as text, it is text.
  s.watermark_column_types = std::vector<std::string>{"int", "text", "timestamp_ntz"};
  CHECK_FALSE(engine::plan_table(src, src, engine::target_state::present, *d, orders, s).reset_watermark);
  s.watermark_columns.reset();
  s.watermark_column_types.reset();
  // An integer has one text everywhere: the load goes on from the watermark.
  auto ints = S({{"id", T("int")}, {"v", T("bigint")}, {"updated_at", T("timestamp_ntz")}});
  auto from_int = engine::plan_table(src, ints, engine::target_state::present, *d, orders, s);
  CHECK_FALSE(from_int.reset_watermark);
  CHECK(from_int.warnings.empty());
}

TEST_CASE("an incremental table without a primary key whose merge key changed since its "
          "watermark is recreated") {
  // A unique_key's table has no primary key on the target: the key its rows were merged
  // on is the watermark's. Merged on a wider key, rows the old one parted were never read
  // again; on a new key, the duplicates the old load let in stayed.
  auto d = *dialects::make_dialect("duckdb");
  auto live = S({{"id", T("int")}, {"line", T("int")}, {"ts", T("text")}});
  engine::table_settings s;
  s.cursor_column = "ts";
  s.has_watermark = true;
  s.unique_key = {"id", "line"};
  s.watermark_key = std::vector<std::string>{"id"};
  auto widened = engine::plan_table(live, live, engine::target_state::present, *d, orders, s);
  CHECK(widened.shape_action == "recreate");
  CHECK(widened.reset_watermark);
  REQUIRE(widened.drift.steps.size() == 1);
  CHECK(widened.drift.steps[0].reason == "the table's key changed (id) -> (id, line)");
  // The key column's type does not change: from and to say so (not an added column's "").
  REQUIRE(widened.drift.steps[0].from.has_value());
  CHECK(schema::to_string(*widened.drift.steps[0].from) == "int");
  CHECK(schema::to_string(widened.drift.steps[0].to) == "int");
  // Appended before, a key now.
  s.unique_key = {"id"};
  s.watermark_key = std::vector<std::string>{};
  auto keyed = engine::plan_table(live, live, engine::target_state::present, *d, orders, s);
  CHECK(keyed.shape_action == "recreate");
  REQUIRE(keyed.drift.steps.size() == 1);
  CHECK(keyed.drift.steps[0].reason == "the table's key changed (none) -> (id)");
  // The same key, in another case: merged as before. Not recorded (older state): as before.
  s.watermark_key = std::vector<std::string>{"ID"};
  CHECK(engine::plan_table(live, live, engine::target_state::present, *d, orders, s).load ==
        engine::load_kind::merge);
  s.watermark_key.reset();
  CHECK(engine::plan_table(live, live, engine::target_state::present, *d, orders, s).load ==
        engine::load_kind::merge);
}

TEST_CASE("a number pin on a column the source reads as text says the fix is at the source") {
  // PostgreSQL's numeric without a scale reads as text: the message named only the text
  // pin, not why nor the documented fixes.
  auto d = *dialects::make_dialect("postgres");
  engine::table_settings s;
  s.declared = {schema::column{"amount", T("decimal(18,2)"), true, false}};
  auto p = engine::plan_table(S({{"id", T("int"), false, true}, {"amount", T("text")}}),
                              std::nullopt, engine::target_state::absent, *d, orders, s);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S002");
  CHECK_THAT(p.error->reason, Catch::Contains("a PostgreSQL numeric without a scale") &&
                                  Catch::Contains("numeric(18,2)") &&
                                  Catch::Contains("amount = \"text\""));
  // A plain text column reads the same: the message says first that text is not read as
  // a number, and gives the numeric's fix only for where the column is one.
  CHECK_THAT(p.error->reason, Catch::Contains("text is never read as a number (where the "
                                              "column is a PostgreSQL numeric"));
}

TEST_CASE("a widening a table rebuild makes is reported as the rebuild's, not in place") {
  // DuckDB widens a key column only by rebuilding the table: the other widening was said
  // to run "in place", though no ALTER ran.
  auto d = *dialects::make_dialect("duckdb");
  auto live = S({{"id", T("int"), false, true}, {"upd", T("int"), false}, {"v", T("text")}});
  auto src = S({{"id", T("bigint"), false, true}, {"upd", T("bigint"), false}, {"v", T("text")}});
  engine::table_settings s;
  s.cursor_column = "upd";
  s.has_watermark = true;
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  CHECK(p.shape_action == "rebuild");
  REQUIRE(p.drift.steps.size() == 2);
  for (const auto& step : p.drift.steps) {
    INFO(step.column);
    CHECK(step.action == schema::evolution_action::rebuild);
    CHECK_THAT(engine::describe_step(step, *d), Catch::Contains("rebuild and swap"));
  }
  CHECK_THAT(p.drift.steps[1].decided_by, Catch::Contains("made by the table's rebuild"));
}

TEST_CASE("a recreated table keeping a column the source dropped warns that it is emptied") {
  auto d = *dialects::make_dialect("postgres");
  auto live = S({{"id", T("int"), false, true}, {"status", T("text")}, {"old_col", T("text")}});
  auto src = S({{"id", T("int"), false, true}, {"status", T("int")}});
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, {});
  CHECK(p.shape_action == "recreate");
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Catch::Contains("column 'old_col' is in the live table only") &&
                                Catch::Contains("empty in every row"));
}

TEST_CASE("a drop_and_recreate lists the table's other changes, which the new table takes") {
  auto d = *dialects::make_dialect("duckdb");
  auto live = S({{"id", T("int"), false, true}, {"amount", T("int")}, {"status", T("text")}});
  auto src = S({{"id", T("int"), false, true},
                {"amount", T("bigint")},
                {"status", T("int")},
                {"note", T("text")}});
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, {});
  CHECK(p.shape_action == "recreate");
  REQUIRE(p.drift.steps.size() == 1);
  CHECK(p.drift.steps[0].reason == "column 'status' changed VARCHAR -> INTEGER");
  CHECK(p.drift.steps[0].also == std::vector<std::string>{"column 'amount' changed INTEGER -> BIGINT",
                                                          "column 'note' added as VARCHAR"});
  CHECK_THAT(engine::describe_step(p.drift.steps[0], *d),
             Catch::Contains("also column 'note' added as VARCHAR"));
}

TEST_CASE("a drop_and_recreate of several unsafe changes still lists the safe ones beside") {
  auto d = *dialects::make_dialect("postgres");
  auto live = S({{"id", T("int"), false, true},
                 {"a", T("bigint")},
                 {"f", T("timestamp_ntz")},
                 {"g", T("boolean")}});
  auto src = S({{"id", T("int"), false, true},
                {"a", T("int")},
                {"f", T("timestamp_tz")},
                {"g", T("text")}});
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, {});
  CHECK(p.shape_action == "recreate");
  REQUIRE_FALSE(p.drift.steps.empty());
  std::vector<std::string> reported;
  for (const auto& s : p.drift.steps) {
    reported.push_back(s.reason);
    reported.insert(reported.end(), s.also.begin(), s.also.end());
  }
  for (const auto& r : reported)
    INFO(r);
  for (const char* column : {"'a'", "'f'", "'g'"})
    CHECK(std::any_of(reported.begin(), reported.end(), [&](const std::string& r) {
      return r.find(column) != std::string::npos;
    }));
}

TEST_CASE("a unique_key spelled in another case takes the loaded column's spelling") {
  auto d = *dialects::make_dialect("postgres");
  engine::table_settings s;
  s.cursor_column = "upd";
  s.unique_key = {"CODE"};
  auto src = S({{"Code", T("text")}, {"upd", T("text")}});
  auto p = engine::plan_table(src, std::nullopt, engine::target_state::absent, *d, orders, s);
  CHECK_FALSE(p.error);
  CHECK(p.unique_key == std::vector<std::string>{"Code"});
}

TEST_CASE("an incremental table whose key changed at the source is recreated, not merged into the old key") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings s;
  s.cursor_column = "updated_at";
  s.has_watermark = true;
  auto live = S({{"id", T("int"), false, true}, {"line", T("int")}, {"updated_at", T("timestamp_ntz")}});
  auto src = S({{"id", T("int"), false, true},
                {"line", T("int"), false, true},
                {"updated_at", T("timestamp_ntz")}});
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  CHECK_FALSE(p.error);
  CHECK(p.shape_action == "recreate");
  CHECK(p.reset_watermark);
  CHECK(p.load == engine::load_kind::full_refresh);
  REQUIRE(p.drift.steps.size() == 1);
  CHECK(p.drift.steps[0].action == schema::evolution_action::drop_and_recreate);
  CHECK(p.drift.steps[0].reason == "the table's key changed (id) -> (id, line)");
  // Rows only the target holds (purged at the source) are not in the new table: said.
  CHECK_THAT(fmt::format("{}", fmt::join(p.warnings, "\n")),
             Catch::Contains("created anew from the source's rows alone"));
  {  // A full-refresh table: every load has the source's rows alone, nothing to say.
    auto full = s;
    full.cursor_column.clear();
    full.has_watermark = false;
    const auto refreshed = engine::plan_table(src, live, engine::target_state::present, *d, orders, full);
    for (const auto& w : refreshed.warnings)
      CHECK_THAT(w, !Catch::Contains("created anew from the source's rows alone"));
  }
  // The same key: merged as before.
  auto same = engine::plan_table(src, src, engine::target_state::present, *d, orders, s);
  CHECK(same.shape_action == "none");
  CHECK(same.load == engine::load_kind::merge);
  // The source dropped its key: the live key would refuse the rows appended again.
  auto keyless = S({{"id", T("int")}, {"line", T("int")}, {"updated_at", T("timestamp_ntz")}});
  auto dropped = engine::plan_table(keyless, live, engine::target_state::present, *d, orders, s);
  CHECK(dropped.shape_action == "recreate");
  REQUIRE(dropped.drift.steps.size() == 1);
  CHECK(dropped.drift.steps[0].reason == "the table's key changed (id) -> (none)");
  // type_change_rebuild = deny stops it, as any recreate.
  s.type_change_rebuild = engine::rebuild_rule::deny;
  auto denied = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  REQUIRE(denied.error);
  CHECK(denied.error->code == "FLT-S007");
  // Its way out is the key as it was, not a column's type.
  CHECK_THAT(denied.error->reason, Catch::Contains("restore the table's previous key") &&
                                       !Catch::Contains("column's type"));
}

TEST_CASE("a declared column whose new source type cannot be read as declared counts as drift") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings s;
  s.declared = {{"method", T("int")}};
  auto live = S({{"id", T("int")}, {"method", T("int")}});
  auto src = S({{"id", T("int")}, {"method", T("text")}});
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S002");
  CHECK(p.drift.drifted());
  auto same = engine::plan_table(live, live, engine::target_state::present, *d, orders, s);
  CHECK_FALSE(same.drift.drifted());
}

TEST_CASE("a refused incremental table still says it merges") {
  auto d = *dialects::make_dialect("sqlite");
  engine::table_settings s;
  s.cursor_column = "updated_at";
  s.unique_key = {"id"};
  s.has_watermark = true;
  s.type_change_rebuild = engine::rebuild_rule::deny;
  auto live = S({{"id", T("int")}, {"n", T("bigint")}, {"updated_at", T("text")}});
  auto src = S({{"id", T("int")}, {"n", T("int")}, {"updated_at", T("text")}});
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S007");
  CHECK(p.load == engine::load_kind::merge);
}

TEST_CASE("an incremental table's NOT NULL column the source dropped or made nullable takes NULL") {
  engine::table_settings s;
  s.cursor_column = "ts";
  s.unique_key = {"id"};
  s.has_watermark = true;
  const auto live = S({{"id", T("int"), false, true},
                       {"req", T("text"), false},
                       {"opt", T("text"), false},
                       {"keep", T("text"), false},
                       {"ts", T("text")}});
  const auto src = S({{"id", T("int"), false, true},
                      {"opt", T("text"), true},
                      {"keep", T("text"), false},
                      {"ts", T("text")}});
  for (const char* name : {"duckdb", "postgres"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
    CHECK(p.shape_action == "evolve");
    CHECK(p.load == engine::load_kind::merge);
    CHECK(p.ddl == std::vector<std::string>{d->drop_not_null(orders, "req"),
                                            d->drop_not_null(orders, "opt")});
    REQUIRE(p.drift.steps.size() == 2);
    CHECK(p.drift.steps[0].action == schema::evolution_action::drop_not_null);
    CHECK_THAT(p.drift.steps[0].reason, Catch::Contains("'req' is no longer loaded"));
    CHECK_THAT(p.drift.steps[1].reason, Catch::Contains("'opt' became nullable"));
  }
  // SQLite has no ALTER COLUMN: the table is rebuilt with its rows, the two columns nullable.
  auto d = *dialects::make_dialect("sqlite");
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  CHECK(p.shape_action == "rebuild");
  CHECK(p.load == engine::load_kind::merge);
  auto next = live;
  next.columns[1].nullable = next.columns[2].nullable = true;
  CHECK(p.ddl == d->rebuild_and_swap(orders, live, next));

  // A full refresh creates the columns anew: nothing to drop.
  engine::table_settings full;
  auto f = engine::plan_table(src, live, engine::target_state::present, *d, orders, full);
  CHECK(f.ddl.empty());
  CHECK(f.drift.steps.empty());
}

TEST_CASE("an incremental table without unique_key merges by the source's primary key") {
  auto d = *dialects::make_dialect("sqlite");
  engine::table_settings s;
  s.cursor_column = "updated_at";
  s.has_watermark = true;
  const auto keyed = S({{"id", T("int"), false, true}, {"updated_at", T("text")}});
  auto p = engine::plan_table(keyed, keyed, engine::target_state::present, *d, orders, s);
  CHECK(p.load == engine::load_kind::merge);
  CHECK(p.unique_key == std::vector<std::string>{"id"});

  // A keyless source appends; a unique_key set is the key, whatever the source's.
  const auto keyless = S({{"id", T("int")}, {"updated_at", T("text")}});
  p = engine::plan_table(keyless, keyless, engine::target_state::present, *d, orders, s);
  CHECK(p.load == engine::load_kind::incremental);
  CHECK(p.unique_key.empty());
  s.unique_key = {"updated_at"};
  p = engine::plan_table(keyed, keyed, engine::target_state::present, *d, orders, s);
  CHECK(p.unique_key == std::vector<std::string>{"updated_at"});

  // A full refresh has no merge key.
  p = engine::plan_table(keyed, keyed, engine::target_state::present, *d, orders, {});
  CHECK(p.load == engine::load_kind::full_refresh);
  CHECK(p.unique_key.empty());
}

TEST_CASE("an unsafe change recreates the table and resets the watermark, without a drop before the load") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings s;
  s.cursor_column = "id";
  s.has_watermark = true;
  auto p = engine::plan_table(S({{"id", T("int")}, {"status", T("int")}}),
                              S({{"id", T("int")}, {"status", T("text")}}),
                              engine::target_state::present, *d, orders, s);
  CHECK(p.shape_action == "recreate");
  CHECK(p.reset_watermark);
  CHECK(p.load == engine::load_kind::full_refresh);
  for (const auto& sql : p.ddl)
    CHECK_THAT(sql, !Catch::Contains("DROP TABLE"));
  bool swap_drops = false;
  for (const auto& sql : p.swap_sql)
    swap_drops |= sql.find("DROP TABLE IF EXISTS") != std::string::npos;
  CHECK(swap_drops);
  REQUIRE(p.drift.steps.size() == 1);
  CHECK(p.drift.steps[0].reason == "column 'status' changed VARCHAR -> INTEGER");
}

TEST_CASE("a widening of a DuckDB key column rebuilds the table instead of altering it") {
  auto d = *dialects::make_dialect("duckdb");
  auto p = engine::plan_table(S({{"id", T("bigint"), false, true}}),
                              S({{"id", T("int"), false, true}}), engine::target_state::present, *d,
                              orders, {});
  CHECK(p.shape_action == "rebuild");
  REQUIRE(p.drift.steps.size() == 1);
  CHECK(p.drift.steps[0].action == schema::evolution_action::rebuild);
  CHECK_FALSE(p.ddl.empty());
}

TEST_CASE("a safe widening alters in place on PostgreSQL") {
  auto d = *dialects::make_dialect("pg");
  auto p = engine::plan_table(S({{"amount", T("decimal(14,2)")}}), S({{"amount", T("decimal(10,2)")}}),
                              engine::target_state::present, *d, orders, {});
  CHECK(p.shape_action == "evolve");
  REQUIRE(p.drift.steps.size() == 1);
  CHECK(p.drift.steps[0].action == schema::evolution_action::alter_column_types);
  CHECK(p.drift.steps[0].reason == "column 'amount' changed NUMERIC(10,2) -> NUMERIC(14,2)");
}

TEST_CASE("an inferred column that outgrew its type fails FLT-S005, counted as drift, naming the fix") {
  auto d = *dialects::make_dialect("sqlite");
  engine::table_settings s;
  s.inferred = true;
  const auto live = S({{"id", T("bigint")}, {"amount", T("bigint")}});
  auto p = engine::plan_table(S({{"id", T("bigint")}, {"amount", T("text")}}), live,
                              engine::target_state::present, *d, orders, s);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S005");
  CHECK_THAT(p.error->reason, Catch::Contains("pin it with columns = { amount = \"text\" }"));
  CHECK(p.error->column == "amount");
  CHECK(p.error->expected == "bigint");
  CHECK(p.error->actual == "text");
  CHECK(p.drift.drifted());  // run JSON: tables_drifted counts it
  // Where to write it, when the run knows the table's section.
  s.section = "[sources.drops.tables.\"orders\"]";
  auto placed = engine::plan_table(S({{"id", T("bigint")}, {"amount", T("text")}}), live,
                                   engine::target_state::present, *d, orders, s);
  REQUIRE(placed.error.has_value());
  CHECK_THAT(placed.error->reason,
             Catch::Contains("pin it with columns = { amount = \"text\" } in "
                             "[sources.drops.tables.\"orders\"]"));
  s.section.clear();
  // Values that now need json: the fix named is text, which a bigint column becomes (json
  // is no widening of it).
  auto to_json = engine::plan_table(S({{"id", T("bigint")}, {"amount", T("json")}}), live,
                                    engine::target_state::present, *d, orders, s);
  REQUIRE(to_json.error.has_value());
  CHECK(to_json.error->code == "FLT-S005");
  CHECK_THAT(to_json.error->reason,
             Catch::Contains("pin it with columns = { amount = \"text\" } (each value kept as its "
                             "JSON text)"));

  // Values that now need a type the live column does not widen to (a timestamp column
  // whose values are now numbers): that pin would narrow it (FLT-S004); text is the fix.
  auto narrower = engine::plan_table(S({{"id", T("bigint")}, {"at", T("bigint")}}),
                                     S({{"id", T("bigint")}, {"at", T("timestamp_tz")}}),
                                     engine::target_state::present, *d, orders, s);
  REQUIRE(narrower.error.has_value());
  CHECK(narrower.error->code == "FLT-S005");
  CHECK_THAT(narrower.error->reason,
             Catch::Contains("pin it with columns = { at = \"text\" }") &&
                 Catch::Contains("bigint would narrow the live timestamp_tz column") &&
                 !Catch::Contains("at = \"bigint\""));

  // On auto_widen's path the fix names auto_widen too.
  p = engine::plan_table(S({{"id", T("bigint")}, {"amount", T("decimal(20,0)")}}),
                         S({{"id", T("bigint")}, {"amount", T("bool")}}),
                         engine::target_state::present, *d, orders, s);
  REQUIRE(p.error.has_value());
  CHECK_THAT(p.error->reason, Catch::Contains("set auto_widen = true"));
}

TEST_CASE("an inferred column the live column still holds loads in the live type, no drift") {
  engine::table_settings s;
  s.inferred = true;
  for (const char* name : {"duckdb", "postgres", "sqlite"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    // A header-only file made the column text; now its values all look like numbers.
    // A double column whose values are now whole numbers keeps its type too.
    const auto live = S({{"id", T("bigint")}, {"code", T("text")}, {"price", T("double")}});
    auto p = engine::plan_table(
        S({{"id", T("bigint")}, {"code", T("bigint")}, {"price", T("bigint")}}), live,
        engine::target_state::present, *d, orders, s);
    CHECK_FALSE(p.error.has_value());
    CHECK_FALSE(p.drift.drifted());
    CHECK(p.drift.steps.empty());
    CHECK(p.load_columns.find("code", schema::name_rule::case_insensitive)->type == T("text"));
    CHECK(p.load_columns.find("price", schema::name_rule::case_insensitive)->type ==
          T("double"));
    // Read as the live text too: the file's values as written, not their bigint form.
    CHECK(p.read_columns.find("code", schema::name_rule::case_insensitive)->type == T("text"));
    CHECK(p.read_columns.find("price", schema::name_rule::case_insensitive)->type ==
          T("bigint"));
  }
}

TEST_CASE("a header-only file (no rows) keeps the live types: its text columns are no change") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings s;
  s.inferred = true;
  s.no_rows = true;
  const auto live = S({{"id", T("bigint")}, {"amount", T("decimal(12,2)")}});
  auto p = engine::plan_table(S({{"id", T("text")}, {"amount", T("text")}}), live,
                              engine::target_state::present, *d, orders, s);
  CHECK_FALSE(p.error.has_value());
  CHECK_FALSE(p.drift.drifted());
  CHECK(p.load_columns.find("amount", schema::name_rule::case_insensitive)->type ==
        T("decimal(12,2)"));
  // With rows, the same text columns outgrew the live ones.
  s.no_rows = false;
  p = engine::plan_table(S({{"id", T("text")}, {"amount", T("text")}}), live,
                         engine::target_state::present, *d, orders, s);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S005");
}

TEST_CASE("a change the governance gate holds carries the statements it would run") {
  auto d = *dialects::make_dialect("postgres");
  const auto live = S({{"id", T("int")}, {"amount", T("int")}});
  engine::table_settings st;
  st.governance_gate = true;
  // Not granted: the new column is held, with its ADD COLUMN proposed.
  auto added = S({{"id", T("int")}, {"amount", T("int")}, {"note", T("text")}});
  auto p = engine::plan_table(added, live, engine::target_state::present, *d, orders, st);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S008");
  CHECK(p.error->proposed_ddl == d->add_column(orders, {"note", T("text")}));
  CHECK(p.ddl.empty());
  // A widening, granted additive changes or not: its ALTER is proposed.
  st.additive_granted = true;
  auto wider = S({{"id", T("int")}, {"amount", T("bigint")}});
  p = engine::plan_table(wider, live, engine::target_state::present, *d, orders, st);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S008");
  CHECK(p.error->column == "amount");
  CHECK_THAT(p.error->proposed_ddl, Catch::Contains("ALTER TABLE") && Catch::Contains("BIGINT"));
  // Two held changes, neither granted: both named, the first one's column proposed.
  st.additive_granted = false;
  auto both = S({{"id", T("int")}, {"amount", T("bigint")}, {"note", T("text")}});
  p = engine::plan_table(both, live, engine::target_state::present, *d, orders, st);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S008");
  CHECK_THAT(p.error->reason, Catch::Contains("'amount'") && Catch::Contains("; also ") &&
                                  Catch::Contains("'note'") && Catch::Contains("apply them"));
  // What to apply by hand is said: every held change's statement.
  CHECK_THAT(p.error->reason,
             Catch::Contains("(the statements Flotilla would run: ALTER TABLE") &&
                 Catch::Contains(d->add_column(orders, {"note", T("text")})));
}

TEST_CASE("a held change that copies the table anew offers no statements to apply by hand") {
  // A text column retyped to int: a drop and recreate on every target. Its DDL
  // alone would leave the table empty; an incremental table would then load only the
  // rows past its watermark.
  for (const char* name : {"duckdb", "postgres", "sqlite"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    const auto live = S({{"id", T("int")}, {"v", T("text")}, {"ts", T("timestamp_ntz")}});
    const auto source = S({{"id", T("int")}, {"v", T("int")}, {"ts", T("timestamp_ntz")}});
    engine::table_settings st;
    st.governance_gate = true;
    st.additive_granted = true;
    st.cursor_column = "ts";
    st.has_watermark = true;
    auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
    REQUIRE(p.error);
    CHECK(p.error->code == "FLT-S008");
    CHECK_THAT(p.error->reason,
               Catch::Contains("copies the table anew, which only a run does") &&
                   Catch::Contains("auto_apply_additive_drift = false") &&
                   !Catch::Contains("statements Flotilla would run") &&
                   !Catch::Contains("apply it by hand") && !Catch::Contains(";;"));
    // Nor does the review_required event carry them as the proposal.
    CHECK(p.error->proposed_ddl.empty());
  }
}

TEST_CASE("a held change a rebuild makes offers its statements, which keep the rows") {
  // SQLite widens a column by rebuilding the table within the target: its statements copy
  // the rows, so they are what to apply by hand, once, with one separator between them.
  auto d = *dialects::make_dialect("sqlite");
  const auto live = S({{"id", T("int")}, {"v", T("int")}});
  const auto source = S({{"id", T("int")}, {"v", T("bigint")}});
  engine::table_settings st;
  st.governance_gate = true;
  st.additive_granted = true;
  auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S008");
  INFO(p.error->reason);
  CHECK_THAT(p.error->reason, Catch::Contains("statements Flotilla would run") &&
                                  Catch::Contains("INSERT INTO") &&
                                  !Catch::Contains("only a run does") && !Catch::Contains(";;"));
  CHECK_THAT(p.error->proposed_ddl, Catch::Contains("INSERT INTO"));
}

TEST_CASE("the governance gate's review is of the change that copies the table anew") {
  // A widening in place first, an unsafe retype after: the review names the retype, whose
  // copy decides what happens to the rows.
  auto d = *dialects::make_dialect("postgres");
  const auto live = S({{"id", T("int")}, {"a", T("int")}, {"v", T("text")}});
  const auto source = S({{"id", T("int")}, {"a", T("bigint")}, {"v", T("int")}});
  engine::table_settings st;
  st.governance_gate = true;
  st.additive_granted = true;
  auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S008");
  CHECK(p.error->column == "v");
  CHECK(p.error->proposed_ddl.empty());
  CHECK_THAT(p.error->reason, Catch::Contains("'a'") && Catch::Contains("'v'"));
}

TEST_CASE("a refused table's reason says what to do") {
  auto d = *dialects::make_dialect("duckdb");
  const auto live = S({{"id", T("int")}, {"total", T("decimal(12,2)")}});
  const auto source = S({{"id", T("int")}, {"total", T("decimal(12,2)")}});
  const auto refused = [&](const engine::table_settings& st, const schema::table_schema& src) {
    auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, st);
    REQUIRE(p.error.has_value());
    return *p.error;
  };
  engine::table_settings st;
  st.declared = {{"coupon", T("text")}};
  auto e = refused(st, source);
  CHECK(e.code == "FLT-S001");
  CHECK_THAT(e.reason, Catch::Contains("remove it from the table's columns in flotilla.toml"));
  st.declared = {{"total", T("int")}};
  e = refused(st, source);
  CHECK(e.code == "FLT-S002");
  CHECK_THAT(e.reason, Catch::StartsWith("total has type decimal(12,2), which cannot be read as "
                                         "int") &&
                           Catch::Contains("columns = { total = \"decimal(12,2)\" }"));
  st.declared = {};
  st.on_schema_change = engine::new_column_rule::fail;
  e = refused(st, S({{"id", T("int")}, {"total", T("decimal(12,2)")}, {"note", T("text")}}));
  CHECK(e.code == "FLT-S003");
  CHECK_THAT(e.reason, Catch::Contains("on_schema_change = \"append_new_columns\""));
}

TEST_CASE("a refused table lists every problem, the first one's code and column first") {
  auto d = *dialects::make_dialect("duckdb");
  const auto live = S({{"id", T("int")}, {"total", T("decimal(12,2)")}});
  engine::table_settings st;
  st.enforced = true;
  st.declared = {{"id", T("int")}, {"total", T("int")}, {"coupon", T("text")}};
  auto p = engine::plan_table(S({{"id", T("int")}, {"total", T("decimal(12,2)")}}), live,
                              engine::target_state::present, *d, orders, st);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S002");
  CHECK(p.error->column == "total");
  CHECK_THAT(p.error->reason, Catch::StartsWith("total has type decimal(12,2)") &&
                                  Catch::Contains("; also [FLT-S001]: coupon is declared but "
                                                  "the source has no such column"));
}

TEST_CASE("contract none follows a decimal the live table widened by hand in scale too") {
  // Seed 000: later runs follow the live table, changes made by hand included. The live
  // numeric(16,4) holds every numeric(14,2) value; seed 001 (no contract) recreates it.
  auto d = *dialects::make_dialect("postgres");
  const auto src = S({{"id", T("int")}, {"total", T("decimal(14,2)")}});
  const auto live = S({{"id", T("int")}, {"total", T("decimal(16,4)")}});
  engine::table_settings s;
  s.contract_from = "source";
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  CHECK_FALSE(p.error);
  CHECK(p.shape_action == "none");
  CHECK(p.drift.steps.empty());
  // A live decimal that cannot hold the source's values (fewer integer digits) is no
  // change made to follow.
  const auto narrower = S({{"id", T("int")}, {"total", T("decimal(14,4)")}});
  auto n = engine::plan_table(src, narrower, engine::target_state::present, *d, orders, s);
  REQUIRE_FALSE(n.drift.steps.empty());
  // Without a contract: seed 001's allowlist keeps the scale, so the table is recreated.
  auto rocky = engine::plan_table(src, live, engine::target_state::present, *d, orders, {});
  REQUIRE_FALSE(rocky.drift.steps.empty());
  CHECK(rocky.drift.steps[0].action == schema::evolution_action::drop_and_recreate);
}

TEST_CASE("an enforced contract over a table that declares no columns fails the plan") {
  // The plan said `load`; the run failed at the target with advice to fix the target.
  auto d = *dialects::make_dialect("postgres");
  engine::table_settings s;
  s.enforced = true;
  s.contract_from = "source";
  auto p = engine::plan_table(S({{"id", T("int")}, {"sku", T("text")}}), std::nullopt,
                              engine::target_state::absent, *d, orders, s);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S014");
  CHECK_THAT(p.error->reason, Catch::Contains("declares no columns") &&
                                  Catch::Contains("contract generate --write"));
}

TEST_CASE("a column name holding a NUL byte fails the plan, named, on every dialect") {
  // It reached the target's quoting, reported as a target failure to correct there.
  const auto columns = S({{"id", T("int")}, {std::string("na\0me", 5), T("text")}});
  for (const char* name : {"duckdb", "sqlite", "postgres"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    auto p = engine::plan_table(columns, std::nullopt, engine::target_state::absent, *d, orders,
                                {});
    REQUIRE(p.error);
    CHECK(p.error->code == "FLT-S011");
    CHECK_THAT(p.error->reason, Catch::Contains("column 'na\\0me' holds a NUL byte") &&
                                    Catch::Contains("rename it at the source"));
  }
}

TEST_CASE("a column name that is not UTF-8 fails the plan before any DDL, its bytes shown") {
  // DuckDB took the name into its catalog, and could not read the catalog back after.
  const auto columns = S({{"id", T("int")}, {"bad\xFFname\x02", T("text")}});
  for (const char* name : {"duckdb", "sqlite", "postgres"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    auto p = engine::plan_table(columns, std::nullopt, engine::target_state::absent, *d, orders,
                                {});
    REQUIRE(p.error);
    CHECK(p.error->code == "FLT-S011");
    CHECK_THAT(p.error->reason, Catch::Contains("column 'bad\\xFFname\\x02' is not valid UTF-8") &&
                                    Catch::Contains("rename it at the source"));
    CHECK(p.ddl.empty());
  }
}

TEST_CASE("names a target would take for one column, and key settings naming no loaded column, "
          "fail the plan") {
  const auto columns = S({{"id", T("int")}, {"Mixed", T("text")}, {"mixed", T("text")}});
  for (const char* name : {"duckdb", "sqlite", "postgres"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    auto p = engine::plan_table(columns, std::nullopt, engine::target_state::absent, *d, orders,
                                {});
    if (std::string(name) == "postgres") {  // quoted names keep their case there
      CHECK_FALSE(p.error);
      continue;
    }
    REQUIRE(p.error);
    CHECK(p.error->code == "FLT-S009");
    CHECK_THAT(p.error->reason, Catch::Contains("columns 'Mixed' and 'mixed' are one column"));
  }
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings s;
  s.cursor_column = "updaetd_at";
  s.unique_key = {"ID"};  // names match as the source's do: case aside
  auto p = engine::plan_table(S({{"id", T("int")}, {"updated_at", T("timestamp_ntz")}}),
                              std::nullopt, engine::target_state::absent, *d, orders, s);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S010");
  CHECK(p.error->column == "updaetd_at");
  CHECK_THAT(p.error->reason, Catch::Contains("(id, updated_at)") && !Catch::Contains("also"));
  // A column an enforced contract leaves out is not loaded either.
  s.cursor_column = "updated_at";
  s.enforced = true;
  s.declared = {schema::column{"id", T("int")}};
  p = engine::plan_table(S({{"id", T("int")}, {"updated_at", T("timestamp_ntz")}}), std::nullopt,
                         engine::target_state::absent, *d, orders, s);
  REQUIRE(p.error);
  CHECK_THAT(p.error->reason, Catch::StartsWith("cursor_column 'updated_at' is not among"));
}

TEST_CASE("a declaration means the source column spelled as it, not its twin by case") {
  // The source has "Id" and "id" (PostgreSQL keeps both); an enforced contract declares
  // "id" and "upd" to load one of each pair, as FLT-S009 advises.
  const auto source =
      S({{"Id", T("int")}, {"id", T("int")}, {"Upd", T("int")}, {"upd", T("int")}});
  for (const char* name : {"duckdb", "sqlite", "postgres"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    engine::table_settings s;
    s.enforced = true;
    s.declared = {schema::column{"id", T("int")}, schema::column{"upd", T("int")}};
    s.cursor_column = "upd";
    s.unique_key = {"id"};
    auto p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, s);
    REQUIRE_FALSE(p.error);
    REQUIRE(p.load_columns.columns.size() == 2);
    CHECK(p.load_columns.columns[0].name == "id");
    CHECK(p.load_columns.columns[1].name == "upd");
    REQUIRE(p.read_columns.columns.size() == 2);
    CHECK(p.read_columns.columns[0].name == "id");
    CHECK(p.read_columns.columns[1].name == "upd");
    // The twins left out are said to be.
    std::string warnings;
    for (const auto& w : p.warnings)
      warnings += w + "\n";
    CHECK_THAT(warnings, Catch::Contains("column 'Id' (int) is in the source but not declared") &&
                             Catch::Contains("column 'Upd' (int) is in the source but not declared"));
    // Spelled as neither twin: which one is meant is a guess, refused where case is ignored.
    s.declared = {schema::column{"ID", T("int")}, schema::column{"upd", T("int")}};
    s.unique_key = {};
    p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, s);
    REQUIRE(p.error);
    CHECK(p.error->code == "FLT-S001");
    CHECK(p.error->column == "ID");
    // Both named, on PostgreSQL too (where each is a column of its own).
    CHECK_THAT(p.error->reason, Catch::Contains("'Id', 'id'"));
    if (std::string(name) != "postgres")
      CHECK_THAT(p.error->reason, Catch::Contains("differ only by case"));
    else
      CHECK_THAT(p.error->reason, Catch::Contains("postgres keeps the case of names"));
  }
  // Without a contract, a pin spelled as one twin types that one, not the other.
  auto d = *dialects::make_dialect("sqlite");
  engine::table_settings s;
  s.declared = {schema::column{"Id", T("bigint")}};
  auto p = engine::plan_table(S({{"Id", T("int")}, {"ID", T("text")}}), std::nullopt,
                              engine::target_state::absent, *d, orders, s);
  REQUIRE(p.error);
  // The two are still one column on SQLite; not refused as "ID has type text, which
  // cannot be read as bigint" (FLT-S002), a pin meant for the other.
  CHECK(p.error->code == "FLT-S009");
  CHECK_THAT(p.error->reason, !Catch::Contains("also"));
}

TEST_CASE("a declaration respelled to load the other twin by case copies the table anew") {
  // The live table was loaded with "Id" declared; the declaration now says "id", another
  // source column whose values would otherwise land in the live "Id" beside the old ones.
  const auto source = S({{"Id", T("int")}, {"id", T("int")}, {"name", T("text")}});
  const auto live = S({{"Id", T("int")}, {"name", T("text")}});
  for (const char* name : {"duckdb", "sqlite"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    engine::table_settings s;
    s.enforced = true;
    s.declared = {schema::column{"id", T("int")}, schema::column{"name", T("text")}};
    s.type_change_rebuild = engine::rebuild_rule::allow;
    auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, s);
    REQUIRE_FALSE(p.error);
    CHECK(p.load == engine::load_kind::full_refresh);
    bool recreated = false;
    for (const auto& st : p.drift.steps)
      if (st.action == schema::evolution_action::drop_and_recreate) {
        recreated = true;
        CHECK_THAT(st.reason, Catch::Contains("now loads the source's column 'id'"));
      }
    CHECK(recreated);
    // Spelled as the live column's own source column: nothing to do.
    s.declared = {schema::column{"Id", T("int")}, schema::column{"name", T("text")}};
    p = engine::plan_table(source, live, engine::target_state::present, *d, orders, s);
    REQUIRE_FALSE(p.error);
    CHECK(p.drift.steps.empty());
  }
}

TEST_CASE("a source column without a name fails the plan, named by its position") {
  auto d = *dialects::make_dialect("duckdb");
  const auto source = S({{"id", T("int")}, {"", T("text")}});
  auto p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, {});
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S011");
  CHECK_THAT(p.error->reason, Catch::Contains("column 2 (counted from 1)") &&
                                  Catch::Contains("rename it at the source"));
  // Left out by an enforced contract: nothing to refuse.
  engine::table_settings s;
  s.enforced = true;
  s.declared = {schema::column{"id", T("int")}};
  p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, s);
  CHECK_FALSE(p.error);
}

TEST_CASE("a declared column new in the source is added whatever on_schema_change says") {
  auto d = *dialects::make_dialect("duckdb");
  const auto live = S({{"id", T("int")}, {"v", T("text")}});
  const auto source = S({{"id", T("int")}, {"v", T("text")}, {"c", T("text")}, {"e", T("int")}});
  for (auto rule : {engine::new_column_rule::ignore, engine::new_column_rule::fail}) {
    engine::table_settings st;
    st.on_schema_change = rule;
    st.declared = {{"c", T("text")}};
    auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
    if (rule == engine::new_column_rule::fail) {
      // The undeclared new column still stops the table, and only it.
      REQUIRE(p.error.has_value());
      CHECK(p.error->code == "FLT-S003");
      CHECK(p.error->column == "e");
      continue;
    }
    REQUIRE_FALSE(p.error.has_value());
    REQUIRE(p.load_columns.find("c", schema::name_rule::case_insensitive) != nullptr);
    CHECK(p.load_columns.find("e", schema::name_rule::case_insensitive) == nullptr);
    const auto& add = p.drift.columns_to_add;
    REQUIRE(add.size() == 1);
    CHECK(add[0].name == "c");
    REQUIRE_FALSE(p.drift.steps.empty());
    CHECK(p.drift.steps[0].decided_by == "the table's columns declare it");
  }
}

TEST_CASE("a cursor_column or unique_key matching two columns that differ only by case fails") {
  auto d = *dialects::make_dialect("postgres");
  const auto source = S({{"id", T("int"), true}, {"Seq", T("int")}, {"seq", T("int")},
                         {"Kx", T("int")}, {"kx", T("int")}});
  engine::table_settings st;
  st.cursor_column = "SEQ";
  auto p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, st);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S010");
  CHECK_THAT(p.error->reason, Catch::Contains("cursor_column 'SEQ' matches 2 loaded columns "
                                              "('Seq', 'seq')") &&
                                  Catch::Contains("spell it exactly"));
  // Spelled exactly, it is that column, though another differs from it only by case.
  st.cursor_column = "seq";
  p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, st);
  INFO((p.error ? p.error->reason : ""));
  CHECK_FALSE(p.error.has_value());
  st.unique_key = {"KX"};
  p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, st);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S010");
  CHECK_THAT(p.error->reason, Catch::Contains("unique_key column 'KX' matches 2"));
  // One column in another case is that column.
  const auto one = S({{"id", T("int"), true}, {"seq", T("int")}});
  st = {};
  st.cursor_column = "SEQ";
  p = engine::plan_table(one, std::nullopt, engine::target_state::absent, *d, orders, st);
  CHECK_FALSE(p.error.has_value());
  CHECK(one.resolve("SEQ") == &one.columns[1]);
  CHECK(source.resolve("SEQ") == nullptr);
  CHECK(source.resolve("seq") == &source.columns[2]);
}

TEST_CASE("a declared type the source cannot be read as suggests the live column's when it is wider") {
  auto d = *dialects::make_dialect("duckdb");
  const auto live = S({{"id", T("int")}, {"total", T("decimal(18,2)")}});
  const auto source = S({{"id", T("int")}, {"total", T("decimal(12,2)")}});
  engine::table_settings st;
  st.declared = {{"total", T("int")}};
  auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S002");
  CHECK_THAT(p.error->reason, Catch::Contains("the live column's type, which is never narrowed "
                                              "(columns = { total = \"decimal(18,2)\" })"));
  // Following it plans: nothing to change.
  st.declared = {{"total", T("decimal(18,2)")}};
  p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
  INFO((p.error ? p.error->reason : ""));
  CHECK_FALSE(p.error.has_value());
}

TEST_CASE("a float or decimal declared text is read as the source's own text") {
  auto d = *dialects::make_dialect("sqlite");
  const auto source = S({{"id", T("int")}, {"r", T("float")}, {"x", T("double")},
                         {"n", T("decimal(12,2)")}, {"i", T("int")}});
  engine::table_settings st;
  st.declared = {{"r", T("text")}, {"x", T("text")}, {"n", T("text")}, {"i", T("text")}};
  auto p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, st);
  REQUIRE_FALSE(p.error.has_value());
  const auto kind = [&](const char* c) {
    return p.read_columns.find(c, schema::name_rule::case_insensitive)->type.kind;
  };
  CHECK(kind("r") == schema::type_kind::text);
  CHECK(kind("x") == schema::type_kind::text);
  CHECK(kind("n") == schema::type_kind::text);
  CHECK(kind("i") == schema::type_kind::int32);  // an integer's text is the same either way
}

TEST_CASE("a declared key column its source type cannot be read as is refused as that, "
          "not as left out") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings st;
  st.enforced = true;
  st.declared = {schema::column{"id", T("int")}, schema::column{"name", T("text")}};
  const auto source = S({{"id", T("bigint"), false, true}, {"name", T("text")}});
  auto p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, st);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S002");
  CHECK_THAT(p.error->reason, !Catch::Contains("FLT-S010") && !Catch::Contains("not declared"));
  // Left out for real (not declared), the key column is still FLT-S010.
  st.declared = {schema::column{"name", T("text")}};
  p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, st);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S010");
}

TEST_CASE("a unique_key or cursor_column declared with a type the source cannot be read as is "
          "FLT-S002 alone") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings st;
  st.enforced = true;
  st.declared = {schema::column{"code", T("int")}, schema::column{"amount", T("int")},
                 schema::column{"updated_at", T("int")}};
  const auto source = S({{"code", T("text"), false, true}, {"amount", T("int")},
                         {"updated_at", T("text")}});
  for (int which = 0; which < 2; ++which) {
    INFO(which);
    st.unique_key.clear();
    st.cursor_column.clear();
    if (which == 0)
      st.unique_key = {"code"};
    else
      st.cursor_column = "updated_at";
    auto p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, st);
    REQUIRE(p.error.has_value());
    CHECK(p.error->code == "FLT-S002");
    CHECK_THAT(p.error->reason, !Catch::Contains("FLT-S010") && !Catch::Contains("not among"));
  }
}

TEST_CASE("a key change beside a retype that recreates the table is one action, the key change "
          "in its also") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings st;
  st.cursor_column = "ts";
  st.has_watermark = true;
  const auto live = S({{"id", T("bigint"), false, true}, {"v", T("text"), false}, {"ts", T("int")}});
  const auto source =
      S({{"id", T("int"), false, true}, {"v", T("text"), false, true}, {"ts", T("int")}});
  auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
  INFO((p.error ? p.error->reason : ""));
  REQUIRE_FALSE(p.error.has_value());
  REQUIRE(p.drift.steps.size() == 1);
  CHECK(p.drift.steps[0].action == schema::evolution_action::drop_and_recreate);
  bool key_in_also = false;
  for (const auto& a : p.drift.steps[0].also)
    key_in_also = key_in_also || a.starts_with("the table's key changed (id) -> (id, v)");
  CHECK(key_in_also);
}

TEST_CASE("a file column pinned narrower than its live column is told the pin its values need") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings st;
  st.inferred = true;
  st.declared = {schema::column{"amt", T("decimal(10,2)")}};
  const auto live = S({{"id", T("bigint")}, {"amt", T("bigint")}});
  const auto source = S({{"id", T("bigint")}, {"amt", T("decimal(21,2)")}});
  auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
  REQUIRE(p.error.has_value());
  CHECK(p.error->code == "FLT-S004");
  CHECK_THAT(p.error->reason, Catch::Contains("columns = { amt = \"decimal(21,2)\" }") &&
                                  Catch::Contains("the file's values need decimal(21,2)"));
}

TEST_CASE("FLT-S007 for a change a declared type makes says to restore the declaration") {
  auto d = *dialects::make_dialect("duckdb");
  engine::table_settings s;
  s.type_change_rebuild = engine::rebuild_rule::deny;
  s.declared = {{"c", T("decimal(16,4)")}};
  auto live = S({{"id", T("int")}, {"c", T("decimal(12,2)")}});
  auto src = S({{"id", T("int")}, {"c", T("decimal(10,2)")}});
  auto p = engine::plan_table(src, live, engine::target_state::present, *d, orders, s);
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S007");
  CHECK_THAT(p.error->reason, Catch::Contains("restore the type flotilla.toml declares for "
                                              "column 'c'") &&
                                  !Catch::Contains("at the source"));
  // Not declared: the source's type is the one to restore.
  s.declared.clear();
  auto widened = S({{"id", T("int")}, {"c", T("decimal(16,4)")}});
  auto q = engine::plan_table(widened, live, engine::target_state::present, *d, orders, s);
  REQUIRE(q.error);
  CHECK(q.error->code == "FLT-S007");
  CHECK_THAT(q.error->reason, Catch::Contains("restore the column's type at the source"));
}

TEST_CASE("a column named as a PostgreSQL system column fails the plan, named, on PostgreSQL only") {
  // PostgreSQL refuses CREATE TABLE with a column xmin, ctid ...: said by plan, with the
  // fix on the source's side, not by the target's error at the first run.
  const auto columns = S({{"id", T("int")}, {"xmin", T("int")}, {"XMIN", T("int")}});
  auto pg = *dialects::make_dialect("postgres");
  auto p = engine::plan_table(columns, std::nullopt, engine::target_state::absent, *pg, orders, {});
  REQUIRE(p.error);
  CHECK(p.error->code == "FLT-S013");
  CHECK_THAT(p.error->reason, Catch::Contains("column 'xmin'") && Catch::Contains("system columns"));
  // Quoted, another case is another name; DuckDB and SQLite take xmin as any other.
  auto upper = engine::plan_table(S({{"id", T("int")}, {"XMIN", T("int")}, {"Ctid", T("int")}}),
                                  std::nullopt, engine::target_state::absent, *pg, orders, {});
  CHECK_FALSE(upper.error);
  for (const char* name : {"duckdb", "sqlite"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    CHECK_FALSE(engine::plan_table(S({{"id", T("int")}, {"xmin", T("int")}}), std::nullopt,
                                   engine::target_state::absent, *d, orders, {})
                    .error);
  }
}

TEST_CASE("a text column pinned bytes (the fix for a NUL byte) copies the table anew") {
  for (const char* name : {"postgres", "duckdb", "sqlite"}) {
    INFO(name);
    auto d = *dialects::make_dialect(name);
    engine::table_settings st;
    st.declared = {schema::column{"s", T("bytes")}};
    const auto live = S({{"id", T("int")}, {"s", T("text")}});
    const auto source = S({{"id", T("int")}, {"s", T("bytes")}});
    auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
    CHECK_FALSE(p.error);
    REQUIRE(p.drift.steps.size() == 1);
    CHECK(p.drift.steps[0].action == schema::evolution_action::drop_and_recreate);
  }
}

TEST_CASE("a rebuild that needs confirming names the governance gate's review too, so one plan "
          "shows both") {
  auto d = *dialects::make_dialect("sqlite");
  const auto live = S({{"id", T("int")}, {"v", T("int")}});
  const auto source = S({{"id", T("int")}, {"v", T("decimal(20,0)")}});
  engine::table_settings st;
  st.governance_gate = true;
  st.additive_granted = true;
  st.type_change_rebuild = engine::rebuild_rule::require_confirmation;
  auto p = engine::plan_table(source, live, engine::target_state::present, *d, orders, st);
  REQUIRE(p.error);
  INFO(p.error->reason);
  CHECK(p.error->code == "FLT-S006");
  CHECK_THAT(p.error->reason, Catch::Contains("--allow-type-change-rebuild") &&
                                  Catch::Contains("also [FLT-S008]: require-review"));
}

TEST_CASE("a cursor_column the table lacks lists every column it may name, a pinned one that "
          "failed its own check too") {
  auto d = *dialects::make_dialect("duckdb");
  const auto source = S({{"id", T("int"), true}, {"amount", T("double")}, {"updated_at", T("text")}});
  engine::table_settings st;
  st.cursor_column = "nocol";
  st.declared = {{"amount", T("bigint")}, {"ghost", T("int")}};  // ghost: not at the source
  auto p = engine::plan_table(source, std::nullopt, engine::target_state::absent, *d, orders, st);
  REQUIRE(p.error.has_value());
  INFO(p.error->reason);
  CHECK_THAT(p.error->reason,
             Catch::Contains("cursor_column 'nocol' is not among the table's loaded columns "
                             "(id, amount, updated_at)"));
  // amount's pin failed first (its own error): it is still a column the cursor may name.
  CHECK(p.error->column != "nocol");
}
