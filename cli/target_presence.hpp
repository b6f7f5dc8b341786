#pragma once
/// Whether a target table a run may prune is still there. A table dropped on the target
/// since its last copy (by hand, a schema dropped, the database created anew) has lost
/// the rows the prune would trust: it is copied again instead. PostgreSQL and SQLite
/// targets are asked once per schema and run (one catalog query, only when some table of
/// theirs may be pruned). A DuckDB file is asked only when it changed since a run of this
/// project last closed it (its size, modification time and inode, kept in the state
/// directory): opening a file of thousands of tables costs more than pruning them, and a
/// file nobody else wrote has lost no table.
///
/// Thread-safe: the pipelines' catalog callbacks ask it concurrently.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "config/model.hpp"
#include "dialects/dialect.hpp"

namespace flotilla::cli {

class target_presence {
 public:
  /// Notes, as the run starts, which DuckDB target files are as a run left them.
  explicit target_presence(const config::project& p);
  ~target_presence();
  target_presence(const target_presence&) = delete;
  target_presence& operator=(const target_presence&) = delete;

  /// Why `table` of `target` is known to be missing, or not known to be there (the target
  /// could not be asked: unreachable, not a database; the copy then fails saying why), as
  /// a sentence for `not_pruned`; nullopt: present, or not asked (an unchanged DuckDB file).
  [[nodiscard]] std::optional<std::string> missing(const config::target_config& target,
                                                   const dialects::table_ref& table);

  /// Why an incremental table that may be pruned is to be copied after all: the commit
  /// token its target keeps is not the one this project's state recorded (`watermark` of
  /// `cursor`): the target restored from an older copy, or loaded by another project or
  /// process since. nullopt: it is, or not known (the target not asked: an unchanged
  /// DuckDB file). Call after missing() for the same target.
  [[nodiscard]] std::optional<std::string> token_off(const config::target_config& target,
                                                     const dialects::table_ref& table,
                                                     const std::string& cursor,
                                                     const std::string& watermark,
                                                     const std::string& project,
                                                      const std::vector<std::string>& earlier = {});

  struct per_target {
    bool decided = false;
    /// Every table of the target as (catalog, schema, name); nullopt: not asked (an
    /// unchanged DuckDB file) or not known.
    std::optional<std::set<std::tuple<std::string, std::string, std::string>>> tables;
    std::unique_ptr<dialects::dialect> dialect;
    bool asked = false;  ///< the target was asked and answered
    /// The commit tokens the target keeps, by qualified table name; nullopt: not read.
    std::optional<std::map<std::string, std::string>> tokens;
    std::string unreadable;  ///< a changed DuckDB file that could not be opened: why
  };
  /// After a run (never a plan): records each DuckDB target file's size, modification
  /// time and inode as the run leaves it, so the next run knows whether anything else
  /// wrote it since; only for a file whose tables this run can vouch for: unchanged since
  /// the last record when the run started, or, in a run of every table (`restricted`
  /// false), asked or with none of its tables pruned. Otherwise the record goes, and the
  /// next run asks the file.
  void record_target_files(const config::project& p, bool restricted);

 private:
  std::string state_dir_;
  std::set<std::string> unchanged_files_;  ///< DuckDB targets as recorded, at the start
  std::mutex mutex_;
  std::map<std::string, per_target> targets_;
};

}  // namespace flotilla::cli
