// The prepared heap (engine/heap.hpp): memory the run allocates, on the main thread and on
// other threads, lies in mappings that carry the huge page advice, large buffers come
// from the heap, and FLOTILLA_HUGE_PAGES=0 leaves glibc's defaults. Each case runs in a
// child process, since preparing the heap is once per process.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/heap.hpp"

namespace {

struct mapping {
  bool found = false;
  bool huge_advice = false;  // VmFlags "hg": madvise(MADV_HUGEPAGE) applies
  bool main_heap = false;    // "[heap]": the memory below the program break
  std::uintptr_t lo = 0, hi = 0;
};

/// The mapping of /proc/self/smaps that holds `p`.
mapping mapping_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  mapping m;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find(':') > space) {  // a range line: "lo-hi perms offset dev inode path"
      const auto lo = std::stoull(line.substr(0, dash), nullptr, 16);
      const auto hi = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = a >= lo && a < hi;
      if (inside)
        m = {true, false, line.find("[heap]") != std::string::npos, lo, hi};
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      std::istringstream flags(line.substr(8));
      for (std::string f; flags >> f;)
        m.huge_advice = m.huge_advice || f == "hg";
      return m;
    }
  }
  return m;
}

/// Whether this kernel takes the advice at all (no transparent huge pages built in: no).
bool kernel_takes_advice() {
  void* p = mmap(nullptr, 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const bool ok = p != MAP_FAILED && madvise(p, 4 << 20, MADV_HUGEPAGE) == 0;
  if (p != MAP_FAILED)
    munmap(p, 4 << 20);
  return ok;
}

/// Runs `body` in a child process; its exit status: 0 when every check held, else the
/// number of the first one that failed.
int in_child(int (*body)()) {
  const pid_t pid = fork();
  if (pid == 0)
    _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

int prepared_process() {
  flotilla::engine::prepare_process_heap();
  void* small = std::malloc(200);
  void* large = std::malloc(1 << 20);  // above glibc's default 128 KiB mapping threshold
  const mapping s = mapping_of(small), l = mapping_of(large);
  const mapping top = mapping_of(static_cast<char*>(sbrk(0)) - 1);  // the heap's top
  int failed = 0;
  if (!s.found || !l.found || !top.found)
    failed = 1;
  else if (!l.huge_advice)
    failed = 2;  // the large buffer lies in advised memory
  else if (!l.main_heap)
    failed = 3;  // ... in the heap, not in a mapping of its own
  else if (!top.huge_advice)
    failed = 4;
  int thread_failed = 0;
  std::thread t([&] {
    flotilla::engine::prepare_thread_heap();
    void* q = std::malloc(300);
    void* big = std::malloc(2 << 20);
    const mapping m = mapping_of(q), b = mapping_of(big);
    if (!m.found || !m.huge_advice)
      thread_failed = 5;
    else if (!b.found || !b.huge_advice)
      thread_failed = 6;
    std::free(big);
    std::free(q);
  });
  t.join();
  std::free(large);
  std::free(small);
  return failed ? failed : thread_failed;
}

int turned_off() {
  setenv("FLOTILLA_HUGE_PAGES", "0", 1);
  flotilla::engine::prepare_process_heap();
  void* large = std::malloc(1 << 20);
  const mapping l = mapping_of(large);
  int failed = 0;
  if (!l.found)
    failed = 1;
  else if (l.huge_advice)
    failed = 2;
  else if (l.hi - l.lo > (2u << 20))
    failed = 3;  // glibc's default: a mapping of its own, about the buffer's size
  std::thread t([&] {
    flotilla::engine::prepare_thread_heap();  // does nothing: the process was not prepared
    void* q = std::malloc(300);
    if (mapping_of(q).huge_advice)
      failed = 4;
    std::free(q);
  });
  t.join();
  std::free(large);
  return failed;
}

}  // namespace

TEST_CASE("the prepared heap: the main heap and thread heaps carry the huge page advice") {
  if (!kernel_takes_advice()) {
    WARN("skipped: this kernel has no transparent huge pages");
    return;
  }
  CHECK(in_child(prepared_process) == 0);
}

TEST_CASE("FLOTILLA_HUGE_PAGES=0 leaves the heap as glibc sets it up") {
  if (!kernel_takes_advice()) {
    WARN("skipped: this kernel has no transparent huge pages");
    return;
  }
  CHECK(in_child(turned_off) == 0);
}
