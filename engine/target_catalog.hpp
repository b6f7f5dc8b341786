#pragma once
/// Target table schemas read a schema at a time. A plan or a run of a fleet describes
/// thousands of target tables in a few schemas: one catalog query for the tables of a
/// schema the run will touch costs a fraction of one query per table (PostgreSQL: ~25
/// against ~180 us per table). The tables are registered up front with expect(); the
/// first describe() of a schema reads every registered table of it that has not been
/// handed out yet.
///
/// Each table's read-ahead description is handed out once: the run's own DDL changes the
/// table afterwards, so a second ask for the same table describes it live, as does an ask
/// for a table nobody registered. A read-ahead older than `max_age` is read again, so a
/// long run plans each table against a recent description. Engines without a
/// schema-wide query (warehouse::describe_tables returns nullopt) describe each table.
///
/// Ownership and threads: one per target and run, shared by the target's I/O actors;
/// every member is thread-safe. describe() blocks (it queries the warehouse it is given).

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "sinks/warehouse.hpp"

namespace flotilla::engine {

class target_catalog {
 public:
  /// Schemas with fewer registered tables than `min_batch` are described table by table
  /// (one unprepared schema query costs about as much as two prepared describes).
  explicit target_catalog(std::chrono::seconds max_age = std::chrono::seconds(60),
                          std::size_t min_batch = 4);
  ~target_catalog();
  target_catalog(const target_catalog&) = delete;
  target_catalog& operator=(const target_catalog&) = delete;

  /// The run will describe `table` (through this catalog).
  void expect(const dialects::table_ref& table);

  /// What wh.describe(table) returns (nullopt: absent), read ahead with the other
  /// registered tables of its schema when possible. Throws sink_error as describe() does.
  [[nodiscard]] std::optional<schema::table_schema> describe(sinks::warehouse& wh,
                                                             const dialects::table_ref& table);

  /// Schema-wide queries run so far (for tests and the bench).
  [[nodiscard]] std::size_t schema_reads() const;

 private:
  struct schema_entry;
  std::shared_ptr<schema_entry> entry_of(const dialects::table_ref& table, bool create);

  std::chrono::seconds max_age_;
  std::size_t min_batch_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<schema_entry>> schemas_;
  std::size_t schema_reads_ = 0;
};

}  // namespace flotilla::engine
