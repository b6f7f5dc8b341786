#include "schema/calendar.hpp"

#include <utility>

#include <fmt/format.h>

namespace flotilla::schema {

namespace {

/// The leading year of date text: its digits' end and value; nullopt without 4-6 digits
/// followed by '-'.
std::optional<std::pair<std::size_t, std::int64_t>> leading_year(std::string_view s,
                                                                  std::size_t from) {
  std::size_t pos = from;
  std::int64_t year = 0;
  while (pos < s.size() && (s[pos] >= '0' && s[pos] <= '9'))
    year = year * 10 + (s[pos++] - '0');
  if (pos - from < 4 || pos - from > 6 || pos >= s.size() || s[pos] != '-')
    return std::nullopt;
  return std::pair{pos, year};
}

}  // namespace

std::optional<std::string> iso_from_pg_era(std::string_view text) {
  if (!text.ends_with(" BC"))
    return std::nullopt;
  const std::string_view s = text.substr(0, text.size() - 3);
  const auto y = leading_year(s, 0);
  if (!y || y->second < 1)
    return std::nullopt;
  const std::int64_t astronomical = 1 - y->second;
  return fmt::format("{}{:04d}{}", astronomical < 0 ? "-" : "",
                     astronomical < 0 ? -astronomical : astronomical, s.substr(y->first));
}

std::optional<std::string> pg_era_from_iso(std::string_view text) {
  const bool minus = text.starts_with('-');
  const auto y = leading_year(text, minus ? 1 : 0);
  if (!y || (!minus && y->second != 0))
    return std::nullopt;
  const std::int64_t astronomical = minus ? -y->second : 0;
  return fmt::format("{:04d}{} BC", 1 - astronomical, text.substr(y->first));
}

}  // namespace flotilla::schema
