#include "sources/errors.hpp"
#include "schema/toml_text.hpp"

#include <cctype>

#include <fmt/format.h>

namespace flotilla::sources::error {
namespace {

// Engine messages often end in a newline (libpq) or carry several lines (DuckDB's
// "Possible fixes" list, which names options Flotilla does not expose). Keep the lines
// that say what is wrong.
std::string tidy(std::string_view reason) {
  std::string out;
  std::size_t pos = 0;
  while (pos < reason.size()) {
    auto nl = reason.find('\n', pos);
    std::string_view line = reason.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    pos = nl == std::string_view::npos ? reason.size() : nl + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
      line.remove_prefix(1);
    if (line.starts_with("Possible fixes") || line.starts_with("LINE "))
      break;
    if (line.empty())
      continue;
    if (!out.empty())
      out += out.back() == ':' ? " " : "; ";
    out += line;
  }
  return out;
}

std::string preview(std::string_view value) {
  std::string out;
  for (unsigned char c : value.substr(0, 60)) {
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out.push_back(static_cast<char>(c));
  }
  if (value.size() > 60)
    out += "...";
  return out;
}

bool iequal_prefix(std::string_view s, std::size_t pos, std::string_view word) {
  if (pos + word.size() > s.size())
    return false;
  for (std::size_t i = 0; i < word.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[pos + i])) != word[i])
      return false;
  return true;
}

}  // namespace

source_error unknown_adapter(std::string_view source, std::string_view adapter) {
  return source_error(fmt::format(
      "source '{}': unknown adapter '{}'; use one of sqlite, duckdb, postgres, csv, json",
      source, adapter));
}

source_error missing_option(std::string_view source, std::string_view adapter,
                            std::string_view option) {
  return source_error(fmt::format("source '{}' (adapter {}) has no {}; set {} in [sources.{}]",
                                  source, adapter, option, option, source));
}

source_error cannot_open(std::string_view source, std::string_view what, std::string_view reason,
                         std::string_view fix) {
  return source_error(
      fmt::format("cannot open source '{}' ({}): {}; {}", source, what, tidy(reason), fix));
}

source_error cannot_connect(std::string_view source, std::string_view dsn,
                            std::string_view reason) {
  // A DSN libpq cannot parse is quoted whole in its reason: its password is not.
  std::string said(reason);
  const std::string shown = redact_dsn(dsn);
  if (!dsn.empty())
    for (std::size_t at = said.find(dsn); at != std::string::npos;
         at = said.find(dsn, at + shown.size()))
      said.replace(at, dsn.size(), shown);
  return source_error(fmt::format("cannot connect to source '{}' ({}): {}; check dsn", source,
                                  shown, tidy(said)));
}

source_error catalog_failed(std::string_view source, std::string_view where,
                            std::string_view reason, std::string_view fix) {
  return source_error(fmt::format("cannot read the catalog of source '{}' ({}): {}; {}", source,
                                  where, tidy(reason), fix));
}

source_error read_failed(std::string_view source, std::string_view table, std::string_view where,
                         std::string_view reason, std::string_view fix) {
  if (where.empty())
    return source_error(fmt::format("cannot read table '{}' of source '{}': {}; {}", table,
                                    source, tidy(reason), fix));
  return source_error(fmt::format("cannot read table '{}' of source '{}' ({}): {}; {}", table,
                                  source, where, tidy(reason), fix));
}

source_error bad_value(std::string_view source, std::string_view table, std::string_view column,
                       std::string_view value, const schema::portable_type& type,
                       std::uint64_t row) {
  return source_error(fmt::format(
      "source '{}', table '{}', column '{}', row {}: value '{}' is not a valid {}; fix the "
      "value at the source, or declare the column's type in flotilla.toml "
      "({} columns = {{ {} = \"text\" }})",
      source, table, column, row, preview(value), schema::to_string(type),
      schema::table_header(source, table), schema::toml_key(column)));
}

source_error bad_request(std::string_view source, std::string_view what) {
  return source_error(fmt::format("source '{}': {}", source, what));
}

std::string redact_dsn(std::string_view dsn) {
  std::string s(dsn);
  // URI form: scheme://user:password@host/...
  if (auto scheme = s.find("://"); scheme != std::string::npos) {
    const std::size_t start = scheme + 3;
    std::size_t end = s.find_first_of("/?", start);
    if (end == std::string::npos)
      end = s.size();
    auto at = s.rfind('@', end == 0 ? 0 : end - 1);
    if (at != std::string::npos && at >= start) {
      auto colon = s.find(':', start);
      if (colon != std::string::npos && colon < at)
        s.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // password=... (and sslpassword=..., the client key's passphrase) as a keyword
  // (key/value form) or a URI query parameter.
  for (std::size_t pos = 0; pos < s.size(); ++pos) {
    const std::size_t key = iequal_prefix(s, pos, "sslpassword") ? 11
                            : iequal_prefix(s, pos, "password")  ? 8
                                                                 : 0;
    if (key == 0)
      continue;
    if (pos > 0 && (std::isalnum(static_cast<unsigned char>(s[pos - 1])) || s[pos - 1] == '_'))
      continue;
    std::size_t p = pos + key;
    while (p < s.size() && s[p] == ' ')
      ++p;
    if (p >= s.size() || s[p] != '=')
      continue;
    ++p;
    while (p < s.size() && s[p] == ' ')
      ++p;
    std::size_t v = p;
    if (v < s.size() && s[v] == '\'') {
      std::size_t e = v + 1;
      while (e < s.size() && s[e] != '\'') {
        if (s[e] == '\\')
          ++e;
        ++e;
      }
      s.replace(v, std::min(e + 1, s.size()) - v, "***");
    } else {
      std::size_t e = v;
      while (e < s.size() && s[e] != ' ' && s[e] != '&')
        ++e;
      s.replace(v, e - v, "***");
    }
    pos = v + 3;
  }
  return s;
}

}  // namespace flotilla::sources::error
