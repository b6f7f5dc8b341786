#include "events/errc.hpp"

#include <fmt/format.h>

namespace flotilla::events {

std::string code_name(errc code) {
  const auto n = static_cast<unsigned>(code);
  return n > 100 ? fmt::format("FLT-E{:03}", n - 100) : fmt::format("FLT-D{:03}", n);
}

bool is_transient(errc code) { return code == errc::broker_unreachable; }

std::string error::text() const { return code_name(code) + ": " + message; }

}  // namespace flotilla::events
