#pragma once
/// Safe-widening rules (seed 001). Pure predicates over canonical portable types, so each
/// dialect composes its own allowlist from the same parts and tests read like the seed's
/// table.

#include "schema/types.hpp"

namespace flotilla::dialects {

/// smallint -> int -> bigint, upward only.
[[nodiscard]] bool is_integer_widening(const schema::portable_type& from,
                                       const schema::portable_type& to);
/// float -> double.
[[nodiscard]] bool is_float_widening(const schema::portable_type& from,
                                     const schema::portable_type& to);
/// decimal(p1, s) -> decimal(p2, s) with p2 > p1: same scale, more precision.
[[nodiscard]] bool is_decimal_precision_widening(const schema::portable_type& from,
                                                 const schema::portable_type& to);
/// varchar(n1) -> varchar(n2) with n2 > n1, and varchar(n) -> text.
[[nodiscard]] bool is_varchar_widening(const schema::portable_type& from,
                                       const schema::portable_type& to);
/// numeric (integer, float, decimal) or bool -> text: a lossless representation change.
[[nodiscard]] bool is_text_representation(const schema::portable_type& from,
                                          const schema::portable_type& to);

/// Seed 001's default allowlist: the union of the five rules above.
[[nodiscard]] bool default_allowlist(const schema::portable_type& from,
                                     const schema::portable_type& to);

}  // namespace flotilla::dialects
