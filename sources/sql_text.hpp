#pragma once
/// Identifier and literal quoting for the SQL the adapters generate. All three engines
/// (SQLite, DuckDB, PostgreSQL with standard_conforming_strings on) share these rules.

#include <string>
#include <string_view>
#include <vector>

namespace flotilla::sources {

/// "name" with embedded double quotes doubled: a table called `a"b; drop` stays a name.
[[nodiscard]] inline std::string quote_ident(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('"');
  for (char c : name) {
    if (c == '"')
      out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

/// 'text' with embedded single quotes doubled (backslashes are not special).
[[nodiscard]] inline std::string quote_literal(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('\'');
  for (char c : text) {
    if (c == '\'')
      out.push_back('\'');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

/// The WHERE clause of an incremental read past `after` (an SQL value: a literal, or a
/// parameter such as ?1) of the quoted cursor column `cursor`; with `inclusive_key`
/// (source column names), also the rows at `after` whose key holds no NULL.
[[nodiscard]] inline std::string past_watermark(const std::string& cursor,
                                                const std::string& after,
                                                const std::vector<std::string>& inclusive_key) {
  std::string out = " WHERE " + cursor + " > " + after;
  if (inclusive_key.empty())
    return out;
  out += " OR (" + cursor + " = " + after;
  for (const auto& k : inclusive_key)
    out += " AND " + quote_ident(k) + " IS NOT NULL";
  return out + ")";
}

}  // namespace flotilla::sources
