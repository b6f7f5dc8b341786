#pragma once
/// Identifier and literal quoting for the SQL the adapters generate. All three engines
/// (SQLite, DuckDB, PostgreSQL with standard_conforming_strings on) share these rules.

#include <string>
#include <string_view>

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

}  // namespace flotilla::sources
