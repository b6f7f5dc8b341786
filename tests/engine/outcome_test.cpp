#include <catch2/catch.hpp>

#include "dialects/dialect.hpp"
#include "engine/copy.hpp"

using namespace flotilla;

namespace {
engine::table_plan a_plan(const char* shape) {
  engine::table_plan p;
  p.target = dialects::table_ref{"", "shop", "orders"};
  p.shape_action = shape;
  p.warnings = {"w1", "w2"};
  return p;
}
}  // namespace

TEST_CASE("an outcome's plan, kept out of line, copies deeply and moves like an optional") {
  engine::table_outcome none;
  CHECK_FALSE(none.plan);
  CHECK_FALSE(none.plan.has_value());
  CHECK(sizeof(engine::table_outcome) < sizeof(engine::table_plan) + 200);

  engine::table_outcome o;
  o.plan = a_plan("create");
  REQUIRE(o.plan);
  CHECK(o.plan->shape_action == "create");

  engine::table_outcome copy = o;  // deep: changing one leaves the other
  REQUIRE(copy.plan);
  copy.plan->shape_action = "evolve";
  (*copy.plan).warnings.push_back("w3");
  CHECK(o.plan->shape_action == "create");
  CHECK(o.plan->warnings.size() == 2);
  CHECK(copy.plan->warnings.size() == 3);

  copy = o;  // copy assignment replaces the plan
  CHECK(copy.plan->shape_action == "create");
  copy = none;  // and empties it
  CHECK_FALSE(copy.plan);

  engine::table_outcome moved = std::move(o);
  REQUIRE(moved.plan);
  CHECK(moved.plan->target.name == "orders");
  moved.plan.reset();
  CHECK_FALSE(moved.plan);

  const engine::table_outcome& c = moved;
  moved.plan = a_plan("rebuild");
  CHECK(c.plan->shape_action == "rebuild");
  CHECK((*c.plan).warnings.front() == "w1");
}
