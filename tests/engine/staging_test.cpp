// Staged files (engine/staging.hpp): exact round trip of every value kind, and a
// damaged or incomplete file refused with its name.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "engine/staging.hpp"

using namespace flotilla;

namespace {

std::filesystem::path temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("flotilla-staging-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  return dir / "t.rows";
}

schema::table_schema columns() {
  schema::table_schema s;
  s.columns.push_back({"id", *schema::parse_type("bigint"), false, true});
  s.columns.push_back({"price", *schema::parse_type("decimal(12,2)"), true, false});
  s.columns.push_back({"ok", *schema::parse_type("bool"), true, false});
  s.columns.push_back({"score", *schema::parse_type("double"), true, false});
  return s;
}

schema::row_batch batch(std::int64_t from, std::size_t n) {
  schema::row_batch b;
  b.width = 4;
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = from + static_cast<std::int64_t>(i);
    b.cells.push_back(schema::value::of_int(id == 0 ? std::numeric_limits<std::int64_t>::min() : id));
    b.cells.push_back(i % 3 == 0 ? schema::value::null() : schema::value::of_text(std::to_string(id) + ".25"));
    b.cells.push_back(schema::value::of_bool(i % 2 == 0));
    b.cells.push_back(schema::value::of_real(id * 0.1));
  }
  return b;
}

}  // namespace

TEST_CASE("a staged file reads back exactly what was written, with its columns") {
  auto path = temp_path("roundtrip");
  std::vector<schema::row_batch> written{batch(0, 5), batch(5, 3000), batch(3005, 1)};
  {
    engine::staged_writer w(path, columns());
    for (const auto& b : written)
      w.write(b);
    CHECK_FALSE(std::filesystem::exists(path));  // not visible before finish
    w.finish();
    CHECK(w.rows() == 3006);
  }
  CHECK(engine::staged_columns(path) == columns());
  std::vector<schema::value> all, back;
  for (const auto& b : written)
    all.insert(all.end(), b.cells.begin(), b.cells.end());
  std::size_t batches = 0;
  auto rows = engine::read_staged(path, 1000, [&](schema::row_batch&& b) {
    CHECK(b.width == 4);
    CHECK(b.rows() <= 1000);
    back.insert(back.end(), b.cells.begin(), b.cells.end());
    ++batches;
    return true;
  });
  CHECK(rows == 3006);
  CHECK(batches == 4);
  CHECK(back == all);
  std::filesystem::remove_all(path.parent_path());
}

TEST_CASE("an unfinished staged file leaves nothing behind") {
  auto path = temp_path("unfinished");
  {
    engine::staged_writer w(path, columns());
    w.write(batch(1, 10));
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  CHECK_THROWS_WITH(engine::read_staged(path, 10, [](schema::row_batch&&) { return true; }),
                    Catch::Contains(path.string()) && Catch::Contains("cannot be opened"));
  std::filesystem::remove_all(path.parent_path());
}

TEST_CASE("a truncated staged file is refused, naming it") {
  auto path = temp_path("truncated");
  {
    engine::staged_writer w(path, columns());
    w.write(batch(1, 100));
    w.finish();
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  CHECK_THROWS_WITH(engine::read_staged(path, 10, [](schema::row_batch&&) { return true; }),
                    Catch::Contains(path.string()) && Catch::Contains("ends early"));
  std::filesystem::remove_all(path.parent_path());
}

TEST_CASE("a staged file changed inside a value is refused by its checksum, after its last "
          "row, so the load reading it never commits") {
  auto path = temp_path("damaged");
  {
    engine::staged_writer w(path, columns());
    w.write(batch(1, 5000));
    w.finish();
  }
  // A digit of a text value far into the file: every length and tag still reads well.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto at = bytes.find("4001.25");
  REQUIRE(at != std::string::npos);
  bytes[at] = '9';
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  std::uint64_t rows = 0;
  CHECK_THROWS_WITH(engine::read_staged(path, 1000,
                                        [&](schema::row_batch&& b) {
                                          rows += b.rows();
                                          return true;
                                        }),
                    Catch::Contains(path.string()) && Catch::Contains("checksum"));
  CHECK(rows == 5000);  // every row was handed on: the throw is what stops the load
  // verify_staged finds it before any row is read (a retry checks it before its DDL).
  CHECK_THROWS_WITH(engine::verify_staged(path),
                    Catch::Contains(path.string()) && Catch::Contains("checksum"));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  CHECK_THROWS_WITH(engine::verify_staged(path), Catch::Contains(path.string()));
  std::filesystem::remove_all(path.parent_path());
}

TEST_CASE("a whole staged file passes verify_staged") {
  auto path = temp_path("whole");
  {
    engine::staged_writer w(path, columns());
    w.write(batch(1, 5000));
    w.finish();
  }
  CHECK_NOTHROW(engine::verify_staged(path));
  std::filesystem::remove_all(path.parent_path());
}
