#pragma once
/// Row changes of the stream applied to a relational target (DuckDB, PostgreSQL) by the
/// table's row key. Changes are gathered per table between barriers (a DDL or a
/// truncate) and reduced to their net effect per key — the last image of a key wins, a
/// delete removes it — so one batch of source transactions becomes a handful of
/// statements: DELETE ... WHERE key IN (...), INSERT ... ON CONFLICT (key) DO UPDATE,
/// and UPDATE of the columns sent for rows whose unchanged TOAST values were not sent.
/// The batch and the per-table positions (`_flotilla.cdc_positions` on the target) go
/// in one target transaction, so a crash leaves the target either before or after the
/// whole batch. Pure SQL generation; the stream runs the statements.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cdc/pg_logical.hpp"
#include "dialects/dialect.hpp"
#include "schema/rows.hpp"
#include "schema/types.hpp"

namespace flotilla::cdc {

/// The layout of a table's tuples: column names and portable types in source order.
struct row_layout {
  std::vector<std::string> names;
  std::vector<schema::portable_type> types;
  std::vector<std::size_t> key;  ///< indexes of the key columns

  friend bool operator==(const row_layout&, const row_layout&) = default;
};

/// Net changes of one table since the last barrier, under one layout.
struct net_changes {
  row_layout layout;
  /// moved: a row whose key changed while some of its values were not sent (unchanged
  /// TOAST values): the target holds it under `from`'s key, and it is updated there,
  /// key included, keeping the values not sent.
  enum class state : std::uint8_t { upsert, removed, partial, moved };
  struct entry {
    state what = state::upsert;
    tuple row;  ///< upsert/partial/moved: the new image; removed: the key columns
    std::optional<tuple> from;  ///< moved: the row (its key columns) the target holds
    bool clears_key = false;    ///< moved: a row the target holds under the new key goes first
  };
  std::map<std::string, entry> rows;  ///< by key text
  std::uint64_t changes = 0;

  void insert(const tuple& row);
  /// `old_key` is the old row (or its key columns) when the key may have changed.
  void update(const std::optional<tuple>& old_row, const tuple& row);
  void remove(const tuple& old_row);
};

/// Changes of a table without a row key (REPLICA IDENTITY FULL on the source), in order:
/// no net reduction is possible. An insert adds the row; a delete removes one target row
/// equal to the old row in every column; an update is both.
struct keyless_changes {
  row_layout layout;
  struct op {
    std::optional<tuple> remove;  ///< the old row
    std::optional<tuple> add;     ///< the new row (unchanged values filled from the old)
  };
  std::vector<op> ops;

  void insert(const tuple& row) { ops.push_back({std::nullopt, row}); }
  void update(const std::optional<tuple>& old_row, const tuple& row);
  void remove(const tuple& old_row) { ops.push_back({old_row, std::nullopt}); }
};

/// One step of a table's batch: net row changes, a truncate, or DDL statements.
struct truncate_step {};
struct ddl_step {
  std::vector<std::string> statements;
};
using table_step = std::variant<net_changes, truncate_step, ddl_step, keyless_changes>;

/// The statements that apply `step` to `table`.
[[nodiscard]] std::vector<std::string> step_sql(const dialects::dialect& d,
                                                const dialects::table_ref& table,
                                                const table_step& step);

/// Whether `steps` write rows of their table before a DDL step alters it. DuckDB cannot
/// commit a transaction that changes a table's rows and then alters the table ("another
/// transaction has altered this table"); it can once the table is created in that
/// transaction, so such a batch rebuilds the table first (rebuild_sql).
[[nodiscard]] bool rows_then_ddl(const std::vector<table_step>& steps);

/// DuckDB: the query returning `table`'s own definition, then its indexes' (`CREATE
/// TABLE ...`, `CREATE INDEX ...`; duckdb_tables() and duckdb_indexes()), one per row.
[[nodiscard]] std::string definition_query(const dialects::dialect& d,
                                           const dialects::table_ref& table);

/// DuckDB: statements that create `table` again within the transaction, with its rows,
/// from `definition` (definition_query's answer): its rows copied aside, the table
/// dropped and created from its definition, the rows put back, its indexes created.
/// Empty when `definition` is.
[[nodiscard]] std::vector<std::string> rebuild_sql(const dialects::dialect& d,
                                                   const dialects::table_ref& table,
                                                   const std::vector<std::string>& definition);

/// A value of the stream (PostgreSQL text output) as a SQL literal of the target.
[[nodiscard]] std::string value_sql(const dialects::dialect& d, const schema::portable_type& t,
                                    const tuple_value& v);

/// A value of PostgreSQL's text output as a schema/rows.hpp value; nullopt when the
/// text has no such representation (NaN in a decimal, say).
[[nodiscard]] std::optional<schema::value> text_value(std::string_view text,
                                                      const schema::portable_type& t);

/// The bookkeeping table holding each captured table's applied position on the target.
[[nodiscard]] dialects::table_ref positions_table();
[[nodiscard]] std::vector<std::string> positions_table_ddl(const dialects::dialect& d);
/// A table's applied position and the source shape its target rows have there.
struct applied_position {
  lsn_t lsn = 0;
  std::string columns;  ///< columns_json() of the table's source columns
};
/// Statements recording each table's applied position under `slot`.
[[nodiscard]] std::vector<std::string> positions_sql(
    const dialects::dialect& d, const std::string& slot,
    const std::map<std::string, applied_position>& tables);
[[nodiscard]] std::string positions_query(const dialects::dialect& d, const std::string& slot);

}  // namespace flotilla::cdc
