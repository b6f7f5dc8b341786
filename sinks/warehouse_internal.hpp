#pragma once
/// The load logic shared by the three executed warehouses (duckdb, postgres, sqlite).
///
/// Each engine implements a handful of primitives: run one statement, transaction
/// control, a bulk row inserter and a catalog read. warehouse_base turns them into
/// execute / begin_load / committed_token, so staging, swap, merge and commit tokens
/// behave the same on every engine. See docs/sinks.md for the decisions.
///
/// Owned by whoever called open_warehouse; one connection, used by one thread at a time
/// (a detached I/O actor). At most one table_writer is open per warehouse, because the
/// writer holds the connection's transaction (and, on PostgreSQL, a COPY in progress):
/// while it is open, call nothing else on the warehouse. Destroying the warehouse closes
/// the connection; open writers must be destroyed first.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dialects/ddl.hpp"
#include "sinks/warehouse.hpp"

namespace flotilla::sinks::detail {

/// Suffix of the staging table a full refresh loads before swapping it in.
inline constexpr std::string_view staging_suffix = "__flotilla_staging";
/// Suffix of the table a merge loads before upserting into the live table.
inline constexpr std::string_view merge_suffix = "__flotilla_merge";
/// Column holding each merged row's arrival order: the last version of a key wins.
inline constexpr std::string_view seq_column = "__flotilla_seq";
/// Name of the bookkeeping table holding commit tokens.
inline constexpr std::string_view commits_table = "_flotilla_commits";
/// Schema holding the bookkeeping table where the engine has schemas.
inline constexpr std::string_view bookkeeping_schema = "_flotilla";

/// Writes rows into one table inside the load's transaction, through the engine's
/// fastest path (DuckDB appender, PostgreSQL COPY, SQLite prepared INSERT).
/// Destroying it without finish() abandons what it buffered.
class row_inserter {
 public:
  virtual ~row_inserter() = default;
  /// Appends every row of `batch`, whose columns are the ones the inserter was opened
  /// with. When opened with a sequence column, row r gets `first_seq + r` in it.
  virtual void append(const schema::row_batch& batch, std::uint64_t first_seq) = 0;
  /// Flushes what is buffered; the rows are then part of the transaction.
  virtual void finish() = 0;
};

/// Each type string of one catalog read parsed once by the dialect: a fleet's tables
/// share a handful of types (a read-ahead of 10,000 tables reads 160,000 columns).
class type_cache {
 public:
  using parsed_type = std::expected<schema::portable_type, schema::type_error>;
  explicit type_cache(const dialects::dialect& d) : dialect_(d) {}
  const parsed_type& operator()(std::string_view text) {
    auto it = parsed_.find(text);
    if (it == parsed_.end())
      it = parsed_.emplace(std::string(text), dialect_.parse_physical(text)).first;
    return it->second;
  }

 private:
  const dialects::dialect& dialect_;
  std::map<std::string, parsed_type, std::less<>> parsed_;
};

/// Why a load whose table's commit token changed since its run read it committed nothing
/// (begins "the table's commit token changed").
[[nodiscard]] std::string changed_token_message(const dialects::dialect& d,
                                                const dialects::table_ref& table);

class warehouse_base : public warehouse {
 public:
  warehouse_base(std::string target_name, std::unique_ptr<dialects::dialect> d);
  ~warehouse_base() override;

  [[nodiscard]] const dialects::dialect& dialect() const override { return *dialect_; }
  void execute(const std::vector<std::string>& statements) override;
  [[nodiscard]] std::unique_ptr<table_writer> begin_load(const load_request& request) override;
  [[nodiscard]] std::optional<std::string> committed_token(
      const dialects::table_ref& table) override;
  [[nodiscard]] std::optional<std::map<std::string, std::string>> committed_tokens() override;

  // ---- engine primitives ---------------------------------------------------------
  /// Runs one statement; throws sink_error naming the target and the statement.
  virtual void run(const std::string& sql) = 0;
  virtual void begin() = 0;
  virtual void commit_transaction() = 0;
  /// Begins a transaction and runs `statements` in it; an engine may send them together
  /// (PostgreSQL: one round trip). Default: begin(), then run() each.
  virtual void begin_with(const std::vector<std::string>& statements);
  /// Runs `statements` in the open transaction, then commits it; an engine may send them
  /// together. Default: run() each, then commit_transaction().
  virtual void run_and_commit(const std::vector<std::string>& statements);
  /// Never throws: used on error paths and in destructors.
  virtual void rollback() noexcept = 0;
  /// Opens a bulk inserter into `table` for `columns` (in this order), plus the
  /// sequence column last when `with_seq`. Called inside the load's transaction.
  [[nodiscard]] virtual std::unique_ptr<row_inserter> open_inserter(
      const dialects::table_ref& table, const schema::table_schema& columns, bool with_seq) = 0;
  /// Creates `schema` when missing, in its own transaction and safe against another
  /// connection creating it at the same time.
  virtual void ensure_schema(const std::string& schema) = 0;
  /// Creates the bookkeeping table when missing (same guarantees as ensure_schema).
  virtual void ensure_bookkeeping() = 0;
  [[nodiscard]] virtual dialects::table_ref bookkeeping_table() const = 0;
  /// Longest identifier the engine keeps, in bytes (longer ones are truncated by the
  /// engine, which could make a staging name collide with the live table); 0: no limit.
  [[nodiscard]] virtual std::size_t max_identifier_bytes() const { return 0; }
  /// A full refresh creates its staging table without the primary key and adds it after
  /// the rows are in (one sorted index build instead of one insert per row), as
  /// pg_dump's output does (PostgreSQL, DuckDB). Default: false
  [[nodiscard]] virtual bool key_after_load() const { return false; }

  // ---- used by the writer --------------------------------------------------------
  /// The statement a load's transaction ends with: `request`'s commit token written for
  /// its table. Engines whose commits another process's session may still make (a killed
  /// run's, on a server) check request.expected_token too.
  [[nodiscard]] virtual std::string token_statement(const load_request& request) const;
  /// An engine whose load holds the table's write lock from its start (SQLite's BEGIN
  /// IMMEDIATE) checks a guarded token by reading it in the load's transaction before the
  /// commit: another than the one the run read means another process (a second run of
  /// the table at the same time) committed rows of it meanwhile. Default: false (the
  /// token statement checks it, or the engine admits one writer per file).
  [[nodiscard]] virtual bool checks_token_in_transaction() const { return false; }
  /// The error of a load whose table's commit token is no longer the one its run read.
  [[nodiscard]] sink_error changed_token(const dialects::table_ref& table) const;
  [[nodiscard]] const std::string& target_name() const { return target_name_; }
  void writer_closed() { writer_open_ = false; }
  /// A load rolled back: the schemas it took for granted are checked again by the next.
  void writer_rolled_back() {
    writer_open_ = false;
    schemas_ready_.clear();
  }

 protected:
  /// "target 'x': <what>", the prefix of every error this warehouse throws.
  [[nodiscard]] sink_error error(std::string_view what) const;
  /// The error describe() throws for a column whose type the dialect cannot map.
  /// The indexes of `table` from catalog rows of (name, CREATE statement), each with the
  /// statement that drops it (hand_made_indexes()).
  [[nodiscard]] std::vector<hand_made_index> indexes_from(
      const dialects::table_ref& table,
      const std::vector<std::vector<std::optional<std::string>>>& rows) const;
  [[nodiscard]] sink_error unmappable(const dialects::table_ref& table, std::string_view column,
                                      std::string_view type, const schema::type_error& why) const;
  /// The error describe() throws when `table`'s name is held by another kind of object,
  /// `what` saying which ("a view", "an index on \"s\".\"t\"").
  [[nodiscard]] sink_error not_a_table(const dialects::table_ref& table,
                                       std::string_view what) const;

 private:
  std::string target_name_;
  std::unique_ptr<dialects::dialect> dialect_;
  bool bookkeeping_ready_ = false;
  /// Schemas this connection has ensured (begin_load): a fleet's first loads into one
  /// schema send its CREATE SCHEMA once, not once per table.
  std::set<std::string> schemas_ready_;
  bool writer_open_ = false;
};

// ---- helpers shared by the engines ----------------------------------------------------

/// A table beside `t` (same catalog and schema) named `t.name + suffix`. When that is
/// longer than `max_bytes` (non-zero), the name is shortened at a UTF-8 boundary and a
/// hash of the full name keeps it unique, so it can never equal the live table's name.
using dialects::detail::sibling;

/// A statement as an error message quotes it (`(in: ...)`): its first 400 bytes, whole
/// UTF-8 characters, and how long it was. A multi-row INSERT holds every row's values:
/// quoted whole, one failed batch made a message of megabytes, repeated at every restart,
/// with the source's data in every log it reached.
[[nodiscard]] inline std::string statement_excerpt(std::string_view sql) {
  constexpr std::size_t keep = 400;
  if (sql.size() <= keep)
    return std::string(sql);
  std::size_t cut = keep;
  while (cut > 0 && (static_cast<unsigned char>(sql[cut]) & 0xC0) == 0x80)
    --cut;
  return std::string(sql.substr(0, cut)) + " ... (" + std::to_string(sql.size()) +
         " bytes in all)";
}

/// Shortest text that parses back to exactly `v`; NaN and infinities spelled
/// NaN, Infinity, -Infinity (accepted by every engine here).
[[nodiscard]] std::string format_real(double v);
void append_real(std::string& out, double v);

/// Lower-case hex of raw bytes.
void append_hex(std::string& out, std::string_view bytes);

/// A value as text, for engines that take text and cast (bool as true/false).
[[nodiscard]] std::string value_text(const schema::value& v);

}  // namespace flotilla::sinks::detail

namespace flotilla::sinks::detail {

// ---- engine factories (one per *_warehouse.cpp) -----------------------------------------
[[nodiscard]] std::unique_ptr<warehouse> open_duckdb(const warehouse_options& options,
                                                     std::unique_ptr<dialects::dialect> d);
/// set_stop_request's flag, or null: nothing asks the run to stop.
[[nodiscard]] const std::atomic<bool>* stop_request() noexcept;
[[nodiscard]] std::unique_ptr<warehouse> open_postgres(const warehouse_options& options,
                                                       std::unique_ptr<dialects::dialect> d);
[[nodiscard]] std::unique_ptr<warehouse> open_sqlite(const warehouse_options& options,
                                                     std::unique_ptr<dialects::dialect> d);

}  // namespace flotilla::sinks::detail

namespace flotilla::sinks::detail {

// ---- value conversions for typed engine slots (exact or refused) ----------------------
/// bool, 0/1, or text true/false/t/f/1/0.
[[nodiscard]] std::optional<bool> as_bool(const schema::value& v);
/// integer, bool as 0/1, an integral real in range, or integer text.
[[nodiscard]] std::optional<std::int64_t> as_int(const schema::value& v);
/// real, integer, or numeric text.
[[nodiscard]] std::optional<double> as_real(const schema::value& v);

/// The error for a value that does not fit its column: names the table, column and row.
[[nodiscard]] sink_error bad_value(const dialects::dialect& d, const dialects::table_ref& t,
                                   std::string_view column, std::uint64_t row,
                                   const schema::value& v, std::string_view engine_type);

}  // namespace flotilla::sinks::detail
