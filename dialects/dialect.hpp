#pragma once
/// A warehouse dialect: type mapping both ways, safe-widening rules, DDL text and
/// identifier quoting. Pure string generation: no connection, no I/O.
///
/// Capabilities are `supports_*()` and default to the conservative answer; each dialect
/// overrides only what differs from the default (seed 001's allowlist, double-quoted
/// identifiers, ANSI DDL).

#include <expected>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schema/evolution.hpp"
#include "schema/table.hpp"
#include "schema/types.hpp"

namespace flotilla::dialects {

/// A table's place in the target: optional catalog/database, schema, name.
struct table_ref {
  std::string catalog;  ///< empty: none
  std::string schema;   ///< empty: the engine's default schema
  std::string name;
};

struct dialect_error {
  std::string message;
};

class dialect : public schema::type_rules {
 public:
  ~dialect() override = default;

  /// Canonical name: duckdb, postgres, sqlite, snowflake, bigquery, databricks, trino.
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// True for the targets Flotilla executes against (duckdb, postgres, sqlite); the
  /// others are plan-only.
  [[nodiscard]] virtual bool executable() const { return false; }
  /// The longest name the engine keeps whole, in bytes (PostgreSQL cuts longer ones to
  /// 63 bytes, so two names alike in those would be one); 0: no limit that matters.
  [[nodiscard]] virtual std::size_t max_identifier_bytes() const { return 0; }
  /// When `table` lies where the engine keeps its own objects (SQLite's sqlite_* tables,
  /// PostgreSQL's pg_* schemas): which, as a phrase for a message; empty when it is free.
  [[nodiscard]] virtual std::string_view engine_reserved(const table_ref& table) const {
    (void)table;
    return {};
  }
  /// When the engine keeps `column` for a column of its own in every table (PostgreSQL's
  /// system columns, xmin, ctid ...): which, as a phrase for a message; empty when free.
  [[nodiscard]] virtual std::string_view engine_reserved_column(std::string_view column) const {
    (void)column;
    return {};
  }

  // ---- types --------------------------------------------------------------------
  /// Portable -> the engine's own type spelling used in DDL.
  [[nodiscard]] std::string physical_type(const schema::portable_type& t) const override = 0;
  /// The engine's DESCRIBE / information_schema type string -> portable.
  [[nodiscard]] virtual std::expected<schema::portable_type, schema::type_error> parse_physical(
      std::string_view type_string) const = 0;
  /// parse_physical(physical_type(t)): what the engine reports back for `t`.
  [[nodiscard]] schema::portable_type canonical(const schema::portable_type& t) const override;
  /// Seed 001's default allowlist unless the dialect overrides it.
  [[nodiscard]] bool is_safe_widening(const schema::portable_type& from,
                                      const schema::portable_type& to) const override;
  [[nodiscard]] schema::name_rule names() const override {
    return schema::name_rule::case_insensitive;
  }
  /// False where the engine cannot change a column type in place at all (SQLite).
  [[nodiscard]] virtual bool supports_in_place_type_change() const { return true; }
  /// False where ALTER COLUMN ... TYPE refuses a primary key column (DuckDB: "Cannot
  /// change the type of a column that has a UNIQUE or PRIMARY KEY constraint"). A safe
  /// widening of a key column then needs rebuild_and_swap or a full refresh.
  [[nodiscard]] virtual bool supports_key_column_type_change() const { return true; }
  /// True where DDL can run inside a transaction with the data (DuckDB, PostgreSQL, SQLite).
  [[nodiscard]] virtual bool supports_transactional_ddl() const { return false; }

  // ---- identifiers --------------------------------------------------------------
  /// Quotes one identifier so that no name can break out of it. Default: "x" with
  /// embedded double quotes doubled. Throws std::invalid_argument on an empty name
  /// or one containing a NUL byte.
  [[nodiscard]] virtual std::string quote(std::string_view identifier) const;
  /// catalog.schema.name, each part quoted, empty parts left out.
  [[nodiscard]] virtual std::string qualified(const table_ref& t) const;
  /// A string literal with embedded quotes escaped ('it''s').
  [[nodiscard]] virtual std::string literal(std::string_view value) const;

  // ---- DDL ----------------------------------------------------------------------
  /// `expr`, of type `from`, as `to`: CAST(expr AS <to>) where the engine casts directly.
  [[nodiscard]] virtual std::string cast(std::string_view expr, const schema::portable_type& from,
                                         const schema::portable_type& to) const;
  /// In `catalog` (the target's database, catalog or project) when one is given.
  [[nodiscard]] virtual std::string create_schema(std::string_view schema,
                                                  std::string_view catalog = {}) const;
  [[nodiscard]] virtual std::string create_table(const table_ref& t,
                                                 const schema::table_schema& s) const;
  /// ADD COLUMN, always nullable (historical rows keep NULL).
  [[nodiscard]] virtual std::string add_column(const table_ref& t, const schema::column& c) const;
  /// The in-place type change in this dialect's syntax. Statements, in order.
  [[nodiscard]] virtual std::vector<std::string> alter_column_type(
      const table_ref& t, std::string_view column, const schema::portable_type& to) const;
  /// Lets `column` take NULL. Engines without ALTER COLUMN (SQLite) rebuild instead.
  [[nodiscard]] virtual std::string drop_not_null(const table_ref& t,
                                                  std::string_view column) const;
  /// Rebuild-and-swap: build `new_schema` under a temporary name, copy the rows of the
  /// columns both schemas share (cast to the new type), swap it in (in one transaction
  /// where the engine allows), keeping grants where the engine has them.
  ///
  /// Statement lists carry no BEGIN/COMMIT: the caller runs them in one transaction on
  /// engines with transactional DDL (warehouse::execute, or the load's own transaction
  /// for swap_in). `in_transaction` spells that out for a script.
  [[nodiscard]] virtual std::vector<std::string> rebuild_and_swap(
      const table_ref& t, const schema::table_schema& old_schema,
      const schema::table_schema& new_schema) const;
  /// True where a full refresh drops and re-creates the live table inside the load's own
  /// transaction and writes the rows there, instead of loading a staging table and
  /// swapping it in: engines whose DDL is transactional, whose readers keep seeing the
  /// committed table while a load is open, and where a rename costs as much as the
  /// database has tables (SQLite). The planner and the warehouse writer both follow it.
  [[nodiscard]] virtual bool replaces_in_place() const { return false; }
  /// Where the dialect replaces in place: the statements that make the live table `t`
  /// ready to take a full refresh's rows. A live table that keeps_live_table() for
  /// `columns` is locked against other writers (lock_for_refresh), emptied (`DELETE
  /// FROM`, which SQLite runs as a truncate, and which leaves its schema alone) and
  /// relaxed (relax_in_place); any other is dropped and created with `columns`.
  [[nodiscard]] std::vector<std::string> refresh_in_place(
      const table_ref& t, const std::optional<schema::table_schema>& live,
      const schema::table_schema& columns) const;
  /// Whether a full refresh of `columns` can keep the live table (emptied, its NOT NULLs
  /// or key relaxed where the stage lets go of them: schema::relaxation_for) instead of
  /// replacing it.
  [[nodiscard]] bool keeps_live_table(const schema::table_schema& live,
                                      const schema::table_schema& columns) const;
  /// The statements that relax a live table as `r` says; nullopt where this engine cannot
  /// in place (SQLite alters no column; DuckDB drops no key).
  [[nodiscard]] virtual std::optional<std::vector<std::string>> relax_in_place(
      const table_ref& t, const schema::in_place_relaxation& r) const;
  /// A lock taken before a live table is emptied and loaded in place, so that another
  /// process loading the same table at the same moment waits for this load's commit
  /// instead of adding its rows to this one's. Empty where the load's transaction
  /// already excludes other writers (SQLite's, DuckDB's).
  [[nodiscard]] virtual std::string lock_for_refresh(const table_ref&) const { return {}; }
  /// Swap a fully loaded staging table in place of the target (full refresh).
  [[nodiscard]] virtual std::vector<std::string> swap_in(const table_ref& staging,
                                                         const table_ref& target) const;
  [[nodiscard]] virtual std::string drop_table(const table_ref& t) const;  // IF EXISTS
  /// Statements run before a table that does not exist yet is created under `t`'s name,
  /// which free that name where the engine may have given it to something else. On
  /// PostgreSQL, tables and indexes share one namespace, and the key index of a table
  /// "orders" is "orders_pkey": a source table of that name would find it taken.
  [[nodiscard]] virtual std::vector<std::string> free_table_name(const table_ref&) const {
    return {};
  }
  /// Deletes the rows of `live` whose key (`key`, column names) is also in `incoming`'s
  /// rows. A key holding a NULL matches nothing, as in a unique key.
  [[nodiscard]] virtual std::string delete_matching(const table_ref& live,
                                                    const table_ref& incoming,
                                                    const std::vector<std::string>& key) const;

 private:
  /// canonical()'s answers so far, up to canonical_memo_size of them: a plan asks it for
  /// every column of every table (about a third of a 10,000-table drift check's
  /// evaluation), and a fleet's columns have a handful of types.
  static constexpr std::size_t canonical_memo_size = 64;
  mutable std::mutex canonical_mu_;
  mutable std::vector<std::pair<schema::portable_type, schema::portable_type>> canonical_memo_;
};

/// Resolves a dialect by name or alias (postgresql, pg, ...). An unknown name is an
/// error listing the known ones.
[[nodiscard]] std::expected<std::unique_ptr<dialect>, dialect_error> make_dialect(
    std::string_view name);

/// The canonical names of every dialect, in a stable order.
[[nodiscard]] const std::vector<std::string_view>& dialect_names();

/// The canonical name of the dialect `name` or one of its aliases names, ignoring case
/// ("PG" -> "postgres", "bq" -> "bigquery"); empty when no dialect has that name.
[[nodiscard]] std::string_view canonical_dialect_name(std::string_view name);

/// `statements` wrapped in BEGIN ... COMMIT where the dialect has transactional DDL
/// (duckdb, postgres, sqlite), unchanged elsewhere: the form to print or run as a script.
[[nodiscard]] std::vector<std::string> in_transaction(const dialect& d,
                                                      std::vector<std::string> statements);

}  // namespace flotilla::dialects
