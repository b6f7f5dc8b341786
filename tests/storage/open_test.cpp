#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <rocksdb/db.h>

#include "storage/state_store.hpp"
#include "tests/storage/raw_store.hpp"
#include "tests/storage/support.hpp"

using namespace flotilla::storage;
using flotilla::storage::test::open_store;
using flotilla::storage::test::temp_dir;
using flotilla::storage::test::with_raw_store;

TEST_CASE("opening creates the directory and every column family") {
  temp_dir dir;
  auto store = open_store(dir);
  CHECK(std::filesystem::exists(dir.state() / "CURRENT"));
  CHECK(store.path() == dir.state());
  for (std::size_t f = 0; f < family_count; ++f)
    CHECK_FALSE(to_string(static_cast<family>(f)).empty());
}

TEST_CASE("a file system too full for a run's records is refused at the open, named") {
  temp_dir dir;
  // More than any disk has free: the check looks at the real file system.
  ::setenv("FLOTILLA_STATE_MIN_FREE_BYTES", "18446744073709551615", 1);
  auto refused = state_store::open(dir.state());
  ::unsetenv("FLOTILLA_STATE_MIN_FREE_BYTES");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == errc::io_error);
  CHECK_THAT(refused.error().message, Catch::Contains(dir.state().string()) &&
                                          Catch::Contains("KiB free") &&
                                          Catch::Contains("set state_dir in [project]"));
  CHECK_FALSE(std::filesystem::exists(dir.state()));  // nothing made that a reader would trip on
  // With room (the 16 MiB asked by default), it opens.
  CHECK(state_store::open(dir.state()).has_value());
}

TEST_CASE("a store with a damaged table file is refused at the open, with what to do") {
  temp_dir dir;
  { auto store = open_store(dir); }
  // Records in a table file of their own (flushed), as runs leave them.
  with_raw_store(dir, [](rocksdb::DB& db) {
    for (int i = 0; i < 500; ++i)
      REQUIRE(db.Put(rocksdb::WriteOptions{}, "k" + std::to_string(i), std::string(100, 'v')).ok());
    REQUIRE(db.Flush(rocksdb::FlushOptions{}).ok());
  });
  std::filesystem::path sst;
  std::uintmax_t largest = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.state()))
    if (e.path().extension() == ".sst" && e.file_size() > largest) {
      largest = e.file_size();
      sst = e.path();
    }
  REQUIRE(largest > 4096);
  {
    std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(largest / 4));
    const std::string zeros(64, '\0');
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  auto refused = state_store::open(dir.state());
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == errc::corruption);
  CHECK_THAT(refused.error().message, Catch::Contains(sst.filename().string()) &&
                                          Catch::Contains("the state files are damaged"));
  // A CURRENT naming a MANIFEST that is not there: damaged too, not a disk to check.
  std::ofstream(dir.state() / "CURRENT") << "MANIFEST-999999\n";
  auto no_manifest = state_store::open(dir.state());
  REQUIRE_FALSE(no_manifest.has_value());
  CHECK(no_manifest.error().code == errc::corruption);
  CHECK_THAT(no_manifest.error().message, Catch::Contains("the state files are damaged"));
}

TEST_CASE("a second open of a store already open in this process fails with a clear message") {
  temp_dir dir;
  auto first = open_store(dir);
  auto second = state_store::open(dir.state());
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().code == errc::locked);
  CHECK(second.error().transient());
  CHECK_THAT(second.error().message, Catch::Contains(dir.state().string()));
  CHECK_THAT(second.error().message, Catch::Contains("another flotilla process"));
}

TEST_CASE("a second process cannot open a store another process holds") {
  temp_dir dir;
  { auto created = open_store(dir); }  // create it, then let the child hold it

  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Child: hold the store until killed. No Catch2 from here on.
    auto store = state_store::open(dir.state());
    char ok = store ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    for (;;)
      ::pause();
  }
  ::close(ready[1]);
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  ::close(ready[0]);
  auto second = state_store::open(dir.state());
  ::kill(child, SIGKILL);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);

  REQUIRE(ok == 'y');
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().code == errc::locked);
  CHECK_THAT(second.error().message, Catch::Contains(dir.state().string()));
  CHECK_THAT(second.error().message, Catch::Contains("stop it, then try again"));

  // Once the holder is gone the lock is free again.
  auto third = state_store::open(dir.state());
  CHECK(third.has_value());
}

TEST_CASE("a read-only open works while another store holds the lock") {
  temp_dir dir;
  auto writer = open_store(dir);
  pb::Watermark w;
  w.set_value("9");
  REQUIRE(writer.put("shop.orders", w));
  store_options options;
  options.read_only = true;
  auto reader = open_store(dir, options);
  CHECK(reader.get<pb::Watermark>("shop.orders")->value().value() == "9");
}

TEST_CASE("a store that may not be created is reported as missing") {
  temp_dir dir;
  store_options options;
  options.create_if_missing = false;
  auto store = state_store::open(dir.state(), options);
  REQUIRE_FALSE(store.has_value());
  CHECK(store.error().code == errc::not_found);
  CHECK_FALSE(store.error().transient());
}

TEST_CASE("a store with a column family a newer build added opens, keeping that family") {
  temp_dir dir;
  {
    auto store = open_store(dir);
    pb::SourceCatalog c;
    c.set_adapter("sqlite");
    REQUIRE(store.put("shop", c));
  }
  // Add a family the way a future release would, with a record in it.
  with_raw_store(dir, [](rocksdb::DB& db) {
    rocksdb::ColumnFamilyHandle* future = nullptr;
    REQUIRE(db.CreateColumnFamily(rocksdb::ColumnFamilyOptions{}, "future", &future).ok());
    REQUIRE(db.Put(rocksdb::WriteOptions{}, future, "k", "v").ok());
    REQUIRE(db.DestroyColumnFamilyHandle(future).ok());
  });
  {
    auto store = open_store(dir);  // read-write: every family this build knows, and "future"
    auto back = store.get<pb::SourceCatalog>("shop");
    REQUIRE(back.has_value());
    REQUIRE(back->has_value());
    CHECK((*back)->adapter() == "sqlite");
    pb::SourceCatalog d;
    d.set_adapter("duckdb");
    CHECK(store.put("lake", d));
  }
  std::vector<std::string> names;
  REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions{}, dir.state().string(), &names).ok());
  CHECK(std::find(names.begin(), names.end(), "future") != names.end());
  store_options read_only;
  read_only.read_only = true;
  auto store = open_store(dir, read_only);
  CHECK(store.get<pb::SourceCatalog>("lake")->has_value());
}

namespace {

/// The store's OPTIONS files, by name.
std::vector<std::string> options_files(const temp_dir& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.state()))
    if (e.path().filename().string().starts_with("OPTIONS-"))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("the OPTIONS file is written again only when the options change") {
  temp_dir dir;
  { auto store = open_store(dir); }
  const auto first = options_files(dir);  // RocksDB keeps the latest two
  REQUIRE_FALSE(first.empty());
  CHECK_THAT(read_text(dir.state() / "FLOTILLA-OPTIONS"), Catch::Contains(first.back()));

  // The same options: the file stays as it is, and the store still reads and writes.
  for (int i = 0; i < 2; ++i) {
    auto store = open_store(dir);
    pb::SourceCatalog c;
    c.set_adapter("sqlite" + std::to_string(i));
    REQUIRE(store.put("shop", c));
  }
  CHECK(options_files(dir) == first);
  {
    auto store = open_store(dir);
    CHECK((*store.get<pb::SourceCatalog>("shop"))->adapter() == "sqlite1");
  }

  // Opens with 16 MiB write buffers and returns the newest OPTIONS file, which must be
  // new (not `before`), hold that size, and be the one the digest names.
  store_options bigger;
  bigger.write_buffer_bytes = std::size_t{16} << 20;
  auto open_and_check_new_file = [&](const std::string& before) {
    { auto store = open_store(dir, bigger); }
    const auto files = options_files(dir);
    REQUIRE_FALSE(files.empty());
    CHECK(files.back() != before);
    CHECK_THAT(read_text(dir.state() / files.back()),
               Catch::Contains("write_buffer_size=" + std::to_string(bigger.write_buffer_bytes)));
    CHECK_THAT(read_text(dir.state() / "FLOTILLA-OPTIONS"), Catch::Contains(files.back()));
    return files.back();
  };

  // Other options: a new file, with them, and the digest names it.
  const std::string second = open_and_check_new_file(first.back());

  // The named file gone (removed by hand): the next open writes one again.
  std::filesystem::remove(dir.state() / second);
  (void)open_and_check_new_file(second);
}

TEST_CASE("the latest run's status reads from a note beside the pointer, or from its record when the note is another run's or missing") {
  temp_dir dir;
  auto run = [](std::string id, std::string status) {
    pb::RunRecord r;
    r.set_run_id(std::move(id));
    r.set_started_at_us(100);
    r.set_status(std::move(status));
    return r;
  };
  {
    auto store = open_store(dir);
    CHECK_FALSE(store.latest_run_status()->has_value());
    REQUIRE(store.put_run(run("r1", "running")));
    CHECK(store.latest_run_status()->value() == "running");
    REQUIRE(store.put_run(run("r1", "success")));
    CHECK(store.latest_run_status()->value() == "success");
    CHECK(store.latest_run_id()->value() == "r1");
    REQUIRE(store.put_run(run("r2", "running")));
  }
  // An earlier release, which knows the pointer only, moved it to another run's record
  // (r1, finished): the status noted for r2 no longer counts.
  with_raw_store(
      dir,
      [](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* runs) {
        std::string noted;
        REQUIRE(db.Get(rocksdb::ReadOptions{}, runs, "s", &noted).ok());
        CHECK(noted == std::string("r2\0running", 10));
        REQUIRE(db.Put(rocksdb::WriteOptions{}, runs, "l", "r1").ok());
      },
      "runs");
  {
    auto store = open_store(dir);
    CHECK(store.latest_run_status()->value() == "success");  // r1's record, not r2's note
  }
  with_raw_store(
      dir,
      [](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* runs) {
        REQUIRE(db.Put(rocksdb::WriteOptions{}, runs, "l", "r2").ok());
        REQUIRE(db.Delete(rocksdb::WriteOptions{}, runs, "s").ok());
      },
      "runs");
  {
    auto store = open_store(dir);
    CHECK(store.latest_run_status()->value() == "running");
    CHECK(store.latest_run_id()->value() == "r2");
    REQUIRE(store.latest_run()->has_value());
    CHECK(store.latest_run()->value().status() == "running");
    // Pruning keeps the latest run.
    REQUIRE(store.prune_runs(0));
    CHECK(store.get_run("r2")->has_value());
  }
}
