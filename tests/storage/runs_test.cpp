#include <catch2/catch.hpp>

#include "storage/state_store.hpp"
#include "tests/storage/support.hpp"

using namespace flotilla::storage;
using flotilla::storage::test::open_store;
using flotilla::storage::test::temp_dir;

namespace {

pb::RunRecord make_run(std::string id, std::int64_t started, std::string status = "success") {
  pb::RunRecord run;
  run.set_run_id(std::move(id));
  run.set_started_at_us(started);
  run.set_status(std::move(status));
  run.set_command("run");
  auto* table = run.add_tables();
  table->set_table("staging.orders");
  table->set_source("shop");
  table->set_status("copied");
  table->set_rows(5);
  run.mutable_drift()->set_tables_checked(1);
  return run;
}

}  // namespace

TEST_CASE("a run record reads back by its id") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.put_run(make_run("r1", 100)));
  auto run = store.get_run("r1");
  REQUIRE(run.has_value());
  REQUIRE(run->has_value());
  CHECK((*run)->tables(0).rows() == 5);
  CHECK((*run)->drift().tables_checked() == 1);
  CHECK_FALSE(store.get_run("r2")->has_value());
}

TEST_CASE("there is no latest run before the first one") {
  temp_dir dir;
  auto store = open_store(dir);
  CHECK_FALSE(store.latest_run_id()->has_value());
  CHECK_FALSE(store.latest_run()->has_value());
  CHECK(store.recent_runs()->empty());
}

TEST_CASE("the latest run pointer follows the run last written") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.put_run(make_run("r1", 100)));
  CHECK(store.latest_run_id()->value() == "r1");
  REQUIRE(store.put_run(make_run("r2", 200, "running")));
  CHECK(store.latest_run_id()->value() == "r2");
  REQUIRE(store.put_run(make_run("r2", 200, "partial")));
  auto latest = store.latest_run();
  REQUIRE(latest.has_value());
  REQUIRE(latest->has_value());
  CHECK((*latest)->run_id() == "r2");
  CHECK((*latest)->status() == "partial");
}

TEST_CASE("recent runs come newest first, each once") {
  temp_dir dir;
  auto store = open_store(dir);
  REQUIRE(store.put_run(make_run("b", 200)));
  REQUIRE(store.put_run(make_run("a", 300)));
  REQUIRE(store.put_run(make_run("c", 100)));
  REQUIRE(store.put_run(make_run("c", 150)));  // start time corrected: still one entry
  auto runs = store.recent_runs();
  REQUIRE(runs.has_value());
  REQUIRE(runs->size() == 3);
  CHECK((*runs)[0].run_id() == "a");
  CHECK((*runs)[1].run_id() == "b");
  CHECK((*runs)[2].run_id() == "c");
  auto two = store.recent_runs(2);
  REQUIRE(two.has_value());
  CHECK(two->size() == 2);
}

TEST_CASE("pruning runs keeps the newest ones and the latest") {
  temp_dir dir;
  auto store = open_store(dir);
  for (int i = 1; i <= 5; ++i)
    REQUIRE(store.put_run(make_run("r" + std::to_string(i), i * 100)));
  REQUIRE(store.put_run(make_run("old-but-latest", 50)));
  auto removed = store.prune_runs(2);
  REQUIRE(removed.has_value());
  CHECK(*removed == std::vector<std::string>{"r3", "r2", "r1"});
  auto runs = store.recent_runs();
  REQUIRE(runs->size() == 3);
  CHECK((*runs)[0].run_id() == "r5");
  CHECK((*runs)[1].run_id() == "r4");
  CHECK((*runs)[2].run_id() == "old-but-latest");
  CHECK_FALSE(store.get_run("r1")->has_value());
}

TEST_CASE("a run without an id is refused") {
  temp_dir dir;
  auto store = open_store(dir);
  auto put = store.put_run(make_run("", 1));
  REQUIRE_FALSE(put.has_value());
  CHECK(put.error().code == errc::invalid_key);
}

TEST_CASE("large run records are kept in blob files and read back after reopening") {
  // A run record holds every selected table's result. Kept in blob files, a record is
  // written once; compactions of the family move only its reference instead of
  // rewriting the whole run history at every compaction.
  temp_dir dir;
  constexpr int runs = 12;
  constexpr int tables = 2'000;
  for (int r = 0; r < runs; ++r) {
    auto store = open_store(dir);  // each reopen flushes the previous run's log
    auto run = make_run("r" + std::to_string(r), 1000 + r);
    for (int t = 1; t < tables; ++t) {
      auto* table = run.add_tables();
      table->set_table("c" + std::to_string(r) + ".t" + std::to_string(t));
      table->set_source("shop");
      table->set_status("pruned");
    }
    REQUIRE(store.put_run(run));
  }
  {
    auto store = open_store(dir);
    auto recent = store.recent_runs();
    REQUIRE(recent.has_value());
    REQUIRE(recent->size() == runs);
    for (int r = 0; r < runs; ++r) {
      auto run = store.get_run("r" + std::to_string(r));
      REQUIRE(run.has_value());
      REQUIRE(run->has_value());
      CHECK((*run)->tables_size() == tables);
      CHECK((*run)->tables(tables - 1).table() == "c" + std::to_string(r) + ".t" + std::to_string(tables - 1));
    }
  }  // closed: a background compaction of the open store could delete a file being measured
  // The records are in blob files; the table files hold only their references. (Two
  // runs' records share a blob file when a flush is still pending at the next close:
  // RocksDB then writes both memtables in one flush, so the files are not counted.)
  std::uintmax_t blob_bytes = 0;
  std::uintmax_t table_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.state())) {
    if (e.path().extension() == ".blob")
      blob_bytes += e.file_size();
    if (e.path().extension() == ".sst")
      table_bytes += e.file_size();
  }
  INFO("blob files " << blob_bytes << " bytes, table files " << table_bytes << " bytes");
  CHECK(blob_bytes > table_bytes);
}
