// A process killed with SIGKILL in the middle of a load leaves the target as it was,
// and the next load finishes the job.

#include <csignal>
#include <cstdio>

#include <sys/wait.h>
#include <unistd.h>

#include "tests/sinks/sink_fixture.hpp"

using namespace flotilla;
using namespace flotilla::sinks;
using namespace flotilla::sinks::testing;

namespace {

schema::table_schema people() { return cols({col("id", "bigint", true), col("name", "text")}); }

std::vector<std::vector<value>> rows(int from, int to) {
  std::vector<std::vector<value>> out;
  for (int i = from; i <= to; ++i)
    out.push_back({I(i), T("n" + std::to_string(i))});
  return out;
}

/// Runs `body` in a child process that kills itself with SIGKILL when `body` returns.
template <class F>
void in_killed_child(F body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "load in the child failed: %s\n", e.what());
      ::_exit(3);  // the parent sees an exit instead of the kill
    }
    ::kill(::getpid(), SIGKILL);
    ::_exit(4);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

}  // namespace

TEST_CASE("a load killed before commit leaves the old table and token, and a rerun completes it") {
  test_target target(GENERATE(from_range(engines())));
  const load_mode mode = GENERATE(load_mode::replace, load_mode::append, load_mode::merge);
  CAPTURE(target.engine(), static_cast<int>(mode));
  const auto t = target.table("people");
  {
    auto wh = target.open();
    load(*wh, t, people(), mode, rows(1, 3), {"id"}, "w=3");
  }  // closed: the child opens the database file itself

  in_killed_child([&] {
    auto wh = target.open();
    auto w = wh->begin_load(load_request{t, people(), mode, {"id"}, std::string("w=50")});
    w->write(batch(rows(mode == load_mode::append ? 4 : 1, 50)));
    if (target.engine() != "postgres")
      return;  // killed with the rows written, before commit
    // PostgreSQL: kill in the middle of COPY, with data on the wire.
    w->write(batch(rows(51, 60)));
  });

  auto wh = target.open();
  CHECK(count(*wh, t) == 3);
  CHECK(wh->committed_token(t) == "w=3");
  load(*wh, t, people(), mode, mode == load_mode::append ? rows(4, 50) : rows(1, 50), {"id"},
       "w=50");
  CHECK(count(*wh, t) == 50);
  CHECK(wh->committed_token(t) == "w=50");
  CHECK_FALSE(wh->describe(target.table("people__flotilla_staging")).has_value());
  CHECK_FALSE(wh->describe(target.table("people__flotilla_merge")).has_value());
}
