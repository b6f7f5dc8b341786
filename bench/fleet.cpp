// fleet-scale and prune: fleets of SQLite sources replicated into DuckDB through
// `flotilla run`, the command users run, against a raw single-threaded copy of the same
// tables (fleet-scale) and raw catalog reads of the same files (prune).
#include <map>
#include <cmath>
#include <filesystem>
#include <sqlite3.h>
#include <unistd.h>

#include <fmt/format.h>

#include "bench/datagen.hpp"
#include "bench/flotilla_cli.hpp"
#include "bench/pg.hpp"
#include "bench/raw.hpp"
#include "bench/scenario.hpp"
#include "bench/steps.hpp"
#include "sinks/warehouse.hpp"

namespace flotilla::bench {
namespace {

namespace fs = std::filesystem;

struct fleet_dir {
  fs::path root;
  fs::path data;
  fs::path config;
  fs::path warehouse;
  fs::path raw_warehouse;
  std::string pg_dsn;      ///< PostgreSQL target: Flotilla's database
  std::string raw_pg_dsn;  ///< PostgreSQL target: the raw copy's database
  std::string pg_name;     ///< PostgreSQL target: Flotilla's database, as pg_databases names it
  bool sqlite_target = false;
  std::uint32_t block_size = 0;  ///< DuckDB target: of both paths' files; 0: Flotilla's default
  fleet_layout layout;

  /// Empties Flotilla's target and state (`raw`: the raw copy's target) before a run
  /// that must be a first load: the files are removed, the database re-created.
  void empty_target(bool raw, pg_databases* dbs) const {
    if (!pg_name.empty()) {
      (void)dbs->create(raw ? pg_name + "_raw" : pg_name);
    } else {
      const fs::path file = sqlite_target ? root / (raw ? "raw_target.sqlite" : "warehouse.sqlite")
                                          : (raw ? raw_warehouse : warehouse);
      for (const char* suffix : {"", ".wal", "-wal", "-shm", "-journal"})
        fs::remove(file.string() + suffix);
    }
    if (!raw)
      fs::remove_all(root / ".flotilla");
  }

  /// Arguments of the raw-fleet-copy step for this fleet's target.
  /// Where a path's copy lands, for the count-target step.
  [[nodiscard]] step_args target_args(bool raw) const {
    if (!pg_name.empty())
      return {{"dialect", "postgres"}, {"dsn", raw ? raw_pg_dsn : pg_dsn}};
    if (sqlite_target)
      return {{"dialect", "sqlite"},
              {"path", (root / (raw ? "raw_target.sqlite" : "warehouse.sqlite")).string()}};
    return {{"dialect", "duckdb"}, {"path", (raw ? raw_warehouse : warehouse).string()}};
  }

  [[nodiscard]] step_args raw_args() const {
    if (!raw_pg_dsn.empty())
      return {{"dir", data.string()}, {"pg", raw_pg_dsn}};
    if (sqlite_target)
      return {{"dir", data.string()}, {"sqlite", (root / "raw_target.sqlite").string()}};
    if (block_size != 0)
      return {{"dir", data.string()},
              {"duckdb", raw_warehouse.string()},
              {"block_size", std::to_string(block_size)}};
    return {{"dir", data.string()}, {"duckdb", raw_warehouse.string()}};
  }
};

/// Writes the fleet's SQLite files and its flotilla.toml (one source per client, tagged
/// client = <name>, into one warehouse, schema per client). A PostgreSQL target needs
/// `dbs`: each fleet gets two databases of its own (Flotilla's and the raw copy's).
fleet_dir prepare_fleet(const fs::path& root, std::size_t clients, std::size_t tables,
                        std::uint64_t rows, double skew, const std::string& target = "duckdb",
                        pg_databases* dbs = nullptr, std::uint32_t block_size = 0) {
  fleet_dir d;
  d.root = root;
  d.data = root / "data";
  d.config = root / "flotilla.toml";
  d.warehouse = root / "warehouse.duckdb";
  d.raw_warehouse = root / "raw.duckdb";
  if (target == "postgres") {
    if (dbs == nullptr)
      throw std::runtime_error("a PostgreSQL fleet target needs FLOTILLA_PG_DSN");
    const auto name = fmt::format("fleet_{}x{}", clients, tables);
    d.pg_name = name;
    d.pg_dsn = dbs->create(name);
    d.raw_pg_dsn = dbs->create(name + "_raw");
  } else if (target == "sqlite") {
    d.sqlite_target = true;
  } else if (target != "duckdb") {
    throw std::runtime_error("fleet target must be duckdb, postgres or sqlite, not " + target);
  } else {
    d.block_size = block_size;
  }
  fs::remove_all(root);
  fs::create_directories(d.data);
  d.layout = make_fleet(clients, tables, rows, skew);
  std::vector<toml_source> sources;
  for (const auto& c : d.layout.clients) {
    if (interrupted())
      throw std::runtime_error(
          fmt::format("interrupted ({}) while the points' data was generated", interrupt_name()));
    const auto path = (d.data / (c.name + ".db")).string();
    write_sqlite_client(path, c);
    sources.push_back({c.name, "sqlite", path, "", {}, {{"client", c.name}}, true});
  }
  if (d.sqlite_target)
    write_config(d.config.string(),
                 toml_target{"sqlite", (root / "warehouse.sqlite").string(), "", "{source}"}, sources);
  else if (d.pg_dsn.empty())
    write_config(d.config.string(),
                 toml_target{"duckdb", d.warehouse.string(), "", "{source}", d.block_size},
                 sources);
  else
    write_config(d.config.string(), toml_target{"postgres", "", d.pg_dsn, "{source}"}, sources);
  return d;
}

std::string flotilla_bin(const bench_context& ctx) { return ctx.opt.flotilla_bin; }

double median_of(const series& s, double (*f)(const measurement&)) {
  std::vector<double> v;
  for (const auto& m : s.runs)
    v.push_back(f(m));
  return spread_of(v).median;
}
double wall_of(const measurement& m) { return m.wall_s; }
double rss_of(const measurement& m) { return static_cast<double>(m.peak_rss_kb); }

std::vector<double> paired(const series& a, const series& b) {
  std::vector<double> out;
  const auto x = a.rates(), y = b.rates();
  for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    if (y[i] > 0)
      out.push_back(x[i] / y[i]);
  return out;
}

std::string kb(double bytes) {
  return bytes >= 1024 * 1024 ? fmt::format("{:.2f} MB", bytes / 1024 / 1024)
                              : fmt::format("{:.1f} KB", bytes / 1024);
}

/// A per-table difference with its sign: "+12.5 KB", "-3.0 KB". A larger point that ran
/// faster or smaller than the 1-table one (noise at small sizes) shows as negative.
std::string signed_kb(double bytes) {
  return (bytes < 0 ? "-" : "+") + kb(std::abs(bytes));
}

}  // namespace

scenario_result run_fleet_scale(bench_context& ctx) {
  scenario_result r;
  r.name = "fleet-scale";
  struct point {
    std::string label;
    std::size_t clients, tables;
    fleet_dir dir;
    series* flotilla = nullptr;
    series* raw = nullptr;
  };
  std::vector<point> points;
  for (auto n : ctx.opt.fleet_tables)
    points.push_back({counted(n, "table"), 1, n, {}});
  if (!ctx.opt.fleet_grid.empty()) {
    const auto [c, t] = parse_grid(ctx.opt.fleet_grid);
    points.push_back({fmt::format("{}x{} tables", c, t), c, t, {}});
  }
  const std::string& target = ctx.opt.fleet_target;
  r.sizes = fmt::format("{} in total per point, Zipf skew {} over clients and tables; SQLite "
                        "-> {}{}; {}",
                        counted(ctx.opt.fleet_rows, "row"), ctx.opt.skew,
                        target == "postgres" ? "PostgreSQL" : target == "sqlite" ? "SQLite" : "DuckDB",
                        target == "duckdb" && ctx.opt.fleet_block_size != 0
                            ? fmt::format(" ({}-byte blocks)", ctx.opt.fleet_block_size)
                            : std::string(),
                        ctx.runs_text());
  const bool fresh = ctx.opt.fleet_mode == "fresh";
  r.sizes += fresh ? "; fresh: every run loads an empty target"
             : ctx.opt.warmup == 0
                 ? (ctx.opt.runs == 1
                        ? "; a first load: with no warm-up, a point's one run loads an empty target"
                        : "; no warm-up: a point's first run loads an empty target, the others "
                          "rerun into the tables it left (the median mixes the two)")
                 : "; reruns: a point's runs after its first load into the tables it left";
  std::optional<pg_databases> dbs;
  if (target == "postgres") {
    // As the other PostgreSQL scenarios: skipped (--require-pg has refused it up front).
    if (!ctx.pg_dsn) {
      r.status = "skipped";
      r.message = "FLOTILLA_PG_DSN is not set (--fleet-target postgres)";
      return r;
    }
    dbs.emplace(*ctx.pg_dsn, ctx.db_prefix);
  }
  const fs::path base = fs::path(ctx.scratch) / "fleet-scale";
  for (auto& p : points) {
    // A stop (Ctrl-C, SIGTERM) while the points' data is generated: no later point is
    // generated, as no later path runs.
    if (interrupted())
      throw std::runtime_error(
          fmt::format("interrupted ({}) while the points' data was generated", interrupt_name()));
    if (::isatty(STDERR_FILENO) != 0)
      fmt::print(stderr, "   generating {} ...\n", p.label);
    p.dir = prepare_fleet(base / fmt::format("{}x{}", p.clients, p.tables), p.clients, p.tables,
                          ctx.opt.fleet_rows, ctx.opt.skew, target, dbs ? &*dbs : nullptr,
                          ctx.opt.fleet_block_size);
    const bool grid = p.clients > 1;
    const std::string fl = grid ? "flotilla run (clients)" : "flotilla run";
    const std::string raw = grid ? "raw copy (clients)" : "raw copy";
    const double x = static_cast<double>(p.clients * p.tables);
    p.raw = &r.add(p.label, raw, "raw", "rows", "", x);
    p.flotilla = &r.add(p.label, fl, "flotilla", "rows", raw, x);
  }
  std::vector<std::pair<series*, std::function<measurement()>>> bodies;
  for (auto& p : points) {
    const auto tables = p.dir.layout.tables();
    pg_databases* pg = dbs ? &*dbs : nullptr;
    bodies.emplace_back(p.raw, [&p, tables, fresh, pg] {
      if (fresh)
        p.dir.empty_target(true, pg);
      auto m = measure_step("raw-fleet-copy", p.dir.raw_args());
      if (m.detail.value("tables", std::size_t{0}) != tables)
        throw std::runtime_error("raw fleet copy: wrong table count");
      return m;
    });
    bodies.emplace_back(p.flotilla, [&p, &ctx, tables, fresh, pg] {
      if (fresh)
        p.dir.empty_target(false, pg);
      const auto o = run_flotilla(flotilla_bin(ctx), p.dir.config.string(), "run", {"--no-prune"});
      auto m = measure_flotilla(o, false, {{"copied", tables}});
      if (o.rows != p.dir.layout.rows())
        throw std::runtime_error(fmt::format("flotilla copied {} rows, expected {}", o.rows,
                                             p.dir.layout.rows()));
      return m;
    });
  }
  interleave(ctx.opt.warmup, ctx.opt.runs, bodies);
  // Both paths left every table with all its rows: counted in the targets themselves,
  // table by table, not taken from what each path reports.
  for (const auto& p : points)
    for (const bool raw : {true, false}) {
      const auto m = measure_step("count-target", p.dir.target_args(raw));
      const auto tables = m.detail.value("tables", std::uint64_t{0});
      const auto rows = m.detail.value("rows", std::uint64_t{0});
      const auto per_table = m.detail.value("per_table", nlohmann::json::object());
      std::vector<std::string> wrong;
      for (const auto& c : p.dir.layout.clients)
        for (const auto& t : c.tables) {
          // One schema per client; a SQLite target has none, so the name carries it.
          const std::string name =
              p.dir.sqlite_target ? c.name + "__" + t.name : c.name + "." + t.name;
          const auto it = per_table.find(name);
          if (it == per_table.end())
            wrong.push_back(fmt::format("{} missing ({} rows expected)", name, t.rows));
          else if (it->get<std::uint64_t>() != t.rows)
            wrong.push_back(fmt::format("{} holds {} rows, expected {}", name,
                                        it->get<std::uint64_t>(), t.rows));
        }
      if (!wrong.empty()) {
        std::string list;
        for (std::size_t i = 0; i < wrong.size() && i < 5; ++i)
          list += (i ? "; " : "") + wrong[i];
        throw std::runtime_error(fmt::format("{} {}: {} table(s) of the target differ from the "
                                             "source: {}{}",
                                             p.label, raw ? "raw" : "flotilla", wrong.size(),
                                             list, wrong.size() > 5 ? "; ..." : ""));
      }
      // Every expected table holds its rows: what is left to differ is a table too many.
      if (tables != p.dir.layout.tables() || rows != p.dir.layout.rows())
        throw std::runtime_error(fmt::format(
            "{} {}: the target holds {} tables with {} rows, expected {} tables with {} rows "
            "(the expected tables are all there with their rows: the rest is in tables the "
            "source does not have)",
            p.label, raw ? "raw" : "flotilla", tables, rows, p.dir.layout.tables(),
            p.dir.layout.rows()));
    }
  // Both paths' DuckDB files have the block size asked for, or Flotilla's default.
  if (target == "duckdb")
    for (const auto& p : points) {
      const std::uint64_t want =
          p.dir.block_size != 0 ? p.dir.block_size : sinks::duckdb_default_block_size;
      for (const auto& file : {p.dir.warehouse, p.dir.raw_warehouse})
        if (const auto got = duckdb_block_size(file.string()); got != want)
          throw std::runtime_error(
              fmt::format("{} has {}-byte blocks, not {}", file.string(), got, want));
    }

  // Derived figures against the smallest point (one table).
  const point* one = nullptr;
  for (const auto& p : points)
    if (p.clients == 1 && (one == nullptr || p.tables < one->tables))
      one = &p;
  if (one == nullptr)
    return r;
  const double one_wall = median_of(*one->flotilla, wall_of);
  const double one_rss = median_of(*one->flotilla, rss_of) * 1024;
  const double one_raw_wall = median_of(*one->raw, wall_of);
  const double one_raw_rss = median_of(*one->raw, rss_of) * 1024;
  const point* largest = nullptr;
  std::map<std::string, spread> kept_of;  // label -> throughput kept, run by run
  for (const auto& p : points) {
    const double n = static_cast<double>(p.clients * p.tables);
    const auto kept = spread_of(paired(*p.flotilla, *one->flotilla));
    const auto raw_kept = spread_of(paired(*p.raw, *one->raw));
    const double wall = median_of(*p.flotilla, wall_of);
    const double raw_wall = median_of(*p.raw, wall_of);
    kept_of[p.label] = kept;
    nlohmann::json f{{"tables", n},
                     {"throughput_retained", kept.median},
                     {"throughput_retained_min", kept.min},
                     {"throughput_retained_max", kept.max},
                     {"raw_throughput_retained", raw_kept.median},
                     {"us_per_table", wall / n * 1e6},
                     {"raw_us_per_table", raw_wall / n * 1e6}};
    std::string line = fmt::format("{}: throughput kept {} of 1 table (raw: {}); {:.0f} us per "
                                   "table (raw: {:.0f})",
                                   p.label, ratio_text(kept, 0.8), ratio_text(raw_kept), wall / n * 1e6,
                                   raw_wall / n * 1e6);
    if (n > 1) {
      const double extra_us = (wall - one_wall) / (n - 1) * 1e6;
      const double raw_extra_us = (raw_wall - one_raw_wall) / (n - 1) * 1e6;
      const double bytes = (median_of(*p.flotilla, rss_of) * 1024 - one_rss) / (n - 1);
      const double raw_bytes = (median_of(*p.raw, rss_of) * 1024 - one_raw_rss) / (n - 1);
      f["marginal_us_per_table"] = extra_us;
      f["raw_marginal_us_per_table"] = raw_extra_us;
      f["bytes_per_table"] = bytes;
      f["raw_bytes_per_table"] = raw_bytes;
      line += fmt::format("; beyond 1 table: {:+.0f} us and {} of peak RSS per table (raw: "
                          "{:+.0f} us, {})",
                          extra_us, signed_kb(bytes), raw_extra_us, signed_kb(raw_bytes));
      if (extra_us < 0 || raw_extra_us < 0)
        line += " (negative: the larger point ran faster than the 1-table one; at these sizes "
                "the difference is noise)";
    }
    r.notes.push_back(line);
    r.figures[p.label] = f;
    if (p.clients == 1 && (largest == nullptr || p.tables > largest->tables))
      largest = &p;
  }
  if (largest != nullptr && largest != one) {
    const auto& f = r.figures[largest->label];
    r.targets.push_back({fmt::format("fleet-scale {} keeps >= 0.8x of 1-table throughput",
                                     largest->label),
                         figure_near(f["throughput_retained"].get<double>(), 0.8, 2) + "x",
                         f["throughput_retained"].get<double>() >= 0.8,
                         spread_caveat(kept_of[largest->label], 0.8)});
    const double bytes = f["bytes_per_table"].get<double>();
    r.targets.push_back({fmt::format("fleet-scale {} <= 20 KB of memory per table", largest->label),
                         bytes >= 1024 * 1024 ? kb(bytes) : figure_near(bytes / 1024, 20, 1) + " KB",
                         bytes <= 20 * 1024});
  } else {
    // Only the 1-table point (--fleet-tables 1, a grid aside): nothing to keep against it.
    for (const char* what : {"fleet-scale keeps >= 0.8x of 1-table throughput",
                             "fleet-scale <= 20 KB of memory per table"})
      r.targets.push_back({what,
                           "not measured: no one-client point beyond 1 table (--fleet-tables)",
                           std::nullopt});
  }
  r.notes.push_back("peak RSS is the whole `flotilla run` process (ru_maxrss); per-table memory is "
                    "(peak at N tables - peak at 1 table) / (N - 1)");
  return r;
}

scenario_result run_prune(bench_context& ctx) {
  scenario_result r;
  r.name = "prune";
  const auto [clients, per_client] = parse_grid(ctx.opt.prune_grid);
  const std::size_t total = clients * per_client;
  r.sizes = fmt::format("{} x {} = {}, {}; SQLite -> DuckDB; {}", counted(clients, "client"),
                        counted(per_client, "table"), counted(total, "table"),
                        counted(ctx.opt.prune_rows, "row"), ctx.runs_text());
  auto d = prepare_fleet(fs::path(ctx.scratch) / "prune", clients, per_client, ctx.opt.prune_rows,
                         ctx.opt.skew);
  // A config over the same sources that selects no table (a pattern that matches none:
  // a plain name the source lacks would fail as a typo): process start, config, state
  // and one catalog read per source, without any per-table work.
  fs::create_directories(d.root / "floor");
  const auto floor_config = (d.root / "floor" / "flotilla.toml").string();
  {
    std::vector<toml_source> sources;
    for (const auto& c : d.layout.clients)
      sources.push_back({c.name, "sqlite", (d.data / (c.name + ".db")).string(), "",
                         {"no_such_table*"}, {{"client", c.name}}, true});
    write_config(floor_config, toml_target{"duckdb", (d.root / "floor" / "warehouse.duckdb").string(), "", "{source}"},
                 sources);
  }
  const auto bin = flotilla_bin(ctx);
  // Setup: the first copy of every table records its marker; the second run must prune all.
  (void)measure_flotilla(run_flotilla(bin, d.config.string(), "run"), true, {{"copied", total}});
  (void)measure_flotilla(run_flotilla(bin, d.config.string(), "run"), true, {{"pruned", total}});

  auto& raw = r.add("unchanged", "raw catalog reads", "raw", "tables");
  auto& none_selected = r.add("unchanged", "flotilla, no table selected", "flotilla", "tables", "raw catalog reads");
  auto& pruned = r.add("unchanged", "flotilla run (all pruned)", "flotilla", "tables", "raw catalog reads");
  const std::string changed_label = fmt::format("1 client of {} changed", clients);
  auto& changed = r.add(changed_label, "flotilla run", "flotilla", "tables", "raw catalog reads");

  // The changed client: the median one, so its tables are of typical size.
  const auto& victim = d.layout.clients[clients / 2];
  const auto victim_path = (d.data / (victim.name + ".db")).string();
  std::uint64_t bump = 0;
  std::vector<std::pair<series*, std::function<measurement()>>> bodies;
  bodies.emplace_back(&raw, [&] {
    auto m = measure_step("raw-catalog-sqlite", {{"dir", d.data.string()}});
    if (static_cast<std::size_t>(m.work) != total)
      throw std::runtime_error("raw catalog read: wrong table count");
    return m;
  });
  bodies.emplace_back(&none_selected, [&] {
    auto m = measure_flotilla(run_flotilla(bin, floor_config, "run"), true, {});
    m.work = static_cast<double>(total);  // per table of the fleet, as the others
    return m;
  });
  bodies.emplace_back(&pruned, [&] {
    return measure_flotilla(run_flotilla(bin, d.config.string(), "run"), true, {{"pruned", total}});
  });
  bodies.emplace_back(&changed, [&] {
    sqlite3* db = nullptr;
    sqlite3_open(victim_path.c_str(), &db);
    const auto sql = fmt::format("UPDATE \"{}\" SET quantity = quantity + {} WHERE id = 1",
                                 victim.tables.front().name, ++bump);
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    sqlite3_close(db);
    if (rc != SQLITE_OK)
      throw std::runtime_error("cannot change " + victim_path);
    std::map<std::string, std::size_t> expect{{"copied", per_client}};
    if (total > per_client)
      expect["pruned"] = total - per_client;
    return measure_flotilla(run_flotilla(bin, d.config.string(), "run"), true, expect);
  });
  interleave(ctx.opt.warmup, ctx.opt.runs, bodies);

  auto us = [&](const series& s) { return 1e6 / spread_of(s.rates()).median; };
  const double floor_us = us(none_selected), pruned_us = us(pruned);
  // The all-pruned runs one by one: the fastest and the slowest, in us per table.
  const auto pruned_rates = spread_of(pruned.rates());
  const double fastest_us = pruned_rates.max > 0 ? 1e6 / pruned_rates.max : 0;
  const double slowest_us = pruned_rates.min > 0 ? 1e6 / pruned_rates.min : 0;
  r.figures = {{"tables", total},
               {"us_per_table_all_pruned", pruned_us},
               {"us_per_table_all_pruned_min", fastest_us},
               {"us_per_table_all_pruned_max", slowest_us},
               {"us_per_table_no_table_selected", floor_us},
               // Not measured (null) when the no-table run took longer (start-up noise at
               // tiny sizes): the notes say so.
               {"us_per_table_per_table_work",
                pruned_us >= floor_us ? nlohmann::json(pruned_us - floor_us) : nlohmann::json()},
               {"us_per_table_one_client_changed", us(changed)},
               {"us_per_table_raw_catalog", us(raw)}};
  if (pruned_us >= floor_us)
    r.notes.push_back(fmt::format(
        "all pruned: {:.1f} us per table = {:.1f} us fixed (start, config, state, {}: the "
        "no-table run) + {:.1f} us of per-table work; raw catalog reads {:.1f} us per table",
        pruned_us, floor_us, counted(clients, "catalog read"), pruned_us - floor_us, us(raw)));
  else  // tiny sizes, no warm-up: the first run also creates the state store
    r.notes.push_back(fmt::format(
        "all pruned: {:.1f} us per table; the no-table run (start, config, state, {}) took "
        "longer, {:.1f} us per table: at this size{} start-up varies more than the per-table "
        "work costs, which is not measured (null in bench.json); raw catalog reads {:.1f} us "
        "per table",
        pruned_us, counted(clients, "catalog read"), floor_us,
        ctx.opt.warmup == 0 ? " (and without a warm-up, whose run creates the state store)" : "",
        us(raw)));
  r.notes.push_back(fmt::format("{} ({} = {:.1f}% copied): {:.1f} us per table of the fleet",
                                changed_label, counted(per_client, "table"), 100.0 * per_client / total, us(changed)));
  r.notes.push_back("SQLite change markers are per file: one changed table re-copies every table "
                    "of its client's file");
  // As spread_caveat says it of ratios, for a line a figure meets by being under it.
  std::string caveat;
  if (pruned_rates.n >= 2 && pruned_us <= 10 && slowest_us > 10)
    caveat = fmt::format("the runs spread across the line: the slowest, {:.1f} us, misses it",
                         slowest_us);
  else if (pruned_rates.n >= 2 && pruned_us > 10 && fastest_us <= 10)
    caveat = fmt::format("the runs spread across the line: the fastest, {:.1f} us, meets it",
                         fastest_us);
  r.targets.push_back({"prune <= 10 us per unchanged table", figure_near(pruned_us, 10, 1) + " us",
                       pruned_us <= 10, caveat});
  return r;
}

}  // namespace flotilla::bench
