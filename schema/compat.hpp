#pragma once
/// Portable type compatibility, independent of any warehouse:
///   - can_read_as: every value of `from` is exactly representable in `to` (seed 000:
///     "a type the source can't be read as" fails the table; also narrowing).
///   - auto_widen_step: the one lattice inferred columns may widen along on their own
///     when auto_widen is on (seed 000): bool -> int -> decimal, timestamp_ntz ->
///     timestamp_tz; never to float, text or json.

#include "schema/types.hpp"

namespace flotilla::schema {

[[nodiscard]] bool can_read_as(const portable_type& from, const portable_type& to);

[[nodiscard]] bool auto_widen_step(const portable_type& from, const portable_type& to);

/// Decimal digits needed left of the point for every value of an integer kind
/// (smallint 5, int 10, bigint 19); 0 for other kinds.
[[nodiscard]] int integer_digits(type_kind k);

}  // namespace flotilla::schema
