#include "schema/table.hpp"

#include <algorithm>
#include <cctype>

namespace flotilla::schema {

std::string fold_name(std::string_view name, name_rule rule) {
  std::string out(name);
  if (rule == name_rule::case_insensitive)
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool same_name(std::string_view a, std::string_view b, name_rule rule) {
  if (a.size() != b.size())
    return false;
  if (rule == name_rule::case_sensitive)
    return a == b;
  return std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
    return std::tolower(x) == std::tolower(y);
  });
}

const column* table_schema::find(std::string_view name, name_rule rule) const {
  for (const auto& c : columns)
    if (same_name(c.name, name, rule))
      return &c;
  return nullptr;
}

const column* table_schema::resolve(std::string_view name) const {
  if (const column* exact = find(name, name_rule::case_sensitive))
    return exact;
  return count_folded(name) == 1 ? find(name, name_rule::case_insensitive) : nullptr;
}

std::size_t table_schema::count_folded(std::string_view name) const {
  std::size_t n = 0;
  for (const auto& c : columns)
    n += same_name(c.name, name, name_rule::case_insensitive) ? 1 : 0;
  return n;
}

std::vector<std::string> table_schema::key() const {
  std::vector<std::string> out;
  for (const auto& c : columns)
    if (c.key)
      out.push_back(c.name);
  return out;
}

table_schema full_refresh_columns(const std::optional<table_schema>& live,
                                  const table_schema& load, name_rule rule) {
  if (!live)
    return load;
  table_schema out;
  for (const auto& c : live->columns) {
    if (const column* r = load.find(c.name, rule)) {
      out.columns.push_back(*r);
    } else {
      column kept = c;
      kept.nullable = true;
      kept.key = false;
      out.columns.push_back(std::move(kept));
    }
  }
  for (const auto& c : load.columns)
    if (!live->find(c.name, rule))
      out.columns.push_back(c);
  return out;
}

std::optional<in_place_relaxation> relaxation_for(const table_schema& live,
                                                  const table_schema& stage) {
  if (live.columns.size() != stage.columns.size())
    return std::nullopt;
  for (std::size_t i = 0; i < live.columns.size(); ++i)
    if (live.columns[i].name != stage.columns[i].name ||
        live.columns[i].type != stage.columns[i].type)
      return std::nullopt;
  in_place_relaxation r;
  const auto live_key = live.key();
  const auto stage_key = stage.key();
  r.drop_key = !live_key.empty() && live_key != stage_key;
  if (!stage_key.empty() && live_key != stage_key)
    r.add_key = stage_key;
  for (std::size_t i = 0; i < live.columns.size(); ++i) {
    const column& l = live.columns[i];
    // A key column that stays one keeps its NOT NULL (the key needs it).
    if (!l.nullable && stage.columns[i].nullable && (!l.key || r.drop_key))
      r.drop_not_null.push_back(l.name);
  }
  return r;
}

}  // namespace flotilla::schema
