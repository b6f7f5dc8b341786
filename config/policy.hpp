#pragma once
/// The effective policy of one table: each key resolved from the table's section, then
/// its source, then [project], then the built-in default. Built-in defaults follow the
/// brief: Rocky's (seed 001) for tables without a contract — changes are applied
/// automatically, an unsafe retype rebuilds the table, inferred columns widen — and
/// SQLLoad's (seed 000) for tables with one — a rebuild needs confirmation and inferred
/// columns never widen on their own.

#include <string_view>

#include "config/model.hpp"

namespace flotilla::config {

/// Where an effective value came from, for `plan` explanations.
enum class policy_origin : std::uint8_t { table, source, project, built_in };

[[nodiscard]] std::string_view to_string(policy_origin o);

struct table_policy {
  contract_mode contract = contract_mode::none;
  schema_change_policy on_schema_change = schema_change_policy::append_new_columns;
  rebuild_policy type_change_rebuild = rebuild_policy::allow;
  bool auto_widen = false;
  drift_policy on_source_drift = drift_policy::ignore;
  bool prune_unchanged = false;
  /// [resilience] auto_apply_additive_drift: the governance gate is on.
  bool governance_gate = false;
  /// [policy] grants holds "schema_change.additive".
  bool additive_granted = false;

  struct origins {
    policy_origin contract = policy_origin::built_in;
    policy_origin on_schema_change = policy_origin::built_in;
    policy_origin type_change_rebuild = policy_origin::built_in;
    policy_origin auto_widen = policy_origin::built_in;
    policy_origin on_source_drift = policy_origin::built_in;
    policy_origin prune_unchanged = policy_origin::built_in;
  } from;
};

/// Resolves the policy of a table of `src`; `section` may be null (no table section).
[[nodiscard]] table_policy effective_policy(const project& p, const source_config& src,
                                            const table_config* section);

/// Same, finding the section for a catalog name ("public.orders" or "orders") first.
[[nodiscard]] table_policy effective_policy(const project& p, const source_config& src,
                                            std::string_view catalog_name);

}  // namespace flotilla::config
