// kill -9: a held table and its kept changes survive a killed process, and a decision
// killed while its DDL runs on PostgreSQL changed nothing and says so after the restart.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

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

/// Runs `body` in a child process; returns its pid. The child never returns.
template <class F>
pid_t spawn(F body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("kill -9 after a hold was written: the hold and its kept changes are there after the restart") {
  temp_dir dir;
  const auto draft = held_draft(test::orders(), drop_column{"id"},
                                target_info{"wh", target_kind::postgres, {"", "s", "orders"}, std::nullopt});
  const pid_t child = spawn([&] {
    auto s = storage::state_store::open(dir.path() / "state");
    if (!s)
      ::_exit(4);
    if (!create_review(*s, draft, std::vector{kept("0/A", "one"), kept("0/B", "two")}, now_us()))
      ::_exit(5);
    if (!s->append_held_changes("wh", draft.table(), std::vector{kept("0/C", "three")}))
      ::_exit(6);
    ::raise(SIGKILL);  // no close, no destructor
  });
  const int status = wait_for(child);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);

  auto store = test::open_store(dir.path());
  auto r = load_review(store, "wh", draft.table());
  REQUIRE(r.has_value());
  REQUIRE(r->has_value());
  CHECK((*r)->hold.state() == pb::HOLD_STATE_AWAITING_REVIEW);
  CHECK((*r)->hold.kind() == "drop_column");
  CHECK((*r)->hold.proposed_ddl() == draft.proposed_ddl());
  auto changes = store.scan_held_changes("wh", draft.table());
  REQUIRE(changes.has_value());
  REQUIRE(changes->size() == 3);
  CHECK((*changes)[0].payload() == "one");
  CHECK((*changes)[1].payload() == "two");
  CHECK((*changes)[2].payload() == "three");
  CHECK((*changes)[2].sequence() == 3);
}

TEST_CASE("kill -9 while the decision's DDL runs: rolled back on the target, the review says it was interrupted") {
  temp_dir dir;
  test_target t("postgres");
  t.exec("CREATE TABLE " + t.qualified() + " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR(100), code TEXT)");
  const std::string table = "shop.public.orders_" + test::unique_suffix();
  {
    auto store = test::open_store(dir.path());
    REQUIRE(create_review(store, held_draft(test::orders(table.substr(5)), rename_column{"id", "order_id"}, t.info()),
                          {}, now_us()));
  }
  // This connection holds an advisory lock the decision's DDL waits for, so the DDL is
  // in flight, its first statement done, when the process is killed.
  const long long key = 4242000000LL + ::getpid();
  auto holder = t.open();
  holder->execute({"SELECT pg_advisory_lock(" + std::to_string(key) + ")"});
  const std::string ddl = "ALTER TABLE " + t.qualified() + " ADD COLUMN extra INTEGER;\nSELECT pg_advisory_xact_lock(" +
                          std::to_string(key) + ");";
  const auto opener = t.opener();
  const pid_t child = spawn([&] {
    auto s = storage::state_store::open(dir.path() / "state");
    if (!s)
      ::_exit(4);
    (void)carry_out(*s, opener, "wh", table, {decision_kind::apply_edited, ddl}, now_us());
    ::_exit(0);
  });
  // Wait until the child's DDL is blocked on the lock.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool waiting = false;
  while (!waiting && std::chrono::steady_clock::now() < give_up)
    waiting = !holder->query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = " +
                             std::to_string(static_cast<unsigned>(key & 0xffffffff)))
                   .empty();
  REQUIRE(waiting);
  ::kill(child, SIGKILL);
  const int status = wait_for(child);
  REQUIRE(WIFSIGNALED(status));
  holder->execute({"SELECT pg_advisory_unlock(" + std::to_string(key) + ")"});

  auto store = test::open_store(dir.path());
  auto before = load_review(store, "wh", table);
  REQUIRE(before.has_value());
  REQUIRE(before->has_value());
  CHECK((*before)->hold.state() == pb::HOLD_STATE_APPLYING);  // recorded before the DDL ran
  CHECK((*before)->hold.applied_ddl() == ddl);
  // The killed session's transaction is rolled back by the server once it notices.
  bool gone = false;
  const auto give_up2 = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!gone && std::chrono::steady_clock::now() < give_up2)
    gone = holder->query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = " +
                         std::to_string(static_cast<unsigned>(key & 0xffffffff)))
               .empty();
  REQUIRE(gone);
  auto rec = recover_interrupted(store, opener, now_us());
  REQUIRE(rec.size() == 1);
  auto after = load_review(store, "wh", table);
  REQUIRE(after.has_value());
  CHECK((*after)->hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED);
  CHECK_THAT((*after)->hold.error(), Catch::Contains("interrupted by a restart"));
  auto cols = t.columns();
  CHECK(std::find(cols.begin(), cols.end(), "extra") == cols.end());
}
