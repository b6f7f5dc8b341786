#pragma once
/// The verbs of the command line. Each verb file registers its subcommand and its run
/// function; exit codes: 0 success, 1 a table failed or differs, 2 usage/configuration.

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}
namespace flotilla::storage {
class state_store;
}

namespace flotilla::cli {

struct global_options {
  std::string config_path = "flotilla.toml";
};

/// Whether stderr is a terminal that takes the live progress line and colours: not when
/// piped, nor under TERM=dumb.
[[nodiscard]] bool live_terminal();

/// `--output json`: a command refused before it ran (exit 2: configuration errors, a
/// locked or unreadable state store, a plan-only target) still prints a JSON document on
/// stdout, `{"run_id": null, "status": "failed", "exit_code": 2, "tables": [], "errors":
/// [...]}`, besides its messages on stderr. The refusals are noted where they are said.
void note_refusal(std::string code, std::string message, std::string file = "",
                  std::uint32_t line = 0, std::uint32_t column = 0, std::string key = "",
                  std::string value = "");
/// Prints the document of the refusals noted, if any; true when it did.
bool print_refusals_json();
/// The JSON document a refusal prints (print_refusals_json) for a verb whose `--output
/// json` has its own shape (`schema accept`): given the errors, the whole document. Unset:
/// the run JSON's shape.
void set_refusal_document(std::function<nlohmann::json(const nlohmann::json& errors)> shape);
/// Configuration warnings (FLT-C0xx that do not stop the command), as load_or_report
/// printed them on stderr: the run and plan JSON carry them as `config_warnings`, each
/// with `code`, `message` and where known `file`, `line`, `column`, `key`. "" when none;
/// else the JSON array's text, laid out as dump(2) lays out a top-level member.
[[nodiscard]] std::string config_warnings_json();
/// What the sources' selections said (a table gone from its source, a source selecting
/// no table), on stderr, once the run or plan is over; `nothing_selected_said`: the
/// warning that no source selects anything was given, which covers the latter.
void print_source_warnings(bool nothing_selected_said);
/// The same as the JSON's `source_warnings` array (`source`, `message`, `table` when one
/// is named), laid out as config_warnings_json; "" when none.
[[nodiscard]] std::string source_warnings_json();
/// The same warnings, one entry each, for the run's `warning` events.
struct source_warning_entry {
  std::string source, table, target_table, message;
};
[[nodiscard]] std::vector<source_warning_entry> source_warning_list();
/// Keeps the sources' table sets this run selected (what the warnings compare against),
/// once the run is over.
void save_table_sets(storage::state_store& store);

struct verb {
  std::function<void(CLI::App&, global_options&)> add;
  std::function<bool()> selected;
  std::function<int()> run;
};

std::vector<verb> all_verbs();
verb plan_verb();
verb run_verb();
verb contract_verb();
verb schema_verb();
verb retry_verb();
verb stream_verb();
verb review_verb();
verb bench_verb();

/// A verb whose work has not landed: listed in --help, says so and exits 2.
verb pending_verb(std::string name, std::string help);

}  // namespace flotilla::cli
