#pragma once
// Shared helpers of the config tests.

#include <algorithm>
#include <string>
#include <vector>

#include "config/load.hpp"

namespace flotilla::config::testing {

inline const diagnostic* find_code(const load_result& r, errc code) {
  auto it = std::find_if(r.diagnostics.begin(), r.diagnostics.end(),
                         [&](const diagnostic& d) { return d.code == code; });
  return it == r.diagnostics.end() ? nullptr : &*it;
}

inline std::size_t count_code(const load_result& r, errc code) {
  return static_cast<std::size_t>(std::count_if(r.diagnostics.begin(), r.diagnostics.end(),
                                                [&](const diagnostic& d) { return d.code == code; }));
}

inline std::string all_messages(const load_result& r) {
  std::string out;
  for (const auto& d : r.diagnostics)
    out += format(d) + "\n";
  return out;
}

/// A minimal valid prefix: one duckdb target.
inline const char* one_target = R"(
[targets.wh]
dialect = "duckdb"
path = "wh.duckdb"
)";

}  // namespace flotilla::config::testing
