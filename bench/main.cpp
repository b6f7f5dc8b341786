// flotilla-bench: the benchmark harness. Runs the selected scenarios, prints a table per
// scenario and the targets, and writes <out>/bench.json and <out>/scaling.svg.
//
//   flotilla-bench                        every scenario at full size
//   flotilla-bench copy-wide peer --runs 5
//   flotilla-bench --smoke --require-pg   tiny sizes: checks the harness (CTest label bench)
//   flotilla-bench --list
//   flotilla-bench step <name> k=v...     one timed path (internal: run in a child process)
#include <algorithm>
#include <charconv>
#include <cmath>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "bench/measure.hpp"
#include "bench/pg.hpp"
#include "bench/report.hpp"
#include "bench/scenario.hpp"
#include "bench/steps.hpp"

namespace fs = std::filesystem;
using namespace flotilla::bench;

namespace {

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

nlohmann::json options_json(const bench_options& o) {
  return {{"runs", o.runs},
          {"warmup", o.warmup},
          {"rows", o.rows},
          {"fleet_rows", o.fleet_rows},
          {"fleet_tables", o.fleet_tables},
          {"fleet_grid", o.fleet_grid},
          {"fleet_target", o.fleet_target},
          {"fleet_block_size", o.fleet_block_size},
          {"fleet_mode", o.fleet_mode},
          {"skew", o.skew},
          {"prune_grid", o.prune_grid},
          {"prune_rows", o.prune_rows},
          {"drift_tables", o.drift_tables},
          {"events", o.events},
          {"peer_tables", o.peer_tables},
          {"peer_rows", o.peer_rows},
          {"smoke", o.smoke},
          {"flotilla", o.flotilla_bin}};
}

/// The targets each scenario reports (issue's list), by name: listed as not measured
/// when their scenario was skipped or failed, so that none goes missing unsaid.
std::vector<std::string> documented_targets(std::string_view scenario) {
  if (scenario == "copy-wide")
    return {"copy-wide sqlite -> duckdb >= 0.8x raw target path",
            "copy-wide postgres -> duckdb >= 0.8x raw target path",
            "copy-wide sqlite -> postgres >= 0.8x raw target path"};
  if (scenario == "fleet-scale")
    return {"fleet-scale keeps >= 0.8x of 1-table throughput",
            "fleet-scale <= 20 KB of memory per table"};
  if (scenario == "prune")
    return {"prune <= 10 us per unchanged table"};
  if (scenario == "drift-check")
    return {"drift-check <= 100 us per table (catalog read + drift evaluation)"};
  if (scenario == "kafka-events")
    return {"kafka-events >= 0.9x raw librdkafka"};
  if (scenario == "peer")
    return {"peer: faster than pg_dump | psql", "peer: faster than pgcopydb"};
  return {fmt::format("{}'s targets", scenario)};
}

/// The file that marks <out>/work as the harness's own scratch directory.
constexpr const char* scratch_marker = ".flotilla-bench-scratch";

/// Writes bench.json whole (to a temporary file renamed over it); the error, or "".
std::string write_results(const fs::path& path, const nlohmann::json& j) {
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    return fmt::format("cannot write {}: it exists and is not a file; remove it, or pass "
                       "another --out", path.string());
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    f << j.dump(2) << "\n";
    f.close();
    if (!f) {
      const std::string why = std::strerror(errno);
      fs::remove(tmp, ec);  // no half-written file left beside the results
      return fmt::format("cannot write {}: {}", tmp.string(), why);
    }
  }
  if (fs::rename(tmp, path, ec), ec) {
    fs::remove(tmp, ec);
    return fmt::format("cannot write {}: {}", path.string(), ec.message());
  }
  return {};
}

/// The bench's own databases are named <this>_<pid>_<what>.
constexpr const char* bench_database_prefix = "flotilla_bench";

/// `text` as a whole number, all of it; nullopt otherwise (or past 64 bits).
std::optional<std::uint64_t> whole_number(const std::string& text) {
  std::uint64_t n = 0;
  const auto* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc{} || p != end)
    return std::nullopt;
  return n;
}

/// A size: a whole number of at least 1 (each of a list's values) and at most `most`
/// (beyond it a run would not fit this kind of machine's memory or a day: refused up
/// front, naming the flag, rather than failing inside a scenario).
CLI::Validator size_up_to(std::uint64_t most) {
  return CLI::Validator(
      [most](std::string& text) -> std::string {
        const auto n = whole_number(text);
        // Digits alone, too many for any count: past the ceiling, not malformed.
        if (!n && !text.empty() &&
            std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
          return fmt::format("must be at most {}, got '{}'", most, text);
        if (!n || *n == 0)
          return "must be a whole number of at least 1, got '" + text + "'";
        if (*n > most)
          return fmt::format("must be at most {}, got '{}'", most, text);
        text = std::to_string(*n);  // "0100" is 100: the conversion after would read octal
        return {};
      },
      fmt::format("1..{}", most));
}

/// The first value a list gives twice: each value of --fleet-tables or --peer-tables is
/// one measured point, and a second one would measure a rerun of the first.
std::optional<std::uint64_t> repeated(const std::vector<std::uint64_t>& values) {
  std::set<std::uint64_t> seen;
  for (const auto v : values)
    if (!seen.insert(v).second)
      return v;
  return std::nullopt;
}

/// A count of repetitions: a whole number from `low` to 1,000 (more would run for days,
/// and warm-up plus runs must not wrap around).
CLI::Validator repetitions(std::uint64_t low) {
  return CLI::Validator(
      [low](std::string& text) -> std::string {
        const auto n = whole_number(text);
        if (!n || *n < low || *n > 1000)
          return fmt::format("must be a whole number from {} to 1000, got '{}'", low, text);
        text = std::to_string(*n);  // "010" is 10, not octal 8
        return {};
      },
      fmt::format("{}..1000", low));
}

/// A number of at least 0.
const CLI::Validator not_negative(
    [](std::string& text) -> std::string {
      double v = -1;
      const auto* end = text.data() + text.size();
      const auto [p, ec] = std::from_chars(text.data(), end, v);
      if (ec != std::errc{} || p != end || !(v >= 0) || !std::isfinite(v))
        return "must be a finite number of at least 0, got '" + text + "'";
      return {};
    },
    "X>=0");

/// The most tables a fleet of the harness may have (--fleet-tables, --peer-tables, grids).
constexpr std::size_t max_tables = 100000;

/// CLIENTSxTABLES, at most max_tables in all; `empty_ok`: '' turns the grid off.
CLI::Validator grid(bool empty_ok) {
  return CLI::Validator(
      [empty_ok](std::string& text) -> std::string {
        if (text.empty() && empty_ok)
          return {};
        try {
          const auto [clients, tables] = parse_grid(text);
          // --fleet-grid: one client is the --fleet-tables point of that many tables.
          if (empty_ok && clients == 1)
            return fmt::format("{} is one client: that is --fleet-tables {}'s point; a grid "
                               "has 2 clients or more",
                               text, tables);
          // Checked as a product so that no huge factor overflows it.
          if (tables > max_tables || clients > max_tables / tables)
            return fmt::format("{} is more than {} tables in all", text, max_tables);
        } catch (const std::exception& e) {
          return e.what();
        }
        return {};
      },
      "CLIENTSxTABLES");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "step")
    try {
      return run_step(argv[2], parse_step_args(std::vector<std::string>(argv + 3, argv + argc)));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }

  bench_options o;
  std::vector<std::string> selected;
  bool list = false;
  CLI::App app{"flotilla-bench: Flotilla's throughput against each engine's raw path, measured "
               "in the same run on the same data"};
  std::string names;
  for (const auto& s : all_scenarios())
    names += (names.empty() ? "" : ", ") + std::string(s.name);
  app.add_option("scenarios", selected,
                 "scenarios to run (default: all): " + names + "; --list says what each measures");
  app.add_flag("--list", list, "list the scenarios and exit");
  app.add_flag("--smoke", o.smoke, "tiny sizes, one run, no warm-up: checks the harness, not speed");
  app.add_option("--runs", o.runs, "measured runs of each path")
      ->transform(repetitions(1))->capture_default_str();
  app.add_option("--warmup", o.warmup, "unmeasured runs first")
      ->transform(repetitions(0))->capture_default_str();
  app.add_option("--rows", o.rows, "copy-wide: rows of the wide table")
      ->transform(size_up_to(100000000))->capture_default_str();
  app.add_option("--fleet-rows", o.fleet_rows, "fleet-scale: total rows per point")
      ->transform(size_up_to(100000000))->capture_default_str();
  app.add_option("--fleet-tables", o.fleet_tables, "fleet-scale: table counts (one client)")
      ->delimiter(',')->allow_extra_args(false)->transform(size_up_to(max_tables))->capture_default_str();
  app.add_option("--fleet-grid", o.fleet_grid, "fleet-scale: also CLIENTSxTABLES ('' for none)")
      ->check(grid(true))->capture_default_str();
  app.add_option("--fleet-target", o.fleet_target, "fleet-scale: the warehouse, duckdb, postgres or sqlite")
      ->check(CLI::IsMember({"duckdb", "postgres", "sqlite"}))->capture_default_str();
  app.add_option("--fleet-block-size", o.fleet_block_size,
                 "fleet-scale, DuckDB target: block size of the new files, both paths "
                 "(0: Flotilla's)")
      ->check(CLI::IsMember({0, 16384, 32768, 65536, 131072, 262144}))->capture_default_str();
  app.add_option("--fleet-mode", o.fleet_mode,
                 "fleet-scale: rerun (into the tables the run before left) or fresh (every "
                 "run into an empty target, state emptied too)")
      ->check(CLI::IsMember({"rerun", "fresh"}))->capture_default_str();
  app.add_option("--skew", o.skew, "Zipf exponent of client and table sizes (0: even)")
      ->check(not_negative)->capture_default_str();
  app.add_option("--prune-grid", o.prune_grid, "prune: CLIENTSxTABLES")
      ->check(grid(false))->capture_default_str();
  app.add_option("--prune-rows", o.prune_rows, "prune: total rows of the fleet")
      ->transform(size_up_to(100000000))->capture_default_str();
  app.add_option("--drift-tables", o.drift_tables, "drift-check: PostgreSQL tables")
      ->transform(size_up_to(max_tables))->capture_default_str();
  app.add_option("--events", o.events, "kafka-events: events per run")
      ->transform(size_up_to(10000000))->capture_default_str();
  app.add_option("--peer-tables", o.peer_tables, "peer: table counts")
      ->delimiter(',')->allow_extra_args(false)->transform(size_up_to(max_tables))->capture_default_str();
  app.add_option("--peer-rows", o.peer_rows, "peer: mean rows per table")
      ->transform(size_up_to(10000000))->capture_default_str();
  app.add_option("--out", o.out_dir, "directory for bench.json, scaling.svg and scratch data")
      ->capture_default_str();
  app.add_option("--flotilla", o.flotilla_bin, "the flotilla executable (default: beside this one)");
  app.add_flag("--require-pg", o.require_pg, "fail when FLOTILLA_PG_DSN is not set (CI)");
  app.add_flag("--keep", o.keep, "keep the scratch data (<out>/work)");
  // A list with an empty item ("3,,2", "1,2,") is refused rather than read as a shorter
  // list: the empty item is most likely a value the user meant to type.
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    for (const std::string_view flag : {"--fleet-tables", "--peer-tables"}) {
      std::optional<std::string_view> value;
      if (a == flag && i + 1 < argc)
        value = argv[i + 1];
      else if (a.starts_with(flag) && a.size() > flag.size() && a[flag.size()] == '=')
        value = a.substr(flag.size() + 1);
      if (value && (value->empty() || value->front() == ',' || value->back() == ',' ||
                    value->find(",,") != std::string_view::npos)) {
        fmt::print(stderr, "{}: a list of whole numbers separated by commas, with no empty "
                           "item, got '{}'\n", flag, *value);
        return 2;
      }
    }
  }
  // "--fleet-grid=" is an empty value, as "--fleet-grid ''" is: CLI11 would take the next
  // argument for it instead (a flag, a scenario's name). Split, each flag reads its ''.
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.starts_with("--") && a.size() > 3 && a.find('=') == a.size() - 1) {
      args.emplace_back(a.substr(0, a.size() - 1));
      args.emplace_back();
    } else {
      args.emplace_back(a);
    }
  }
  try {
    app.name(argv[0]);  // as parse(argc, argv) names it, for --help
    std::reverse(args.begin(), args.end());  // CLI11 takes the list last argument first
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a usage error exits 2, like the harness's own checks.
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (list) {
    for (const auto& s : all_scenarios())
      fmt::print("{:<14} {}\n", s.name, s.summary);
    return 0;
  }
  // Every timed path is a child started by a process forked now, while this one is small
  // (measure.hpp says why).
  try {
    start_launcher();
  } catch (const std::exception& e) {
    fmt::print(stderr, "flotilla-bench: {}\n", e.what());
    return 1;
  }
  if (o.smoke) {
    // Sizes the user gave explicitly still win over the smoke sizes.
    bench_options given = o;
    o.apply_smoke();
    for (const auto* opt : app.get_options())
      if (opt->count() > 0 && opt->get_name() != "--smoke") {
        const auto n = opt->get_name();
        if (n == "--runs") o.runs = given.runs;
        if (n == "--warmup") o.warmup = given.warmup;
        if (n == "--rows") o.rows = given.rows;
        if (n == "--fleet-rows") o.fleet_rows = given.fleet_rows;
        if (n == "--fleet-tables") o.fleet_tables = given.fleet_tables;
        if (n == "--fleet-grid") o.fleet_grid = given.fleet_grid;
        if (n == "--prune-grid") o.prune_grid = given.prune_grid;
        if (n == "--prune-rows") o.prune_rows = given.prune_rows;
        if (n == "--drift-tables") o.drift_tables = given.drift_tables;
        if (n == "--events") o.events = given.events;
        if (n == "--peer-tables") o.peer_tables = given.peer_tables;
        if (n == "--peer-rows") o.peer_rows = given.peer_rows;
      }
  }
  for (const auto& [flag, values] : {std::pair{"--fleet-tables", &o.fleet_tables},
                                     std::pair{"--peer-tables", &o.peer_tables}})
    if (const auto twice = repeated(*values)) {
      fmt::print(stderr, "{}: {} is given twice; each value is one point of the scenario\n",
                 flag, *twice);
      return 2;
    }
  if (o.fleet_block_size != 0 && o.fleet_target != "duckdb") {
    fmt::print(stderr, "--fleet-block-size applies to --fleet-target duckdb, not {}\n",
               o.fleet_target);
    return 2;
  }
  std::vector<const scenario*> to_run;
  for (const auto& name : selected) {
    const scenario* found = nullptr;
    for (const auto& s : all_scenarios())
      if (s.name == name)
        found = &s;
    if (!found) {
      fmt::print(stderr, "unknown scenario '{}'; known: ", name);
      for (const auto& s : all_scenarios())
        fmt::print(stderr, "{} ", s.name);
      fmt::print(stderr, "\n");
      // `--fleet-tables 1 100`: the list's second value taken for a scenario's name.
      if (!name.empty() && whole_number(name))
        fmt::print(stderr, "a list flag takes its values joined by commas, with no space: "
                           "--fleet-tables 1,100,1000, --peer-tables 100,1000\n");
      return 2;
    }
    if (std::find(to_run.begin(), to_run.end(), found) != to_run.end()) {
      fmt::print(stderr, "scenario '{}' is named twice\n", name);
      return 2;
    }
    to_run.push_back(found);
  }
  if (to_run.empty())
    for (const auto& s : all_scenarios())
      to_run.push_back(&s);
  const auto selects = [&](std::string_view name) {
    return std::any_of(to_run.begin(), to_run.end(),
                       [&](const scenario* s) { return s->name == name; });
  };
  // Refused now, not when kafka-events starts after the scenarios before it ran.
  if (selects("kafka-events"))
    try {
      (void)kafka_batch_from_env();
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "{}\n", e.what());
      return 2;
    }
  // fleet-scale's figures are against its 1-table point: it is always measured.
  if (selects("fleet-scale") &&
      std::find(o.fleet_tables.begin(), o.fleet_tables.end(), 1) == o.fleet_tables.end()) {
    o.fleet_tables.insert(o.fleet_tables.begin(), 1);
    fmt::print(stderr, "fleet-scale: the 1-table point is added: throughput kept and the "
                       "cost per table are measured against it\n");
  }
  // The points in ascending order, whatever order they were given in: the table and the
  // plot's curves read left to right.
  std::sort(o.fleet_tables.begin(), o.fleet_tables.end());
  std::sort(o.peer_tables.begin(), o.peer_tables.end());
  // Every generated table holds at least one row.
  if (selects("fleet-scale")) {
    const std::uint64_t listed = o.fleet_tables.back();
    std::uint64_t most = listed;
    std::string where = fmt::format("--fleet-tables {}", listed);
    if (!o.fleet_grid.empty()) {
      const auto [clients, tables] = parse_grid(o.fleet_grid);
      if (clients * tables > most) {
        most = clients * tables;
        where = fmt::format("--fleet-grid {}{}", o.fleet_grid,
                            app.get_option("--fleet-grid")->count() > 0 ? "" : " (its default)");
      }
    }
    if (o.fleet_rows < most) {
      fmt::print(stderr, "--fleet-rows {} is fewer than the {} tables of the largest fleet-scale "
                         "point, {}: every table holds at least one row; raise --fleet-rows or "
                         "lower --fleet-tables / --fleet-grid ('' for no grid)\n",
                 o.fleet_rows, most, where);
      return 2;
    }
  }
  if (selects("prune")) {
    const auto [clients, tables] = parse_grid(o.prune_grid);
    if (o.prune_rows < clients * tables) {
      fmt::print(stderr, "--prune-rows {} is fewer than the {} tables of --prune-grid {}: every "
                         "table holds at least one row; raise --prune-rows or shrink the grid\n",
                 o.prune_rows, clients * tables, o.prune_grid);
      return 2;
    }
  }

  bench_context ctx;
  ctx.opt = o;
  if (ctx.opt.flotilla_bin.empty())
    ctx.opt.flotilla_bin = (fs::path(self_path()).parent_path() / "flotilla").string();
  // The file checked is the file run: a bare name is this directory's file, as checked,
  // not one a PATH search would find; recorded in bench.json.
  {
    std::error_code ec;
    const auto absolute = fs::absolute(ctx.opt.flotilla_bin, ec);
    if (!ec)
      ctx.opt.flotilla_bin = absolute.lexically_normal().string();
  }
  // kafka-events measures the Kafka sink in this process; every other scenario runs flotilla.
  const bool needs_flotilla = std::any_of(to_run.begin(), to_run.end(), [](const auto* s) {
    return s->name != std::string_view("kafka-events");
  });
  std::error_code flotilla_ec;
  if (needs_flotilla && (!fs::exists(ctx.opt.flotilla_bin) ||
                         ::access(ctx.opt.flotilla_bin.c_str(), X_OK) != 0 ||
                         fs::is_directory(ctx.opt.flotilla_bin, flotilla_ec))) {
    fmt::print(stderr, "no flotilla executable at {} ({}); build it or pass --flotilla\n",
               ctx.opt.flotilla_bin,
               fs::is_directory(ctx.opt.flotilla_bin, flotilla_ec) ? "a directory"
                                                                   : "missing, or not executable");
    return 2;
  }
  // Before any database is touched: a run refused for its arguments drops nothing.
  if (o.out_dir.empty()) {
    fmt::print(stderr, "--out: must name a directory, got ''\n");
    return 2;
  }
  std::error_code absolute_error;
  const fs::path out = fs::absolute(o.out_dir, absolute_error);
  if (absolute_error) {
    fmt::print(stderr, "--out: cannot use '{}': {}; pass --out DIR with a directory you can "
                       "write\n", o.out_dir, absolute_error.message());
    return 2;
  }
  ctx.scratch = (out / "work").string();
  // A bench.json that is a directory (or anything but a file or a link) would lose the
  // whole run's results at its end: said now.
  {
    std::error_code ec;
    const auto results = out / "bench.json";
    if (fs::exists(fs::symlink_status(results, ec)) && !fs::is_symlink(results, ec) &&
        !fs::is_regular_file(results, ec)) {
      fmt::print(stderr, "--out: {} exists and is not a file, so the results could not be "
                         "written there: remove it or pass another --out\n",
                 results.string());
      return 2;
    }
  }
  // <out>/work is the harness's scratch directory, removed after the run (without --keep):
  // one it did not make (no marker file in it) is not used, so no file of the user's goes.
  const fs::path marker = fs::path(ctx.scratch) / scratch_marker;
  // The topmost directory this run creates (--out and its parents, or <out>/work): a run
  // refused before any scenario leaves none of them behind.
  fs::path made_root;
  {
    std::error_code ec;
    for (fs::path p = ctx.scratch; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
      made_root = p;
      if (p == p.parent_path())
        break;
    }
  }
  {
    std::error_code ec;
    if (fs::is_symlink(out, ec) || fs::is_symlink(ctx.scratch, ec)) {
      fmt::print(stderr, "--out: {} is a symbolic link: the harness writes and removes its "
                         "files only in a directory of its own; pass the directory itself\n",
                 fs::is_symlink(out, ec) ? out.string() : ctx.scratch);
      return 2;
    }
    // The nearest of --out and its parents that exists must be a directory: creating
    // <out>/work under a file would only say "Not a directory" about a path not given.
    for (fs::path p = out; !p.empty(); p = p.parent_path()) {
      if (fs::exists(p, ec)) {
        if (!fs::is_directory(p, ec)) {
          fmt::print(stderr, "--out: {} is a file, not a directory{}: pass --out DIR with a "
                             "directory (one that does not exist yet is created)\n",
                     p.string(), p == out ? "" : fmt::format(" (in the path of {})", out.string()));
          return 2;
        }
        break;
      }
      if (p == p.parent_path())
        break;
    }
    if (fs::exists(ctx.scratch, ec) && !fs::exists(marker, ec) &&
        !(fs::is_directory(ctx.scratch, ec) && fs::is_empty(ctx.scratch, ec))) {
      fmt::print(stderr, "--out: {} exists and was not made by flotilla-bench (it has no {} "
                         "file); the harness keeps its scratch data there and removes it after "
                         "the run, so it does not use that directory: pass another --out, or "
                         "move {} away\n",
                 ctx.scratch, scratch_marker, ctx.scratch);
      return 2;
    }
    if (fs::create_directories(ctx.scratch, ec), ec) {
      fmt::print(stderr, "cannot create the output directory {}: {}; pass --out DIR with a "
                         "directory you can write\n", ctx.scratch, ec.message());
      return 2;
    }
    std::ofstream(marker, std::ios::app) << "";
  }
  // One run at a time in an --out: a second would remove the first's scratch data when it
  // ends, and each would replace the other's bench.json. The lock is held until exit.
  {
    const int fd = ::open(marker.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      fmt::print(stderr, "--out: another flotilla-bench run is using {} (or its marker file "
                         "cannot be locked): pass another --out, or wait for it to end\n",
                 out.string());
      return 2;
    }
    const std::string text =
        "flotilla-bench scratch data: removed after each run (--keep keeps it)\n";
    if (::ftruncate(fd, 0) != 0 || ::write(fd, text.data(), text.size()) < 0) {
      // nop: the marker's text is for people; its presence is what counts
    }
  }
  // Refused before any scenario ran: what this run created goes again.
  struct scratch_guard {
    fs::path dir;
    bool remove;
    ~scratch_guard() {
      if (remove && !dir.empty()) {
        std::error_code ignored;
        fs::remove_all(dir, ignored);
      }
    }
  } guard{made_root, true};
  // Only scenarios that use PostgreSQL need it: an unreachable FLOTILLA_PG_DSN does not
  // stop kafka-events or prune.
  const bool uses_pg = selects("copy-wide") || selects("drift-check") || selects("peer") ||
                       (selects("fleet-scale") && o.fleet_target == "postgres");
  if (uses_pg)
    ctx.pg_dsn = pg_dsn_from_env();
  if (uses_pg && !ctx.pg_dsn && o.require_pg) {
    fmt::print(stderr, "FLOTILLA_PG_DSN is not set, and --require-pg makes that an error for "
                       "{}: run through scripts/test, or run `scripts/services start && . "
                       "build/services.env` first\n",
               selects("fleet-scale") && o.fleet_target == "postgres" && !selects("copy-wide") &&
                       !selects("drift-check") && !selects("peer")
                   ? "fleet-scale --fleet-target postgres"
                   : "the scenarios that use PostgreSQL");
    return 2;
  }
  if (ctx.pg_dsn) {
    try {
      require_local(*ctx.pg_dsn);
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}\n", e.what());
      return 2;
    }
  }
  // The peer scenario's tools, before any scenario runs: found missing only when peer
  // starts, a full run would stop after an hour of the others.
  if (ctx.pg_dsn && selects("peer"))
    if (const auto missing = missing_peer_tools(o.require_pg); !missing.empty()) {
      fmt::print(stderr, "peer needs {}, which {} not on PATH: scripts/setup installs {}; or "
                         "leave peer out (name the other scenarios)\n",
                 missing, missing.find(',') == std::string::npos ? "is" : "are",
                 missing.find(',') == std::string::npos ? "it" : "them");
      return 2;
    }
  if (ctx.pg_dsn) {
    std::vector<std::string> need;  // the selected scenarios that use PostgreSQL
    for (const auto* sc : to_run)
      if (sc->name == std::string_view("copy-wide") || sc->name == std::string_view("drift-check") ||
          sc->name == std::string_view("peer") ||
          (sc->name == std::string_view("fleet-scale") && o.fleet_target == "postgres"))
        need.emplace_back(sc->name);
    // Without FLOTILLA_PG_DSN copy-wide runs its other paths and the rest are skipped;
    // --require-pg refuses that, so it is only offered without it.
    const std::string without =
        o.require_pg ? std::string()
                     : ", or unset FLOTILLA_PG_DSN to run without its paths (copy-wide keeps its "
                       "SQLite -> DuckDB path, the other scenarios that use it are skipped)";
    std::optional<std::string> role;
    try {
      // Every scenario that uses PostgreSQL creates databases: a role that may not fails
      // each of them, so it is refused now, by name.
      role = role_without_createdb(*ctx.pg_dsn);
      // A run interrupted or killed before it dropped its databases leaves them behind;
      // a fleet-scale one holds a million rows. They go now, each named.
      if (!role)
        for (const auto& name : drop_abandoned_databases(*ctx.pg_dsn, bench_database_prefix))
          fmt::print(stderr, "dropped database {}, left by a bench run that no longer runs\n",
                     name);
    } catch (const std::exception& e) {
      fmt::print(stderr, "PostgreSQL at FLOTILLA_PG_DSN: {}\nnothing was run: {} use{} "
                         "PostgreSQL. Check the server and the database FLOTILLA_PG_DSN names "
                         "(scripts/services start starts the test server){}, or name only the "
                         "scenarios that do not use it\n",
                 e.what(), fmt::join(need, ", "), need.size() == 1 ? "s" : "", without);
      return 2;
    }
    if (role) {
      fmt::print(stderr, "PostgreSQL at FLOTILLA_PG_DSN: role '{}' cannot create databases, and "
                         "the harness makes databases of its own ({}_<pid>_*) for {}\nnothing "
                         "was run: give the role CREATEDB (ALTER ROLE \"{}\" CREATEDB) or set "
                         "FLOTILLA_PG_DSN to a superuser{}, or name only the scenarios that do "
                         "not use PostgreSQL\n",
                 *role, bench_database_prefix, fmt::join(need, ", "), *role, without);
      return 2;
    }
  }
  guard.remove = false;  // from here the run's end removes it (or --keep keeps it)
  ctx.db_prefix = fmt::format("{}_{}", bench_database_prefix, ::getpid());

  run_info info;
  info.started = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  info.host = host;
  info.cores = static_cast<unsigned>(::sysconf(_SC_NPROCESSORS_ONLN));
  info.load_before = read_first_line("/proc/loadavg");
  info.options = options_json(ctx.opt);
  fmt::print("flotilla-bench  {}  {} cores, load {}\n", info.started, info.cores, info.load_before);

  // Ctrl-C: the path running finishes (or dies with the terminal's signal), its scenario
  // fails as interrupted and drops its databases, the rest is not run, and the scratch
  // data goes as after any run (exit status 130).
  catch_interrupts();
  std::vector<scenario_result> results;
  int exit_code = 0;
  std::string json_error;  // why bench.json could not be written
  for (const auto* s : to_run) {
    if (interrupted())
      break;
    const auto t0 = std::chrono::steady_clock::now();
    fmt::print("\n-- {} ...\n", s->name);
    std::fflush(stdout);
    scenario_result r;
    try {
      r = s->run(ctx);
    } catch (const std::exception& e) {
      r = scenario_result{};
      r.name = std::string(s->name);
      r.status = "failed";
      r.message = e.what();
      // Ctrl-C on a terminal reaches the step running too, which dies of it (or, as
      // pgcopydb, fails with its own message): the harness's interrupt is the cause.
      if (interrupted() && !r.message.starts_with("interrupted"))
        r.message = fmt::format("interrupted ({}); the path running then stopped: {}",
                                interrupt_name(), e.what());
      // Its targets are listed all the same, as not measured, so none goes missing; the
      // failure's first line names it (the whole of it is printed once, above).
      std::string first_line = e.what();
      if (const auto nl = first_line.find('\n'); nl != std::string::npos)
        first_line = first_line.substr(0, nl) + " ...";
      for (auto& what : documented_targets(s->name))
        r.targets.push_back(
            {std::move(what),
             interrupted() ? fmt::format("not measured: interrupted ({})", interrupt_name())
                           : fmt::format("not measured: the scenario failed ({})", first_line),
             std::nullopt});
      exit_code = 1;
    }
    if (r.status == "skipped" && r.targets.empty())  // listed, so none goes missing unsaid
      for (auto& what : documented_targets(s->name))
        r.targets.push_back({std::move(what),
                             fmt::format("not measured: the scenario was skipped ({})", r.message),
                             std::nullopt});
    r.figures["scenario_seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_scenario(r);
    results.push_back(std::move(r));
    // Keep what is done so far, should a later scenario be interrupted.
    json_error = write_results(out / "bench.json", to_json(info, results));
  }
  // The scenarios an interrupt left out: listed, with their targets, so none goes
  // missing unsaid.
  if (interrupted()) {
    for (const auto* s : to_run) {
      if (std::any_of(results.begin(), results.end(),
                      [&](const scenario_result& r) { return r.name == s->name; }))
        continue;
      scenario_result r;
      r.name = std::string(s->name);
      r.status = "not_run";
      r.message = fmt::format("interrupted ({}) before it started", interrupt_name());
      for (auto& what : documented_targets(s->name))
        r.targets.push_back({std::move(what),
                             fmt::format("not measured: interrupted ({}) before the scenario "
                                         "started",
                                         interrupt_name()),
                             std::nullopt});
      results.push_back(std::move(r));
    }
    json_error = write_results(out / "bench.json", to_json(info, results));
  }
  print_targets(results);
  const auto svg = (out / "scaling.svg").string();
  const auto plot_error = write_plot(results, svg, (fs::path(ctx.scratch) / "plot").string());
  // A plot an earlier run left beside this bench.json would show other figures than it.
  if (!plot_error.empty()) {
    std::error_code ignored;
    if (fs::is_regular_file(fs::symlink_status(svg, ignored)) ||
        fs::is_symlink(fs::symlink_status(svg, ignored)))
      fs::remove(svg, ignored);  // a file (or a link), never a directory of the user's
  }
  if (json_error.empty()) {
    fmt::print("\nresults: {}\n", (out / "bench.json").string());
  } else {
    fmt::print("\nresults: not written: {}\n", json_error);
    fmt::print(stderr, "error: {}\n", json_error);
    exit_code = 1;
  }
  if (plot_error.empty())
    fmt::print("plot:    {}\n", svg);
  else
    fmt::print("plot:    not written: {}\n", plot_error);
  if (!o.keep) {
    std::error_code ec;
    fs::remove_all(ctx.scratch, ec);
    if (ec) {
      fmt::print(stderr, "error: the scratch data {} could not be removed: {}; remove it by hand\n",
                 ctx.scratch, ec.message());
      exit_code = exit_code == 0 ? 1 : exit_code;
    }
  }
  if (interrupted()) {
    fmt::print(stderr,
               "interrupted ({}): the scenarios not run are in bench.json as \"not_run\", "
               "their targets not measured\n",
               interrupt_name());
    return 130;
  }
  return exit_code;
}
