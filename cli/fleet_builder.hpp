#pragma once
/// Turns the loaded project, the --filter arguments and local state into a fleet spec
/// for actors::run_fleet, and the fleet's reports into the run record. Shared by
/// `plan`, `run` and `retry`.

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actors/fleet.hpp"
#include "cli/verbs.hpp"
#include "config/model.hpp"
#include "config/selection.hpp"

namespace flotilla::state::v1 {
class TableResult;
}
namespace flotilla::storage {
class state_store;
namespace pb = flotilla::state::v1;
}
namespace flotilla::events {
struct drift_verdict;
}

namespace flotilla::cli {

class target_presence;

/// Loads flotilla.toml and parses the filters, printing every diagnostic to stderr.
/// nullptr on any error (the caller exits 2).
/// A warning on stderr when the reports hold no table and no source error: the --filter
/// arguments matched nothing, or the configuration selects nothing. `nothing` ends it
/// ("was copied", "is planned").
/// True when it warned.
bool warn_if_nothing_selected(const config::project& p, const std::vector<std::string>& filter_args,
                              const std::vector<actors::pipeline_report>& reports,
                              std::string_view nothing);

/// A source that could not be read at all has no catalog to list its tables: those an
/// earlier run copied are reported failed with the source's reason (run and plan alike).
/// Not where the selection names tables (`--filter table=`, a retry's `only`).
/// The tables the last unrestricted run of `source` into `target` selected (kept to tell
/// tables gone from the source, "<source>#tables#<target>"), by their qualified names;
/// nullopt when none is kept (or it cannot be read).
[[nodiscard]] std::optional<std::set<std::string>> kept_table_names(
    const storage::state_store& store, const std::string& source, const std::string& target);

/// Tables gone from the source by an earlier run's account (kept_table_names) are not
/// listed: said once when they went, they are not the unreadable source's tables.
void list_tables_of_failed_sources(const config::project& project,
                                   const storage::state_store& store,
                                   const std::vector<config::filter>& filters,
                                   const std::set<std::string>& only,
                                   std::vector<actors::pipeline_report>& reports);

[[nodiscard]] std::shared_ptr<const config::project> load_or_report(
    const global_options& g, const std::vector<std::string>& filter_args,
    std::vector<config::filter>& filters);

struct fleet_options {
  bool plan_only = false;
  bool no_prune = false;
  /// --full-refresh: every selected table copied in full, an incremental one too: its
  /// rows replace the target's and its watermark starts over from them (dbt's flag).
  bool full_refresh = false;
  bool allow_type_change_rebuild = false;  ///< --allow-type-change-rebuild
  std::string run_id;
  /// `retry`: only these tables ("<source>.<table>"; "<source>.*" for every table of a
  /// source), each loading its staged data when an earlier run kept some. Empty: all.
  std::set<std::string> only;
  bool reuse_staged = false;
  /// With reuse_staged: the runs whose staged data may be loaded (empty: any run's).
  std::set<std::string> staged_runs;
  /// Whether a target table a table may be pruned into is still there; made by
  /// build_fleet when not given (the run keeps it, to record its DuckDB files after).
  std::shared_ptr<target_presence> presence;
};

/// Whether a run restricted to `only` (a retry's tables) takes any table of `source`;
/// an empty `only` takes every source. A retry opens no source it retries nothing of.
[[nodiscard]] bool takes_source(const std::set<std::string>& only, const std::string& source);

/// Builds the fleet. `store` may be null (plan reads no state when none exists yet).
[[nodiscard]] actors::fleet_spec build_fleet(const config::project& p,
                                             const std::vector<config::filter>& filters,
                                             storage::state_store* store,
                                             const fleet_options& options);

/// What a table's copy did, as its result keeps it for the events and run.json written
/// again after a kill: the load, its schema actions, the drift check, when it started and
/// ended. Nothing for a table that was never planned (pruned, skipped, failed early).
void describe_copy(storage::pb::TableResult& result, const engine::table_outcome& o);

/// The source-drift gate's verdict of a table, when the gate ran for it.
[[nodiscard]] const events::drift_verdict* drift_verdict_of(const engine::table_outcome& o);

/// A run's note of a table whose DDL committed on the target ahead of its rows (status
/// "altered", in the tables family): "#altered/<run id>/<source>.<table>". No source name
/// begins with '#', so the notes never meet a table's own result.
inline constexpr std::string_view altered_prefix = "#altered/";
[[nodiscard]] std::string altered_key(std::string_view run_id, std::string_view table_key);
/// Set once this process noted a schema change: its run removes its notes as it ends.
[[nodiscard]] bool noted_schema_changes();
/// Removes the notes of run `run_id`.
void remove_altered_notes(storage::state_store& store, std::string_view run_id);

/// "staging__us_west__shop.orders": the target table as users see it.
[[nodiscard]] std::string display_name(const dialects::table_ref& t);

/// The database a target writes to, in one spelling: two [targets] on one file (however
/// its path is written) or one PostgreSQL database are one. Touches the file system:
/// computed once per target.
[[nodiscard]] std::string target_database(const config::target_config& target);
/// A target table as two selected tables landing on it are told apart (FLT-R006): the
/// target's database (target_database) and the table, as the target tells names apart
/// (case; an unqualified name is in DuckDB's main, PostgreSQL's public).
[[nodiscard]] std::string target_claim(const config::target_config& target,
                                       const std::string& database,
                                       const dialects::table_ref& where);

/// A new run id: "20261130T180102Z-3fa2".
[[nodiscard]] std::string new_run_id();

/// Hash of the settings a table's copy runs under (ChangeMarker.settings): its target and
/// target table, declared columns, cursor, key and policies. Pruning needs it unchanged.
[[nodiscard]] std::string settings_hash(const config::target_config& target,
                                        const engine::table_job& job);

/// Staged data of a table flotilla.toml no longer selects (its source taken out, or an
/// exclude leaving it out): no retry can load it, so a run forgets it and its file goes.
void drop_unselected_staged(const config::project& p, storage::state_store& store);

/// Removes the staged files no StagedEntry keeps: those of runs killed while they staged
/// (a kill -9 leaves each gated table's file), with their emptied run directories. Call
/// it holding the store (its lock keeps other runs out).
void remove_orphan_staged(const config::project& p, const storage::state_store& store);

/// The names project `p` went by before, as its state directory recorded them when it
/// was renamed ([project] name changed in the same config file); none otherwise.
[[nodiscard]] std::vector<std::string> earlier_project_names(const config::project& p);

/// Whether the state store `dir` exists, or may (its directory cannot be looked into: the
/// open then says why, FLT-R007, rather than taking it for none).
[[nodiscard]] bool state_may_exist(const std::filesystem::path& dir);

/// Why project `p` may not use its state directory (another project's: FLT-R007), or ""
/// when it may. Records nothing: for commands that only read state or decide on what a
/// stream of the project left there (reviews).
[[nodiscard]] std::string state_dir_refusal(const config::project& p);

[[nodiscard]] std::unique_ptr<storage::state_store> open_state(const config::project& p,
                                                               bool create);
/// Opens the project's state store to read it (nullptr when there is none yet), read-only
/// while another process (a run) holds it. `refused`, when given: why a store that is
/// there could not be read (damaged, unreadable), which `run` refuses (FLT-R007); empty
/// when it was read or is not there.
[[nodiscard]] std::unique_ptr<storage::state_store> open_state_to_read(
    const config::project& p, std::string* refused = nullptr);

}  // namespace flotilla::cli
