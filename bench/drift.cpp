// drift-check: 10,000 PostgreSQL source tables against 10,000 live PostgreSQL target
// tables (1% widened, 1% with a new column): the source catalog read, the target
// describes and the drift evaluation, per table, against one raw pg_catalog query.
#include <fmt/format.h>

#include "bench/datagen.hpp"
#include "bench/flotilla_cli.hpp"
#include "bench/pg.hpp"
#include "bench/scenario.hpp"
#include "bench/steps.hpp"

#include <filesystem>

namespace flotilla::bench {
namespace {

/// The target's version of table i: 1 in 100 has `quantity` still smallint (the source
/// widened it to integer), another 1 in 100 lacks `score` (the source added it).
enum class variant { same, narrower, missing_column };
variant variant_of(std::uint64_t i) {
  return i % 100 == 1 ? variant::narrower : i % 100 == 2 ? variant::missing_column : variant::same;
}

std::string target_ddl(std::uint64_t i, const std::string& q) {
  std::string sql = create_table_sql(engine_kind::postgres, q);
  switch (variant_of(i)) {
    case variant::same: break;
    case variant::narrower: sql.replace(sql.find("quantity integer"), 16, "quantity smallint"); break;
    case variant::missing_column: sql.replace(sql.find(", score double precision"), 24, ""); break;
  }
  return sql;
}

void create_tables(const std::string& dsn, std::uint64_t n, bool target) {
  pg_connection c(dsn);
  // 500 tables per transaction stays well inside the server's lock table.
  for (std::uint64_t from = 0; from < n; from += 500) {
    std::string sql = "BEGIN;";
    for (std::uint64_t i = from; i < std::min(n, from + 500); ++i) {
      const auto q = fmt::format("public.t{:05}", i);
      sql += (target ? target_ddl(i, q) : create_table_sql(engine_kind::postgres, q)) + ";";
    }
    c.exec(sql + "COMMIT");
  }
  c.exec("ANALYZE");
}

}  // namespace

scenario_result run_drift_check(bench_context& ctx) {
  namespace fs = std::filesystem;
  scenario_result r;
  r.name = "drift-check";
  const std::uint64_t n = ctx.opt.drift_tables;
  std::uint64_t narrower = 0, missing = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    narrower += variant_of(i) == variant::narrower;
    missing += variant_of(i) == variant::missing_column;
  }
  // The counts themselves: at small sizes 1% rounds to none (table 1 of each hundred is
  // the narrower one, table 2 the one missing a column).
  r.sizes = fmt::format("{} x 16 columns, target: {} narrower, {} missing a column (tables 1 "
                        "and 2 of each hundred); {}",
                        counted(n, "PostgreSQL table"), grouped(narrower), grouped(missing),
                        ctx.runs_text());
  if (!ctx.pg_dsn) {
    r.status = "skipped";
    r.message = "FLOTILLA_PG_DSN is not set";
    return r;
  }
  pg_databases dbs(*ctx.pg_dsn, ctx.db_prefix);
  const auto src = dbs.create("drift_src");
  const auto dst = dbs.create("drift_dst");
  create_tables(src, n, false);
  create_tables(dst, n, true);
  const fs::path dir = fs::path(ctx.scratch) / "drift-check";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto config = (dir / "flotilla.toml").string();
  write_config(config, toml_target{"postgres", "", dst, "public"},
               {toml_source{"src", "postgres", "", src, {}, {}, false}});

  const std::string group = counted(n, "table");
  auto& raw = r.add(group, "raw pg_catalog query", "raw", "tables");
  auto& inproc = r.add(group, "catalog+describe+evaluate", "flotilla", "tables", "raw pg_catalog query");
  auto& plan = r.add(group, "flotilla plan (CLI)", "flotilla", "tables", "raw pg_catalog query");

  std::vector<std::pair<series*, std::function<measurement()>>> bodies;
  bodies.emplace_back(&raw, [&] {
    auto m = measure_step("raw-catalog-pg", {{"dsn", src}});
    if (static_cast<std::uint64_t>(m.work) != n)
      throw std::runtime_error(fmt::format("raw catalog: {} tables, expected {}", m.work, n));
    return m;
  });
  bodies.emplace_back(&inproc, [&] {
    auto m = measure_step("drift-check", {{"src_dsn", src}, {"dst_dsn", dst}, {"dst_schema", "public"}});
    const auto d = m.detail;
    if (static_cast<std::uint64_t>(m.work) != n || d.value("tables_drifted", 0ULL) != narrower ||
        d.value("tables_with_new_columns", 0ULL) != missing || d.value("tables_absent", 0ULL) != 0)
      throw std::runtime_error("drift check found the wrong drift: " + d.dump());
    return m;
  });
  bodies.emplace_back(&plan, [&] {
    const auto o = run_flotilla(ctx.opt.flotilla_bin, config, "plan");
    auto m = measure_flotilla(o, true, {{"planned", n}});
    std::uint64_t with_actions = 0;
    for (const auto& t : o.run["tables"])
      with_actions += t.contains("actions") && !t["actions"].empty();
    if (with_actions != narrower + missing)
      throw std::runtime_error(fmt::format("flotilla plan: {} tables with actions, expected {}",
                                           with_actions, narrower + missing));
    return m;
  });
  interleave(ctx.opt.warmup, ctx.opt.runs, bodies);

  auto us = [](const series& s) { return 1e6 / spread_of(s.rates()).median; };
  auto part = [&](const char* key) {
    std::vector<double> v;
    for (const auto& m : inproc.runs)
      v.push_back(m.detail.value(key, 0.0) / static_cast<double>(n) * 1e6);
    return spread_of(v).median;
  };
  const double total = us(inproc);
  r.figures = {{"us_per_table", total},
               {"us_per_table_catalog", part("catalog_s")},
               {"us_per_table_target_connect", part("connect_s")},
               {"us_per_table_describe", part("describe_s")},
               {"us_per_table_evaluate", part("evaluate_s")},
               {"us_per_table_plan_cli", us(plan)},
               {"us_per_table_raw_query", us(raw)}};
  r.notes.push_back(fmt::format(
      "in-process: {:.1f} us per table = catalog {:.1f} + target connection {:.1f} + target "
      "describe {:.1f} + evaluation (plan_table) {:.2f} + the rest of the loop; raw pg_catalog "
      "query {:.1f} us per table",
      total, part("catalog_s"), part("connect_s"), part("describe_s"), part("evaluate_s"),
      us(raw)));
  r.notes.push_back(fmt::format("`flotilla plan` end to end (process, config, {} target "
                                "connections): {:.1f} us per table",
                                4, us(plan)));
  r.targets.push_back({"drift-check <= 100 us per table (catalog read + drift evaluation)",
                       fmt::format("{} us (plan CLI {:.1f} us)", figure_near(total, 100, 1), us(plan)),
                       total <= 100});
  return r;
}

}  // namespace flotilla::bench
