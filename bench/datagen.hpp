#pragma once
/// The deterministic data of every scenario: one 16-column "wide" table shape (ints,
/// bigints, text, decimal(12,2), timestamps, bool, double, with NULLs where real tables
/// have them), rows that are a pure function of (table seed, row index), and fleets of
/// clients x tables whose sizes follow a Zipf-like skew (a few big clients and tables,
/// a long tail of small ones). The same seed gives the same bytes on every engine.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace flotilla::bench {

class pg_connection;

struct wide_row {
  std::int64_t id = 0;
  std::int32_t account_id = 0;
  std::int32_t quantity = 0;
  std::int32_t region_id = 0;
  std::int64_t amount = 0;
  std::int64_t ext_ref = 0;      ///< NULL in about 10% of rows
  bool ext_ref_null = false;
  std::string name;
  std::string email;
  std::string_view city;         ///< NULL in about 5% of rows
  bool city_null = false;
  std::string_view status;
  std::int64_t price_cents = 0;  ///< decimal(12,2)
  std::int64_t tax_cents = 0;    ///< decimal(12,2), NULL in about 10% of rows
  bool tax_null = false;
  std::int64_t created_us = 0;   ///< timestamp, whole seconds
  std::int64_t updated_us = 0;   ///< timestamp with microseconds
  bool active = false;
  double score = 0;              ///< full-precision double
};

/// Row `index` (0-based) of the table with `seed`.
[[nodiscard]] wide_row make_row(std::uint64_t seed, std::uint64_t index);

struct column_def {
  std::string_view name;
  std::string_view sqlite;    ///< declared type in SQLite
  std::string_view postgres;  ///< type in PostgreSQL
  std::string_view duckdb;    ///< type in DuckDB
};
extern const std::array<column_def, 16> wide_columns;

/// "id, account_id, ..." in table order.
[[nodiscard]] std::string column_list();

enum class engine_kind { sqlite, postgres, duckdb };
/// CREATE TABLE for the wide shape; `qualified` is already quoted where needed.
/// `with_key` false: without the primary key on id (a loader adds it after the rows).
[[nodiscard]] std::string create_table_sql(engine_kind e, const std::string& qualified,
                                           bool with_key = true);

// ---- text forms (what PostgreSQL prints) ------------------------------------------
[[nodiscard]] std::string decimal_text(std::int64_t cents);
/// "YYYY-MM-DD HH:MM:SS[.ffffff]", fraction without trailing zeros.
[[nodiscard]] std::string timestamp_text(std::int64_t us);
/// Inverse of timestamp_text (also accepts 'T'); returns false on malformed text.
[[nodiscard]] bool parse_timestamp_us(std::string_view text, std::int64_t& us);
/// Shortest round-trip text of a double.
[[nodiscard]] std::string double_text(double d);
/// One row in PostgreSQL COPY text format, newline included.
void append_copy_line(std::string& out, const wide_row& r);

// ---- fleets -----------------------------------------------------------------------
struct fleet_table {
  std::string name;         ///< "t00042"
  std::uint64_t rows = 0;
  std::uint64_t seed = 0;
};
struct fleet_client {
  std::string name;         ///< "c0007"
  std::vector<fleet_table> tables;
  [[nodiscard]] std::uint64_t rows() const;
};
struct fleet_layout {
  std::vector<fleet_client> clients;
  [[nodiscard]] std::uint64_t rows() const;
  [[nodiscard]] std::size_t tables() const;
};

/// `total_rows` split over clients x tables: client c gets a share proportional to
/// (c+1)^-skew, and within a client table t a share proportional to (t+1)^-skew
/// (skew 0: an even split). Every table gets at least one row when total_rows allows;
/// the shares add up to exactly total_rows.
[[nodiscard]] fleet_layout make_fleet(std::size_t clients, std::size_t tables_per_client,
                                      std::uint64_t total_rows, double skew,
                                      std::uint64_t seed = 1);

/// Splits `total` proportionally to weights (largest remainders), at least one each
/// while total allows.
[[nodiscard]] std::vector<std::uint64_t> apportion(std::uint64_t total,
                                                   const std::vector<double>& weights);

// ---- loaders (setup, never timed) -------------------------------------------------
/// Creates the client's SQLite file (rollback journal) with its tables and rows.
void write_sqlite_client(const std::string& path, const fleet_client& client);
/// Creates one wide table `name` with `rows` rows of `seed` in an open SQLite database.
void write_sqlite_table(sqlite3* db, const std::string& name, std::uint64_t rows,
                        std::uint64_t seed);
/// Creates `schema.name` on PostgreSQL and fills it with COPY.
void write_pg_table(pg_connection& pg, const std::string& schema, const std::string& name,
                    std::uint64_t rows, std::uint64_t seed);

}  // namespace flotilla::bench
