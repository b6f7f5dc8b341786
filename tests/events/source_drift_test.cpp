#include <catch2/catch.hpp>

#include "events/schema_accept.hpp"
#include "events/source_drift.hpp"

using namespace flotilla::events;
using flotilla::config::drift_policy;
using flotilla::schema::column;
using flotilla::schema::portable_type;
using flotilla::schema::table_schema;
using flotilla::schema::type_kind;
namespace spb = flotilla::storage::pb;

namespace {

column col(std::string name, portable_type t) { return column{std::move(name), t, true, false}; }

const portable_type bigint = portable_type::of(type_kind::bigint);
const portable_type text = portable_type::of(type_kind::text);

table_schema orders_v1() {
  return table_schema{{col("id", bigint), col("amount", bigint), col("note", text)}};
}

/// amount retyped, note removed, coupon added.
table_schema orders_v2() {
  return table_schema{
      {col("id", bigint), col("amount", portable_type::varchar(20)), col("coupon", text)}};
}

spb::SchemaBaseline baseline_of(const table_schema& s, std::string hints, std::string run) {
  spb::SchemaBaseline b;
  *b.mutable_columns() = to_observed(s);
  b.set_hints_hash(std::move(hints));
  b.set_run_id(std::move(run));
  return b;
}

drift_input input(drift_policy policy, const table_schema& observed,
                  const spb::SchemaBaseline* baseline, std::string hints = "h1") {
  return drift_input{.policy = policy,
                     .has_declared_columns = false,
                     .source = "shop",
                     .table = "orders",
                     .run_id = "run-2",
                     .observed = &observed,
                     .hints_hash = std::move(hints),
                     .baseline = baseline,
                     .now_us = 99};
}

}  // namespace

TEST_CASE("ignore is a true no-op: nothing is described, read, written or said") {
  int describes = 0, reads = 0;
  auto v = check_source_drift(
      drift_input{.policy = drift_policy::ignore, .source = "shop", .table = "orders"},
      [&]() -> std::expected<table_schema, std::string> {
        ++describes;
        return orders_v2();
      },
      [&]() -> std::expected<std::optional<spb::SchemaBaseline>, std::string> {
        ++reads;
        return baseline_of(orders_v1(), "h1", "run-1");
      });
  REQUIRE(v.has_value());
  CHECK(describes == 0);
  CHECK(reads == 0);
  CHECK(v->decision == drift_decision::skip);
  CHECK_FALSE(v->checked());
  CHECK_FALSE(v->new_baseline.has_value());
  CHECK(v->warning.empty());
  CHECK(v->error.empty());
  CHECK(v->observed.empty());
  spb::TableResult r;
  record_observation(r, *v);
  CHECK_FALSE(r.has_observed_schema());
  CHECK(r.observed_schema_size() == 0);
  CHECK_FALSE(drift_gate_applies(drift_policy::ignore, false));
}

TEST_CASE("a dataset with declared columns is skipped by the gate under warn and fail") {
  for (auto policy : {drift_policy::warn, drift_policy::fail}) {
    int calls = 0;
    auto v = check_source_drift(
        drift_input{.policy = policy, .has_declared_columns = true, .source = "s", .table = "t"},
        [&]() -> std::expected<table_schema, std::string> {
          ++calls;
          return orders_v2();
        },
        [&]() -> std::expected<std::optional<spb::SchemaBaseline>, std::string> {
          ++calls;
          return std::nullopt;
        });
    REQUIRE(v.has_value());
    CHECK(calls == 0);
    CHECK(v->decision == drift_decision::skip);
    CHECK_FALSE(drift_gate_applies(policy, true));
    CHECK(drift_gate_applies(policy, false));
  }
}

TEST_CASE("the first warn or fail run seeds the baseline silently") {
  for (auto policy : {drift_policy::warn, drift_policy::fail}) {
    auto observed = orders_v1();
    auto v = evaluate_source_drift(input(policy, observed, nullptr));
    CHECK(v.decision == drift_decision::seed);
    REQUIRE(v.new_baseline.has_value());
    CHECK(v.new_baseline->columns_size() == 3);
    CHECK(v.new_baseline->columns(1).name() == "amount");
    CHECK(v.new_baseline->columns(1).type() == "bigint");
    CHECK(v.new_baseline->hints_hash() == "h1");
    CHECK(v.new_baseline->run_id() == "run-2");
    CHECK(v.new_baseline->recorded_at_us() == 99);
    CHECK(v.changes.empty());
    CHECK(v.warning.empty());
    CHECK(v.error.empty());
    CHECK_FALSE(v.drifted());
  }
}

TEST_CASE("a read shape change reseeds silently, absorbing drift on the same run") {
  auto stored = baseline_of(orders_v1(), "h-old", "run-1");
  auto observed = orders_v2();  // real drift too: the hints mismatch wins
  auto v = evaluate_source_drift(input(drift_policy::fail, observed, &stored, "h-new"));
  CHECK(v.decision == drift_decision::reseed);
  REQUIRE(v.new_baseline.has_value());
  CHECK(v.new_baseline->hints_hash() == "h-new");
  CHECK(compare_columns(v.new_baseline->columns(), to_observed(orders_v2())).empty());
  CHECK(v.changes.empty());
  CHECK(v.error.empty());
  CHECK(v.warning.empty());
}

TEST_CASE("an unchanged schema passes without writing anything") {
  auto stored = baseline_of(orders_v1(), "h1", "run-1");
  auto observed = orders_v1();
  auto v = evaluate_source_drift(input(drift_policy::fail, observed, &stored));
  CHECK(v.decision == drift_decision::unchanged);
  CHECK_FALSE(v.new_baseline.has_value());
  CHECK(v.error.empty());
  spb::TableResult r;
  record_observation(r, v);
  CHECK(r.has_observed_schema());  // recorded all the same: accept has it to compare
  CHECK(r.observed_schema_size() == 3);
  CHECK(r.hints_hash() == "h1");
}

TEST_CASE(
    "warn names every change, prints a warning and keeps the baseline, every run until accepted") {
  auto stored = baseline_of(orders_v1(), "h1", "run-1");
  for (int run = 0; run < 3; ++run) {  // the baseline does not advance: it repeats
    auto observed = orders_v2();
    auto v = evaluate_source_drift(input(drift_policy::warn, observed, &stored));
    REQUIRE(v.decision == drift_decision::warn);
    CHECK_FALSE(v.new_baseline.has_value());
    CHECK(v.error.empty());
    REQUIRE(v.changes.size() == 3);
    CHECK(v.changes[0] == column_change{change_kind::retyped, "amount", "bigint", "varchar(20)"});
    CHECK(v.changes[1] == column_change{change_kind::removed, "note", "text", ""});
    CHECK(v.changes[2] == column_change{change_kind::added, "coupon", "", "text"});
    CHECK(v.warning ==
          "warning: source drift on shop.orders: column 'amount' retyped BIGINT -> VARCHAR(20); "
          "column 'note' removed (was TEXT); column 'coupon' added TEXT (baseline from run "
          "run-1); warn does not hold the table back. The warning repeats every run until the "
          "change is accepted: flotilla schema accept shop.orders");
    CHECK(v.baseline_run_id == "run-1");
  }

  // `schema accept` promotes the observation; the next run is quiet.
  auto observed = orders_v2();
  auto v = evaluate_source_drift(input(drift_policy::warn, observed, &stored));
  spb::RunRecord latest;
  latest.set_run_id("run-2");
  auto* t = latest.add_tables();
  t->set_source("shop");
  t->set_source_table("orders");
  t->set_run_id("run-2");
  record_observation(*t, v);
  auto plan = plan_accept(&latest, {}, {{"shop.orders", stored}}, 5);
  REQUIRE(plan.accepted.size() == 1);
  auto accepted = plan.accepted[0].baseline;
  auto after = evaluate_source_drift(input(drift_policy::warn, observed, &accepted));
  CHECK(after.decision == drift_decision::unchanged);
}

TEST_CASE("fail stops the table with FLT-D001 naming the dataset, the changes and schema accept") {
  auto stored = baseline_of(orders_v1(), "h1", "run-1");
  auto observed = table_schema{
      {col("id", bigint), col("amount", portable_type::varchar(20)), col("note", text)}};
  auto v = evaluate_source_drift(input(drift_policy::fail, observed, &stored));
  REQUIRE(v.decision == drift_decision::fail);
  CHECK(v.drifted());
  CHECK(v.error_code == "FLT-D001");
  CHECK(v.error ==
        "source drift on shop.orders: column 'amount' retyped BIGINT -> VARCHAR(20) (baseline "
        "from run run-1); on_source_drift = fail stopped the table before any target was "
        "written, and its staged data is kept. If the change is expected, run `flotilla schema "
        "accept shop.orders`, then `flotilla retry`");
  CHECK(v.warning.empty());
  CHECK_FALSE(v.new_baseline.has_value());
  auto e = source_drift_detected(v);
  CHECK(e.source_drift_detected().policy() == "fail");
  CHECK(e.source_drift_detected().changes_size() == 1);

  // The target refuses the change too: nothing was staged, so no retry is promised.
  auto refused_in = input(drift_policy::fail, observed, &stored);
  refused_in.refusal = "FLT-S005: column 'amount' outgrew its inferred type";
  auto refused = evaluate_source_drift(refused_in);
  CHECK(refused.error_code == "FLT-D001");
  CHECK_THAT(refused.error,
             Catch::Contains("nothing was staged, as the target refuses the change too "
                             "(FLT-S005: column 'amount' outgrew its inferred type)") &&
                 !Catch::Contains("flotilla retry"));
}

TEST_CASE("columns are matched by exact name; moves and nullability are not changes") {
  spb::SchemaBaseline b = baseline_of(orders_v1(), "h1", "r");
  auto moved = table_schema{{col("note", text), col("id", bigint), col("amount", bigint)}};
  moved.columns[1].nullable = false;
  CHECK(compare_columns(b.columns(), to_observed(moved)).empty());
  auto renamed_case = table_schema{{col("ID", bigint), col("amount", bigint), col("note", text)}};
  auto changes = compare_columns(b.columns(), to_observed(renamed_case));
  REQUIRE(changes.size() == 2);
  CHECK(changes[0].kind == change_kind::removed);
  CHECK(changes[0].column == "id");
  CHECK(changes[1].kind == change_kind::added);
  CHECK(changes[1].column == "ID");
}

TEST_CASE("zero columns observed is still an observation") {
  table_schema empty;
  auto v = evaluate_source_drift(input(drift_policy::warn, empty, nullptr));
  CHECK(v.decision == drift_decision::seed);
  spb::TableResult r;
  record_observation(r, v);
  CHECK(r.has_observed_schema());
  CHECK(r.observed_schema_size() == 0);
}

TEST_CASE("a failed describe or baseline read is returned, not judged") {
  auto v = check_source_drift(
      drift_input{.policy = drift_policy::warn, .source = "s", .table = "t"},
      []() -> std::expected<table_schema, std::string> { return std::unexpected("no table"); },
      []() -> std::expected<std::optional<spb::SchemaBaseline>, std::string> {
        return std::nullopt;
      });
  REQUIRE_FALSE(v.has_value());
  CHECK(v.error() == "no table");
}

TEST_CASE("the hints hash follows the read shape, not the data") {
  std::vector<std::string> all;
  std::vector<std::string> cols{"id", "amount"};
  std::vector<std::string> swapped{"amount", "id"};
  std::vector<std::string> f1{"updated_at > ?", "region = ?"};
  std::vector<std::string> f2{"region = ?", "updated_at > ?"};
  const auto h = hints_hash(cols, f1);
  CHECK(h.size() == 16);
  CHECK(h == hints_hash(cols, f1));     // stable
  CHECK(h == hints_hash(cols, f2));     // filter order does not matter
  CHECK(h != hints_hash(swapped, f1));  // column order does
  CHECK(h != hints_hash(all, f1));      // all columns vs. a projection
  CHECK(hints_hash(all, {}) != hints_hash(cols, {}));
  std::vector<std::string> ab_c{"ab", "c"}, a_bc{"a", "bc"};
  CHECK(hints_hash(ab_c, {}) != hints_hash(a_bc, {}));
  // Baselines outlive builds: the hash of a read shape must never change.
  std::vector<std::string> cursor{"updated_at > ?"};
  CHECK(hints_hash(all, {}) == "c5d1ac58a612ec6f");
  CHECK(hints_hash(all, cursor) == "d884e93890eefa9b");
}

TEST_CASE("accept plans every drifted dataset, the named ones, and refuses unknown names") {
  spb::RunRecord latest;
  latest.set_run_id("run-5");
  auto add = [&](std::string source, std::string table, const table_schema& s, bool observed) {
    auto* t = latest.add_tables();
    t->set_source(source);
    t->set_source_table(table);
    t->set_run_id("run-5");
    t->set_hints_hash("h1");
    if (observed) {
      *t->mutable_observed_schema() = to_observed(s);
      t->set_has_observed_schema(true);
    }
  };
  add("shop", "orders", orders_v2(), true);
  add("crm", "leads", orders_v1(), true);     // unchanged
  add("crm", "notes", orders_v1(), true);     // no baseline yet
  add("crm", "retried", orders_v1(), false);  // a retry that reused staged data
  std::map<std::string, spb::SchemaBaseline> baselines{
      {"shop.orders", baseline_of(orders_v1(), "h1", "run-1")},
      {"crm.leads", baseline_of(orders_v1(), "h1", "run-1")}};

  auto all = plan_accept(&latest, {}, baselines, 7);
  CHECK(all.errors.empty());
  REQUIRE(all.accepted.size() == 2);
  CHECK(all.accepted[0].dataset == "crm.notes");
  CHECK(all.accepted[0].first_baseline);
  CHECK(all.accepted[1].dataset == "shop.orders");
  CHECK(all.accepted[1].baseline.run_id() == "run-5");
  CHECK(all.accepted[1].baseline.hints_hash() == "h1");
  CHECK(all.change_count() == 4);
  CHECK(all.lines() ==
        std::vector<std::string>{"crm.notes: baseline recorded with 3 column(s)",
                                 "shop.orders: column 'amount' retyped BIGINT -> VARCHAR(20)",
                                 "shop.orders: column 'note' removed (was TEXT)",
                                 "shop.orders: column 'coupon' added TEXT"});

  std::vector<std::string> named{"crm.leads"};
  CHECK(plan_accept(&latest, named, baselines, 7).accepted.empty());  // nothing moved

  std::vector<std::string> bad{"shop.orders", "crm.retried", "nope"};
  auto refused = plan_accept(&latest, bad, baselines, 7);
  CHECK(refused.accepted.empty());
  REQUIRE(refused.errors.size() == 2);
  CHECK(refused.errors[0].code == errc::no_observed_schema);
  CHECK_THAT(refused.errors[0].text(), Catch::StartsWith("FLT-D002: cannot accept 'crm.retried'"));
  CHECK_THAT(refused.errors[0].message, Catch::Contains("run-5"));
  CHECK_THAT(refused.errors[1].message, Catch::Contains("'nope'"));

  std::vector<std::string> any{"shop.orders"};
  auto none = plan_accept(nullptr, any, {}, 7);
  REQUIRE(none.errors.size() == 1);
  CHECK_THAT(none.errors[0].message, Catch::Contains("no run has been recorded yet"));
  CHECK(plan_accept(nullptr, {}, {}, 7).accepted.empty());
}

TEST_CASE("accept takes a schema holding a dot in the short form, and quoted parts") {
  spb::RunRecord latest;
  latest.set_run_id("run-5");
  for (const std::string table : {"sales.eu.orders", "plain.items", "we.ird.Sel ect"}) {
    auto* t = latest.add_tables();
    t->set_source("pg");
    t->set_source_table(table);
    t->set_run_id("run-5");
    t->set_hints_hash("h1");
    *t->mutable_observed_schema() = to_observed(orders_v2());
    t->set_has_observed_schema(true);
  }
  std::map<std::string, spb::SchemaBaseline> baselines{
      {"pg.sales.eu.orders", baseline_of(orders_v1(), "h1", "run-1")},
      {"pg.plain.items", baseline_of(orders_v1(), "h1", "run-1")},
      {"pg.we.ird.Sel ect", baseline_of(orders_v1(), "h1", "run-1")}};
  // Seed 004's short form: the one table of that name, its schema "sales.eu".
  std::vector<std::string> short_form{"pg.orders", "pg.items"};
  auto plan = plan_accept(&latest, short_form, baselines, 7);
  CHECK(plan.errors.empty());
  REQUIRE(plan.accepted.size() == 2);
  CHECK(plan.accepted[0].dataset == "pg.sales.eu.orders");
  CHECK(plan.accepted[1].dataset == "pg.plain.items");
  // Quoted as SQL quotes names: the parts joined.
  std::vector<std::string> quoted{"pg.\"we.ird\".\"Sel ect\"", "\"pg\".\"sales.eu\".orders"};
  plan = plan_accept(&latest, quoted, baselines, 7);
  CHECK(plan.errors.empty());
  REQUIRE(plan.accepted.size() == 2);
  CHECK(plan.accepted[0].dataset == "pg.we.ird.Sel ect");
  CHECK(plan.accepted[1].dataset == "pg.sales.eu.orders");
}

TEST_CASE("accept takes a name holding quotes as the run printed it, and suggests the "
          "nearest in short form or says the run was filtered") {
  spb::RunRecord latest;
  latest.set_run_id("run-7");
  for (const std::string table : {"Weird \"T\".x", "public.orders", "public.ev2"}) {
    auto* t = latest.add_tables();
    t->set_source(table.starts_with("Weird") ? "s" : "pg");
    t->set_source_table(table);
    t->set_run_id("run-7");
    t->set_hints_hash("h1");
    *t->mutable_observed_schema() = to_observed(orders_v2());
    t->set_has_observed_schema(true);
  }
  std::map<std::string, spb::SchemaBaseline> baselines{
      {"s.Weird \"T\".x", baseline_of(orders_v1(), "h1", "run-1")},
      {"pg.public.orders", baseline_of(orders_v1(), "h1", "run-1")}};
  // As FLT-D001 prints it; and quoted as SQL quotes it.
  for (const std::string given : {"s.Weird \"T\".x", "s.\"Weird \"\"T\"\".x\""}) {
    INFO(given);
    std::vector<std::string> names{given};
    auto plan = plan_accept(&latest, names, baselines, 7);
    CHECK(plan.errors.empty());
    REQUIRE(plan.accepted.size() == 1);
    CHECK(plan.accepted[0].dataset == "s.Weird \"T\".x");
  }
  // A typo of seed 004's short form: the nearest suggested, in full.
  std::vector<std::string> typo{"pg.ordrs"};
  auto plan = plan_accept(&latest, typo, baselines, 7);
  REQUIRE(plan.errors.size() == 1);
  CHECK_THAT(plan.errors[0].message, Catch::Contains("did you mean 'pg.public.orders'?"));
  // The latest run was filtered: a table it did not have may be one the filter left out.
  latest.add_filters("table=orders");
  std::vector<std::string> left_out{"pg.ev3"};
  plan = plan_accept(&latest, left_out, baselines, 7);
  REQUIRE(plan.errors.size() == 1);
  CHECK_THAT(plan.errors[0].message, Catch::Contains("ran with --filter table=orders") &&
                                         Catch::Contains("a table that filter left out"));
}

TEST_CASE("accept says why a table of the latest run has nothing to accept") {
  spb::RunRecord latest;
  latest.set_run_id("run-6");
  for (const char* name : {"t_a", "t_b", "t_c"}) {
    auto* t = latest.add_tables();
    t->set_source("s");
    t->set_source_table(name);
    t->set_status(std::string(name) == "t_c" ? "pruned" : "copied");
    if (std::string(name) == "t_a") {
      *t->mutable_observed_schema() = to_observed(orders_v1());
      t->set_has_observed_schema(true);
    }
  }
  // t_b's gate is "ignore"; t_c was pruned; "nope" the run never had; "app.orders" is the
  // bare name of a section "public.orders" that declares its columns.
  {
    auto* t = latest.add_tables();
    t->set_source("pg");
    t->set_source_table("public.ign");
    t->set_status("copied");
  }
  std::vector<std::string> names{"s.t_b", "s.t_c", "s.nope", "app.orders", "pg.ign"};
  auto plan = plan_accept(&latest, names, {}, 7, {"app.public.orders"}, {"s.t_b", "pg.public.ign"});
  REQUIRE(plan.errors.size() == 5);
  CHECK_THAT(plan.errors[4].message, Catch::Contains("'pg.ign'") &&
                                         Catch::Contains("its on_source_drift is \"ignore\""));
  CHECK_THAT(plan.errors[0].message, Catch::Contains("its on_source_drift is \"ignore\"") &&
                                         !Catch::Contains("did you mean"));
  CHECK_THAT(plan.errors[1].message, Catch::Contains("had it (pruned)") &&
                                         Catch::Contains("--no-prune"));
  CHECK_THAT(plan.errors[2].message, Catch::Contains("had no table of that name"));
  CHECK_THAT(plan.errors[3].message, Catch::Contains("declares columns"));
}

TEST_CASE("accept names the dataset a bare or wrongly sourced table name means, and a retry's "
          "missing tables as left out by the retry") {
  spb::RunRecord latest;
  latest.set_run_id("run-8");
  latest.set_command("run");
  auto* t = latest.add_tables();
  t->set_source("pg");
  t->set_source_table("public.leads");
  t->set_status("copied");
  *t->mutable_observed_schema() = to_observed(orders_v1());
  t->set_has_observed_schema(true);
  std::vector<std::string> names{"leads", "nosuch.leads"};
  auto plan = plan_accept(&latest, names, {}, 7, {}, {});
  REQUIRE(plan.errors.size() == 2);
  for (const auto& e : plan.errors)
    CHECK_THAT(e.message, Catch::Contains("did you mean 'pg.public.leads'?"));
  latest.set_command("retry");
  std::vector<std::string> other{"s.b"};
  plan = plan_accept(&latest, other, {}, 7, {}, {});
  REQUIRE(plan.errors.size() == 1);
  CHECK_THAT(plan.errors[0].message,
             Catch::Contains("was a `flotilla retry`, which had only the tables it retried") &&
                 !Catch::Contains("did you mean"));
}

TEST_CASE("a retry under fail re-checks the staged data's recorded schema against the baseline") {
  auto stored = baseline_of(orders_v1(), "h1", "run-1");
  spb::StagedEntry staged;
  *staged.mutable_observed_schema() = to_observed(orders_v2());
  staged.set_hints_hash("h1");
  drift_input in{.policy = drift_policy::fail,
                 .source = "shop",
                 .table = "orders",
                 .run_id = "run-3",
                 .recorded = &staged.observed_schema(),
                 .hints_hash = staged.hints_hash(),
                 .baseline = &stored};
  auto before = evaluate_source_drift(in);
  CHECK(before.decision == drift_decision::fail);  // not accepted yet: still stopped
  CHECK(before.changes.size() == 3);
  auto accepted = baseline_of(orders_v2(), "h1", "run-2");
  in.baseline = &accepted;
  CHECK(evaluate_source_drift(in).decision == drift_decision::unchanged);  // loads
}

TEST_CASE("the schema accept command a drift message suggests is one shell word") {
  auto stored = baseline_of(orders_v1(), "h1", "run-1");
  auto observed = orders_v2();
  for (const auto policy : {drift_policy::warn, drift_policy::fail}) {
    auto in = input(policy, observed, &stored);
    in.table = "we'ird; drop table x;--";
    auto v = evaluate_source_drift(in);
    const std::string text = policy == drift_policy::warn ? v.warning : v.error;
    CHECK_THAT(text,
               Catch::Contains(R"(flotilla schema accept 'shop.we'\''ird; drop table x;--')"));
  }
  auto v = evaluate_source_drift(input(drift_policy::warn, observed, &stored));
  CHECK_THAT(v.warning, Catch::EndsWith("flotilla schema accept shop.orders"));
  // A line break in the name: bash's $'...', so the command stays on one line.
  auto in = input(drift_policy::warn, observed, &stored);
  in.table = "new\nline's";
  v = evaluate_source_drift(in);
  CHECK_THAT(v.warning, Catch::EndsWith(R"(flotilla schema accept $'shop.new\nline\'s')"));
}
