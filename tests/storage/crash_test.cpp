#include <catch2/catch.hpp>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include "storage/state_store.hpp"
#include "tests/storage/support.hpp"

using namespace flotilla::storage;
using flotilla::storage::test::open_store;
using flotilla::storage::test::temp_dir;

namespace {

constexpr int table_count = 400;
constexpr int kill_after = 120;
constexpr int writer_threads = 4;

std::string table(int i) { return "shop.t" + std::to_string(i); }

table_commit commit_for(int i) {
  table_commit c;
  c.watermark.emplace();
  c.watermark->set_value("w" + std::to_string(i));
  c.marker.emplace();
  c.marker->set_marker("m" + std::to_string(i));
  c.result.set_status("copied");
  c.result.set_rows(static_cast<std::uint64_t>(i));
  pb::OutboxEntry event;
  event.set_key(table(i));
  event.set_payload("finished " + std::to_string(i));
  c.events.push_back(event);
  return c;
}

/// The child: stage every table, then commit them from several threads and SIGKILL
/// itself while commits are still in flight. Never returns.
[[noreturn]] void commit_until_killed(const std::filesystem::path& state) {
  auto store = state_store::open(state);
  if (!store)
    ::_exit(2);
  for (int i = 0; i < table_count; ++i) {
    pb::StagedEntry staged;
    staged.set_location("stage" + std::to_string(i));
    if (!store->put(table(i), staged))
      ::_exit(3);
  }
  std::atomic<int> next{0};
  std::atomic<int> committed{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < writer_threads; ++w)
    writers.emplace_back([&] {
      for (int i = next++; i < table_count; i = next++) {
        if (!store->commit_table(table(i), commit_for(i)))
          ::_exit(4);
        ++committed;
      }
    });
  while (committed.load() < kill_after)
    std::this_thread::yield();
  ::kill(::getpid(), SIGKILL);
  for (;;)
    ::pause();
}

constexpr const char* child_env = "FLOTILLA_CRASH_TEST_STATE";

}  // namespace

// The child process of the test below. Hidden: it runs only when the test starts this
// binary again with its tag and the state directory in the environment.
TEST_CASE("commit until killed", "[.crash_child]") {
  const char* state = std::getenv(child_env);
  REQUIRE(state != nullptr);
  commit_until_killed(state);
}

TEST_CASE("after a kill -9 every table is either fully committed or untouched") {
  temp_dir dir;
  // The child starts this binary afresh rather than run on in a fork of it: the tests
  // before this one leave threads (RocksDB's background pool among them) whose locks a
  // fork could copy held.
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e)
    env_text.emplace_back(*e);
  env_text.push_back(std::string(child_env) + "=" + dir.state().string());
  std::vector<char*> envp;
  for (auto& e : env_text)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string tag = "[.crash_child]";
  char* argv[] = {self.data(), tag.data(), nullptr};
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execve(self.c_str(), argv, envp.data());
    ::_exit(5);
  }

  int wstatus = 0;
  REQUIRE(::waitpid(child, &wstatus, 0) == child);
  INFO("child exit status " << (WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1));
  REQUIRE(WIFSIGNALED(wstatus));
  REQUIRE(WTERMSIG(wstatus) == SIGKILL);

  auto store = open_store(dir);
  int committed = 0;
  int untouched = 0;
  std::set<std::string> committed_keys;
  for (int i = 0; i < table_count; ++i) {
    auto state = store.read_table(table(i));
    REQUIRE(state.has_value());
    bool all = state->watermark && state->marker && state->result && !state->staged;
    bool none = !state->watermark && !state->marker && !state->result && state->staged;
    INFO("table " << table(i));
    REQUIRE((all || none));
    if (all) {
      CHECK(state->watermark->value() == "w" + std::to_string(i));
      CHECK(state->marker->marker() == "m" + std::to_string(i));
      CHECK(state->result->rows() == static_cast<std::uint64_t>(i));
      committed_keys.insert(table(i));
      ++committed;
    } else {
      ++untouched;
    }
  }
  CHECK(committed >= kill_after);
  CHECK(committed + untouched == table_count);

  // The outbox holds exactly one event per committed table, in increasing sequence.
  auto events = store.scan_outbox();
  REQUIRE(events.has_value());
  std::set<std::string> event_keys;
  std::uint64_t last = 0;
  for (const auto& e : *events) {
    CHECK(e.sequence() > last);
    last = e.sequence();
    event_keys.insert(e.key());
  }
  CHECK(events->size() == committed_keys.size());
  CHECK(event_keys == committed_keys);

  // Appends continue after every sequence handed out before the crash.
  pb::OutboxEntry after;
  after.set_key("after");
  auto seq = store.append_outbox({&after, 1});
  REQUIRE(seq.has_value());
  CHECK(*seq > last);
}
