#pragma once
/// Configuration diagnostics: every problem found in flotilla.toml, with a stable code,
/// the file and position, the key path, the bad value and what is allowed. The loader
/// collects all of them at once; the caller decides what to do (the CLI exits 2 on any
/// error). docs/configuration.md lists every code.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::config {

/// Stable diagnostic codes, printed as FLT-C001 ... Never renumber: scripts match them.
enum class errc : std::uint8_t {
  file_not_found = 1,         ///< FLT-C001 the config file is missing or unreadable
  syntax_error = 2,           ///< FLT-C002 the file is not valid TOML
  unknown_key = 3,            ///< FLT-C003 a key no section accepts (nearest key suggested)
  wrong_type = 4,             ///< FLT-C004 a value of the wrong TOML type
  invalid_value = 5,          ///< FLT-C005 a value outside its set (adapter, dialect, ...)
  missing_key = 6,            ///< FLT-C006 a required key is absent
  unknown_target = 7,         ///< FLT-C007 a source names no defined target, or none can be chosen
  invalid_column_type = 8,    ///< FLT-C008 a declared column type schema::parse_type rejects
  unknown_placeholder = 9,    ///< FLT-C009 a schema template names a tag a source lacks
  malformed_template = 10,    ///< FLT-C010 a schema template with unbalanced braces
  invalid_source_drift = 11,  ///< FLT-C011 on_source_drift other than ignore|warn|fail
  out_of_range = 12,          ///< FLT-C012 a number out of range or an empty string
  not_applicable = 13,        ///< FLT-C013 a key that does not apply to this adapter/dialect
  invalid_name = 14,          ///< FLT-C014 a source, target, tag or column name not allowed
  conflicting_keys = 15,      ///< FLT-C015 two keys that say the same thing, both set
  unknown_grant = 16,         ///< FLT-C016 a [policy] grant Flotilla does not know
  contract_without_columns = 17,  ///< FLT-C017 contract = "enforced" with no columns
  undeclared_column = 18,     ///< FLT-C018 cursor/unique key not declared under an enforced contract
  duplicate_name = 19,        ///< FLT-C019 two declarations of the same name
  invalid_filter = 20,        ///< FLT-C020 a --filter without '=' or with an empty key
  unknown_filter_key = 21,    ///< FLT-C021 a --filter key no selected source has as a tag
  excluded_section = 22,      ///< FLT-C022 (warning) exclude removes a table that has a section
  filter_selects_nothing = 23,  ///< FLT-C023 --filter values that no source matches
  environment_variable = 24,  ///< FLT-C024 a ${VAR} placeholder whose variable is not set
  plan_only_target = 25,      ///< FLT-C025 `run` selects a source loading into a plan-only target
  gate_on_declared_table = 26,  ///< FLT-C026 (warning) on_source_drift on a section that declares columns
  new_columns_under_contract = 27,  ///< FLT-C027 (warning) on_schema_change on an enforced section
};

enum class severity : std::uint8_t { error, warning };

/// One problem in the configuration (or in a --filter argument).
struct diagnostic {
  errc code = errc::invalid_value;
  severity level = severity::error;
  std::string file;         ///< the config file as given; empty for --filter arguments
  std::uint32_t line = 0;   ///< 1-based; 0 when unknown
  std::uint32_t column = 0; ///< 1-based; 0 when unknown
  std::string key;          ///< key path: sources.shop.tables."public.orders".columns.total
  std::string value;        ///< the offending value as written; empty when absent
  std::string allowed;      ///< what is allowed instead; empty when nothing better to say
  std::string message;      ///< one sentence, without the code or position

  [[nodiscard]] bool is_error() const { return level == severity::error; }
};

/// "FLT-C001".
[[nodiscard]] std::string code_name(errc c);

/// One line per diagnostic:
/// `flotilla.toml:12:3: error FLT-C005: sources.shop.adapter: unknown adapter 'sqllite'
///  (allowed: sqlite, duckdb, postgres, csv, json)`.
[[nodiscard]] std::string format(const diagnostic& d);

/// True when any diagnostic is an error (warnings do not count).
[[nodiscard]] bool has_errors(const std::vector<diagnostic>& ds);

/// Renders a key path from its parts, quoting parts that are not bare TOML keys:
/// {"sources", "shop", "tables", "public.orders"} -> sources.shop.tables."public.orders".
[[nodiscard]] std::string key_path(const std::vector<std::string_view>& parts);

/// Appends one part to a rendered key path, quoting it when needed.
[[nodiscard]] std::string key_path_append(std::string_view path, std::string_view part);

/// The candidate nearest to `word` by edit distance (case-insensitive), or empty when
/// none is close enough to be a plausible typo.
[[nodiscard]] std::string nearest(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace flotilla::config
