#include "config/errc.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

#include <fmt/format.h>

namespace flotilla::config {

std::string code_name(errc c) {
  return fmt::format("FLT-C{:03}", static_cast<int>(c));
}

std::string format(const diagnostic& d) {
  std::string out;
  if (!d.file.empty()) {
    out += d.file;
    if (d.line != 0)
      out += fmt::format(":{}:{}", d.line, d.column);
    out += ": ";
  }
  out += d.is_error() ? "error " : "warning ";
  out += code_name(d.code);
  out += ": ";
  if (!d.key.empty()) {
    out += d.key;
    out += ": ";
  }
  out += d.message;
  // Messages such as "expected a string, found an integer" already say what is allowed.
  if (!d.allowed.empty() && d.message.find(d.allowed) == std::string::npos)
    out += fmt::format(" (allowed: {})", d.allowed);
  return out;
}

bool has_errors(const std::vector<diagnostic>& ds) {
  return std::any_of(ds.begin(), ds.end(), [](const diagnostic& d) { return d.is_error(); });
}

namespace {

bool is_bare_key(std::string_view s) {
  if (s.empty())
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

void append_part(std::string& out, std::string_view part) {
  if (!out.empty())
    out.push_back('.');
  if (is_bare_key(part)) {
    out.append(part);
    return;
  }
  out.push_back('"');
  for (char c : part) {
    if (c == '"' || c == '\\')
      out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
}

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Optimal string alignment distance (Levenshtein plus adjacent transpositions), ASCII
// case-insensitive: "on_schema_chnage" is one edit from "on_schema_change".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j)
    prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

}  // namespace

std::string key_path(const std::vector<std::string_view>& parts) {
  std::string out;
  for (auto p : parts)
    append_part(out, p);
  return out;
}

std::string key_path_append(std::string_view path, std::string_view part) {
  std::string out{path};
  append_part(out, part);
  return out;
}

std::string nearest(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::size_t best = std::numeric_limits<std::size_t>::max();
  std::string_view pick;
  for (auto c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best) {
      best = d;
      pick = c;
    }
  }
  // A plausible typo: at most a third of the word wrong (and at least 2 edits allowed).
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  if (!pick.empty() && best <= limit && best < std::max(word.size(), pick.size()))
    return std::string{pick};
  // A shortened value ("append" for "append_new_columns"): the one candidate it begins.
  std::string_view only;
  if (word.size() >= 3)
    for (auto c : candidates)
      if (c.size() > word.size() && c.substr(0, word.size()) == word) {
        if (!only.empty())
          return {};
        only = c;
      }
  if (!only.empty() || word.size() < 4)
    return std::string{only};
  // A shortened value with a typo ("apend" for "append_new_columns"): the one candidate
  // whose beginning is one edit away from it.
  for (auto c : candidates) {
    if (c.size() <= word.size() + 1)
      continue;
    bool close = false;
    for (std::size_t n : {word.size() - 1, word.size(), word.size() + 1})
      close = close || edit_distance(word, c.substr(0, n)) <= 1;
    if (close) {
      if (!only.empty())
        return {};
      only = c;
    }
  }
  return std::string{only};
}

}  // namespace flotilla::config
