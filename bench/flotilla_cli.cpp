#include "bench/flotilla_cli.hpp"

#include "bench/pg.hpp"

#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace flotilla::bench {
namespace {

/// A TOML basic string whose value Flotilla reads as written: flotilla.toml expands
/// `${NAME}` in every string, so a `${` in a path or DSN is written `$${`; control
/// characters are escaped.
std::string q(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '$' && i + 1 < s.size() && s[i + 1] == '{')
      out += '$';
    // TOML takes no control character but a tab in a basic string: a line break or
    // another in an --out path is escaped.
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      out += fmt::format("\\u{:04X}", u);
      continue;
    }
    out += c;
  }
  return out + "\"";
}

/// The password of the DSNs written into flotilla.toml files, given to each flotilla run
/// in its environment (PGPASSWORD, which libpq reads) rather than written into a file
/// others may read.
std::map<std::string, std::string>& child_password() {
  static std::map<std::string, std::string> env;
  return env;
}

/// `dsn` as flotilla.toml holds it: without its password, which child_password() keeps.
std::string stored_dsn(const std::string& dsn) {
  auto pw = password_env(dsn);
  if (pw.empty())
    return dsn;
  child_password() = std::move(pw);
  return without_password(dsn);
}

}  // namespace

void write_config(const std::string& path, const toml_target& target,
                  const std::vector<toml_source>& sources) {
  std::string t = "# Written by flotilla-bench.\n[project]\nname = \"bench\"\n\n[targets.warehouse]\n";
  t += "dialect = " + q(target.dialect) + "\n";
  if (!target.path.empty())
    t += "path = " + q(target.path) + "\n";
  if (!target.dsn.empty())
    t += "dsn = " + q(stored_dsn(target.dsn)) + "\n";
  t += "schema = " + q(target.schema) + "\n";
  if (target.block_size != 0)
    t += "block_size = " + std::to_string(target.block_size) + "\n";
  for (const auto& s : sources) {
    t += "\n[sources." + s.name + "]\nadapter = " + q(s.adapter) + "\n";
    if (!s.path.empty())
      t += "path = " + q(s.path) + "\n";
    if (!s.dsn.empty())
      t += "dsn = " + q(stored_dsn(s.dsn)) + "\n";
    if (!s.include.empty()) {
      t += "include = [";
      for (std::size_t i = 0; i < s.include.size(); ++i)
        t += (i ? ", " : "") + q(s.include[i]);
      t += "]\n";
    }
    if (!s.tags.empty()) {
      t += "tags = { ";
      bool first = true;
      for (const auto& [k, v] : s.tags) {
        t += (first ? "" : ", ") + k + " = " + q(v);
        first = false;
      }
      t += " }\n";
    }
    t += fmt::format("prune_unchanged = {}\n", s.prune_unchanged);
  }
  std::ofstream f(path);
  f << t;
  if (!f)
    throw std::runtime_error("cannot write " + path);
}

std::string flotilla_outcome::status_text() const {
  std::string out;
  for (const auto& [s, n] : statuses)
    out += (out.empty() ? "" : ", ") + fmt::format("{} {}", n, s);
  return out.empty() ? "no tables" : out;
}

std::string flotilla_outcome::first_error() const {
  if (run.is_object()) {
    if (run.contains("errors") && !run["errors"].empty())
      return run["errors"][0].dump();
    if (run.contains("tables"))
      for (const auto& t : run["tables"])
        if (t.value("status", "") == "failed")
          return t.value("table", "") + ": " +
                 (t["error"].is_string() ? t["error"].get<std::string>() : std::string("?"));
  }
  return process.describe_failure();
}

flotilla_outcome run_flotilla(const std::string& flotilla_bin, const std::string& config,
                              const std::string& verb, const std::vector<std::string>& extra) {
  std::vector<std::string> argv{flotilla_bin, "-c", config, verb, "--output", "json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  flotilla_outcome o;
  o.executable = flotilla_bin;
  o.verb = verb;
  child_options options;
  options.env = child_password();
  o.process = run_child(argv, options);
  const auto start = o.process.out.find('{');
  if (start != std::string::npos) {
    o.run = nlohmann::json::parse(o.process.out.begin() + static_cast<std::ptrdiff_t>(start),
                                  o.process.out.end(), nullptr, false);
    if (o.run.is_discarded())
      o.run = nullptr;
  }
  if (o.run.is_object() && o.run.contains("tables"))
    for (const auto& t : o.run["tables"]) {
      ++o.statuses[t.value("status", "?")];
      o.rows += t.value("rows", std::uint64_t{0});
      ++o.tables;
    }
  return o;
}

measurement measure_flotilla(const flotilla_outcome& o, bool count_tables,
                             const std::map<std::string, std::size_t>& expect) {
  if (o.process.exit_code != 0)
    throw std::runtime_error(fmt::format("flotilla failed ({}): {}", o.status_text(), o.first_error()));
  // Exit 0 and no run JSON on stdout: not a flotilla (another program, a wrapper) or one
  // that prints something else; what came out is quoted, cut short.
  if (!o.run.is_object()) {
    const std::string& out = o.process.out;
    throw std::runtime_error(fmt::format(
        "{} exited 0, but the output of its `{} --output json` was {}: is --flotilla a "
        "flotilla executable?",
        o.executable, o.verb,
        out.find_first_not_of(" \t\r\n") == std::string::npos
            ? std::string("missing")
            : fmt::format("not JSON ('{}{}')", out.substr(0, 200), out.size() > 200 ? "..." : "")));
  }
  if (!expect.empty() && o.statuses != expect) {
    std::string want;
    for (const auto& [s, n] : expect)
      want += (want.empty() ? "" : ", ") + fmt::format("{} {}", n, s);
    throw std::runtime_error(fmt::format("flotilla run: expected {}, got {}", want, o.status_text()));
  }
  measurement m;
  m.wall_s = o.process.wall_s;
  m.cpu_s = o.process.cpu_s;
  m.peak_rss_kb = o.process.peak_rss_kb;
  m.work = count_tables ? static_cast<double>(o.tables) : static_cast<double>(o.rows);
  m.detail = {{"tables", o.tables}, {"rows", o.rows}, {"statuses", o.statuses},
              {"run_id", o.run.value("run_id", "")}};
  return m;
}

}  // namespace flotilla::bench
