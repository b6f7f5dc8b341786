#pragma once
// TOML text for the fixes messages suggest (`columns = { "my col" = "text" }`): a name
// that is not a bare key is quoted, so that the line pasted into flotilla.toml parses.

#include <algorithm>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace flotilla::schema {

/// A TOML basic string: quotes, backslashes and control characters escaped.
[[nodiscard]] inline std::string toml_string(std::string_view value) {
  std::string out = "\"";
  for (char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7F)
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(c));
        else
          out += ch;
    }
  }
  return out + "\"";
}

/// A TOML key: bare (A-Z a-z 0-9 _ -) as it is, any other quoted.
[[nodiscard]] inline std::string toml_key(std::string_view name) {
  const auto bare = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  };
  if (!name.empty() && std::all_of(name.begin(), name.end(), bare))
    return std::string(name);
  return toml_string(name);
}

/// A table's section header, `[sources.s.tables."t"]`, as messages suggest it.
[[nodiscard]] inline std::string table_header(std::string_view source, std::string_view table) {
  return "[sources." + toml_key(source) + ".tables." + toml_string(table) + "]";
}

}  // namespace flotilla::schema
