#pragma once
// Test targets for the warehouse writers: a DuckDB and a SQLite file in a fresh temporary
// directory, and a fresh schema on the PostgreSQL server named by FLOTILLA_PG_DSN
// (scripts/test starts it). Each target is private to one test, so tests may run
// beside other test binaries using the same server.

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "sinks/warehouse.hpp"

namespace flotilla::sinks::testing {

using rows_t = std::vector<std::vector<std::optional<std::string>>>;
using schema::value;

inline const std::vector<std::string>& engines() {
  static const std::vector<std::string> all{"duckdb", "postgres", "sqlite"};
  return all;
}

inline std::string unique_suffix() {
  static std::atomic<int> counter{0};
  return std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

/// One engine's database, private to a test. open() gives a new connection to it.
class test_target {
 public:
  explicit test_target(std::string engine) : engine_(std::move(engine)) {
    const std::string id = unique_suffix();
    if (engine_ == "postgres") {
      const char* dsn = std::getenv("FLOTILLA_PG_DSN");
      if (dsn == nullptr || *dsn == '\0')
        FAIL("FLOTILLA_PG_DSN is not set: run scripts/test, which starts PostgreSQL on "
             "loopback and sets it");
      dsn_ = dsn;
      schema_ = "flotilla_sinks_" + id;
    } else {
      dir_ = std::filesystem::temp_directory_path() / ("flotilla_sinks_" + id);
      std::filesystem::create_directories(dir_);
      if (engine_ == "duckdb")
        schema_ = "s_" + id;  // exercises schema creation
    }
  }

  ~test_target() {
    if (engine_ == "postgres") {
      try {
        auto wh = open();
        const auto& d = wh->dialect();
        std::vector<std::string> schemas = extra_schemas_;
        schemas.push_back(schema_);
        for (const auto& s : schemas) {
          wh->execute({"DROP SCHEMA IF EXISTS " + d.quote(s) + " CASCADE"});
          // Commit tokens of this test's tables: their keys start with the quoted schema.
          const std::string prefix = d.quote(s) + ".";
          wh->execute({"DELETE FROM \"_flotilla\".\"_flotilla_commits\" WHERE left(table_name, " +
                       std::to_string(prefix.size()) + ") = " + d.literal(prefix)});
        }
      } catch (...) {
        // nop: cleanup is best effort
      }
    } else {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  test_target(const test_target&) = delete;
  test_target& operator=(const test_target&) = delete;

  /// warehouse_options::in_place_max_bytes of the connections open() makes.
  std::uint64_t in_place_max_bytes = warehouse_options{}.in_place_max_bytes;

  [[nodiscard]] std::unique_ptr<warehouse> open() const {
    warehouse_options o;
    o.name = "test_" + engine_;
    o.dialect = engine_;
    o.in_place_max_bytes = in_place_max_bytes;
    if (engine_ == "postgres")
      o.dsn = dsn_;
    else
      o.path = (dir_ / (engine_ == "duckdb" ? "w.duckdb" : "w.sqlite")).string();
    return open_warehouse(o);
  }

  /// A table in this test's schema (SQLite has none: the name alone).
  [[nodiscard]] dialects::table_ref table(const std::string& name) const {
    return dialects::table_ref{"", schema_, name};
  }

  /// A table in another schema of this test's database, dropped after the test.
  [[nodiscard]] dialects::table_ref table_in(const std::string& schema, const std::string& name) {
    if (engine_ == "sqlite")
      return dialects::table_ref{"", "", name};
    extra_schemas_.push_back(schema);
    return dialects::table_ref{"", schema, name};
  }

  [[nodiscard]] const std::string& engine() const { return engine_; }

 private:
  std::string engine_;
  std::string dsn_;
  std::string schema_;
  std::filesystem::path dir_;
  std::vector<std::string> extra_schemas_;
};

inline value I(std::int64_t v) { return value::of_int(v); }
inline value T(std::string v) { return value::of_text(std::move(v)); }
inline value R(double v) { return value::of_real(v); }
inline value B(bool v) { return value::of_bool(v); }
inline value N() { return value::null(); }

inline schema::row_batch batch(std::vector<std::vector<value>> rows) {
  schema::row_batch b;
  b.width = rows.empty() ? 0 : rows.front().size();
  for (auto& r : rows)
    for (auto& v : r)
      b.cells.push_back(std::move(v));
  return b;
}

inline schema::column col(std::string name, const std::string& type, bool key = false) {
  auto t = schema::parse_type(type);
  REQUIRE(t.has_value());
  return schema::column{std::move(name), *t, !key, key};
}

inline schema::table_schema cols(std::vector<schema::column> c) {
  return schema::table_schema{std::move(c)};
}

/// Loads `rows` into `table` in one committed load.
inline void load(warehouse& wh, const dialects::table_ref& table, const schema::table_schema& s,
                 load_mode mode, std::vector<std::vector<value>> rows,
                 std::vector<std::string> key = {},
                 std::optional<std::string> token = std::nullopt) {
  load_request r;
  r.target = table;
  r.columns = s;
  r.mode = mode;
  r.unique_key = std::move(key);
  r.commit_token = std::move(token);
  auto w = wh.begin_load(r);
  if (!rows.empty())
    w->write(batch(std::move(rows)));
  w->commit();
}

/// One column of a query's rows, NULL shown as "NULL".
inline std::vector<std::string> column_of(const rows_t& rows, std::size_t c = 0) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    out.push_back(r.at(c).value_or("NULL"));
  return out;
}

inline std::int64_t count(warehouse& wh, const dialects::table_ref& t) {
  auto rows = wh.query("SELECT count(*) FROM " + wh.dialect().qualified(t));
  return std::stoll(rows.at(0).at(0).value_or("-1"));
}

}  // namespace flotilla::sinks::testing
