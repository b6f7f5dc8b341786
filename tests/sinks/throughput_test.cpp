// Write throughput of each warehouse writer on 16-column rows. Hidden from the default
// run; `test_sinks "[bench]"` runs it (FLOTILLA_BENCH_ROWS sets the row count, default
// 1,000,000). Reference speeds of the engines' own bulk paths on this kind of machine
// are in BRIEF.md: DuckDB appender ~480k rows/s, COPY ~390k, SQLite inserts ~540k.

#include <chrono>
#include <cstdio>

#include "tests/sinks/sink_fixture.hpp"

using namespace flotilla;
using namespace flotilla::sinks;
using namespace flotilla::sinks::testing;

namespace {

schema::table_schema sixteen() {
  return cols({col("id", "bigint", true), col("customer", "int"), col("qty", "int"),
               col("flags", "smallint"), col("price", "double"), col("weight", "float"),
               col("name", "text"), col("email", "varchar(120)"), col("city", "text"),
               col("status", "text"), col("note", "text"), col("active", "bool"),
               col("total", "decimal(18,2)"), col("tax", "decimal(10,4)"),
               col("created_at", "timestamp_ntz"), col("day", "date")});
}

schema::row_batch make_batch(std::size_t first, std::size_t n) {
  schema::row_batch b;
  b.width = 16;
  b.cells.reserve(n * 16);
  for (std::size_t i = first; i < first + n; ++i) {
    const auto k = static_cast<std::int64_t>(i);
    b.cells.push_back(I(k));
    b.cells.push_back(I(k % 10007));
    b.cells.push_back(I(k % 17));
    b.cells.push_back(I(k % 3));
    b.cells.push_back(R(static_cast<double>(k % 1000) / 8.0));
    b.cells.push_back(R(0.5));
    b.cells.push_back(T("customer name " + std::to_string(k % 977)));
    b.cells.push_back(T("user" + std::to_string(k) + "@example.com"));
    b.cells.push_back(T("Springfield"));
    b.cells.push_back(T(k % 2 ? "shipped" : "pending"));
    b.cells.push_back(k % 5 ? T("a note with\ta tab") : N());
    b.cells.push_back(B(k % 2 == 0));
    b.cells.push_back(T(std::to_string(k % 100000) + ".25"));
    b.cells.push_back(T("1.0825"));
    b.cells.push_back(T("2024-05-0" + std::to_string(1 + k % 9) + " 12:34:56.123456"));
    b.cells.push_back(T("2024-05-1" + std::to_string(k % 10)));
  }
  return b;
}

}  // namespace

TEST_CASE("each warehouse writer loads 16-column rows at engine speed", "[.][bench]") {
  const char* env = std::getenv("FLOTILLA_BENCH_ROWS");
  const std::size_t total = env ? std::stoul(env) : 1'000'000;
  const std::size_t per_batch = 8192;
  std::vector<schema::row_batch> batches;
  for (std::size_t at = 0; at < total; at += per_batch)
    batches.push_back(make_batch(at, std::min(per_batch, total - at)));

  for (const auto& engine : engines()) {
    for (load_mode mode : {load_mode::replace, load_mode::merge}) {
      test_target target(engine);
      auto wh = target.open();
      const auto t = target.table("bench");
      const auto start = std::chrono::steady_clock::now();
      auto w = wh->begin_load(load_request{t, sixteen(), mode, {"id"}, std::string("bench")});
      for (const auto& b : batches)
        w->write(b);
      w->commit();
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      CHECK(count(*wh, t) == static_cast<std::int64_t>(total));
      std::printf("%-8s %-7s %8zu rows  %6.2f s  %8.0f rows/s\n", engine.c_str(),
                  mode == load_mode::replace ? "replace" : "merge", total, secs,
                  static_cast<double>(total) / secs);
    }
  }
}
