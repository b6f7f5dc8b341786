// copy-wide: one table of 16 columns copied by engine::copy_table (source -> change queue
// -> sink), against each engine's raw bulk path on the same rows.
#include <filesystem>

#include <fmt/format.h>

#include "bench/datagen.hpp"
#include "bench/pg.hpp"
#include "bench/scenario.hpp"
#include "bench/steps.hpp"

namespace flotilla::bench {

scenario_result run_copy_wide(bench_context& ctx) {
  namespace fs = std::filesystem;
  scenario_result r;
  r.name = "copy-wide";
  const std::uint64_t rows = ctx.opt.rows;
  const std::uint64_t seed = 42;
  r.sizes = fmt::format("{} x 16 columns; {}", counted(rows, "row"), ctx.runs_text());
  const fs::path dir = fs::path(ctx.scratch) / "copy-wide";
  fs::remove_all(dir);
  fs::create_directories(dir);

  const std::string sqlite_path = (dir / "wide.db").string();
  write_sqlite_client(sqlite_path, fleet_client{"wide", {{"wide", rows, seed}}});

  std::optional<pg_databases> dbs;
  std::string pg;
  if (ctx.pg_dsn) {
    dbs.emplace(*ctx.pg_dsn, ctx.db_prefix);
    pg = dbs->create("copy");
    pg_connection c(pg);
    c.exec("CREATE SCHEMA src");
    write_pg_table(c, "src", "wide", rows, seed);
    c.exec("VACUUM ANALYZE src.wide");
  } else {
    r.notes.push_back("PostgreSQL paths skipped: FLOTILLA_PG_DSN is not set");
  }

  const std::string n = std::to_string(rows), s = std::to_string(seed);
  auto& raw_sqlite = r.add("raw paths", "raw SQLite read", "raw", "rows");
  auto& raw_duck = r.add("raw paths", "raw DuckDB appender", "raw", "rows");
  series* raw_pg_read = nullptr;
  series* raw_pg_write = nullptr;
  series* raw_pg_duck = nullptr;
  if (!pg.empty()) {
    raw_pg_read = &r.add("raw paths", "raw PG COPY TO", "raw", "rows");
    raw_pg_write = &r.add("raw paths", "raw PG COPY FROM", "raw", "rows");
    raw_pg_duck = &r.add("raw paths", "raw PG -> DuckDB", "raw", "rows");
  }
  auto& fl_sd = r.add("sqlite -> duckdb", "flotilla copy_table", "flotilla", "rows", "raw DuckDB appender");
  series* fl_pd = nullptr;
  series* fl_sp = nullptr;
  if (!pg.empty()) {
    fl_pd = &r.add("postgres -> duckdb", "flotilla copy_table", "flotilla", "rows", "raw DuckDB appender");
    fl_sp = &r.add("sqlite -> postgres", "flotilla copy_table", "flotilla", "rows", "raw PG COPY FROM");
  }

  auto checked = [rows](measurement m) {
    if (static_cast<std::uint64_t>(m.work) != rows)
      throw std::runtime_error(fmt::format("copied {} rows, expected {}", m.work, rows));
    return m;
  };
  std::vector<std::pair<series*, std::function<measurement()>>> bodies;
  bodies.emplace_back(&raw_sqlite, [&] {
    return checked(measure_step("raw-read-sqlite", {{"path", sqlite_path}, {"table", "wide"}}));
  });
  bodies.emplace_back(&raw_duck, [&] {
    return checked(measure_step("raw-write-duckdb", {{"path", (dir / "raw.duckdb").string()},
                                                     {"schema", "bench"}, {"table", "wide"},
                                                     {"rows", n}, {"seed", s}}));
  });
  if (!pg.empty()) {
    bodies.emplace_back(raw_pg_read, [&] {
      return checked(measure_step("raw-read-pg", {{"dsn", pg}, {"table", "src.wide"}}));
    });
    bodies.emplace_back(raw_pg_duck, [&] {
      return checked(measure_step("raw-copy-pg-duckdb",
                                  {{"dsn", pg}, {"table", "src.wide"},
                                   {"path", (dir / "raw_pd.duckdb").string()},
                                   {"schema", "bench"}, {"target_table", "wide"}}));
    });
    bodies.emplace_back(raw_pg_write, [&] {
      return checked(measure_step("raw-write-pg", {{"dsn", pg}, {"schema", "raw"}, {"table", "wide"},
                                                   {"rows", n}, {"seed", s}}));
    });
  }
  bodies.emplace_back(&fl_sd, [&] {
    return checked(measure_step("copy", {{"source_adapter", "sqlite"}, {"source_path", sqlite_path},
                                         {"table", "wide"}, {"target_dialect", "duckdb"},
                                         {"target_path", (dir / "flotilla_sd.duckdb").string()},
                                         {"target_schema", "bench"}, {"target_table", "wide"}}));
  });
  if (!pg.empty()) {
    bodies.emplace_back(fl_pd, [&] {
      return checked(measure_step("copy", {{"source_adapter", "postgres"}, {"source_dsn", pg},
                                           {"table", "src.wide"}, {"target_dialect", "duckdb"},
                                           {"target_path", (dir / "flotilla_pd.duckdb").string()},
                                           {"target_schema", "bench"}, {"target_table", "wide"}}));
    });
    bodies.emplace_back(fl_sp, [&] {
      return checked(measure_step("copy", {{"source_adapter", "sqlite"}, {"source_path", sqlite_path},
                                           {"table", "wide"}, {"target_dialect", "postgres"},
                                           {"target_dsn", pg}, {"target_schema", "flotilla"},
                                           {"target_table", "wide"}}));
    });
  }
  interleave(ctx.opt.warmup, ctx.opt.runs, bodies);

  // Per-run ratios of one series against another measured in the same rounds.
  auto per_run = [](const series& mine, const series& base) {
    std::vector<double> out;
    const auto a = mine.rates(), b = base.rates();
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      out.push_back(a[i] / b[i]);
    return spread_of(out);
  };
  // Targets, and each copy against its source's raw read (the other side of the bound).
  auto judge = [&](series* fl, const std::string& label, const series& source_read) {
    if (fl == nullptr)
      return;
    const auto ratio = spread_of(r.ratios(*fl));
    fl->ratio_target = 0.8;
    r.targets.push_back({"copy-wide " + label + " >= 0.8x raw target path (" + fl->baseline + ")",
                         ratio_text(ratio, 0.8), ratio.median >= 0.8, spread_caveat(ratio, 0.8)});
    const auto rd = per_run(*fl, source_read);
    r.notes.push_back(fmt::format("{}: {} of the raw target path, {} of the raw source read ({})",
                                  label, ratio_text(ratio, 0.8), ratio_text(rd), source_read.variant));
    r.figures[label] = {{"ratio_raw_target", ratio.median}, {"ratio_raw_source_read", rd.median}};
  };
  judge(&fl_sd, "sqlite -> duckdb", raw_sqlite);
  if (!pg.empty()) {
    judge(fl_pd, "postgres -> duckdb", *raw_pg_read);
    judge(fl_sp, "sqlite -> postgres", raw_sqlite);
    // Not a target: where the two engines together, with nothing of Flotilla's, stand on
    // this machine (the PostgreSQL server and DuckDB share its cores).
    const auto both = per_run(*fl_pd, *raw_pg_duck);
    const auto bound = per_run(*raw_pg_duck, raw_duck);
    r.notes.push_back(fmt::format("postgres -> duckdb: {} of the raw PG -> DuckDB pipeline "
                                  "(the engines alone, same cores), which itself reaches {} "
                                  "of the raw DuckDB appender",
                                  ratio_text(both), ratio_text(bound)));
    r.figures["postgres -> duckdb"]["ratio_raw_pipeline"] = both.median;
    r.figures["postgres -> duckdb"]["raw_pipeline_ratio_raw_target"] = bound.median;
  } else {
    // Listed all the same, so that no target goes missing from the report unsaid.
    for (const char* label : {"postgres -> duckdb", "sqlite -> postgres"})
      r.targets.push_back({fmt::format("copy-wide {} >= 0.8x raw target path", label),
                           "not measured: FLOTILLA_PG_DSN is not set", std::nullopt});
  }
  r.notes.push_back("CPU s/M counts the client process only (every thread); the PostgreSQL "
                    "server's own CPU is not included");
  return r;
}

}  // namespace flotilla::bench
