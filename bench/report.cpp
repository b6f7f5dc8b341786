#include "bench/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

namespace flotilla::bench {

std::vector<double> series::rates() const {
  std::vector<double> out;
  for (const auto& m : runs)
    out.push_back(m.wall_s > 0 ? m.work / m.wall_s : 0);
  return out;
}

series& scenario_result::add(std::string group, std::string variant, std::string role,
                             std::string unit, std::string baseline, double x) {
  series s;
  s.group = std::move(group);
  s.variant = std::move(variant);
  s.role = std::move(role);
  s.unit = std::move(unit);
  s.baseline = std::move(baseline);
  s.x = x;
  all.push_back(std::move(s));
  return all.back();
}

const series* scenario_result::find(const std::string& group, const std::string& variant) const {
  for (const auto& s : all)
    if (s.group == group && s.variant == variant)
      return &s;
  for (const auto& s : all)
    if (s.variant == variant)
      return &s;
  return nullptr;
}

std::vector<double> scenario_result::ratios(const series& s) const {
  std::vector<double> out;
  if (s.baseline.empty())
    return out;
  const series* b = find(s.group, s.baseline);
  if (b == nullptr)
    return out;
  const auto mine = s.rates();
  const auto base = b->rates();
  for (std::size_t i = 0; i < std::min(mine.size(), base.size()); ++i)
    if (base[i] > 0)
      out.push_back(mine[i] / base[i]);
  return out;
}

std::string grouped(std::uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string counted(std::uint64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", grouped(n), noun, n == 1 ? "" : "s");
}

std::string si(double v) {
  const double a = std::fabs(v);
  if (a >= 1e9)
    return fmt::format("{:.2f}G", v / 1e9);
  if (a >= 1e6)
    return fmt::format("{:.2f}M", v / 1e6);
  if (a >= 1e4)
    return fmt::format("{:.0f}k", v / 1e3);
  if (a >= 1e3)
    return fmt::format("{:.1f}k", v / 1e3);
  if (a >= 10)
    return fmt::format("{:.0f}", v);
  return fmt::format("{:.2f}", v);
}

std::string ratio_text(const spread& s) { return ratio_text(s, std::nullopt); }

namespace {

/// The decimals figure_near gives `value`: `digits`, or more while the figure would read
/// as `limit` (a double's 17 significant digits tell any two values apart).
int digits_near(double value, double limit, int digits) {
  if (value == limit || !std::isfinite(value))
    return digits;
  for (int d = digits; d < 17; ++d)
    if (std::strtod(fmt::format("{:.{}f}", value, d).c_str(), nullptr) != limit)
      return d;
  return 17;
}

}  // namespace

std::string figure_near(double value, double limit, int digits) {
  return fmt::format("{:.{}f}", value, digits_near(value, limit, digits));
}

std::string ratio_text(const spread& s, std::optional<double> limit) {
  if (s.n == 0)
    return "-";
  const int d = limit ? digits_near(s.median, *limit, 2) : 2;
  if (s.n == 1)
    return fmt::format("{:.{}f}x", s.median, d);
  return fmt::format("{:.{}f}x [{:.{}f}-{:.{}f}]", s.median, d, s.min, d, s.max, d);
}

std::string gnuplot_quoted(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'')
      out += '\'';
    out += c;
  }
  return out + "'";
}

namespace {

std::string rate_text(const series& s) {
  const auto r = spread_of(s.rates());
  if (r.n == 0)
    return "-";
  if (r.n == 1)
    return fmt::format("{} {}/s", si(r.median), s.unit);
  return fmt::format("{} {}/s [{}-{}]", si(r.median), s.unit, si(r.min), si(r.max));
}

spread cpu_per_million(const series& s) {
  std::vector<double> v;
  for (const auto& m : s.runs)
    if (m.work > 0)
      v.push_back(m.cpu_s / m.work * 1e6);
  return spread_of(v);
}

spread peak_mb(const series& s) {
  std::vector<double> v;
  for (const auto& m : s.runs)
    v.push_back(static_cast<double>(m.peak_rss_kb) / 1024.0);
  return spread_of(v);
}

nlohmann::json spread_json(const spread& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
}

}  // namespace

void print_scenario(const scenario_result& r) {
  fmt::print("\n== {}  ({})\n", r.name, r.sizes.empty() ? r.status : r.sizes);
  if (r.status != "ok")
    fmt::print("   {}: {}\n", r.status, r.message);
  if (!r.all.empty()) {
    // CPU is the runs' median; peak memory the highest of the runs (bench.json has both).
    // Each text column as wide as its longest text (at least its usual width), so a long
    // case or baseline name does not push the row's figures out of their columns.
    std::size_t w_case = 22, w_path = 26, w_of = 22;
    for (const auto& s : r.all) {
      w_case = std::max(w_case, s.group.size());
      w_path = std::max(w_path, s.variant.size());
      w_of = std::max(w_of, s.baseline.size());
    }
    fmt::print("   {:<{}} {:<{}} {:>30} {:>20}  {:<{}} {:>8} {:>12}\n", "case", w_case, "path",
               w_path, "rate (median [min-max])", "ratio", "of", w_of, "CPU s/M", "peak MB (max)");
    for (const auto& s : r.all) {
      const auto ratio = spread_of(r.ratios(s));
      fmt::print("   {:<{}} {:<{}} {:>30} {:>20}  {:<{}} {:>8.2f} {:>12.0f}\n", s.group, w_case,
                 s.variant, w_path, rate_text(s), ratio.n ? ratio_text(ratio, s.ratio_target) : "",
                 ratio.n ? s.baseline : "", w_of, cpu_per_million(s).median, peak_mb(s).max);
    }
  }
  for (const auto& n : r.notes)
    fmt::print("   {}\n", n);
  std::fflush(stdout);
}

std::string spread_caveat(const spread& s, double line) {
  if (s.n < 2)
    return {};
  if (s.median >= line && s.min < line)
    return fmt::format("the runs spread across the line: the slowest, {:.2f}x, misses it", s.min);
  if (s.median < line && s.max >= line)
    return fmt::format("the runs spread across the line: the fastest, {:.2f}x, meets it", s.max);
  return {};
}

void print_targets(const std::vector<scenario_result>& all) {
  fmt::print("\n== targets\n");
  for (const auto& r : all)
    for (const auto& t : r.targets)
      // The verdict first, in a column of its own: the texts are too long to align.
      fmt::print("   {:<14} {:<12} {}: {}{}\n",
                 !t.met ? "NOT MEASURED" : *t.met ? "met" : "NOT MET", r.name, t.what,
                 t.figure, t.caveat.empty() ? "" : " (" + t.caveat + ")");
  std::fflush(stdout);
}

nlohmann::json to_json(const run_info& info, const std::vector<scenario_result>& all) {
  nlohmann::json out{{"started", info.started},     {"host", info.host},
                     {"cores", info.cores},         {"load_before", info.load_before},
                     {"options", info.options},     {"scenarios", nlohmann::json::array()}};
  for (const auto& r : all) {
    nlohmann::json sj{{"name", r.name},       {"status", r.status},   {"message", r.message},
                      {"sizes", r.sizes},     {"notes", r.notes},     {"figures", r.figures},
                      {"series", nlohmann::json::array()}, {"targets", nlohmann::json::array()}};
    for (const auto& s : r.all) {
      nlohmann::json runs = nlohmann::json::array();
      for (const auto& m : s.runs)
        runs.push_back({{"wall_s", m.wall_s}, {"cpu_s", m.cpu_s}, {"peak_rss_kb", m.peak_rss_kb},
                        {"work", m.work}, {"detail", m.detail}});
      nlohmann::json js{{"group", s.group},
                        {"variant", s.variant},
                        {"role", s.role},
                        {"unit", s.unit},
                        {"baseline", s.baseline},
                        {"x", s.x},
                        {"rate_per_s", spread_json(spread_of(s.rates()))},
                        {"cpu_s_per_million", spread_json(cpu_per_million(s))},
                        {"peak_rss_mb", spread_json(peak_mb(s))},
                        {"runs", runs}};
      const auto ratios = r.ratios(s);
      if (!ratios.empty())
        js["ratio"] = spread_json(spread_of(ratios));
      sj["series"].push_back(js);
    }
    for (const auto& t : r.targets)
      sj["targets"].push_back({{"what", t.what},
                               {"figure", t.figure},
                               {"met", t.met ? nlohmann::json(*t.met) : nlohmann::json(nullptr)},
                               {"caveat", t.caveat}});
    out["scenarios"].push_back(sj);
  }
  return out;
}

std::string write_plot(const std::vector<scenario_result>& all, const std::string& svg_path,
                       const std::string& data_dir) {
  namespace fs = std::filesystem;
  const fs::path dir = data_dir;
  fs::create_directories(dir);
  // role/variant -> x -> (median, min, max) of the figure plotted
  struct point {
    double x;
    spread rate;
    spread wall;
    spread mb;
  };
  std::map<std::string, std::vector<point>> fleet, peer;
  for (const auto& r : all) {
    if (r.name != "fleet-scale" && r.name != "peer")
      continue;
    for (const auto& s : r.all) {
      if (s.x <= 0)
        continue;
      std::vector<double> walls;
      for (const auto& m : s.runs)
        walls.push_back(m.wall_s);
      (r.name == "fleet-scale" ? fleet : peer)[s.variant].push_back(
          {s.x, spread_of(s.rates()), spread_of(walls), peak_mb(s)});
    }
  }
  if (fleet.empty() && peer.empty())
    return "no scaling series to plot (fleet-scale and peer draw them; neither measured any)";
  // Each curve left to right, whatever order the points were measured in.
  for (auto* m : {&fleet, &peer})
    for (auto& [variant, pts] : *m)
      std::stable_sort(pts.begin(), pts.end(),
                       [](const point& a, const point& b) { return a.x < b.x; });
  {
    std::error_code ec;
    if (fs::exists(svg_path, ec) && !fs::is_regular_file(svg_path, ec))
      return fmt::format("{} exists and is not a file: remove it, or pass another --out",
                         svg_path);
  }
  std::vector<std::string> plots;
  auto data_file = [&](const std::string& stem, const std::vector<point>& pts) {
    const auto path = dir / (stem + ".dat");
    std::ofstream f(path);
    f << "# x rate rate_min rate_max wall wall_min wall_max mb mb_min mb_max\n";
    for (const auto& p : pts)
      f << fmt::format("{} {} {} {} {} {} {} {} {} {}\n", p.x, p.rate.median, p.rate.min,
                       p.rate.max, p.wall.median, p.wall.min, p.wall.max, p.mb.median, p.mb.min,
                       p.mb.max);
    return path.string();
  };
  auto slug = [](std::string s) {
    for (auto& c : s)
      if (!std::isalnum(static_cast<unsigned char>(c)))
        c = '_';
    return s;
  };
  // Every path and name goes into the script as a quoted string (an --out may hold a
  // quote); gnuplot's strings cannot hold a line break, so such a path is not plotted.
  for (const auto& path : {svg_path, dir.string()})
    if (path.find_first_of("\n\r") != std::string::npos)
      return fmt::format("gnuplot cannot take a path with a line break ({}): pass another --out",
                         path);
  std::string gp = fmt::format(
      "set terminal svg size 1280,900 dynamic noenhanced font 'sans,11' background '#ffffff'\n"
      "set output {}\n"
      "set grid\nset key left top\nset logscale x\nset xlabel 'tables'\n"
      "set multiplot layout 2,2 title 'flotilla-bench scaling curves (median, bars: min-max)'\n",
      gnuplot_quoted(svg_path + ".tmp"));
  auto panel = [&](const std::map<std::string, std::vector<point>>& m, const std::string& prefix,
                   const std::string& title, const std::string& ylabel, int col) {
    gp += fmt::format("set title {}\nset ylabel {}\n", gnuplot_quoted(title), gnuplot_quoted(ylabel));
    std::string line = "plot ";
    bool first = true;
    for (const auto& [variant, pts] : m) {
      const auto file = data_file(prefix + "_" + slug(variant), pts);
      if (!first)
        line += ", ";
      first = false;
      line += fmt::format("{} using 1:{}:{}:{} with yerrorlines title {}", gnuplot_quoted(file),
                          col, col + 1, col + 2, gnuplot_quoted(variant));
    }
    gp += line + "\n";
  };
  if (!fleet.empty()) {
    panel(fleet, "fleet", "fleet-scale: throughput (same total rows)", "rows/s", 2);
    panel(fleet, "fleet", "fleet-scale: wall time per run", "seconds", 5);
    panel(fleet, "fleet", "fleet-scale: peak RSS", "MB", 8);
  }
  if (!peer.empty())
    panel(peer, "peer", "peer: PostgreSQL -> PostgreSQL copy", "seconds", 5);
  gp += "unset multiplot\n";
  const auto script = dir / "scaling.gp";
  std::ofstream(script) << gp;
  const auto r = run_child({"gnuplot", script.string()});
  // run_child's own words for a program it could not start (exit 127, nothing printed).
  if (r.exit_code == 127 && r.err == "cannot execute gnuplot" && r.out.empty())
    return "gnuplot is not installed (Debian package gnuplot-nox; scripts/setup installs it)";
  if (r.exit_code != 0)
    return fmt::format("gnuplot failed on {} (scratch: --keep keeps it): {}", script.string(),
                       r.describe_failure());
  // Drawn beside it, then renamed over it: a link named scaling.svg is replaced, never
  // written through.
  std::error_code ec;
  if (fs::rename(svg_path + ".tmp", svg_path, ec), ec) {
    fs::remove(svg_path + ".tmp", ec);
    return fmt::format("cannot write {}: {}", svg_path, ec.message());
  }
  return {};
}

}  // namespace flotilla::bench
