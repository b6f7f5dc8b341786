#pragma once
/// The difference between two table schemas, as a list of changes. One type per kind
/// of change in a variant, so every consumer handles every kind.

#include <string>
#include <variant>
#include <vector>

#include "schema/table.hpp"

namespace flotilla::schema {

struct column_added {
  column col;
};
struct column_removed {
  column col;
};
struct column_retyped {
  std::string name;
  portable_type from;
  portable_type to;
};
struct nullability_changed {
  std::string name;
  bool from_nullable;
  bool to_nullable;
};
struct key_changed {
  std::vector<std::string> from;
  std::vector<std::string> to;
};

using schema_change =
    std::variant<column_added, column_removed, column_retyped, nullability_changed, key_changed>;

/// Changes that turn `before` into `after`. Columns are matched by name under `rule`;
/// added columns come in `after`'s order. The key is compared as an ordered list of
/// folded names, and a key change is reported only when both sides declare a key.
[[nodiscard]] std::vector<schema_change> diff(const table_schema& before, const table_schema& after,
                                              name_rule rule);

/// "added column 'coupon' text", "column 'status' changed text -> int", ...
[[nodiscard]] std::string describe(const schema_change& change);

}  // namespace flotilla::schema
