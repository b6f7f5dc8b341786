#include "schema/evolution.hpp"

#include <fmt/format.h>

namespace flotilla::schema {

std::string_view to_string(evolution_action a) {
  switch (a) {
    case evolution_action::add_columns: return "add_columns";
    case evolution_action::alter_column_types: return "alter_column_types";
    case evolution_action::drop_and_recreate: return "drop_and_recreate";
    case evolution_action::widen: return "widen";
    case evolution_action::rebuild: return "rebuild";
    case evolution_action::drop_not_null: return "drop_not_null";
  }
  return "unknown";
}

std::string_view seed_action(evolution_action a) {
  switch (a) {
    case evolution_action::add_columns:
    case evolution_action::drop_and_recreate:
      return to_string(a);
    case evolution_action::alter_column_types:
    case evolution_action::widen:
    case evolution_action::rebuild:
    case evolution_action::drop_not_null:
      return to_string(evolution_action::alter_column_types);
  }
  return "unknown";
}

drift_result evaluate_drift(const table_schema& source, const table_schema& target,
                            const type_rules& rules) {
  drift_result r;
  const name_rule names = rules.names();
  for (const auto& src : source.columns) {
    const portable_type want = rules.canonical(src.type);
    const column* live = target.find(src.name, names);
    if (live == nullptr) {
      column added = src;
      added.nullable = true;  // historical rows keep NULL
      added.key = false;
      r.columns_to_add.push_back(added);
      continue;
    }
    const portable_type have = rules.canonical(live->type);
    if (have == want)
      continue;
    column_retyped change{live->name, have, want};
    if (rules.is_safe_widening(have, want))
      r.safe_retypes.push_back(change);
    else
      r.unsafe_retypes.push_back(change);
  }

  auto reason = [&](const column_retyped& c) {
    return fmt::format("column '{}' changed {} -> {}", c.name, rules.physical_type(c.from),
                       rules.physical_type(c.to));
  };
  const auto added = [&](const column& c) {
    return fmt::format("column '{}' added as {}", c.name, rules.physical_type(c.type));
  };
  if (r.needs_recreate()) {
    for (const auto& c : r.unsafe_retypes)
      r.steps.push_back({evolution_action::drop_and_recreate, c.name, reason(c), "", c.from, c.to});
    for (const auto& c : r.columns_to_add)
      r.steps.front().also.push_back(added(c));
    for (const auto& c : r.safe_retypes)
      r.steps.front().also.push_back(reason(c));
    return r;
  }
  for (const auto& c : r.columns_to_add)
    r.steps.push_back({evolution_action::add_columns, c.name, added(c), "", std::nullopt, c.type});
  for (const auto& c : r.safe_retypes)
    r.steps.push_back({evolution_action::alter_column_types, c.name, reason(c), "", c.from, c.to});
  return r;
}

}  // namespace flotilla::schema
