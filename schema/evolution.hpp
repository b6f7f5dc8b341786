#pragma once
/// Drift evaluation (seed 001): compare a source schema with the live target schema
/// under the target dialect's rules and decide the graduated evolution:
///   - source-only columns      -> add_columns (one nullable ADD COLUMN each)
///   - every retype is a safe widening under the dialect -> alter_column_types in place
///   - any other retype         -> drop_and_recreate (drop, then full refresh)
/// Columns that exist only in the target are ignored; evolution never drops columns.

#include <optional>
#include <string>
#include <vector>

#include "schema/diff.hpp"
#include "schema/table.hpp"

namespace flotilla::schema {

/// What evolution needs to know of a target dialect. dialects::dialect implements it.
class type_rules {
 public:
  virtual ~type_rules() = default;
  /// How the target matches column names.
  [[nodiscard]] virtual name_rule names() const = 0;
  /// The type the target would report back for a column created as `t` (Snowflake
  /// reports every integer as NUMBER(38,0), so int and bigint are the same there).
  [[nodiscard]] virtual portable_type canonical(const portable_type& t) const = 0;
  /// True when the target can change `from` into `to` in place, keeping the data.
  [[nodiscard]] virtual bool is_safe_widening(const portable_type& from,
                                              const portable_type& to) const = 0;
  /// The target's own spelling of a type, used in reasons ("VARCHAR", "INTEGER").
  [[nodiscard]] virtual std::string physical_type(const portable_type& t) const = 0;
};

/// add_columns, alter_column_types and drop_and_recreate are seed 001's; widen (a
/// pinned or inferred type widened in place) and rebuild (a type change the target
/// cannot make in place, done by rebuilding the table and swapping it in, data kept)
/// are seed 000's. drop_not_null lets a kept column take NULL in the rows an incremental
/// load appends, once the source dropped it or made it nullable.
enum class evolution_action {
  add_columns,
  alter_column_types,
  drop_and_recreate,
  widen,
  rebuild,
  drop_not_null
};

[[nodiscard]] std::string_view to_string(evolution_action a);
/// The action as seed 001 and the run JSON's `drift.actions_taken[].action` name it, one
/// of three: add_columns; alter_column_types for every change that keeps the rows (widen,
/// rebuild, drop_not_null too); drop_and_recreate. to_string() gives the precise step.
[[nodiscard]] std::string_view seed_action(evolution_action a);

struct evolution_step {
  evolution_action action;
  std::string column;
  std::string reason;  ///< "column 'status' changed STRING -> INT"
  /// The setting that decided the outcome: "dialect duckdb: safe widening",
  /// "on_schema_change = append_new_columns (built-in)". Empty: seed 001's defaults.
  std::string decided_by = {};
  std::optional<portable_type> from = {};  ///< the live type (none for an added column)
  portable_type to = {};                   ///< the new type
  std::string sql = {};  ///< the statements that make the change, ";\n" between them
  /// A drop_and_recreate's other changes, which the recreated table takes too (columns
  /// added, safe retypes), each as its reason; on the table's first such step only.
  std::vector<std::string> also = {};
  /// The table is dropped for a live column nothing takes (its type cannot be mapped):
  /// the step has no new type.
  bool loses_column = false;
  /// The live type as the target spells it, when it has no portable type (a column
  /// Flotilla cannot map, dropped with its table); empty otherwise.
  std::string from_text = {};
};

/// The type a step gives its column, as events and run records spell it; "" for a table
/// dropped for a column it loses (nothing takes it).
[[nodiscard]] inline std::string step_to_text(const evolution_step& s) {
  return s.loses_column ? std::string() : to_string(s.to);
}

struct drift_result {
  std::vector<column> columns_to_add;          ///< nullable, in source order
  std::vector<column_retyped> safe_retypes;    ///< from = target type, to = source type
  std::vector<column_retyped> unsafe_retypes;  ///< any of these forces drop_and_recreate
  std::vector<evolution_step> steps;           ///< one per change, with its reason

  /// A type changed (seed 001's definition of drift; new columns are not drift).
  [[nodiscard]] bool drifted() const { return !safe_retypes.empty() || !unsafe_retypes.empty(); }
  [[nodiscard]] bool needs_recreate() const { return !unsafe_retypes.empty(); }
  [[nodiscard]] bool empty() const { return columns_to_add.empty() && !drifted(); }
};

/// Decides the evolution of `target` (the live table) towards `source`.
/// Source types are first canonicalised through the target dialect, so only changes the
/// target can see count. When any retype is unsafe, the table is dropped and recreated
/// and the steps are the unsafe changes; the first of them lists the rest (`also`), which
/// the recreated table takes too.
[[nodiscard]] drift_result evaluate_drift(const table_schema& source, const table_schema& target,
                                          const type_rules& rules);

}  // namespace flotilla::schema
