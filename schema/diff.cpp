#include "schema/diff.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace flotilla::schema {

std::vector<schema_change> diff(const table_schema& before, const table_schema& after,
                                name_rule rule) {
  std::vector<schema_change> out;
  for (const auto& b : before.columns) {
    const column* a = after.find(b.name, rule);
    if (a == nullptr) {
      out.emplace_back(column_removed{b});
      continue;
    }
    if (a->type != b.type)
      out.emplace_back(column_retyped{a->name, b.type, a->type});
    if (a->nullable != b.nullable)
      out.emplace_back(nullability_changed{a->name, b.nullable, a->nullable});
  }
  for (const auto& a : after.columns)
    if (before.find(a.name, rule) == nullptr)
      out.emplace_back(column_added{a});

  auto kb = before.key();
  auto ka = after.key();
  if (!kb.empty() && !ka.empty()) {
    bool same = kb.size() == ka.size();
    for (std::size_t i = 0; same && i < kb.size(); ++i)
      same = same_name(kb[i], ka[i], rule);
    if (!same)
      out.emplace_back(key_changed{kb, ka});
  }
  return out;
}

std::string describe(const schema_change& change) {
  return std::visit(
      [](const auto& c) -> std::string {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, column_added>)
          return fmt::format("added column '{}' {}", c.col.name, to_string(c.col.type));
        else if constexpr (std::is_same_v<T, column_removed>)
          return fmt::format("removed column '{}' {}", c.col.name, to_string(c.col.type));
        else if constexpr (std::is_same_v<T, column_retyped>)
          return fmt::format("column '{}' changed {} -> {}", c.name, to_string(c.from),
                             to_string(c.to));
        else if constexpr (std::is_same_v<T, nullability_changed>)
          return fmt::format("column '{}' changed {} -> {}", c.name,
                             c.from_nullable ? "NULL" : "NOT NULL",
                             c.to_nullable ? "NULL" : "NOT NULL");
        else
          return fmt::format("key changed ({}) -> ({})", fmt::join(c.from, ", "),
                             fmt::join(c.to, ", "));
      },
      change);
}

}  // namespace flotilla::schema
