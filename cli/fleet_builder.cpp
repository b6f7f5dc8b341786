#include "cli/fleet_builder.hpp"
#include "cli/run_output.hpp"

#include <algorithm>
#include <charconv>
#include <any>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <unistd.h>

#include <fmt/chrono.h>
#include <fmt/core.h>
#include <fmt/format.h>
#include <google/protobuf/arena.h>
#include <nlohmann/json.hpp>

#include "cdc/review_store.hpp"
#include "cli/catalog_cache.hpp"
#include "cli/target_presence.hpp"
#include "config/errc.hpp"
#include "config/toml_edit.hpp"
#include "config/load.hpp"
#include "config/policy.hpp"
#include "config/secret_key.hpp"
#include "dialects/dialect.hpp"
#include "engine/staging.hpp"
#include "events/kafka_sink.hpp"
#include "events/source_drift.hpp"
#include "schema/toml_text.hpp"
#include "sources/errors.hpp"
#include "sources/source.hpp"
#include "sources/marker.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {

namespace {
std::vector<nlohmann::json>& refusals() {
  static std::vector<nlohmann::json> noted;
  return noted;
}
}  // namespace

bool live_terminal() {
  static const bool live = [] {
    const char* term = std::getenv("TERM");
    return ::isatty(STDERR_FILENO) == 1 && (term == nullptr || std::string_view(term) != "dumb");
  }();
  return live;
}

void note_refusal(std::string code, std::string message, std::string file, std::uint32_t line,
                  std::uint32_t column, std::string key, std::string value) {
  nlohmann::json e{{"code", code.empty() ? nlohmann::json() : nlohmann::json(code)},
                   {"message", std::move(message)}};
  if (!file.empty())
    e["file"] = std::move(file);
  if (line != 0) {
    e["line"] = line;
    e["column"] = column;
  }
  if (!key.empty())
    e["key"] = std::move(key);
  if (!value.empty())
    e["value"] = std::move(value);
  refusals().push_back(std::move(e));
}

namespace {
/// How an incremental table reads every row again into its existing target table when
/// its watermark belongs to other rows: merged on its key, or, keyless, replacing them.
constexpr std::string_view k_read_all_again =
    "as a first run into the existing target table does: merged on the table's key, so rows "
    "the target table holds that the source does not have stay (`flotilla run "
    "--full-refresh` replaces them), or, for a table without a key, replacing its rows";

/// What a source's selection says, beside its tables (a table gone from the source, a
/// source that selects nothing): told once after the run or plan, on stderr and in the
/// JSON's `source_warnings`. The sources are selected on several threads.
struct source_warning {
  std::string source, table, message;
  bool selects_nothing = false;  ///< said by warn_if_nothing_selected too when no source selects any
  std::string target_table{};    ///< the target table it names, as shown; empty when none
};
std::mutex& source_warnings_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<source_warning>& source_warnings() {
  static std::vector<source_warning> all;
  return all;
}
void add_source_warning(source_warning w) {
  std::lock_guard lock(source_warnings_mu());
  source_warnings().push_back(std::move(w));
}
/// The sources' table sets that changed in this run, to keep once it is over.
std::vector<std::pair<std::string, storage::pb::SourceCatalog>>& table_sets() {
  static std::vector<std::pair<std::string, storage::pb::SourceCatalog>> all;
  return all;
}

nlohmann::json& config_warnings() {
  static nlohmann::json warnings = nlohmann::json::array();
  return warnings;
}
}  // namespace

namespace {

/// `array` as dump(2) lays out a member of the top-level object: one level in.
std::string member_json(const nlohmann::json& array) {
  const std::string text = array.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (const char c : text) {
    out += c;
    if (c == '\n')
      out += "  ";
  }
  return out;
}

}  // namespace

std::string config_warnings_json() {
  if (config_warnings().empty())
    return {};
  return member_json(config_warnings());
}

void print_source_warnings(bool nothing_selected_said) {
  std::lock_guard lock(source_warnings_mu());
  for (const auto& w : source_warnings())
    if (!(w.selects_nothing && nothing_selected_said))
      fmt::print(stderr, "warning: {}\n", w.message);
}

std::optional<std::set<std::string>> kept_table_names(const storage::state_store& store,
                                                      const std::string& source,
                                                      const std::string& target) {
  storage::pb::SourceCatalog kept;
  const auto found = store.get_into(source + "#tables#" + target, kept);
  if (!found || !*found)
    return std::nullopt;
  std::set<std::string> names;
  for (const auto& t : kept.tables())
    names.insert(t.schema().empty() ? t.name() : t.schema() + "." + t.name());
  return names;
}

void save_table_sets(storage::state_store& store) {
  std::lock_guard lock(source_warnings_mu());
  for (const auto& [key, record] : table_sets())
    (void)store.put(key, record);  // a failed write costs only a warning said again
  table_sets().clear();
}

std::vector<source_warning_entry> source_warning_list() {
  std::lock_guard lock(source_warnings_mu());
  std::vector<source_warning_entry> out;
  out.reserve(source_warnings().size());
  for (const auto& w : source_warnings())
    out.push_back({w.source, w.table, w.target_table, w.message});
  return out;
}

std::string source_warnings_json() {
  std::lock_guard lock(source_warnings_mu());
  if (source_warnings().empty())
    return {};
  nlohmann::json all = nlohmann::json::array();
  for (const auto& w : source_warnings()) {
    nlohmann::json e{{"source", w.source}, {"message", w.message}};
    if (!w.table.empty())
      e["table"] = w.table;
    all.push_back(std::move(e));
  }
  return member_json(all);
}

namespace {
std::function<nlohmann::json(const nlohmann::json&)>& refusal_document() {
  static std::function<nlohmann::json(const nlohmann::json&)> shape;
  return shape;
}
}  // namespace

void set_refusal_document(std::function<nlohmann::json(const nlohmann::json& errors)> shape) {
  refusal_document() = std::move(shape);
}

bool print_refusals_json() {
  if (refusals().empty())
    return false;
  const nlohmann::json errors = refusals();
  nlohmann::json doc = refusal_document()
                           ? refusal_document()(errors)
                           : nlohmann::json{{"run_id", nullptr},
                                            {"status", "failed"},
                                            {"exit_code", 2},
                                            {"tables", nlohmann::json::array()},
                                            {"errors", errors}};
  fmt::print("{}\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  std::fflush(stdout);
  return true;
}

bool warn_if_nothing_selected(const config::project& p, const std::vector<std::string>& filter_args,
                              const std::vector<actors::pipeline_report>& reports,
                              std::string_view nothing) {
  for (const auto& r : reports)
    if (!r.tables.empty() || r.error)
      return false;
  // The filter matches only sources whose target is an event stream, which `run`, `plan`
  // and `contract` leave out: said as such, not as a selection of no table.
  std::vector<std::string> streamed_only;
  if (!filter_args.empty())
    if (auto parsed = config::parse_filters(filter_args)) {
      bool other = false;
      for (const auto& src : p.sources)
        if (config::source_may_match(src, *parsed))
          (p.target_of(src) == nullptr ? streamed_only.push_back(src.name) : void(other = true));
      if (other)
        streamed_only.clear();
    }
  if (!streamed_only.empty())
    fmt::print(stderr, "warning: the selection (--filter {}) matches only source(s) {} whose "
               "target is an event stream: `flotilla run`, `plan` and `contract` leave such a "
               "source out (`flotilla stream` publishes its changes); nothing {}\n",
               fmt::join(filter_args, " --filter "), fmt::join(streamed_only, ", "), nothing);
  else if (!filter_args.empty())
    fmt::print(stderr, "warning: the selection (--filter {}) matched no table of any source; "
               "nothing {} (a filter selects among the tables each source's include and "
               "exclude select: a table an exclude pattern leaves out is not selected by "
               "naming it)\n",
               fmt::join(filter_args, " --filter "), nothing);
  else
    fmt::print(stderr, "warning: {}; nothing {}\n",
               p.sources.empty() ? "the configuration has no [sources]"
                                 : "the configuration selects no table of any source (each "
                                   "source has none, or its include and exclude patterns "
                                   "match none of them; a csv or json source's tables are its "
                                   "directory's files ending in .csv or .json (.ndjson, "
                                   ".jsonl), in any case, others left aside)",
               nothing);
  return true;
}

std::shared_ptr<const config::project> load_or_report(const global_options& g,
                                                      const std::vector<std::string>& filter_args,
                                                      std::vector<config::filter>& filters) {
  auto loaded = config::load_project(g.config_path);
  std::vector<config::diagnostic> diags = loaded.diagnostics;
  auto parsed = config::parse_filters(filter_args);
  if (parsed) {
    filters = *parsed;
    // Against the file's sources and tags: a file that did not load (missing, not TOML)
    // has none to check them against, and would blame the filter.
    const bool file_read = std::none_of(
        loaded.diagnostics.begin(), loaded.diagnostics.end(), [](const config::diagnostic& d) {
          return d.code == config::errc::file_not_found || d.code == config::errc::syntax_error;
        });
    if (loaded.model && file_read) {
      auto more = config::check_filters(*loaded.model, filters);
      diags.insert(diags.end(), more.begin(), more.end());
    }
  } else {
    diags.insert(diags.end(), parsed.error().begin(), parsed.error().end());
  }
  // A librdkafka setting it refuses as given (an unknown property, a value out of its
  // range): said now, with the rest, not after a run has copied every table.
  if (loaded.model) {
    const auto check_kafka = [&](const config::kafka_options& k, const std::string& path) {
      for (const auto& [key, reason] : events::kafka_sink::rejected_settings(k.settings))
        diags.push_back(config::diagnostic{
            config::errc::invalid_value, config::severity::error, loaded.model->config_path, 0,
            0, config::key_path_append(path, key),
            config::names_secret(key) ? std::string("***") : k.settings.at(key),
            "a librdkafka producer setting",
            reason.ends_with("remove the setting")
                ? reason
                : fmt::format("librdkafka refuses it: {}; correct or remove the setting", reason)});
    };
    if (loaded.model->events.kafka)
      check_kafka(*loaded.model->events.kafka, "events.kafka.settings");
    for (const auto& t : loaded.model->event_targets)
      if (t.kafka)
        check_kafka(*t.kafka, config::key_path({"targets", t.name, "settings"}));
  }
  // An empty or cut-short file would run "successfully", copying nothing, and become the
  // latest run that `retry` and `schema accept` read.
  if (!config::has_errors(diags) && loaded.model && loaded.model->sources.empty())
    diags.push_back(config::diagnostic{
        config::errc::missing_key, config::severity::error, loaded.model->config_path, 0, 0,
        "sources", "", "[sources.NAME] with an adapter",
        "the configuration defines no source, so nothing would be copied: add a "
        "[sources.NAME] section (adapter = \"sqlite\", path = ...), or check that -c names "
        "the right file"});
  for (const auto& d : diags) {
    fmt::print(stderr, "{}\n", config::format(d));
    if (!d.is_error()) {
      nlohmann::json w{{"code", config::code_name(d.code)}, {"message", d.message}};
      if (!d.file.empty())
        w["file"] = d.file;
      if (d.line != 0) {
        w["line"] = d.line;
        w["column"] = d.column;
      }
      if (!d.key.empty())
        w["key"] = d.key;
      config_warnings().push_back(std::move(w));
    }
  }
  if (config::has_errors(diags)) {
    std::size_t n = 0;
    for (const auto& d : diags)
      if (d.is_error()) {
        ++n;
        std::string message = d.message;
        if (!d.allowed.empty() && message.find(d.allowed) == std::string::npos)
          message += fmt::format(" (allowed: {})", d.allowed);
        note_refusal(config::code_name(d.code), std::move(message), d.file, d.line, d.column,
                     d.key, d.value);
      }
    fmt::print(stderr, "{} configuration error(s); nothing was run\n", n);
    return nullptr;
  }
  return loaded.model;
}

std::string display_name(const dialects::table_ref& t) {
  std::string out;
  if (!t.schema.empty())
    out = t.schema + ".";
  return out + t.name;
}

std::string new_run_id() {
  auto now = std::chrono::system_clock::now();
  std::random_device rd;
  // In UTC, as its Z says, whatever the machine's time zone. The suffix is the millisecond
  // within the second (times 64, plus 6 random bits): ids of one second sort in time
  // order, as `ls .flotilla/runs` shows them, in the same four hex digits as before.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      now.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y%m%dT%H%M%SZ}-{:04x}",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)),
                     static_cast<unsigned>(ms) * 64 + (rd() & 63));
}

namespace {

/// The project a state directory belongs to, kept in the file `project` beside the store:
/// its [project] name and its config file. Two flotilla.toml files in one directory
/// (prod.toml and stage.toml, two names) would otherwise share `.flotilla`, and mix their
/// watermarks, runs and retries. The same config file under a new name is the project
/// renamed: the file follows it. A store opened by a project that has no name, or made
/// before the file, takes the first named project that writes to it. An error message,
/// or "".
std::string claim_state_dir(const config::project& p, bool write = true) {
  if (p.name.empty())
    return {};
  const std::filesystem::path file = std::filesystem::path(p.state_dir) / "project";
  std::error_code ec;
  const auto canonical = std::filesystem::weakly_canonical(p.config_path, ec);
  const std::string config = ec ? p.config_path : canonical.string();
  // The config file as seen from the state directory: the same after the project's
  // directory is moved whole.
  std::error_code rec;
  const std::string relative =
      std::filesystem::relative(canonical, std::filesystem::weakly_canonical(p.state_dir, rec), rec)
          .string();
  const std::string kind = p.name_given ? "named" : "unnamed";
  // name, config file, named|unnamed (a record before it: named), config file relative,
  // then the names the project went by before, one a line
  std::string owner, owner_config, owner_kind, owner_relative;
  std::vector<std::string> earlier;
  if (std::ifstream in(file); in) {
    std::getline(in, owner);
    std::getline(in, owner_config);
    std::getline(in, owner_kind);
    std::getline(in, owner_relative);
    for (std::string line; std::getline(in, line);)
      if (!line.empty())
        earlier.push_back(line);
  }
  const bool same_file =
      owner_config == config || (!owner_relative.empty() && owner_relative == relative);
  const auto record = [&] {
    if (!write)  // unwritable: the store says so
      return;
    // The same project under a new name: its old names stay its own (commit tokens in
    // the targets carry them).
    if (!owner.empty() && owner != p.name && owner_kind != "unnamed" && p.name_given &&
        std::find(earlier.begin(), earlier.end(), owner) == earlier.end())
      earlier.push_back(owner);
    std::erase(earlier, p.name);
    std::ofstream out(file, std::ios::trunc);
    out << p.name << "\n" << config << "\n" << kind << "\n" << relative << "\n";
    for (const auto& name : earlier)
      out << name << "\n";
  };
  // Of one name: one project, unless a name is only the directory's (no [project] name),
  // which two config files in one directory share without being one project.
  // A named project whose config file is another one that still exists: two files of one
  // name (prod.toml copied to stage.toml), not one project whose file was renamed.
  const bool other_file_exists =
      !same_file && !owner_config.empty() && std::filesystem::exists(owner_config, ec);
  if (owner == p.name &&
      (same_file || (p.name_given && owner_kind != "unnamed" && !other_file_exists))) {
    if (owner_kind.empty() || owner_relative != relative || (same_file && owner_config != config))
      record();  // an older record, or the project moved: kept up to date
    return {};
  }
  if (owner.empty() || owner_config.empty() || same_file) {
    record();
    return {};
  }
  // Of the directory's name, and its config file is gone: this one is it, renamed or
  // moved (`mv flotilla.toml prod.toml`).
  if (owner == p.name && !std::filesystem::exists(owner_config, ec)) {
    record();
    return {};
  }
  if (owner == p.name && p.name_given && owner_kind != "unnamed")
    return fmt::format(
        "the state directory '{}' belongs to project '{}' of {}, and {} names itself '{}' "
        "too: two config files sharing one state directory would mix their watermarks, runs "
        "and retries. Give this one a [project] name and a state directory of its own "
        "([project] state_dir = \".flotilla-{}\"); if it is that project, whose config file "
        "moved here, remove {} (or that file, {})",
        p.state_dir, owner, owner_config, config, p.name,
        std::filesystem::path(config).stem().string(), file.string(), owner_config);
  if (owner == p.name)
    return fmt::format(
        "the state directory '{}' belongs to the project of {}, not to {}: neither names "
        "itself ([project] name), so both go by the directory's name '{}', and sharing the "
        "state directory would mix their watermarks, runs and retries. Give each config "
        "file a [project] name and this one a state directory of its own ([project] "
        "state_dir = \".flotilla-{}\"); if it is that project, its config file moved here, "
        "remove {}",
        p.state_dir, owner_config, config, p.name,
        std::filesystem::path(config).stem().string(), file.string());
  return fmt::format(
      "the state directory '{}' belongs to project '{}' ({}), not to '{}' ({}): two projects "
      "sharing one would mix their watermarks, runs and retries. Give this project a state "
      "directory of its own ([project] state_dir = \".flotilla-{}\" in its flotilla.toml); "
      "if it is that project, moved to this file and renamed, remove {}",
      p.state_dir, owner, owner_config, p.name, config,
      [&] {  // a directory name, and a TOML string, whatever the project's name holds
        std::string safe = p.name;
        for (auto& c : safe)
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
            c = '_';
        return safe;
      }(),
      file.string());
}

}  // namespace

std::vector<std::string> earlier_project_names(const config::project& p) {
  std::vector<std::string> out;
  std::ifstream in(std::filesystem::path(p.state_dir) / "project");
  std::string owner, skip;
  if (!in || !std::getline(in, owner) || owner != p.name)
    return out;
  for (int i = 0; i < 3 && std::getline(in, skip); ++i) {
  }
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      out.push_back(line);
  return out;
}

std::string state_dir_refusal(const config::project& p) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(p.state_dir) / "project", ec))
    return {};
  return claim_state_dir(p, false);
}

bool state_may_exist(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir, ec) || ec;
}

std::unique_ptr<storage::state_store> open_state(const config::project& p, bool create) {
  std::filesystem::path dir = std::filesystem::path(p.state_dir) / "state";
  if (!create && !state_may_exist(dir))
    return nullptr;
  if (state_may_exist(dir) || create) {
    std::error_code ec;
    std::filesystem::create_directories(p.state_dir, ec);
    if (ec && !std::filesystem::is_directory(p.state_dir)) {
      const std::string refused = fmt::format(
          "cannot create the state directory '{}': {}; set state_dir in [project] to a "
          "directory this user may create and write",
          p.state_dir, ec.message());
      fmt::print(stderr, "error FLT-R007: {}\n", refused);
      note_refusal("FLT-R007", refused, p.state_dir);
      return nullptr;
    }
    if (const std::string refused = claim_state_dir(p); !refused.empty()) {
      fmt::print(stderr, "error FLT-R007: {}\n", refused);
      note_refusal("FLT-R007", refused, p.state_dir);
      return nullptr;
    }
  }
  storage::store_options opts;
  // Each table's commit is one WAL write; a process crash never loses a returned
  // write. fsync per table would cost more than the copy of a small table.
  opts.sync_writes = false;
  auto s = storage::state_store::open(dir, opts);
  if (!s) {
    fmt::print(stderr, "error FLT-R007: {}\n", s.error().message);
    note_refusal("FLT-R007", s.error().message, dir.string());
    return nullptr;
  }
  return std::make_unique<storage::state_store>(std::move(*s));
}

std::unique_ptr<storage::state_store> open_state_to_read(const config::project& p,
                                                         std::string* refused) {
  std::filesystem::path dir = std::filesystem::path(p.state_dir) / "state";
  if (!state_may_exist(dir)) {
    // None yet, and none can be made there (a file where a directory of the path should
    // be): said, since `run` refuses it (FLT-R007) where the plan would look fine.
    std::error_code ec;
    for (auto at = std::filesystem::path(p.state_dir); !at.empty(); at = at.parent_path()) {
      if (std::filesystem::exists(at, ec)) {
        if (!std::filesystem::is_directory(at, ec))
          fmt::print(stderr,
                     "warning: the state directory '{}' cannot be made: {} is a file, not a "
                     "directory; `flotilla run` refuses it (FLT-R007). Set state_dir in "
                     "[project] to a directory this user may create\n",
                     p.state_dir, at.string());
        break;
      }
      if (at == at.parent_path())
        break;
    }
    return nullptr;
  }
  if (const std::string refused = claim_state_dir(p, false); !refused.empty()) {
    fmt::print(stderr, "warning: {}; its state is not read\n", refused);
    return nullptr;
  }
  // Read-only, so it never holds the store's lock: a run started meanwhile (a schedule's)
  // is not refused for a plan, which reads what runs have committed so far.
  storage::store_options opts;
  opts.create_if_missing = false;
  opts.sync_writes = false;
  opts.read_only = true;
  opts.verify_checksums = true;  // what `run` refuses, the plan says
  auto s = storage::state_store::open(dir, opts);
  // No CURRENT file, and the store's other files there: damaged, not absent (`run`
  // refuses it).
  const auto has_store_files = [&] {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const auto ext = it->path().extension().string();
      const auto name = it->path().filename().string();
      if (ext == ".sst" || ext == ".log" || name.starts_with("MANIFEST-"))
        return true;
    }
    return false;
  };
  if (!s && s.error().code == storage::errc::not_found && has_store_files()) {
    const std::string message = fmt::format(
        "the state store {} has its files but no CURRENT file: the state files are damaged; "
        "restore the directory from a backup, or move it away (the next run then starts "
        "with no state, and goes on from the watermarks the targets committed)",
        dir.string());
    fmt::print(stderr, "warning FLT-R007: {}; `flotilla run` refuses it, and this plan reads "
                       "no state (it plans every table as a first copy)\n",
               message);
    if (refused != nullptr)
      *refused = message;
    note_refusal("FLT-R007", message, dir.string());
    return nullptr;
  }
  if (!s) {
    // Damaged or unreadable (not merely absent): `run` refuses it, which the plan says.
    if (s.error().code != storage::errc::not_found) {
      fmt::print(stderr, "warning FLT-R007: {}; `flotilla run` refuses it, and this plan reads "
                         "no state (it plans every table as a first copy)\n",
                 s.error().message);
      if (refused != nullptr)
        *refused = s.error().message;
    }
    else
      fmt::print(stderr, "{}\n", s.error().message);
    note_refusal("FLT-R007", s.error().message, dir.string());
    return nullptr;
  }
  return std::make_unique<storage::state_store>(std::move(*s));
}

namespace {

std::string table_key(const std::string& source, const std::string& table) {
  return source + "." + table;
}

/// A watermark's cursor_family once its cursor column was found gone from the source.
constexpr std::string_view k_cursor_dropped = "(dropped)";

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Removes a staged file, and its run's directory once that is empty.
void remove_staged_file(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::filesystem::remove(path.parent_path(), ec);  // only succeeds when empty
}

/// A file name for a dataset's staged data: readable, and safe whatever the names hold.
std::string staged_file_name(const std::string& key) {
  std::string out;
  for (unsigned char c : key)
    out += std::isalnum(c) || c == '.' || c == '_' || c == '-' ? static_cast<char>(c) : '_';
  if (out.size() > 100)
    out.resize(100);
  return fmt::format("{}-{:016x}.rows", out, std::hash<std::string>{}(key));
}

/// Seed 004's console warning. On a terminal it is the drifted table's child node in
/// yellow, on a line of its own under the live progress line; piped, the plain line.
void print_drift_warning(const std::string& dataset, const std::string& warning) {
  // A name's control characters escaped, as the run's other text shows names.
  if (live_terminal())
    fmt::print(stderr, "\r\x1b[K{}\n\u2514\u2500\u2500 \x1b[33m{}\x1b[0m\n", printable(dataset),
               printable(warning));
  else
    fmt::print(stderr, "{}\n", printable(warning));
}

/// The source-drift gate of one table (seed 004): reads the baseline, evaluates the
/// staged data against it, prints the warning, and hands the verdict back through the
/// table's outcome for the state commit, the run record and the events.
engine::drift_gate make_drift_gate(storage::state_store* store, config::drift_policy policy,
                                   std::string source, std::string table, std::string run_id,
                                   std::string hints, bool planning,
                                   std::shared_ptr<const events::observed_columns> staged_observed = {}) {
  return [=](const schema::table_schema& staged, bool reused, const std::string& refusal,
             const engine::valueless_probe& valueless) {
    engine::drift_gate_result r;
    // Seed 004: a retry that reuses staged data does not run the gate again under warn
    // (the run that staged it already reported); under fail it re-checks the staged
    // data's recorded schema, so drifted data never loads unaccepted.
    if (reused && policy != config::drift_policy::fail)
      return r;
    events::drift_input in;
    in.policy = policy;
    in.source = source;
    in.table = table;
    in.run_id = run_id;
    in.hints_hash = hints;
    in.refusal = refusal;
    in.planning = planning;
    in.now_us = now_us();
    events::observed_columns recorded;
    if (reused) {
      // What the staging run observed, recorded with its data: the staged columns, and
      // the new ones on_schema_change = ignore left out of them.
      if (staged_observed && !staged_observed->empty())
        recorded = *staged_observed;
      else
        recorded = events::to_observed(staged);
      in.recorded = &recorded;
    } else {
      in.observed = &staged;
    }
    auto baseline = store->get<storage::pb::SchemaBaseline>(events::dataset_name(source, table));
    if (!baseline)
      throw std::runtime_error(baseline.error().message);
    if (*baseline)
      in.baseline = &**baseline;
    // A file's column with no value (every row empty or null) is inferred as text or json
    // from nothing: where its baseline has another type, that type stands; where it has
    // none (a first run, a column new since), the column has no type yet (docs/events.md).
    if (in.observed != nullptr && valueless) {
      std::vector<std::string> asked;
      for (const auto& c : in.observed->columns) {
        if (c.type.kind != schema::type_kind::text && c.type.kind != schema::type_kind::json)
          continue;
        bool same = false;  // the baseline has it as inferred now: nothing to tell apart
        if (in.baseline != nullptr)
          for (const auto& b : in.baseline->columns())
            if (b.name() == c.name && b.type() == schema::to_string(c.type))
              same = true;
        if (!same)
          asked.push_back(c.name);
      }
      if (!asked.empty()) {
        try {
          const auto empty = valueless(asked);
          for (std::size_t k = 0; k < asked.size() && k < empty.size(); ++k)
            if (empty[k])
              in.valueless.push_back(asked[k]);
        } catch (const std::exception&) {
          // Not known: the columns are compared as inferred.
        }
      }
    }
    auto verdict = std::make_shared<events::drift_verdict>(events::evaluate_source_drift(in));
    if (!planning && verdict->decision == events::drift_decision::warn)
      print_drift_warning(verdict->dataset, verdict->warning);
    if (verdict->decision == events::drift_decision::fail) {
      r.proceed = false;
      r.error_code = verdict->error_code;
      r.error = verdict->error;
    }
    r.detail = std::shared_ptr<const events::drift_verdict>(verdict);
    return r;
  };
}

/// Retry without the source: the tables of `src` the retry covers (`only`), each with its
/// staged data's columns, when every one of them has staged data for `target` to load,
/// staged by one of `staged_runs` (any run when empty).
std::optional<sources::catalog> staged_catalog(const storage::state_store& store,
                                               const config::source_config& src,
                                               const config::target_config& target,
                                               const std::set<std::string>& only,
                                               const std::set<std::string>& staged_runs) {
  const std::string prefix = src.name + ".";
  auto entries = store.list<storage::pb::StagedEntry>(prefix);
  if (!entries)
    return std::nullopt;
  std::set<std::string> wanted;  // keys named one by one; "<source>.*" takes every entry
  for (const auto& key : only)
    if (key.starts_with(prefix) && key != prefix + "*")
      wanted.insert(key);
  const bool every = only.empty() || only.contains(prefix + "*");
  const bool has_schemas = config::has_schemas(src.adapter);
  sources::catalog out;
  try {
    for (const auto& e : *entries) {
      if (!every && !wanted.contains(e.key))
        continue;
      if (e.record.target() != target.name || !std::filesystem::exists(e.record.location()) ||
          (!staged_runs.empty() && !staged_runs.contains(e.record.run_id())))
        return std::nullopt;
      wanted.erase(e.key);
      const std::string name = e.key.substr(prefix.size());
      auto& t = out.tables.emplace_back();
      const auto dot = has_schemas ? name.find('.') : std::string::npos;
      t.schema = dot == std::string::npos ? "" : name.substr(0, dot);
      t.name = dot == std::string::npos ? name : name.substr(dot + 1);
      t.columns = engine::staged_columns(e.record.location());
      t.inferred = src.adapter == config::adapter_kind::csv ||
                   src.adapter == config::adapter_kind::json;
      if (!e.record.marker().empty())
        t.marker = e.record.marker();
    }
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable staged data: the source is needed
  }
  if (!wanted.empty() || out.tables.empty())
    return std::nullopt;
  return out;
}

/// Whether `holds` is true of the policy of some table of `src`: its tables without a
/// section, or any section's.
template <class Holds>
bool any_table_policy(const config::project& p, const config::source_config& src, Holds&& holds) {
  if (holds(config::effective_policy(p, src, nullptr)))
    return true;
  for (const auto& section : src.tables)
    if (holds(config::effective_policy(p, src, &section)))
      return true;
  return false;
}

}  // namespace

/// The database a target writes to, in one spelling: its dialect, and the file (however
/// its path is written, through symlinks too) or the server and database its DSN names.
/// Computed once per target: it touches the file system.
std::string target_database(const config::target_config& target) {
  std::string database = target.dsn;
  if (!target.dsn.empty())
    if (auto named = sources::postgres_database(target.dsn); !named.empty())
      database = std::move(named);
  if (!target.path.empty()) {
    // The file itself: a symlink to it is the file, even before it exists.
    std::filesystem::path file = target.path;
    std::error_code ec;
    for (int hops = 0; hops < 40 && std::filesystem::is_symlink(file, ec); ++hops) {
      auto to = std::filesystem::read_symlink(file, ec);
      if (ec)
        break;
      file = to.is_absolute() ? to : file.parent_path() / to;
    }
    const auto canonical = std::filesystem::weakly_canonical(file, ec);
    database = ec ? file.string() : canonical.string();
  }
  return fmt::format("{}\n{}", target.dialect, database.empty() ? target.name : database);
}

/// Where a source reads from: its adapter, then its file (symlinks followed) or its
/// PostgreSQL database (host, port and name, not the user or password).
std::string source_location(const config::source_config& source) {
  std::string where = source.dsn;
  if (!source.dsn.empty())
    if (auto named = sources::postgres_database(source.dsn); !named.empty())
      where = std::move(named);
  if (!source.path.empty()) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(source.path, ec);
    where = ec ? source.path : canonical.string();
  }
  return fmt::format("{}\n{}", config::to_string(source.adapter), where);
}

/// A file source's location (source_location) with its path relative to the state
/// directory `state_dir`: the same after the project's directory is moved whole. Empty
/// for a database source.
std::string location_relative(const std::string& location, const std::string& state_dir) {
  const auto nl = location.find('\n');
  if (nl == std::string::npos || location.compare(0, nl, "postgres") == 0)
    return {};
  std::error_code ec;
  const auto base = std::filesystem::weakly_canonical(state_dir, ec);
  if (ec)
    return {};
  const auto rel = std::filesystem::relative(location.substr(nl + 1), base, ec);
  return ec || rel.empty() ? std::string() : location.substr(0, nl + 1) + rel.string();
}

/// Whether a watermark committed reading from `was` (`was_relative`: location_relative
/// then) holds for a source that reads from `now`, another location: the same data reached
/// another way. The project's directory moved whole (the same path relative to the state
/// directory); the same file under another spelling (a symlink, a hard link); a CSV or
/// JSON source's directory and a file of it, as its `path` now, or the other way round.
bool same_source_data(const std::string& was, const std::string& was_relative,
                      const std::string& now, const std::string& state_dir) {
  const auto nl_was = was.find('\n'), nl_now = now.find('\n');
  if (nl_was == std::string::npos || nl_now == std::string::npos ||
      was.substr(0, nl_was) != now.substr(0, nl_now) || was.starts_with("postgres\n"))
    return false;
  namespace fs = std::filesystem;
  const bool files = was.starts_with("csv\n") || was.starts_with("json\n");
  // A CSV or JSON directory and a file of it, or the other way round: one the parent of
  // the other.
  const auto one_holds_other = [](const fs::path& x, const fs::path& y) {
    return x.parent_path() == y || y.parent_path() == x;
  };
  if (const std::string now_relative = location_relative(now, state_dir);
      !was_relative.empty() && !now_relative.empty() &&
      (was_relative == now_relative ||
       (files && one_holds_other(fs::path(was_relative.substr(nl_was + 1)),
                                 fs::path(now_relative.substr(nl_now + 1))))))
    return true;
  const fs::path a = was.substr(nl_was + 1), b = now.substr(nl_now + 1);
  std::error_code ec;
  if (fs::equivalent(a, b, ec) && !ec)
    return true;
  if (!files)
    return false;
  ec.clear();
  if (fs::is_directory(a, ec) && fs::is_regular_file(b, ec) && fs::equivalent(a, b.parent_path(), ec))
    return true;
  ec.clear();
  return fs::is_directory(b, ec) && fs::is_regular_file(a, ec) &&
         fs::equivalent(b, a.parent_path(), ec);
}

/// How a target tells two table names apart: whether it keeps the case of the (always
/// quoted) names it is given (PostgreSQL and Snowflake do, so `Orders` and `orders` are
/// two tables there; the others ignore it), and the schema an unqualified name lands in
/// (`schema = ""`: DuckDB's `main`, PostgreSQL's `public`), so that `orders` and
/// `main.orders` are one table.
struct claim_rule {
  bool keeps_case = false;
  std::string default_schema;
};

claim_rule claim_rule_of(const config::target_config& target) {
  auto d = dialects::make_dialect(target.dialect);
  claim_rule rule;
  rule.keeps_case = d && (*d)->names() == schema::name_rule::case_sensitive;
  const auto dialect = dialects::canonical_dialect_name(target.dialect);
  if (dialect == "duckdb")
    rule.default_schema = "main";
  else if (dialect == "postgres")
    rule.default_schema = sources::postgres_default_schema(target.dsn);
  return rule;
}

/// A target table as two selected tables landing on it are told apart: the target's
/// database (target_database) and the table in it, in lower case unless the target
/// keeps its names' case.
std::string claim_key(const claim_rule& rule, const std::string& database,
                      const dialects::table_ref& where) {
  const std::string_view schema =
      where.schema.empty() && where.catalog.empty() ? rule.default_schema : std::string_view(where.schema);
  // Built in place: a run makes one per table.
  std::string key;
  key.reserve(database.size() + where.catalog.size() + schema.size() + where.name.size() + 3);
  key.append(database).append(1, '\n');
  const std::size_t table_at = key.size();
  key.append(where.catalog).append(1, '\n').append(schema).append(1, '\n').append(where.name);
  if (!rule.keeps_case)
    for (std::size_t i = table_at; i < key.size(); ++i)
      key[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(key[i])));
  return key;
}

std::string target_claim(const config::target_config& target, const std::string& database,
                         const dialects::table_ref& where) {
  return claim_key(claim_rule_of(target), database, where);
}

namespace {

/// The tables an unrestricted run of `src` into `target` selected, kept (a SourceCatalog
/// of names alone, under "<source>#tables#<target>" in the catalogs family) to tell a
/// table that later disappears from the source, once: a table that earlier runs copied,
/// dropped or renamed at the source, would otherwise just stop being copied, its target
/// table standing as last copied with nothing said. Written only when the set changes.
/// Also says when the source selects no table at all.
template <class Chosen>
void note_table_set(storage::state_store& store, const config::source_config& src,
                    const config::target_config& target, const std::string& database,
                    const sources::catalog& cat, const std::vector<std::string>& names,
                    const std::vector<Chosen>& selected, bool all_named_found, bool plan_only) {
  if (selected.empty() && all_named_found) {
    const bool files = src.adapter == config::adapter_kind::csv || src.adapter == config::adapter_kind::json;
    add_source_warning(
        {src.name, "",
         cat.tables.empty()
             ? fmt::format("source '{}' lists no tables{}: nothing of it was read", src.name,
                           files ? " (a csv or json source's tables are its directory's files "
                                   "ending in .csv or .json (.ndjson, .jsonl), in any case; others "
                                   "are left aside)"
                                 : "")
             : fmt::format("source '{}' has {} table(s), and its include and exclude patterns "
                           "select none of them: nothing of it was read; check include and "
                           "exclude in [sources.{}]",
                           src.name, cat.tables.size(), src.name),
         true});
  }
  const std::string key = src.name + "#tables#" + target.name;
  google::protobuf::Arena arena;
  auto* kept = google::protobuf::Arena::CreateMessage<storage::pb::SourceCatalog>(&arena);
  auto found = store.get_into(key, *kept);
  if (!found)
    return;  // unreadable: nothing to compare with, and nothing worth failing the run for
  // The usual run: the same tables as the last one, compared without a copy.
  bool same = *found && static_cast<std::size_t>(kept->tables_size()) == selected.size();
  for (int i = 0; same && i < kept->tables_size(); ++i) {
    const auto& now = cat.tables[selected[static_cast<std::size_t>(i)].index];
    same = kept->tables(i).schema() == now.schema && kept->tables(i).name() == now.name;
  }
  if (*found && !same) {
    std::unordered_set<std::string_view> listed(names.begin(), names.end());
    // A table flotilla.toml names that the source no longer has fails FLT-R005, which
    // says so: a warning beside it would only repeat it, with other advice.
    // (Names compared ignoring case, and with or without their schema, as include's
    // names match.)
    const auto lower = [](std::string v) {
      for (auto& c : v)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return v;
    };
    std::unordered_set<std::string> named_missing;
    for (const auto& n : config::unmatched_table_names(src, names, {}))
      named_missing.insert(lower(n.name));
    const auto is_named_missing = [&](const std::string& name) {
      const auto dot = name.rfind('.');
      return named_missing.contains(lower(name)) ||
             (dot != std::string::npos && named_missing.contains(lower(name.substr(dot + 1))));
    };
    for (int i = 0; i < kept->tables_size(); ++i) {
      const auto& t = kept->tables(i);
      const std::string name = t.schema().empty() ? t.name() : t.schema() + "." + t.name();
      if (listed.contains(name))
        continue;  // still there (left out by include/exclude now: flotilla.toml's choice)
      if (is_named_missing(name))
        continue;
      const auto where = config::target_table(target, src, name);
      const dialects::table_ref landed{where.catalog, where.schema, where.name};
      // Only a table that loaded its target table: one that failed every run it was in
      // (a malformed file moved away, as its error advised) left nothing to speak of.
      if (const auto h = store.claim_holder(claim_key(claim_rule_of(target), database, landed));
          h && (!*h || **h != table_key(src.name, name)))
        continue;
      const std::string shown = display_name(landed);
      // Another of the source's tables lands there now (a table renamed by case, moved to
      // another schema): it loads the target table, which is not stale then.
      const auto folded = [](std::string v) {
        for (auto& c : v)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return v;
      };
      std::string heir;
      for (const auto& c : selected) {
        const auto lands = config::target_table(target, src, names[c.index]);
        if (folded(display_name(dialects::table_ref{lands.catalog, lands.schema, lands.name})) ==
            folded(shown)) {
          heir = names[c.index];
          break;
        }
      }
      add_source_warning(
          {src.name, name,
           heir.empty()
               ? fmt::format("source '{}' no longer has table '{}', which earlier runs copied "
                             "(dropped, renamed or moved at the source?): it was not read, and "
                             "its target table {} of target '{}' keeps the rows last copied; "
                             "drop that table on the target if the source table is gone for "
                             "good",
                             src.name, name, shown, target.name)
               : fmt::format("source '{}' no longer has table '{}', which earlier runs copied "
                             "(dropped, renamed or moved at the source?): its target table {} of "
                             "target '{}' is loaded by '{}' from now on",
                             src.name, name, shown, target.name, heir),
           false, shown});
    }
  }
  if (same || plan_only)
    return;
  // Written once the run is over (save_table_sets): a run killed before it has said
  // nothing, and the next one says it.
  storage::pb::SourceCatalog record;
  for (const auto& c : selected) {
    const auto& t = cat.tables[c.index];
    auto* out = record.add_tables();
    out->set_schema(t.schema);
    out->set_name(t.name);
  }
  std::lock_guard lock(source_warnings_mu());
  table_sets().emplace_back(key, std::move(record));
}

/// True when the source table's storage generation (PostgreSQL: relfilenode) differs from
/// the one `w` was committed with: it was emptied or rewritten since. Unknown either side:
/// false.
bool rewritten_since(const storage::pb::Watermark& w, const sources::source_table& t) {
  return !w.source_table_generation().empty() && !t.generation.empty() &&
         w.source_table_generation() != t.generation;
}

/// FLT-R006's message: table `key` (named `name` in source `src`) lands on `where`, which
/// `holder` (source.table) loads in this run.
std::string clash_message(const config::target_config& target, const config::source_config& src,
                          const std::string& name, const std::string& key,
                          const dialects::table_ref& where, const std::string& holder) {
  // Two tables of one source differ only where the target cannot tell them apart (their
  // schema, their case): a template cannot part them.
  const bool same_source = holder.starts_with(src.name + ".");
  // Names that differ only by case: patterns ignore case, so an exclude would leave out
  // both.
  const auto folded = [](std::string v) {
    for (auto& c : v)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return v;
  };
  const bool case_only = same_source && folded(holder) == folded(key);
  // A name holding a pattern's wildcard cannot be excluded alone: patterns have no escape.
  const bool wild = name.find_first_of("*?[") != std::string::npos;
  const std::string fix =
      case_only ? std::string("Rename one of them at the source: the two names differ only by "
                              "case, which include and exclude patterns ignore, so excluding "
                              "one would leave out both")
      : same_source && wild
          ? std::string("Rename one of them at the source: the name holds a wildcard of "
                        "include and exclude patterns (*, ? or [), which have no escape, so "
                        "excluding it would leave out other tables too")
      : same_source
          ? fmt::format("Rename one of them at the source, or leave one out (exclude = "
                        "[{}] in [sources.{}]; patterns ignore case, so a table named like it "
                        "but for case would be left out too)",
                        schema::toml_string(name), schema::toml_key(src.name))
      : target.schema.find("{source}") != std::string::npos
          ? fmt::format("The schema template of [targets.{}] has {{source}} already: the two "
                        "sources' names still make one target table there (names that differ "
                        "only by case, or a SQLite prefix that runs into the other's table "
                        "names). Rename a source, or exclude one of the tables",
                        target.name)
          : fmt::format("Give them distinct target tables, e.g. a schema template with "
                        "{{source}} in [targets.{}], or rename or exclude one of them",
                        target.name);
  return fmt::format(
      "{} lands on target table {} of target '{}', which {} holds in this run{}: the two "
      "would overwrite each other's rows, so this one is not copied. {}",
      key, display_name(where), target.name, holder,
      same_source ? ""
                  : " (of two sources, the one whose table loaded the target table last keeps "
                    "it; when neither did yet, the one listed first in flotilla.toml)",
      fix);
}

/// The table the claim record names as the last to load the target table `claim`, when
/// it is another table than `key` that still stands for that target table: its source is
/// in flotilla.toml, lands it on the same target table and selects it by name. A run that
/// does not read that table (filtered out, not retried, its source unreadable) must not
/// load `key` over its rows: which of the two loads is decided only with both read.
std::optional<std::string> standing_holder(const config::project& p,
                                           const storage::state_store& store,
                                           const std::map<std::string, std::string>& databases,
                                           const std::string& key, const std::string& claim) {
  auto h = store.claim_holder(claim);
  if (!h || !*h || **h == key)
    return std::nullopt;
  const std::string& holder = **h;
  const auto dot = holder.find('.');
  if (dot == std::string::npos)
    return std::nullopt;
  const auto* src = p.find_source(std::string_view(holder).substr(0, dot));
  const auto* target = src != nullptr ? p.target_of(*src) : nullptr;
  if (target == nullptr || !databases.contains(target->name))
    return std::nullopt;  // its source left flotilla.toml: the target table is free
  const std::string name = holder.substr(dot + 1);
  const auto where = config::target_table(*target, *src, name);
  if (claim_key(claim_rule_of(*target), databases.at(target->name),
                dialects::table_ref{where.catalog, where.schema, where.name}) != claim)
    return std::nullopt;  // it lands elsewhere now
  if (config::select_table_indices(*src, std::vector<std::string>{name}, {}).empty())
    return std::nullopt;  // excluded now
  return holder;
}

/// FLT-R006's message when the table that comes first for the target table (`holder`,
/// which flotilla.toml names, of a source listed before) loads nothing in this run: its
/// source does not have it (FLT-R005), or could not be read at all.
std::string first_holder_message(const config::target_config& target, const std::string& key,
                                 const dialects::table_ref& where, const std::string& holder,
                                 bool unreadable, bool same_source = false) {
  const std::string holder_source = holder.substr(0, holder.find('.'));
  return fmt::format(
      "{} lands on target table {} of target '{}', which {} loads ({}); {}, so this one is "
      "not copied in its place. {}, or take {} out of flotilla.toml to let {} load the "
      "target table",
      key, display_name(where), target.name, holder,
      same_source ? "flotilla.toml names it in a section, which comes first"
                  : "of two sources, the one listed first in flotilla.toml loads",
      unreadable ? fmt::format("source '{}' could not be read in this run", holder_source)
                 : fmt::format("source '{}' does not have that table in this run (FLT-R005)",
                               holder_source),
      unreadable ? fmt::format("Make source '{}' readable and run again", holder_source)
                 : fmt::format("Restore or fix the name of {} (at the source or in "
                               "flotilla.toml)",
                               holder),
      holder, key);
}

/// The tables flotilla.toml names (a section, or an include entry without `*`) in the
/// sources a run leaves out (`in_run` false: a --filter or retry), by the target table
/// each lands on (its claim): the first-listed source's, with that source's place in
/// flotilla.toml. Made once per run.
using left_out_named = std::unordered_map<std::string, std::pair<std::size_t, std::string>>;

left_out_named left_out_named_tables(
    const config::project& p, const std::map<std::string, std::string>& databases,
    const std::function<bool(const config::source_config&)>& in_run) {
  left_out_named out;
  for (std::size_t i = 0; i < p.sources.size(); ++i) {
    const auto& s = p.sources[i];
    if (in_run(s))
      continue;
    const auto* target = p.target_of(s);
    if (target == nullptr || !databases.contains(target->name))
      continue;
    const claim_rule rule = claim_rule_of(*target);
    for (const auto& named : config::unmatched_table_names(s, {}, {})) {
      const auto where = config::target_table(*target, s, named.name);
      out.try_emplace(claim_key(rule, databases.at(target->name),
                                dialects::table_ref{where.catalog, where.schema, where.name}),
                      i, table_key(s.name, named.name));
    }
  }
  return out;
}

/// Of those, the one landing on the target table `claim` from a source listed before
/// `src`, when no table has loaded that target table yet (`store` says none did): a run
/// with both would load it there (of two sources, the one listed first), so a run that
/// leaves it out does not give the target table to `src`'s table instead.
std::optional<std::string> named_first_left_out(const left_out_named& named,
                                                const config::project& p,
                                                const config::source_config& src,
                                                const std::string& claim,
                                                const storage::state_store* store) {
  const auto it = named.find(claim);
  if (it == named.end() ||
      it->second.first >= static_cast<std::size_t>(&src - p.sources.data()))
    return std::nullopt;
  if (store != nullptr)
    if (const auto h = store->claim_holder(claim); h && *h)
      return std::nullopt;  // loaded once: the claim rules of a loaded table decide
  return it->second.second;
}

/// Why `key` is not copied onto the target table `holder` (named_first_left_out) would
/// load first, in a run that leaves `holder`'s source out.
std::string left_out_first_message(const config::target_config& target, const std::string& key,
                                   const dialects::table_ref& where, const std::string& holder) {
  const std::string holder_source = holder.substr(0, holder.find('.'));
  return fmt::format(
      "{} lands on target table {} of target '{}', which {} loads (of two sources, the one "
      "listed first in flotilla.toml loads, and no table has loaded it yet); this run leaves "
      "source '{}' out (a --filter or retry), so this one is not copied in its place (it "
      "would take the target table over). Run without the filter to load {}, give the two "
      "distinct target tables, or take {} out of flotilla.toml to let {} load the target "
      "table",
      key, display_name(where), target.name, holder, holder_source, holder, holder, key);
}

std::string absent_holder_not_pruned(const std::string& holder) {
  return fmt::format("{} loaded its target table last, and this run does not read it", holder);
}

/// Why `key` is not copied onto the target table `holder` loaded last, which this run does
/// not read (standing_holder).
std::string absent_holder_message(const config::target_config& target, const std::string& key,
                                  const dialects::table_ref& where, const std::string& holder,
                                  bool unreadable) {
  const std::string holder_source = holder.substr(0, holder.find('.'));
  return fmt::format(
      "{} lands on target table {} of target '{}', which {} loaded last; {}, so this one is "
      "not copied over its rows (flotilla.toml's claim rules decide which of the two loads "
      "only when both are read). {}",
      key, display_name(where), target.name, holder,
      unreadable ? fmt::format("source '{}' could not be read in this run", holder_source)
                 : fmt::format("this run does not copy it (a --filter or retry leaves it out)"),
      unreadable ? fmt::format("Make source '{}' readable and run again, or remove it from "
                               "flotilla.toml if it is gone for good",
                               holder_source)
                 : target.schema.find("{source}") != std::string::npos
                     ? fmt::format("The schema template of [targets.{}] has {{source}} "
                                   "already: the two sources' names still make one target "
                                   "table there (names that differ only by case, or a SQLite "
                                   "prefix that runs into the other's table names). Rename a "
                                   "source, or exclude one of the tables; a run without the "
                                   "filter loads the one the claim rules pick and fails the "
                                   "other the same way",
                                   target.name)
                     : fmt::format("Give the two distinct target tables (e.g. a schema "
                                   "template with {{source}} in [targets.{}]), or exclude one "
                                   "of them; a run without the filter loads the one the claim "
                                   "rules pick and fails the other the same way",
                                   target.name));
}

}  // namespace

void drop_unselected_staged(const config::project& p, storage::state_store& store) {
  auto entries = store.list<storage::pb::StagedEntry>();
  if (!entries)
    return;  // unreadable: keep everything
  for (const auto& e : *entries) {
    // The source whose name, and a dot, begin the key: the longest, as names may hold dots.
    const config::source_config* src = nullptr;
    for (const auto& s : p.sources)
      if (e.key.starts_with(s.name + ".") && (src == nullptr || s.name.size() > src->name.size()))
        src = &s;
    const bool selected =
        src != nullptr &&
        !config::select_table_indices(*src, {e.key.substr(src->name.size() + 1)}, {}).empty();
    if (!selected)
      (void)store.remove<storage::pb::StagedEntry>(e.key);  // its file goes next
  }
}

void remove_orphan_staged(const config::project& p, const storage::state_store& store) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = fs::path(p.state_dir) / "staged";
  if (!fs::is_directory(root, ec))
    return;
  auto entries = store.list<storage::pb::StagedEntry>();
  if (!entries)
    return;  // unreadable: keep everything
  // By run directory and file name, however the state directory was spelled.
  std::set<fs::path> kept;
  for (const auto& e : *entries) {
    const fs::path location(e.record.location());
    kept.insert(location.parent_path().filename() / location.filename());
  }
  for (const auto& run : fs::directory_iterator(root, ec)) {
    if (!run.is_directory(ec))
      continue;
    for (const auto& file : fs::directory_iterator(run.path(), ec))
      if (!kept.contains(run.path().filename() / file.path().filename()))
        fs::remove(file.path(), ec);
    fs::remove(run.path(), ec);  // only succeeds when empty
  }
}

namespace {

std::atomic<bool> schema_changes_noted{false};

/// The schema actions of `plan`, as a table's result keeps them.
void add_actions(storage::pb::TableResult& result, const engine::table_plan& plan) {
  for (const auto& step : plan.drift.steps) {
    auto* a = result.add_actions();
    a->set_action(std::string(schema::to_string(step.action)));
    a->set_column(step.column);
    a->set_reason(step.reason);
    a->set_sql(step.sql);
    a->set_from(step.from ? schema::to_string(*step.from) : step.from_text);
    a->set_to(schema::step_to_text(step));
    for (const auto& x : step.also)
      a->add_also(x);
  }
}

}  // namespace

void describe_copy(storage::pb::TableResult& result, const engine::table_outcome& o) {
  if (!o.plan && !o.reused_staged)
    return;
  // The schema actions the copy took, which the run's events report: kept with the
  // result, so that a run killed before it wrote its events has them written for it.
  if (o.plan && (o.status == engine::table_status::copied || o.ddl_applied))
    add_actions(result, *o.plan);
  if (o.plan) {  // for the run after a killed one, which reports it
    result.set_drift_checked(o.plan->drift_checked);
    result.set_drifted(o.plan->drifted());
    for (const auto& w : o.plan->warnings)
      result.add_warnings(w);
  }
  result.set_load(std::string(o.reused_staged ? std::string_view("retry")
                                               : engine::to_string(o.plan->load)));
  if (o.finished_at_us != 0) {
    result.set_finished_at_us(o.finished_at_us);
    result.set_started_at_us(o.finished_at_us - o.duration_us);
  }
  if (o.recovered) {
    result.set_recovered_rows(o.recovered->rows);
    result.set_recovered_run_id(o.recovered->run_id);
    result.set_recovered_watermark(o.recovered->watermark);
  }
}

namespace {


/// Right after a table's DDL committed on the target, ahead of its rows: a note of the
/// table with its schema actions (status "altered", key altered_key), so that a run killed
/// before the rows commit still reports the change (publish_interrupted). One small
/// record per table, in the tables family under a key no source name can begin.
void record_schema_change(storage::state_store& store, const std::string& run_id,
                          const std::string& source, const std::string& table,
                          const std::string& target, const engine::table_plan& plan) {
  storage::pb::TableResult t;
  t.set_table(target);
  t.set_source(source);
  t.set_source_table(table);
  t.set_status("altered");
  t.set_load(std::string(engine::to_string(plan.load)));
  t.set_run_id(run_id);
  t.set_started_at_us(now_us());
  t.set_drift_checked(plan.drift_checked);
  t.set_drifted(plan.drifted());
  add_actions(t, plan);
  (void)store.put(altered_key(run_id, source + "." + table), t);  // best effort
  schema_changes_noted.store(true, std::memory_order_relaxed);
}

/// settings_hash's part that depends on the target only: worked out once per source.
sources::shape_hash target_settings_hash(const config::target_config& target) {
  sources::shape_hash h;
  h.add("settings/1");
  h.add(target.name);
  h.add(target.dialect);
  // The file, however its path is written (a symlinked directory, `..`): the same target.
  if (!target.path.empty()) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(target.path, ec);
    h.add(ec ? target.path : canonical.string());
  } else {
    h.add(target.path);
  }
  h.add(sources::error::redact_dsn(target.dsn));  // a new password is no new warehouse
  h.add(target.database);
  return h;
}

std::string settings_hash(sources::shape_hash h, const engine::table_job& job) {
  h.add(job.target.catalog);
  h.add(job.target.schema);
  h.add(job.target.name);
  const auto& st = job.settings;
  for (const auto& c : st.declared) {
    h.add(c.name);
    h.add(schema::to_string(c.type));
  }
  h.add(st.cursor_column);
  for (const auto& k : st.unique_key)
    h.add(k);
  // The flags as the digits fmt would print them ("true"/"false" for the bools), without
  // a format per table.
  char flags[64];
  std::size_t used = 0;
  const auto put = [&](std::string_view part) {
    part.copy(flags + used, part.size());
    used += part.size();
  };
  const auto put_int = [&](int v) {
    used = static_cast<std::size_t>(std::to_chars(flags + used, flags + sizeof flags, v).ptr - flags);
  };
  put(st.enforced ? "true" : "false");
  put_int(static_cast<int>(st.on_schema_change));
  put_int(static_cast<int>(st.type_change_rebuild));
  put(st.auto_widen ? "true" : "false");
  put(st.governance_gate ? "true" : "false");
  put(st.additive_granted ? "true" : "false");
  h.add(std::string_view(flags, used));
  return h.hex();
}

}  // namespace

std::string settings_hash(const config::target_config& target, const engine::table_job& job) {
  return settings_hash(target_settings_hash(target), job);
}

const events::drift_verdict* drift_verdict_of(const engine::table_outcome& o) {
  if (!o.gate_detail.has_value())
    return nullptr;
  const auto* v = std::any_cast<std::shared_ptr<const events::drift_verdict>>(&o.gate_detail);
  return v != nullptr ? v->get() : nullptr;
}

std::string altered_key(std::string_view run_id, std::string_view table_key) {
  return fmt::format("{}{}/{}", altered_prefix, run_id, table_key);
}

bool noted_schema_changes() { return schema_changes_noted.load(std::memory_order_relaxed); }

void remove_altered_notes(storage::state_store& store, std::string_view run_id) {
  auto notes = store.list<storage::pb::TableResult>(fmt::format("{}{}/", altered_prefix, run_id));
  if (notes)
    for (const auto& n : *notes)
      (void)store.remove<storage::pb::TableResult>(n.key);
}

bool takes_source(const std::set<std::string>& only, const std::string& source) {
  if (only.empty())
    return true;
  const std::string prefix = source + ".";
  auto it = only.lower_bound(prefix);
  return it != only.end() && it->starts_with(prefix);
}

actors::fleet_spec build_fleet(const config::project& p, const std::vector<config::filter>& filters,
                               storage::state_store* store, const fleet_options& options) {
  actors::fleet_spec spec;
  spec.plan_only = options.plan_only;
  for (const auto& t : p.targets) {
    actors::target_spec ts;
    ts.options.name = t.name;
    ts.options.dialect = t.dialect;
    ts.options.path = t.path;
    ts.options.dsn = t.dsn;
    ts.options.block_size = t.block_size;
    ts.options.in_place_max_bytes = t.in_place_max_bytes;
    ts.workers = std::max<std::size_t>(1, p.io.max_connections_per_endpoint);
    // SQLite takes one writer at a time: more connections would only wait on its lock,
    // and each DDL would make every other connection re-read the whole schema. Two
    // workers share one connection: one reads its table's source while the other loads.
    if (t.dialect == "sqlite") {
      ts.workers = std::min<std::size_t>(2, ts.workers);
      ts.share_connection = true;
    }
    spec.targets.push_back(ts);
  }
  const auto* project = &p;
  // Tables an open review of `flotilla stream` holds, by "<target>\n<source>.<table>":
  // a run leaves them alone too (seed 003: nothing of a held table is applied before
  // its review is decided).
  auto holds = std::make_shared<std::map<std::string, std::string>>();
  if (store != nullptr)
    if (auto reviews = cdc::list_reviews(*store))
      for (const auto& r : *reviews)
        if (cdc::is_open(r.hold.state()))
          (*holds)[r.hold.target() + "\n" + r.hold.table()] =
              cdc::decisions_accepted(r).empty()
                  ? fmt::format("held for review {} ({}): {}; nothing copied. Its decision is "
                                "taken: start `flotilla stream`, which carries it out (then "
                                "the table resumes), then run again",
                                r.short_id(), cdc::state_label(r.hold.state()),
                                r.hold.source_change())
                  : fmt::format("held for review {} ({}): {}; nothing copied. Decide it with "
                                "`flotilla review show {}` and {}, then run again",
                                r.short_id(), cdc::state_label(r.hold.state()),
                                r.hold.source_change(), r.short_id(),
                                cdc::decisions_accepted(r));
  // Each target table is written by one selected table of the run: a second one that
  // lands on it is refused, naming the first, rather than overwriting its rows.
  // Sources landing in one target schema (a claim group, actors::pipeline_spec) leave their
  // clashes with each other to resolve_claims, in flotilla.toml's order; their own
  // tables' clashes with each other are still found here.
  std::vector<std::string> group_keys;  // per pipeline: the target schema its tables land in
  // Per pipeline on a SQLite target: its database and the prefix its table names get.
  std::vector<std::optional<std::pair<std::string, std::string>>> sqlite_prefixes;
  std::map<std::string, std::string> databases;  // target name -> target_database
  for (const auto& t : p.targets)
    databases.emplace(t.name, target_database(t));
  // Targets whose database file is missing (moved away, deleted), as the run starts: none
  // of their tables is pruned, and none resumes past a watermark whose rows went with it.
  auto missing_files = std::make_shared<std::set<std::string>>();
  const auto presence =
      options.presence ? options.presence : std::make_shared<target_presence>(p);
  // A run that leaves tables out (--filter, retry): a table whose target table another
  // table loaded last, which this run does not read, is refused (standing_holder).
  const bool restricted = !filters.empty() || !options.only.empty();
  // A run that leaves sources out: the tables flotilla.toml names in them, by the target
  // table each lands on (named_first_left_out).
  const auto left_out_names = std::make_shared<const left_out_named>(
      restricted ? left_out_named_tables(p, databases,
                                         [&](const config::source_config& s) {
                                           return config::source_may_match(s, filters) &&
                                                  takes_source(options.only, s.name);
                                         })
                 : left_out_named{});
  // The names the project went by before (its state directory followed a rename): their
  // commit tokens are its own.
  const auto shared_earlier_names =
      std::make_shared<const std::vector<std::string>>(earlier_project_names(p));
  // Every table of each source it runs: filters on tags and sources only (a run per
  // client, --filter client=acme), no retry.
  const bool whole_sources =
      options.only.empty() &&
      std::none_of(filters.begin(), filters.end(), [](const config::filter& f) { return f.key == "table"; });
  auto grouped = std::make_shared<std::unordered_set<std::string>>();  // sources in a claim group
  auto all_databases = std::make_shared<const std::map<std::string, std::string>>(databases);
  for (const auto& t : p.targets) {
    const auto d = dialects::canonical_dialect_name(t.dialect);
    std::error_code ec;
    if ((d == "duckdb" || d == "sqlite") && !t.path.empty() &&
        !std::filesystem::exists(t.path, ec) && !ec)
      missing_files->insert(t.name);
  }
  for (const auto& s : p.sources) {
    if (!config::source_may_match(s, filters) || !takes_source(options.only, s.name))
      continue;
    const config::target_config* target = p.target_of(s);
    if (target == nullptr)
      continue;
    std::size_t target_index = 0;
    for (std::size_t i = 0; i < p.targets.size(); ++i)
      if (p.targets[i].name == target->name)
        target_index = i;

    actors::pipeline_spec ps;
    ps.source.name = s.name;
    ps.source.adapter = std::string(config::to_string(s.adapter));
    ps.source.path = s.path;
    ps.source.dsn = s.dsn;
    const config::source_config* src = &s;
    const bool no_prune = options.no_prune;
    const bool full_refresh = options.full_refresh;
    const bool allow_rebuild = options.allow_type_change_rebuild;
    const auto only = options.only;
    const bool reuse_staged = options.reuse_staged;
    const auto staged_runs = std::make_shared<const std::set<std::string>>(options.staged_runs);
    const std::string run_id = options.run_id;
    // Shared by the source's tables: written into their commit tokens.
    const auto shared_run_id =
        run_id.empty() ? nullptr : std::make_shared<const std::string>(run_id);
    // Only a name flotilla.toml gives: the directory's name, which an unnamed project
    // goes by, changes when the project is moved, and its tables would read every row.
    const auto shared_project = project->name_given
                                    ? std::make_shared<const std::string>(project->name)
                                    : nullptr;
    const auto earlier_names = shared_earlier_names;
    const bool plan_only = options.plan_only;
    // Whether any table of this source may be checked by the source drift gate: only
    // then are the baselines and last results read with the tables' state.
    const bool may_gate = any_table_policy(p, s, [](const config::table_policy& e) {
      return e.on_source_drift != config::drift_policy::ignore;
    });
    const std::string database = databases.at(target->name);
    const auto location = std::make_shared<const std::string>(source_location(s));
    // A DuckDB source reading the file its target writes: the schema its tables land in
    // holds Flotilla's copies, which the source would otherwise list and copy onto
    // themselves, shutting the tables they copy out (FLT-R006). Left out of its catalog.
    // The same holds for a PostgreSQL source on its target's database and a SQLite
    // source on its target's file: the schemas (SQLite: the name prefixes) that the
    // sources writing to the target land in are left out of the source's catalog.
    std::vector<std::string> own_copies;  // DuckDB, PostgreSQL: schemas
    std::vector<std::string> own_prefixes;  // SQLite: "<schema>__" table name prefixes
    bool same_database = false;  // the source reads the database its target writes
    const std::string& target_db = databases.at(target->name);
    const std::string_view source_kind = config::to_string(s.adapter);
    if ((s.adapter == config::adapter_kind::duckdb || s.adapter == config::adapter_kind::postgres ||
         s.adapter == config::adapter_kind::sqlite) &&
        dialects::canonical_dialect_name(target->dialect) == source_kind &&
        target_db.substr(target_db.find('\n') + 1) == location->substr(location->find('\n') + 1)) {
      same_database = true;
      for (const auto& other : p.sources) {
        const config::target_config* lands = p.target_of(other);
        if (lands == nullptr || lands->name != target->name)
          continue;
        const auto where = config::target_table_named(*target, other, "x");
        if (s.adapter == config::adapter_kind::sqlite) {
          if (where.name.size() > 1)  // "<schema>__x"; a bare "x" lands in no prefix of its own
            own_prefixes.push_back(where.name.substr(0, where.name.size() - 1));
        } else if (!where.schema.empty()) {
          own_copies.push_back(where.schema);
        }
      }
    }
    // A SQLite or DuckDB source on the file some target of the project writes (its own or
    // another's): the target's bookkeeping there (_flotilla_commits, a staging table a
    // stopped load left) is Flotilla's, no table of the user's to copy.
    bool on_a_target = same_database;
    if (s.adapter == config::adapter_kind::sqlite || s.adapter == config::adapter_kind::duckdb)
      for (const auto& t : p.targets)
        if (dialects::canonical_dialect_name(t.dialect) == source_kind)
          if (auto d = databases.find(t.name); d != databases.end() &&
                                               d->second.substr(d->second.find('\n') + 1) ==
                                                   location->substr(location->find('\n') + 1))
            on_a_target = true;
    ps.select = [project, src, target, target_index, filters, store, no_prune, full_refresh, allow_rebuild,
                 only, reuse_staged, staged_runs, run_id, shared_run_id, shared_project, earlier_names, plan_only, may_gate, holds, restricted, left_out_names, whole_sources, grouped,
                 all_databases, database, missing_files, presence, location,
                 own_copies, own_prefixes, same_database, on_a_target](sources::catalog& cat) {
      if (on_a_target)
        std::erase_if(cat.tables, [](const sources::source_table& t) {
          std::string name = t.name, schema = t.schema;
          for (auto* s : {&name, &schema})
            for (auto& c : *s)
              c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          return schema == "_flotilla" || name == "_flotilla_commits" ||
                 name.find("__flotilla_") != std::string::npos;
        });
      // Same database: the claims of the source's own tables, which no copy may land on.
      std::unordered_set<std::string> source_tables;
      if (same_database) {
        const claim_rule own_rule = claim_rule_of(*target);
        // A table some copy loaded (its claim is recorded): a copy, not the user's table.
        const auto loaded_by_a_copy = [&](const sources::source_table& t) {
          if (store == nullptr)
            return false;
          const auto h = store->claim_holder(
              claim_key(own_rule, database, dialects::table_ref{"", t.schema, t.name}));
          return h && *h;
        };
        std::erase_if(cat.tables, [&](const sources::source_table& t) {
          // In a schema (a name prefix) copies land in: a copy, unless no copy ever loaded
          // it, which makes it a table of the user's there, that a copy must not overwrite.
          for (const auto& schema : own_copies)  // PostgreSQL keeps the names' case
            if (src->adapter == config::adapter_kind::postgres ? t.schema == schema
                                                                : config::iequals(t.schema, schema))
              return loaded_by_a_copy(t);
          for (const auto& prefix : own_prefixes)
            if (t.name.size() > prefix.size() && config::iequals(t.name.substr(0, prefix.size()), prefix))
              return loaded_by_a_copy(t);
          // Any other table that would land on itself stays, to be refused as such below.
          const auto self = config::target_table(*target, *src, t.qualified());
          if (claim_key(own_rule, database, dialects::table_ref{self.catalog, self.schema, self.name}) ==
              claim_key(own_rule, database, dialects::table_ref{"", t.schema, t.name}))
            return false;
          // A table some copy loaded (its claim is recorded): one a template since changed
          // made, which no current template's schema names.
          return loaded_by_a_copy(t);
        });
        for (const auto& t : cat.tables)
          source_tables.insert(
              claim_key(own_rule, database, dialects::table_ref{"", t.schema, t.name}));
      }
      // A retried table the source no longer lists (a file moved away, a table renamed)
      // loads from its staged data, which never reads the source, as when the source
      // cannot be opened at all; without staged data it fails, named, instead of leaving
      // the retry a success that drops it.
      std::vector<std::string> gone;  // retried tables neither listed nor staged
      const bool lists_none = cat.tables.empty();
      if (!only.empty() && store != nullptr) {
        const std::string prefix = src->name + ".";
        std::set<std::string> listed;
        for (const auto& t : cat.tables) {
          listed.insert(table_key(src->name, t.qualified()));
          listed.insert(table_key(src->name, t.name));
        }
        for (const auto& key : only) {
          if (!key.starts_with(prefix) || key == prefix + "*" || listed.contains(key))
            continue;
          std::optional<sources::catalog> staged;
          if (reuse_staged)
            staged = staged_catalog(*store, *src, *target, {key}, *staged_runs);
          if (staged && staged->tables.size() == 1)
            cat.tables.push_back(std::move(staged->tables.front()));
          else
            gone.push_back(key.substr(prefix.size()));
        }
      }
      // A source that lists no table at all where an earlier run copied some (a SQLite
      // file emptied by a failed sync reads as an empty database) fails as a source that
      // cannot be read does: its tables are reported failed, not silently gone.
      // A retry of such a source (nothing staged of it) fails the same way, once for the
      // source, rather than once per table as if each were gone on its own.
      if (cat.tables.empty() && (gone.empty() || lists_none) && store != nullptr) {
        if (auto known = store->list<storage::pb::TableResult>(src->name + ".");
            known && !known->empty()) {
          // Not those gone before (said then, by the run that saw them go).
          const auto current = kept_table_names(*store, src->name, target->name);
          std::size_t copied = 0;
          for (const auto& k : *known)
            copied += k.record.source() == src->name && !k.record.source_table().empty() &&
                      (!current || current->contains(k.record.source_table()));
          if (copied > 0)
            throw std::runtime_error(fmt::format(
                "source '{}' lists no tables, where earlier runs copied {} of it: nothing was "
                "copied and the target tables stay as last copied. Check the source (an "
                "emptied or replaced file?); if it really has no tables now, remove it from "
                "flotilla.toml",
                src->name, copied));
        }
      }
      std::vector<std::string> names;
      names.reserve(cat.tables.size());
      for (const auto& t : cat.tables)
        names.push_back(t.qualified());
      // The selected tables first, then their state in one batched read.
      struct chosen {
        std::string name;
        std::size_t index;  // in cat.tables
        const config::table_config* section;  // its table section; null when none
      };
      // Tables flotilla.toml names that the source lacks fail, named (a typo would
      // otherwise select nothing, silently); a retry covers only the tables it retries.
      auto unmatched = only.empty() ? config::unmatched_table_names(*src, names, filters)
                                    : std::vector<config::unmatched_name>{};
      // A retried table that never was (a name flotilla.toml misspells, FLT-R005 in the
      // run) fails as it did, with the name it likely meant, not as a table gone since.
      if (!gone.empty())
        for (auto& m : config::unmatched_table_names(*src, names, filters))
          if (auto it = std::find(gone.begin(), gone.end(), m.name); it != gone.end()) {
            gone.erase(it);
            unmatched.push_back(std::move(m));
          }
      std::vector<chosen> selected;
      std::vector<std::string> keys;
      selected.reserve(names.size());
      keys.reserve(names.size());
      for (std::size_t index : config::select_table_indices(*src, names, filters)) {
        std::string key = table_key(src->name, names[index]);
        // A retry names the tables the failed run reported; one flotilla.toml names
        // without its schema ("orders" for public.orders) was reported so when the source
        // lacked it.
        const auto& schema_part = cat.tables[index].schema;
        if (!only.empty() && !only.contains(key) && !only.contains(src->name + ".*") &&
            (schema_part.empty() || !only.contains(table_key(src->name, cat.tables[index].name))))
          continue;
        // The section with every catalog name at hand: a section spelled as another of
        // its names is that table's alone.
        const config::table_config* section = config::find_table(*src, names[index], names);
        selected.push_back({{}, index, section});
        keys.push_back(std::move(key));
      }
      if (whole_sources && store != nullptr)
        note_table_set(*store, *src, *target, database, cat, names, selected, unmatched.empty(),
                       plan_only);
      for (auto& c : selected)  // every section found: the names move now
        c.name = std::move(names[c.index]);
      std::vector<storage::table_state> states;
      if (store) {
        auto read = store->read_tables(keys, may_gate);
        if (!read)
          throw std::runtime_error(read.error().message);
        states = std::move(*read);
      }
      std::vector<actors::table_spec> out;
      out.reserve(selected.size());
      // A key twice: a dot in a schema or table name.
      std::unordered_set<std::string_view> seen_keys;
      seen_keys.reserve(keys.size());
      // The target table one names, as claimed against another table landing on it.
      // PostgreSQL and Snowflake keep the case of the quoted names; the others ignore it.
      // Only this source's own tables can land on one here: sources whose tables land in
      // one target schema form a claim group, whose clashes between members
      // resolve_claims decides, so the claims are this source's alone.
      const claim_rule rule = claim_rule_of(*target);
      const config::target_namer target_named(*target, *src);
      const sources::shape_hash target_hash = target_settings_hash(*target);
      std::unordered_map<std::string, std::string_view> taken;  // claim -> key
      taken.reserve(selected.size());
      // A run notes each table whose DDL commits ahead of its rows: one function for the
      // source's tables, each job holding a pointer to it.
      std::shared_ptr<const std::function<void(const engine::table_job&, const engine::table_plan&)>>
          note_schema_change;
      if (store != nullptr && !plan_only)
        note_schema_change = std::make_shared<
            const std::function<void(const engine::table_job&, const engine::table_plan&)>>(
            [store, run_id](const engine::table_job& job, const engine::table_plan& plan) {
              record_schema_change(*store, run_id, job.source_name, job.table.qualified(),
                                   display_name(job.target), plan);
              // Fault injection for the crash tests: killed between the DDL and the rows.
              if (const char* c = std::getenv("FLOTILLA_CRASH_AT");
                  c != nullptr && std::string_view(c) == "after_ddl")
                std::raise(SIGKILL);
            });
      // This source's tables that were listed but not selected (a retry's, a filter's).
      std::optional<std::unordered_set<std::string>> unselected;
      if (restricted && store != nullptr) {
        std::unordered_set<std::string_view> chosen(keys.begin(), keys.end());
        unselected.emplace();
        for (const auto& t : cat.tables)
          if (auto k = table_key(src->name, t.qualified()); !chosen.contains(k))
            unselected->insert(std::move(k));
      }
      const auto left_out = [&](const std::string& k) { return unselected && unselected->contains(k); };
      // Tables flotilla.toml names in a section claim their target tables first: of two
      // landing on one, the one the user configured loads, not one an include pattern
      // also picked up (audit.orders beside the configured public.orders).
      for (std::size_t i = 0; i < selected.size(); ++i)
        if (selected[i].section != nullptr) {
          const auto where = target_named(cat.tables[selected[i].index].name);
          taken.try_emplace(
              claim_key(rule, database, dialects::table_ref{where.catalog, where.schema, where.name}),
              keys[i]);
        }
      // A table a section names that the source does not have (FLT-R005: renamed or
      // dropped there) keeps its target table too: another table the patterns pick up
      // would load over the rows the configured one left.
      std::deque<std::string> missing_keys;
      std::unordered_set<std::string> missing_claims;
      std::unordered_map<std::string_view, std::size_t> spec_of;  // key -> its index in out (and selected)
      for (const auto& m : unmatched)
        if (m.where == "section") {
          const auto where = config::target_table(*target, *src, m.name);
          auto claim =
              claim_key(rule, database, dialects::table_ref{where.catalog, where.schema, where.name});
          if (taken.try_emplace(claim, missing_keys.emplace_back(table_key(src->name, m.name))).second)
            missing_claims.insert(std::move(claim));
        }
      // Two tables whose names join to one key (a dot in a schema or table name): the one
      // that loaded its target table last keeps the key, and the state under it, which is
      // that table's; the other is refused. A table that appears later at the source
      // (sales."eu.orders" beside "sales.eu".orders) would otherwise take it over by
      // catalog order. True when `ts` takes it from the table listed before it.
      const auto takes_name_over = [&](actors::table_spec& ts, const std::string& key) {
        if (store == nullptr)
          return false;
        auto& other = out[spec_of.at(key)];
        const auto mine = store->claim_holder(ts.claim);
        if (!mine || !*mine || **mine != key)
          return false;
        const auto theirs = store->claim_holder(other.claim);
        if (theirs && *theirs && **theirs == key)
          return false;  // both recorded (a target table renamed): catalog order decides
        other.conflict = fmt::format(
            "{} names two tables of source '{}' (a schema or table name holds a dot: "
            "\"{}\".\"{}\" and \"{}\".\"{}\"), which share one name in flotilla.toml and in "
            "Flotilla's state, so this one is not copied: the other loaded its target table "
            "before it. Rename one of them at the source",
            other.job.table.qualified(), src->name, other.job.table.schema, other.job.table.name,
            ts.job.table.schema, ts.job.table.name);
        if (const auto it = taken.find(other.claim); it != taken.end() && it->second == key)
          taken.erase(it);
        return true;
      };
      for (std::size_t i = 0; i < selected.size(); ++i) {
        const std::string& name = selected[i].name;
        const std::string& key = keys[i];
        const config::table_config* section = selected[i].section;
        auto policy = config::effective_policy(*project, *src, section);
        // Built in place: a spec is large (a job with its settings and catalog slice).
        spec_of.emplace(key, out.size());
        actors::table_spec& ts = out.emplace_back();
        ts.target_index = target_index;
        if (!holds->empty())
          if (auto h = holds->find(target->name + "\n" + key); h != holds->end())
            ts.held = h->second;
        ts.job.source_name = src->name;
        ts.job.source_location = *location;
        ts.job.target_name = target->name;
        ts.job.run_id = shared_run_id;
        ts.job.project = shared_project;
        ts.job.project_earlier = earlier_names;
        if (store != nullptr)
          ts.job.unrecorded_commit = [store, source = src->name,
                                      table = name](const std::string& run) {
            auto record = store->get_run(run);
            if (!record || !*record)
              return false;  // a run state does not know: nothing to say of its rows
            for (const auto& t : (*record)->tables())
              if (t.source() == source && t.source_table() == table)
                return t.status() != "copied";
            return true;
          };
        else  // no state read (none yet, or refused): no run is known, as a run finds it
          ts.job.unrecorded_commit = [](const std::string&) { return false; };
        if (store != nullptr)
          ts.job.run_known = [store](const std::string& run) {
            auto record = store->get_run(run);
            return record && *record;
          };
        // The catalog is this call's to use up: each table is selected at most once.
        ts.job.table = std::move(cat.tables[selected[i].index]);
        auto where = target_named(ts.job.table.name);
        ts.job.target = dialects::table_ref{std::move(where.catalog), std::move(where.schema),
                                            std::move(where.name)};
        ts.claim = claim_key(rule, database, ts.job.target);
        // The source reads the target's own database, and the table would land on itself
        // (an empty schema template): copied, it would be dropped and made again from
        // itself.
        if (same_database &&
            ts.claim == claim_key(rule, database,
                                  dialects::table_ref{"", ts.job.table.schema, ts.job.table.name}))
          ts.conflict = fmt::format(
              "{} would land on itself: source '{}' reads the database target '{}' writes, and "
              "the target's schema template puts the table where it already is, so it is not "
              "copied. Give [targets.{}] a schema template that lands elsewhere (schema = "
              "\"copy_{{source}}\"), or point the source or the target at another database",
              name, src->name, target->name, target->name);
        else if (same_database && source_tables.contains(ts.claim))
          // Another table of the source itself, which no copy loaded: the user's.
          ts.conflict = fmt::format(
              "{} would overwrite {}, a table of source '{}' itself: the source reads the "
              "database target '{}' writes, and the target's schema template puts the copy "
              "where that table is, so nothing is copied there. Give [targets.{}] a schema "
              "template that lands elsewhere (schema = \"copy_{{source}}\"), or point the "
              "source or the target at another database. (A copy a run made and was killed "
              "before it recorded it reads as such a table: drop it and run again.)",
              name, display_name(ts.job.target), src->name, target->name, target->name);
        else if (!seen_keys.insert(key).second && !takes_name_over(ts, key)) {
          // Its state (watermark, marker, baseline) would be the other table's.
          const auto& other_spec = out[spec_of.at(key)];
          const auto& other = other_spec.job.table;
          bool other_holds = false;
          if (store != nullptr)
            if (const auto h = store->claim_holder(other_spec.claim); h && *h && **h == key)
              other_holds = true;
          ts.conflict = fmt::format(
              "{} names two tables of source '{}' (a schema or table name holds a dot: "
              "\"{}\".\"{}\" and \"{}\".\"{}\"), which share one name in flotilla.toml and "
              "in Flotilla's state, so this one is not copied{}. Rename one of them at the "
              "source",
              name, src->name, ts.job.table.schema, ts.job.table.name, other.schema, other.name,
              other_holds ? ": the other loaded its target table before it" : "");
        } else {
          auto [at, fresh] = taken.try_emplace(ts.claim, key);
          // Of two tables the catalog lists, the one that loaded the target table last keeps
          // it: a table that appears later at the source (alpha.orders beside zeta.orders)
          // would otherwise take it over by sorting first, and replace its rows.
          if (!fresh && at->second != key && store != nullptr && !missing_claims.contains(ts.claim))
            if (const auto earlier = spec_of.find(at->second);
                earlier != spec_of.end() && selected[earlier->second].section == nullptr)
              if (auto h = store->claim_holder(ts.claim); h && *h && **h == key) {
                auto& taken_over = out[earlier->second];
                taken_over.conflict =
                    clash_message(*target, *src, taken_over.job.table.qualified(),
                                  std::string(at->second), taken_over.job.target, key);
                at->second = key;
              }
          if (!fresh && at->second != key)
            ts.conflict =
                missing_claims.contains(ts.claim)
                    ? first_holder_message(*target, key, ts.job.target, std::string(at->second),
                                           false, true)
                    : clash_message(*target, *src, name, key, ts.job.target,
                                    std::string(at->second));
          // A run that leaves tables out: the table that loaded this target table last
          // may be one it does not read. Of another source: that source is not in this
          // run (sources sharing a target schema in one run form a claim group, checked
          // in resolve_claims). Of this source: listed, but not selected.
          else if (restricted && !grouped->contains(src->name)) {
            if (auto holder = store != nullptr ? standing_holder(*project, *store, *all_databases,
                                                                 key, ts.claim)
                                               : std::nullopt) {
              const std::string own = src->name + ".";
              if (!holder->starts_with(own) || left_out(*holder)) {
                ts.conflict = absent_holder_message(*target, key, ts.job.target, *holder, false);
                ts.not_pruned = absent_holder_not_pruned(*holder);  // kept only when pruning
              }
            } else if (auto first = named_first_left_out(*left_out_names, *project, *src,
                                                         ts.claim, store)) {
              ts.conflict = left_out_first_message(*target, key, ts.job.target, *first);
            }
          }
        }
        auto& st = ts.job.settings;
        if (section) {
          st.cursor_column = section->cursor_column;
          // The same source column respelled (`seq` as `SEQ`, which the source's names
          // match alike): the watermark's spelling stands, so the edit costs no full read.
          if (const storage::pb::Watermark* wm =
                  i < states.size() && states[i].watermark ? &*states[i].watermark : nullptr;
              wm != nullptr && !wm->cursor_column().empty() && !st.cursor_column.empty() &&
              wm->cursor_column() != st.cursor_column) {
            const auto* now = ts.job.table.columns.resolve(st.cursor_column);
            if (now != nullptr && now == ts.job.table.columns.resolve(wm->cursor_column()))
              st.cursor_column = wm->cursor_column();
          }
          st.unique_key = section->unique_key;
          for (const auto& d : section->columns)
            st.declared.push_back(schema::column{d.name, d.type, true, false});
        }
        st.read_as_declared = src->adapter == config::adapter_kind::sqlite;
        st.enforced = policy.contract == config::contract_mode::enforced;
        st.on_schema_change =
            policy.on_schema_change == config::schema_change_policy::ignore ? engine::new_column_rule::ignore
            : policy.on_schema_change == config::schema_change_policy::fail
                ? engine::new_column_rule::fail
                : engine::new_column_rule::append_new_columns;
        st.type_change_rebuild =
            policy.type_change_rebuild == config::rebuild_policy::deny ? engine::rebuild_rule::deny
            : policy.type_change_rebuild == config::rebuild_policy::require_confirmation
                ? engine::rebuild_rule::require_confirmation
                : engine::rebuild_rule::allow;
        st.rebuild_confirmed = allow_rebuild;
        st.auto_widen = policy.auto_widen;
        st.governance_gate = policy.governance_gate;
        st.additive_granted = policy.additive_granted;
        st.contract_from = std::string(config::to_string(policy.from.contract));
        st.on_schema_change_from = std::string(config::to_string(policy.from.on_schema_change));
        st.type_change_rebuild_from = std::string(config::to_string(policy.from.type_change_rebuild));
        st.auto_widen_from = std::string(config::to_string(policy.from.auto_widen));
        st.section = config::table_header(src->name, section != nullptr ? section->name : name);
        ts.job.batch_rows = src->batch_rows;
        ts.prune = policy.prune_unchanged && !no_prune;
        // A file's marker, which the target's own writes change (PostgreSQL's are per table).
        ts.source_is_target_file = on_a_target && src->adapter != config::adapter_kind::postgres;
        if (!ts.prune && !ts.conflict.empty())
          ts.not_pruned.clear();
        if (no_prune && policy.prune_unchanged)
          ts.not_pruned = reuse_staged
                              ? "--no-prune, as the run retried had it: every table is copied"
                              : "--no-prune: every table is copied";
        const bool target_missing = missing_files->contains(target->name);
        if (policy.prune_unchanged)  // --no-prune too: the marker it records keeps it
          ts.settings_hash = settings_hash(target_hash, ts.job);
        // Seed 004 skips a dataset whose contract types and prunes its read: declared
        // columns under an enforced contract. Under contract = "none" they only pin types,
        // and every other column the source adds still loads: such a table is gated.
        const bool declared = section != nullptr && !section->columns.empty() &&
                              policy.contract == config::contract_mode::enforced;
        const bool gate_applies =
            store != nullptr && events::drift_gate_applies(policy.on_source_drift, declared);
        const bool gated = gate_applies && !plan_only;
        // The drift gate is a policy too: turned on (or from warn to fail), the table is
        // copied once so its baseline is seeded from what it lands now; a pruned first run
        // would seed it at the next change instead, and never report that change.
        if (gate_applies && !ts.settings_hash.empty()) {
          sources::shape_hash h;
          h.add(ts.settings_hash);
          h.add(fmt::format("gate:{}", config::to_string(policy.on_source_drift)));
          ts.settings_hash = h.hex();
        }
        // Its target table dropped since (by hand, the database created anew): the rows
        // the prune would trust are gone. Asked only of a table whose settings (its target
        // among them) are those of its last copy: another target never had it, and the
        // changed settings say why it is copied.
        if (ts.prune && store != nullptr && states[i].marker &&
            states[i].marker->settings() == ts.settings_hash) {
          if (target_missing) {
            ts.prune = false;
            ts.not_pruned = fmt::format("the target's database file {} is missing", target->path);
          } else if (auto why = presence->missing(*target, ts.job.target)) {
            ts.prune = false;
            ts.not_pruned = std::move(*why);
          } else if (!ts.job.settings.cursor_column.empty() && states[i].watermark &&
                     !states[i].watermark->value().empty()) {
            // There, but its rows may not be those state recorded: restored from an older
            // copy, or loaded by another project since (the commit token says).
            if (auto off = presence->token_off(*target, ts.job.target,
                                               ts.job.settings.cursor_column,
                                               states[i].watermark->value(),
                                               ts.job.project ? *ts.job.project : std::string(),
                                               ts.job.project_earlier ? *ts.job.project_earlier
                                                                      : std::vector<std::string>{})) {
              ts.prune = false;
              ts.not_pruned = std::move(*off);
            }
          }
        }
        // The read shape (seed 004's hints): every column (none listed), and the cursor
        // filter's shape without its value, so an incremental table's watermark never
        // reseeds. A file's columns are read as types the settings decide too: auto_widen
        // reads an outgrown column as its wider type. Turning it on or off changes the
        // read, not the source, so it reseeds the baseline instead of reporting drift that
        // is not there.
        const auto read_hints = [&] {
          std::vector<std::string> filters_shape;
          if (!ts.job.settings.cursor_column.empty())
            filters_shape.push_back(ts.job.settings.cursor_column + " > ?");
          if (ts.job.settings.auto_widen &&
              (src->adapter == config::adapter_kind::csv || src->adapter == config::adapter_kind::json))
            filters_shape.push_back("auto_widen");
          // Declared types read their columns as declared: a pin added, changed or taken
          // out changes the read, not the source.
          if (section != nullptr)
            for (const auto& c : section->columns)
              filters_shape.push_back(
                  fmt::format("column {} as {}", c.name, schema::to_string(c.type)));
          return events::hints_hash({}, filters_shape);
        };
        if (gate_applies && plan_only)  // plan says what the gate would decide
          ts.job.gate = make_drift_gate(store, policy.on_source_drift, src->name, name, run_id,
                                        read_hints(), true);
        ts.job.after_ddl = note_schema_change;
        if (gated) {
          ts.job.gate = make_drift_gate(store, policy.on_source_drift, src->name, name, run_id,
                                        read_hints(), false);
          ts.job.staging_path = (std::filesystem::path(project->state_dir) / "staged" / run_id /
                                 staged_file_name(key))
                                    .string();
        }
        if (store) {
          const storage::table_state* state = &states[i];
          // Loaded in full now, incrementally before: the target's token goes with it.
          ts.job.clear_token = state->watermark && ts.job.settings.cursor_column.empty() &&
                               !state->watermark->cursor_column().empty();
          if (state->watermark && !ts.job.settings.cursor_column.empty() &&
              state->watermark->cursor_column() == ts.job.settings.cursor_column &&
              target_missing) {
            // The rows the watermark stands for went with the file; or they went to another
            // target (the table's settings, its target among them, changed since its last
            // copy), and this one has none of them yet.
            ts.job.watermark_void = true;
            const bool same_target = state->marker && !ts.settings_hash.empty() &&
                                     state->marker->settings() == ts.settings_hash;
            ts.job.warnings.push_back(
                same_target
                    ? fmt::format("the target's database file {} is missing, and with it the "
                                  "rows loaded up to the watermark {} = {}: this run reads "
                                  "every row, as a first run does",
                                  target->path, ts.job.settings.cursor_column,
                                  state->watermark->value())
                    : fmt::format("the target's database file {} does not exist (removed, "
                                  "or the table's target changed since its last copy): this "
                                  "run reads every row into it, as a first run does, and the "
                                  "watermark {} = {} is not applied",
                                  target->path, ts.job.settings.cursor_column,
                                  state->watermark->value()));
          } else if (state->watermark && !ts.job.settings.cursor_column.empty() &&
                     state->watermark->cursor_column() == ts.job.settings.cursor_column &&
                     !state->watermark->source_location().empty() &&
                     state->watermark->source_location() != ts.job.source_location &&
                     !same_source_data(state->watermark->source_location(),
                                       state->watermark->source_location_relative(),
                                       ts.job.source_location, project->state_dir)) {
            // The source points elsewhere now (another file, another database): the
            // watermark is the other data's, and rows of this one below it would never load.
            ts.job.watermark_void = true;
            const auto shown = [](const std::string& location) {
              const auto nl = location.find('\n');
              return nl == std::string::npos ? location : location.substr(nl + 1);
            };
            ts.job.warnings.push_back(fmt::format(
                "the source reads from {} now, where the watermark {} = {} was committed "
                "reading from {}: that watermark belongs to the other data, so this run "
                "reads every row, {}",
                shown(ts.job.source_location), ts.job.settings.cursor_column,
                state->watermark->value(), shown(state->watermark->source_location()),
                k_read_all_again));
          } else if (state->watermark && !ts.job.settings.cursor_column.empty() &&
                     !state->watermark->cursor_column().empty() &&
                     state->watermark->cursor_column() != ts.job.settings.cursor_column) {
            // The cursor column changed: the kept watermark is the other column's, and the
            // table is read in full (the target's token names its column too). Said only of
            // a column the source has: a name it lacks fails the table (FLT-S010), and no
            // read happens to describe.
            if (ts.job.table.columns.resolve(ts.job.settings.cursor_column) != nullptr) {
              ts.job.warnings.push_back(fmt::format(
                  "cursor_column changed from '{}' to '{}' since the watermark {} = {} was "
                  "committed: this run reads every row, {}",
                  state->watermark->cursor_column(), ts.job.settings.cursor_column,
                  state->watermark->cursor_column(), state->watermark->value(), k_read_all_again));
            }
          } else if (state->watermark && !ts.job.settings.cursor_column.empty() &&
                     state->watermark->cursor_column() == ts.job.settings.cursor_column) {
            const std::string& was = state->watermark->source_table_id();
            ts.job.watermark_void =
                !was.empty() && !ts.job.table.identity.empty() && was != ts.job.table.identity;
            if (ts.job.watermark_void)
              ts.job.warnings.push_back(fmt::format(
                  "the source table was created anew since the watermark {} = {} was "
                  "committed (its identity went from {} to {}): that watermark belongs to "
                  "the old table's rows, so this run reads every row, {}",
                  ts.job.settings.cursor_column, state->watermark->value(), was,
                  ts.job.table.identity, k_read_all_again));
            else if (state->watermark->cursor_family() == k_cursor_dropped &&
                     (!ts.job.settings.unique_key.empty() ||
                      !state->watermark->merge_key().empty())) {
              // The cursor column went from the source (a run failed on it, FLT-S010) and
              // is there again: its values are new ones, which may sit below the watermark.
              ts.job.watermark_void = true;
              ts.job.cursor_back_warning = (fmt::format(
                  "the cursor column '{}' was dropped at the source after the watermark {} "
                  "was committed, and is there again: its values are new, so this run reads "
                  "every row again, merged on the table's key",
                  ts.job.settings.cursor_column, state->watermark->value()));
            } else if (rewritten_since(*state->watermark, ts.job.table) &&
                     (!ts.job.settings.unique_key.empty() ||
                      !state->watermark->merge_key().empty())) {
              // Emptied and refilled (TRUNCATE), rows may now sit below the watermark;
              // merged on a key, reading every row again loses and repeats none.
              ts.job.watermark_void = true;
              ts.job.warnings.push_back(fmt::format(
                  "the source table was emptied or rewritten (TRUNCATE, VACUUM FULL, CLUSTER, an "
                  "ALTER TABLE that rewrites it, such as a column type change) "
                  "since the watermark {} = {} was committed: rows it holds now may sit below "
                  "that value, so this run reads every row again (merged on the table's key, "
                  "or replacing every row where its plan copies the table anew)",
                  ts.job.settings.cursor_column, state->watermark->value()));
            } else {
              ts.job.watermark = state->watermark->value();
              ts.job.watermark_run_id = state->watermark->updated_run_id();
              ts.job.watermark_family = state->watermark->cursor_family();
              if (ts.job.watermark_family == k_cursor_dropped) {
                // Keyless: reading every row again would repeat the rows kept.
                ts.job.watermark_family.clear();
                ts.job.cursor_back_warning = (fmt::format(
                    "the cursor column '{0}' was dropped at the source after the watermark "
                    "{0} = {1} was committed, and is there again: rows whose new values sit "
                    "at or below {1} are not read. The table has no key to read it again in "
                    "full by without repeating rows; declare its unique_key, or run `flotilla "
                    "run --full-refresh` for it",
                    ts.job.settings.cursor_column, state->watermark->value()));
              }
              if (state->watermark->merge_key_recorded())
                ts.job.settings.watermark_key = std::vector<std::string>(
                    state->watermark->merge_key().begin(), state->watermark->merge_key().end());
              if (state->watermark->loaded_columns_recorded()) {
                ts.job.settings.watermark_columns = std::vector<std::string>(
                    state->watermark->loaded_columns().begin(),
                    state->watermark->loaded_columns().end());
                if (state->watermark->loaded_column_types_size() ==
                    state->watermark->loaded_columns_size())
                  ts.job.settings.watermark_column_types = std::vector<std::string>(
                      state->watermark->loaded_column_types().begin(),
                      state->watermark->loaded_column_types().end());
              }
              if (rewritten_since(*state->watermark, ts.job.table)) {
                ts.job.generation_changed = true;
                ts.job.generation_warning = fmt::format(
                    "the source table was emptied or rewritten (TRUNCATE, VACUUM FULL, "
                    "CLUSTER, an ALTER TABLE that rewrites it, such as a column type change) "
                    "since the watermark {0} = {1} was committed: rows it holds now "
                    "with {0} at or below {1} are not read. The table has no key to read it "
                    "again in full by without repeating rows; if it was refilled with such "
                    "rows, declare its unique_key, which makes the next run after such a "
                    "change read every row and merge them",
                    ts.job.settings.cursor_column, state->watermark->value());
              }
            }
          }
          if (state->marker) {
            if (state->marker->settings() == ts.settings_hash)
              ts.last_marker = state->marker->marker();
            else
              ts.settings_changed = true;
            if (state->marker->marker().starts_with(storage::displaced_marker_prefix) &&
                ts.prune && ts.not_pruned.empty())
              ts.not_pruned = fmt::format(
                  "{} loaded its target table since this table's last copy",
                  state->marker->marker().substr(storage::displaced_marker_prefix.size()));
          }
          // An incremental table whose target table another table loaded last (this
          // one's copy was displaced since, or this one never loaded it): the rows there
          // and the watermark the target committed with them are the other's. Resuming
          // or merging would mix the two tables' rows; it reads every row and replaces
          // them, as a first load does. One lookup, for incremental tables without a
          // marker of their own.
          // A table never copied by this project (no marker) whose target table no table
          // of it loaded either: a table already there was made by hand, by another tool
          // or project, or before this state directory; the copy says what it does to it.
          std::optional<std::optional<std::string>> holder;
          if (!state->marker && !ts.claim.empty())
            if (auto h = store->claim_holder(ts.claim))
              holder = std::move(*h);
          ts.job.unclaimed_target = holder && !*holder;
          // This project's stream of the source made it (its saved position is there):
          // said as such, with what a batch copy over a stream's table does.
          if (ts.job.unclaimed_target && src->capture == "logical")
            if (auto pos = store->get<storage::pb::CdcPosition>(src->name); pos && *pos)
              ts.job.stream_owned_target = true;
          std::optional<std::string> other;  // the table that loaded the target table last
          if (state->marker &&
              state->marker->marker().starts_with(storage::displaced_marker_prefix)) {
            other = state->marker->marker().substr(storage::displaced_marker_prefix.size());
          } else if (holder && *holder && **holder != key) {
            other = **holder;
          }
          // A full refresh replaces that table's rows: said, as the incremental case below
          // says it (its source gone from flotilla.toml, or its target changed).
          if (other && ts.job.settings.cursor_column.empty() && ts.conflict.empty()) {
            // Why that table no longer holds it, as far as flotilla.toml tells.
            std::string why;
            const auto in_run = std::find(keys.begin(), keys.end(), *other);
            if (in_run != keys.end()) {
              // Its claim: its spec's when built already, else from its catalog entry.
              std::string other_claim;
              if (const auto built = spec_of.find(*other); built != spec_of.end()) {
                other_claim = out[built->second].claim;
              } else {
                const auto where = target_named(
                    cat.tables[selected[static_cast<std::size_t>(in_run - keys.begin())].index].name);
                other_claim = claim_key(rule, database,
                                        dialects::table_ref{where.catalog, where.schema, where.name});
              }
              why = other_claim == ts.claim
                        ? std::string(section != nullptr
                                          ? "it lands on this target table too, and gives way "
                                            "to this table, which flotilla.toml names in a "
                                            "section of its own: it fails FLT-R006"
                                          : "it lands on this target table too, and fails "
                                            "FLT-R006")
                        : std::string("its target changed");
            } else if (std::none_of(project->sources.begin(), project->sources.end(),
                                    [&](const config::source_config& s) {
                                      return other->starts_with(s.name + ".");
                                    })) {
              why = "that table's source is no longer in flotilla.toml";
            } else {
              why = "that table lands elsewhere now, or flotilla.toml no longer selects it";
            }
            ts.job.warnings.push_back(fmt::format(
                "{} loaded the target table {} last: this copy replaces its rows with this "
                "table's ({})",
                *other, display_name(ts.job.target), why));
          }
          if (!ts.job.settings.cursor_column.empty() && ts.conflict.empty()) {
            if (other) {
              ts.job.watermark_void = true;
              ts.job.watermark.reset();
              ts.job.generation_changed = false;
              ts.job.generation_warning.clear();
              ts.job.settings.foreign_rows = true;
              ts.job.warnings.push_back(fmt::format(
                  "{} loaded the target table {} last: its rows, and the watermark committed "
                  "with them, are not this table's, so this run reads every row and "
                  "replaces them, as a first load does",
                  *other, display_name(ts.job.target)));
            }
          }
          if (state->staged) {
            ts.staged_path = state->staged->location();
            // Staged data is reused only as the read that staged it: rows past an old
            // watermark loaded as a full refresh would replace the table with them, and
            // another cursor column would take the old one's value as its watermark.
            const bool same_read = state->staged->hints_hash().empty() ||
                                   state->staged->hints_hash() == read_hints();
            // Staged by the retried run (or a run it retried): another run's staged data
            // is not what the retried run read, nor the shape it failed on.
            const bool of_retried = staged_runs->empty() ||
                                    staged_runs->contains(state->staged->run_id());
            if (reuse_staged && !of_retried)
              ts.job.warnings.push_back(fmt::format(
                  "its staged data is from run {}, which this retry does not retry (the "
                  "run retried staged none of it): it is read from the source again",
                  state->staged->run_id()));
            else if (reuse_staged && !same_read)
              ts.job.warnings.push_back(
                  "its staged data was read under other settings than flotilla.toml's now (its "
                  "cursor_column, auto_widen or declared columns): it is read from the source "
                  "again");
            else if (reuse_staged && state->staged->target() != target->name)
              ts.job.warnings.push_back(fmt::format(
                  "its staged data was read for target '{}', and the table loads into '{}' "
                  "now: it is read from the source again",
                  state->staged->target(), target->name));
            else if (reuse_staged && !std::filesystem::exists(ts.staged_path))
              ts.job.warnings.push_back(fmt::format(
                  "its staged data ({}) is gone: it is read from the source again",
                  ts.staged_path));
            // Nor for a table taking over another's target table: it reads every row.
            if (reuse_staged && of_retried && same_read && !ts.job.settings.foreign_rows &&
                state->staged->target() == target->name &&
                std::filesystem::exists(ts.staged_path)) {
              engine::staged_input in;
              in.path = ts.staged_path;
              if (!state->staged->watermark_value().empty())
                in.watermark = state->staged->watermark_value();
              if (state->staged->has_increment())
                in.increment = state->staged->increment();
              ts.job.reuse = in;
              ts.prune = false;
              if (gated && state->staged->observed_schema_size() > 0)
                ts.job.gate = make_drift_gate(
                    store, policy.on_source_drift, src->name, name, run_id, read_hints(), false,
                    std::make_shared<const events::observed_columns>(
                        state->staged->observed_schema()));
              // The load brings the target to the source as staged, not as it is now: the
              // marker recorded with it is the staged data's, so a later change is copied.
              if (state->staged->marker().empty())
                ts.job.table.marker.reset();
              else
                ts.job.table.marker = state->staged->marker();
            }
          }
          // Under warn the warning repeats every run until accepted: a table whose last
          // observed schema differs from its baseline is never pruned.
          // `plan` says so too.
          if (gate_applies && ts.prune && state->result &&
              state->result->has_observed_schema() && state->baseline &&
              !events::compare_columns(state->baseline->columns(),
                                       state->result->observed_schema())
                   .empty()) {
            ts.prune = false;
            ts.not_pruned = fmt::format(
                "on_source_drift = {}: its last observed source schema differs from its "
                "baseline, so it is {} every run until `flotilla schema accept {}`",
                config::to_string(policy.on_source_drift),
                policy.on_source_drift == config::drift_policy::fail
                    ? "checked again (and failed while the change stands)"
                    : "copied (and warned about)",
                key);
          }
        } else {
          // No state to read (none yet: plan before any run): no run recorded loading it.
          ts.job.unclaimed_target = !ts.claim.empty();
        }
        // --full-refresh: every row read again, replacing the target's; an incremental
        // table's watermark (state's and the target's commit token) starts over from the
        // rows read, as its first load's does.
        if (full_refresh) {
          ts.prune = false;
          ts.not_pruned = "--full-refresh: every table is copied in full";
          if (!ts.job.settings.cursor_column.empty()) {
            ts.job.watermark_void = true;
            ts.job.watermark.reset();
            ts.job.generation_changed = false;
            ts.job.generation_warning.clear();
            ts.job.settings.foreign_rows = true;
            ts.job.warnings.push_back(
                "--full-refresh: every row is read again and replaces the table's rows; the "
                "watermark starts over from them");
          }
        }
      }
      for (const auto& name : gone) {
        actors::table_spec& ts = out.emplace_back();
        ts.target_index = target_index;
        ts.job.source_name = src->name;
        ts.job.target_name = target->name;
        ts.job.table.name = name;
        ts.job.table.absent = true;
        ts.job.table.unreadable = fmt::format(
            "source '{}' no longer has table '{}', which this retry retries, and no staged "
            "data of it is kept: nothing was copied and its target table stays as last "
            "copied. Restore the table at the source (or its file) and run `flotilla retry` "
            "again, or run `flotilla run` to copy the tables the source has now",
            src->name, name);
        auto where = config::target_table(*target, *src, name);
        ts.job.target = dialects::table_ref{where.catalog, where.schema, where.name};
      }
      for (const auto& m : unmatched) {
        actors::table_spec& ts = out.emplace_back();
        ts.target_index = target_index;
        ts.job.source_name = src->name;
        ts.job.target_name = target->name;
        ts.job.table.name = m.name;
        ts.job.table.absent = true;
        ts.job.table.unreadable = fmt::format(
            "source '{}' has no table '{}', which flotilla.toml names {}{}; fix the name, or {}",
            src->name, m.name,
            m.where == "section" ? "in " + config::table_header(src->name, m.name)
                                 : fmt::format("in include of [sources.{}]", src->name),
            m.nearest.empty() ? "" : fmt::format(" (did you mean '{}'?)", m.nearest),
            m.where == "section" ? "remove the section" : "remove it from include");
        auto where = config::target_table(*target, *src, m.name);
        ts.job.target = dialects::table_ref{where.catalog, where.schema, where.name};
      }
      return out;
    };
    if (store != nullptr && !plan_only) {
      // Kept catalogs: a run reads a file source's catalog only when its file marker
      // changed (csv/json: infers only the files whose markers changed). Used only when a
      // table of the source may be pruned (a run that copies every table reads the source
      // anyway); kept by every run that read it.
      const bool may_prune =
          !no_prune && any_table_policy(p, s, [](const config::table_policy& e) {
            return e.prune_unchanged;
          });
      const sources::source_options source = ps.source;
      if (may_prune)
        ps.kept_catalog = [store, source](const std::string& marker, std::string_view version)
            -> std::optional<sources::catalog> {
          // On an arena: a fleet's catalog record holds a few strings per table.
          google::protobuf::Arena arena;
          auto* record = google::protobuf::Arena::CreateMessage<storage::pb::SourceCatalog>(&arena);
          auto found = store->get_into(source.name, *record);
          if (!found || !*found)
            return std::nullopt;  // a cache: an unreadable record only costs the read
          return kept_catalog(*record, source, version, marker);
        };
      if (reuse_staged)
        ps.staged_catalog = [store, src, target, only, staged_runs] {
          return staged_catalog(*store, *src, *target, only, *staged_runs);
        };
      ps.keep_catalog = [store, source, run_id](const sources::catalog& cat, std::string_view version) {
        // A failed write only costs the next run a catalog read.
        if (auto record = catalog_record(cat, source, version, run_id, now_us()))
          (void)store->put(source.name, *record);
        else
          (void)store->remove<storage::pb::SourceCatalog>(source.name);
      };
    }
    const auto at = config::target_table_named(*target, s, "\x01");
    group_keys.push_back(claim_key(claim_rule_of(*target), databases.at(target->name),
                                   dialects::table_ref{at.catalog, at.schema, at.name}));
    if (dialects::canonical_dialect_name(target->dialect) == "sqlite") {
      std::string prefix = at.name.substr(0, at.name.size() - 1);
      for (auto& c : prefix)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      sqlite_prefixes.emplace_back(std::in_place, databases.at(target->name), std::move(prefix));
    } else {
      sqlite_prefixes.emplace_back();
    }
    spec.pipelines.push_back(std::move(ps));
  }
  // SQLite has no schemas: a source's expanded schema prefixes its table names
  // (`<schema>__<table>`), so two sources on one database clash whenever one's prefix
  // begins the other's ("" and "b__": table b__orders of the first is table orders of the
  // second). They form one claim group too, so that the one listed first loads, every run.
  {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < sqlite_prefixes.size(); ++i)
      if (sqlite_prefixes[i])
        order.push_back(i);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return *sqlite_prefixes[a] < *sqlite_prefixes[b];
    });
    // Sorted, the prefixes one begins lie right after it: each joins the group of the
    // nearest earlier prefix that begins it.
    std::vector<std::size_t> stack;
    for (std::size_t i : order) {
      const auto& [db, prefix] = *sqlite_prefixes[i];
      while (!stack.empty() && (sqlite_prefixes[stack.back()]->first != db ||
                                !prefix.starts_with(sqlite_prefixes[stack.back()]->second)))
        stack.pop_back();
      if (!stack.empty())
        group_keys[i] = group_keys[stack.back()];
      stack.push_back(i);
    }
  }
  // Claim groups: two or more sources whose tables land in one target schema.
  {
    std::unordered_map<std::string, std::size_t> members;
    for (const auto& k : group_keys)
      ++members[k];
    std::unordered_map<std::string, std::size_t> group_of;
    for (std::size_t i = 0; i < spec.pipelines.size(); ++i) {
      if (members[group_keys[i]] < 2)
        continue;
      auto [at, fresh] = group_of.try_emplace(group_keys[i], spec.claim_group_sizes.size());
      if (fresh)
        spec.claim_group_sizes.push_back(0);
      ++spec.claim_group_sizes[at->second];
      spec.pipelines[i].claim_group = at->second;
      grouped->insert(spec.pipelines[i].source.name);
    }
    if (!group_of.empty())
      spec.resolve_claims = [&p, databases, store, restricted, left_out_names](
                                const std::vector<std::vector<actors::table_spec>*>& members,
                                const std::vector<std::string>& sources) {
        // The table that loads a target table, as the group's members come in
        // flotilla.toml's order; `kind` says why it may be one that loads nothing here.
        enum class holder_kind { loads, missing, unread };
        std::unordered_map<std::string, std::pair<std::string, holder_kind>> taken;  // claim ->
        std::unordered_map<const config::target_config*, claim_rule> rules;  // one per target
        std::unordered_map<std::string, actors::table_spec*> spec_by_key;  // holders so far
        const auto rule_of = [&](const config::target_config* target) -> const claim_rule& {
          auto rule = rules.find(target);
          if (rule == rules.end())
            rule = rules.emplace(target, claim_rule_of(*target)).first;
          return rule->second;
        };
        std::vector<std::string> read, unread;
        for (std::size_t m = 0; m < members.size(); ++m)
          (members[m] != nullptr ? read : unread).push_back(sources[m]);
        // Every member's selected tables: needed only when a holder may be left out.
        const bool check_holders = (restricted || !unread.empty()) && store != nullptr;
        std::unordered_set<std::string> selected;
        if (check_holders)
          for (auto* tables : members)
            if (tables != nullptr)
              for (auto& t : *tables)
                selected.insert(table_key(t.job.source_name, t.job.table.qualified()));
        for (std::size_t m = 0; m < members.size(); ++m) {
          if (members[m] == nullptr) {
            // Its catalog could not be read: the tables flotilla.toml names in it still
            // come first for their target tables (a run with it readable would load them),
            // also before any of them has loaded once.
            const auto* src = p.find_source(sources[m]);
            const auto* target = src != nullptr ? p.target_of(*src) : nullptr;
            if (target == nullptr || !databases.contains(target->name))
              continue;
            for (const auto& named : config::unmatched_table_names(*src, {}, {})) {
              const auto where = config::target_table(*target, *src, named.name);
              taken.try_emplace(
                  claim_key(rule_of(target), databases.at(target->name),
                            dialects::table_ref{where.catalog, where.schema, where.name}),
                  table_key(src->name, named.name), holder_kind::unread);
            }
            continue;
          }
          for (auto& t : *members[m]) {
            const auto* target = p.find_target(t.job.target_name);
            const auto* src = p.find_source(t.job.source_name);
            if (!t.conflict.empty() || target == nullptr || src == nullptr)
              continue;
            const std::string name = t.job.table.qualified();
            const std::string key = table_key(src->name, name);
            auto [at, fresh] = taken.try_emplace(
                claim_key(rule_of(target), databases.at(target->name), t.job.target), key,
                t.job.table.absent ? holder_kind::missing : holder_kind::loads);
            if (fresh)
              spec_by_key[key] = &t;
            if (!fresh && t.job.table.absent)
              continue;  // fails FLT-R005 alone: it loads nothing
            // The table that loaded the target table last keeps it: a source listed before
            // its own (added to flotilla.toml since) would otherwise take it over.
            if (!fresh && at->second.second == holder_kind::loads && store != nullptr)
              if (auto earlier = spec_by_key.find(at->second.first); earlier != spec_by_key.end())
                if (auto h = store->claim_holder(t.claim); h && *h && **h == key) {
                  actors::table_spec& taken_over = *earlier->second;
                  const auto* other = p.find_source(taken_over.job.source_name);
                  if (other != nullptr) {
                    taken_over.conflict = clash_message(
                        *target, *other, taken_over.job.table.qualified(), at->second.first,
                        taken_over.job.target, key);
                    at->second = {key, holder_kind::loads};
                    spec_by_key[key] = &t;
                    continue;
                  }
                }
            if (!fresh) {
              const auto& [holder, kind] = at->second;
              t.conflict =
                  kind == holder_kind::loads
                      ? clash_message(*target, *src, name, key, t.job.target, holder)
                      : first_holder_message(*target, key, t.job.target, holder,
                                             kind == holder_kind::unread);
              if (kind == holder_kind::unread && t.prune && t.not_pruned.empty())
                t.not_pruned = fmt::format(
                    "{} comes first for its target table, and its source could not be read",
                    holder);
              continue;
            }
            // A table flotilla.toml names in a source listed before, which the run leaves
            // out, when no table loaded the target table yet (named_first_left_out).
            if (auto first = named_first_left_out(*left_out_names, p, *src, t.claim, store)) {
              t.conflict = left_out_first_message(*target, key, t.job.target, *first);
              continue;
            }
            // The table that loaded this target table last, when this run does not read
            // it: its source's catalog could not be read, or the run leaves it out (its
            // source not in the run, or --filter / retry). A member read whole that no
            // longer selects it has given the target table up.
            if (!check_holders)
              continue;
            auto holder = standing_holder(p, *store, databases, key, t.claim);
            if (!holder || selected.contains(*holder))
              continue;
            const std::string holder_source = holder->substr(0, holder->find('.'));
            const bool unreadable = std::ranges::find(unread, holder_source) != unread.end();
            const bool read_whole =
                !restricted && std::ranges::find(read, holder_source) != read.end();
            if (!read_whole) {
              t.conflict = absent_holder_message(*target, key, t.job.target, *holder, unreadable);
              if (t.prune && t.not_pruned.empty())
                t.not_pruned = absent_holder_not_pruned(*holder);
            }
          }
        }
      };
  }
  if (const char* t = std::getenv("FLOTILLA_TRACE_CATALOG"); t != nullptr && *t != '\0' &&
                                                             std::string_view(t) != "0")
    spec.trace_catalogs = true;

  if (store && !options.plan_only) {
    const std::string run_id = options.run_id;
    // Fault injection for the crash tests: FLOTILLA_CRASH_AT=<n>:before_state|after_state
    // kills the process with SIGKILL around the n-th table's state commit.
    static std::atomic<long> commits{0};
    // With a crash point, the commits go one at a time: exactly n are written before it.
    static std::mutex one_at_a_time;
    long crash_at = 0;
    bool crash_before_state = false;
    if (const char* c = std::getenv("FLOTILLA_CRASH_AT")) {
      crash_at = std::strtol(c, nullptr, 10);
      crash_before_state = std::string_view(c).find("before_state") != std::string_view::npos;
    }
    // FLOTILLA_INTERRUPT_AT=<n>: raise SIGINT (a user's Ctrl-C) after the n-th commit;
    // <n>:twice raises SIGTERM twice at once, as `timeout` delivers it.
    long interrupt_at = 0;
    bool interrupt_twice = false;
    if (const char* c = std::getenv("FLOTILLA_INTERRUPT_AT")) {
      interrupt_at = std::strtol(c, nullptr, 10);
      interrupt_twice = std::string_view(c).ends_with(":twice");
    }
    spec.on_committed = [store, run_id, crash_at, crash_before_state, interrupt_at,
                         interrupt_twice, state_dir = p.state_dir](
                            const actors::table_spec& t, actors::table_report& r) {
      std::unique_lock<std::mutex> serial;
      if (crash_at > 0)
        serial = std::unique_lock(one_at_a_time);
      const long n = ++commits;
      if (crash_at > 0 && n == crash_at && crash_before_state)
        std::raise(SIGKILL);
      storage::table_commit c;
      const auto key = table_key(t.job.source_name, r.table);
      if (r.outcome.status == engine::table_status::copied)
        c.claim = t.claim;
      if (t.job.clear_token && r.outcome.status == engine::table_status::copied) {
        // The watermark of the incremental loads before: none now, in the target too.
        storage::pb::Watermark w;
        w.set_updated_run_id(run_id);
        w.set_updated_at_us(now_us());
        c.watermark = w;
      }
      // A table emptied or rewritten keeps its watermark under the new generation, so
      // the change is reported once, even when no row was read past it.
      const bool restamp = !r.outcome.new_watermark && t.job.generation_changed &&
                           t.job.watermark && r.outcome.status == engine::table_status::copied;
      if (!t.job.settings.cursor_column.empty() && (r.outcome.new_watermark || restamp)) {
        storage::pb::Watermark w;
        w.set_cursor_column(t.job.settings.cursor_column);
        w.set_value(r.outcome.new_watermark ? *r.outcome.new_watermark : *t.job.watermark);
        w.set_source_table_id(t.job.table.identity);
        w.set_source_location(t.job.source_location);
        w.set_source_location_relative(location_relative(t.job.source_location, state_dir));
        w.set_source_table_generation(t.job.table.generation);
        w.set_cursor_family(r.outcome.cursor_family.empty() ? t.job.watermark_family
                                                            : r.outcome.cursor_family);
        if (r.outcome.plan) {
          for (const auto& k : r.outcome.plan->unique_key)
            w.add_merge_key(k);
          w.set_merge_key_recorded(true);
          if (!r.outcome.loaded_columns.empty()) {
            for (const auto& c : r.outcome.loaded_columns)
              w.add_loaded_columns(c);
            for (const auto& t : r.outcome.loaded_column_types)
              w.add_loaded_column_types(t);
            w.set_loaded_columns_recorded(true);
          }
        }
        w.set_updated_run_id(run_id);
        w.set_updated_at_us(now_us());
        c.watermark = w;
      }
      if (r.marker) {
        storage::pb::ChangeMarker m;
        m.set_marker(*r.marker);
        m.set_settings(t.settings_hash);
        m.set_run_id(run_id);
        m.set_recorded_at_us(now_us());
        c.marker = m;
      }
      c.result.set_table(display_name(r.target));
      c.result.set_source(r.source);
      c.result.set_source_table(r.table);
      c.result.set_status(std::string(engine::to_string(r.outcome.status)));
      c.result.set_rows(r.outcome.rows);
      c.result.set_run_id(run_id);
      describe_copy(c.result, r.outcome);
      if (c.result.finished_at_us() == 0) {  // not planned, or no end recorded: now
        const std::int64_t finished = now_us();
        c.result.set_finished_at_us(finished);
        c.result.set_started_at_us(finished - r.outcome.duration_us);
      }
      c.result.set_reused_staged(r.outcome.reused_staged);
      if (!r.outcome.plan && !r.outcome.reused_staged)
        c.result.set_load("none");
      if (const auto* v = drift_verdict_of(r.outcome)) {
        if (v->new_baseline)
          c.baseline = *v->new_baseline;
        if (!r.outcome.reused_staged)
          events::record_observation(c.result, *v);
      }
      if (r.outcome.reused_staged && !c.result.has_observed_schema()) {
        // A retry under warn does not check the staged data again (seed 004: its run
        // records no observed schema, so accept has nothing to read), but the table's
        // state keeps what the staged run observed: a drift not accepted yet keeps the
        // table from being pruned, and the next run warns again.
        if (auto e = store->get<storage::pb::StagedEntry>(key); e && *e &&
                                                              (*e)->observed_schema_size() > 0) {
          *c.result.mutable_observed_schema() = (*e)->observed_schema();
          c.result.set_has_observed_schema(true);
          c.result.set_hints_hash((*e)->hints_hash());
        }
      }
      auto st = store->commit_table(key, c);
      if (!st)
        throw std::runtime_error(st.error().message);
      if (!t.staged_path.empty())  // the staged data an earlier run kept is in the target now
        remove_staged_file(t.staged_path);
      if (crash_at > 0 && n == crash_at && !crash_before_state)
        std::raise(SIGKILL);
      if (interrupt_at > 0 && n == interrupt_at) {
        std::raise(interrupt_twice ? SIGTERM : SIGINT);
        if (interrupt_twice)
          std::raise(SIGTERM);
      }
    };
    // A table the drift gate failed keeps its staged data for `flotilla retry`.
    spec.on_failed = [store, run_id](const actors::table_spec& t, actors::table_report& r) {
      // The cursor column gone from the source (FLT-S010 naming it, the catalog without
      // it): its watermark is marked, so that a column added again under its name, whose
      // values are new, is not read past the old one's watermark (see the state read).
      if (const auto& cursor = t.job.settings.cursor_column;
          !cursor.empty() && r.outcome.plan && r.outcome.plan->error &&
          r.outcome.plan->error->code == "FLT-S010" && r.outcome.plan->error->column == cursor &&
          t.job.table.columns.count_folded(cursor) == 0) {
        storage::pb::Watermark w;
        const auto key = table_key(t.job.source_name, r.table);
        if (auto found = store->get_into(key, w);
            found && *found && w.cursor_column() == cursor && w.cursor_family() != k_cursor_dropped) {
          w.set_cursor_family(std::string(k_cursor_dropped));
          if (auto st = store->put(key, w); !st)
            throw std::runtime_error(st.error().message);
        }
      }
      // Seed 004: the first gated run seeds the baseline from what it observed, whether
      // or not the table then loaded; otherwise the next run would seed again, from a
      // schema that may have drifted meanwhile, and let it through unseen.
      // (One its plan refused seeds nothing: evaluate_source_drift.)
      const auto* v = drift_verdict_of(r.outcome);
      if (v != nullptr && v->new_baseline && !r.outcome.reused_staged)
        if (auto st = store->put(v->dataset, *v->new_baseline); !st)
          throw std::runtime_error(st.error().message);
      if (!r.outcome.staged)
        return;
      const auto& staged = *r.outcome.staged;
      storage::pb::StagedEntry e;
      e.set_run_id(run_id);
      e.set_target(t.job.target_name);
      e.set_location(staged.path);
      e.set_rows(staged.rows);
      if (staged.watermark)
        e.set_watermark_value(*staged.watermark);
      e.set_increment(staged.increment);
      // What the gate observed (its valueless columns in their baseline types), so a
      // retry checks what the run checked.
      *e.mutable_observed_schema() =
          v != nullptr && !v->observed.empty()
              ? v->observed
              : events::to_observed(staged.observed.columns.empty() ? staged.columns
                                                                    : staged.observed);
      if (v != nullptr)
        e.set_hints_hash(v->hints_hash);
      e.set_created_at_us(now_us());
      if (r.marker)
        e.set_marker(*r.marker);
      if (r.outcome.reused_staged) {
        // Failed again on retry: the entry it came from stays as it was.
        return;
      }
      auto st = store->put(table_key(t.job.source_name, r.table), e);
      if (!st)
        throw std::runtime_error(st.error().message);
      if (!t.staged_path.empty() && t.staged_path != staged.path)
        remove_staged_file(t.staged_path);  // an older run's staged data, now replaced
    };
  }
  return spec;
}

}  // namespace flotilla::cli
