#include "engine/planner.hpp"

#include <fmt/format.h>

namespace flotilla::engine {
namespace {
bool col_is_key(const schema::table_schema& s, const std::string& name,
                const dialects::dialect& d) {
  const schema::column* c = s.find(name, d.names());
  return c != nullptr && c->key;
}
}  // namespace

std::string_view to_string(load_kind k) {
  switch (k) {
    case load_kind::full_refresh: return "full_refresh";
    case load_kind::incremental: return "incremental";
    case load_kind::merge: return "merge";
  }
  return "full_refresh";
}

dialects::table_ref staging_of(const dialects::table_ref& target) {
  auto s = target;
  s.name += "__flotilla_staging";
  return s;
}

table_plan plan_table(const schema::table_schema& source,
                      const std::optional<schema::table_schema>& live, target_state state,
                      const dialects::dialect& dialect, const dialects::table_ref& target,
                      const table_settings& settings) {
  table_plan p;
  p.target = target;
  p.load_columns = source;

  const bool incremental = !settings.cursor_column.empty();
  auto full_refresh = [&] {
    p.load = load_kind::full_refresh;
    p.staging_sql = {dialect.drop_table(staging_of(target)),
                     dialect.create_table(staging_of(target), source)};
    p.swap_sql = dialect.swap_in(staging_of(target), target);
  };
  if (!target.schema.empty() && dialect.name() != "sqlite")
    p.ddl.push_back(dialect.create_schema(target.schema));

  if (state != target_state::present || !live) {
    // Absent or unreadable: (re)build from the source with a full refresh.
    p.shape_action = "create";
    p.reset_watermark = true;
    full_refresh();
    return p;
  }

  p.drift_checked = true;
  p.drift = schema::evaluate_drift(source, *live, dialect);
  if (!dialect.supports_key_column_type_change()) {
    // DuckDB cannot change the type of a key column in place: such a widening rebuilds.
    std::vector<schema::column_retyped> keep;
    for (auto& c : p.drift.safe_retypes) {
      const schema::column* col = live->find(c.name, dialect.names());
      if (col != nullptr && col->key)
        p.drift.unsafe_retypes.push_back(c);
      else
        keep.push_back(c);
    }
    if (!p.drift.unsafe_retypes.empty()) {
      p.drift.safe_retypes = keep;
      p.drift.steps.clear();
      for (const auto& c : p.drift.unsafe_retypes)
        p.drift.steps.push_back(
            {schema::evolution_action::drop_and_recreate, c.name,
             fmt::format("column '{}' changed {} -> {}{}", c.name, dialect.physical_type(c.from),
                         dialect.physical_type(c.to),
                         col_is_key(*live, c.name, dialect) ? " (a key column: rebuilt)" : "")});
    }
  }
  if (p.drift.needs_recreate()) {
    p.shape_action = "recreate";
    p.reset_watermark = true;
    // No DROP before the load: the staging table is built with the new types and the
    // swap (DROP TABLE IF EXISTS + rename, in one transaction) replaces the old table,
    // so readers never see it missing.
    full_refresh();
    return p;
  }
  for (const auto& c : p.drift.columns_to_add)
    p.ddl.push_back(dialect.add_column(target, c));
  for (const auto& c : p.drift.safe_retypes)
    for (auto& sql : dialect.alter_column_type(target, c.name, c.to))
      p.ddl.push_back(std::move(sql));
  p.shape_action = p.drift.empty() ? "none" : "evolve";

  if (incremental && settings.has_watermark)
    p.load = settings.unique_key.empty() ? load_kind::incremental : load_kind::merge;
  else if (incremental && !settings.unique_key.empty())
    p.load = load_kind::merge;  // first run of an incremental table into an existing table
  else
    full_refresh();
  return p;
}

}  // namespace flotilla::engine
