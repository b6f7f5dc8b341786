#pragma once
/// What the change stream does with one source schema change on one target (seed 002):
/// apply it on the target, hold the table for review, or stop before it.
///
/// `decide_outcome` is a pure function: no I/O, no clock. The stream calls it once per
/// (captured DDL, target) with the table's shape before the change and, for a relational
/// target, the target table's live shape; it then runs `applied::statements` in order
/// with the data, opens a review from `held::hold` (cdc/review.hpp), or stops the
/// pipeline with `stopped::message`. docs/cdc-reviews.md has the decision table.

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dialects/dialect.hpp"
#include "schema/table.hpp"
#include "schema/types.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cdc {

// ---- the captured table ------------------------------------------------------------

/// One column of a captured source table, as the capture sees it.
struct captured_column {
  std::string name;
  schema::portable_type type;
  bool nullable = true;
  bool key = false;  ///< part of the row key (primary key, or the unique index chosen)
  /// The source's default expression as written on the source ("0", "now()"); empty:
  /// none.
  std::string default_expr;
  /// The default is a constant: every existing row gets the same, known value.
  bool default_constant = true;
  /// The constant's value in text form (what `SELECT <default>::text` returns);
  /// nullopt: DEFAULT NULL. Used only when `default_constant`.
  std::optional<std::string> default_value;
  std::string collation;  ///< empty, "default", "C" or "POSIX": the binary default
  bool identity = false;  ///< GENERATED ... AS IDENTITY
  bool generated = false; ///< GENERATED ALWAYS AS (expr) STORED

  friend bool operator==(const captured_column&, const captured_column&) = default;
};

struct captured_table {
  std::string source;  ///< the [sources.<name>] key: "shop"
  std::string name;    ///< the table on the source, schema-qualified: "public.orders"
  std::vector<captured_column> columns;  ///< in table order

  [[nodiscard]] const captured_column* find(std::string_view column) const;
  [[nodiscard]] bool has_key() const;
  /// The portable schema (name, type, nullable, key), for DDL and shape checks.
  [[nodiscard]] schema::table_schema to_schema() const;
  /// "shop.public.orders": the key of the table's hold and positions in the store.
  [[nodiscard]] std::string store_key() const { return source + "." + name; }

  friend bool operator==(const captured_table&, const captured_table&) = default;
};

// ---- source changes: one type per kind of DDL --------------------------------------

/// ALTER TABLE ... ADD COLUMN.
struct add_column {
  captured_column column;
};
/// ALTER TABLE ... DROP COLUMN.
struct drop_column {
  std::string column;
  /// The row key as the source has it after the statement, when the capture knows it
  /// (PostgreSQL drops the whole primary key with a key column); nullopt: the remaining
  /// key columns.
  std::optional<std::vector<std::string>> key_after = std::nullopt;
};
/// ALTER TABLE ... RENAME COLUMN from TO to.
struct rename_column {
  std::string from;
  std::string to;
};
/// ALTER TABLE ... ALTER COLUMN ... TYPE.
struct alter_type {
  std::string column;
  schema::portable_type to;
  /// The source's type as PostgreSQL names it ("numeric"), where known: said beside `to`
  /// when the two read differently (an unbounded numeric is carried as text).
  std::string to_source = {};
  /// The source's type before, as PostgreSQL names it, where known.
  std::string from_source = {};
  /// A time, timestamp or interval column given fewer fractional-second digits: the
  /// source rounds every stored value, and the rounded values are not in the change
  /// stream.
  bool rounds = false;
  /// Another change PostgreSQL makes by rewriting every stored value into a new text
  /// (char(n) padding, an interval's fields, inet to cidr, json to jsonb): why, or empty.
  /// The rewritten values are not in the change stream either.
  std::string rewrites = {};
};
/// ALTER COLUMN ... SET NOT NULL (nullable = false) or DROP NOT NULL (nullable = true).
struct set_nullability {
  std::string column;
  bool nullable = true;
};
/// ALTER COLUMN ... SET DEFAULT (expression not empty) or DROP DEFAULT (empty).
struct set_default {
  std::string column;
  std::string expression;
};
/// A change of a column's collation, identity property or generated (computed)
/// definition.
struct column_property_change {
  std::string column;
  std::string property;  ///< "collation", "identity", "generated"
  std::string detail;    ///< e.g. "collation \"C\" -> \"de_DE\""; may be empty
};
/// The row key was dropped or redefined (for example as not unique, partial, or over a
/// nullable column). `new_key` is the new key's columns; empty: no usable key.
struct key_change {
  std::vector<std::string> new_key;
  std::string detail;  ///< "primary key orders_pkey dropped"
};
/// CREATE, REINDEX or DROP INDEX. An index that serves as the row key is a key change
/// (`serves_row_key`).
struct index_change {
  std::string index;
  bool serves_row_key = false;
  std::string detail;
};
struct drop_table {};
struct rename_table {
  std::string to;  ///< the new name, schema-qualified
};
/// ATTACH or DETACH PARTITION into or out of the captured table.
struct partition_change {
  std::string detail;
};
struct truncate_table {};
/// A table created on the source (the change names it; `captured_table` is unused).
struct new_table {
  std::string name;
};

using change_kind = std::variant<add_column, drop_column, rename_column, alter_type,
                                 set_nullability, set_default, column_property_change,
                                 key_change, index_change, drop_table, rename_table,
                                 partition_change, truncate_table, new_table>;

struct source_change {
  change_kind change;
  std::string position;  ///< source position of the DDL: the LSN, "0/16B3748"
};

/// "column note renamed to notes": the change to `before` in words, without the table or
/// the position.
[[nodiscard]] std::string describe(const captured_table& before, const change_kind& change);

/// "public.orders: column note renamed to notes (source LSN 0/16B3748)": the review's
/// source change.
[[nodiscard]] std::string source_change_text(const captured_table& before,
                                             const source_change& change);

/// The table's shape after the change (unchanged for changes that keep the shape:
/// truncate, index, defaults of no interest, drop/rename of the table).
[[nodiscard]] captured_table apply_change(const captured_table& before, const change_kind& change);

// ---- the target --------------------------------------------------------------------

enum class target_kind { duckdb, postgres, kafka, pubsub };

/// "duckdb", "postgres"/"postgresql", "kafka", "pubsub"; nullopt for anything else.
[[nodiscard]] std::optional<target_kind> parse_target_kind(std::string_view name);
[[nodiscard]] std::string_view to_string(target_kind k);
[[nodiscard]] bool is_event_target(target_kind k);

struct target_info {
  std::string name;  ///< the [targets.<name>] key, for messages and the hold's key
  target_kind kind = target_kind::duckdb;
  dialects::table_ref table;  ///< the target table (relational targets)
  /// The target table's live shape, read just before the change (relational targets).
  /// When set and it differs from the shape the captured table maps to, the stream
  /// stops at the change (a table altered by hand). nullopt: not checked.
  std::optional<schema::table_schema> actual;
  /// The DDL of the table's last review when it was edited before it ran (seed 003: "you
  /// want the target to differ, for example a wider type"): a column it names may be
  /// wider on the target than the source's type maps to. Empty: none.
  std::string edited_ddl = {};
};

// ---- outcomes ----------------------------------------------------------------------

/// The change is carried out on the target with the data, at its position.
struct applied {
  /// Target statements, in order, quoted through the target's dialect; run them in one
  /// transaction. Empty: nothing to apply on the target.
  std::vector<std::string> statements;
  /// Why nothing (or what) is applied, for logs: "nothing to apply: target columns
  /// carry no defaults".
  std::string note;
  /// Event targets: publish a truncate event keyed by this (the table name).
  std::optional<std::string> truncate_event_key;
  /// Each source change carried out, with what it does on the target ("public.orders:
  /// column note dropped (source LSN 0/16B3748): the values of column note are dropped on
  /// the target"), for the stream to say once it committed. Set by decide_ddl.
  std::vector<std::string> said = {};
};

/// The table is held on this target at the change. `hold` is the draft of the review
/// record: state awaiting_review, target, table, kind, source_change, reason,
/// proposed_ddl, data_consequence, requires_resync and position are set; timestamps
/// are the caller's (cdc::open_review sets them).
struct held {
  storage::pb::HoldRecord hold;
};

/// The pipeline stops before the change; nothing after it is applied to any table.
struct stopped {
  std::string code;     ///< FLT-H0xx (docs/cdc-reviews.md)
  std::string reason;   ///< names the column and the change, no trailing period
  /// "PostgreSQL logical schema history gap for 'public.orders': <reason>. No successor
  /// plan, row output, or checkpoint was published."
  std::string message;
  std::string remedy;   ///< what to do to continue
};

using outcome = std::variant<applied, held, stopped>;

/// Seed 002: the outcome of `change` to `before` on `target`.
[[nodiscard]] outcome decide_outcome(const captured_table& before, const source_change& change,
                                     const target_info& target);

// ---- stop codes --------------------------------------------------------------------
inline constexpr std::string_view code_volatile_default = "FLT-H001";
inline constexpr std::string_view code_type_change = "FLT-H002";
inline constexpr std::string_view code_column_property = "FLT-H003";
inline constexpr std::string_view code_table_dropped = "FLT-H004";
inline constexpr std::string_view code_table_renamed = "FLT-H005";
inline constexpr std::string_view code_partition = "FLT-H006";
inline constexpr std::string_view code_truncate_keyed_event = "FLT-H007";
inline constexpr std::string_view code_target_shape = "FLT-H008";
inline constexpr std::string_view code_key_decimal = "FLT-H009";
inline constexpr std::string_view code_unknown_column = "FLT-H010";
/// Not a change's stop: the slot a saved position belongs to is gone from the source.
inline constexpr std::string_view code_slot_lost = "FLT-H011";
/// A schema change the stream applied that the target refused (a value that no longer
/// fits a narrower type or scale): nothing from there was applied.
inline constexpr std::string_view code_target_refused = "FLT-H012";

/// Whether a column of this name hides DuckDB's `rowid`, by which a DuckDB target
/// matches a keyless table's rows.
[[nodiscard]] bool hides_duckdb_row_id(std::string_view column);

/// The stop message's shape: "PostgreSQL logical schema history gap for '<table>':
/// <reason>. No successor plan, row output, or checkpoint was published."
[[nodiscard]] std::string stop_message(std::string_view table, std::string_view reason);

// ---- proposals ---------------------------------------------------------------------

/// The proposal of a change that needs no target DDL.
inline constexpr std::string_view no_target_ddl = "-- no target DDL needed";
/// Appended to every key change's reason.
inline constexpr std::string_view restore_key_hint =
    "Restore the row key on the source, then reload the table.";
/// Starts the data consequence of every review that needs a fresh copy.
inline constexpr std::string_view requires_resync_text = "Requires table resync.";

/// True when the DDL holds only comments (lines starting with --), blank lines and
/// semicolons: running it runs nothing.
[[nodiscard]] bool comment_only(std::string_view ddl);
/// True when a proposal must be edited before it can be applied: it is comment-only and
/// is not `no_target_ddl`.
[[nodiscard]] bool needs_edit(std::string_view proposed_ddl);

}  // namespace flotilla::cdc
