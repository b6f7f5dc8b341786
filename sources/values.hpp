#pragma once
/// Exact conversions into the value representation of schema/rows.hpp, shared by the
/// adapters. Pure: no I/O. Every function that can meet malformed input returns
/// std::nullopt rather than guessing; the adapter turns that into an error naming the
/// table, column and value.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "schema/calendar.hpp"
#include "schema/rows.hpp"
#include "schema/types.hpp"

namespace flotilla::sources {

// ---- decimals --------------------------------------------------------------------

/// "-12.50" from the unscaled integer -1250 and scale 2.
[[nodiscard]] std::string format_scaled(__int128 unscaled, int scale);

/// Plain decimal text with exactly `scale` fractional digits. Accepts a sign, digits
/// with an optional point and an optional exponent ("1.5e3"); more fractional digits
/// than `scale` are rounded half away from zero (as PostgreSQL rounds on insert).
[[nodiscard]] std::optional<std::string> normalize_decimal(std::string_view text, int scale);

/// The decimal a double stands for: its shortest round-trip text (0.1 -> "0.1", not
/// 0.1000000000000000055...), rounded to `scale`. NaN and infinities have none.
[[nodiscard]] std::optional<std::string> decimal_from_double(double v, int scale);

/// Shortest text that reads back as the same double ("0.1", "1e+22").
[[nodiscard]] std::string shortest_double(double v);

// ---- dates and times -------------------------------------------------------------

/// Days since 1970-01-01 of a proleptic Gregorian date (schema/calendar.hpp), and back.
using schema::days_from_civil;
struct civil_date {
  std::int64_t year;
  unsigned month;
  unsigned day;
};
[[nodiscard]] civil_date civil_from_days(std::int64_t days);

/// "YYYY-MM-DD".
[[nodiscard]] std::string format_date(std::int64_t days);
/// "HH:MM:SS[.ffffff]" from microseconds since midnight (fraction without trailing zeros).
[[nodiscard]] std::string format_time(std::int64_t micros);
/// "YYYY-MM-DD HH:MM:SS[.ffffff]" from microseconds since the epoch, with "+00" when
/// `utc_offset` (timestamp_tz values are UTC instants).
[[nodiscard]] std::string format_timestamp(std::int64_t micros, bool utc_offset);

/// A timestamp read from text: microseconds since the epoch, already shifted to UTC when
/// the text carried an offset.
struct parsed_timestamp {
  std::int64_t micros = 0;
  bool had_offset = false;
};

/// Parses ISO-8601 / SQL timestamp text: "YYYY-MM-DD", then optionally 'T' or spaces and
/// "HH:MM[:SS[.fraction]]", then optionally "Z", "UTC" or an offset "+HH[:MM[:SS]]" /
/// "+HHMM". Fractions beyond microseconds are truncated.
[[nodiscard]] std::optional<parsed_timestamp> parse_timestamp(std::string_view text);
/// Parses "HH:MM[:SS[.fraction]]" to microseconds since midnight (24:00:00 allowed).
[[nodiscard]] std::optional<std::int64_t> parse_time(std::string_view text);

/// Canonical texts (see schema/rows.hpp) from free-form text, or nullopt.
[[nodiscard]] std::optional<std::string> normalize_date(std::string_view text);
[[nodiscard]] std::optional<std::string> normalize_time(std::string_view text);
/// timestamp_ntz drops an offset after shifting to UTC; timestamp_tz reads text without
/// an offset as UTC.
[[nodiscard]] std::optional<std::string> normalize_timestamp(std::string_view text, bool tz);
/// True when `text` is "YYYY-MM-DD HH:MM:SS[.ffffff]" (a valid date and time, a fraction
/// of 1-6 digits without trailing zeros): normalize_timestamp gives it back unchanged,
/// with "+00" appended for timestamp_tz.
[[nodiscard]] bool is_canonical_timestamp(std::string_view text);

/// SQLite's numeric date conventions: unix seconds, and julian day numbers.
/// Unix seconds in microseconds; nullopt past 64 bits of them.
[[nodiscard]] std::optional<std::int64_t> micros_from_unix_seconds(std::int64_t seconds);
[[nodiscard]] std::optional<std::int64_t> micros_from_julian_day(double jd);

// ---- other kinds -----------------------------------------------------------------

/// Lower-case "8-4-4-4-12" from 32 hex digits with or without dashes or braces.
[[nodiscard]] std::optional<std::string> normalize_uuid(std::string_view text);
/// Lower-case "8-4-4-4-12" from 16 raw bytes (big-endian, as RFC 4122 writes them).
[[nodiscard]] std::string format_uuid(const unsigned char* bytes);
/// true/false from 1/0, t/f, true/false, y/n, yes/no, on/off (any case).
[[nodiscard]] std::optional<bool> parse_bool(std::string_view text);
/// Whole-string integer.
[[nodiscard]] std::optional<std::int64_t> parse_int64(std::string_view text);
/// Whole-string double, also "Infinity", "-Infinity", "NaN" in any case.
[[nodiscard]] std::optional<double> parse_double(std::string_view text);

/// The text form of a cursor value, as it is stored for a watermark and handed back in
/// read_request::after: integers in decimal, reals in shortest round-trip form,
/// booleans "true"/"false", texts as they are.
[[nodiscard]] std::string cursor_text(const schema::value& v);

/// Whether a cursor value of `type` is one no later value can pass: NaN or +infinity of
/// a number, +infinity of a date or timestamp (PostgreSQL and DuckDB sort them after
/// every other value). As a watermark it would hide every row added after it.
[[nodiscard]] bool unbounded_cursor(const schema::value& v, const schema::portable_type& type);
[[nodiscard]] bool unbounded_cursor(std::string_view text, const schema::portable_type& type);

}  // namespace flotilla::sources
