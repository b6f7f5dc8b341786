#pragma once
// Shared helpers of the cdc tests: a private state store directory, a DuckDB file and a
// PostgreSQL schema per test, and reviews built from seed 002's outcomes.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cdc/decide.hpp"
#include "cdc/outcome.hpp"
#include "cdc/review_store.hpp"
#include "sinks/warehouse.hpp"
#include "storage/state_store.hpp"

namespace flotilla::test {

inline std::string unique_suffix() {
  static std::atomic<int> counter{0};
  return std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

inline std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A directory under the temp dir, removed at the end of the test.
class temp_dir {
 public:
  temp_dir() : path_(std::filesystem::temp_directory_path() / ("flotilla_cdc_" + unique_suffix())) {
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline storage::state_store open_store(const std::filesystem::path& dir) {
  auto s = storage::state_store::open(dir / "state");
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.has_value());
  return std::move(*s);
}

/// One engine's target private to a test: a DuckDB file, or a schema on the PostgreSQL
/// server named by FLOTILLA_PG_DSN. The target table is <schema>.orders.
class test_target {
 public:
  explicit test_target(std::string engine) : engine_(std::move(engine)) {
    options_.name = "wh";
    options_.dialect = engine_;
    schema_ = "cdc_" + unique_suffix();
    if (engine_ == "postgres") {
      const char* dsn = std::getenv("FLOTILLA_PG_DSN");
      if (dsn == nullptr || *dsn == '\0')
        FAIL("FLOTILLA_PG_DSN is not set: run scripts/services start && . build/services.env");
      options_.dsn = dsn;
    } else {
      options_.path = (dir_.path() / "w.duckdb").string();
    }
    auto wh = open();
    wh->execute({wh->dialect().create_schema(schema_)});
  }
  ~test_target() {
    if (engine_ == "postgres") {
      try {
        auto wh = open();
        wh->execute({"DROP SCHEMA IF EXISTS " + wh->dialect().quote(schema_) + " CASCADE"});
      } catch (...) {
        // nop: cleanup is best effort
      }
    }
  }
  test_target(const test_target&) = delete;
  test_target& operator=(const test_target&) = delete;

  [[nodiscard]] std::unique_ptr<sinks::warehouse> open() const { return sinks::open_warehouse(options_); }
  [[nodiscard]] cdc::target_opener opener() const { return cdc::opener_for({options_}); }
  [[nodiscard]] dialects::table_ref table() const { return {"", schema_, "orders"}; }
  [[nodiscard]] std::string qualified() const { return open()->dialect().qualified(table()); }
  [[nodiscard]] cdc::target_info info() const {
    return cdc::target_info{"wh", *cdc::parse_target_kind(engine_), table(), std::nullopt};
  }
  /// Column names of the target table, in order.
  [[nodiscard]] std::vector<std::string> columns() const {
    std::vector<std::string> out;
    auto s = open()->describe(table());
    if (s)
      for (const auto& c : s->columns)
        out.push_back(c.name);
    return out;
  }
  void exec(const std::string& sql) const { open()->execute({sql}); }
  [[nodiscard]] std::size_t count(const std::string& sql) const { return open()->query(sql).size(); }
  [[nodiscard]] const sinks::warehouse_options& options() const { return options_; }

 private:
  std::string engine_;
  temp_dir dir_;
  sinks::warehouse_options options_;
  std::string schema_;
};

/// public.orders (id int key, note varchar(100), code text), captured from source shop.
/// `name` distinguishes tests that share the PostgreSQL bookkeeping table.
inline cdc::captured_table orders(const std::string& name = "public.orders") {
  auto col = [](std::string n, const std::string& t, bool key = false) {
    cdc::captured_column c;
    c.name = std::move(n);
    c.type = *schema::parse_type(t);
    c.nullable = !key;
    c.key = key;
    return c;
  };
  return cdc::captured_table{"shop", name, {col("id", "int", true), col("note", "varchar(100)"), col("code", "text")}};
}

/// The hold draft seed 002 gives for `change` on the target; fails the test unless held.
inline storage::pb::HoldRecord held_draft(const cdc::captured_table& t, const cdc::change_kind& change,
                                          const cdc::target_info& target) {
  auto o = cdc::decide_outcome(t, cdc::source_change{change, "0/16B3748"}, target);
  REQUIRE(std::holds_alternative<cdc::held>(o));
  return std::get<cdc::held>(o).hold;
}

inline storage::pb::HeldChange kept(std::string position, std::string payload) {
  storage::pb::HeldChange c;
  c.set_position(std::move(position));
  c.set_payload(std::move(payload));
  return c;
}

}  // namespace flotilla::test
