#include "engine/heap.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#define FLOTILLA_GLIBC_HEAP 1
extern char end;  // the end of the executable's data: the main heap (brk) starts above it
#endif

namespace flotilla::engine {

#ifdef FLOTILLA_GLIBC_HEAP
namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t mib = 1024 * kib;
/// How much the main heap grows at once, and how much free memory at its top is kept.
constexpr std::size_t top_pad = 64 * mib;
/// Allocations up to this size come from the heap instead of a mapping of their own
/// (glibc refuses more than half of an arena heap).
constexpr std::size_t mmap_threshold = 32 * mib;
/// glibc's arena heaps for other threads: this size, aligned to it (HEAP_MAX_SIZE on
/// 64-bit builds; only the `glibc.malloc.hugetlb=2` tunable changes it).
constexpr std::size_t arena_heap = 64 * mib;

constexpr std::size_t huge_page = 2 * mib;
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

std::atomic<bool> prepared{false};

bool turned_off() {
  const char* v = std::getenv("FLOTILLA_HUGE_PAGES");
  if (v && std::strcmp(v, "0") == 0)
    return true;
  // Whoever sets glibc's own huge page tunable manages the heap already.
  const char* t = std::getenv("GLIBC_TUNABLES");
  return t && std::strstr(t, "hugetlb");
}

bool in_main_heap(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return a >= reinterpret_cast<std::uintptr_t>(&end) &&
         a < reinterpret_cast<std::uintptr_t>(sbrk(0));
}

}  // namespace

void prepare_process_heap() noexcept {
  if (turned_off())
    return;
  if (mallopt(M_TOP_PAD, static_cast<int>(top_pad)) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * top_pad)) != 1 ||
      mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_threshold)) != 1)
    return;
  // Grow the main heap now, by top_pad at once, so that the advice below covers the
  // memory the run will use. Blocks of 64 KiB until the break moves (one or two).
  // No other thread exists yet: mallinfo2 describes the main heap alone.
  char* const before = static_cast<char*>(sbrk(0));
  const auto start = reinterpret_cast<std::uintptr_t>(before) - mallinfo2().arena;
  void* blocks[256];
  std::size_t n = 0;
  while (n < std::size(blocks) && static_cast<char*>(sbrk(0)) == before)
    if (!(blocks[n++] = std::malloc(64 * kib)))
      break;
  char* const after = static_cast<char*>(sbrk(0));
  for (std::size_t i = 0; i < n; ++i)
    std::free(blocks[i]);
  if (after <= before)
    return;
  // The whole heap gets the advice. The huge page that holds the old break, when the
  // heap covers all of it, is turned into a huge one at once (its small pages already in
  // use are copied), instead of faulting in the rest of it 4 KiB at a time.
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  auto lo = (start + page - 1) & ~(page - 1);
  const auto hi = reinterpret_cast<std::uintptr_t>(after) & ~(page - 1);
  if (hi <= lo)
    return;
  if (madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) != 0) {
    // Threads that allocated before this call have arenas of their own, which mallinfo2
    // counts too: `start` then lies below the heap. The memory from the old break up is
    // what matters; advise that.
    lo = reinterpret_cast<std::uintptr_t>(before) & ~(page - 1);
    if (hi <= lo || madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) != 0)
      return;
  }
  const auto first_huge = reinterpret_cast<std::uintptr_t>(before) & ~(huge_page - 1);
  if (first_huge >= lo && first_huge + huge_page <= hi)
    (void)madvise(reinterpret_cast<void*>(first_huge), huge_page, MADV_COLLAPSE);
  prepared.store(true, std::memory_order_release);
}

void prepare_thread_heap() noexcept {
  thread_local bool done = false;
  if (done || !prepared.load(std::memory_order_acquire))
    return;
  done = true;
  void* p = std::malloc(1);  // the thread's first allocation picks its arena
  if (!p)
    return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const bool main_arena = in_main_heap(p);
  std::free(p);
  if (main_arena)
    return;
  void* const heap = reinterpret_cast<void*>(a & ~(arena_heap - 1));
  (void)madvise(heap, arena_heap, MADV_HUGEPAGE);
  // The arena's first pages were touched when glibc made it: its first 2 MiB would stay
  // in small pages. Linux 6.1 and later turn them into one huge page now.
  (void)madvise(heap, huge_page, MADV_COLLAPSE);
}

#else

void prepare_process_heap() noexcept {}
void prepare_thread_heap() noexcept {}

#endif

}  // namespace flotilla::engine
