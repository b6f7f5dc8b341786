// The harness's child processes: started by the launcher, they report their own peak
// memory and run with default signal handling, whatever the harness holds or ignores.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

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

TEST_CASE("a child that signals its whole process group ends only itself, in a group of its own") {
  // pgcopydb sends SIGTERM to "all processes in our process group" when it fails: in the
  // harness's group, that ended the harness and whatever started it.
  start_launcher();
  child_options own;
  own.own_group = true;
  const auto r = run_child({"sh", "-c", "kill -TERM 0; sleep 5"}, own);
  CHECK(r.exit_code == 128 + 15);
  CHECK(r.signal == 15);
  CHECK(r.describe_failure() == "killed by signal 15 (SIGTERM): (no output)");
  // This process and the launcher lived through it.
  CHECK(run_child({"sh", "-c", "exit 0"}).exit_code == 0);
}

TEST_CASE("a Ctrl-C the launcher gets reaches a child in a group of its own") {
  // The terminal's Ctrl-C goes to the harness's group, which such a child is not in: the
  // launcher passes it on. The child sends it to the launcher here: its parent is the
  // guard a child in a group of its own runs under, whose parent is the launcher.
  start_launcher();
  child_options own;
  own.own_group = true;
  const auto r = run_child(
      {"sh", "-c",
       "kill -INT $(awk '{print $4}' /proc/$PPID/stat); sleep 5; echo not interrupted"},
      own);
  CHECK(r.signal == 2);
  CHECK(r.out.empty());
  CHECK(run_child({"sh", "-c", "exit 0"}).exit_code == 0);
}

TEST_CASE("a child in a group of its own leaves no process behind when the launcher ends") {
  // pgcopydb's workers outlived a harness killed with -9 as orphans. The child here forks
  // a worker that would sleep on; the launcher is killed while both run.
  const std::string mark = "flotilla-guard-test-" + std::to_string(::getpid());
  const pid_t harness = ::fork();
  REQUIRE(harness >= 0);
  if (harness == 0) {
    start_launcher();
    child_options own;
    own.own_group = true;
    (void)run_child({"bash", "-c", "(exec -a " + mark + " sleep 30) & (exec -a " + mark +
                                     " sleep 30); wait"},
                    own);
    ::_exit(0);
  }
  // Wait for the two sleepers, then end the harness as kill -9 would.
  const auto count = [&] {
    return run_child({"sh", "-c", "pgrep -fc '^" + mark + "' || true"}).out;
  };
  for (int i = 0; i < 500 && count() != "2\n"; ++i)
    ::usleep(10000);
  REQUIRE(count() == "2\n");
  ::kill(harness, SIGKILL);
  int status = 0;
  ::waitpid(harness, &status, 0);
  for (int i = 0; i < 500 && count() != "0\n"; ++i)
    ::usleep(10000);
  CHECK(count() == "0\n");
}

TEST_CASE("a failure's report keeps a long log's first error beside its end") {
  child_result r;
  r.exit_code = 12;
  r.err = "starting\nERROR: the cause\n" + std::string(3000, 'x') + "\nthe end\n";
  const auto text = r.describe_failure();
  CHECK(text.starts_with("exit code 12: first error: ERROR: the cause\n..."));
  CHECK(text.ends_with("the end\n"));
}

TEST_CASE("a harness killed with -9 takes its launcher and the path it runs with it") {
  // The path went on for as long as it took, and took a core from the next run's paths.
  const std::string file = "/tmp/flotilla_measure_pdeath_" + std::to_string(::getpid());
  std::remove(file.c_str());
  const pid_t harness = ::fork();
  REQUIRE(harness >= 0);
  if (harness == 0) {
    start_launcher();
    (void)run_child({"sh", "-c", "echo $$ > " + file + ".tmp && mv " + file + ".tmp " + file +
                                     " && exec sleep 60"});
    ::_exit(0);
  }
  std::string pid;
  for (int i = 0; i < 200 && pid.empty(); ++i) {
    std::ifstream in(file);
    std::getline(in, pid);
    if (pid.empty())
      ::usleep(50'000);
  }
  REQUIRE(!pid.empty());
  ::kill(harness, SIGKILL);
  ::waitpid(harness, nullptr, 0);
  const auto gone = [&] {
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string line;
    if (!std::getline(stat, line))
      return true;
    const auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
  };
  bool ended = false;
  for (int i = 0; i < 100 && !(ended = gone()); ++i)
    ::usleep(50'000);
  CHECK(ended);
  std::remove(file.c_str());
}
