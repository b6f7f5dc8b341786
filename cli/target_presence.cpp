#include "cli/target_presence.hpp"
#include "engine/copy.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include <fmt/format.h>

#include "sinks/warehouse.hpp"

namespace flotilla::cli {

namespace {

/// A file's size, modification time (ns) and inode; empty when it cannot be read.
std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return {};
  return fmt::format("{} {}.{:09} {}", static_cast<long long>(st.st_size),
                     static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec,
                     static_cast<unsigned long long>(st.st_ino));
}

/// A DuckDB file's identity: the file's, and its write-ahead log's (`<file>.wal`), which
/// holds committed changes (a table dropped) until a checkpoint writes them into the file.
std::string duckdb_identity(const std::string& path) {
  const std::string file = file_identity(path);
  if (file.empty())
    return {};
  const std::string wal = file_identity(path + ".wal");
  return wal.empty() ? file : file + " wal " + wal;
}

std::filesystem::path identity_file(const std::string& state_dir, const std::string& target) {
  return std::filesystem::path(state_dir) / "targets" / (target + ".file");
}

std::string recorded_identity(const std::string& state_dir, const std::string& target) {
  std::ifstream in(identity_file(state_dir, target));
  std::string line;
  std::getline(in, line);
  return line;
}

/// The catalog query listing every table (and view) of a target as (catalog, schema,
/// name); an empty catalog where the dialect's table names have none.
std::optional<std::string> tables_query(std::string_view dialect) {
  if (dialect == "postgres")
    return "SELECT '', n.nspname, c.relname FROM pg_catalog.pg_class c JOIN "
           "pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', "
           "'p', 'v', 'm', 'f') AND n.nspname NOT IN ('pg_catalog', 'information_schema')";
  if (dialect == "duckdb")  // the file's own database as '', as table names leave it out
    return "SELECT CASE WHEN table_catalog = current_database() THEN '' ELSE table_catalog "
           "END, table_schema, table_name FROM information_schema.tables";
  if (dialect == "sqlite")
    return "SELECT '', '', name FROM sqlite_master WHERE type IN ('table', 'view')";
  return std::nullopt;
}

}  // namespace

target_presence::target_presence(const config::project& p) : state_dir_(p.state_dir) {
  for (const auto& t : p.targets)
    if (t.dialect == "duckdb")
      if (const std::string now = duckdb_identity(t.path);
          !now.empty() && now == recorded_identity(state_dir_, t.name))
        unchanged_files_.insert(t.name);
}
target_presence::~target_presence() = default;

std::optional<std::string> target_presence::missing(const config::target_config& target,
                                                    const dialects::table_ref& table) {
  std::lock_guard lock(mutex_);
  per_target& t = targets_[target.name];
  if (!t.decided) {
    t.decided = true;
    std::error_code ec;
    // A missing file is the fleet builder's own case (nothing of it is pruned).
    const bool ask = target.dialect == "postgres" || target.dialect == "sqlite" ||
                     (target.dialect == "duckdb" && !unchanged_files_.contains(target.name));
    const auto sql = tables_query(target.dialect);
    if (ask && sql && (target.dialect == "postgres" || std::filesystem::exists(target.path, ec))) {
      // Asked once, and closed at once: the run's own loads open the target themselves.
      try {
        auto wh = sinks::open_warehouse(sinks::warehouse_options{
            target.name, target.dialect, target.path, target.dsn, target.block_size,
            target.in_place_max_bytes});
        std::set<std::tuple<std::string, std::string, std::string>> names;
        for (const auto& row : wh->query(*sql))
          if (row.size() == 3 && row[1] && row[2])
            names.emplace(target.dialect == "duckdb" ? row[0].value_or("") : std::string(),
                          *row[1], *row[2]);
        if (auto d = dialects::make_dialect(target.dialect)) {
          t.tables = std::move(names);
          t.dialect = std::move(*d);
          t.asked = true;
          // The commit tokens in the same visit (one query), for token_off(); a target
          // whose bookkeeping cannot be read only loses that check.
          try {
            t.tokens = wh->committed_tokens();
          } catch (const std::exception&) {
          }
        }
      } catch (const std::exception& e) {
        // Unreachable, locked, unreadable: nothing of it is pruned, so the copies say why
        // (a run pruning into a warehouse that is down would report success). A DuckDB
        // file that changed since a run left it (another process holds it, say) may have
        // lost tables too.
        t.unreadable = e.what();
      }
    }
  }
  if (!t.unreadable.empty())
    return target.dialect == "duckdb"
               ? fmt::format("the target file {} changed since a run last left it, and its "
                             "tables could not be listed to check that this one is still "
                             "there ({}): it is copied, not pruned",
                             target.path, t.unreadable)
               : fmt::format("the target {} could not be asked for its tables, to check that "
                             "this one is still there ({}): it is copied, not pruned",
                             target.name, t.unreadable);
  if (!t.tables || !t.dialect)
    return std::nullopt;
  // DuckDB: a table named with the file's own database as its catalog is listed without.
  const bool found =
      t.tables->contains({table.catalog, table.schema, table.name}) ||
      (!table.catalog.empty() && target.dialect == "duckdb" &&
       t.tables->contains({"", table.schema, table.name}));
  if (found)
    return std::nullopt;
  return fmt::format("the target table {} is missing (dropped since its last copy?): it is "
                     "copied again",
                     t.dialect->qualified(table));
}

std::optional<std::string> target_presence::token_off(const config::target_config& target,
                                                      const dialects::table_ref& table,
                                                      const std::string& cursor,
                                                      const std::string& watermark,
                                                      const std::string& project,
                                                      const std::vector<std::string>& earlier) {
  std::lock_guard lock(mutex_);
  const auto it = targets_.find(target.name);
  if (it == targets_.end() || !it->second.tokens || !it->second.dialect)
    return std::nullopt;
  const auto& tokens = *it->second.tokens;
  auto found = tokens.find(it->second.dialect->qualified(table));
  // DuckDB: a table named with the file's own database as its catalog is kept without.
  if (found == tokens.end() && !table.catalog.empty() && target.dialect == "duckdb")
    found = tokens.find(it->second.dialect->qualified({"", table.schema, table.name}));
  if (found == tokens.end())
    return std::nullopt;
  return engine::token_off_state(found->second, cursor, watermark, project, earlier);
}

void target_presence::record_target_files(const config::project& p, bool restricted) {
  std::lock_guard lock(mutex_);
  for (const auto& t : p.targets) {
    if (t.dialect != "duckdb")
      continue;
    const auto at = targets_.find(t.name);
    // Asked (or with no table that could be pruned, all copied), by a run of every table:
    // a table dropped before it was copied again. A restricted run leaves others out.
    const bool vouched =
        unchanged_files_.contains(t.name) ||
        (!restricted && (at == targets_.end() || !at->second.decided || at->second.asked));
    const std::string identity = vouched ? duckdb_identity(t.path) : std::string();
    const auto file = identity_file(p.state_dir, t.name);
    std::error_code ec;
    if (identity.empty()) {
      std::filesystem::remove(file, ec);
      continue;
    }
    std::filesystem::create_directories(file.parent_path(), ec);
    const auto tmp = file.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << identity << '\n';
      if (!out)
        continue;
    }
    std::filesystem::rename(tmp, file, ec);
  }
}

}  // namespace flotilla::cli
