#pragma once
/// DDL in order with the data: flotilla installs an event trigger on the source that
/// writes every DDL of a table (command tag, object identity, the statement text and the
/// table's columns after the change) into `_flotilla.ddl_log`, a table of the same
/// publication. Its rows therefore reach the change stream in commit order with the row
/// changes. This file holds the SQL that installs it, the reading of a log row, and the
/// comparison of a table's columns before and after a DDL. Pure except for the SQL text.
/// docs/cdc.md describes the mechanism and its limits.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::cdc {

/// The schema and table flotilla keeps on a captured source.
inline constexpr std::string_view capture_schema = "_flotilla";
inline constexpr std::string_view ddl_log_table = "ddl_log";

/// Stamped on the trigger function (COMMENT ON FUNCTION): a capture installed by another
/// version is installed again.
inline constexpr std::string_view capture_version = "flotilla ddl capture 7";

/// Statements that create (or refresh) the log table, the trigger function and the two
/// event triggers (ddl_command_end and sql_drop). Needs a superuser on the source. The
/// function is SECURITY DEFINER, so DDL run by any role is logged without that role
/// being granted anything on `_flotilla`.
[[nodiscard]] std::vector<std::string> install_ddl_capture_sql();

/// One row: (current user is a superuser, a current capture is installed and enabled,
/// current_user, current_database()). A stream whose user is not a superuser starts only
/// when the capture is installed already.
[[nodiscard]] std::string ddl_capture_state_sql();

/// What a superuser runs once so that `role` streams `database` without being a
/// superuser: install_ddl_capture_sql(), then `role` gets the log table (a publication
/// lists only tables its creator owns), REPLICATION and CREATE on the database.
[[nodiscard]] std::vector<std::string> ddl_capture_setup_sql(std::string_view role,
                                                             std::string_view database);

/// A column of a source table as the catalog and the DDL log describe it.
struct source_column {
  std::string name;
  int attnum = 0;            ///< pg_attribute.attnum: follows a column across a rename
  std::string type;          ///< format_type(): "integer", "character varying(20)"
  bool not_null = false;
  bool key = false;          ///< part of the primary key
  std::optional<std::string> default_expr;
  /// ADD COLUMN with a constant default stored as metadata (atthasmissing): existing
  /// rows read `missing_value`.
  bool has_missing = false;
  std::optional<std::string> missing_value;
  /// The column's collation when not its type's default (pg_collation.collname; empty:
  /// the default), whether it is an identity column, whether it is generated (its
  /// `default_expr` then holds the expression). nullopt: logged by a capture before
  /// version 3, which did not record it.
  std::optional<std::string> collation = {};
  std::optional<bool> identity = {};
  std::optional<bool> generated = {};

  friend bool operator==(const source_column&, const source_column&) = default;
};

/// One row of `_flotilla.ddl_log`.
struct ddl_event {
  std::int64_t id = 0;
  std::string command_tag;      ///< "ALTER TABLE", "DROP TABLE", "CREATE INDEX"
  std::string object_type;      ///< "table", "table column", "index"
  std::string object_identity;  ///< "public.orders"
  std::uint32_t relid = 0;      ///< the table's oid
  std::string schema;           ///< the table's schema and name after the change
  std::string table;
  std::string ddl;              ///< the statement (current_query())
  bool dropped = false;         ///< DROP TABLE
  std::vector<source_column> columns;  ///< after the change (empty when dropped)
};

/// The DDL statements of a query string the capture logged (current_query(), which holds
/// every statement the client sent at once: `ALTER TABLE ...; UPDATE ... SET v = 'x'`),
/// joined by "; ": statements beginning with ALTER, CREATE, DROP or COMMENT, split at
/// semicolons outside quotes, dollar quotes and comments. `ddl_not_shown` when none is
/// found at the top level (the DDL ran inside a DO block or a function, whose text may
/// hold other statements' data). What a schema_change event publishes.
inline constexpr std::string_view ddl_not_shown =
    "(the DDL ran inside another statement, such as a DO block or a function: its text is "
    "not published, as it may hold other statements and their values)";
[[nodiscard]] std::string ddl_statements(std::string_view query);

/// Reads a log row given as (column name, text or null) pairs from the stream.
[[nodiscard]] ddl_event parse_ddl_event(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& fields);

/// Parses the JSON array of columns the trigger writes.
[[nodiscard]] std::vector<source_column> parse_columns_json(std::string_view json);

/// The columns as the JSON array the trigger writes (parse_columns_json reads it back).
[[nodiscard]] std::string columns_json(const std::vector<source_column>& columns);

/// SQL reading the columns of tables (same shape as the log's) for the given oids, one
/// row per column: relid, schema, table, then the source_column fields.
[[nodiscard]] std::string catalog_columns_sql(const std::vector<std::string>& qualified_names);

/// What a DDL did to one table's columns, in words the outcome rules use.
struct column_diff {
  enum class kind : std::uint8_t {
    added,
    dropped,
    renamed,
    retyped,
    nullability,
    default_changed,
    collation,   ///< `to`: "collation default -> \"de_DE\""
    identity,    ///< `to`: "identity added" / "identity dropped"
    generated,   ///< `to`: "now generated" / "no longer generated" / expression changed
    key_changed,
  };
  kind what = kind::added;
  std::string column;     ///< the column (its old name for renamed)
  std::string to;         ///< renamed: the new name; retyped: the new type
  const source_column* before = nullptr;
  const source_column* after = nullptr;
};

/// The differences between `before` and `after`, matched by attnum (so a rename is one
/// change), in column order: drops, renames, type, nullability and default changes, adds,
/// then a key change when the set of key columns changed for another reason than a drop.
[[nodiscard]] std::vector<column_diff> diff_columns(const std::vector<source_column>& before,
                                                    const std::vector<source_column>& after);

}  // namespace flotilla::cdc
