#include "storage/state_store.hpp"

#include <chrono>
#include <thread>
#include <algorithm>
#include <cstdlib>
#include <array>
#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>

#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include <fmt/core.h>

#include "storage/key_codec.hpp"

namespace flotilla::storage {

namespace {

/// Layout version of the whole store, kept in the default family. Bump it only for a
/// change an older build would misread; appending proto fields never needs it.
constexpr std::string_view layout_version = "1";
constexpr std::string_view format_key = "format";
/// The highest outbox sequence ever removed, so sequences are never reused even when
/// the outbox was drained before a restart.
constexpr std::string_view outbox_removed_key = "outbox_removed_through";

constexpr std::array<std::string_view, family_count> family_names = {
    "watermarks", "markers", "schemas", "runs", "tables",
    "holds",      "outbox",  "staged",  "positions", "catalogs",
};

/// RocksDB writes an OPTIONS file at every read-write open: the options serialized,
/// synced, read back, parsed and compared, then the file renamed into place. It is a
/// record for tools (`ldb`, a backup); RocksDB itself never reads it, as every open
/// passes its options. That was half of an open's CPU, on every command. So the store
/// keeps beside it, in this file, a digest of the options it was written for and its
/// name; while both match, the open skips writing it again (see options_file_keeper).
constexpr std::string_view options_digest_file = "FLOTILLA-OPTIONS";

/// The file system of a read-write open: refuses RocksDB's temporary OPTIONS file when
/// the current one was written for the same options (RocksDB then logs "Unnable to
/// persist options", its spelling, and goes on: fail_if_options_file_error is off), and
/// notes the name an OPTIONS file is renamed to when one is written.
class options_file_keeper : public rocksdb::FileSystemWrapper {
 public:
  explicit options_file_keeper(const std::shared_ptr<rocksdb::FileSystem>& base)
      : FileSystemWrapper(base) {}
  static const char* kClassName() { return "FlotillaOptionsFileKeeper"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* file,
                                    rocksdb::IODebugContext* debug) override {
    if (keep_.load() && is_options_file(name) && name.ends_with(".dbtmp"))
      return rocksdb::IOStatus::NotSupported("the OPTIONS file is current, kept as is");
    return target()->NewWritableFile(name, options, file, debug);
  }

  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* debug) override {
    auto s = target()->RenameFile(from, to, options, debug);
    if (s.ok() && is_options_file(to) && !to.ends_with(".dbtmp")) {
      std::lock_guard lock(mu_);
      written_ = std::filesystem::path(to).filename().string();
    }
    return s;
  }

  /// Whether the next open skips writing the OPTIONS file.
  void keep(bool k) { keep_.store(k); }

  /// The OPTIONS file this open wrote, if it wrote one.
  std::string written() const {
    std::lock_guard lock(mu_);
    return written_;
  }

 private:
  static bool is_options_file(const std::string& name) {
    return std::filesystem::path(name).filename().string().starts_with("OPTIONS-");
  }

  std::atomic<bool> keep_{false};
  mutable std::mutex mu_;
  std::string written_;
};

/// What an open's OPTIONS file would say, reduced to a digest: RocksDB's version, the
/// DB options and each family's, as RocksDB serializes them. `sets` are the distinct
/// family options, `families` each family's name and index in `sets`.
std::string options_digest(const rocksdb::DBOptions& db,
                           const std::vector<const rocksdb::ColumnFamilyOptions*>& sets,
                           const std::vector<std::pair<std::string, std::size_t>>& families) {
  std::string text = fmt::format("rocksdb {}.{}.{}\n", ROCKSDB_MAJOR, ROCKSDB_MINOR, ROCKSDB_PATCH);
  std::string part;
  if (!rocksdb::GetStringFromDBOptions(&part, db).ok())
    return {};
  text += part;
  for (const auto* set : sets) {
    part.clear();
    if (!rocksdb::GetStringFromColumnFamilyOptions(&part, *set).ok())
      return {};
    (text += '\n') += part;
  }
  for (const auto& [name, set] : families)
    text += fmt::format("\n[{}] {}", name, set);
  return fmt::format("{:016x}", std::hash<std::string>{}(text));
}

/// True when `dir` holds the OPTIONS file named in its digest file, written for `digest`.
bool options_file_current(const std::filesystem::path& dir, const std::string& digest) {
  if (digest.empty())
    return false;
  std::ifstream in(dir / options_digest_file);
  std::string kept_digest, kept_file;
  if (!(in >> kept_digest >> kept_file) || kept_digest != digest)
    return false;
  std::error_code ec;
  return kept_file.starts_with("OPTIONS-") && std::filesystem::exists(dir / kept_file, ec);
}

/// Records which OPTIONS file `digest` was written to (replaced whole; not synced: a
/// lost digest only means the next open writes the OPTIONS file again).
void remember_options_file(const std::filesystem::path& dir, const std::string& digest,
                           const std::string& file) {
  if (digest.empty() || file.empty())
    return;
  const auto tmp = dir / (std::string(options_digest_file) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << digest << ' ' << file << '\n';
    if (!out)
      return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir / options_digest_file, ec);
}

rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }
std::string_view view(const rocksdb::Slice& s) { return {s.data(), s.size()}; }

errc code_of(const rocksdb::Status& s) {
  if (s.IsBusy() || s.IsTryAgain() || s.IsTimedOut())
    return errc::busy;
  if (s.IsCorruption())
    return errc::corruption;
  if (s.IsIOError())
    return errc::io_error;
  return errc::internal;
}

bool is_lock_failure(const rocksdb::Status& s) {
  if (!s.IsIOError())
    return false;
  auto text = s.ToString();
  return text.find("lock") != std::string::npos || text.find("LOCK") != std::string::npos;
}

error failed(const rocksdb::Status& s, std::string_view operation, family f, std::string_view key) {
  return error::operation_failed(code_of(s), operation, f, key, s.ToString());
}

error read_only_write(family f, std::string_view key) {
  return error::operation_failed(errc::read_only, "write", f, key,
                                 "the store was opened read-only");
}

/// Sequences 1..n as numbers: key order within a queue.
std::uint64_t sequence_of(const rocksdb::Slice& key_tail) {
  return keys::read_be64(view(key_tail)).value_or(0);
}

}  // namespace

std::string_view to_string(family f) { return family_names[static_cast<std::size_t>(f)]; }

struct state_store::impl {
  std::filesystem::path path;
  store_options options;
  std::shared_ptr<options_file_keeper> files;  // read-write opens: the OPTIONS file's keeper
  std::unique_ptr<rocksdb::Env> env;           // over `files`; outlives db (see shut)
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // every family opened, for close
  std::array<rocksdb::ColumnFamilyHandle*, family_count> cf{};
  rocksdb::ColumnFamilyHandle* default_cf = nullptr;
  rocksdb::WriteOptions write_options;

  // Outbox sequences. A batch reserves a contiguous range, then writes it; a reader
  // sees only sequences below the lowest range still being written (see scan_outbox).
  mutable std::mutex outbox_mu;
  std::uint64_t outbox_next = 1;          // next sequence to hand out
  std::uint64_t outbox_floor = 1;         // every sequence below it is removed
  std::multiset<std::uint64_t> in_flight; // first sequence of each batch being written
  std::mutex outbox_remove_mu;            // removals run one at a time

  // Held-change queues: appends of a table are serialized and its counter cached.
  std::mutex holds_mu;
  std::unordered_map<std::string, std::uint64_t> hold_last;  // counter key -> last sequence

  std::mutex runs_mu;  // put_run / prune_runs: the latest pointer follows call order

  ~impl() { (void)shut(); }

  rocksdb::Status shut() {
    if (!db)
      return rocksdb::Status::OK();
    // Closing cancels a flush not yet started. The one open() starts for the replayed
    // log is finished first (a family whose memory is still waiting to be written is
    // flushed now, with whatever was written since), so the log never grows from one
    // short command to the next.
    if (!options.read_only) {
      std::vector<rocksdb::ColumnFamilyHandle*> pending;
      for (auto* h : handles) {
        std::uint64_t waiting = 0;
        if (db->GetIntProperty(h, "rocksdb.num-immutable-mem-table", &waiting) && waiting > 0)
          pending.push_back(h);
      }
      if (!pending.empty()) {
        rocksdb::FlushOptions flush;
        flush.allow_write_stall = true;
        (void)db->Flush(flush, pending);
      }
    }
    for (auto* h : handles)
      (void)db->DestroyColumnFamilyHandle(h);
    handles.clear();
    cf.fill(nullptr);
    default_cf = nullptr;
    auto s = db->Close();
    delete db;
    db = nullptr;
    return s;
  }

  rocksdb::ColumnFamilyHandle* handle(family f) const { return cf[static_cast<std::size_t>(f)]; }

  /// Highest sequence every lower one of which is visible or will never exist.
  std::uint64_t outbox_visible_through() const {
    return in_flight.empty() ? outbox_next - 1 : *in_flight.begin() - 1;
  }

  status write(rocksdb::WriteBatch& batch, std::string_view operation, family f,
               std::string_view key) {
    if (options.read_only)
      return std::unexpected(read_only_write(f, key));
    auto s = db->Write(write_options, &batch);
    if (!s.ok())
      return std::unexpected(failed(s, operation, f, key));
    return {};
  }

  /// Reserves `n` outbox sequences; release() after the batch holding them was written
  /// (or abandoned: the sequences are then simply never used).
  struct reservation {
    impl* owner = nullptr;
    std::uint64_t first = 0;
    reservation(impl* o, std::size_t n) : owner(o) {
      std::lock_guard lock(owner->outbox_mu);
      first = owner->outbox_next;
      owner->outbox_next += n;
      owner->in_flight.insert(first);
    }
    reservation(const reservation&) = delete;
    reservation& operator=(const reservation&) = delete;
    ~reservation() {
      std::lock_guard lock(owner->outbox_mu);
      owner->in_flight.erase(owner->in_flight.find(first));
    }
  };

  void add_outbox(rocksdb::WriteBatch& batch, std::span<const pb::OutboxEntry> entries,
                  std::uint64_t first) {
    auto sequence = first;
    for (const auto& entry : entries) {
      pb::OutboxEntry copy = entry;
      copy.set_sequence(sequence);
      (void)batch.Put(handle(family::outbox), keys::outbox(sequence), copy.SerializeAsString());
      ++sequence;
    }
  }

  /// The last sequence of a held table's queue; holds_mu must be held.
  result<std::uint64_t> hold_last_sequence(const std::string& counter_key) {
    if (auto it = hold_last.find(counter_key); it != hold_last.end())
      return it->second;
    std::string value;
    auto s = db->Get(rocksdb::ReadOptions{}, handle(family::holds), counter_key, &value);
    std::uint64_t last = 0;
    if (s.ok())
      last = keys::read_be64(value).value_or(0);
    else if (!s.IsNotFound())
      return std::unexpected(failed(s, "read", family::holds, counter_key));
    hold_last[counter_key] = last;
    return last;
  }

  result<std::uint64_t> append_held(rocksdb::WriteBatch& batch, std::string_view target,
                                    std::string_view table,
                                    std::span<const pb::HeldChange> changes,
                                    std::string& counter_key) {
    counter_key = keys::hold_counter(target, table);
    auto last = hold_last_sequence(counter_key);
    if (!last)
      return last;
    auto sequence = *last;
    for (const auto& change : changes) {
      pb::HeldChange copy = change;
      copy.set_sequence(++sequence);
      (void)batch.Put(handle(family::holds), keys::hold_queue(target, table, sequence),
                      copy.SerializeAsString());
    }
    if (!changes.empty())
      (void)batch.Put(handle(family::holds), counter_key, keys::be64(sequence));
    return sequence;
  }

  /// Iterates [lower, upper) of a family in key order (or reverse), calling `fn` with
  /// each key and value until it returns false.
  template <class Fn>
  status scan(family f, std::string_view lower, std::string_view upper, bool reverse,
              const rocksdb::Snapshot* snapshot, Fn&& fn) const {
    auto* h = handle(f);
    if (!h)
      return {};  // a read-only store opened before this family existed
    rocksdb::ReadOptions ro;
    ro.snapshot = snapshot;
    rocksdb::Slice lo = slice(lower);
    rocksdb::Slice hi = slice(upper);
    if (!lower.empty())
      ro.iterate_lower_bound = &lo;
    if (!upper.empty())
      ro.iterate_upper_bound = &hi;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, h));
    if (reverse)
      it->SeekToLast();
    else
      it->SeekToFirst();
    for (; it->Valid(); reverse ? it->Prev() : it->Next()) {
      if (!fn(it->key(), it->value()))
        break;
    }
    if (!it->status().ok())
      return std::unexpected(failed(it->status(), "scan", f, lower));
    return {};
  }

  result<std::optional<std::string>> get(family f, std::string_view key,
                                         const rocksdb::Snapshot* snapshot = nullptr) const {
    auto* h = handle(f);
    if (!h)
      return std::nullopt;
    rocksdb::ReadOptions ro;
    ro.snapshot = snapshot;
    std::string value;
    auto s = db->Get(ro, h, slice(key), &value);
    if (s.IsNotFound())
      return std::nullopt;
    if (!s.ok())
      return std::unexpected(failed(s, "read", f, key));
    return value;
  }

  template <class Record>
  result<std::optional<Record>> get_record(family f, std::string_view key,
                                           const rocksdb::Snapshot* snapshot = nullptr) const {
    auto bytes = get(f, key, snapshot);
    if (!bytes)
      return std::unexpected(std::move(bytes.error()));
    if (!*bytes)
      return std::nullopt;
    Record record;
    if (!record.ParseFromString(**bytes))
      return std::unexpected(error::invalid_record(f, key));
    return record;
  }
};

// ---- open / close ---------------------------------------------------------------------

state_store::state_store(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
state_store::state_store(state_store&&) noexcept = default;
state_store& state_store::operator=(state_store&&) noexcept = default;
state_store::~state_store() = default;

/// The free space a writable open asks of the state store's file system.
constexpr std::uintmax_t k_min_free_bytes = 16ull * 1024 * 1024;

result<state_store> state_store::open(const std::filesystem::path& dir,
                                      const store_options& options) {
  const std::string where = dir.string();
  if (options.create_if_missing && !options.read_only) {
    std::error_code ec;
    // A file system too full to take a run's records: RocksDB stops the process at the
    // first write that does not fit (this build asserts on it), midway through a run.
    // Refused before anything starts (or is created) instead.
    // FLOTILLA_STATE_MIN_FREE_BYTES overrides the figure (the tests ask for more than any
    // disk has).
    std::uintmax_t min_free = k_min_free_bytes;
    if (const char* v = std::getenv("FLOTILLA_STATE_MIN_FREE_BYTES"); v != nullptr && *v != '\0')
      min_free = std::strtoull(v, nullptr, 10);
    std::filesystem::path existing = dir;
    while (!existing.empty() && !std::filesystem::exists(existing, ec) && existing.has_parent_path() &&
           existing.parent_path() != existing)
      existing = existing.parent_path();
    if (const auto space = std::filesystem::space(existing.empty() ? "." : existing, ec);
        !ec && space.available < min_free)
      return std::unexpected(error{
          errc::io_error,
          fmt::format("cannot open the state store at '{}': its file system has {} KiB free, "
                      "less than the {} MiB a run's records may need (the disk is full or "
                      "nearly so); free space there, or set state_dir in [project] to a file "
                      "system with room",
                      where, space.available / 1024, (min_free + (1024 * 1024) - 1) / (1024 * 1024))});
    std::filesystem::create_directories(dir, ec);
    if (ec)
      return std::unexpected(error::cannot_open(errc::io_error, where, ec.message()));
  }

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = options.create_if_missing && !options.read_only;
  db_options.create_missing_column_families = !options.read_only;
  db_options.max_background_jobs = options.max_background_jobs;
  db_options.keep_log_file_num = options.keep_log_files;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  // Open the store's few table files on this thread: with the default (16), opening
  // started and joined a set of threads per column family, which cost more than the
  // files themselves.
  db_options.max_file_opening_threads = 1;
  // After a crash, recover every write that reached the log and stop at the first torn
  // record: a batch is either wholly replayed or not at all.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // The log's writes since the last flush (a run's record, its tables' state) are
  // replayed into memory and flushed by a background job started right after the open
  // (below), rather than written to a table file and synced before the open returns; the
  // log is kept until that flush is durable. Removing obsolete files goes to the
  // background as well. Both took most of an open's time, on every command.
  db_options.avoid_flush_during_recovery = true;
  db_options.avoid_unnecessary_blocking_io = true;
  // No periodic statistics: a command lasts seconds, and the dump (into a log kept at
  // WARN level anyway) ran on a timer thread during it.
  db_options.stats_dump_period_sec = 0;
  db_options.stats_persist_period_sec = 0;

  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.write_buffer_size = options.write_buffer_bytes;
  // Every run reads the markers (and more) of every table it selects, block by block:
  // XXH3 checks a block several times faster than this build's software CRC32C, and LZ4
  // decompresses faster than Snappy. Files written before keep theirs; both are read.
  rocksdb::BlockBasedTableOptions table_options;
  table_options.checksum = rocksdb::kXXH3;
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_options));
  cf_options.compression = rocksdb::kLZ4Compression;

  // Run records hold every selected table's result (about 60 bytes a table), one per
  // run. Kept inline, each compaction of the family rewrote the whole run history: a
  // run's batch also updates the latest-run key, so its key range spans every record.
  // In blob files (LZ4: a fleet's results repeat) they are written once and compactions
  // move only their references.
  rocksdb::ColumnFamilyOptions runs_options = cf_options;
  runs_options.enable_blob_files = true;
  runs_options.min_blob_size = 4096;
  runs_options.blob_compression_type = rocksdb::kLZ4Compression;

  const std::vector<const rocksdb::ColumnFamilyOptions*> option_sets{&cf_options, &runs_options};
  auto set_of = [](const std::string& name) -> std::size_t {
    return name == to_string(family::runs) ? 1 : 0;
  };

  // Every existing family must be opened, including ones a newer build added; a
  // read-write open also creates the ones missing.
  std::vector<std::string> names;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  auto describe = [&](const std::vector<std::string>& existing) {
    names = {rocksdb::kDefaultColumnFamilyName};
    for (auto name : family_names) {
      bool present = std::find(existing.begin(), existing.end(), name) != existing.end();
      if (present || !options.read_only)
        names.emplace_back(name);
    }
    for (const auto& name : existing)
      if (std::find(names.begin(), names.end(), name) == names.end())
        names.push_back(name);
    descriptors.clear();
    for (const auto& name : names)
      descriptors.emplace_back(name, *option_sets[set_of(name)]);
  };

  auto state = std::make_unique<impl>();
  state->path = dir;
  state->options = options;
  state->write_options.sync = options.sync_writes;

  rocksdb::Status s;
  if (options.read_only) {
    std::vector<std::string> existing;
    auto listed = rocksdb::DB::ListColumnFamilies(db_options, where, &existing);
    if (!listed.ok() || existing.empty()) {
      // Nothing there is "no state yet"; damaged files or a directory this user may not
      // read are said as such, as a writable open says them.
      errc code = errc::not_found;
      if (!listed.ok()) {
        const std::string text = listed.ToString();
        if (listed.IsCorruption() ||
            (text.find("MANIFEST") != std::string::npos && text.find("No such file") != std::string::npos))
          code = errc::corruption;
        else if (text.find("Permission denied") != std::string::npos)
          code = errc::io_error;
      }
      return std::unexpected(error::cannot_open(
          code, where, listed.ok() ? "no column families" : listed.ToString()));
    }
    describe(existing);
    // A writer holding the store (a run) may switch its log file or compact while this
    // reads the MANIFEST: a file it names is then gone ("No such file or directory").
    // The open reads the state anew, a few times, before it gives up.
    for (int attempt = 0;; ++attempt) {
      s = rocksdb::DB::OpenForReadOnly(db_options, where, descriptors, &state->handles,
                                       &state->db);
      if (s.ok() || attempt == 4 || !(s.IsIOError() || s.IsPathNotFound() || s.IsNotFound()) ||
          s.ToString().find("No such file or directory") == std::string::npos)
        break;
      state->handles.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
    }
  } else {
    // The families this build knows, without listing them first (listing reads the
    // MANIFEST that the open reads again). Only a store with a family a newer build
    // added is listed, and opened again with it.
    describe({});
    std::vector<std::pair<std::string, std::size_t>> families;
    for (const auto& name : names)
      families.emplace_back(name, set_of(name));
    std::string digest = options_digest(db_options, option_sets, families);
    state->files = std::make_shared<options_file_keeper>(rocksdb::FileSystem::Default());
    state->files->keep(options_file_current(dir, digest));
    state->env = rocksdb::NewCompositeEnv(state->files);
    db_options.env = state->env.get();
    s = rocksdb::DB::Open(db_options, where, descriptors, &state->handles, &state->db);
    if (s.IsInvalidArgument() &&
        s.ToString().find("Column families not opened") != std::string::npos) {
      std::vector<std::string> existing;
      if (rocksdb::DB::ListColumnFamilies(db_options, where, &existing).ok()) {
        describe(existing);
        digest.clear();  // families this build does not know: written, not remembered
        state->files->keep(false);
        s = rocksdb::DB::Open(db_options, where, descriptors, &state->handles, &state->db);
      }
    }
    if (s.ok())
      remember_options_file(dir, digest, state->files->written());
  }
  if (!s.ok()) {
    if (is_lock_failure(s))
      return std::unexpected(error::locked(where, s.ToString()));
    errc code = code_of(s);
    if (s.IsInvalidArgument() && s.ToString().find("does not exist") != std::string::npos)
      code = errc::not_found;
    // A file there this user may not read: not "no state yet".
    if (s.ToString().find("Permission denied") != std::string::npos)
      code = errc::io_error;
    // CURRENT names a MANIFEST that is not there: the files are damaged, not the disk.
    if (s.IsIOError() && s.ToString().find("MANIFEST") != std::string::npos &&
        s.ToString().find("No such file") != std::string::npos)
      code = errc::corruption;
    return std::unexpected(error::cannot_open(code, where, s.ToString()));
  }

  if (options.read_only && options.verify_checksums) {
    // Every record read once, each block's checksum checked (DB::VerifyChecksum is not
    // for a read-only instance): small for a fleet's state.
    rocksdb::ReadOptions all;
    all.verify_checksums = true;
    all.fill_cache = false;
    for (auto* h : state->handles) {
      std::unique_ptr<rocksdb::Iterator> it(state->db->NewIterator(all, h));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
      }
      if (const auto st = it->status(); st.IsCorruption())
        return std::unexpected(error::cannot_open(code_of(st), where, st.ToString()));
    }
  }
  if (!options.read_only) {
    // A damaged file is refused now, before the command writes anything (a run would
    // else copy its tables and then fail every commit of their positions). Every block's
    // checksum, read once: milliseconds for a fleet's state.
    s = state->db->VerifyChecksum();
    if (!s.ok())
      return std::unexpected(error::cannot_open(code_of(s), where, s.ToString()));
    // The replayed writes, if any: flushed while the command goes on (a family with
    // nothing in memory is skipped). shut() sees that it finishes.
    rocksdb::FlushOptions flush;
    flush.wait = false;
    flush.allow_write_stall = true;
    (void)state->db->Flush(flush, state->handles);
  }

  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == rocksdb::kDefaultColumnFamilyName) {
      state->default_cf = state->handles[i];
      continue;
    }
    for (std::size_t f = 0; f < family_count; ++f)
      if (names[i] == family_names[f])
        state->cf[f] = state->handles[i];
  }

  // Layout version: written once, checked on every open.
  std::string version;
  s = state->db->Get(rocksdb::ReadOptions{}, state->default_cf, slice(format_key), &version);
  if (s.ok()) {
    if (version != layout_version)
      return std::unexpected(error::newer_layout(where, version, layout_version));
  } else if (s.IsNotFound()) {
    if (!options.read_only) {
      s = state->db->Put(state->write_options, state->default_cf, slice(format_key),
                         slice(layout_version));
      if (!s.ok())
        return std::unexpected(error::cannot_open(code_of(s), where, s.ToString()));
    }
  } else {
    return std::unexpected(error::cannot_open(code_of(s), where, s.ToString()));
  }

  // Outbox: continue after the highest sequence ever written or removed.
  std::uint64_t last = 0;
  std::string removed;
  s = state->db->Get(rocksdb::ReadOptions{}, state->default_cf, slice(outbox_removed_key),
                     &removed);
  if (s.ok())
    last = keys::read_be64(removed).value_or(0);
  else if (!s.IsNotFound())
    return std::unexpected(error::cannot_open(code_of(s), where, s.ToString()));
  std::uint64_t first_live = 0;
  if (auto* h = state->handle(family::outbox)) {
    std::unique_ptr<rocksdb::Iterator> it(state->db->NewIterator(rocksdb::ReadOptions{}, h));
    it->SeekToFirst();
    if (it->Valid())
      first_live = sequence_of(it->key());
    it->SeekToLast();
    if (it->Valid())
      last = std::max(last, sequence_of(it->key()));
    if (!it->status().ok())
      return std::unexpected(error::cannot_open(code_of(it->status()), where,
                                                it->status().ToString()));
  }
  state->outbox_next = last + 1;
  state->outbox_floor = first_live != 0 ? first_live : state->outbox_next;

  return state_store(std::move(state));
}

status state_store::close() {
  auto s = impl_->shut();
  if (!s.ok())
    return std::unexpected(error::operation_failed(code_of(s), "close", family::runs,
                                                   impl_->path.string(), s.ToString()));
  return {};
}

const std::filesystem::path& state_store::path() const { return impl_->path; }

// ---- records kept per table -------------------------------------------------------------

result<std::optional<std::string>> state_store::get_bytes(family f, std::string_view key) const {
  if (!keys::valid_name(key))
    return std::unexpected(error::invalid_key("key", key));
  return impl_->get(f, key);
}

status state_store::put_bytes(family f, std::string_view key, const std::string& value) {
  if (!keys::valid_name(key))
    return std::unexpected(error::invalid_key("key", key));
  rocksdb::WriteBatch batch;
  (void)batch.Put(impl_->handle(f), slice(key), value);
  return impl_->write(batch, "write", f, key);
}

status state_store::remove_bytes(family f, std::string_view key) {
  if (!keys::valid_name(key))
    return std::unexpected(error::invalid_key("key", key));
  rocksdb::WriteBatch batch;
  (void)batch.Delete(impl_->handle(f), slice(key));
  return impl_->write(batch, "remove", f, key);
}

result<std::vector<std::pair<std::string, std::string>>> state_store::list_bytes(
    family f, std::string_view prefix) const {
  std::vector<std::pair<std::string, std::string>> out;
  auto upper = keys::prefix_successor(prefix);
  auto done = impl_->scan(f, prefix, upper, false, nullptr,
                          [&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
                            out.emplace_back(k.ToString(), v.ToString());
                            return true;
                          });
  if (!done)
    return std::unexpected(std::move(done.error()));
  return out;
}

result<table_state> state_store::read_table(std::string_view key) const {
  if (!keys::valid_name(key))
    return std::unexpected(error::invalid_key("key", key));
  rocksdb::ManagedSnapshot snap(impl_->db);
  const auto* s = snap.snapshot();
  table_state out;
  auto fill = [&]<class Record>(std::optional<Record>& slot) -> status {
    auto r = impl_->get_record<Record>(record_family<Record>::value, key, s);
    if (!r)
      return std::unexpected(std::move(r.error()));
    slot = std::move(*r);
    return {};
  };
  if (auto r = fill(out.watermark); !r)
    return std::unexpected(r.error());
  if (auto r = fill(out.marker); !r)
    return std::unexpected(r.error());
  if (auto r = fill(out.baseline); !r)
    return std::unexpected(r.error());
  if (auto r = fill(out.result); !r)
    return std::unexpected(r.error());
  if (auto r = fill(out.staged); !r)
    return std::unexpected(r.error());
  return out;
}

namespace {
/// read_tables: from this many keys in order, walk the key range instead of looking up
/// each key, and step at most this far over keys not asked for before seeking.
constexpr std::size_t walk_threshold = 16;
constexpr int max_steps_before_seek = 16;
}  // namespace

result<std::vector<table_state>> state_store::read_tables(
    std::span<const std::string> table_keys, bool with_drift_records) const {
  for (const auto& key : table_keys)
    if (!keys::valid_name(key))
      return std::unexpected(error::invalid_key("key", key));
  const std::size_t n = table_keys.size();
  std::vector<table_state> out(n);
  if (n == 0)
    return out;
  rocksdb::ManagedSnapshot snap(impl_->db);
  rocksdb::ReadOptions ro;
  ro.snapshot = snap.snapshot();
  std::vector<rocksdb::Slice> slices;
  slices.reserve(n);
  for (const auto& key : table_keys)
    slices.emplace_back(slice(key));
  // A fleet's keys usually come in order: then MultiGet need not sort them (per family).
  const bool sorted = std::is_sorted(slices.begin(), slices.end(),
                                     [](const rocksdb::Slice& a, const rocksdb::Slice& b) {
                                       return a.compare(b) < 0;
                                     });
  // Many keys in order (a source's tables, a whole fleet): one walk over the family's key
  // range costs a fraction of as many point lookups, each of which searches an index and
  // a block of its own. A few keys, or keys in no order, go to MultiGet.
  const bool walk = sorted && n >= walk_threshold;
  std::string upper;
  rocksdb::Slice upper_slice;
  if (walk) {
    upper.assign(table_keys.back());
    upper.push_back('\0');  // the first key after the last one wanted
    upper_slice = slice(upper);
    ro.iterate_lower_bound = &slices.front();
    ro.iterate_upper_bound = &upper_slice;
  }
  std::vector<rocksdb::PinnableSlice> values(walk ? 0 : n);
  std::vector<rocksdb::Status> statuses(walk ? 0 : n);
  auto fill = [&]<class Record>(std::optional<Record> table_state::*slot) -> status {
    const family f = record_family<Record>::value;
    auto* h = impl_->handle(f);
    if (!h)
      return {};  // a read-only store opened before this family existed
    if (walk) {
      std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, h));
      it->Seek(slices.front());
      for (std::size_t i = 0; i < n && it->Valid(); ++i) {
        // Step over keys nobody asked for; a long gap is crossed by a seek.
        for (int steps = 0; it->Valid() && it->key().compare(slices[i]) < 0; ++steps) {
          if (steps == max_steps_before_seek) {
            it->Seek(slices[i]);
            break;
          }
          it->Next();
        }
        if (!it->Valid() || it->key() != slices[i])
          continue;
        Record record;
        auto value = it->value();
        if (!record.ParseFromArray(value.data(), static_cast<int>(value.size())))
          return std::unexpected(error::invalid_record(f, table_keys[i]));
        out[i].*slot = std::move(record);
      }
      if (!it->status().ok())
        return std::unexpected(failed(it->status(), "read", f, table_keys.front()));
      return {};
    }
    impl_->db->MultiGet(ro, h, n, slices.data(), values.data(), statuses.data(), sorted);
    for (std::size_t i = 0; i < n; ++i) {
      if (statuses[i].IsNotFound())
        continue;
      if (!statuses[i].ok())
        return std::unexpected(failed(statuses[i], "read", f, table_keys[i]));
      Record record;
      if (!record.ParseFromArray(values[i].data(), static_cast<int>(values[i].size())))
        return std::unexpected(error::invalid_record(f, table_keys[i]));
      out[i].*slot = std::move(record);
      values[i].Reset();
    }
    return {};
  };
  if (auto r = fill(&table_state::watermark); !r)
    return std::unexpected(r.error());
  if (auto r = fill(&table_state::marker); !r)
    return std::unexpected(r.error());
  if (with_drift_records) {
    if (auto r = fill(&table_state::baseline); !r)
      return std::unexpected(r.error());
    if (auto r = fill(&table_state::result); !r)
      return std::unexpected(r.error());
  }
  if (auto r = fill(&table_state::staged); !r)
    return std::unexpected(r.error());
  return out;
}

status state_store::commit_table(std::string_view key, const table_commit& commit) {
  if (!keys::valid_name(key))
    return std::unexpected(error::invalid_key("table key", key));
  auto& st = *impl_;
  rocksdb::WriteBatch batch;
  auto k = slice(key);
  if (commit.watermark)
    (void)batch.Put(st.handle(family::watermarks), k, commit.watermark->SerializeAsString());
  if (commit.marker)
    (void)batch.Put(st.handle(family::markers), k, commit.marker->SerializeAsString());
  if (commit.baseline)
    (void)batch.Put(st.handle(family::schemas), k, commit.baseline->SerializeAsString());
  (void)batch.Put(st.handle(family::tables), k, commit.result.SerializeAsString());
  if (commit.remove_staged)
    (void)batch.Delete(st.handle(family::staged), k);
  if (!commit.claim.empty()) {
    const std::string claim_key = "claim/" + commit.claim;
    std::string holder;
    auto s = st.db->Get(rocksdb::ReadOptions{}, st.default_cf, slice(claim_key), &holder);
    if (s.ok() && holder != key) {
      // The holder's marker no longer stands for the target's rows: it says who loaded
      // them instead, which no source marker equals.
      std::string bytes;
      pb::ChangeMarker m;
      auto h = st.db->Get(rocksdb::ReadOptions{}, st.handle(family::markers), slice(holder), &bytes);
      if (h.ok() && m.ParseFromString(bytes)) {
        m.set_marker(std::string(displaced_marker_prefix) + std::string(key));
        (void)batch.Put(st.handle(family::markers), slice(holder), m.SerializeAsString());
      } else {
        (void)batch.Delete(st.handle(family::markers), slice(holder));
      }
    } else if (!s.ok() && !s.IsNotFound())
      return std::unexpected(failed(s, "read", family::markers, claim_key));
    if (!s.ok() || holder != key)
      (void)batch.Put(st.default_cf, slice(claim_key), k);
  }
  if (commit.events.empty())
    return st.write(batch, "commit", family::tables, key);
  impl::reservation seq(&st, commit.events.size());
  st.add_outbox(batch, commit.events, seq.first);
  return st.write(batch, "commit", family::tables, key);
}

// ---- runs -------------------------------------------------------------------------------

status state_store::put_run(const pb::RunRecord& run) {
  if (!keys::valid_name(run.run_id()))
    return std::unexpected(error::invalid_key("run id", run.run_id()));
  auto& st = *impl_;
  std::lock_guard lock(st.runs_mu);
  auto record_key = keys::run_record(run.run_id());
  rocksdb::WriteBatch batch;
  auto* h = st.handle(family::runs);
  // Keep one index entry per run even if its start time was corrected.
  auto previous = st.get_record<pb::RunRecord>(family::runs, record_key);
  if (!previous)
    return std::unexpected(std::move(previous.error()));
  if (*previous && (*previous)->started_at_us() != run.started_at_us())
    (void)batch.Delete(h, keys::run_index((*previous)->started_at_us(), run.run_id()));
  (void)batch.Put(h, record_key, run.SerializeAsString());
  (void)batch.Put(h, slice(keys::latest_run), slice(run.run_id()));
  // Its status beside it, so that a run asking whether the one before it was left
  // running reads a few bytes, not a record of every table. Named with the run's id: an
  // earlier release moving the pointer without it leaves a note that no longer matches.
  std::string status = run.run_id();
  status.push_back('\0');
  status.append(run.status());
  (void)batch.Put(h, slice(keys::latest_run_status), slice(status));
  (void)batch.Put(h, keys::run_index(run.started_at_us(), run.run_id()), rocksdb::Slice());
  return st.write(batch, "write", family::runs, record_key);
}

result<std::optional<pb::RunRecord>> state_store::get_run(std::string_view run_id) const {
  if (!keys::valid_name(run_id))
    return std::unexpected(error::invalid_key("run id", run_id));
  return impl_->get_record<pb::RunRecord>(family::runs, keys::run_record(run_id));
}

result<std::optional<std::string>> state_store::latest_run_id() const {
  return impl_->get(family::runs, keys::latest_run);
}

result<std::optional<std::string>> state_store::latest_run_status() const {
  rocksdb::ManagedSnapshot snap(impl_->db);
  auto id = impl_->get(family::runs, keys::latest_run, snap.snapshot());
  if (!id)
    return std::unexpected(std::move(id.error()));
  if (!*id)
    return std::nullopt;
  auto noted = impl_->get(family::runs, keys::latest_run_status, snap.snapshot());
  if (!noted)
    return std::unexpected(std::move(noted.error()));
  // "<run id>\0<status>", for the run the pointer names: otherwise (none noted, or noted
  // for another run) the record says.
  if (*noted && (*noted)->size() > (*id)->size() && (*noted)->starts_with(**id) &&
      (**noted)[(*id)->size()] == '\0')
    return (*noted)->substr((*id)->size() + 1);
  auto run = latest_run();
  if (!run)
    return std::unexpected(std::move(run.error()));
  if (!*run)
    return std::nullopt;
  return std::string((*run)->status());
}

result<std::optional<std::string>> state_store::claim_holder(std::string_view claim) const {
  const std::string key = "claim/" + std::string(claim);
  std::string holder;
  auto s = impl_->db->Get(rocksdb::ReadOptions{}, impl_->default_cf, slice(key), &holder);
  if (s.IsNotFound())
    return std::nullopt;
  if (!s.ok())
    return std::unexpected(failed(s, "read", family::markers, key));
  return holder;
}

result<std::optional<pb::RunRecord>> state_store::latest_run() const {
  rocksdb::ManagedSnapshot snap(impl_->db);
  auto id = impl_->get(family::runs, keys::latest_run, snap.snapshot());
  if (!id)
    return std::unexpected(std::move(id.error()));
  if (!*id)
    return std::nullopt;
  return impl_->get_record<pb::RunRecord>(family::runs, keys::run_record(**id), snap.snapshot());
}

result<std::vector<pb::RunRecord>> state_store::recent_runs(std::size_t limit) const {
  auto& st = *impl_;
  rocksdb::ManagedSnapshot snap(st.db);
  std::vector<pb::RunRecord> out;
  std::optional<error> problem;
  const std::string lower(1, keys::run_index_tag);
  auto upper = keys::prefix_successor(lower);
  auto done = st.scan(family::runs, lower, upper, true, snap.snapshot(),
                      [&](const rocksdb::Slice& k, const rocksdb::Slice&) {
                        if (out.size() >= limit)
                          return false;
                        auto parts = keys::parse_run_index(view(k));
                        if (!parts)
                          return true;
                        auto run = st.get_record<pb::RunRecord>(
                            family::runs, keys::run_record(parts->run_id), snap.snapshot());
                        if (!run) {
                          problem = std::move(run.error());
                          return false;
                        }
                        if (*run && (*run)->started_at_us() == parts->started_at_us)
                          out.push_back(std::move(**run));
                        return true;
                      });
  if (!done)
    return std::unexpected(std::move(done.error()));
  if (problem)
    return std::unexpected(std::move(*problem));
  return out;
}

result<std::vector<std::string>> state_store::prune_runs(std::size_t keep) {
  auto& st = *impl_;
  std::lock_guard lock(st.runs_mu);
  auto latest = st.get(family::runs, keys::latest_run);
  if (!latest)
    return std::unexpected(std::move(latest.error()));
  auto* h = st.handle(family::runs);
  rocksdb::WriteBatch batch;
  std::size_t seen = 0;
  std::vector<std::string> removed;
  const std::string lower(1, keys::run_index_tag);
  auto upper = keys::prefix_successor(lower);
  auto done = st.scan(family::runs, lower, upper, true, nullptr,
                      [&](const rocksdb::Slice& k, const rocksdb::Slice&) {
                        auto parts = keys::parse_run_index(view(k));
                        if (!parts)
                          return true;
                        if (seen++ < keep || (*latest && **latest == parts->run_id))
                          return true;
                        (void)batch.Delete(h, k);
                        (void)batch.Delete(h, keys::run_record(parts->run_id));
                        removed.emplace_back(parts->run_id);
                        return true;
                      });
  if (!done)
    return std::unexpected(std::move(done.error()));
  if (removed.empty())
    return removed;
  if (auto w = st.write(batch, "prune", family::runs, lower); !w)
    return std::unexpected(std::move(w.error()));
  return removed;
}

// ---- outbox -----------------------------------------------------------------------------

result<std::uint64_t> state_store::append_outbox(std::span<const pb::OutboxEntry> entries) {
  auto& st = *impl_;
  if (entries.empty())
    return last_outbox_sequence();
  impl::reservation seq(&st, entries.size());
  rocksdb::WriteBatch batch;
  st.add_outbox(batch, entries, seq.first);
  auto last = seq.first + entries.size() - 1;
  if (auto w = st.write(batch, "append", family::outbox, keys::outbox(seq.first)); !w)
    return std::unexpected(std::move(w.error()));
  return last;
}

result<std::vector<pb::OutboxEntry>> state_store::scan_outbox(std::uint64_t after,
                                                              std::size_t limit) const {
  auto& st = *impl_;
  std::uint64_t through = 0;
  std::uint64_t floor = 0;
  {
    std::lock_guard lock(st.outbox_mu);
    through = st.outbox_visible_through();
    floor = st.outbox_floor;
  }
  std::vector<pb::OutboxEntry> out;
  if (after >= through || limit == 0)
    return out;
  auto start = std::max(after + 1, floor);
  if (start > through)
    return out;
  std::optional<error> problem;
  auto done = st.scan(family::outbox, keys::outbox(start), keys::outbox(through + 1), false,
                      nullptr, [&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
                        pb::OutboxEntry entry;
                        if (!entry.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
                          problem = error::invalid_record(family::outbox, view(k));
                          return false;
                        }
                        entry.set_sequence(sequence_of(k));
                        out.push_back(std::move(entry));
                        return out.size() < limit;
                      });
  if (!done)
    return std::unexpected(std::move(done.error()));
  if (problem)
    return std::unexpected(std::move(*problem));
  return out;
}

status state_store::remove_outbox_through(std::uint64_t sequence) {
  auto& st = *impl_;
  std::lock_guard removing(st.outbox_remove_mu);
  std::uint64_t through = 0;
  std::uint64_t floor = 0;
  {
    std::lock_guard lock(st.outbox_mu);
    // Never past what a reader could have seen: an entry still being written below
    // `sequence` was not delivered.
    through = std::min(sequence, st.outbox_visible_through());
    floor = st.outbox_floor;
  }
  if (through < floor)
    return {};
  rocksdb::WriteBatch batch;
  (void)batch.DeleteRange(st.handle(family::outbox), keys::outbox(floor), keys::outbox(through + 1));
  (void)batch.Put(st.default_cf, slice(outbox_removed_key), keys::be64(through));
  if (auto w = st.write(batch, "remove", family::outbox, keys::outbox(through)); !w)
    return w;
  std::lock_guard lock(st.outbox_mu);
  st.outbox_floor = std::max(st.outbox_floor, through + 1);
  return {};
}

result<std::uint64_t> state_store::outbox_size() const {
  auto& st = *impl_;
  std::uint64_t through = 0;
  std::uint64_t floor = 0;
  {
    std::lock_guard lock(st.outbox_mu);
    through = st.outbox_visible_through();
    floor = st.outbox_floor;
  }
  std::uint64_t count = 0;
  if (floor > through)
    return count;
  auto done = st.scan(family::outbox, keys::outbox(floor), keys::outbox(through + 1), false,
                      nullptr, [&](const rocksdb::Slice&, const rocksdb::Slice&) {
                        ++count;
                        return true;
                      });
  if (!done)
    return std::unexpected(std::move(done.error()));
  return count;
}

std::uint64_t state_store::last_outbox_sequence() const {
  std::lock_guard lock(impl_->outbox_mu);
  return impl_->outbox_next - 1;
}

namespace {
std::string sent_through_key(std::string_view sink) {
  return fmt::format("outbox_sent_through/{}", sink);
}
}  // namespace

result<std::uint64_t> state_store::outbox_sent_through(std::string_view sink) const {
  auto& st = *impl_;
  const std::string key = sent_through_key(sink);
  std::string value;
  auto s = st.db->Get(rocksdb::ReadOptions{}, st.default_cf, slice(key), &value);
  if (s.IsNotFound())
    return std::uint64_t{0};
  if (!s.ok())
    return std::unexpected(failed(s, "read", family::outbox, key));
  return keys::read_be64(value).value_or(0);
}

status state_store::set_outbox_sent_through(std::string_view sink, std::uint64_t sequence) {
  auto& st = *impl_;
  const std::string key = sent_through_key(sink);
  rocksdb::WriteBatch batch;
  (void)batch.Put(st.default_cf, slice(key), keys::be64(sequence));
  return st.write(batch, "write", family::outbox, key);
}

// ---- holds ------------------------------------------------------------------------------

namespace {

status check_hold_names(std::string_view target, std::string_view table) {
  if (!keys::valid_name(target))
    return std::unexpected(error::invalid_key("target", target));
  if (!keys::valid_name(table))
    return std::unexpected(error::invalid_key("table", table));
  return {};
}

}  // namespace

result<std::uint64_t> state_store::put_hold(std::string_view target, std::string_view table,
                                            const pb::HoldRecord& hold,
                                            std::span<const pb::HeldChange> changes) {
  if (auto ok = check_hold_names(target, table); !ok)
    return std::unexpected(std::move(ok.error()));
  auto& st = *impl_;
  std::lock_guard lock(st.holds_mu);
  rocksdb::WriteBatch batch;
  auto record_key = keys::hold_record(target, table);
  (void)batch.Put(st.handle(family::holds), record_key, hold.SerializeAsString());
  std::string counter_key;
  auto last = st.append_held(batch, target, table, changes, counter_key);
  if (!last)
    return last;
  if (auto w = st.write(batch, "write", family::holds, record_key); !w)
    return std::unexpected(std::move(w.error()));
  st.hold_last[counter_key] = *last;
  return last;
}

result<std::optional<pb::HoldRecord>> state_store::get_hold(std::string_view target,
                                                            std::string_view table) const {
  if (auto ok = check_hold_names(target, table); !ok)
    return std::unexpected(std::move(ok.error()));
  return impl_->get_record<pb::HoldRecord>(family::holds, keys::hold_record(target, table));
}

result<std::vector<hold_entry>> state_store::list_holds(std::string_view target) const {
  std::string prefix(1, keys::hold_record_tag);
  if (!target.empty()) {
    if (!keys::valid_name(target))
      return std::unexpected(error::invalid_key("target", target));
    prefix.append(target);
    prefix.push_back('\0');
  }
  std::vector<hold_entry> out;
  std::optional<error> problem;
  auto done = impl_->scan(family::holds, prefix, keys::prefix_successor(prefix), false, nullptr,
                          [&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
                            auto parts = keys::parse_hold_record(view(k));
                            if (!parts)
                              return true;
                            hold_entry entry{std::move(parts->target), std::move(parts->table), {}};
                            if (!entry.record.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
                              problem = error::invalid_record(family::holds, view(k));
                              return false;
                            }
                            out.push_back(std::move(entry));
                            return true;
                          });
  if (!done)
    return std::unexpected(std::move(done.error()));
  if (problem)
    return std::unexpected(std::move(*problem));
  return out;
}

status state_store::remove_hold(std::string_view target, std::string_view table) {
  if (auto ok = check_hold_names(target, table); !ok)
    return ok;
  auto& st = *impl_;
  std::lock_guard lock(st.holds_mu);
  auto* h = st.handle(family::holds);
  auto record_key = keys::hold_record(target, table);
  auto counter_key = keys::hold_counter(target, table);
  auto prefix = keys::hold_queue_prefix(target, table);
  rocksdb::WriteBatch batch;
  (void)batch.Delete(h, record_key);
  (void)batch.Delete(h, counter_key);
  (void)batch.DeleteRange(h, prefix, keys::prefix_successor(prefix));
  if (auto w = st.write(batch, "remove", family::holds, record_key); !w)
    return w;
  st.hold_last.erase(counter_key);
  return {};
}

namespace {

/// 'v' target NUL table: a hold's review note (put_hold_review).
std::string hold_review_key(std::string_view target, std::string_view table) {
  std::string key(1, 'v');
  key.append(target);
  key.push_back('\0');
  key.append(table);
  return key;
}

}  // namespace

status state_store::put_hold_review(std::string_view target, std::string_view table,
                                    const pb::HoldRecord& hold, std::string_view note) {
  if (auto ok = check_hold_names(target, table); !ok)
    return ok;
  auto& st = *impl_;
  std::lock_guard lock(st.holds_mu);
  rocksdb::WriteBatch batch;
  auto record_key = keys::hold_record(target, table);
  (void)batch.Put(st.handle(family::holds), record_key, hold.SerializeAsString());
  (void)batch.Put(st.handle(family::holds), hold_review_key(target, table), slice(note));
  return st.write(batch, "write", family::holds, record_key);
}

namespace {

/// 'f' target NUL table NUL be64(created_at_us): a finished review (put_finished_review).
std::string finished_review_key(std::string_view target, std::string_view table,
                                std::int64_t created_at_us) {
  std::string key(1, 'f');
  key.append(target);
  key.push_back('\0');
  key.append(table);
  key.push_back('\0');
  const auto at = static_cast<std::uint64_t>(created_at_us);
  for (int shift = 56; shift >= 0; shift -= 8)
    key.push_back(static_cast<char>((at >> shift) & 0xff));
  return key;
}

}  // namespace

status state_store::put_finished_review(const pb::HoldRecord& hold, std::string_view note) {
  if (auto ok = check_hold_names(hold.target(), hold.table()); !ok)
    return ok;
  pb::FinishedReview f;
  *f.mutable_hold() = hold;
  f.set_note(std::string(note));
  const auto key = finished_review_key(hold.target(), hold.table(), hold.created_at_us());
  auto& st = *impl_;
  std::lock_guard lock(st.holds_mu);
  rocksdb::WriteBatch batch;
  (void)batch.Put(st.handle(family::holds), key, f.SerializeAsString());
  return st.write(batch, "write", family::holds, keys::hold_record(hold.target(), hold.table()));
}

result<std::vector<pb::FinishedReview>> state_store::list_finished_reviews(
    std::string_view target) const {
  std::string prefix(1, 'f');
  if (!target.empty()) {
    if (!keys::valid_name(target))
      return std::unexpected(error::invalid_key("target", target));
    prefix.append(target);
    prefix.push_back('\0');
  }
  std::vector<pb::FinishedReview> out;
  std::optional<error> problem;
  auto done = impl_->scan(family::holds, prefix, keys::prefix_successor(prefix), false, nullptr,
                          [&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
                            pb::FinishedReview f;
                            if (!f.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
                              problem = error::invalid_record(family::holds, view(k));
                              return false;
                            }
                            out.push_back(std::move(f));
                            return true;
                          });
  if (!done)
    return std::unexpected(std::move(done.error()));
  if (problem)
    return std::unexpected(std::move(*problem));
  return out;
}

result<std::optional<std::string>> state_store::get_hold_review(std::string_view target,
                                                                std::string_view table) const {
  if (auto ok = check_hold_names(target, table); !ok)
    return std::unexpected(std::move(ok.error()));
  return impl_->get(family::holds, hold_review_key(target, table), nullptr);
}

result<std::uint64_t> state_store::append_held_changes(std::string_view target,
                                                       std::string_view table,
                                                       std::span<const pb::HeldChange> changes) {
  if (auto ok = check_hold_names(target, table); !ok)
    return std::unexpected(std::move(ok.error()));
  auto& st = *impl_;
  std::lock_guard lock(st.holds_mu);
  rocksdb::WriteBatch batch;
  std::string counter_key;
  auto last = st.append_held(batch, target, table, changes, counter_key);
  if (!last || changes.empty())
    return last;
  if (auto w = st.write(batch, "append", family::holds, counter_key); !w)
    return std::unexpected(std::move(w.error()));
  st.hold_last[counter_key] = *last;
  return last;
}

result<std::vector<pb::HeldChange>> state_store::scan_held_changes(std::string_view target,
                                                                   std::string_view table,
                                                                   std::uint64_t after,
                                                                   std::size_t limit) const {
  if (auto ok = check_hold_names(target, table); !ok)
    return std::unexpected(std::move(ok.error()));
  std::vector<pb::HeldChange> out;
  if (limit == 0 || after == std::numeric_limits<std::uint64_t>::max())
    return out;
  auto prefix = keys::hold_queue_prefix(target, table);
  std::optional<error> problem;
  auto done = impl_->scan(
      family::holds, keys::hold_queue(target, table, after + 1), keys::prefix_successor(prefix),
      false, nullptr, [&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
        pb::HeldChange change;
        if (!change.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
          problem = error::invalid_record(family::holds, view(k));
          return false;
        }
        change.set_sequence(keys::read_be64(view(k).substr(prefix.size())).value_or(0));
        out.push_back(std::move(change));
        return out.size() < limit;
      });
  if (!done)
    return std::unexpected(std::move(done.error()));
  if (problem)
    return std::unexpected(std::move(*problem));
  return out;
}

status state_store::remove_held_changes_through(std::string_view target, std::string_view table,
                                                std::uint64_t sequence) {
  if (auto ok = check_hold_names(target, table); !ok)
    return ok;
  auto prefix = keys::hold_queue_prefix(target, table);
  auto upper = sequence == std::numeric_limits<std::uint64_t>::max()
                   ? keys::prefix_successor(prefix)
                   : keys::hold_queue(target, table, sequence + 1);
  rocksdb::WriteBatch batch;
  (void)batch.DeleteRange(impl_->handle(family::holds), prefix, upper);
  return impl_->write(batch, "remove", family::holds, prefix);
}

status state_store::clear_held_changes(std::string_view target, std::string_view table) {
  return remove_held_changes_through(target, table, std::numeric_limits<std::uint64_t>::max());
}

result<std::uint64_t> state_store::held_change_count(std::string_view target,
                                                     std::string_view table) const {
  if (auto ok = check_hold_names(target, table); !ok)
    return std::unexpected(std::move(ok.error()));
  auto prefix = keys::hold_queue_prefix(target, table);
  std::uint64_t count = 0;
  auto done = impl_->scan(family::holds, prefix, keys::prefix_successor(prefix), false, nullptr,
                          [&](const rocksdb::Slice&, const rocksdb::Slice&) {
                            ++count;
                            return true;
                          });
  if (!done)
    return std::unexpected(std::move(done.error()));
  return count;
}

}  // namespace flotilla::storage
