#include "schema/compat.hpp"

namespace flotilla::schema {

int integer_digits(type_kind k) {
  switch (k) {
    case type_kind::smallint: return 5;
    case type_kind::int32: return 10;
    case type_kind::bigint: return 19;
    default: return 0;
  }
}

bool can_read_as(const portable_type& from, const portable_type& to) {
  if (from == to)
    return true;
  const type_kind f = from.kind;
  const type_kind t = to.kind;
  if (t == type_kind::text)  // every value has a text form
    return true;
  if (f == type_kind::boolean)
    return is_integer(t) || (t == type_kind::decimal && to.precision - to.scale >= 1);
  if (is_integer(f)) {
    if (is_integer(t))
      return integer_rank(t) >= integer_rank(f);
    if (t == type_kind::decimal)
      return to.precision - to.scale >= integer_digits(f);
    if (t == type_kind::float64)
      return f != type_kind::bigint;  // 53-bit mantissa holds every int and smallint
    if (t == type_kind::float32)
      return f == type_kind::smallint;
    return false;
  }
  if (f == type_kind::float32)
    return t == type_kind::float64;
  if (f == type_kind::decimal && t == type_kind::decimal)
    return to.scale >= from.scale && to.precision - to.scale >= from.precision - from.scale;
  if (f == type_kind::varchar && t == type_kind::varchar)
    return to.length >= from.length;
  if (f == type_kind::uuid && t == type_kind::varchar)
    return to.length >= 36;
  if (f == type_kind::date)
    return t == type_kind::timestamp_ntz || t == type_kind::timestamp_tz;
  if (f == type_kind::timestamp_ntz)
    return t == type_kind::timestamp_tz;
  return false;
}

bool auto_widen_step(const portable_type& from, const portable_type& to) {
  if (from == to)
    return false;
  const type_kind f = from.kind;
  const type_kind t = to.kind;
  const bool up_the_numbers = (f == type_kind::boolean || is_integer(f) || f == type_kind::decimal) &&
                              (is_integer(t) || t == type_kind::decimal);
  if (up_the_numbers)
    return can_read_as(from, to);
  return f == type_kind::timestamp_ntz && t == type_kind::timestamp_tz;
}

}  // namespace flotilla::schema
