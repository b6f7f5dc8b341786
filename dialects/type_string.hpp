#pragma once
/// Parsing of engine type strings (DESCRIBE, information_schema, format_type) into
/// portable types. Each dialect describes its own names as a table of `type_name`
/// entries; `lookup` does the normalising, the parameter checks and the errors, so
/// every dialect reports a bad type string the same way.

#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "schema/types.hpp"

namespace flotilla::dialects::detail {

/// A type string split into its normalised name and integer parameters:
/// "TIMESTAMP(6) WITH  TIME ZONE" -> {"timestamp with time zone", {6}, true}.
struct type_string {
  std::string name;              ///< ASCII lower case, single spaces, parameters removed
  std::vector<long long> params; ///< the integers between the parentheses
  bool has_params = false;       ///< "varchar()" has parentheses but no parameters
};

/// Splits `text`; nullopt when it is not "name[(int[, int...])][ more name]" (nested or
/// unbalanced parentheses, non-integer parameters, an empty name).
[[nodiscard]] std::optional<type_string> split_type_string(std::string_view text);

/// How an entry reads the parameters after its name.
enum class params {
  none,        ///< no parameters allowed ("BOOLEAN")
  ignored,     ///< an optional precision that Flotilla does not keep ("TIMESTAMP(6)")
  length,      ///< varchar: "(n)" -> varchar(n), bare -> text
  decimal,     ///< "(p, s)", "(p)" -> scale 0, bare -> the entry's default
  float_bits,  ///< PostgreSQL float(p): p <= 24 -> float, else (or bare) double
};

struct type_name {
  std::string_view name;  ///< normalised: lower case, single spaces
  schema::type_kind kind;
  params shape = params::none;
  /// decimal: precision and scale of the bare name (or of a parameterless fixed
  /// decimal such as DuckDB's UBIGINT -> decimal(20,0)).
  int precision = 0;
  int scale = 0;
};

// ---- error factories: every dialect words type errors the same way ---------------------
[[nodiscard]] schema::type_error unknown_type(std::string_view dialect, std::string_view text);
[[nodiscard]] schema::type_error out_of_range(std::string_view dialect, std::string_view text,
                                              std::string_view why);

/// Finds `text` in `names`. Errors name the type string and the dialect.
[[nodiscard]] std::expected<schema::portable_type, schema::type_error> lookup(
    std::string_view dialect, std::string_view text, std::span<const type_name> names);

/// decimal(p, s) clamped to an engine's largest precision: precision capped, scale kept
/// (capped by the new precision). Money-like scales matter more than 30+ integer digits.
/// `text` in ASCII lower case (identifiers compared case aside).
[[nodiscard]] std::string ascii_lower(std::string_view text);

[[nodiscard]] schema::portable_type clamp_decimal(const schema::portable_type& t,
                                                  int max_precision);

}  // namespace flotilla::dialects::detail
