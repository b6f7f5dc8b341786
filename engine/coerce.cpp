#include "engine/coerce.hpp"

#include <fmt/format.h>

namespace flotilla::engine {
namespace {

using schema::portable_type;
using schema::type_kind;
using schema::value;

std::string with_scale(std::string digits, int from_scale, int to_scale) {
  if (to_scale <= from_scale)
    return digits;
  if (from_scale == 0)
    digits += '.';
  digits.append(static_cast<std::size_t>(to_scale - from_scale), '0');
  return digits;
}

void coerce(value& v, const portable_type& from, const portable_type& to) {
  if (v.is_null())
    return;
  switch (to.kind) {
    case type_kind::text:
    case type_kind::varchar:
      if (v.kind == value::tag::integer)
        v = value::of_text(std::to_string(v.i));
      else if (v.kind == value::tag::real)
        v = value::of_text(fmt::format("{}", v.d));
      else if (v.kind == value::tag::boolean)
        v = value::of_text(v.b ? "true" : "false");
      return;
    case type_kind::decimal:
      if (v.kind == value::tag::integer)
        v = value::of_text(with_scale(std::to_string(v.i), 0, to.scale));
      else if (v.kind == value::tag::boolean)
        v = value::of_text(with_scale(v.b ? "1" : "0", 0, to.scale));
      else if (v.kind == value::tag::text && from.kind == type_kind::decimal)
        v.s = with_scale(std::move(v.s), from.scale, to.scale);
      return;
    case type_kind::smallint:
    case type_kind::int32:
    case type_kind::bigint:
      if (v.kind == value::tag::boolean)
        v = value::of_int(v.b ? 1 : 0);
      return;
    case type_kind::float32:
    case type_kind::float64:
      if (v.kind == value::tag::integer)
        v = value::of_real(static_cast<double>(v.i));
      return;
    case type_kind::timestamp_ntz:
      if (from.kind == type_kind::date && v.kind == value::tag::text)
        v.s += " 00:00:00";
      return;
    case type_kind::timestamp_tz:
      if (v.kind == value::tag::text) {
        if (from.kind == type_kind::date)
          v.s += " 00:00:00+00";
        else if (from.kind == type_kind::timestamp_ntz)
          v.s += "+00";  // a timestamp without zone is taken as UTC
      }
      return;
    default:
      return;
  }
}

}  // namespace

std::vector<std::size_t> columns_to_coerce(const schema::table_schema& from,
                                           const schema::table_schema& to) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < from.columns.size() && i < to.columns.size(); ++i)
    if (from.columns[i].type != to.columns[i].type)
      out.push_back(i);
  return out;
}

void coerce_batch(schema::row_batch& batch, const schema::table_schema& from,
                  const schema::table_schema& to, const std::vector<std::size_t>& columns) {
  const std::size_t rows = batch.rows();
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c : columns)
      coerce(batch.cells[r * batch.width + c], from.columns[c].type, to.columns[c].type);
}

}  // namespace flotilla::engine
