// Seed 003 as a pure state machine: every state label, decision and refusal.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cdc/outcome.hpp"
#include "cdc/review.hpp"

using namespace flotilla;
using namespace flotilla::cdc;

namespace {

pb::HoldRecord draft(std::string proposed, bool resync = false, std::string kind = "rename_column") {
  pb::HoldRecord h;
  h.set_target("wh");
  h.set_table("shop.public.orders");
  h.set_kind(std::move(kind));
  h.set_source_change("public.orders: column note renamed to notes (source LSN 0/16B3748)");
  h.set_reason("why");
  h.set_proposed_ddl(std::move(proposed));
  h.set_requires_resync(resync);
  h.set_data_consequence(resync ? "Requires table resync. x" : "resumes");
  h.set_position("0/16B3748");
  return h;
}

const std::string rename_ddl = R"(ALTER TABLE "s"."orders" RENAME COLUMN "note" TO "notes";)";
const std::string comment_proposal =
    "-- The source column is NOT NULL: add a DEFAULT, or add it NULL, before applying.";

decision_plan accept(const review& r, decision d) {
  auto p = check_decision(r, d);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.has_value());
  return *p;
}

refusal refuse(const review& r, decision d) {
  auto p = check_decision(r, d);
  REQUIRE_FALSE(p.has_value());
  return p.error();
}

/// Runs a decision through begin and success, as carrying it out does.
review decide_ok(const review& r, decision d, std::int64_t now = 200) {
  auto p = accept(r, std::move(d));
  return decision_succeeded(begin_decision(r, p, now), p, now + 1);
}

}  // namespace

TEST_CASE("the review states carry seed 003's labels") {
  CHECK(state_label(pb::HOLD_STATE_AWAITING_REVIEW) == "paused: awaiting review");
  CHECK(state_label(pb::HOLD_STATE_APPLYING) == "applying");
  CHECK(state_label(pb::HOLD_STATE_LAST_DECISION_FAILED) == "paused: last decision failed");
  CHECK(state_label(pb::HOLD_STATE_AWAITING_RESYNC) == "paused: awaiting resync");
  CHECK(state_label(pb::HOLD_STATE_RESUMED) == "resumed");
  CHECK(state_label(pb::HOLD_STATE_REMOVED) == "removed from pipeline");
  CHECK(kind_label("key_change") == "key change");
  CHECK(is_open(pb::HOLD_STATE_APPLYING));
  CHECK_FALSE(is_open(pb::HOLD_STATE_RESUMED));
  CHECK_FALSE(is_open(pb::HOLD_STATE_REMOVED));
}

TEST_CASE("a new review awaits review and holds its table") {
  auto r = open_review(draft(rename_ddl), 100);
  CHECK(r.hold.state() == pb::HOLD_STATE_AWAITING_REVIEW);
  CHECK(r.hold.created_at_us() == 100);
  CHECK(r.note.hold_created_at_us == 100);
  CHECK(holds_table(r));
  CHECK_FALSE(ready_to_replay(r));
  CHECK(r.name() == "wh shop.public.orders");
  CHECK(r.short_id().size() == 8);
}

TEST_CASE("apply proposed DDL: applying while the DDL runs, then replay, then resumed") {
  auto r = open_review(draft(rename_ddl), 100);
  auto p = accept(r, {decision_kind::apply_proposed, ""});
  CHECK(p.run_ddl);
  CHECK(p.ddl == rename_ddl);
  CHECK_FALSE(p.resync);
  auto started = begin_decision(r, p, 200);
  CHECK(started.hold.state() == pb::HOLD_STATE_APPLYING);
  CHECK(started.hold.applied_ddl() == rename_ddl);  // recorded before it runs
  CHECK(started.note.phase == "ddl");
  CHECK_FALSE(ready_to_replay(started));
  CHECK(started.decision_id() == "wh/shop.public.orders/100/200");
  auto ok = decision_succeeded(started, p, 201);
  CHECK(ok.hold.state() == pb::HOLD_STATE_APPLYING);
  CHECK(ok.note.ddl_ran);
  CHECK(ready_to_replay(ok));
  CHECK(holds_table(ok));
  auto resumed = replay_finished(ok, 300);
  CHECK(resumed.hold.state() == pb::HOLD_STATE_RESUMED);
  CHECK_FALSE(holds_table(resumed));
  CHECK(resumed.hold.applied_ddl() == rename_ddl);
}

TEST_CASE("a review being carried out or closed does not accept a decision") {
  auto r = open_review(draft(rename_ddl), 100);
  auto p = accept(r, {decision_kind::apply_proposed, ""});
  auto applying = begin_decision(r, p, 200);
  for (auto kind : {decision_kind::apply_proposed, decision_kind::resync, decision_kind::remove}) {
    auto e = refuse(applying, {kind, ""});
    CHECK(e.code == code_wrong_state);
    CHECK_THAT(e.message, Catch::StartsWith("This review is applying; it does not accept a decision. Its decision is taken: start `flotilla stream`"));
  }
  auto resumed = replay_finished(decision_succeeded(applying, p, 201), 300);
  CHECK(refuse(resumed, {decision_kind::apply_proposed, ""}).message ==
        "This review is resumed; it does not accept a decision.");
  auto removed = begin_decision(r, accept(r, {decision_kind::remove, ""}), 400);
  CHECK(removed.hold.state() == pb::HOLD_STATE_REMOVED);
  CHECK(refuse(removed, {decision_kind::remove, ""}).message ==
        "This review is removed from pipeline; it does not accept a decision.");
}

TEST_CASE("a decision interrupted before its DDL committed, then the review removed, shows "
          "the DDL as tried and no call to decide again") {
  auto r = open_review(draft(rename_ddl), 100);
  auto p = accept(r, {decision_kind::apply_proposed, ""});
  auto interrupted = decision_interrupted(begin_decision(r, p, 200), 300);
  CHECK(interrupted.ddl_was_tried());
  CHECK_THAT(interrupted.hold.error(), Catch::EndsWith("Decide again."));
  auto removed = begin_decision(interrupted, accept(interrupted, {decision_kind::remove, ""}), 400);
  CHECK(removed.hold.state() == pb::HOLD_STATE_REMOVED);
  CHECK(removed.ddl_was_tried());  // shown as Tried DDL: it never ran
  CHECK_THAT(removed.hold.error(), Catch::Contains("it changed nothing") &&
                                       !Catch::Contains("Decide again"));
}

TEST_CASE("a comment-only proposal disables apply and resync until it is edited") {
  auto r = open_review(draft(comment_proposal), 100);
  auto e = refuse(r, {decision_kind::apply_proposed, ""});
  CHECK(e.code == code_needs_edit);
  CHECK(e.message ==
        "The proposed DDL needs an edit before it can be applied (see its comments); submit the "
        "edited DDL.");
  CHECK(e.hint == "The proposal needs an edit first (see its comments).");
  auto s = refuse(r, {decision_kind::resync, ""});
  CHECK(s.code == code_resync_needs_edit);
  CHECK(s.message == "Edit the target DDL before resync.");
  // What a message about the held table offers is what the review accepts.
  CHECK(decisions_accepted(r) == "edit (review edit --apply or --resync) or remove");
  // Edited, both are accepted.
  CHECK(accept(r, {decision_kind::apply_edited, rename_ddl}).run_ddl);
  CHECK(accept(r, {decision_kind::resync_edited, rename_ddl}).resync);
  // Remove is always possible.
  CHECK(accept(r, {decision_kind::remove, ""}).remove);
}

TEST_CASE("DDL holding only comments runs nothing on the target, and the table resumes") {
  auto r = open_review(draft(comment_proposal), 100);
  auto p = accept(r, {decision_kind::apply_edited, "-- nothing to do on this target\n"});
  CHECK_FALSE(p.run_ddl);
  auto ok = decision_succeeded(begin_decision(r, p, 200), p, 201);
  CHECK(ready_to_replay(ok));
  CHECK(ok.note.ddl_ran);  // applied: a resync must use it as it is
  // "-- no target DDL needed" is applied as it stands.
  auto n = open_review(draft(std::string(no_target_ddl)), 100);
  auto pn = accept(n, {decision_kind::apply_proposed, ""});
  CHECK_FALSE(pn.run_ddl);
}

TEST_CASE("edited DDL can be up to 65,536 characters") {
  auto r = open_review(draft(rename_ddl), 100);
  const std::string longest = "--" + std::string(max_ddl_chars - 2, 'x');
  CHECK(accept(r, {decision_kind::apply_edited, longest}).ddl.size() == 65536);
  auto e = refuse(r, {decision_kind::apply_edited, longest + "x"});
  CHECK(e.code == code_too_long);
  CHECK(e.message == "The DDL is longer than 65536 characters.");
  CHECK(refuse(r, {decision_kind::resync_edited, longest + "x"}).message ==
        "The DDL is longer than 65536 characters.");
  CHECK(refuse(r, {decision_kind::apply_edited, "  \n"}).code == code_no_ddl);
  // Characters, not bytes: 65,536 two-byte characters are within the limit.
  std::string wide = "--";
  for (std::size_t i = 2; i < max_ddl_chars; ++i)
    wide += "\xc3\xa9";  // é
  CHECK(accept(r, {decision_kind::apply_edited, wide}).ddl == wide);
  CHECK(refuse(r, {decision_kind::apply_edited, wide + "\xc3\xa9"}).code == code_too_long);
}

TEST_CASE("after the review's DDL ran, a decision uses that DDL: no other runs in its place") {
  auto r = open_review(draft(rename_ddl), 100);
  auto p = accept(r, {decision_kind::apply_edited, "-- later"});
  auto replaying = decision_succeeded(begin_decision(r, p, 200), p, 201);
  REQUIRE(replaying.note.ddl_ran);
  auto bad = replay_failed(replaying, "column \"k2\" does not exist", 300);
  REQUIRE(bad.hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  // Other DDL would show as applied DDL that never ran.
  auto e = refuse(bad, {decision_kind::apply_edited, rename_ddl});
  CHECK(e.code == code_resync_ddl_bound);
  CHECK_THAT(e.message, Catch::StartsWith("This review already applied target DDL") &&
                            Catch::Contains("by hand"));
  // The same DDL, or apply, replays again under the DDL that ran; nothing runs.
  auto same = accept(bad, {decision_kind::apply_edited, "-- later\n"});
  CHECK_FALSE(same.run_ddl);
  auto again = accept(bad, {decision_kind::apply_proposed, ""});
  CHECK_FALSE(again.run_ddl);
  CHECK(again.ddl == "-- later");
  CHECK(begin_decision(bad, again, 400).hold.applied_ddl() == "-- later");
}

TEST_CASE("a replay stopped by a kept change takes resync or remove, not apply again") {
  auto r = open_review(draft(rename_ddl), 100);
  auto p = accept(r, {decision_kind::apply_proposed, ""});
  auto replaying = decision_succeeded(begin_decision(r, p, 200), p, 201);
  REQUIRE(ready_to_replay(replaying));
  auto stopped = replay_stopped(replaying, "column 'w' changed type int -> text [FLT-H002]", 300);
  CHECK(stopped.hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  CHECK(holds_table(stopped));
  CHECK_FALSE(ready_to_replay(stopped));
  CHECK_THAT(stopped.hold.error(), Catch::Contains("reached a change that stops the stream") &&
                                       Catch::Contains("FLT-H002"));
  // What a message about the held table offers is what the review accepts.
  CHECK(decisions_accepted(r) == "apply, edit, resync or remove");
  CHECK(decisions_accepted(stopped) == "resync or remove");
  // Applying would stop the stream again, for every table.
  CHECK(refuse(stopped, {decision_kind::apply_proposed, ""}).code == code_wrong_state);
  CHECK_THAT(refuse(stopped, {decision_kind::apply_edited, "SELECT 1"}).message,
             Catch::Contains("Resync the table"));
  CHECK(accept(stopped, {decision_kind::remove, ""}).remove);
  CHECK(accept(stopped, {decision_kind::resync, ""}).resync);
}

TEST_CASE("a failed decision changes nothing and the review can be decided again") {
  auto r = open_review(draft(rename_ddl), 100);
  auto p = accept(r, {decision_kind::apply_proposed, ""});
  auto bad = decision_failed(begin_decision(r, p, 200), p, "column \"note\" does not exist", 201);
  CHECK(bad.hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  CHECK(state_label(bad.hold.state()) == "paused: last decision failed");
  CHECK(bad.hold.error() == "apply DDL failed: column \"note\" does not exist");
  CHECK(bad.hold.applied_ddl() == rename_ddl);
  CHECK(bad.ddl_was_tried());
  CHECK_FALSE(bad.note.ddl_ran);
  CHECK(holds_table(bad));
  auto again = decide_ok(bad, {decision_kind::apply_edited, "ALTER TABLE x ADD COLUMN y INT"}, 300);
  CHECK(again.hold.error().empty());
  CHECK_FALSE(again.ddl_was_tried());
  CHECK(ready_to_replay(again));
}

TEST_CASE("a decision interrupted by a restart says so and can be decided again") {
  auto r = open_review(draft(rename_ddl), 100);
  auto p = accept(r, {decision_kind::apply_proposed, ""});
  auto cut = decision_interrupted(begin_decision(r, p, 200), 300);
  CHECK(cut.hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  CHECK_THAT(cut.hold.error(), Catch::Contains("interrupted by a restart"));
  CHECK_THAT(cut.hold.error(), Catch::Contains("changed nothing"));
  CHECK(check_decision(cut, {decision_kind::apply_proposed, ""}).has_value());
}

TEST_CASE("a change that requires a resync: apply moves to awaiting resync, then only resync or remove") {
  auto r = open_review(draft(rename_ddl, true, "key_change"), 100);
  auto applied = decide_ok(r, {decision_kind::apply_proposed, ""});
  CHECK(applied.hold.state() == pb::HOLD_STATE_AWAITING_RESYNC);
  CHECK(state_label(applied.hold.state()) == "paused: awaiting resync");
  CHECK_FALSE(ready_to_replay(applied));
  CHECK_FALSE(resync_requested(applied));  // nobody asked for the copy yet
  CHECK(refuse(applied, {decision_kind::apply_proposed, ""}).code == code_wrong_state);

  SECTION("resync after the DDL ran must use that exact DDL") {
    auto e = refuse(applied, {decision_kind::resync_edited, "ALTER TABLE other"});
    CHECK(e.code == code_resync_ddl_bound);
    CHECK(e.message == "This review already applied target DDL; resync must use that exact DDL.");
    auto same = accept(applied, {decision_kind::resync_edited, rename_ddl});
    CHECK_FALSE(same.run_ddl);  // never twice
    auto p = accept(applied, {decision_kind::resync, ""});
    CHECK_FALSE(p.run_ddl);
    CHECK(p.ddl == rename_ddl);
  }

  SECTION("resync: requested, bound, running, then resumed") {
    auto asked = decide_ok(applied, {decision_kind::resync, ""}, 300);
    CHECK(asked.hold.state() == pb::HOLD_STATE_AWAITING_RESYNC);
    CHECK(resync_requested(asked));
    CHECK(asked.resync_status() == "Resync of the table: requested");
    auto e = refuse(asked, {decision_kind::resync, ""});
    CHECK(e.code == code_resync_bound);
    CHECK(e.message == "This review already has a bound resync operation; wait for its result.");
    // Decided: a run's FLT-V014 says to start the stream, not to decide it again.
    CHECK(decisions_accepted(asked).empty());
    // Asked for, not started (no stream runs): removing the table calls the copy off.
    auto removed = begin_decision(asked, accept(asked, {decision_kind::remove, ""}), 350);
    CHECK(removed.hold.state() == pb::HOLD_STATE_REMOVED);
    CHECK_FALSE(resync_requested(removed));
    auto running = resync_started(asked, "resync-7", 400);
    CHECK_FALSE(resync_requested(running));
    CHECK(running.resync_status() == "Resync resync-7: running");
    CHECK(refuse(running, {decision_kind::resync, ""}).code == code_resync_bound);
    CHECK(refuse(running, {decision_kind::apply_proposed, ""}).message ==
          "This review already has a bound resync operation; wait for its result.");
    // Removing the table is taken at any time: a resync waiting for its slot is called off.
    auto gone = begin_decision(running, accept(running, {decision_kind::remove, ""}), 450);
    CHECK(gone.hold.state() == pb::HOLD_STATE_REMOVED);
    CHECK(gone.note.resync == resync_state::none);
    auto done = resync_finished(running, true, "", 500);
    CHECK(done.hold.state() == pb::HOLD_STATE_RESUMED);
    CHECK(done.resync_status() == "Resync resync-7: done");
  }

  SECTION("a failed resync cannot be restarted from the review; remove still can") {
    auto running = resync_started(decide_ok(applied, {decision_kind::resync, ""}, 300), "resync-8", 400);
    auto failed = resync_finished(running, false, "source unreachable", 500);
    CHECK(failed.hold.state() == pb::HOLD_STATE_AWAITING_RESYNC);
    CHECK(failed.resync_status() == "Resync resync-8: failed (source unreachable)");
    CHECK(failed.hold.error() ==
          "resync failed: source unreachable. This operation cannot be restarted from the "
          "review card; reload the pipeline to recover this table.");
    auto e = refuse(failed, {decision_kind::resync, ""});
    CHECK(e.code == code_resync_failed);
    CHECK(e.message ==
          "This operation cannot be restarted from the review card; reload the pipeline to "
          "recover this table.");
    CHECK(accept(failed, {decision_kind::remove, ""}).remove);
  }
}

TEST_CASE("resync of a table that does not require one runs the DDL and then copies the table") {
  auto r = open_review(draft(rename_ddl), 100);
  auto p = accept(r, {decision_kind::resync, ""});
  CHECK(p.run_ddl);
  CHECK(p.resync);
  auto asked = decision_succeeded(begin_decision(r, p, 200), p, 201);
  CHECK(asked.hold.state() == pb::HOLD_STATE_AWAITING_RESYNC);
  CHECK(resync_requested(asked));
  CHECK(asked.note.ddl_ran);
}

TEST_CASE("reviews of one table are decided earliest first; remove at any time") {
  auto first = open_review(draft(rename_ddl), 100);
  auto second = open_review(draft(rename_ddl), 200);
  second.hold.set_source_change("public.orders: column id renamed to order_id (source LSN 0/16C0000)");
  const std::vector<review> both{first, second};
  auto e = check_decision(second, {decision_kind::apply_proposed, ""}, both);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().code == code_not_earliest);
  CHECK(e.error().message ==
        "Decide the reviews of shop.public.orders in order, earliest first: public.orders: "
        "column note renamed to notes (source LSN 0/16B3748) is paused: awaiting review.");
  CHECK(check_decision(first, {decision_kind::apply_proposed, ""}, both).has_value());
  CHECK(check_decision(second, {decision_kind::remove, ""}, both).has_value());
  // Once the earlier one is closed, the later one is next.
  const std::vector<review> later{replay_finished(first, 300), second};
  CHECK(check_decision(second, {decision_kind::apply_proposed, ""}, later).has_value());
}

TEST_CASE("a reload closes every open review") {
  auto r = open_review(draft(comment_proposal, true), 100);
  const auto closed = closed_by_reload(r, 200);
  CHECK(closed.hold.state() == pb::HOLD_STATE_RESUMED);
  // Told from a review decided and resumed.
  CHECK(closed.note.phase == "reloaded");
}

TEST_CASE("DDL with transaction control is refused: the decision runs in its own transaction") {
  CHECK(has_transaction_control("BEGIN; ALTER TABLE t ADD COLUMN c INT;"));
  CHECK(has_transaction_control("ALTER TABLE t ADD COLUMN c INT;\ncommit;"));
  CHECK(has_transaction_control("-- comment\nROLLBACK"));
  CHECK_FALSE(has_transaction_control("ALTER TABLE t ADD COLUMN \"begin\" INT"));
  CHECK_FALSE(has_transaction_control("-- BEGIN\nALTER TABLE t DROP COLUMN c"));
  CHECK_FALSE(has_transaction_control(
      "DO $x$ BEGIN IF true THEN RAISE EXCEPTION 'a;b'; END IF; END $x$; ALTER TABLE t DROP COLUMN c"));
  auto r = open_review(draft(rename_ddl), 100);
  CHECK(refuse(r, {decision_kind::apply_edited, "BEGIN; ALTER TABLE t ADD c INT; COMMIT;"}).code ==
        code_transaction_control);
}

TEST_CASE("the review note survives a round trip and a stale note is not read as the hold's own") {
  review_note n;
  n.hold_created_at_us = 100;
  n.decision = "resync_edited";
  n.phase = "ddl";
  n.decided_at_us = 250;
  n.ddl_ran = true;
  n.resync = resync_state::failed;
  n.resync_operation = "resync-3";
  n.resync_error = "line one\nline two";
  auto back = review_note::parse(n.serialize());
  CHECK(back.decision == n.decision);
  CHECK(back.phase == "ddl");
  CHECK(back.decided_at_us == 250);
  CHECK(back.ddl_ran);
  CHECK(back.resync == resync_state::failed);
  CHECK(back.resync_error == "line one line two");
  pb::HoldRecord h;
  h.set_created_at_us(100);
  CHECK(note_for(h, n.serialize()).decision == "resync_edited");
  h.set_created_at_us(999);  // a later hold of the same table
  review_note fresh;
  fresh.hold_created_at_us = 999;
  CHECK(note_for(h, n.serialize()) == fresh);
}
