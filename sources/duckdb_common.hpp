#pragma once
/// DuckDB plumbing shared by the duckdb adapter and the csv/json adapters (which read
/// their files through an in-memory DuckDB). Internal to sources/: only sources/*.cpp
/// include this header, because it pulls in duckdb.h.
///
/// A `database` may be shared by threads; a `connection` belongs to one thread at a time,
/// so each catalog read or table read makes its own (DuckDB connections are cheap).

#include <duckdb.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "schema/table.hpp"
#include "sources/source.hpp"

namespace flotilla::sources::duck {

/// A DuckDB call failed; what() is DuckDB's own message.
struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class database {
 public:
  /// A database file opened read-only. Instances are shared within the process (DuckDB's
  /// instance cache), so several sources reading one file hold one instance.
  static database open_read_only(const std::string& path);
  /// A private in-memory database (csv/json files are read through it).
  static database open_memory();

  database(database&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  database& operator=(database&&) = delete;
  database(const database&) = delete;
  ~database();
  [[nodiscard]] duckdb_database get() const { return db_; }

 private:
  explicit database(duckdb_database db) : db_(db) {}
  duckdb_database db_ = nullptr;
};

class connection {
 public:
  /// Connects and sets the session time zone to UTC, so casts between TIMESTAMP and
  /// TIMESTAMPTZ treat naive timestamps as UTC.
  explicit connection(const database& db);
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection();
  [[nodiscard]] duckdb_connection get() const { return con_; }

  void exec(const std::string& sql);
  /// Runs a query whose columns are all VARCHAR (cast them in the SQL) and returns every
  /// row; for catalog queries.
  [[nodiscard]] std::vector<std::vector<std::optional<std::string>>> strings(
      const std::string& sql);

 private:
  duckdb_connection con_ = nullptr;
};

/// What to read and how to name it in errors.
struct scan_spec {
  std::string relation;  ///< SQL relation: "\"main\".\"orders\"" or "read_csv('a.csv')"
  const read_request* request = nullptr;
  std::string_view source;  ///< for messages
  std::string_view table;
  std::string_view where;  ///< the file, for messages
  std::string_view fix;    ///< what to do when DuckDB reports an error
  /// DuckDB's reason in the source's own words (a JSON file's line); empty: as it is.
  std::function<std::string(std::string)> explain = {};
};

/// Reads the requested columns of `spec.relation` in batches, converting each DuckDB
/// value to the representation of the requested portable type. Casts are added in SQL
/// only where the stored type differs from what the conversion reads directly.
read_result scan(connection& con, const scan_spec& spec, const batch_consumer& consume);

}  // namespace flotilla::sources::duck
