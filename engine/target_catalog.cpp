#include "engine/target_catalog.hpp"

#include <set>
#include <vector>

namespace flotilla::engine {

struct target_catalog::schema_entry {
  std::mutex mu;  // held while the schema is read, so one worker reads it for all
  std::string catalog, schema;
  std::set<std::string> pending;  ///< registered and not handed out yet
  std::set<std::string> covered;  ///< names the read-ahead asked for
  sinks::warehouse::described_tables tables;
  std::chrono::steady_clock::time_point read_at{};
  bool unsupported = false;  ///< the engine has no schema-wide query
};

target_catalog::target_catalog(std::chrono::seconds max_age, std::size_t min_batch)
    : max_age_(max_age), min_batch_(min_batch) {}

target_catalog::~target_catalog() = default;

std::shared_ptr<target_catalog::schema_entry> target_catalog::entry_of(
    const dialects::table_ref& table, bool create) {
  const std::string key = table.catalog + '\n' + table.schema;
  std::lock_guard lock(mu_);
  auto it = schemas_.find(key);
  if (it != schemas_.end())
    return it->second;
  if (!create)
    return nullptr;
  auto e = std::make_shared<schema_entry>();
  e->catalog = table.catalog;
  e->schema = table.schema;
  schemas_.emplace(key, e);
  return e;
}

void target_catalog::expect(const dialects::table_ref& table) {
  auto e = entry_of(table, true);
  std::lock_guard lock(e->mu);
  e->pending.insert(table.name);
}

std::size_t target_catalog::schema_reads() const {
  std::lock_guard lock(mu_);
  return schema_reads_;
}

std::optional<schema::table_schema> target_catalog::describe(sinks::warehouse& wh,
                                                             const dialects::table_ref& table) {
  auto e = entry_of(table, false);
  if (!e)
    return wh.describe(table);
  {
    std::unique_lock lock(e->mu);
    if (!e->unsupported && e->pending.contains(table.name)) {
      const auto now = std::chrono::steady_clock::now();
      const bool stale = now - e->read_at > max_age_;
      if (stale || !e->covered.contains(table.name)) {
        // Read every table of the schema not handed out yet, this one included.
        e->tables.clear();
        e->covered.clear();
        if (e->pending.size() >= min_batch_) {
          const std::vector<std::string> names(e->pending.begin(), e->pending.end());
          std::optional<sinks::warehouse::described_tables> read;
          bool failed = false;
          try {
            read = wh.describe_tables(e->catalog, e->schema, names);
          } catch (const std::exception&) {
            failed = true;  // describe this table alone; the next ask tries the schema again
          }
          if (read) {
            e->tables = std::move(*read);
            e->covered.insert(names.begin(), names.end());
            e->read_at = now;
            std::lock_guard count(mu_);
            ++schema_reads_;
          } else if (!failed) {
            e->unsupported = true;
          }
        }
      }
      if (e->covered.contains(table.name)) {
        e->pending.erase(table.name);  // handed out once
        e->covered.erase(table.name);
        auto it = e->tables.find(table.name);
        if (it == e->tables.end())
          return std::nullopt;  // not in the catalog: the table does not exist
        auto described = std::move(it->second);
        e->tables.erase(it);
        if (!described)
          throw sinks::sink_error(described.error());
        return std::move(*described);
      }
      e->pending.erase(table.name);
    }
  }
  return wh.describe(table);
}

}  // namespace flotilla::engine
