#include <string>

#include <catch2/catch.hpp>

#include "config/load.hpp"
#include "config/policy.hpp"
#include "tests/config/helpers.hpp"

using namespace flotilla::config;
using namespace flotilla::config::testing;

namespace {

table_config section(std::string name, std::string description = "") {
  table_config t;
  t.name = std::move(name);
  t.description = std::move(description);
  return t;
}

}  // namespace

TEST_CASE("each policy key resolves from table, then source, then project, then default") {
  auto r = load_project_text(std::string{one_target} + R"toml(
[project]
on_source_drift = "warn"
prune_unchanged = true

[sources.shop]
adapter = "sqlite"
path = "s.db"
on_schema_change = "fail"
type_change_rebuild = "deny"
prune_unchanged = false

[sources.shop.tables.orders]
on_schema_change = "ignore"
on_source_drift = "fail"
auto_widen = false
)toml",
                             "/w/flotilla.toml");
  INFO(all_messages(r));
  REQUIRE(r.ok());
  const project& p = *r.model;
  const source_config& s = p.sources[0];

  const table_policy orders = effective_policy(p, s, "orders");
  CHECK(orders.contract == contract_mode::none);
  CHECK(orders.from.contract == policy_origin::built_in);
  CHECK(orders.on_schema_change == schema_change_policy::ignore);
  CHECK(orders.from.on_schema_change == policy_origin::table);
  CHECK(orders.type_change_rebuild == rebuild_policy::deny);
  CHECK(orders.from.type_change_rebuild == policy_origin::source);
  CHECK(orders.auto_widen == false);
  CHECK(orders.on_source_drift == drift_policy::fail);
  CHECK(orders.prune_unchanged == false);
  CHECK(orders.from.prune_unchanged == policy_origin::source);

  const table_policy other = effective_policy(p, s, "customers");
  CHECK(other.on_schema_change == schema_change_policy::fail);
  CHECK(other.on_source_drift == drift_policy::warn);
  CHECK(other.from.on_source_drift == policy_origin::project);
  CHECK(other.auto_widen == false);  // opt-in everywhere (seed 000)
  CHECK(to_string(other.from.auto_widen) == "default");
}

TEST_CASE("built-in defaults follow the contract: automatic without one, cautious with one") {
  project p;
  source_config s;
  s.name = "shop";
  table_config plain = section("a");
  table_config pinned = section("b");
  pinned.policy.contract = contract_mode::enforced;

  const table_policy a = effective_policy(p, s, &plain);
  CHECK(a.contract == contract_mode::none);
  CHECK(a.on_schema_change == schema_change_policy::append_new_columns);
  CHECK(a.type_change_rebuild == rebuild_policy::allow);
  CHECK(a.auto_widen == false);
  CHECK(a.on_source_drift == drift_policy::ignore);
  CHECK(a.prune_unchanged == false);

  const table_policy b = effective_policy(p, s, &pinned);
  CHECK(b.contract == contract_mode::enforced);
  CHECK(b.on_schema_change == schema_change_policy::append_new_columns);
  CHECK(b.type_change_rebuild == rebuild_policy::require_confirmation);
  CHECK(b.auto_widen == false);

  const table_policy none = effective_policy(p, s, static_cast<const table_config*>(nullptr));
  CHECK(none.type_change_rebuild == rebuild_policy::allow);

  table_config declared = section("c");
  declared.columns.push_back({"total", flotilla::schema::portable_type::decimal(18, 2), "decimal(18,2)"});
  const table_policy c = effective_policy(p, s, &declared);
  CHECK(c.contract == contract_mode::none);
  CHECK(c.type_change_rebuild == rebuild_policy::require_confirmation);  // pinned columns
}

TEST_CASE("the governance gate and the additive grant reach every table's policy") {
  project p;
  source_config s;
  p.governance.auto_apply_additive_drift = true;
  CHECK(effective_policy(p, s, "t").governance_gate);
  CHECK_FALSE(effective_policy(p, s, "t").additive_granted);
  p.governance.grants.push_back("schema_change.additive");
  CHECK(effective_policy(p, s, "t").additive_granted);
}
