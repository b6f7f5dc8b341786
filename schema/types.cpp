#include "schema/types.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace flotilla::schema {
namespace {

struct name_entry {
  std::string_view name;
  type_kind kind;
};

// Canonical names first (used by to_string), then accepted aliases.
constexpr std::array<name_entry, 16> canonical_names{{
    {"bool", type_kind::boolean},
    {"smallint", type_kind::smallint},
    {"int", type_kind::int32},
    {"bigint", type_kind::bigint},
    {"float", type_kind::float32},
    {"double", type_kind::float64},
    {"decimal", type_kind::decimal},
    {"varchar", type_kind::varchar},
    {"text", type_kind::text},
    {"date", type_kind::date},
    {"time", type_kind::time},
    {"timestamp_ntz", type_kind::timestamp_ntz},
    {"timestamp_tz", type_kind::timestamp_tz},
    {"json", type_kind::json},
    {"bytes", type_kind::bytes},
    {"uuid", type_kind::uuid},
}};

constexpr std::array<name_entry, 9> alias_names{{
    {"boolean", type_kind::boolean},
    {"integer", type_kind::int32},
    {"real", type_kind::float32},
    {"string", type_kind::text},
    {"numeric", type_kind::decimal},
    {"varbinary", type_kind::bytes},
    {"blob", type_kind::bytes},
    {"timestamp", type_kind::timestamp_ntz},
    {"timestamptz", type_kind::timestamp_tz},
}};

std::string lower_trim(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c)))
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

bool parse_int(std::string_view s, int& out) {
  if (s.empty())
    return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

type_error unknown(std::string_view text, std::string_view why) {
  return type_error{fmt::format("unknown or malformed type '{}'{}; valid types: {}", text, why,
                                valid_type_names())};
}

}  // namespace

std::string_view valid_type_names() {
  return "bool, smallint, int, bigint, float, double, decimal(p,s), varchar(n), text, date, "
         "time, timestamp_ntz, timestamp_tz, json, bytes, uuid";
}

std::expected<portable_type, type_error> parse_type(std::string_view text) {
  const std::string s = lower_trim(text);
  std::string_view base = s;
  std::string_view args;
  if (auto open = s.find('('); open != std::string::npos) {
    if (s.back() != ')')
      return std::unexpected(unknown(text, " (unbalanced parentheses)"));
    base = std::string_view(s).substr(0, open);
    args = std::string_view(s).substr(open + 1, s.size() - open - 2);
  }
  std::optional<type_kind> kind;
  for (const auto& e : canonical_names)
    if (e.name == base)
      kind = e.kind;
  for (const auto& e : alias_names)
    if (e.name == base)
      kind = e.kind;
  if (!kind)
    return std::unexpected(unknown(text, ""));

  const bool has_args = base.size() != s.size();
  if (*kind == type_kind::decimal) {
    if (!has_args)  // bare decimal: the common default precision
      return portable_type::decimal(38, 9);
    int p = 0, sc = 0;
    auto comma = args.find(',');
    bool ok = comma == std::string_view::npos ? parse_int(args, p)
                                              : parse_int(args.substr(0, comma), p) &&
                                                    parse_int(args.substr(comma + 1), sc);
    if (!ok)
      return std::unexpected(unknown(text, " (decimal takes (precision, scale))"));
    if (p < 1 || p > max_decimal_precision || sc < 0 || sc > p)
      return std::unexpected(type_error{fmt::format(
          "type '{}' is out of range: decimal precision must be 1..{} and scale 0..precision",
          text, max_decimal_precision)});
    return portable_type::decimal(p, sc);
  }
  if (*kind == type_kind::varchar) {
    if (!has_args)
      return portable_type::of(type_kind::text);
    int n = 0;
    if (!parse_int(args, n) || n < 1)
      return std::unexpected(unknown(text, " (varchar takes a positive length)"));
    return portable_type::varchar(n);
  }
  if (has_args)
    return std::unexpected(unknown(text, fmt::format(" ({} takes no parameters)", base)));
  return portable_type::of(*kind);
}

std::string to_string(const portable_type& t) {
  switch (t.kind) {
    case type_kind::decimal:
      return fmt::format("decimal({},{})", t.precision, t.scale);
    case type_kind::varchar:
      return fmt::format("varchar({})", t.length);
    default:
      for (const auto& e : canonical_names)
        if (e.kind == t.kind)
          return std::string(e.name);
  }
  return "text";
}

bool is_integer(type_kind k) { return integer_rank(k) > 0; }

int integer_rank(type_kind k) {
  switch (k) {
    case type_kind::smallint: return 1;
    case type_kind::int32: return 2;
    case type_kind::bigint: return 3;
    default: return 0;
  }
}

bool is_numeric(type_kind k) {
  return is_integer(k) || k == type_kind::float32 || k == type_kind::float64 ||
         k == type_kind::decimal;
}

bool is_string(type_kind k) { return k == type_kind::varchar || k == type_kind::text; }

}  // namespace flotilla::schema
