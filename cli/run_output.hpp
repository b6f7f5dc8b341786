#pragma once
/// What `flotilla run` (and `retry`) reports: the run JSON (`--output json` and
/// `.flotilla/runs/<run_id>/run.json`) and the text summary.
///
/// The run JSON is written directly, without a JSON tree: a fleet of 10,000 unchanged
/// tables makes 10,000 rows, and building, dumping and freeing a tree of them cost more
/// than the rest of the run's bookkeeping. The text is byte for byte what nlohmann's
/// `dump(2)` gives for the same document (keys in sorted order, two-space indent).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/fleet.hpp"

namespace flotilla::cli {

/// The run's totals, from the fleet's reports.
struct run_summary {
  std::string status;        ///< success | partial | failed
  std::size_t failed = 0;    ///< failed or skipped tables, and sources that could not be read
  std::size_t ok = 0;        ///< tables copied, pruned or held
  std::uint64_t tables_checked = 0;  ///< drift: tables whose target schema was compared
  std::uint64_t tables_drifted = 0;
  std::uint64_t source_checked = 0;  ///< source drift gate: tables it checked
  std::uint64_t source_drifted = 0;
};

[[nodiscard]] run_summary summarize(const std::vector<actors::pipeline_report>& reports);

/// The run JSON's `events` section: where the events went and what failed.
struct run_events_section {
  bool opened = true;  ///< false: the event log could not be opened; only `errors` is shown
  std::string log;
  std::uint64_t emitted = 0;
  std::uint64_t delivered = 0;
  std::uint64_t pending = 0;
  bool sinks = true;  ///< an event sink is configured ([events.kafka], [events.pubsub])
  std::vector<std::string> errors;
};

/// The run JSON's `tables` array, as it appears after `"tables": ` in the run JSON: the
/// bulk of the document, and independent of the events, so it can be written while they
/// are published.
[[nodiscard]] std::string run_tables_json(const std::vector<actors::pipeline_report>& reports);

/// The run JSON, as `dump(2)` would print it (no trailing newline); `tables` is
/// run_tables_json(reports).
[[nodiscard]] std::string run_json_text(const std::string& run_id,
                                        const std::vector<actors::pipeline_report>& reports,
                                        const run_summary& summary,
                                        const std::optional<std::string>& retry_of,
                                        const run_events_section& events,
                                        const std::string& tables);

/// The text summary on stdout: actions taken, failures, then one line of totals.
/// `text` for a terminal: control characters (ESC, newline, tab, ...) as \xNN, so a name
/// a source holds can neither rewrite the terminal nor break a line of the output. Other
/// bytes (UTF-8 included) stay as they are.
[[nodiscard]] std::string printable(std::string_view text);
/// A message (an engine's error, a reason) for one line of text output: its line breaks
/// become "; " (PostgreSQL's "...\nCONTEXT: ..."), other control characters escaped.
[[nodiscard]] std::string printable_message(std::string_view text);

void print_run_text(const std::string& run_id, const std::vector<actors::pipeline_report>& reports,
                    const run_summary& summary, const run_events_section& events);

}  // namespace flotilla::cli
