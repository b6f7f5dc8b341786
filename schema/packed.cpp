#include "schema/packed.hpp"

#include <algorithm>

namespace flotilla::schema {

std::optional<std::string> pack_columns(const std::vector<column>& columns) {
  std::string packed;
  for (const auto& c : columns) {
    if (c.name.find('\0') != std::string::npos)
      return std::nullopt;
    packed += c.name;
    packed += '\0';
    packed += to_string(c.type);
    packed += '\0';
    packed += static_cast<char>('0' + (c.nullable ? 1 : 0) + (c.key ? 2 : 0));
  }
  return packed;
}

std::optional<portable_type> packed_reader::type_of(std::string_view spelling) {
  for (const auto& [known, type] : types_)
    if (known == spelling)
      return type;
  auto parsed = parse_type(spelling);
  if (!parsed)
    return std::nullopt;
  types_.emplace_back(std::string(spelling), *parsed);
  return *parsed;
}

template <class Fn>
bool packed_reader::each(std::string_view packed, Fn&& fn) {
  while (!packed.empty()) {
    const auto name_end = packed.find('\0');
    if (name_end == std::string_view::npos)
      return false;
    const auto type_end = packed.find('\0', name_end + 1);
    if (type_end == std::string_view::npos || type_end + 1 >= packed.size())
      return false;
    const char flags = packed[type_end + 1];
    if (flags < '0' || flags > '3')
      return false;
    auto type = type_of(packed.substr(name_end + 1, type_end - name_end - 1));
    if (!type)
      return false;
    fn(packed.substr(0, name_end), *type, flags - '0');
    packed.remove_prefix(type_end + 2);
  }
  return true;
}

std::optional<std::vector<column>> packed_reader::unpack(std::string_view packed) {
  std::vector<column> out;
  // Two NULs per column: one allocation for the table's columns.
  out.reserve(static_cast<std::size_t>(std::count(packed.begin(), packed.end(), '\0')) / 2);
  const bool ok = each(packed, [&](std::string_view name, const portable_type& type, int bits) {
    out.push_back(column{std::string(name), type, (bits & 1) != 0, (bits & 2) != 0});
  });
  if (!ok)
    return std::nullopt;
  return out;
}

}  // namespace flotilla::schema
