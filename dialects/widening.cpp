#include "dialects/widening.hpp"

namespace flotilla::dialects {

using schema::portable_type;
using schema::type_kind;

bool is_integer_widening(const portable_type& from, const portable_type& to) {
  const int a = schema::integer_rank(from.kind);
  const int b = schema::integer_rank(to.kind);
  return a > 0 && b > a;
}

bool is_float_widening(const portable_type& from, const portable_type& to) {
  return from.kind == type_kind::float32 && to.kind == type_kind::float64;
}

bool is_decimal_precision_widening(const portable_type& from, const portable_type& to) {
  return from.kind == type_kind::decimal && to.kind == type_kind::decimal &&
         from.scale == to.scale && to.precision > from.precision;
}

bool is_varchar_widening(const portable_type& from, const portable_type& to) {
  if (from.kind != type_kind::varchar)
    return false;
  return to.kind == type_kind::text || (to.kind == type_kind::varchar && to.length > from.length);
}

bool is_text_representation(const portable_type& from, const portable_type& to) {
  return to.kind == type_kind::text &&
         (schema::is_numeric(from.kind) || from.kind == type_kind::boolean);
}

bool default_allowlist(const portable_type& from, const portable_type& to) {
  return is_integer_widening(from, to) || is_float_widening(from, to) ||
         is_decimal_precision_widening(from, to) || is_varchar_widening(from, to) ||
         is_text_representation(from, to);
}

}  // namespace flotilla::dialects
