#pragma once
/// Statement builders shared by the dialects. They call back into the dialect for
/// quoting and type spelling, so a dialect that overrides `quote` or `physical_type`
/// gets its own spelling everywhere.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dialects/dialect.hpp"

namespace flotilla::dialects::detail {

/// Suffix of the table a rebuild builds before swapping it in.
inline constexpr std::string_view rebuild_suffix = "__flotilla_rebuild";

/// Throws std::invalid_argument for an empty identifier or one holding a NUL byte.
void check_identifier(std::string_view identifier);
/// Throws std::invalid_argument for a literal holding a NUL byte.
void check_literal(std::string_view value);

/// `q` + identifier + `q`, every `q` inside doubled.
[[nodiscard]] std::string quote_by_doubling(std::string_view identifier, char q);

/// `"a" INTEGER NOT NULL, "b" VARCHAR`: key columns are always NOT NULL.
[[nodiscard]] std::string column_definitions(const dialect& d, const schema::table_schema& s);

enum class key_clause {
  none,          ///< the engine has no primary keys
  enforced,      ///< PRIMARY KEY ("a", "b")
  not_enforced,  ///< PRIMARY KEY (`a`, `b`) NOT ENFORCED (BigQuery)
};

/// CREATE TABLE t (<columns>[, PRIMARY KEY (...)])<trailer>. Throws
/// std::invalid_argument when the schema has no columns.
[[nodiscard]] std::string create_table(const dialect& d, const table_ref& t,
                                       const schema::table_schema& s, key_clause keys,
                                       std::string_view trailer = {});

/// A table beside `t` (same catalog and schema) named `t.name + suffix`. When that is
/// longer than `max_bytes` (non-zero), the name is shortened at a UTF-8 boundary and a
/// hash of the full name is added, so it never equals the live name after the engine
/// truncates identifiers.
[[nodiscard]] table_ref sibling(const table_ref& t, std::string_view suffix,
                                std::size_t max_bytes);

/// SELECT CAST(<old col> AS <new type>) AS <new col>, ... FROM <from>: one item per
/// column of `new_schema` that `old_schema` also has (matched under the dialect's name
/// rule); with `with_new_columns`, columns only `new_schema` has come as
/// CAST(NULL AS <type>). Columns only `old_schema` has are left out.
[[nodiscard]] std::string cast_select(const dialect& d, const table_ref& from,
                                      const schema::table_schema& old_schema,
                                      const schema::table_schema& new_schema,
                                      bool with_new_columns);

/// INSERT INTO <into> (<shared cols>) SELECT CAST(...) ... FROM <from>; empty when the
/// schemas share no column.
[[nodiscard]] std::string insert_select(const dialect& d, const table_ref& into,
                                        const table_ref& from,
                                        const schema::table_schema& old_schema,
                                        const schema::table_schema& new_schema);

/// ALTER TABLE <from> RENAME TO <to.name> (or the fully qualified name of `to`).
[[nodiscard]] std::string rename_table(const dialect& d, const table_ref& from,
                                       const table_ref& to, bool qualify_new_name);

/// Throws std::invalid_argument unless `a` and `b` share catalog and schema: a rename
/// cannot move a table between schemas.
void require_same_schema(const dialect& d, const table_ref& a, const table_ref& b);

/// Extra statements a dialect slots into the rename-based swap.
struct swap_steps {
  std::vector<std::string> before_drop;   ///< e.g. copy the old table's grants
  std::vector<std::string> after_rename;  ///< e.g. rename the new table's indexes
  bool qualify_new_name = false;          ///< Trino resolves a bare new name elsewhere
};

/// DROP TABLE IF EXISTS <tmp>; CREATE TABLE <tmp> ...; INSERT ... SELECT CAST(...);
/// <before_drop>; DROP TABLE <t>; ALTER TABLE <tmp> RENAME TO <t>; <after_rename>.
[[nodiscard]] std::vector<std::string> rebuild_by_copy(const dialect& d, const table_ref& t,
                                                       const table_ref& tmp,
                                                       const schema::table_schema& old_schema,
                                                       const schema::table_schema& new_schema,
                                                       const swap_steps& steps);

/// <before_drop>; DROP TABLE IF EXISTS <target>; ALTER TABLE <staging> RENAME TO
/// <target>; <after_rename>.
[[nodiscard]] std::vector<std::string> swap_by_rename(const dialect& d, const table_ref& staging,
                                                      const table_ref& target,
                                                      const swap_steps& steps);

}  // namespace flotilla::dialects::detail
