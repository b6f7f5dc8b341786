#pragma once
/// The proleptic Gregorian calendar the row values' dates and timestamps count in
/// (schema/rows.hpp): shared by the sources that read them and the sinks that write
/// them in binary.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flotilla::schema {

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's civil calendar
/// algorithm, public domain).
[[nodiscard]] constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11017);

/// Dates before year 1. Flotilla's text of a date or timestamp counts years as ISO 8601
/// does (astronomical: 1 BC is year 0000, 44 BC is -0043), as DuckDB reads and prints
/// them; PostgreSQL writes and reads "0044-03-15 BC" instead, and DuckDB reads that text
/// as the year 44 AD. iso_from_pg_era turns PostgreSQL's "... BC" text into ISO text,
/// pg_era_from_iso ISO text of a year before 1 into PostgreSQL's; both give nullopt for
/// any other text (no change needed).
[[nodiscard]] std::optional<std::string> iso_from_pg_era(std::string_view text);
[[nodiscard]] std::optional<std::string> pg_era_from_iso(std::string_view text);

}  // namespace flotilla::schema
