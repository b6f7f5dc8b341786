#include "config/selection.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace flotilla::config {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

char fold(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Iterative `*` matcher with single backtrack point: linear in practice, no recursion.
bool glob(std::string_view p, std::string_view t, bool fold_case) {
  auto eq = [fold_case](char a, char b) { return fold_case ? fold(a) == fold(b) : a == b; };
  std::size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (pi < p.size() && eq(p[pi], t[ti])) {
      ++pi;
      ++ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*')
    ++pi;
  return pi == p.size();
}

// The part after the first '.', or the whole name when bare.
std::string_view table_part(std::string_view name) {
  auto dot = name.find('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

bool qualified(std::string_view name) {
  return name.find('.') != std::string_view::npos;
}

diagnostic filter_error(std::string_view text, std::string message) {
  diagnostic d;
  d.code = errc::invalid_filter;
  d.key = "--filter";
  d.value = std::string{text};
  d.allowed = "key=value, where key is a tag name, source or table, and value may use * globs";
  d.message = std::move(message);
  return d;
}

}  // namespace

std::expected<filter, diagnostic> parse_filter(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos)
    return std::unexpected(filter_error(text, fmt::format("filter '{}' has no '='", text)));
  filter f{std::string{trim(text.substr(0, eq))}, std::string{trim(text.substr(eq + 1))}};
  if (f.key.empty())
    return std::unexpected(filter_error(text, fmt::format("filter '{}' has an empty key", text)));
  // An unset shell variable (--filter table=$T) would select nothing and record an empty
  // run, which retry and schema accept then read as the latest.
  if (f.value.empty())
    return std::unexpected(filter_error(
        text, fmt::format("filter '{}' has an empty value; give the {} to select (a * glob "
                          "matches any)",
                          text, f.key == "table" ? "table name" : f.key == "source" ? "source name"
                                                                                    : "tag value")));
  return f;
}

std::expected<std::vector<filter>, std::vector<diagnostic>> parse_filters(
    const std::vector<std::string>& texts) {
  std::vector<filter> out;
  std::vector<diagnostic> errors;
  for (const auto& t : texts) {
    auto f = parse_filter(t);
    if (f)
      out.push_back(std::move(*f));
    else
      errors.push_back(std::move(f.error()));
  }
  if (!errors.empty())
    return std::unexpected(std::move(errors));
  return out;
}

std::vector<diagnostic> check_filters(const project& p, const std::vector<filter>& filters) {
  std::set<std::string> keys{"source", "table"};
  for (const auto& s : p.sources)
    for (const auto& [k, v] : s.tags)
      keys.insert(k);
  std::vector<diagnostic> out;
  for (const auto& f : filters) {
    if (keys.contains(f.key))
      continue;
    std::vector<std::string_view> candidates(keys.begin(), keys.end());
    diagnostic d;
    d.code = errc::unknown_filter_key;
    d.key = "--filter";
    d.value = f.key + "=" + f.value;
    d.allowed = fmt::format("{}", fmt::join(keys, ", "));
    auto near = nearest(f.key, candidates);
    d.message = near.empty()
                    ? fmt::format("no source has a tag '{}'", f.key)
                    : fmt::format("no source has a tag '{}'; did you mean '{}'?", f.key, near);
    out.push_back(std::move(d));
  }
  // A fleet with no sources selects nothing, filtered or not: its run is an empty success.
  if (!out.empty() || filters.empty() || p.sources.empty())
    return out;
  // Known keys, but values no source has: a typo in a value would select nothing and the
  // run would pass as an empty success (which then hides the latest real run from
  // `schema accept` and `retry`).
  const bool any = std::any_of(p.sources.begin(), p.sources.end(),
                               [&](const source_config& s) { return source_may_match(s, filters); });
  if (any)
    return out;
  diagnostic d;
  d.code = errc::filter_selects_nothing;
  d.key = "--filter";
  std::string given;
  for (const auto& f : filters)
    given += (given.empty() ? "" : " ") + f.key + "=" + f.value;
  d.value = given;
  for (const auto& f : filters) {
    if (f.key == "table")
      continue;
    const auto alone = std::any_of(p.sources.begin(), p.sources.end(), [&](const source_config& s) {
      return source_may_match(s, std::vector<filter>{f});
    });
    if (alone)
      continue;
    std::set<std::string> values;
    for (const auto& s : p.sources) {
      if (f.key == "source") {
        values.insert(s.name);
      } else if (auto it = s.tags.find(f.key); it != s.tags.end()) {
        values.insert(it->second);
      }
    }
    std::vector<std::string_view> candidates(values.begin(), values.end());
    const auto near = nearest(f.value, candidates);
    d.allowed = fmt::format("{}", fmt::join(values, ", "));
    d.message = fmt::format("no source has {} = '{}'{}; the values in flotilla.toml: {}", f.key,
                            f.value, near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                            d.allowed);
    out.push_back(std::move(d));
    return out;
  }
  // Which sources each filter matches alone: what to combine instead.
  std::string each;
  for (const auto& f : filters) {
    if (f.key == "table")
      continue;
    std::vector<std::string> names;
    for (const auto& s : p.sources)
      if (source_may_match(s, std::vector<filter>{f}))
        names.push_back(s.name);
    const std::size_t shown = std::min<std::size_t>(names.size(), 5);
    each += fmt::format("{}{}={} selects {}{}", each.empty() ? "" : "; ", f.key, f.value,
                        fmt::join(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                        names.size() > shown ? fmt::format(" and {} more", names.size() - shown)
                                             : std::string());
  }
  d.message = fmt::format("no source matches all the filters together ({}), though each matches "
                          "some source alone: {}. Filters of different keys must all match one "
                          "source; two values of one key match none (run once per value)",
                          given, each);
  out.push_back(std::move(d));
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return fold(x) == fold(y); });
}

bool glob_match(std::string_view pattern, std::string_view text) {
  return glob(pattern, text, false);
}

bool bare_names(const source_config& s) {
  return s.adapter == adapter_kind::sqlite || s.adapter == adapter_kind::csv ||
         s.adapter == adapter_kind::json;
}

bool table_name_matches(std::string_view pattern, std::string_view catalog_name, bool bare) {
  if (bare)
    return glob(pattern, catalog_name, true);
  if (qualified(pattern) == qualified(catalog_name))
    return glob(pattern, catalog_name, true);
  // "*" on its own matches everything, qualified or not.
  return glob(table_part(pattern), table_part(catalog_name), true);
}

bool pattern_covers_name(std::string_view pattern, std::string_view name, bool bare) {
  if (!bare && qualified(pattern) && !qualified(name))
    return false;
  return table_name_matches(pattern, name, bare);
}

bool source_may_match(const source_config& s, const std::vector<filter>& filters) {
  for (const auto& f : filters) {
    if (f.key == "table")
      continue;
    if (f.key == "source") {
      if (!glob_match(f.value, s.name))
        return false;
      continue;
    }
    auto it = s.tags.find(f.key);
    if (it == s.tags.end() || !glob_match(f.value, it->second))
      return false;
  }
  return true;
}

// Section names are literal names, not patterns: the name rule without globs.
bool section_matches(std::string_view section, std::string_view catalog_name) {
  if (qualified(section) == qualified(catalog_name))
    return iequals(section, catalog_name);
  return iequals(table_part(section), table_part(catalog_name));
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = fold(c);
  return out;
}

// table_lookup keys: '=' + whole name, 'b' + bare section name, 'p' + table part of a
// qualified section name; all lower-cased, each mapping to the first section in order.
std::string lookup_key(char kind, std::string_view name) {
  std::string out(1, kind);
  out += lower(name);
  return out;
}

const table_config* at(const source_config& s, const std::string& key) {
  auto it = s.table_lookup.find(key);
  return it == s.table_lookup.end() ? nullptr : &s.tables[it->second];
}

}  // namespace

void index_tables(source_config& s) {
  s.table_lookup.clear();
  s.table_lookup.reserve(s.tables.size() * 2);
  const bool bare = bare_names(s);
  for (std::uint32_t i = 0; i < s.tables.size(); ++i) {
    const std::string& n = s.tables[i].name;
    s.table_lookup.emplace(lookup_key('=', n), i);
    if (bare)
      continue;  // whole names only
    if (qualified(n))
      s.table_lookup.emplace(lookup_key('p', table_part(n)), i);
    else
      s.table_lookup.emplace(lookup_key('b', n), i);
  }
}

const table_config* find_table(const source_config& s, std::string_view catalog_name) {
  if (s.tables.empty())
    return nullptr;
  if (!s.table_lookup.empty()) {
    if (const auto* t = at(s, lookup_key('=', catalog_name)))
      return t;
    if (bare_names(s))
      return nullptr;
    return qualified(catalog_name) ? at(s, lookup_key('b', table_part(catalog_name)))
                                   : at(s, lookup_key('p', catalog_name));
  }
  for (const auto& t : s.tables)
    if (iequals(t.name, catalog_name))
      return &t;
  if (bare_names(s))
    return nullptr;
  for (const auto& t : s.tables)
    if (section_matches(t.name, catalog_name))
      return &t;
  return nullptr;
}

namespace {

/// The section's name is `name` as written, case and all (a bare section name for a
/// qualified catalog name: its table part), not only ignoring case.
bool spelled_as(const table_config& t, std::string_view name, bool bare) {
  if (t.name == name)
    return true;
  return !bare && !qualified(t.name) && qualified(name) && table_part(name) == t.name;
}

}  // namespace

const table_config* find_table(const source_config& s, std::string_view catalog_name,
                               const std::vector<std::string>& catalog) {
  const table_config* t = find_table(s, catalog_name);
  const bool bare = bare_names(s);
  if (t == nullptr || spelled_as(*t, catalog_name, bare))
    return t;
  // Matched ignoring case only. A section spelled exactly as this name wins; one spelled
  // exactly as another table of the catalog is that table's alone.
  for (const auto& other : s.tables)
    if (spelled_as(other, catalog_name, bare))
      return &other;
  for (const auto& n : catalog)
    if (n != catalog_name && spelled_as(*t, n, bare))
      return nullptr;
  return t;
}

std::vector<std::size_t> select_table_indices(const source_config& s,
                                              const std::vector<std::string>& catalog_table_names,
                                              const std::vector<filter>& filters) {
  std::vector<std::size_t> out;
  if (!source_may_match(s, filters))
    return out;
  const bool bare = bare_names(s);
  auto any = [bare](const std::vector<std::string>& patterns, std::string_view name) {
    return std::any_of(patterns.begin(), patterns.end(),
                       [&](const std::string& p) { return table_name_matches(p, name, bare); });
  };
  for (std::size_t i = 0; i < catalog_table_names.size(); ++i) {
    const std::string& name = catalog_table_names[i];
    const bool wanted = find_table(s, name, catalog_table_names) != nullptr || any(s.include, name);
    if (!wanted || any(s.exclude, name))
      continue;
    const bool filtered_in = std::all_of(filters.begin(), filters.end(), [&](const filter& f) {
      return f.key != "table" || table_name_matches(f.value, name, bare);
    });
    if (filtered_in)
      out.push_back(i);
  }
  return out;
}

std::vector<unmatched_name> unmatched_table_names(
    const source_config& s, const std::vector<std::string>& catalog_table_names,
    const std::vector<filter>& filters) {
  std::vector<unmatched_name> out;
  const bool names_any = !s.tables.empty() || std::any_of(s.include.begin(), s.include.end(),
                                                          [](const std::string& i) {
                                                            return i.find('*') == std::string::npos;
                                                          });
  if (!names_any || !source_may_match(s, filters))
    return out;
  // The catalog's names as the name rule compares them, so each lookup is one probe.
  const bool bare = bare_names(s);
  std::set<std::string> whole_qualified, whole_bare, parts;
  for (const auto& n : catalog_table_names) {
    if (!bare && qualified(n)) {
      whole_qualified.insert(lower(n));
      parts.insert(lower(table_part(n)));
    } else {
      whole_bare.insert(lower(n));
    }
  }
  const auto found = [&](std::string_view name) {
    if (bare)
      return whole_bare.contains(lower(name));
    if (qualified(name))
      return whole_qualified.contains(lower(name)) || whole_bare.contains(lower(table_part(name)));
    return whole_bare.contains(lower(name)) || parts.contains(lower(name));
  };
  std::set<std::string> seen;
  const auto consider = [&](const std::string& name, const char* where) {
    if (found(name) || !seen.insert(lower(name)).second)
      return;
    for (const auto& e : s.exclude)
      if (pattern_covers_name(e, name, bare))
        return;
    for (const auto& f : filters)
      if (f.key == "table" && !table_name_matches(f.value, name, bare))
        return;
    const std::vector<std::string_view> candidates(catalog_table_names.begin(),
                                                   catalog_table_names.end());
    const std::string want = lower(table_part(name));
    const auto holds_name = [&](std::string_view n) {
      return want.size() >= 3 && lower(table_part(n)).find(want) != std::string::npos;
    };
    std::string guess = nearest(name, candidates);
    // A shared schema ("public.") is no likeness: the table parts must be alike too. A
    // name holding the whole name (v_orders for orders) is weighed as a rename below.
    if (!guess.empty() &&
        (nearest(table_part(name), std::vector<std::string_view>{table_part(guess)}).empty() ||
         holds_name(guess)))
      guess.clear();
    // The table parts compared ("public.ordrs" against bare names), then a table renamed
    // with a suffix or prefix (orders -> orders_v2, legacy_orders: the shortest name whose
    // table part holds the whole name's, a suffix added before a prefix, since v_orders is
    // rather a view's name); first among the names of the same schema (or none), so that
    // "crm.orders" renamed "crm.orders_v2" is not taken for "main.orders", another table;
    // then among all.
    const auto schema_of = [](std::string_view n) {
      return qualified(n) ? lower(n.substr(0, n.size() - table_part(n).size() - 1))
                          : std::string();
    };
    const std::string own_schema = schema_of(name);
    for (const bool same_schema : {true, false}) {
      if (!guess.empty())
        break;
      std::vector<std::string_view> names;
      for (const auto& n : catalog_table_names)
        if (!same_schema || own_schema.empty() || !qualified(n) || schema_of(n) == own_schema)
          names.push_back(n);
      std::vector<std::string_view> parts;
      for (const auto& n : names)
        parts.push_back(table_part(n));
      const std::string part = nearest(table_part(name), parts);
      if (!part.empty() && !holds_name(part))
        for (const auto& n : names)
          if (iequals(table_part(n), part)) {
            guess = n;
            break;
          }
      if (guess.empty()) {
        std::string_view best;
        int best_rank = 3;
        for (const auto& n : names) {
          if (!holds_name(n))
            continue;
          const std::string p = lower(table_part(n));
          const auto at = p.find(want);
          const int rank = at == 0 ? 0 : at + want.size() == p.size() ? 1 : 2;
          if (rank < best_rank || (rank == best_rank && n.size() < best.size())) {
            best = n;
            best_rank = rank;
          }
        }
        guess = std::string(best);
      }
    }
    out.push_back({name, where, std::move(guess)});
  };
  for (const auto& t : s.tables)
    consider(t.name, "section");
  for (const auto& i : s.include)
    if (i.find('*') == std::string::npos)
      consider(i, "include");
  return out;
}

std::vector<std::string> select_tables(const source_config& s,
                                       const std::vector<std::string>& catalog_table_names,
                                       const std::vector<filter>& filters) {
  std::vector<std::string> out;
  for (std::size_t i : select_table_indices(s, catalog_table_names, filters))
    out.push_back(catalog_table_names[i]);
  return out;
}

namespace {

// A template split into literal text and placeholder names.
struct template_piece {
  bool placeholder = false;
  std::string_view text;
};

std::expected<std::vector<template_piece>, template_error> split_template(std::string_view templ) {
  std::vector<template_piece> out;
  std::size_t literal = 0;
  for (std::size_t i = 0; i < templ.size(); ++i) {
    const char c = templ[i];
    if (c == '}')
      return std::unexpected(template_error{errc::malformed_template, {},
                                            fmt::format("'}}' without '{{' at offset {}", i)});
    if (c != '{')
      continue;
    const auto close = templ.find_first_of("{}", i + 1);
    if (close == std::string_view::npos || templ[close] != '}')
      return std::unexpected(template_error{errc::malformed_template, {},
                                            fmt::format("'{{' without '}}' at offset {}", i)});
    if (close == i + 1)
      return std::unexpected(
          template_error{errc::malformed_template, {}, fmt::format("empty '{{}}' at offset {}", i)});
    if (i > literal)
      out.push_back({false, templ.substr(literal, i - literal)});
    out.push_back({true, templ.substr(i + 1, close - i - 1)});
    i = close;
    literal = close + 1;
  }
  if (literal < templ.size())
    out.push_back({false, templ.substr(literal)});
  return out;
}

}  // namespace

std::expected<std::vector<std::string>, template_error> template_placeholders(
    std::string_view templ) {
  auto pieces = split_template(templ);
  if (!pieces)
    return std::unexpected(std::move(pieces.error()));
  std::vector<std::string> out;
  for (const auto& p : *pieces)
    if (p.placeholder)
      out.emplace_back(p.text);
  return out;
}

std::expected<std::string, template_error> expand_template(std::string_view templ,
                                                           const source_config& s) {
  auto pieces = split_template(templ);
  if (!pieces)
    return std::unexpected(std::move(pieces.error()));
  std::string out;
  out.reserve(templ.size() + 16);
  for (const auto& p : *pieces) {
    if (!p.placeholder) {
      out += p.text;
    } else if (p.text == "source") {
      out += s.name;
    } else if (auto it = s.tags.find(std::string{p.text}); it != s.tags.end()) {
      out += it->second;
    } else {
      return std::unexpected(template_error{
          errc::unknown_placeholder, std::string{p.text},
          fmt::format("placeholder '{{{}}}' is neither {{source}} nor a tag of source '{}'",
                      p.text, s.name)});
    }
  }
  return out;
}

std::string target_schema(const target_config& t, const source_config& s) {
  auto r = expand_template(t.schema, s);
  if (!r)
    throw std::invalid_argument(fmt::format("target '{}', source '{}': {}", t.name, s.name,
                                            r.error().message));
  return std::move(*r);
}

bool has_schemas(adapter_kind a) {
  return a == adapter_kind::postgres || a == adapter_kind::duckdb;
}

std::string duckdb_database_name(std::string_view path) {
  if (path.empty() || path == ":memory:")
    return "memory";
  if (auto slash = path.find_last_of('/'); slash != std::string_view::npos)
    path.remove_prefix(slash + 1);
  while (path.starts_with('.'))
    path.remove_prefix(1);
  std::string name{path.substr(0, path.find('.'))};
  if (name == "main" || name == "system" || name == "temp")
    name += "_db";
  return name;
}

target_table_name target_table(const target_config& t, const source_config& s,
                               std::string_view catalog_name) {
  // SQLite, CSV and JSON sources have no schemas: their catalog names are bare, and a
  // dot in one ("a.b") is part of the table's name, not a schema's end.
  return target_table_named(t, s,
                            has_schemas(s.adapter) ? table_part(catalog_name) : catalog_name);
}

target_table_name target_table_named(const target_config& t, const source_config& s,
                                     std::string_view table) {
  return target_namer(t, s)(table);
}

target_namer::target_namer(const target_config& t, const source_config& s) {
  catalog_ = t.database;
  std::string schema = target_schema(t, s);
  // A DuckDB schema named like a database ("wh" in wh.duckdb, "system", "temp") makes
  // "schema"."table" ambiguous to DuckDB: such a table is named with its database too.
  if (t.dialect == "duckdb" && catalog_.empty()) {
    std::string db = duckdb_database_name(t.path);
    if (iequals(schema, db) || iequals(schema, "system") || iequals(schema, "temp"))
      catalog_ = std::move(db);
  }
  if (t.dialect == "sqlite")
    name_prefix_ = schema.empty() ? std::string() : fmt::format("{}__", schema);
  else
    schema_ = std::move(schema);
}

target_table_name target_namer::operator()(std::string_view table) const {
  target_table_name out;
  out.catalog = catalog_;
  out.schema = schema_;
  out.name.reserve(name_prefix_.size() + table.size());
  out.name.append(name_prefix_).append(table);
  return out;
}

}  // namespace flotilla::config
