#include "config/policy.hpp"

#include <algorithm>

#include "config/selection.hpp"

namespace flotilla::config {

std::string_view to_string(policy_origin o) {
  switch (o) {
    case policy_origin::table: return "table";
    case policy_origin::source: return "source";
    case policy_origin::project: return "project";
    case policy_origin::built_in: return "default";
  }
  return "default";
}

namespace {

// Takes the first level that sets the key: table, source, project.
template <class T>
void resolve(T& out, policy_origin& from, const std::optional<T>& table,
             const std::optional<T>& source, const std::optional<T>& proj) {
  if (table) {
    out = *table;
    from = policy_origin::table;
  } else if (source) {
    out = *source;
    from = policy_origin::source;
  } else if (proj) {
    out = *proj;
    from = policy_origin::project;
  }
}

}  // namespace

table_policy effective_policy(const project& p, const source_config& src,
                              const table_config* section) {
  static const policy_overrides none;
  const policy_overrides& t = section ? section->policy : none;
  const policy_overrides& s = src.policy;
  const policy_overrides& g = p.policy;

  table_policy r;
  resolve(r.contract, r.from.contract, t.contract, s.contract, g.contract);
  // Built-in defaults of the remaining keys depend on the contract (see header).
  // A table has a contract when it is enforced, declares columns, or has `contract` written
  // out (`contract = "none"`, seed 000's own mode: docs/decisions.md): SQLLoad's default
  // (a rebuild needs confirmation) applies; otherwise Rocky's (it rebuilds on its own).
  // auto_widen is opt-in everywhere, as seed 000 says.
  const bool contracted = r.contract == contract_mode::enforced ||
                          r.from.contract != policy_origin::built_in ||
                          (section != nullptr && !section->columns.empty());
  r.type_change_rebuild = contracted ? rebuild_policy::require_confirmation : rebuild_policy::allow;
  r.auto_widen = false;
  resolve(r.on_schema_change, r.from.on_schema_change, t.on_schema_change, s.on_schema_change,
          g.on_schema_change);
  resolve(r.type_change_rebuild, r.from.type_change_rebuild, t.type_change_rebuild,
          s.type_change_rebuild, g.type_change_rebuild);
  resolve(r.auto_widen, r.from.auto_widen, t.auto_widen, s.auto_widen, g.auto_widen);
  resolve(r.on_source_drift, r.from.on_source_drift, t.on_source_drift, s.on_source_drift,
          g.on_source_drift);
  resolve(r.prune_unchanged, r.from.prune_unchanged, t.prune_unchanged, s.prune_unchanged,
          g.prune_unchanged);

  r.governance_gate = p.governance.auto_apply_additive_drift;
  const auto& gr = p.governance.grants;
  r.additive_granted = std::find(gr.begin(), gr.end(), "schema_change.additive") != gr.end();
  return r;
}

table_policy effective_policy(const project& p, const source_config& src,
                              std::string_view catalog_name) {
  return effective_policy(p, src, find_table(src, catalog_name));
}

}  // namespace flotilla::config
