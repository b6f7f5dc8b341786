#include <algorithm>
#include <cctype>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dialects/builtin.hpp"
#include "dialects/dialect.hpp"

namespace flotilla::dialects {
namespace {

struct entry {
  std::string_view name;  ///< what the user writes, lower case
  std::string_view canonical;
  std::unique_ptr<dialect> (*make)();
};

// Canonical names first, in dialect_names() order, then the aliases.
constexpr entry registry[] = {
    {"duckdb", "duckdb", detail::make_duckdb},
    {"postgres", "postgres", detail::make_postgres},
    {"sqlite", "sqlite", detail::make_sqlite},
    {"snowflake", "snowflake", detail::make_snowflake},
    {"bigquery", "bigquery", detail::make_bigquery},
    {"databricks", "databricks", detail::make_databricks},
    {"trino", "trino", detail::make_trino},
    {"postgresql", "postgres", detail::make_postgres},
    {"pg", "postgres", detail::make_postgres},
    {"sqlite3", "sqlite", detail::make_sqlite},
    {"bq", "bigquery", detail::make_bigquery},
    {"delta", "databricks", detail::make_databricks},
    {"spark", "databricks", detail::make_databricks},
    {"presto", "trino", detail::make_trino},
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::expected<std::unique_ptr<dialect>, dialect_error> make_dialect(std::string_view name) {
  const std::string key = lower(name);
  for (const auto& e : registry)
    if (e.name == key)
      return e.make();
  std::string aliases;
  for (const auto& e : registry)
    if (e.name != e.canonical)
      aliases += fmt::format("{}{} ({})", aliases.empty() ? "" : ", ", e.name, e.canonical);
  return std::unexpected(dialect_error{
      fmt::format("unknown dialect '{}'; known dialects: {}; aliases: {}", name,
                  fmt::join(dialect_names(), ", "), aliases)});
}

std::string_view canonical_dialect_name(std::string_view name) {
  const std::string key = lower(name);
  for (const auto& e : registry)
    if (e.name == key)
      return e.canonical;
  return {};
}

const std::vector<std::string_view>& dialect_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& e : registry)
      if (e.name == e.canonical)
        out.push_back(e.name);
    return out;
  }();
  return names;
}

}  // namespace flotilla::dialects
