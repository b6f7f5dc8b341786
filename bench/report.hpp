#pragma once
/// Results of a bench run and their three outputs: a table on the terminal, a JSON
/// file, and a gnuplot plot of the scaling curves.
///
/// Every path is measured several times, interleaved with its raw baseline (raw run 1,
/// Flotilla run 1, raw run 2, ...), so run i of a path and run i of its baseline saw
/// the same machine load; a ratio is computed per run pair and reported as median, min
/// and max.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/measure.hpp"

namespace flotilla::bench {

/// One path measured several times.
struct series {
  std::string group;     ///< the case within the scenario: "sqlite -> duckdb", "1000 tables"
  std::string variant;   ///< "flotilla", "raw DuckDB appender", "pgcopydb"
  std::string role;      ///< "flotilla", "raw" or "peer"
  std::string unit;      ///< what `work` counts: "rows", "tables", "events"
  /// Variant this one is divided by for its ratio (looked up in the same group first,
  /// then in any group); empty: none.
  std::string baseline;
  double x = 0;          ///< parameter for the plot (tables); 0: not plotted
  /// The line a target holds its ratio to (0.8 for ">= 0.8x"); its figure is printed
  /// with the digits that keep it from reading as on the line (figure_near). Default: none
  std::optional<double> ratio_target;
  std::vector<measurement> runs;

  [[nodiscard]] std::vector<double> rates() const;  ///< work / wall_s per run
};

/// A target of the issue, judged on the figures.
struct target_check {
  std::string what;              ///< "copy-wide sqlite -> duckdb >= 0.8x the raw target path"
  std::string figure;            ///< "0.86x (0.83-0.88)"
  std::optional<bool> met;       ///< nullopt: not measured (the figure says why)
  /// Where the runs fall on both sides of the line, which side the verdict (the median's)
  /// does not tell (spread_caveat); empty otherwise.
  std::string caveat = {};
};

/// "some runs are under the line" for a met verdict whose slowest run misses it, "some
/// runs meet it" for a missed one whose fastest run meets it; empty when every run falls
/// on the median's side. `s` spreads a ratio whose line is `line` (higher is better).
[[nodiscard]] std::string spread_caveat(const spread& s, double line);

struct scenario_result {
  std::string name;
  std::string status = "ok";     ///< ok, skipped, not measurable, failed
  std::string message;           ///< why skipped / failed / not measurable
  std::string sizes;             ///< "1,000,000 rows; 3 runs after 1 warm-up"
  std::deque<series> all;  ///< a deque: add() hands out references that stay valid
  std::vector<target_check> targets;
  std::vector<std::string> notes;  ///< derived figures, one line each
  nlohmann::json figures = nlohmann::json::object();  ///< derived figures, for the JSON

  /// Adds a series; the reference stays valid (deque).
  series& add(std::string group, std::string variant, std::string role, std::string unit,
              std::string baseline = {}, double x = 0);
  /// The variant in `group`, else in any group; nullptr when absent.
  [[nodiscard]] const series* find(const std::string& group, const std::string& variant) const;
  /// Per-run ratios of `s` against its baseline (rate / baseline rate).
  [[nodiscard]] std::vector<double> ratios(const series& s) const;
};

struct run_info {
  std::string started;           ///< ISO-8601 UTC
  std::string host;
  unsigned cores = 0;
  std::string load_before;       ///< /proc/loadavg at the start
  nlohmann::json options;
};

/// "1,000,000"
[[nodiscard]] std::string grouped(std::uint64_t v);
/// "1 table", "1,000 tables": the count grouped, the noun singular for one.
[[nodiscard]] std::string counted(std::uint64_t n, std::string_view noun);
/// "412k", "1.82M": compact figures for the terminal.
[[nodiscard]] std::string si(double v);
/// "0.86x [0.83-0.88]"
[[nodiscard]] std::string ratio_text(const spread& s);
/// `value` with `digits` decimals, or more where those would round it onto `limit` without
/// it being there: 0.7979 against 0.8 is "0.798", as "0.80" would read as meeting ">= 0.8"
/// (and 20.04 against 20 is "20.04", not "20.0", which would read as meeting "<= 20").
[[nodiscard]] std::string figure_near(double value, double limit, int digits);
/// ratio_text with the median's digits chosen against `limit` (figure_near), the min and
/// max given as many: "0.798x [0.781-0.805]".
[[nodiscard]] std::string ratio_text(const spread& s, std::optional<double> limit);
/// `text` as a gnuplot single-quoted string: '...' with each ' written twice.
[[nodiscard]] std::string gnuplot_quoted(std::string_view text);

void print_scenario(const scenario_result& r);
void print_targets(const std::vector<scenario_result>& all);
[[nodiscard]] nlohmann::json to_json(const run_info& info, const std::vector<scenario_result>& all);
/// Writes the data files and gnuplot script into `data_dir` (scratch: the SVG holds the
/// curves) and runs gnuplot, which writes `svg_path`. Returns an error message, or empty
/// on success.
[[nodiscard]] std::string write_plot(const std::vector<scenario_result>& all,
                                     const std::string& svg_path, const std::string& data_dir);

}  // namespace flotilla::bench
