#include "dialects/type_string.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>

#include <fmt/format.h>

namespace flotilla::dialects::detail {
namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

/// Lower case, whitespace runs folded to one space, no space next to ( ) or , and none
/// at either end.
std::string normalise(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : text) {
    if (is_space(c)) {
      pending_space = true;
      continue;
    }
    const bool punct = c == '(' || c == ')' || c == ',';
    if (pending_space && !out.empty() && !punct && out.back() != '(' && out.back() != ',')
      out.push_back(' ');
    pending_space = false;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

bool parse_param(std::string_view s, long long& out) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

}  // namespace

std::optional<type_string> split_type_string(std::string_view text) {
  const std::string s = normalise(text);
  type_string out;
  const auto open = s.find('(');
  if (open == std::string::npos) {
    if (s.empty() || s.find(')') != std::string::npos)
      return std::nullopt;
    out.name = s;
    return out;
  }
  const auto close = s.find(')', open);
  if (close == std::string::npos || s.find('(', open + 1) < close ||
      s.find_first_of("()", close + 1) != std::string::npos)
    return std::nullopt;
  out.has_params = true;
  std::string_view args = std::string_view(s).substr(open + 1, close - open - 1);
  while (!args.empty()) {
    const auto comma = args.find(',');
    long long v = 0;
    if (!parse_param(args.substr(0, comma), v))
      return std::nullopt;
    out.params.push_back(v);
    if (comma == std::string_view::npos)
      break;
    args.remove_prefix(comma + 1);
    if (args.empty())  // trailing comma
      return std::nullopt;
  }
  // "timestamp(6) with time zone" -> "timestamp with time zone"
  std::string head = s.substr(0, open);
  std::string tail = s.substr(close + 1);
  if (!head.empty() && head.back() == ' ')
    head.pop_back();
  if (!tail.empty() && tail.front() != ' ' && !head.empty())
    return std::nullopt;  // "decimal(12,2)[]" and the like
  out.name = head + tail;
  if (out.name.empty())
    return std::nullopt;
  return out;
}

schema::type_error unknown_type(std::string_view dialect, std::string_view text) {
  return schema::type_error{
      fmt::format("unknown {} type '{}': Flotilla has no portable type for it", dialect, text)};
}

schema::type_error out_of_range(std::string_view dialect, std::string_view text,
                                std::string_view why) {
  return schema::type_error{fmt::format("{} type '{}' is out of range: {}", dialect, text, why)};
}

std::expected<schema::portable_type, schema::type_error> lookup(std::string_view dialect,
                                                                std::string_view text,
                                                                std::span<const type_name> names) {
  using schema::portable_type;
  const auto split = split_type_string(text);
  if (!split)
    return std::unexpected(unknown_type(dialect, text));
  const auto entry = std::find_if(names.begin(), names.end(),
                                  [&](const type_name& n) { return n.name == split->name; });
  if (entry == names.end())
    return std::unexpected(unknown_type(dialect, text));

  const auto& p = split->params;
  auto too_many = [&](std::size_t n) { return split->has_params && (p.empty() || p.size() > n); };
  switch (entry->shape) {
    case params::none:
      if (split->has_params)
        return std::unexpected(unknown_type(dialect, text));
      if (entry->kind == schema::type_kind::decimal)
        return portable_type::decimal(entry->precision, entry->scale);
      return portable_type::of(entry->kind);
    case params::ignored:
      if (too_many(1))
        return std::unexpected(unknown_type(dialect, text));
      return portable_type::of(entry->kind);
    case params::length:
      if (too_many(1))
        return std::unexpected(unknown_type(dialect, text));
      if (p.empty())
        return portable_type::of(schema::type_kind::text);
      if (p[0] < 1 || p[0] > INT_MAX)
        return std::unexpected(out_of_range(dialect, text, "a length must be 1 or more"));
      return portable_type::varchar(static_cast<int>(p[0]));
    case params::float_bits:
      if (too_many(1))
        return std::unexpected(unknown_type(dialect, text));
      if (!p.empty() && (p[0] < 1 || p[0] > 53))
        return std::unexpected(out_of_range(dialect, text, "float precision must be 1..53"));
      return portable_type::of(!p.empty() && p[0] <= 24 ? schema::type_kind::float32
                                                        : schema::type_kind::float64);
    case params::decimal: {
      if (too_many(2))
        return std::unexpected(unknown_type(dialect, text));
      if (p.empty())
        return portable_type::decimal(entry->precision, entry->scale);
      const long long precision = p[0];
      const long long scale = p.size() > 1 ? p[1] : 0;
      if (precision < 1 || precision > schema::max_decimal_precision || scale > precision)
        return std::unexpected(out_of_range(
            dialect, text,
            fmt::format("decimal precision must be 1..{} and scale 0..precision",
                        schema::max_decimal_precision)));
      return portable_type::decimal(static_cast<int>(precision), static_cast<int>(scale));
    }
  }
  return std::unexpected(unknown_type(dialect, text));
}

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

schema::portable_type clamp_decimal(const schema::portable_type& t, int max_precision) {
  if (t.kind != schema::type_kind::decimal || t.precision <= max_precision)
    return t;
  return schema::portable_type::decimal(max_precision, std::min(t.scale, max_precision));
}

}  // namespace flotilla::dialects::detail
