#pragma once
/// Portable column types, as seed 000 names them: bool, smallint, int, bigint, float,
/// double, decimal(p,s), varchar(n), text, date, time, timestamp_ntz, timestamp_tz,
/// json, bytes, uuid. Every dialect maps these to and from its physical types.

#include <compare>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace flotilla::schema {

enum class type_kind : std::uint8_t {
  boolean,
  smallint,
  int32,
  bigint,
  float32,
  float64,
  decimal,
  varchar,
  text,
  date,
  time,
  timestamp_ntz,
  timestamp_tz,
  json,
  bytes,
  uuid,
};

/// Largest decimal precision any dialect can hold (BigQuery BIGNUMERIC).
inline constexpr int max_decimal_precision = 76;

struct portable_type {
  type_kind kind = type_kind::text;
  /// decimal only: precision (1..76) and scale (0..precision).
  int precision = 0;
  int scale = 0;
  /// varchar only: maximum length in characters (>= 1).
  int length = 0;

  static portable_type of(type_kind k) { return portable_type{k}; }
  static portable_type decimal(int p, int s) { return portable_type{type_kind::decimal, p, s, 0}; }
  static portable_type varchar(int n) { return portable_type{type_kind::varchar, 0, 0, n}; }

  friend bool operator==(const portable_type&, const portable_type&) = default;
};

struct type_error {
  std::string message;
};

/// Parses a portable type name ("decimal(18,2)", "varchar(20)", "timestamp_tz").
/// Case-insensitive, spaces allowed around parameters. Aliases accepted: integer,
/// boolean, real, string, varbinary/blob, numeric. An unknown or malformed name is an
/// error naming it and listing the valid ones.
[[nodiscard]] std::expected<portable_type, type_error> parse_type(std::string_view text);

/// The canonical portable spelling: "decimal(18,2)", "varchar(20)", "int".
[[nodiscard]] std::string to_string(const portable_type& t);

/// The list of valid portable type names, for error messages.
[[nodiscard]] std::string_view valid_type_names();

[[nodiscard]] bool is_integer(type_kind k);
[[nodiscard]] bool is_numeric(type_kind k);  // integers, floats, decimal
[[nodiscard]] bool is_string(type_kind k);   // varchar, text
/// Rank of an integer kind by width (smallint 1, int 2, bigint 3), 0 otherwise.
[[nodiscard]] int integer_rank(type_kind k);

}  // namespace flotilla::schema
