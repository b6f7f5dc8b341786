#include <catch2/catch.hpp>

#include "schema/diff.hpp"
#include "schema/evolution.hpp"

using namespace flotilla::schema;

namespace {

portable_type T(const char* name) { return *parse_type(name); }

table_schema make(std::initializer_list<column> cols) { return table_schema{cols}; }

/// Minimal rules for the pure evolution logic: integers widen upward, names fold.
/// The per-dialect rules are tested against the real dialects in tests/dialects.
struct upward_integers final : type_rules {
  name_rule names() const override { return name_rule::case_insensitive; }
  portable_type canonical(const portable_type& t) const override { return t; }
  bool is_safe_widening(const portable_type& from, const portable_type& to) const override {
    return integer_rank(from.kind) > 0 && integer_rank(to.kind) > integer_rank(from.kind);
  }
  std::string physical_type(const portable_type& t) const override {
    std::string s = to_string(t);
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  }
};

}  // namespace

TEST_CASE("a diff reports added, removed, retyped, nullability and key changes") {
  auto before = make({{"id", T("int"), false, true}, {"name", T("text")}, {"gone", T("date")}});
  auto after = make({{"id", T("bigint"), false, false},
                     {"name", T("text"), false},
                     {"sku", T("varchar(8)"), true, true},
                     {"coupon", T("text")}});
  auto changes = diff(before, after, name_rule::case_sensitive);
  std::vector<std::string> described;
  for (const auto& c : changes) described.push_back(describe(c));
  CHECK(described == std::vector<std::string>{
                         "column 'id' changed int -> bigint",
                         "column 'name' changed NULL -> NOT NULL",
                         "removed column 'gone' date",
                         "added column 'sku' varchar(8)",
                         "added column 'coupon' text",
                         "key changed (id) -> (sku)",
                     });
}

TEST_CASE("column names match case-insensitively only under the case-insensitive rule") {
  auto before = make({{"Amount", T("int")}});
  auto after = make({{"amount", T("int")}});
  CHECK(diff(before, after, name_rule::case_insensitive).empty());
  CHECK(diff(before, after, name_rule::case_sensitive).size() == 2);
}

TEST_CASE("a column added on the source is added nullable on the target") {
  auto source = make({{"id", T("int"), false, true}, {"coupon", T("text"), false}});
  auto target = make({{"id", T("int"), false, true}});
  auto r = evaluate_drift(source, target, upward_integers{});
  REQUIRE(r.columns_to_add.size() == 1);
  CHECK(r.columns_to_add[0].nullable);
  CHECK_FALSE(r.drifted());
  REQUIRE(r.steps.size() == 1);
  CHECK(r.steps[0].action == evolution_action::add_columns);
  CHECK(r.steps[0].reason == "column 'coupon' added as TEXT");
}

TEST_CASE("a safe widening alters in place and an unsafe change recreates the table") {
  auto target = make({{"id", T("int")}, {"status", T("text")}});
  auto widened = evaluate_drift(make({{"id", T("bigint")}, {"status", T("text")}}), target,
                                upward_integers{});
  CHECK(widened.drifted());
  CHECK_FALSE(widened.needs_recreate());
  REQUIRE(widened.steps.size() == 1);
  CHECK(widened.steps[0].action == evolution_action::alter_column_types);
  CHECK(widened.steps[0].reason == "column 'id' changed INT -> BIGINT");

  auto unsafe = evaluate_drift(make({{"id", T("bigint")}, {"status", T("int")}, {"x", T("date")}}),
                               target, upward_integers{});
  CHECK(unsafe.needs_recreate());
  REQUIRE(unsafe.steps.size() == 1);
  CHECK(unsafe.steps[0].action == evolution_action::drop_and_recreate);
  CHECK(unsafe.steps[0].reason == "column 'status' changed TEXT -> INT");
  // The recreated table takes the other changes too: they are listed with it.
  CHECK(unsafe.steps[0].also ==
        std::vector<std::string>{"column 'x' added as DATE", "column 'id' changed INT -> BIGINT"});
  CHECK(widened.steps[0].also.empty());
}

TEST_CASE("columns removed from the source are ignored and never dropped") {
  auto r = evaluate_drift(make({{"id", T("int")}}), make({{"id", T("int")}, {"old", T("text")}}),
                          upward_integers{});
  CHECK(r.empty());
  CHECK(r.steps.empty());
}

TEST_CASE("types compare case-insensitively by name") {
  auto r = evaluate_drift(make({{"ID", T("INT")}}), make({{"id", T("int")}}), upward_integers{});
  CHECK(r.empty());
}

TEST_CASE("the run JSON names every step by one of seed 001's three actions") {
  CHECK(seed_action(evolution_action::add_columns) == "add_columns");
  CHECK(seed_action(evolution_action::drop_and_recreate) == "drop_and_recreate");
  for (auto a : {evolution_action::alter_column_types, evolution_action::widen,
                 evolution_action::rebuild, evolution_action::drop_not_null})
    CHECK(seed_action(a) == "alter_column_types");
  CHECK(to_string(evolution_action::rebuild) == "rebuild");
}
