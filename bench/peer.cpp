// peer: PostgreSQL -> PostgreSQL copies of 100 and 1,000 wide tables by `flotilla run`,
// pgcopydb and `pg_dump | psql`, each into an empty database, every result checked
// table by table (row count and an order-independent checksum of every value).
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "bench/datagen.hpp"
#include "bench/flotilla_cli.hpp"
#include "bench/pg.hpp"
#include "bench/scenario.hpp"

namespace flotilla::bench {
namespace {

namespace fs = std::filesystem;

std::string table_name(std::uint64_t i) { return fmt::format("t{:05}", i); }

/// Rows of table i: in [mean - mean/2, mean + mean/2], at least 1, and tables 2k and 2k+1
/// differ from `mean` by the same amount in opposite ways, so a fleet of n tables holds
/// n * mean rows in all (the help's "mean rows per table").
std::uint64_t rows_of(std::uint64_t i, std::uint64_t tables, std::uint64_t mean) {
  if (i % 2 == 0 && i + 1 == tables)
    return mean;  // the odd one out has no partner
  std::uint64_t h = (i / 2 + 1) * 0x9e3779b97f4a7c15ULL;
  h ^= h >> 29;
  const std::uint64_t d = h % (mean / 2 + 1);
  return i % 2 == 0 ? mean + d : mean - d;
}

/// count and checksum of every table of schema `peer`, keyed by table name.
using checksums = std::map<std::string, std::pair<std::string, std::string>>;

checksums checksum_tables(const std::string& dsn, std::uint64_t tables) {
  pg_connection c(dsn);
  std::string values;
  for (const auto& col : wide_columns) {
    if (!values.empty())
      values += ", ";
    values += fmt::format("coalesce({}::text, '-')", col.name);
  }
  checksums out;
  for (std::uint64_t from = 0; from < tables; from += 100) {
    std::string sql;
    for (std::uint64_t i = from; i < std::min(tables, from + 100); ++i) {
      if (!sql.empty())
        sql += " UNION ALL ";
      sql += fmt::format(
          "SELECT '{0}', count(*)::text, coalesce(sum(('x' || substr(md5(concat_ws('|', {1})), 1, "
          "15))::bit(60)::bigint), 0)::text FROM peer.\"{0}\"",
          table_name(i), values);
    }
    for (const auto& row : c.query(sql))
      out[*row[0]] = {*row[1], *row[2]};
  }
  return out;
}

/// Every table of schema `peer` and its columns as the catalog defines them (name, type
/// with its modifiers, NOT NULL), then its primary key's columns, keyed by table name: a
/// copy that turned a decimal or a boolean into text, added a column or a table, or left
/// out the key (which the timed tools build after the rows), keeps every value's text
/// and so its checksum, but not this.
using shapes = std::map<std::string, std::string>;

shapes shape_of(const std::string& dsn) {
  pg_connection c(dsn);
  shapes out;
  for (const auto& row : c.query(
           "SELECT c.relname, string_agg(a.attname || ' ' || "
           "pg_catalog.format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN "
           "' not null' ELSE '' END, ', ' ORDER BY a.attnum) FROM pg_catalog.pg_class c JOIN "
           "pg_catalog.pg_namespace n ON n.oid = c.relnamespace JOIN pg_catalog.pg_attribute "
           "a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped WHERE n.nspname "
           "= 'peer' AND c.relkind IN ('r', 'p') GROUP BY c.relname"))
    out[*row[0]] = *row[1];
  for (auto& [table, shape] : out)
    shape += "; primary key (none)";
  for (const auto& row : c.query(
           "SELECT c.relname, string_agg(a.attname, ', ' ORDER BY k.ord) FROM "
           "pg_catalog.pg_constraint x JOIN pg_catalog.pg_class c ON c.oid = x.conrelid JOIN "
           "pg_catalog.pg_namespace n ON n.oid = c.relnamespace CROSS JOIN LATERAL "
           "unnest(x.conkey) WITH ORDINALITY AS k(attnum, ord) JOIN pg_catalog.pg_attribute a "
           "ON a.attrelid = c.oid AND a.attnum = k.attnum WHERE n.nspname = 'peer' AND "
           "x.contype = 'p' GROUP BY c.relname"))
    if (auto it = out.find(*row[0]); it != out.end())
      it->second.replace(it->second.rfind("; primary key (none)"), std::string::npos,
                         "; primary key (" + *row[1] + ")");
  return out;
  return out;
}

void verify(const checksums& expected, const shapes& expected_shape, const std::string& dsn,
            std::uint64_t tables, const std::string& tool) {
  checksums got;
  shapes got_shape;
  try {
    got = checksum_tables(dsn, tables);
    got_shape = shape_of(dsn);
  } catch (const std::exception& e) {
    throw std::runtime_error(tool + " result cannot be checked: " + e.what());
  }
  for (const auto& [t, columns] : got_shape) {
    const auto it = expected_shape.find(t);
    if (it == expected_shape.end())
      throw std::runtime_error(
          fmt::format("{}: table peer.{} is in the result and not in the source", tool, t));
    if (it->second != columns)
      throw std::runtime_error(fmt::format("{}: table peer.{} is ({}), where the source's "
                                           "is ({})",
                                           tool, t, columns, it->second));
  }
  for (const auto& [t, v] : expected) {
    auto it = got.find(t);
    if (it == got.end())
      throw std::runtime_error(fmt::format("{}: table peer.{} is missing", tool, t));
    if (it->second != v)
      throw std::runtime_error(fmt::format("{}: table peer.{} differs: {} rows, checksum {} "
                                           "(source: {} rows, checksum {})",
                                           tool, t, it->second.first, it->second.second, v.first,
                                           v.second));
  }
}

bool on_path(const std::string& tool) {
  return run_child({"sh", "-c", "command -v " + tool}).exit_code == 0;
}

measurement from_process(const child_result& p, double rows, const std::string& tool) {
  if (p.exit_code != 0)
    throw std::runtime_error(tool + " failed: " + p.describe_failure());
  measurement m;
  m.wall_s = p.wall_s;
  m.cpu_s = p.cpu_s;
  m.peak_rss_kb = p.peak_rss_kb;
  m.work = rows;
  return m;
}

}  // namespace

std::string missing_peer_tools(bool need_pgcopydb) {
  std::string missing;
  for (const char* tool : {"pg_dump", "psql"})
    if (!on_path(tool))
      missing += fmt::format("{}{} (Debian package postgresql-client)", missing.empty() ? "" : ", ",
                             tool);
  if (need_pgcopydb && !on_path("pgcopydb"))
    missing += fmt::format("{}pgcopydb (Debian package pgcopydb)", missing.empty() ? "" : ", ");
  return missing;
}

scenario_result run_peer(bench_context& ctx) {
  scenario_result r;
  r.name = "peer";
  std::string sizes;
  for (auto t : ctx.opt.peer_tables)
    sizes += (sizes.empty() ? "" : " and ") + grouped(t);
  r.sizes = fmt::format("{} table{} x 16 columns, {} per table on average; PostgreSQL -> "
                        "PostgreSQL, every tool into an empty database; {}",
                        sizes, ctx.opt.peer_tables.size() == 1 && ctx.opt.peer_tables[0] == 1 ? "" : "s",
                        counted(ctx.opt.peer_rows, "row"), ctx.runs_text());
  if (!ctx.pg_dsn) {
    r.status = "skipped";
    r.message = "FLOTILLA_PG_DSN is not set";
    return r;
  }
  const bool have_pgcopydb = on_path("pgcopydb");
  if (!have_pgcopydb)
    r.notes.push_back("pgcopydb is not installed (scripts/setup installs the Debian package): "
                      "its figures are missing");
  if (!on_path("pg_dump") || !on_path("psql"))
    throw std::runtime_error("pg_dump and psql are needed (Debian package postgresql-client)");

  pg_databases dbs(*ctx.pg_dsn, ctx.db_prefix);
  for (auto tables : ctx.opt.peer_tables) {
    const std::string tag = fmt::format("peer{}", tables);
    const auto src = dbs.create(tag + "_src");
    std::uint64_t rows = 0;
    {
      pg_connection c(src);
      c.exec("CREATE SCHEMA peer");
      for (std::uint64_t i = 0; i < tables; ++i) {
        const auto n = rows_of(i, tables, ctx.opt.peer_rows);
        write_pg_table(c, "peer", table_name(i), n, 1000 + i);
        rows += n;
      }
      c.exec("VACUUM ANALYZE");
    }
    const auto expected = checksum_tables(src, tables);
    const auto expected_shape = shape_of(src);

    const fs::path dir = fs::path(ctx.scratch) / "peer" / tag;
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto config = (dir / "flotilla.toml").string();
    write_config(config, toml_target{"postgres", "", dbs.dsn(tag + "_flotilla"), "peer"},
                 {toml_source{"src", "postgres", "", src, {}, {}, false}});

    const std::string group = counted(tables, "table");
    const double x = static_cast<double>(tables);
    auto& dump = r.add(group, "pg_dump | psql", "peer", "rows", "", x);
    series* copydb = have_pgcopydb ? &r.add(group, "pgcopydb clone", "peer", "rows", "", x) : nullptr;
    auto& fl = r.add(group, "flotilla run", "flotilla", "rows", "pg_dump | psql", x);

    std::vector<std::pair<series*, std::function<measurement()>>> bodies;
    bodies.emplace_back(&dump, [&, tag, tables, rows] {
      const auto dst = dbs.create(tag + "_pgdump");
      // The password in the environment, not on the command lines `ps` shows.
      auto env = password_env(src);
      env["SRC"] = without_password(src);
      env["DST"] = without_password(dst);
      const auto p = run_child(
          {"bash", "-c",
           "set -o pipefail; pg_dump --no-owner --no-acl -d \"$SRC\" | "
           "psql -X -q -v ON_ERROR_STOP=1 -d \"$DST\" >/dev/null"},
          {"", env});
      auto m = from_process(p, static_cast<double>(rows), "pg_dump | psql");
      verify(expected, expected_shape, dst, tables, "pg_dump | psql");
      dbs.drop(tag + "_pgdump");
      return m;
    });
    if (copydb)
      bodies.emplace_back(copydb, [&, tag, tables, rows] {
        const auto dst = dbs.create(tag + "_pgcopydb");
        const auto work = (dir / "pgcopydb").string();
        fs::remove_all(work);
        child_options own_group;
        own_group.own_group = true;  // it signals its whole group when it fails
        own_group.env = password_env(src);  // not on its command line
        const auto p = run_child({"pgcopydb", "clone", "--source", without_password(src),
                                  "--target", without_password(dst), "--dir", work,
                                  "--no-owner", "--no-acl"},
                                 own_group);
        auto m = from_process(p, static_cast<double>(rows), "pgcopydb");
        verify(expected, expected_shape, dst, tables, "pgcopydb");
        dbs.drop(tag + "_pgcopydb");
        return m;
      });
    bodies.emplace_back(&fl, [&, tag, tables, rows] {
      const auto dst = dbs.create(tag + "_flotilla");
      fs::remove_all(dir / ".flotilla");
      auto m = measure_flotilla(run_flotilla(ctx.opt.flotilla_bin, config, "run"), false,
                                {{"copied", tables}});
      if (static_cast<std::uint64_t>(m.work) != rows)
        throw std::runtime_error(fmt::format("flotilla copied {} rows, expected {}", m.work, rows));
      verify(expected, expected_shape, dst, tables, "flotilla");
      dbs.drop(tag + "_flotilla");
      return m;
    });
    interleave(ctx.opt.warmup, ctx.opt.runs, bodies);
    dbs.drop(tag + "_src");

    // Speed of Flotilla over each peer, per run pair (> 1: Flotilla is faster).
    auto faster = [&](const series& peer) {
      std::vector<double> v;
      const auto a = fl.rates(), b = peer.rates();
      for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        v.push_back(a[i] / b[i]);
      return spread_of(v);
    };
    const auto vs_dump = faster(dump);
    nlohmann::json f{{"rows", rows}, {"flotilla_vs_pg_dump", vs_dump.median}};
    // Judged "faster" above 1: digits enough that a figure below or above never reads 1.00.
    fl.ratio_target = 1.0;
    std::string line = fmt::format("{} ({}): flotilla is {} the speed of pg_dump | psql", group,
                                   counted(rows, "row"), ratio_text(vs_dump, 1.0));
    std::optional<spread> vs_copydb;
    if (copydb) {
      vs_copydb = faster(*copydb);
      f["flotilla_vs_pgcopydb"] = vs_copydb->median;
      line += fmt::format(", {} the speed of pgcopydb", ratio_text(*vs_copydb, 1.0));
    }
    r.notes.push_back(line + "; every result checked: the tables, their column types, row counts and "
                                   "checksums of every table");
    r.figures[group] = f;
    if (tables == ctx.opt.peer_tables.back()) {
      r.targets.push_back({fmt::format("peer {}: faster than pg_dump | psql", group),
                           ratio_text(vs_dump, 1.0), vs_dump.median > 1.0,
                           spread_caveat(vs_dump, 1.0)});
      r.targets.push_back({fmt::format("peer {}: faster than pgcopydb", group),
                           vs_copydb ? ratio_text(*vs_copydb, 1.0) : "pgcopydb not installed",
                           vs_copydb ? std::optional<bool>(vs_copydb->median > 1.0) : std::nullopt,
                           vs_copydb ? spread_caveat(*vs_copydb, 1.0) : std::string()});
    }
  }
  r.notes.push_back("all three create each table's primary key after its rows; pg_dump and "
                    "pgcopydb would also copy other indexes, constraints and sequences (these "
                    "tables have none); CPU s/M counts the client processes only, not the servers");
  return r;
}

}  // namespace flotilla::bench
