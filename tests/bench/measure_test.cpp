// The harness's child processes: started by the launcher, they report their own peak
// memory and run with default signal handling, whatever the harness holds or ignores.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "bench/measure.hpp"

using namespace flotilla::bench;

TEST_CASE("a child's peak memory is its own, not the harness's at the time it starts") {
  start_launcher();
  // The harness grows after the launcher started (a scenario's in-process data, say).
  constexpr std::size_t big = 512u << 20;
  std::unique_ptr<char[]> ballast(new char[big]);
  std::memset(ballast.get(), 1, big);
  const auto r = run_child({"/bin/true"});
  CHECK(r.exit_code == 0);
  // Forked from this process, /bin/true would report >= 512 MB (the kernel keeps the
  // replaced image's high-water mark across exec).
  CHECK(r.peak_rss_kb < 128 * 1024);
  CHECK(ballast[big - 1] == 1);
}

TEST_CASE("the launcher runs the child with this process's environment and options") {
  start_launcher();
  ::setenv("FLOTILLA_MEASURE_TEST", "set after start", 1);
  const auto r = run_child({"sh", "-c", "printf '%s|%s|%s' \"$FLOTILLA_MEASURE_TEST\" \"$EXTRA\" \"$PWD\"; "
                                        "echo oops >&2; exit 3"},
                           child_options{"/tmp", {{"EXTRA", "x y"}}});
  CHECK(r.exit_code == 3);
  CHECK(r.out == "set after start|x y|/tmp");
  CHECK(r.err == "oops\n");
  CHECK(r.wall_s > 0);
}

TEST_CASE("a Ctrl-C reaches the child: the launcher ignores it, the child does not") {
  start_launcher();
  const auto r = run_child({"sh", "-c", "kill -INT $$; sleep 5"});
  CHECK(r.exit_code == 128 + 2);
  const auto again = run_child({"sh", "-c", "exit 0"});  // the launcher survived it
  CHECK(again.exit_code == 0);
}

TEST_CASE("a program that cannot be executed is reported as such") {
  start_launcher();
  const auto r = run_child({"/nonexistent/flotilla-measure-test"});
  CHECK(r.exit_code == 127);
  CHECK(r.err.find("cannot execute /nonexistent/flotilla-measure-test") != std::string::npos);
}
