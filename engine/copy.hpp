#pragma once
/// The copy of one table: describe the target, plan, run the DDL, stream the rows
/// through the table's change queue, commit. Blocking: runs only in I/O actors.

#include <any>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/planner.hpp"
#include "engine/target_catalog.hpp"
#include "sinks/warehouse.hpp"
#include "sources/source.hpp"

namespace flotilla::engine {

/// The source-drift gate's answer for one table (seed 004), given the staged data.
struct drift_gate_result {
  bool proceed = true;     ///< false: the table fails before any target is written
  std::string error_code;  ///< when !proceed: "FLT-D001"
  std::string error;
  std::any detail;  ///< the caller's own verdict, handed back in table_outcome::gate_detail
};

/// Called once a table's rows are staged, before its target is touched. `staged` is the
/// schema of the staged data; `reused` says it was staged by an earlier run (retry).
/// `refusal`: where the target's plan refuses the table too, its code and reason
/// ("FLT-S005: ..."): nothing is staged then, and a refusal says so. Empty otherwise.
/// `valueless`: asked of columns the gate would call changed, which of them hold no value in
/// the source (a csv/json column every row leaves empty or null: its inferred type, text or
/// json, says nothing); null when nothing can be asked (staged rows reused).
using valueless_probe = std::function<std::vector<bool>(const std::vector<std::string>& columns)>;
using drift_gate = std::function<drift_gate_result(const schema::table_schema& staged,
                                                   bool reused, const std::string& refusal,
                                                   const valueless_probe& valueless)>;

/// Staged data an earlier run kept (StagedEntry), for `flotilla retry`.
struct staged_input {
  std::string path;                      ///< engine/staging.hpp file
  std::optional<std::string> watermark;  ///< the cursor value the staged rows reach
  /// The rows past a watermark only (StagedEntry.increment); nullopt: not recorded, taken
  /// as an increment wherever that matters.
  std::optional<bool> increment;
};

/// Staged data kept because the gate failed the table.
struct staged_output {
  std::string path;
  std::uint64_t rows = 0;
  std::optional<std::string> watermark;
  schema::table_schema columns;
  /// What the drift gate observed (the staged columns and any on_schema_change = ignore
  /// left out); recorded with the staged data, so a retry checks what the run checked.
  schema::table_schema observed;
  bool increment = false;  ///< read past a watermark: not every row of the table
};

struct table_job {
  std::string source_name;
  /// Where the source reads from (its adapter and file, or PostgreSQL database), kept
  /// with an incremental table's watermark: a watermark of another location is not
  /// applied.
  std::string source_location;
  std::string target_name;  ///< the target's name in flotilla.toml
  sources::source_table table;  ///< the table's catalog slice
  dialects::table_ref target;
  table_settings settings;
  std::optional<std::string> watermark;  ///< last committed cursor value
  /// The run that committed `watermark` (state's); empty when not known. A target commit
  /// token of an older run is a copy the table's later loads did not reach (they went to
  /// another target table): its rows are read in full and replace that copy's.
  std::string watermark_run_id;
  /// The committed watermark (state's and the target's commit token) belongs to another
  /// table than the source's one now (created anew): the copy loads the table as a first
  /// run does.
  bool watermark_void = false;
  /// The source table was emptied or rewritten since the watermark was committed (its
  /// storage generation changed) and it has no key to read it again in full by: the
  /// watermark stays, and is committed again with the new generation.
  bool generation_changed = false;
  /// With generation_changed: the warning that rows below the watermark are not read,
  /// said unless the watermark is dropped anyway (the cursor column changed type).
  std::string generation_warning;
  /// The cursor column was dropped at the source after the watermark was committed (a run
  /// failed on it, FLT-S010): what its return means, said only when it is back.
  std::string cursor_back_warning;
  /// The family of values (cursor_family) the cursor column held when the watermark was
  /// committed; empty when not known (a watermark from before it was kept).
  std::string watermark_family;
  /// A table loaded in full whose earlier incremental loads left a watermark in the
  /// target (its commit token): the load clears it, so that a later incremental load
  /// does not resume past rows this one replaced.
  bool clear_token = false;
  /// No table of the project ever loaded the target table (state records no claim of
  /// it): one already there is someone else's, and the copy says what it does to it.
  bool unclaimed_target = false;
  /// Such a table, where this project's `flotilla stream` of the source has a saved
  /// position: the stream made it.
  bool stream_owned_target = false;
  /// What the run decided about the table before its plan, said with the plan's warnings.
  std::vector<std::string> warnings;
  /// The run's id, written into an incremental table's commit token with its row count:
  /// a later run that finds the target ahead of state names the run whose rows they are
  /// (table_outcome::recovered). Shared by the run's tables. May be null.
  std::shared_ptr<const std::string> run_id;
  /// The project's name ([project] name), written into the commit token with the run:
  /// a token another project committed (two flotilla.toml files loading one target
  /// table) is not this one's watermark. May be null.
  std::shared_ptr<const std::string> project;
  /// Names this project went by before ([project] name changed, its state directory
  /// following it): a token one of them committed is this project's own. May be null.
  std::shared_ptr<const std::vector<std::string>> project_earlier;
  /// Whether run `run_id` committed this table's rows without recording them (it was
  /// killed between its target commit and its state commit): its record is known and
  /// does not list the table copied. A token of a run that recorded them (the table then
  /// loaded into another target table), or of a run state no longer knows (a state
  /// directory replaced), is no such commit. Null: every run ahead of state is one.
  std::function<bool(const std::string& run_id)> unrecorded_commit;
  /// Whether the state store holds run `run_id`'s record. Null: not asked.
  std::function<bool(const std::string& run_id)> run_known;
  std::size_t batch_rows = 8192;
  std::size_t queue_batches = 4;
  /// Rows written so far, for progress. May be null.
  std::atomic<std::uint64_t>* rows_progress = nullptr;
  /// Set by Ctrl-C: the copy stops before its commit and rolls back. May be null.
  const std::atomic<bool>* cancel = nullptr;
  /// Set: the rows are staged in `staging_path` first and the gate decides whether they
  /// load (on_source_drift = warn | fail). Unset: rows stream straight to the target.
  drift_gate gate;
  std::string staging_path;
  /// Called right after the plan's DDL committed on the target, which runs it on its own,
  /// ahead of the rows: the run records the schema change, so that a run killed between
  /// the two still reports it. May be empty.
  /// Shared by a source's tables: one pointer copy per table.
  std::shared_ptr<const std::function<void(const table_job&, const table_plan&)>> after_ddl;
  /// Set (retry): load this staged data instead of extracting; `gate` is then asked with
  /// reused = true.
  std::optional<staged_input> reuse;
  /// The run's read-ahead of the target's table schemas (the table registered with
  /// expect()). Null: the target table is described alone.
  target_catalog* target_tables = nullptr;
  /// Set where the target's workers share one connection (SQLite: one writer at a time):
  /// held around every use of the warehouse, and released while the source is read
  /// ahead of the load, so one worker reads while another writes. Null: not shared.
  std::mutex* target_lock = nullptr;
};

/// An optional value kept on the heap: one pointer in the struct that holds it, copied
/// deeply. table_outcome keeps its plan (456 bytes) this way: a pruned table has none,
/// and a run's outcomes are built, moved and kept by the ten thousand.
template <class T>
class boxed {
 public:
  boxed() = default;
  boxed(T value) : p_(std::make_unique<T>(std::move(value))) {}  // NOLINT: as optional's
  boxed(const boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  boxed(boxed&&) noexcept = default;
  boxed& operator=(const boxed& o) {
    if (this != &o)
      p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  boxed& operator=(boxed&&) noexcept = default;
  boxed& operator=(T value) {
    p_ = std::make_unique<T>(std::move(value));
    return *this;
  }
  ~boxed() = default;

  explicit operator bool() const noexcept { return p_ != nullptr; }
  [[nodiscard]] bool has_value() const noexcept { return p_ != nullptr; }
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }
  void reset() noexcept { p_.reset(); }

 private:
  std::unique_ptr<T> p_;
};

enum class table_status { copied, pruned, failed, skipped, held };

/// Rows an earlier run committed to the target with the table's watermark, which state
/// does not record: that run was killed between its target commit and its state commit
/// (or the state store was lost). This run goes on from that watermark, and reports them.
struct recovered_commit {
  std::string run_id;          ///< the run that committed them
  std::uint64_t rows = 0;      ///< rows that commit loaded
  std::string watermark;       ///< the watermark it committed
};
[[nodiscard]] std::string_view to_string(table_status s);

/// How a cursor column's values order: "number", "text", "time" (dates and timestamps),
/// ... A watermark committed under one family is not applied under another: '1000' sorts
/// before '500' as text.
[[nodiscard]] std::string cursor_family(const schema::portable_type& type);

struct table_outcome {
  table_status status = table_status::failed;
  std::uint64_t rows = 0;
  std::optional<std::string> error;
  std::string error_code;
  boxed<table_plan> plan;  ///< set once the table was planned
  std::optional<std::string> new_watermark;  ///< to record after the target commit
  std::string cursor_family;  ///< the cursor column's cursor_family(), with new_watermark
  /// An incremental table's loaded columns (the plan's, which is trimmed), recorded with
  /// new_watermark: a column loaded later and not now is an added one.
  std::vector<std::string> loaded_columns;
  std::vector<std::string> loaded_column_types;  ///< each one's portable type, in order
  std::any gate_detail;                  ///< what the drift gate returned, when it ran
  std::optional<staged_output> staged;   ///< the gate failed the table: its data is kept here
  bool reused_staged = false;            ///< the rows came from an earlier run's staged data
  /// The target held an earlier run's commit that state did not record (see
  /// recovered_commit): counted nowhere else.
  boxed<recovered_commit> recovered;
  /// The plan's DDL ran and committed (in its own transaction, before the load), whether
  /// or not the load after it did: its drift actions were taken.
  bool ddl_applied = false;
  std::int64_t duration_us = 0;          ///< copy_table's wall time, plan to commit
  std::int64_t finished_at_us = 0;       ///< when copy_table returned, µs since the epoch
};

/// The source's columns as the drift gate observes them (seed 004), each in the source's
/// own type: a csv/json file's as DuckDB inferred them, though the read may take one in
/// the live column's type. A pinned column in the type the read takes (`read`).
[[nodiscard]] schema::table_schema gate_observed(const table_job& job,
                                                 schema::table_schema columns,
                                                 const schema::table_schema& read);

/// The probe a gate asks of `src` for `job`'s table: null unless its types are inferred.
[[nodiscard]] valueless_probe valueless_probe_of(sources::source* src, const table_job& job);

/// Plans the table against the live target, without changing anything. `src`, when
/// given, answers what an inferred double column's values need as a decimal (seed 000's
/// auto_widen lattice); reading the file is the only thing it does.
[[nodiscard]] table_plan plan_against_target(sinks::warehouse& wh, const table_job& job,
                                             sources::source* src = nullptr);

/// The plan of a first load where no live table can be read (a target file that does not
/// exist yet, a plan-only dialect): the SQL a first load runs. `src`, when given, checks
/// an inferred file's values against its declared types, as plan_against_target does, so
/// a value a pin cannot hold fails the plan (FLT-S002) as it fails the run.
[[nodiscard]] table_plan plan_first_load(const table_job& job, const dialects::dialect& d,
                                         sources::source* src = nullptr);

/// Why an incremental table's target does not hold the rows this project's state says it
/// does, by the commit token the target keeps for it (`token`): nullopt when the token
/// stands for state's watermark `watermark` of `cursor` (or says nothing: none kept, or
/// one from before tokens named their run). `project`: this project's name, empty when it
/// has none. A prune asks it: a target restored from an older copy, or loaded by another
/// project since, is copied rather than trusted.
[[nodiscard]] std::optional<std::string> token_off_state(const std::optional<std::string>& token,
                                                         const std::string& cursor,
                                                         const std::string& watermark,
                                                         const std::string& project,
                                                         const std::vector<std::string>& earlier = {});

/// Copies one table. Never throws: failures come back in the outcome. The outcome's plan
/// keeps what a run reports (shape action, drift, load kind, warnings, error); its
/// statements and column lists are released once the copy is done, since a run keeps
/// every table's outcome until its end (PostgreSQL's swap statements alone are ~2 KB).
[[nodiscard]] table_outcome copy_table(sources::source& src, sinks::warehouse& wh,
                                       const table_job& job);

}  // namespace flotilla::engine
