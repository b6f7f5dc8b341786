#pragma once
/// What a run does to one table, decided purely from the source's schema, the live
/// target schema and the table's settings: the evolution steps (seed 001), the exact
/// SQL, and how the rows load. `plan` prints it; `run` executes it. No I/O here.

#include <optional>
#include <string>
#include <vector>

#include "dialects/dialect.hpp"
#include "schema/evolution.hpp"
#include "schema/table.hpp"

namespace flotilla::engine {

enum class load_kind {
  full_refresh,  ///< staging table swapped in atomically
  incremental,   ///< rows past the watermark, appended
  merge,         ///< rows past the watermark, upserted by unique_key
};

[[nodiscard]] std::string_view to_string(load_kind k);

/// The settings of one table that shape its plan.
struct table_settings {
  std::string cursor_column;            ///< empty: full refresh. Default: ""
  std::vector<std::string> unique_key;  ///< merge key. Default: none
  bool has_watermark = false;           ///< a watermark is recorded for this table
};

enum class target_state {
  absent,      ///< no such table: create it
  present,     ///< live schema read
  unreadable,  ///< describe failed: treated as absent and rebuilt (seed 001)
};

struct table_plan {
  dialects::table_ref target;
  /// What happens to the table's shape: "create", "evolve", "recreate", "none".
  std::string shape_action;
  schema::drift_result drift;
  /// The exact statements run before loading (schema, DDL), in order.
  std::vector<std::string> ddl;
  load_kind load = load_kind::full_refresh;
  /// The statements that create the staging table a full refresh loads (shown by plan;
  /// the sink issues the same statements with the live table's extra columns kept).
  std::vector<std::string> staging_sql;
  /// The statements that swap the loaded staging table in (full refresh).
  std::vector<std::string> swap_sql;
  /// Columns read from the source and loaded, in order.
  schema::table_schema load_columns;
  /// True when the watermark must be ignored (table created or recreated).
  bool reset_watermark = false;
  /// True when drift was evaluated (the target existed and was readable).
  bool drift_checked = false;
};

/// Decides the plan for one table.
[[nodiscard]] table_plan plan_table(const schema::table_schema& source,
                                    const std::optional<schema::table_schema>& live,
                                    target_state state, const dialects::dialect& dialect,
                                    const dialects::table_ref& target,
                                    const table_settings& settings);

/// The staging table of a target during a full refresh.
[[nodiscard]] dialects::table_ref staging_of(const dialects::table_ref& target);

}  // namespace flotilla::engine
