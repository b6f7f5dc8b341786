// The storage format of DuckDB warehouse files: new files use a format whose checkpoints
// do not re-encode every column's statistics (docs/performance.md, fleet-scale), and a file
// created in DuckDB's older default format keeps it; a new file's blocks are 64 KiB or the
// target's block_size, and an existing file keeps its own. Also DuckDB's thread count, which
// depends on whether a load is appending (docs/performance.md, copy-wide).

#include "tests/sinks/sink_fixture.hpp"

#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <fstream>
#include <thread>

using namespace flotilla;
using namespace flotilla::sinks;
using namespace flotilla::sinks::testing;

namespace {

/// The storage version number in a DuckDB file's main header (after the 8-byte checksum
/// and the "DUCK" magic): 64 for DuckDB's default (v0.10.2) format, 65 and up for v1.2+.
std::uint64_t storage_version_of(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  char header[20] = {};
  in.read(header, sizeof header);
  REQUIRE(in.gcount() == static_cast<std::streamsize>(sizeof header));
  REQUIRE(std::string(header + 8, 4) == "DUCK");
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(header[12 + i]);
  return v;
}

struct env_override {
  explicit env_override(const char* value, const char* name = "FLOTILLA_DUCKDB_STORAGE_VERSION")
      : name_(name) {
    ::setenv(name_, value, 1);
  }
  ~env_override() { ::unsetenv(name_); }
  const char* name_;
};

/// The open file's block size, as DuckDB reports it.
std::vector<std::string> block_size_of(warehouse& wh) {
  return column_of(wh.query("SELECT block_size FROM pragma_database_size() "
                            "WHERE database_name = current_database()"));
}

std::string threads_of(warehouse& wh) {
  const auto v = column_of(wh.query("SELECT current_setting('threads')"));
  REQUIRE(v.size() == 1);
  return v[0];
}

schema::table_schema pairs() { return cols({col("id", "bigint", true), col("v", "text")}); }

warehouse_options duckdb_file(const std::filesystem::path& file) {
  warehouse_options o;
  o.name = "storage";
  o.dialect = "duckdb";
  o.path = file.string();
  return o;
}

/// A full refresh of main.`table` with pairs().
load_request refresh_of(const std::string& table) {
  load_request req;
  req.target = dialects::table_ref{"", "main", table};
  req.columns = pairs();
  return req;
}

void load_and_close(const std::filesystem::path& file, const std::string& table, int rows) {
  auto wh = open_warehouse(duckdb_file(file));
  std::vector<std::vector<value>> data;
  for (int i = 1; i <= rows; ++i)
    data.push_back({I(i), T("v" + std::to_string(i))});
  load(*wh, dialects::table_ref{"", "main", table}, pairs(), load_mode::replace, data);
  wh->execute({"CHECKPOINT"});
}

}  // namespace

TEST_CASE("a new DuckDB warehouse file is created in the v1.2 storage format") {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_storage_" + unique_suffix());
  std::filesystem::create_directories(dir);
  load_and_close(dir / "w.duckdb", "t", 3);
  CHECK(storage_version_of(dir / "w.duckdb") >= 65);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a DuckDB file in the older default format keeps it and stays readable") {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_storage_" + unique_suffix());
  std::filesystem::create_directories(dir);
  const auto file = dir / "w.duckdb";
  {
    env_override old("v0.10.2");
    load_and_close(file, "t1", 2);
  }
  REQUIRE(storage_version_of(file) == 64);
  load_and_close(file, "t2", 5);  // opened with the new default
  CHECK(storage_version_of(file) == 64);
  auto wh = open_warehouse(duckdb_file(file));
  CHECK(column_of(wh->query("SELECT count(*) FROM main.t1")) == std::vector<std::string>{"2"});
  CHECK(column_of(wh->query("SELECT count(*) FROM main.t2")) == std::vector<std::string>{"5"});
  wh.reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("a new DuckDB file gets 64 KiB blocks, and a file with other blocks still opens") {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_storage_" + unique_suffix());
  std::filesystem::create_directories(dir);
  load_and_close(dir / "new.duckdb", "t", 3);
  {
    auto wh = open_warehouse(duckdb_file(dir / "new.duckdb"));
    CHECK(block_size_of(*wh) == std::vector<std::string>{"65536"});
  }
  // A file made with DuckDB's own 256 KiB blocks (as before, or by another program):
  // opened without a block_size, it is written to as it is.
  auto big = duckdb_file(dir / "big.duckdb");
  big.block_size = 262144;
  {
    auto wh = open_warehouse(big);
    CHECK(block_size_of(*wh) == std::vector<std::string>{"262144"});
  }
  load_and_close(dir / "big.duckdb", "t", 4);
  auto wh = open_warehouse(duckdb_file(dir / "big.duckdb"));
  CHECK(block_size_of(*wh) == std::vector<std::string>{"262144"});
  CHECK(column_of(wh->query("SELECT count(*) FROM main.t")) == std::vector<std::string>{"4"});
  wh.reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("a configured block size makes the new file's blocks, and a file keeps its own") {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_storage_" + unique_suffix());
  std::filesystem::create_directories(dir);
  const auto file = dir / "w.duckdb";
  auto small = duckdb_file(file);
  small.block_size = 16384;
  {
    auto wh = open_warehouse(small);
    std::vector<std::vector<value>> data{{I(1), T("a")}, {I(2), T("b")}};
    load(*wh, dialects::table_ref{"", "main", "t"}, pairs(), load_mode::replace, data);
    wh->execute({"CHECKPOINT"});
    CHECK(block_size_of(*wh) == std::vector<std::string>{"16384"});
  }
  {
    // Reopened without the setting: the file's block size, its rows intact.
    auto wh = open_warehouse(duckdb_file(file));
    CHECK(block_size_of(*wh) == std::vector<std::string>{"16384"});
    CHECK(column_of(wh->query("SELECT count(*) FROM main.t")) == std::vector<std::string>{"2"});
  }
  // Another block size cannot apply to an existing file: refused, naming both sizes.
  auto other = duckdb_file(file);
  other.block_size = 65536;
  try {
    (void)open_warehouse(other);
    FAIL("a block size the file does not have was accepted");
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    CHECK(msg.find("16384-byte blocks") != std::string::npos);
    CHECK(msg.find("block_size = 65536") != std::string::npos);
    CHECK(msg.find(file.string()) != std::string::npos);
  }
  // A size DuckDB does not accept, before any file is made.
  auto odd = duckdb_file(dir / "odd.duckdb");
  odd.block_size = 4096;
  CHECK_THROWS_WITH(open_warehouse(odd), Catch::Contains("block_size 4096"));
  CHECK_FALSE(std::filesystem::exists(dir / "odd.duckdb"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("an unknown DuckDB storage version is refused naming it") {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_storage_" + unique_suffix());
  std::filesystem::create_directories(dir);
  env_override bad("v9.9.9-nonsense");
  auto o = duckdb_file(dir / "w.duckdb");
  CHECK_THROWS_WITH(open_warehouse(o), Catch::Contains("v9.9.9-nonsense"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("DuckDB runs one thread fewer than the cores while a bulk load appends, every core "
          "otherwise") {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_threads_" + unique_suffix());
  std::filesystem::create_directories(dir);
  auto o = duckdb_file(dir / "w.duckdb");
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  const std::string all = std::to_string(cores);
  const std::string appending = std::to_string(std::max(2U, cores) - 1);
  auto loader = open_warehouse(o);
  auto observer = open_warehouse(o);  // the same database instance, another connection
  CHECK(threads_of(*observer) == all);
  // A bulk load (8,192 rows or more; here more than a DuckDB row group, 122,880).
  std::vector<std::vector<value>> many;
  for (std::int64_t i = 0; i < 130'000; ++i)
    many.push_back({I(i), T("r")});

  const load_request req = refresh_of("t");
  {
    // A small load never switches.
    auto w = loader->begin_load(req);
    w->write(batch({{I(1), T("a")}, {I(2), T("b")}}));
    CHECK(threads_of(*observer) == all);
    w->commit();
    CHECK(threads_of(*observer) == all);
  }
  {
    auto w = loader->begin_load(req);
    w->write(batch(many));
    CHECK(threads_of(*observer) == appending);
    w->commit();
    CHECK(threads_of(*observer) == all);
  }
  {
    // Two bulk loads at once: the count comes back when the last one ends.
    auto second = open_warehouse(o);
    auto w1 = loader->begin_load(req);
    auto w2 = second->begin_load(refresh_of("u"));
    w2->write(batch(many));
    CHECK(threads_of(*observer) == appending);
    w1->write(batch(many));
    w1->write(batch({{I(-1), T("last")}}));
    w1->commit();
    CHECK(threads_of(*observer) == appending);
    w2.reset();  // abandoned: rolled back, and no longer appending
    CHECK(threads_of(*observer) == all);
  }
  {
    // A load that fails: rolled back, and the count comes back with the rollback.
    auto w = loader->begin_load(req);
    CHECK_THROWS_AS(
        [&] {
          w->write(batch(many));
          CHECK(threads_of(*observer) == appending);
          w->write(batch({{T("not a number"), T("x")}}));
          w->commit();
        }(),
        sink_error);
    CHECK(threads_of(*observer) == all);
  }
  CHECK(count(*observer, req.target) == 130'001);
  loader.reset();
  observer.reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("FLOTILLA_DUCKDB_THREADS fixes DuckDB's threads, and anything but a count is refused") {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_threads_" + unique_suffix());
  std::filesystem::create_directories(dir);
  auto o = duckdb_file(dir / "w.duckdb");
  {
    env_override three("3", "FLOTILLA_DUCKDB_THREADS");
    auto wh = open_warehouse(o);
    auto w = wh->begin_load(refresh_of("t"));
    w->write(batch({{I(1), T("a")}}));
    CHECK(threads_of(*wh) == "3");
    w->commit();
    CHECK(threads_of(*wh) == "3");
  }
  for (const char* bad : {"two", "0", "-1", "2x", "99999"}) {
    env_override e(bad, "FLOTILLA_DUCKDB_THREADS");
    o.path = (dir / "bad.duckdb").string();
    CHECK_THROWS_WITH(open_warehouse(o),
                      Catch::Contains("FLOTILLA_DUCKDB_THREADS='" + std::string(bad) + "'"));
  }
  std::filesystem::remove_all(dir);
}
