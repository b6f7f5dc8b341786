#pragma once
/// The state store: everything that must survive a crash, in one RocksDB database under
/// the project's state directory (`.flotilla/state`), one column family per record kind.
/// Values are Protobuf records from proto/state.proto; keys come from storage/key_codec.hpp.
/// docs/state.md describes the layout, every record, and the crash guarantees.
///
/// Ownership and threads: one state_store per process, opened by the engine before the
/// actor system starts and shared (by reference or shared_ptr) with the I/O actors that
/// write state. Every method is safe to call from several threads at once; calls block
/// on disk I/O, so they belong on I/O actors, never on scheduler threads.
/// Shutdown: the destructor (or close()) flushes nothing extra — every write is already
/// in the write-ahead log — and releases the directory's lock. Callers must have stopped
/// using the store first.
///
/// Durability: each write method is one atomic RocksDB write. Once it returns, all of
/// it survives a process crash (kill -9); with sync_writes it also survives a power
/// loss. If the process dies before it returns, none of it is visible after a restart.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "proto/state.pb.h"
#include "storage/error.hpp"

namespace flotilla::storage {

namespace pb = flotilla::state::v1;

/// The column families, one per record kind. Their RocksDB names are to_string(family).
enum class family : std::uint8_t {
  watermarks,
  markers,
  schemas,
  runs,
  tables,
  holds,
  outbox,
  staged,
  positions,
  catalogs,
};

inline constexpr std::size_t family_count = 10;

[[nodiscard]] std::string_view to_string(family f);

struct store_options {
  /// fsync the write-ahead log on every write, so a committed write also survives a
  /// power loss or kernel crash (a process crash never loses a returned write either
  /// way). Default: true
  bool sync_writes = true;
  /// Create the directory and the database when missing. Default: true
  bool create_if_missing = true;
  /// Open without taking the lock, for inspecting state while another process writes
  /// it; every write then fails with errc::read_only. The store must exist.
  /// Default: false
  bool read_only = false;
  /// read_only: check every block's checksum at the open too, as a writable open always
  /// does, so that a damaged file is refused (errc::corruption) rather than read as
  /// absent records. A file a writer removed meanwhile is no damage. Default: false
  bool verify_checksums = false;
  /// RocksDB background threads for flushes and compactions. Default: 2
  int max_background_jobs = 2;
  /// Memtable size per column family before it is flushed to disk. Default: 8 MiB
  std::size_t write_buffer_bytes = std::size_t{8} << 20;
  /// RocksDB's informational LOG files kept in the directory. Default: 2
  std::size_t keep_log_files = 2;
};

/// The beginning of a ChangeMarker.marker that stands for no copy of its table: another
/// table (its key follows) loaded the target table since (table_commit::claim).
inline constexpr std::string_view displaced_marker_prefix = "\x01displaced by ";

/// Everything a table's successful copy makes durable, written in one WriteBatch right
/// after the target committed the rows: the durable point of the table's run.
struct table_commit {
  std::optional<pb::Watermark> watermark;      ///< written when set
  std::optional<pb::ChangeMarker> marker;      ///< written when set
  std::optional<pb::SchemaBaseline> baseline;  ///< written when set (a first run seeds it)
  pb::TableResult result;                      ///< always written (family `tables`)
  /// Remove the table's staged entry: its data is now in the target. Default: true
  bool remove_staged = true;
  /// Appended to the outbox in the same batch; the store assigns their sequences.
  std::vector<pb::OutboxEntry> events;
  /// The target table the rows went to (its database and name, as claims compare them).
  /// Recorded as this table's; another table that loaded it before loses its change
  /// marker, so it is not pruned over rows it did not load. Empty: not recorded.
  std::string claim;
};

/// One table's records as of a single consistent snapshot.
struct table_state {
  std::optional<pb::Watermark> watermark;
  std::optional<pb::ChangeMarker> marker;
  std::optional<pb::SchemaBaseline> baseline;
  std::optional<pb::TableResult> result;
  std::optional<pb::StagedEntry> staged;
};

/// A record with the key it is stored under.
template <class Record>
struct keyed {
  std::string key;
  Record record;
};

struct hold_entry {
  std::string target;
  std::string table;
  pb::HoldRecord record;
};

/// The record kinds kept one per "<source>.<table>" key, and their column family.
/// Runs, holds and the outbox have keys of their own and methods of their own.
template <class Record>
struct record_family;
template <>
struct record_family<pb::Watermark> : std::integral_constant<family, family::watermarks> {};
template <>
struct record_family<pb::ChangeMarker> : std::integral_constant<family, family::markers> {};
template <>
struct record_family<pb::SchemaBaseline> : std::integral_constant<family, family::schemas> {};
template <>
struct record_family<pb::TableResult> : std::integral_constant<family, family::tables> {};
template <>
struct record_family<pb::StagedEntry> : std::integral_constant<family, family::staged> {};
template <>
struct record_family<pb::CdcPosition> : std::integral_constant<family, family::positions> {};
/// Keyed by "<source>" alone: one kept catalog per source.
template <>
struct record_family<pb::SourceCatalog> : std::integral_constant<family, family::catalogs> {};

template <class Record>
concept table_record = requires { record_family<Record>::value; };

inline constexpr std::size_t no_limit = std::numeric_limits<std::size_t>::max();

class state_store {
 public:
  /// Opens (creating when allowed) the store in `dir` and any missing column family.
  /// Fails with errc::locked, naming the path and what to do, while another process
  /// (or another state_store in this process) has it open.
  [[nodiscard]] static result<state_store> open(const std::filesystem::path& dir,
                                                const store_options& options = {});

  state_store(state_store&&) noexcept;
  state_store& operator=(state_store&&) noexcept;
  state_store(const state_store&) = delete;
  state_store& operator=(const state_store&) = delete;
  ~state_store();

  /// Closes the database and releases the lock; the store is unusable afterwards.
  [[nodiscard]] status close();

  [[nodiscard]] const std::filesystem::path& path() const;

  // ---- records kept per "<source>.<table>" ----------------------------------------
  // Watermark, ChangeMarker, SchemaBaseline, TableResult, StagedEntry, CdcPosition
  // (and SourceCatalog, keyed by "<source>"):
  //   store.get<pb::Watermark>("shop.orders"), store.put(key, marker), ...

  template <table_record Record>
  [[nodiscard]] result<std::optional<Record>> get(std::string_view key) const {
    auto bytes = get_bytes(record_family<Record>::value, key);
    if (!bytes)
      return std::unexpected(std::move(bytes.error()));
    if (!*bytes)
      return std::nullopt;
    Record record;
    if (!record.ParseFromString(**bytes))
      return std::unexpected(error::invalid_record(record_family<Record>::value, key));
    return record;
  }

  /// get() into a message the caller provides (e.g. one on a protobuf Arena, for a
  /// record with many strings). Returns whether the record exists.
  template <table_record Record>
  [[nodiscard]] result<bool> get_into(std::string_view key, Record& record) const {
    auto bytes = get_bytes(record_family<Record>::value, key);
    if (!bytes)
      return std::unexpected(std::move(bytes.error()));
    if (!*bytes)
      return false;
    if (!record.ParseFromString(**bytes))
      return std::unexpected(error::invalid_record(record_family<Record>::value, key));
    return true;
  }

  template <table_record Record>
  [[nodiscard]] status put(std::string_view key, const Record& record) {
    return put_bytes(record_family<Record>::value, key, record.SerializeAsString());
  }

  template <table_record Record>
  [[nodiscard]] status remove(std::string_view key) {
    return remove_bytes(record_family<Record>::value, key);
  }

  /// Every record whose key starts with `prefix` ("shop." for one source), in key order.
  template <table_record Record>
  [[nodiscard]] result<std::vector<keyed<Record>>> list(std::string_view prefix = {}) const {
    auto rows = list_bytes(record_family<Record>::value, prefix);
    if (!rows)
      return std::unexpected(std::move(rows.error()));
    std::vector<keyed<Record>> out;
    out.reserve(rows->size());
    for (auto& [key, bytes] : *rows) {
      keyed<Record> entry{std::move(key), {}};
      if (!entry.record.ParseFromString(bytes))
        return std::unexpected(error::invalid_record(record_family<Record>::value, entry.key));
      out.push_back(std::move(entry));
    }
    return out;
  }

  /// The table's watermark, marker, baseline, last result and staged entry, all read
  /// from one snapshot, so a concurrent commit_table is seen entirely or not at all.
  [[nodiscard]] result<table_state> read_table(std::string_view key) const;
  /// read_table of every key, in order, all from one snapshot (one batched read per
  /// family rather than one read per record). Without `with_drift_records` the
  /// baseline and last result are not read (left empty): only the source drift gate
  /// uses them, and a fleet whose tables it does not check skips two reads per table.
  [[nodiscard]] result<std::vector<table_state>> read_tables(
      std::span<const std::string> table_keys, bool with_drift_records = true) const;

  /// The durable point after the target commit: writes the watermark, marker and
  /// baseline (each when set), the table result, removes the staged entry (when asked)
  /// and appends the events to the outbox, all in one WriteBatch.
  [[nodiscard]] status commit_table(std::string_view key, const table_commit& commit);

  // ---- runs -------------------------------------------------------------------------

  /// Writes the run record and, in the same batch, points "latest" at it and indexes it
  /// by started_at_us. Call it again to update a run (running -> success); keep
  /// started_at_us unchanged across updates. The run id must be a valid name.
  [[nodiscard]] status put_run(const pb::RunRecord& run);
  [[nodiscard]] result<std::optional<pb::RunRecord>> get_run(std::string_view run_id) const;
  /// The id of the run last written by put_run; nullopt before the first run.
  [[nodiscard]] result<std::optional<std::string>> latest_run_id() const;
  /// The status of the run last written by put_run ("running", "success", ...), without
  /// reading its record (a store an earlier release last wrote: read from the record);
  /// nullopt before the first run.
  [[nodiscard]] result<std::optional<std::string>> latest_run_status() const;
  /// The table ("<source>.<table>") that last loaded the target table `claim`
  /// (table_commit::claim); nullopt when none is recorded.
  [[nodiscard]] result<std::optional<std::string>> claim_holder(std::string_view claim) const;
  /// The latest run's record, pointer and record read from one snapshot.
  [[nodiscard]] result<std::optional<pb::RunRecord>> latest_run() const;
  /// Up to `limit` runs, newest started first.
  [[nodiscard]] result<std::vector<pb::RunRecord>> recent_runs(std::size_t limit = no_limit) const;
  /// Removes all but the `keep` newest runs (never the latest one). Returns the ids of
  /// the runs removed, newest first.
  [[nodiscard]] result<std::vector<std::string>> prune_runs(std::size_t keep);

  // ---- outbox: undelivered events, in order ----------------------------------------

  /// Appends the entries in order; the store assigns each a sequence (ignoring the one
  /// given), monotonic across restarts and never reused. Returns the last assigned.
  [[nodiscard]] result<std::uint64_t> append_outbox(std::span<const pb::OutboxEntry> entries);
  /// Entries with sequence > `after`, in sequence order, at most `limit`. An entry is
  /// returned only once every lower sequence is either visible too or never will be,
  /// so a consumer that removes what it delivered never skips one written concurrently.
  [[nodiscard]] result<std::vector<pb::OutboxEntry>> scan_outbox(std::uint64_t after = 0,
                                                                 std::size_t limit = no_limit) const;
  /// Removes every entry with sequence <= `sequence` (delivered to every sink).
  [[nodiscard]] status remove_outbox_through(std::uint64_t sequence);
  /// Number of undelivered entries.
  [[nodiscard]] result<std::uint64_t> outbox_size() const;
  /// The last sequence assigned so far (0 when none ever was).
  [[nodiscard]] std::uint64_t last_outbox_sequence() const;
  /// The last outbox sequence the event sink `sink` ("kafka brokers ..., topic ...")
  /// acknowledged while a sink beside it did not, so the entries stayed in the outbox;
  /// 0 when none was recorded. Lets the next run's relay skip them for that sink.
  [[nodiscard]] result<std::uint64_t> outbox_sent_through(std::string_view sink) const;
  /// Records that `sink` acknowledged every outbox entry through `sequence`.
  [[nodiscard]] status set_outbox_sent_through(std::string_view sink, std::uint64_t sequence);

  // ---- holds: tables held at a source schema change, per (target, table) ------------
  // `table` is the "<source>.<table>" key. Target and table must be valid names.

  /// Writes the hold record and appends `changes` to its queue in one batch. Returns
  /// the last sequence of the queue afterwards (0 when it is empty and has always been).
  [[nodiscard]] result<std::uint64_t> put_hold(std::string_view target, std::string_view table,
                                               const pb::HoldRecord& hold,
                                               std::span<const pb::HeldChange> changes = {});
  [[nodiscard]] result<std::optional<pb::HoldRecord>> get_hold(std::string_view target,
                                                               std::string_view table) const;
  /// Every hold, or one target's when `target` is not empty, ordered by (target, table).
  [[nodiscard]] result<std::vector<hold_entry>> list_holds(std::string_view target = {}) const;
  /// Removes the hold record, its kept changes and its sequence counter in one batch.
  [[nodiscard]] status remove_hold(std::string_view target, std::string_view table);

  /// Appends kept changes to the table's queue; the store assigns sequences from 1,
  /// monotonic until the hold is removed. Returns the last assigned.
  [[nodiscard]] result<std::uint64_t> append_held_changes(std::string_view target,
                                                          std::string_view table,
                                                          std::span<const pb::HeldChange> changes);
  /// Kept changes with sequence > `after`, in order, at most `limit`.
  [[nodiscard]] result<std::vector<pb::HeldChange>> scan_held_changes(
      std::string_view target, std::string_view table, std::uint64_t after = 0,
      std::size_t limit = no_limit) const;
  /// Removes kept changes with sequence <= `sequence` (applied to the target).
  [[nodiscard]] status remove_held_changes_through(std::string_view target,
                                                   std::string_view table,
                                                   std::uint64_t sequence);
  /// Removes every kept change of the table; later appends continue the sequence.
  [[nodiscard]] status clear_held_changes(std::string_view target, std::string_view table);
  [[nodiscard]] result<std::uint64_t> held_change_count(std::string_view target,
                                                        std::string_view table) const;

  /// Writes the hold record and, in the same batch, its review note: the bookkeeping of
  /// the review's decisions (cdc/review.hpp), opaque bytes kept under
  /// 'v' target NUL table in the `holds` family. remove_hold leaves the note; a note
  /// names the hold it belongs to, so a later hold never reads a stale one as its own.
  [[nodiscard]] status put_hold_review(std::string_view target, std::string_view table,
                                       const pb::HoldRecord& hold, std::string_view note);
  /// Keeps a finished review (its record and note) under its creation time, apart from
  /// the table's current hold, which a later hold of the table replaces.
  [[nodiscard]] status put_finished_review(const pb::HoldRecord& hold, std::string_view note);
  /// Every finished review kept, or one target's, ordered by (target, table, creation).
  [[nodiscard]] result<std::vector<pb::FinishedReview>> list_finished_reviews(
      std::string_view target = {}) const;
  /// The review note last written with put_hold_review; nullopt when none was.
  [[nodiscard]] result<std::optional<std::string>> get_hold_review(std::string_view target,
                                                                   std::string_view table) const;

 private:
  struct impl;
  explicit state_store(std::unique_ptr<impl> p);

  [[nodiscard]] result<std::optional<std::string>> get_bytes(family f, std::string_view key) const;
  [[nodiscard]] status put_bytes(family f, std::string_view key, const std::string& value);
  [[nodiscard]] status remove_bytes(family f, std::string_view key);
  [[nodiscard]] result<std::vector<std::pair<std::string, std::string>>> list_bytes(
      family f, std::string_view prefix) const;

  std::unique_ptr<impl> impl_;
};

}  // namespace flotilla::storage
