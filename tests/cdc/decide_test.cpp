// Decisions carried out against real targets (DuckDB files, the PostgreSQL server of
// FLOTILLA_PG_DSN), reviews in a real state store, restarts, and the decision inbox.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "cdc/decide.hpp"
#include "cdc/review_store.hpp"
#include "tests/cdc/support.hpp"

using namespace flotilla;
using namespace flotilla::cdc;
using flotilla::test::held_draft;
using flotilla::test::kept;
using flotilla::test::now_us;
using flotilla::test::temp_dir;
using flotilla::test::test_target;

namespace {

review create(storage::state_store& store, pb::HoldRecord draft,
              std::vector<pb::HeldChange> changes = {}) {
  auto r = create_review(store, std::move(draft), changes, now_us());
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.has_value());
  return *r;
}

review load(const storage::state_store& store, const review& r) {
  auto l = load_review(store, r.hold.target(), r.hold.table());
  REQUIRE(l.has_value());
  REQUIRE(l->has_value());
  return **l;
}

decision_result decide(storage::state_store& store, const test_target& t, const review& r,
                       decision d) {
  return carry_out(store, t.opener(), r.hold.target(), r.hold.table(), d, now_us());
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("a hold survives a restart of the store with its kept changes in order") {
  temp_dir dir;
  pb::HoldRecord draft;
  review created;
  {
    auto store = test::open_store(dir.path());
    draft = held_draft(test::orders(), rename_column{"id", "order_id"},
                       target_info{"wh", target_kind::duckdb, {"", "s", "orders"}, std::nullopt});
    created = create(store, draft, {kept("0/1", "insert 1"), kept("0/2", "update 1")});
    REQUIRE(store.append_held_changes("wh", draft.table(), std::vector{kept("0/3", "delete 1")}));
    REQUIRE(store.close());
  }
  auto store = test::open_store(dir.path());
  auto r = load(store, created);
  CHECK(r.hold.state() == pb::HOLD_STATE_AWAITING_REVIEW);
  CHECK(r.hold.source_change() == draft.source_change());
  CHECK(r.hold.proposed_ddl() == draft.proposed_ddl());
  CHECK(r.hold.created_at_us() == created.hold.created_at_us());
  CHECK(r.note == created.note);
  auto changes = store.scan_held_changes("wh", draft.table());
  REQUIRE(changes.has_value());
  REQUIRE(changes->size() == 3);
  CHECK((*changes)[0].sequence() == 1);
  CHECK((*changes)[0].payload() == "insert 1");
  CHECK((*changes)[1].sequence() == 2);
  CHECK((*changes)[1].payload() == "update 1");
  CHECK((*changes)[2].sequence() == 3);
  CHECK((*changes)[2].position() == "0/3");
  auto all = list_reviews(store);
  REQUIRE(all.has_value());
  REQUIRE(all->size() == 1);
  CHECK(all->front().hold.table() == "shop.public.orders");
}

TEST_CASE("DuckDB: apply proposed DDL runs it once in one transaction, then the stream replays") {
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)");
  t.exec("INSERT INTO " + t.qualified() + " VALUES (1, 'a', 'x')");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, t.info()),
                  {kept("0/1", "a"), kept("0/2", "b")});

  auto res = decide(store, t, r, {decision_kind::apply_proposed, ""});
  INFO(res.message);
  REQUIRE(res.exit_code() == 0);
  CHECK(has(t.columns(), "order_id"));
  CHECK_FALSE(has(t.columns(), "id"));
  auto after = load(store, r);
  CHECK(after.hold.state() == pb::HOLD_STATE_APPLYING);
  CHECK(ready_to_replay(after));
  CHECK(after.hold.applied_ddl() == r.hold.proposed_ddl());
  CHECK(t.count("SELECT 1 FROM \"_flotilla\".\"_flotilla_reviews\" WHERE decision_id = '" +
                after.decision_id() + "'") == 1);

  SECTION("the stream finishes the replay: resumed, kept changes gone") {
    REQUIRE(finish_replay(store, after, 2, now_us()));
    CHECK(load(store, r).hold.state() == pb::HOLD_STATE_RESUMED);
    CHECK(*store.held_change_count("wh", r.hold.table()) == 0);
    auto again = decide(store, t, r, {decision_kind::apply_proposed, ""});
    CHECK(again.exit_code() == 2);
    CHECK(again.message == "This review is resumed; it does not accept a decision.");
  }

  SECTION("a restart right after the DDL committed does not run it twice") {
    // The process died after the target commit, before the review recorded it.
    review crashed = after;
    crashed.hold.set_state(pb::HOLD_STATE_APPLYING);
    crashed.note.phase = "ddl";
    crashed.note.ddl_ran = false;
    REQUIRE(save_review(store, crashed));
    auto rec = recover_interrupted(store, t.opener(), now_us());
    REQUIRE(rec.size() == 1);
    CHECK(rec.front().exit_code() == 0);
    auto now = load(store, r);
    // Running the rename again would have failed: the column is gone.
    CHECK(now.hold.state() == pb::HOLD_STATE_APPLYING);
    CHECK(ready_to_replay(now));
    CHECK(now.hold.error().empty());
    CHECK(has(t.columns(), "order_id"));
  }
}

TEST_CASE("DuckDB: a decision interrupted before its DDL committed changed nothing and says so") {
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, t.info()));
  auto p = check_decision(r, {decision_kind::apply_proposed, ""});
  REQUIRE(p.has_value());
  REQUIRE(save_review(store, begin_decision(r, *p, now_us())));  // then the process died
  auto rec = recover_interrupted(store, t.opener(), now_us());
  REQUIRE(rec.size() == 1);
  auto now = load(store, r);
  CHECK(now.hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  CHECK_THAT(now.hold.error(), Catch::Contains("interrupted by a restart"));
  CHECK(has(t.columns(), "id"));
  // Deciding again runs it.
  auto res = decide(store, t, now, {decision_kind::apply_proposed, ""});
  CHECK(res.exit_code() == 0);
  CHECK(has(t.columns(), "order_id"));
}

TEST_CASE("DuckDB: a failing statement rolls the whole decision back") {
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, t.info()));
  const std::string ddl = "ALTER TABLE " + t.qualified() + " ADD COLUMN extra INTEGER;\nALTER TABLE " +
                          t.qualified() + " ADD COLUMN note VARCHAR;";
  auto res = decide(store, t, r, {decision_kind::apply_edited, ddl});
  CHECK(res.exit_code() == 1);
  CHECK(res.code == code_decision_failed);
  CHECK_THAT(res.message, Catch::StartsWith("apply DDL failed: "));
  CHECK_THAT(res.message, Catch::Contains("note"));
  CHECK_FALSE(has(t.columns(), "extra"));
  auto now = load(store, r);
  CHECK(now.hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  CHECK(now.ddl_was_tried());
  CHECK(now.hold.applied_ddl() == ddl);
}

TEST_CASE("DuckDB: a key column type change is applied through the rebuild proposal, rows kept") {
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() +
         " (id INTEGER NOT NULL, note VARCHAR, code VARCHAR, PRIMARY KEY (id))");
  t.exec("INSERT INTO " + t.qualified() + " VALUES (1, 'a', 'x'), (2, 'b', 'y')");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), alter_type{"id", *schema::parse_type("bigint")}, t.info()));
  auto res = decide(store, t, r, {decision_kind::apply_proposed, ""});
  INFO(res.message);
  REQUIRE(res.exit_code() == 0);
  auto live = t.open()->describe(t.table());
  REQUIRE(live);
  CHECK(live->columns[0].type.kind == schema::type_kind::bigint);
  CHECK(live->columns[0].key);
  CHECK(t.count("SELECT * FROM " + t.qualified()) == 2);
}

TEST_CASE("PostgreSQL: the decision runs in one transaction with a 10-minute statement timeout") {
  temp_dir dir;
  test_target t("postgres");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR(100), code TEXT)");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders("public.orders_" + test::unique_suffix()),
                                    rename_column{"id", "order_id"}, t.info()));
  const std::string ddl =
      "DO $$ BEGIN IF current_setting('statement_timeout') <> '10min' THEN RAISE EXCEPTION "
      "'statement_timeout is %', current_setting('statement_timeout'); END IF; END $$;\n" +
      r.hold.proposed_ddl();
  auto res = decide(store, t, r, {decision_kind::apply_edited, ddl});
  INFO(res.message);
  REQUIRE(res.exit_code() == 0);
  CHECK(has(t.columns(), "order_id"));
  // SET LOCAL: the setting ended with the transaction.
  auto rows = t.open()->query("SHOW statement_timeout");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0][0].value_or("") != "10min");
}

TEST_CASE("PostgreSQL: a failing decision is rolled back and recorded with its error") {
  temp_dir dir;
  test_target t("postgres");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR(100), code TEXT)");
  t.exec("INSERT INTO " + t.qualified() + " VALUES (1, NULL, 'x')");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders("public.orders_" + test::unique_suffix()),
                                    rename_column{"id", "order_id"}, t.info()));
  const std::string ddl = "ALTER TABLE " + t.qualified() + " ADD COLUMN extra INTEGER;\nALTER TABLE " +
                          t.qualified() + " ALTER COLUMN note SET NOT NULL;";
  auto res = decide(store, t, r, {decision_kind::apply_edited, ddl});
  CHECK(res.exit_code() == 1);
  CHECK_THAT(res.message, Catch::StartsWith("apply DDL failed: "));
  CHECK_THAT(res.message, Catch::Contains("contains null values"));
  CHECK_FALSE(has(t.columns(), "extra"));
  auto now = load(store, r);
  CHECK(now.hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  CHECK(now.hold.error() == res.message);
  // Fix the cause and apply again.
  t.exec("UPDATE " + t.qualified() + " SET note = 'n'");
  auto again = decide(store, t, now, {decision_kind::apply_edited, ddl});
  INFO(again.message);
  CHECK(again.exit_code() == 0);
  CHECK(has(t.columns(), "extra"));
}

TEST_CASE("PostgreSQL: a key change needs an edit, then awaits resync; resync is bound once asked") {
  temp_dir dir;
  test_target t("postgres");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL, note VARCHAR(100), code TEXT NOT NULL, "
         "CONSTRAINT orders_pk PRIMARY KEY (id))");
  auto store = test::open_store(dir.path());
  auto r = create(store,
                  held_draft(test::orders("public.orders_" + test::unique_suffix()),
                             key_change{{"id", "code"}, "primary key redefined over (id, code)"}, t.info()),
                  {kept("0/5", "row")});
  auto e = decide(store, t, r, {decision_kind::apply_proposed, ""});
  CHECK(e.exit_code() == 2);
  CHECK(e.hint == "The proposal needs an edit first (see its comments).");
  CHECK(decide(store, t, r, {decision_kind::resync, ""}).message == "Edit the target DDL before resync.");

  const std::string ddl = "ALTER TABLE " + t.qualified() + " DROP CONSTRAINT orders_pk;\nALTER TABLE " +
                          t.qualified() + " ADD PRIMARY KEY (id, code);";
  auto res = decide(store, t, r, {decision_kind::apply_edited, ddl});
  INFO(res.message);
  REQUIRE(res.exit_code() == 0);
  auto now = load(store, r);
  CHECK(now.hold.state() == pb::HOLD_STATE_AWAITING_RESYNC);
  CHECK(t.count("SELECT 1 FROM pg_constraint WHERE conname = 'orders_pk'") == 0);

  auto other = decide(store, t, r, {decision_kind::resync_edited, "ALTER TABLE x ADD COLUMN y INT"});
  CHECK(other.message == "This review already applied target DDL; resync must use that exact DDL.");
  auto asked = decide(store, t, r, {decision_kind::resync, ""});
  REQUIRE(asked.exit_code() == 0);
  now = load(store, r);
  CHECK(resync_requested(now));
  CHECK(decide(store, t, r, {decision_kind::resync, ""}).message ==
        "This review already has a bound resync operation; wait for its result.");
  // The stream copies the table again.
  auto running = resync_started(now, "resync-1", now_us());
  REQUIRE(save_review(store, running));
  CHECK(decide(store, t, r, {decision_kind::apply_edited, ddl}).message ==
        "This review already has a bound resync operation; wait for its result.");
  {
    // Killed while it copied: the next process to hold the store says so, and the review
    // takes a decision again (seed 003).
    auto rec = recover_interrupted(store, t.opener(), now_us());
    REQUIRE(rec.size() == 1);
    CHECK(rec.front().exit_code() == 0);
    auto stopped = load(store, r);
    CHECK(stopped.hold.state() == pb::HOLD_STATE_AWAITING_RESYNC);
    CHECK(stopped.resync_status().empty());
    CHECK_THAT(stopped.hold.error(),
               Catch::Contains("the resync resync-1 was interrupted by a restart") &&
                   Catch::Contains("Decide again: resync or remove"));
    CHECK(decisions_accepted(stopped) == "resync or remove");
    REQUIRE(decide(store, t, r, {decision_kind::resync, ""}).exit_code() == 0);
    now = load(store, r);
    CHECK(resync_requested(now));
    running = resync_started(now, "resync-2", now_us());
    REQUIRE(save_review(store, running));
  }
  REQUIRE(finish_resync(store, running, true, "", now_us()));
  now = load(store, r);
  CHECK(now.hold.state() == pb::HOLD_STATE_RESUMED);
  CHECK(now.resync_status() == "Resync resync-2: done");
  CHECK(*store.held_change_count("wh", r.hold.table()) == 0);
}

TEST_CASE("remove closes the review and drops its kept changes, without touching the target") {
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, t.info()),
                  {kept("0/1", "a")});
  auto res = decide(store, t, r, {decision_kind::remove, ""});
  REQUIRE(res.exit_code() == 0);
  auto now = load(store, r);
  CHECK(now.hold.state() == pb::HOLD_STATE_REMOVED);
  CHECK(state_label(now.hold.state()) == "removed from pipeline");
  CHECK(*store.held_change_count("wh", r.hold.table()) == 0);
  CHECK(has(t.columns(), "id"));
}

TEST_CASE("a finished review stays listed, with its own id, once a later hold of its table "
          "replaces it") {
  // Seed 003: the Schema tab also lists finished reviews. The table's next hold replaced
  // its record, and the new review took the old one's id.
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)");
  auto store = test::open_store(dir.path());
  auto first = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, t.info()),
                      {kept("0/1", "a")});
  REQUIRE(decide(store, t, first, {decision_kind::remove, ""}).exit_code() == 0);
  CHECK(store.list_finished_reviews()->empty());  // nothing replaced it yet
  auto second = create(store, held_draft(test::orders(), rename_column{"id", "order_no"}, t.info()));
  CHECK(second.short_id() != first.short_id());
  auto finished = list_finished_reviews(store, "wh");
  REQUIRE(finished.has_value());
  REQUIRE(finished->size() == 1);
  const auto& f = finished->front();
  CHECK(f.short_id() == first.short_id());
  CHECK(f.hold.state() == pb::HOLD_STATE_REMOVED);
  CHECK(f.hold.source_change() == first.hold.source_change());
  auto current = list_reviews(store, "wh");
  REQUIRE(current.has_value());
  REQUIRE(current->size() == 1);
  CHECK(current->front().short_id() == second.short_id());
  CHECK(current->front().hold.state() == pb::HOLD_STATE_AWAITING_REVIEW);
}

TEST_CASE("an event target runs no DDL: the proposal applies as it stands, real DDL is refused") {
  temp_dir dir;
  auto store = test::open_store(dir.path());
  const target_info kafka{"events", target_kind::kafka, {}, std::nullopt};
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, kafka));
  sinks::warehouse_options o;
  o.name = "events";
  o.dialect = "kafka";
  auto open = opener_for({o});
  auto bad = carry_out(store, open, "events", r.hold.table(),
                       {decision_kind::apply_edited, "ALTER TABLE t ADD COLUMN c INT"}, now_us());
  CHECK(bad.exit_code() == 2);
  CHECK(bad.code == code_event_target_ddl);
  auto ok = carry_out(store, open, "events", r.hold.table(), {decision_kind::apply_proposed, ""}, now_us());
  CHECK(ok.exit_code() == 0);
  CHECK(ready_to_replay(load(store, r)));
}

TEST_CASE("a target that cannot be reached fails the decision with the reason") {
  temp_dir dir;
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"},
                                    target_info{"gone", target_kind::duckdb, {"", "s", "orders"}, std::nullopt}));
  auto res = carry_out(store, opener_for({}), "gone", r.hold.table(), {decision_kind::apply_proposed, ""},
                       now_us());
  CHECK(res.exit_code() == 1);
  CHECK_THAT(res.message, Catch::Contains("target 'gone' is not defined in flotilla.toml"));
  CHECK(load(store, r).hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  auto none = carry_out(store, opener_for({}), "gone", "shop.public.nope", {decision_kind::remove, ""}, now_us());
  CHECK(none.exit_code() == 2);
  CHECK(none.code == code_unknown_review);
}

TEST_CASE("the inbox: a running stream carries out queued decisions in order and writes their results") {
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, t.info()));
  const auto first = submit_request(dir.path(), {"", "wh", r.hold.table(), {decision_kind::apply_proposed, ""}});
  const auto second = submit_request(dir.path(), {"", "wh", r.hold.table(), {decision_kind::remove, ""}});
  CHECK(first < second);
  CHECK_FALSE(read_result(dir.path(), first).has_value());
  auto results = process_inbox(store, t.opener(), dir.path(), [] { return now_us(); });
  REQUIRE(results.size() == 2);
  CHECK(results[0].exit_code() == 0);
  CHECK(results[1].exit_code() == 2);  // applying: it does not accept a decision
  CHECK_THAT(results[1].message, Catch::StartsWith("This review is applying; it does not accept a decision. Its decision is taken: start `flotilla stream`"));
  CHECK(std::filesystem::is_empty(inbox_dir(dir.path())));
  auto r1 = read_result(dir.path(), first);
  REQUIRE(r1.has_value());
  CHECK(r1->exit_code() == 0);
  auto r2 = read_result(dir.path(), second);
  REQUIRE(r2.has_value());
  CHECK(r2->code == code_wrong_state);
  CHECK(has(t.columns(), "order_id"));
  CHECK(process_inbox(store, t.opener(), dir.path(), [] { return now_us(); }).empty());
}

TEST_CASE("the inbox: a decision about a source the running stream does not stream is refused") {
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, t.info()));
  const auto id = submit_request(dir.path(), {"", "wh", r.hold.table(), {decision_kind::apply_proposed, ""}});
  auto results = process_inbox(store, t.opener(), dir.path(), [] { return now_us(); },
                               [](const std::string&) { return false; });
  REQUIRE(results.size() == 1);
  CHECK(results[0].exit_code() == 2);
  CHECK(results[0].code == code_stream_not_taking);
  CHECK_THAT(results[0].message, Catch::Contains("does not stream source 'shop'") &&
                                     Catch::Contains("Nothing ran"));
  CHECK(read_result(dir.path(), id).has_value());
  CHECK(load(store, r).hold.state() == pb::HOLD_STATE_AWAITING_REVIEW);
  CHECK(has(t.columns(), "id"));
}

TEST_CASE("the inbox: a withdrawn request is never carried out; one a stopped stream had taken says so") {
  temp_dir dir;
  test_target t("duckdb");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)");
  auto store = test::open_store(dir.path());
  auto r = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, t.info()));
  const auto id = submit_request(dir.path(), {"", "wh", r.hold.table(), {decision_kind::apply_proposed, ""}});
  CHECK(withdraw_request(dir.path(), id));
  CHECK_FALSE(withdraw_request(dir.path(), id));
  CHECK(process_inbox(store, t.opener(), dir.path(), [] { return now_us(); }).empty());
  CHECK(load(store, r).hold.state() == pb::HOLD_STATE_AWAITING_REVIEW);
  CHECK(has(t.columns(), "id"));

  std::ofstream(inbox_dir(dir.path()) / "00000000000000000001-1-0.taken") << "target=wh\n";
  auto results = process_inbox(store, t.opener(), dir.path(), [] { return now_us(); });
  REQUIRE(results.size() == 1);
  CHECK(results[0].exit_code() == 1);
  auto written = read_result(dir.path(), "00000000000000000001-1-0");
  REQUIRE(written.has_value());
  CHECK_THAT(written->message, Catch::Contains("The stream stopped while carrying out this decision"));
  CHECK(std::filesystem::is_empty(inbox_dir(dir.path())));
}

TEST_CASE("the DDL an edited review ran stays in force through the table's later reviews") {
  temp_dir dir;
  auto store = test::open_store(dir.path());
  const target_info info{"wh", target_kind::duckdb, {"", "s", "orders"}, std::nullopt};
  auto first = create(store, held_draft(test::orders(), rename_column{"id", "order_id"}, info));
  // Resumed with DDL of the user's own: a wider type than proposed.
  auto resumed = first.hold;
  resumed.set_state(pb::HOLD_STATE_RESUMED);
  resumed.set_applied_ddl(resumed.proposed_ddl() + "; ALTER TABLE s.orders ALTER qty TYPE bigint");
  REQUIRE(store.put_hold(resumed.target(), resumed.table(), resumed, {}));
  CHECK_THAT(edited_ddl_of(resumed), Catch::Contains("qty TYPE bigint"));
  // The next review of the table, resumed as proposed, still carries it.
  auto second = create(store, held_draft(test::orders(), rename_column{"id", "ident"}, info));
  CHECK_THAT(second.hold.earlier_edits(), Catch::Contains("qty TYPE bigint"));
  auto next = second.hold;
  next.set_state(pb::HOLD_STATE_RESUMED);
  next.set_applied_ddl(next.proposed_ddl());
  CHECK_THAT(edited_ddl_of(next), Catch::Contains("qty TYPE bigint"));
  // A review resumed as proposed, with no earlier edit, has none.
  resumed.set_applied_ddl(resumed.proposed_ddl());
  resumed.clear_earlier_edits();
  CHECK(edited_ddl_of(resumed).empty());
}
