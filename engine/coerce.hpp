#pragma once
/// Converts row values read with a source column's type into the representation of a
/// declared (wider) type, per schema/rows.hpp: int -> decimal "5.00", int -> text "5",
/// date -> timestamp "2025-01-01 00:00:00", timestamp_ntz -> timestamp_tz "+00", ...
/// Only conversions schema::can_read_as allows are ever asked for.

#include <vector>

#include "schema/rows.hpp"
#include "schema/table.hpp"

namespace flotilla::engine {

/// The columns whose representation differs between `from` and `to` (same order).
[[nodiscard]] std::vector<std::size_t> columns_to_coerce(const schema::table_schema& from,
                                                         const schema::table_schema& to);

/// Converts those columns of every row in place.
void coerce_batch(schema::row_batch& batch, const schema::table_schema& from,
                  const schema::table_schema& to, const std::vector<std::size_t>& columns);

}  // namespace flotilla::engine
