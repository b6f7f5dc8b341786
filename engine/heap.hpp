#pragma once
/// The process heap, prepared for a run that allocates tens of megabytes in a few hundred
/// milliseconds (a fleet's specs, reports, table events and run record).
///
/// With glibc's defaults the heap grows in small steps and every new 4 KiB page costs a
/// page fault: about 8,000 of them in an all-pruned run of 10,000 tables, a fifth of its
/// CPU time. Prepared, the heap grows in one 64 MiB step that the kernel may back with
/// transparent huge pages (2 MiB each), and large buffers come from the heap instead of
/// fresh mappings. The same all-pruned run then takes under 1,000 page faults.
///
/// Nothing here changes what a run does, only where its memory comes from. Huge pages
/// are only a request (`madvise`): with transparent huge pages set to `never`, or on a
/// C library other than glibc, both calls do nothing. `FLOTILLA_HUGE_PAGES=0` in the
/// environment turns both off (docs/performance.md, "The heap").

namespace flotilla::engine {

/// Call first in main(), before any thread starts.
void prepare_process_heap() noexcept;

/// Call at the start of a thread that allocates much (a scheduler worker, a reader):
/// its own glibc arena gets the same request. Idempotent per thread; does nothing
/// when prepare_process_heap() was not called or was turned off.
void prepare_thread_heap() noexcept;

}  // namespace flotilla::engine
