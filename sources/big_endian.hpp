// Big-endian integers, as PostgreSQL's wire protocol, logical replication messages and
// binary COPY carry them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flotilla::sources {

/// The unsigned big-endian integer in the `n` bytes (at most 8) at `p`.
[[nodiscard]] inline std::uint64_t big_endian(const char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i)
    v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

}  // namespace flotilla::sources
