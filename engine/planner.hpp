#pragma once
/// What a run does to one table, decided purely from the source's schema, the live
/// target schema and the table's settings: the evolution steps (seeds 000 and 001), the
/// exact SQL, and how the rows load. `plan` prints it; `run` executes it. No I/O here.
///
/// For each change of each table there is exactly one outcome, and the step names the
/// setting that decided it (docs/schema-changes.md has the full decision table):
///   new source column   -> on_schema_change: add (append_new_columns) | leave out | fail
///   declared type wider  -> widen in place, or rebuild where the target cannot
///   declared type narrower, or a source type that cannot be read as the declared one
///                        -> the table fails (reason names the column and both types)
///   inferred type grew   -> auto_widen: widen along the lattice, else the table fails
///   other retype         -> seed 001: safe widening in place, else drop_and_recreate
///   any rebuild/recreate -> type_change_rebuild: allow | --allow-type-change-rebuild | deny
///   governance gate on   -> only granted additive changes; anything else: require review

#include <optional>
#include <string>
#include <utility>
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

enum class new_column_rule { append_new_columns, ignore, fail };
enum class rebuild_rule { require_confirmation, allow, deny };

/// The settings of one table that shape its plan. Each `*_from` says where the value
/// came from ("table", "source", "project", "default") for explanations.
struct table_settings {
  std::string cursor_column;            ///< empty: full refresh. Default: ""
  std::vector<std::string> unique_key;  ///< merge key. Default: none
  bool has_watermark = false;           ///< a watermark is recorded for this table
  /// The target table holds another table's rows (it loaded them last): an incremental
  /// table's first load replaces them rather than merging into them.
  bool foreign_rows = false;
  /// The key the watermark's rows were merged on (empty: appended), as recorded with it;
  /// nullopt: not recorded. Another key now copies the table anew.
  std::optional<std::vector<std::string>> watermark_key;
  /// The columns the load that committed the watermark wrote, as recorded with it;
  /// nullopt: not recorded. A column loaded now and not then is an added one (its ALTER
  /// may have run in a load that then failed).
  std::optional<std::vector<std::string>> watermark_columns;
  /// The portable types of watermark_columns, in the same order; nullopt: not recorded.
  std::optional<std::vector<std::string>> watermark_column_types;

  bool enforced = false;                ///< contract = "enforced". Default: false
  std::vector<schema::column> declared; ///< declared columns (name, type), in order
  new_column_rule on_schema_change = new_column_rule::append_new_columns;
  rebuild_rule type_change_rebuild = rebuild_rule::allow;
  bool rebuild_confirmed = false;       ///< --allow-type-change-rebuild. Default: false
  bool auto_widen = false;              ///< Default: false
  bool inferred = false;                ///< csv/json: types inferred from the data
  bool no_rows = false;                 ///< csv: a header and no rows (types unknown)
  /// sqlite: any column holds values of any storage class, so a declared column is read
  /// as declared (each value converted exactly or failing), not in the column's own type.
  bool read_as_declared = false;
  /// csv/json: declared columns holding a value their declared type cannot hold exactly,
  /// with that value and where it is (sources::source::unfit_values). Default: none
  struct unfit_column {
    std::string column;
    std::string value;
    std::string where;  ///< "/x/orders.csv, data row 2 (after the header)"; may be empty
  };
  std::vector<unfit_column> unfit;
  /// csv/json: an inferred number column's widest value, in significant digits, where the
  /// plan read it (with_decimal_fit). Default: none
  struct column_digits {
    std::string column;
    int significant = 0;  ///< of the value with the most
    bool whole = false;   ///< every value a whole number
    int integer = 0;      ///< the most integer digits one value has
  };
  std::vector<column_digits> digits;
  bool governance_gate = false;         ///< [resilience] auto_apply_additive_drift
  bool additive_granted = false;        ///< [policy] grants has schema_change.additive
  /// The target empties the live table in place for a full refresh that keeps its
  /// columns (sinks::warehouse::empties_in_place): no staging table, no swap.
  bool empties_in_place = false;

  /// The table's section in flotilla.toml (`[sources.s.tables."t"]`), named where a
  /// message says what to declare there. Default: "" (messages say "its section")
  std::string section;

  std::string contract_from = "default";
  std::string on_schema_change_from = "default";
  std::string type_change_rebuild_from = "default";
  std::string auto_widen_from = "default";
};

enum class target_state {
  absent,      ///< no such table: create it
  present,     ///< live schema read
  unreadable,  ///< describe failed: treated as absent and rebuilt (seed 001)
};

/// Why the table cannot proceed; nothing was touched.
struct plan_error {
  std::string code;    ///< FLT-S0xx
  std::string reason;  ///< names the column, both types and the fix
  std::string column = {};    ///< the column at fault, where there is one
  std::string expected = {};  ///< its declared or table type; empty for a new column
  std::string actual = {};    ///< the type the source has; empty for a missing column
  /// FLT-S008: the statements the held change would run, for its review.
  std::string proposed_ddl = {};
};

struct table_plan {
  dialects::table_ref target;
  /// What happens to the table's shape: "create", "evolve", "rebuild", "recreate", "none".
  std::string shape_action;
  schema::drift_result drift;  ///< steps: one per change, each with its reason
  /// Warnings shown by plan (an enforced contract leaving a source column out, ...).
  std::vector<std::string> warnings;
  /// Set when the table must stop; the other fields are then informative only.
  std::optional<plan_error> error;
  /// The statement that creates the target schema when it is missing; empty where the
  /// dialect has none. A run sends it once per schema and connection, before the schema's
  /// first load (sinks::warehouse::begin_load), not once per table; `plan` shows it first.
  std::string schema_sql;
  /// The exact statements run before loading (DDL), in order.
  std::vector<std::string> ddl;
  load_kind load = load_kind::full_refresh;
  /// The key a merge upserts by: the table's unique_key, or, when it has none and loads
  /// incrementally, the source's primary key (every column of it loaded).
  std::vector<std::string> unique_key;
  /// The unique_key is not the source's own key: the rows read may repeat it, so a full
  /// refresh loads through a merge, one row per key (the last read), as a first load does.
  bool key_may_repeat = false;
  /// The statements that make the table a full refresh loads, with the live table's
  /// extra columns kept (shown by plan; the sink issues the same, on PostgreSQL and
  /// DuckDB with the key added after the load): the staging table, or where the dialect
  /// replaces in place (SQLite), the live table itself, emptied or re-created inside the
  /// load's transaction.
  std::vector<std::string> staging_sql;
  /// The statements that swap the loaded staging table in (full refresh); none where the
  /// dialect replaces in place.
  std::vector<std::string> swap_sql;
  /// A full refresh: the columns of the table it makes (the loaded ones, then the live
  /// table's others, kept).
  schema::table_schema refresh_columns;
  /// Columns read from the source (source names and types), in load order.
  schema::table_schema read_columns;
  /// The same columns as loaded into the target (declared types where pinned).
  schema::table_schema load_columns;
  /// What the source-drift gate (seed 004) observes when it differs from read_columns:
  /// the columns read before on_schema_change = ignore left the new ones out. A column
  /// the target does not follow is still a change of the source.
  schema::table_schema ignored_read_columns;
  [[nodiscard]] const schema::table_schema& observed_columns() const {
    return ignored_read_columns.columns.empty() ? read_columns : ignored_read_columns;
  }
  /// True when the watermark must be ignored (table created or recreated).
  bool reset_watermark = false;
  /// True when drift was evaluated (the target existed and was readable, or was read and
  /// found holding a column of a type Flotilla cannot map).
  bool drift_checked = false;
  /// The live table is dropped and copied anew for such a column: a retype, as seed 001
  /// counts drift, though no source column changed.
  bool live_unmappable = false;
  [[nodiscard]] bool drifted() const { return drift.drifted() || live_unmappable; }
};

/// Decides the plan for one table.
[[nodiscard]] table_plan plan_table(const schema::table_schema& source,
                                    const std::optional<schema::table_schema>& live,
                                    target_state state, const dialects::dialect& dialect,
                                    const dialects::table_ref& target,
                                    const table_settings& settings);

/// The staging table of a target during a full refresh, its name shortened with a hash
/// where it would pass `max_bytes`, as the load names it (dialects::sibling).
[[nodiscard]] dialects::table_ref staging_of(const dialects::table_ref& target,
                                             std::size_t max_bytes);

/// One line of `plan` text for a step, seed 000's style:
/// "add column  coupon text -> VARCHAR", "widen  total decimal(12,2) -> decimal(18,2)
/// (DECIMAL(18,2))  in place".
[[nodiscard]] std::string describe_step(const schema::evolution_step& step,
                                        const dialects::dialect& dialect);

}  // namespace flotilla::engine
