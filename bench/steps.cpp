#include "bench/steps.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "bench/kafka.hpp"
#include "bench/raw.hpp"
#include "engine/copy.hpp"
#include "engine/planner.hpp"
#include "engine/target_catalog.hpp"
#include "sinks/warehouse.hpp"
#include "sources/source.hpp"

namespace flotilla::bench {
namespace {

const std::string& need(const step_args& a, const std::string& key) {
  auto it = a.find(key);
  if (it == a.end())
    throw std::runtime_error("step argument missing: " + key);
  return it->second;
}

std::string opt(const step_args& a, const std::string& key) {
  auto it = a.find(key);
  return it == a.end() ? std::string() : it->second;
}

std::vector<std::string> db_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".db")
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

void print_result(const stopwatch& sw, double work, nlohmann::json extra = nlohmann::json::object()) {
  // Read the clocks first: printing is not part of the timed section.
  extra["wall_s"] = sw.wall_s();
  extra["cpu_s"] = sw.cpu_s();
  extra["work"] = work;
  std::printf("%s\n", extra.dump().c_str());
  std::fflush(stdout);
}

double secs_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// The optional `block_size=` of a step with a DuckDB target; 0 when not given.
std::uint32_t block_size_arg(const step_args& a) {
  const auto bs = opt(a, "block_size");
  return bs.empty() ? 0 : static_cast<std::uint32_t>(std::stoul(bs));
}

int step_copy(const step_args& a) {
  sources::source_options so;
  so.name = "bench";
  so.adapter = need(a, "source_adapter");
  so.path = opt(a, "source_path");
  so.dsn = opt(a, "source_dsn");
  sinks::warehouse_options wo;
  wo.name = "bench";
  wo.dialect = need(a, "target_dialect");
  wo.path = opt(a, "target_path");
  wo.dsn = opt(a, "target_dsn");
  wo.block_size = block_size_arg(a);

  stopwatch sw;
  auto src = sources::open_source(so);
  const auto cat = src->read_catalog();
  const auto* table = cat.find(need(a, "table"));
  if (table == nullptr)
    throw std::runtime_error("no table " + need(a, "table") + " in the source");
  auto wh = sinks::open_warehouse(wo);
  engine::table_job job;
  job.source_name = "bench";
  job.target_name = "bench";
  job.table = *table;
  job.target = dialects::table_ref{"", need(a, "target_schema"), need(a, "target_table")};
  const auto out = engine::copy_table(*src, *wh, job);
  if (out.status != engine::table_status::copied)
    throw std::runtime_error("copy failed: " + out.error.value_or("?"));
  print_result(sw, static_cast<double>(out.rows), {{"rows", out.rows}});
  return 0;
}

int step_drift_check(const step_args& a) {
  const std::string dst_schema = need(a, "dst_schema");
  stopwatch sw;
  auto src = sources::open_source({"bench", "postgres", "", need(a, "src_dsn")});
  const auto cat = src->read_catalog();
  const double catalog_s = sw.wall_s();
  auto wh = sinks::open_warehouse({"bench", "postgres", "", need(a, "dst_dsn")});
  const double connect_s = sw.wall_s() - catalog_s;
  double describe_s = 0, evaluate_s = 0;
  std::uint64_t tables = 0, drifted = 0, added = 0, absent = 0;
  // As a plan or run does (actors/fleet.cpp): every target table is registered with the
  // run's target catalog before the first describe, which reads the schema at once.
  engine::target_catalog target_tables;
  for (const auto& t : cat.tables)
    target_tables.expect({"", dst_schema, t.name});
  for (const auto& t : cat.tables) {
    const dialects::table_ref ref{"", dst_schema, t.name};
    auto t0 = std::chrono::steady_clock::now();
    const auto live = target_tables.describe(*wh, ref);
    describe_s += secs_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto plan = engine::plan_table(t.columns, live,
                                         live ? engine::target_state::present : engine::target_state::absent,
                                         wh->dialect(), ref, engine::table_settings{});
    evaluate_s += secs_since(t0);
    ++tables;
    drifted += plan.drift.drifted() ? 1 : 0;
    added += plan.drift.columns_to_add.empty() ? 0 : 1;
    absent += live ? 0 : 1;
  }
  print_result(sw, static_cast<double>(tables),
               {{"catalog_s", catalog_s}, {"connect_s", connect_s}, {"describe_s", describe_s},
                {"evaluate_s", evaluate_s},
                {"tables_drifted", drifted}, {"tables_with_new_columns", added},
                {"tables_absent", absent}, {"schema_reads", target_tables.schema_reads()}});
  return 0;
}

/// What a fleet copy left in a target: its tables (Flotilla's own bookkeeping left out)
/// and the rows they hold, counted table by table. Not timed: it checks a measured run.
int step_count_target(const step_args& a) {
  sinks::warehouse_options wo;
  wo.name = "bench";
  wo.dialect = need(a, "dialect");
  wo.path = opt(a, "path");
  wo.dsn = opt(a, "dsn");
  auto wh = sinks::open_warehouse(wo);
  std::string list;
  if (wo.dialect == "sqlite")
    list = "SELECT '', name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'";
  else
    list = "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = "
           "'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')";
  std::uint64_t tables = 0, rows = 0;
  nlohmann::json per_table = nlohmann::json::object();  // "schema.table" (or "table"): rows
  for (const auto& r : wh->query(list)) {
    const std::string schema = r.at(0).value_or(""), table = r.at(1).value_or("");
    if (schema.starts_with("_flotilla") || table.starts_with("_flotilla"))
      continue;
    const auto n = wh->query("SELECT count(*) FROM " +
                             wh->dialect().qualified({"", schema, table}));
    const std::uint64_t count = std::stoull(n.at(0).at(0).value_or("0"));
    ++tables;
    rows += count;
    per_table[schema.empty() ? table : schema + "." + table] = count;
  }
  std::printf("%s\n",
              nlohmann::json{{"tables", tables}, {"rows", rows}, {"per_table", per_table}}
                  .dump()
                  .c_str());
  return 0;
}

}  // namespace

step_args parse_step_args(const std::vector<std::string>& args) {
  step_args out;
  for (const auto& s : args) {
    auto eq = s.find('=');
    if (eq == std::string::npos)
      throw std::runtime_error("step argument without '=': " + s);
    out[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return out;
}

int run_step(const std::string& name, const step_args& a) {
  try {
    if (name == "copy")
      return step_copy(a);
    if (name == "drift-check")
      return step_drift_check(a);
    if (name == "count-target")
      return step_count_target(a);
    if (name == "raw-read-sqlite") {
      stopwatch sw;
      const auto r = raw_read_sqlite(need(a, "path"), need(a, "table"));
      print_result(sw, static_cast<double>(r.rows), {{"rows", r.rows}, {"checksum", r.checksum}});
      return 0;
    }
    if (name == "raw-read-pg") {
      stopwatch sw;
      const auto r = raw_read_pg(need(a, "dsn"), need(a, "table"));
      print_result(sw, static_cast<double>(r.rows), {{"rows", r.rows}, {"checksum", r.checksum}});
      return 0;
    }
    if (name == "raw-write-duckdb") {
      const auto rows = generate_rows(std::stoull(need(a, "rows")), std::stoull(need(a, "seed")));
      stopwatch sw;
      const auto r = raw_write_duckdb(need(a, "path"), need(a, "schema"), need(a, "table"), rows);
      print_result(sw, static_cast<double>(r.rows), {{"rows", r.rows}});
      return 0;
    }
    if (name == "raw-copy-pg-duckdb") {
      stopwatch sw;
      const auto r = raw_copy_pg_to_duckdb(need(a, "dsn"), need(a, "table"), need(a, "path"),
                                           need(a, "schema"), need(a, "target_table"));
      print_result(sw, static_cast<double>(r.rows), {{"rows", r.rows}});
      return 0;
    }
    if (name == "raw-write-pg") {
      const auto n = std::stoull(need(a, "rows"));
      const auto chunks = copy_text_chunks(generate_rows(n, std::stoull(need(a, "seed"))));
      stopwatch sw;
      const auto r = raw_write_pg(need(a, "dsn"), need(a, "schema"), need(a, "table"), chunks, n);
      print_result(sw, static_cast<double>(r.rows), {{"rows", r.rows}});
      return 0;
    }
    if (name == "raw-fleet-copy") {
      const auto files = db_files(need(a, "dir"));
      stopwatch sw;
      const auto r = a.contains("pg")       ? raw_copy_sqlite_fleet_to_pg(files, need(a, "pg"))
                     : a.contains("sqlite") ? raw_copy_sqlite_fleet_to_sqlite(files, need(a, "sqlite"))
                                            : raw_copy_sqlite_fleet_to_duckdb(
                                                  files, need(a, "duckdb"), block_size_arg(a));
      print_result(sw, static_cast<double>(r.rows), {{"rows", r.rows}, {"tables", r.tables}});
      return 0;
    }
    if (name == "raw-catalog-sqlite") {
      const auto files = db_files(need(a, "dir"));
      stopwatch sw;
      const auto r = raw_catalog_sqlite(files);
      print_result(sw, static_cast<double>(r.tables), {{"tables", r.tables}});
      return 0;
    }
    if (name == "raw-catalog-pg") {
      stopwatch sw;
      const auto r = raw_catalog_pg(need(a, "dsn"));
      print_result(sw, static_cast<double>(r.tables), {{"tables", r.tables}});
      return 0;
    }
    if (name == "kafka-raw") {
      const auto events = make_events(std::stoull(need(a, "events")));
      stopwatch sw;
      const auto r = raw_kafka_produce(need(a, "bootstrap"), need(a, "topic"), events,
                                       opt(a, "idempotent") == "1");
      if (r.failed > 0 || r.delivered != events.size())
        throw std::runtime_error(fmt::format("{} of {} events delivered, {} failed", r.delivered,
                                             events.size(), r.failed));
      print_result(sw, static_cast<double>(r.delivered), {{"events", r.delivered}});
      return 0;
    }
    if (name == "kafka-sink") {
      const auto n = std::stoull(need(a, "events"));
      const auto r = flotilla_kafka_deliver(need(a, "bootstrap"), need(a, "topic"), n,
                                            std::stoull(need(a, "batch")),
                                            opt(a, "outbox") == "mixed");
      if (r.delivered != n)
        throw std::runtime_error(fmt::format("{} of {} events delivered", r.delivered, n));
      nlohmann::json j{{"wall_s", r.wall_s}, {"cpu_s", r.cpu_s}, {"work", r.delivered},
                       {"events", r.delivered}};
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    std::fprintf(stderr, "unknown step '%s'\n", name.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "step %s failed: %s\n", name.c_str(), e.what());
    return 1;
  }
}

measurement measure_step(const std::string& name, const step_args& args) {
  std::vector<std::string> argv{self_path(), "step", name};
  for (const auto& [k, v] : args)
    argv.push_back(k + "=" + v);
  const auto r = run_child(argv);
  const auto j = r.result_line();
  if (r.exit_code != 0 || !j)
    throw std::runtime_error(fmt::format("step {} failed: {}", name, r.describe_failure()));
  measurement m;
  m.wall_s = j->value("wall_s", 0.0);
  m.cpu_s = j->value("cpu_s", 0.0);
  m.work = j->value("work", 0.0);
  m.peak_rss_kb = r.peak_rss_kb;
  m.detail = *j;
  return m;
}

}  // namespace flotilla::bench
