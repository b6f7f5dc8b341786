#pragma once
/// A warehouse handle that forwards to a connection owned by someone else: the stream
/// hands its own target connection to review decisions (cdc/decide.hpp), because a
/// DuckDB file admits one open database per process and the decision must run on the
/// connection the stream applies with. The borrowed connection must outlive the handle;
/// both are used from the stream's thread only.

#include <memory>

#include "sinks/warehouse.hpp"

namespace flotilla::cdc {

[[nodiscard]] std::unique_ptr<sinks::warehouse> borrow(sinks::warehouse& owner);

}  // namespace flotilla::cdc
