#include "config/load.hpp"

#include "config/secret_key.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "config/selection.hpp"
#include "config/validate.hpp"

namespace flotilla::config {
namespace {

/// What is wrong with a Kafka broker list ("host:port,host:port"), as librdkafka reads
/// each: [plaintext|ssl|sasl_plaintext|sasl_ssl://]host[:port], `[::1]:9092` for IPv6.
/// Empty: nothing.
std::string broker_problem(const std::string& brokers) {
  std::size_t from = 0;
  while (from <= brokers.size()) {
    const auto comma = std::min(brokers.find(',', from), brokers.size());
    std::string one = brokers.substr(from, comma - from);
    from = comma + 1;
    const auto first = one.find_first_not_of(' ');
    one = first == std::string::npos ? "" : one.substr(first, one.find_last_not_of(' ') - first + 1);
    if (one.empty())
      return "an empty broker between commas";
    std::string rest = one;
    if (const auto scheme = rest.find("://"); scheme != std::string::npos) {
      std::string proto = rest.substr(0, scheme);
      for (auto& ch : proto)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (proto != "plaintext" && proto != "ssl" && proto != "sasl_plaintext" && proto != "sasl_ssl")
        return fmt::format("'{}' has the protocol '{}', which Kafka does not have (plaintext, "
                           "ssl, sasl_plaintext, sasl_ssl; or none: host:port)",
                           one, rest.substr(0, scheme));
      rest = rest.substr(scheme + 3);
    }
    std::string host = rest, port;
    if (!rest.empty() && rest.front() == '[') {  // [::1]:9092
      const auto close = rest.find(']');
      host = close == std::string::npos ? "" : rest.substr(0, close + 1);
      if (close != std::string::npos && close + 1 < rest.size())
        port = rest[close + 1] == ':' ? rest.substr(close + 2) : "x";
    } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (port.empty())
        port = "x";
    }
    const bool host_ok = !host.empty() && host.find_first_of(" /\t") == std::string::npos;
    const bool port_ok =
        port.empty() ||
        (port.size() <= 5 &&
         std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }) &&
         std::stoul(port) >= 1 && std::stoul(port) <= 65535);
    if (!host_ok || !port_ok)
      return fmt::format("'{}' is not host:port", one);
  }
  return {};
}


/// Why a Pub/Sub emulator address is not host:port (a port 1 to 65535 required); empty
/// when it is.
std::string emulator_host_problem(const std::string& h) {
  if (h.find("://") != std::string::npos)
    return fmt::format("'{}' has a scheme", h);
  const auto colon = h.rfind(':');
  if (colon == std::string::npos || colon + 1 == h.size())
    return fmt::format("'{}' has no port", h);
  const std::string host = h.substr(0, colon), port = h.substr(colon + 1);
  if (host.empty() || host.find_first_of(" /\t") != std::string::npos)
    return fmt::format("'{}' is not host:port", h);
  if (port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }) ||
      std::stoul(port) < 1 || std::stoul(port) > 65535)
    return fmt::format("'{}' has no port from 1 to 65535 after its last ':'", h);
  return {};
}

/// A URI dsn whose part before the host holds '@' more than once: a password with an
/// '@' not percent-encoded. libpq takes what follows the first '@' as the host, and its
/// error messages would show the rest of the password.
bool dsn_has_stray_at(std::string_view dsn) {
  const auto scheme = dsn.find("://");
  if (scheme == std::string_view::npos)
    return false;
  const auto start = scheme + 3;
  const auto end = dsn.find_first_of("/?", start);
  const auto authority = dsn.substr(start, end == std::string_view::npos ? dsn.npos : end - start);
  return std::count(authority.begin(), authority.end(), '@') > 1;
}

constexpr std::string_view stray_at_message =
    "the dsn holds '@' more than once before its host: a password with '@' is written "
    "percent-encoded ('@' as %40; ':' as %3A and '/' as %2F), otherwise what follows the "
    "first '@' is taken for the host and connection errors would show part of the password";


namespace fs = std::filesystem;
using keys = std::vector<std::string_view>;

/// "CSV", "Parquet" or "JSON" when `path` names a data file by its extension (compressed
/// or not), which DuckDB opens as an in-memory database over the file; empty otherwise.
std::string data_file_kind(std::string_view path) {
  fs::path p{std::string(path)};
  auto ext = [](const fs::path& q) {
    std::string e = q.extension().string();
    std::transform(e.begin(), e.end(), e.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return e;
  };
  std::string e = ext(p);
  if (e == ".gz" || e == ".zst" || e == ".bz2" || e == ".lz4" || e == ".xz")
    e = ext(p.stem());
  if (e == ".csv" || e == ".tsv")
    return "CSV";
  if (e == ".parquet")
    return "Parquet";
  if (e == ".json" || e == ".jsonl" || e == ".ndjson")
    return "JSON";
  return "";
}

// ---- the keys each section accepts ---------------------------------------------------

const keys top_keys{"project", "targets", "sources", "resilience", "policy", "events", "io"};
const keys policy_keys{"contract",        "on_schema_change", "type_change_rebuild",
                       "auto_widen",      "on_source_drift",  "prune_unchanged"};
const keys project_keys{"name",       "state_dir",        "keep_runs",
                        "contract",   "on_schema_change", "type_change_rebuild",
                        "auto_widen", "on_source_drift",  "prune_unchanged"};
const keys target_keys{"dialect", "path", "dsn", "database", "catalog", "schema", "block_size",
                       "in_place_max_bytes"};
const keys source_keys{"adapter",         "path",       "dsn",          "capture",
                       "target",          "stream_to",  "tags",         "include",      "exclude",
                       "batch_rows",      "tables",     "contract",     "on_schema_change",
                       "type_change_rebuild", "auto_widen", "on_source_drift", "prune_unchanged"};
const keys table_keys{"description",         "cursor_column", "unique_key",
                      "columns",             "contract",      "on_schema_change",
                      "type_change_rebuild", "auto_widen",    "on_source_drift",
                      "prune_unchanged"};
const keys table_only_keys{"description", "cursor_column", "unique_key", "columns"};
const keys resilience_keys{"auto_apply_additive_drift"};
const keys governance_keys{"grants"};
const keys events_keys{"kafka", "pubsub"};
const keys kafka_keys{"brokers", "topic", "format", "settings"};
const keys pubsub_keys{"project", "topic", "emulator_host", "format"};
const keys kafka_target_keys{"dialect", "brokers", "topic", "format", "settings"};
const keys pubsub_target_keys{"dialect", "project", "topic", "emulator_host", "format"};
const keys io_keys{"max_connections_per_endpoint"};

/// Where each section's keys go, for a key written in the wrong one ("grants" under
/// [resilience] belongs in [policy]).
struct key_home {
  const keys* set;
  std::string_view where;
};
const key_home key_homes[] = {
    {&project_keys, "[project]"},
    {&target_keys, "a target section [targets.NAME]"},
    {&source_keys, "a source section [sources.NAME]"},
    {&table_keys, "a table section [sources.NAME.tables.\"TABLE\"]"},
    {&resilience_keys, "[resilience]"},
    {&governance_keys, "[policy]"},
    {&io_keys, "[io]"},
    {&kafka_keys, "[events.kafka]"},
    {&pubsub_keys, "[events.pubsub]"},
};

const keys known_grants{"schema_change.additive"};
const keys reserved_tags{"source", "table"};

template <class E>
struct named {
  std::string_view name;
  E value;
};

constexpr std::array<named<contract_mode>, 2> contract_names{{
    {"none", contract_mode::none},
    {"enforced", contract_mode::enforced},
}};
constexpr std::array<named<schema_change_policy>, 3> schema_change_names{{
    {"append_new_columns", schema_change_policy::append_new_columns},
    {"ignore", schema_change_policy::ignore},
    {"fail", schema_change_policy::fail},
}};
constexpr std::array<named<rebuild_policy>, 3> rebuild_names{{
    {"require_confirmation", rebuild_policy::require_confirmation},
    {"allow", rebuild_policy::allow},
    {"deny", rebuild_policy::deny},
}};
constexpr std::array<named<drift_policy>, 3> drift_names{{
    {"ignore", drift_policy::ignore},
    {"warn", drift_policy::warn},
    {"fail", drift_policy::fail},
}};
constexpr std::array<named<adapter_kind>, 5> adapter_names{{
    {"sqlite", adapter_kind::sqlite},
    {"duckdb", adapter_kind::duckdb},
    {"postgres", adapter_kind::postgres},
    {"csv", adapter_kind::csv},
    {"json", adapter_kind::json},
}};
constexpr std::array<named<event_format>, 2> format_names{{
    {"json", event_format::json},
    {"protobuf", event_format::protobuf},
}};

template <class E, std::size_t N>
std::string join_names(const std::array<named<E>, N>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + std::string{n.name};
  return out;
}

std::string join(const keys& ks) {
  std::string out;
  for (auto k : ks)
    out += (out.empty() ? "" : ", ") + std::string{k};
  return out;
}

bool contains(const keys& ks, std::string_view k) {
  return std::find(ks.begin(), ks.end(), k) != ks.end();
}

/// `text` with the passwords a DSN may hold shown as ***: a URI's `user:password@`, and
/// `password=...` and `sslpassword=...` (key=value DSNs and URI query parameters).
std::string without_passwords(std::string text) {
  static const std::regex uri(R"((://[^/:@\s'"]*:)[^@\s'"]*@)");
  static const std::regex keyword(R"(((?:^|[\s?&'"])(?:ssl)?password\s*=\s*)('[^']*'|[^\s&'"]+))",
                                  std::regex::icase);
  if (text.find('@') == std::string::npos && text.find("assword") == std::string::npos &&
      text.find("ASSWORD") == std::string::npos)
    return text;
  text = std::regex_replace(text, uri, "$1***@");
  return std::regex_replace(text, keyword, "$1***");
}

// Names of sources, targets and tags: they end up in schema names, state keys and
// `source.table` arguments, so no dots, spaces or quotes.
bool valid_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

std::string_view type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

// The value in TOML (a string quoted and escaped), short enough for one line.
std::string render_toml(const toml::node& n) {
  std::ostringstream os;
  n.visit([&os](const auto& v) { os << v; });
  std::string out = os.str();
  std::replace(out.begin(), out.end(), '\n', ' ');
  if (out.size() > 80)
    out = out.substr(0, 77) + "...";
  return out;
}

// The value as written, short enough for one line; a string as it is.
std::string render(const toml::node& n) {
  if (auto* s = n.as_string())
    return s->get();
  return render_toml(n);
}

position pos_of(const toml::source_region& r) {
  return position{r.begin.line, r.begin.column};
}

bool before(const toml::source_region& a, const toml::source_region& b) {
  return std::tie(a.begin.line, a.begin.column) < std::tie(b.begin.line, b.begin.column);
}

// The entries of a table in the order they were written (toml++ keeps them sorted by key).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> out;
  out.reserve(t.size());
  for (auto&& [k, v] : t)
    out.emplace_back(&k, &v);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return before(a.first->source(), b.first->source());
  });
  return out;
}

class loader {
 public:
  loader(std::string file, fs::path dir, project& p)
      : file_(std::move(file)), dir_(std::move(dir)), p_(p) {}

  std::vector<diagnostic> take() { return std::move(out_); }

  void report(errc code, const toml::source_region& at, std::string key, std::string value,
              std::string allowed, std::string message) {
    // A DSN's password is not repeated: diagnostics go to the terminal, to the JSON a
    // scheduler keeps and to CI logs.
    out_.push_back(diagnostic{code, severity::error, file_, at.begin.line, at.begin.column,
                              std::move(key), without_passwords(std::move(value)),
                              std::move(allowed), without_passwords(std::move(message))});
  }

  void load(const toml::table& root) {
    check_keys(root, "", top_keys);
    const toml::table* proj = section(root, "project", "");
    if (proj)
      load_project(*proj);
    if (const auto* t = section(root, "targets", ""))
      for (auto [k, v] : in_file_order(*t))
        if (const auto* tt = sub_section(*k, *v, "targets"))
          load_target(k->str(), *tt);
    if (const auto* s = section(root, "sources", ""))
      for (auto [k, v] : in_file_order(*s))
        if (const auto* st = sub_section(*k, *v, "sources"))
          load_source(k->str(), *st);
    resolve_targets(root);
    if (const auto* r = section(root, "resilience", "")) {
      check_keys(*r, "resilience", resilience_keys);
      if (auto b = boolean(*r, "auto_apply_additive_drift", "resilience"))
        p_.governance.auto_apply_additive_drift = *b;
    }
    if (const auto* g = section(root, "policy", ""))
      load_grants(*g);
    if (const auto* e = section(root, "events", ""))
      load_events(*e);
    if (const auto* io = section(root, "io", "")) {
      check_keys(*io, "io", io_keys);
      if (auto n = integer(*io, "max_connections_per_endpoint", "io", 1, 1024))
        p_.io.max_connections_per_endpoint = static_cast<std::uint32_t>(*n);
    }
  }

 private:
  // ---- generic readers ---------------------------------------------------------------

  void check_keys(const toml::table& t, const std::string& path, const keys& allowed,
                  const keys* elsewhere = nullptr, std::string_view elsewhere_hint = {}) {
    for (auto&& [k, v] : t) {
      if (contains(allowed, k.str()))
        continue;
      const std::string key = key_path_append(path, k.str());
      std::string message;
      const std::string homes = homes_of(k.str(), allowed);
      const std::string near_key = nearest(k.str(), allowed);
      if (v.is_table() && !near_key.empty() && near_key != k.str()) {
        // A section under a misspelt name ([target.w] for [targets.w]): the near key, not
        // a scalar of the same name elsewhere (a source's `target`).
        message = fmt::format("unknown key '{}'; did you mean '{}'?", k.str(), near_key);
      } else if (elsewhere && contains(*elsewhere, k.str())) {
        message = fmt::format("'{}' does not belong here; it belongs in {}", k.str(), elsewhere_hint);
      } else if (!homes.empty() && path.starts_with("targets.") &&
                 homes.find("[targets.NAME]") != std::string::npos) {
        // A key of other targets' dialects (path on a kafka target, say).
        message = fmt::format("'{}' is not a key of this target's dialect; it takes {}", k.str(),
                              join(allowed));
      } else if (!homes.empty()) {
        message = path.empty() ? fmt::format("'{}' is not a top-level key; it belongs in {}",
                                             k.str(), homes)
                               : fmt::format("'{}' does not belong in [{}]; it belongs in {}",
                                             k.str(), path, homes);
      } else if (auto near = nearest(k.str(), allowed); !near.empty()) {
        message = fmt::format("unknown key '{}'; did you mean '{}'?", k.str(), near);
      } else {
        message = fmt::format("unknown key '{}'", k.str());
      }
      report(errc::unknown_key, k.source(), key, std::string{k.str()}, join(allowed), message);
    }
  }

  /// Every other section that takes `key`, for a key written in the wrong place.
  static std::string homes_of(std::string_view key, const keys& allowed) {
    std::string homes;
    for (const auto& h : key_homes)
      if (h.set != &allowed && contains(*h.set, key))
        homes += (homes.empty() ? "" : " or ") + std::string(h.where);
    return homes;
  }

  void wrong_type(const toml::node& n, const std::string& key, std::string_view expected) {
    report(errc::wrong_type, n.source(), key, render(n), std::string{expected},
           fmt::format("expected {}, found {} {}", expected, type_name(n), render_toml(n)));
  }

  const toml::table* section(const toml::table& parent, std::string_view name,
                             const std::string& path) {
    const toml::node* n = parent.get(name);
    if (!n)
      return nullptr;
    if (auto* t = n->as_table())
      return t;
    wrong_type(*n, key_path_append(path, name), "a table");
    return nullptr;
  }

  // A named sub-section ([targets.NAME], [sources.NAME]).
  const toml::table* sub_section(const toml::key& k, const toml::node& v, std::string_view parent) {
    const std::string path = key_path({parent, k.str()});
    if (!valid_name(k.str()))
      report(errc::invalid_name, k.source(), path, std::string{k.str()},
             "letters, digits, '_' and '-'",
             fmt::format("'{}' is not a valid {} name", k.str(),
                         parent == "targets" ? "target" : "source"));
    if (auto* t = v.as_table())
      return t;
    wrong_type(v, path, fmt::format("a table ([{}])", path));
    return nullptr;
  }

  std::optional<std::string> string(const toml::table& t, std::string_view key,
                                    const std::string& path, bool non_empty = true) {
    const toml::node* n = t.get(key);
    if (!n)
      return std::nullopt;
    const std::string kp = key_path_append(path, key);
    auto* s = n->as_string();
    if (!s) {
      wrong_type(*n, kp, "a string");
      return std::nullopt;
    }
    auto value = expand_environment(s->get(), n->source(), kp);
    if (!value)
      return std::nullopt;
    if (non_empty && value->empty()) {
      report(errc::out_of_range, n->source(), kp, "", "a non-empty string",
             fmt::format("'{}' must not be empty", key));
      return std::nullopt;
    }
    return value;
  }

  /// `${NAME}` in a string value is the environment variable NAME (`${NAME:-default}`:
  /// the default when NAME is unset or empty); `$${` is a literal `${`. Secrets such as a
  /// DSN's password stay out of flotilla.toml that way. An unset variable without a
  /// default is FLT-C024, naming the key and the variable.
  std::optional<std::string> expand_environment(const std::string& text,
                                                const toml::source_region& at,
                                                const std::string& kp) {
    if (text.find('$') == std::string::npos)
      return text;
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "$${") == 0) {
        out += "${";
        i += 3;
        continue;
      }
      if (text.compare(i, 2, "${") != 0) {
        out += text[i++];
        continue;
      }
      const auto close = text.find('}', i + 2);
      if (close == std::string::npos) {
        report(errc::environment_variable, at, kp, text, "${NAME} or ${NAME:-default}",
               "a '${' placeholder is not closed by '}' (write $${ for a literal ${)");
        return std::nullopt;
      }
      const std::string inner = text.substr(i + 2, close - i - 2);
      const auto dash = inner.find(":-");
      const std::string name = inner.substr(0, dash);
      const bool valid_name =
          !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
          std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
          });
      if (!valid_name) {
        report(errc::environment_variable, at, kp, text, "${NAME} or ${NAME:-default}",
               fmt::format("'${{{}}}' names no environment variable (letters, digits and _)",
                           inner));
        return std::nullopt;
      }
      // ${A:-${B:-x}}: the first '}' would end the outer placeholder, and its default
      // would be taken for the text "${B:-x", then "}". Not nested: said.
      if (dash != std::string::npos && inner.find("${", dash) != std::string::npos) {
        report(errc::environment_variable, at, kp, text, "${NAME} or ${NAME:-default}",
               fmt::format("the default of ${{{}}} holds another placeholder, which is not "
                           "expanded there (placeholders do not nest): give a plain default, "
                           "or set {}",
                           name, name));
        return std::nullopt;
      }
      // Set but empty is a value (an empty password, say), as the shell's ${NAME} has
      // it; only ${NAME:-default} takes the default for it.
      const char* set = std::getenv(name.c_str());
      if (set != nullptr && (*set != '\0' || dash == std::string::npos)) {
        out += set;
      } else if (dash != std::string::npos) {
        out += inner.substr(dash + 2);
      } else {
        report(errc::environment_variable, at, kp, text, "a set environment variable",
               fmt::format("environment variable {} is not set; export it, or give a default "
                           "(${{{}:-value}})",
                           name, name));
        return std::nullopt;
      }
      i = close + 1;
    }
    return out;
  }

  std::optional<bool> boolean(const toml::table& t, std::string_view key, const std::string& path) {
    const toml::node* n = t.get(key);
    if (!n)
      return std::nullopt;
    if (auto* b = n->as_boolean())
      return b->get();
    wrong_type(*n, key_path_append(path, key), "a boolean (true or false)");
    return std::nullopt;
  }

  std::optional<std::int64_t> integer(const toml::table& t, std::string_view key,
                                      const std::string& path, std::int64_t lo, std::int64_t hi) {
    const toml::node* n = t.get(key);
    if (!n)
      return std::nullopt;
    const std::string kp = key_path_append(path, key);
    auto* i = n->as_integer();
    if (!i) {
      wrong_type(*n, kp, "an integer");
      return std::nullopt;
    }
    if (i->get() < lo || i->get() > hi) {
      report(errc::out_of_range, n->source(), kp, render(*n), fmt::format("{} to {}", lo, hi),
             fmt::format("{} is out of range", i->get()));
      return std::nullopt;
    }
    return i->get();
  }

  // An array of strings; `single` also accepts one string.
  std::optional<std::vector<std::string>> strings(const toml::table& t, std::string_view key,
                                                  const std::string& path, bool single) {
    const toml::node* n = t.get(key);
    if (!n)
      return std::nullopt;
    const std::string kp = key_path_append(path, key);
    const std::string_view expected = single ? "a string or an array of strings" : "an array of strings";
    if (single)
      if (auto* s = n->as_string()) {
        // Environment variables as in any string value.
        auto value = expand_environment(s->get(), n->source(), kp);
        if (!value)
          return std::nullopt;
        return std::vector<std::string>{std::move(*value)};
      }
    auto* a = n->as_array();
    if (!a) {
      wrong_type(*n, kp, expected);
      return std::nullopt;
    }
    std::vector<std::string> out;
    bool ok = true;
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      if (auto* s = e.as_string()) {
        const std::string ek = fmt::format("{}[{}]", kp, i);
        auto value = expand_environment(s->get(), e.source(), ek);
        if (!value) {
          ok = false;
        } else if (value->empty()) {
          report(errc::out_of_range, e.source(), ek, "", "a non-empty string",
                 "empty name in the list");
          ok = false;
        } else {
          out.push_back(std::move(*value));
        }
      } else {
        wrong_type(e, fmt::format("{}[{}]", kp, i), "a string");
        ok = false;
      }
    }
    if (!ok)
      return std::nullopt;
    return out;
  }

  template <class E, std::size_t N>
  std::optional<E> choice(const toml::table& t, std::string_view key, const std::string& path,
                          const std::array<named<E>, N>& names, std::string_view what) {
    const toml::node* n = t.get(key);
    if (!n)
      return std::nullopt;
    const std::string kp = key_path_append(path, key);
    auto* s = n->as_string();
    if (!s) {
      wrong_type(*n, kp, fmt::format("a string, one of {}", join_names(names)));
      return std::nullopt;
    }
    for (const auto& e : names)
      if (e.name == s->get())
        return e.value;
    // "postgresql" names the postgres adapter as it names the postgres dialect.
    if constexpr (std::is_same_v<E, adapter_kind>)
      if (s->get() == "postgresql")
        return adapter_kind::postgres;
    keys candidates;
    for (const auto& e : names)
      candidates.push_back(e.name);
    auto near = nearest(s->get(), candidates);
    report(errc::invalid_value, n->source(), kp, s->get(), join_names(names),
           near.empty() ? fmt::format("unknown {} '{}'", what, s->get())
                        : fmt::format("unknown {} '{}'; did you mean '{}'?", what, s->get(), near));
    return std::nullopt;
  }

  // on_source_drift has its own code (seed 004): any value other than ignore|warn|fail is
  // an error, and the policy is then treated as ignore.
  std::optional<drift_policy> source_drift(const toml::table& t, const std::string& path) {
    const toml::node* n = t.get("on_source_drift");
    if (!n)
      return std::nullopt;
    if (auto* s = n->as_string())
      for (const auto& e : drift_names)
        if (e.name == s->get())
          return e.value;
    std::string near;
    if (auto* s = n->as_string()) {
      keys candidates;
      for (const auto& e : drift_names)
        candidates.push_back(e.name);
      near = nearest(s->get(), candidates);
    }
    report(errc::invalid_source_drift, n->source(), key_path_append(path, "on_source_drift"),
           render(*n), join_names(drift_names),
           fmt::format("invalid on_source_drift '{}' in {}{} (the rest of the file is still "
                       "checked, as if it were ignore; nothing runs until it is one of the "
                       "values allowed)",
                       render(*n), file_,
                       near.empty() ? std::string() : fmt::format("; did you mean '{}'?", near)));
    return drift_policy::ignore;
  }

  policy_overrides policies(const toml::table& t, const std::string& path) {
    policy_overrides o;
    o.contract = choice(t, "contract", path, contract_names, "contract");
    o.on_schema_change = choice(t, "on_schema_change", path, schema_change_names, "on_schema_change");
    o.type_change_rebuild = choice(t, "type_change_rebuild", path, rebuild_names, "type_change_rebuild");
    o.auto_widen = boolean(t, "auto_widen", path);
    o.on_source_drift = source_drift(t, path);
    o.prune_unchanged = boolean(t, "prune_unchanged", path);
    return o;
  }

  /// A `path` (or `state_dir`) that is no file path: a leading `~`, which nothing
  /// expands (a directory named `~` would be made), or a URI (a DSN put in `path`).
  /// Reported; true when the value can be used.
  bool usable_path(const toml::table& t, std::string_view key, const std::string& path,
                   const std::string& value) {
    const toml::node* n = t.get(key);
    const auto at = n != nullptr ? n->source() : t.source();
    if (value == "~" || value.starts_with("~/")) {
      report(errc::invalid_value, at, key_path_append(path, key), value, "a file path",
             fmt::format("a leading '~' is not expanded in {}: it would name a directory "
                         "called '~'; write ${{HOME}}{} (environment variables are expanded)",
                         key, value.substr(1)));
      return false;
    }
    if (const auto scheme = value.find("://"); scheme != std::string::npos && scheme > 0 &&
                                               value.find('/') > scheme) {
      report(errc::invalid_value, at, key_path_append(path, key), value, "a file path",
             fmt::format("{} holds a URI, not a file path: {} names a local file (or "
                         "directory); a PostgreSQL server is reached with adapter = "
                         "\"postgres\" (dialect, for a target) and dsn = \"...\"",
                         key, key));
      return false;
    }
    return true;
  }

  std::string resolve_path(const std::string& p) const {
    fs::path path{p};
    if (path.is_relative())
      path = dir_ / path;
    return path.lexically_normal().string();
  }

  // ---- sections ----------------------------------------------------------------------

  void load_project(const toml::table& t) {
    check_keys(t, "project", project_keys);
    if (auto n = string(t, "name", "project")) {
      p_.name = *n;
      p_.name_given = true;
    }
    if (auto d = string(t, "state_dir", "project"); d && usable_path(t, "state_dir", "project", *d))
      p_.state_dir = resolve_path(*d);
    if (auto k = integer(t, "keep_runs", "project", 0, 1'000'000))
      p_.keep_runs = static_cast<std::uint32_t>(*k);
    p_.policy = policies(t, "project");
  }

  void load_target(std::string_view name, const toml::table& t) {
    const std::string path = key_path({"targets", name});
    if (const auto* d = t.get_as<std::string>("dialect")) {
      const std::string kind = d->get() == "pub/sub" ? "pubsub" : d->get();
      if (kind == "kafka" || kind == "pubsub") {
        load_event_target(name, t, kind, path);
        return;
      }
    }
    check_keys(t, path, target_keys);
    target_config tc;
    tc.name = std::string{name};
    tc.at = pos_of(t.source());
    if (auto d = string(t, "dialect", path)) {
      tc.dialect = canonical_dialect(*d);
      if (tc.dialect.empty()) {
        keys all;
        for (auto x : executed_dialects)
          all.push_back(x);
        for (auto x : plan_only_dialects)
          all.push_back(x);
        auto near = nearest(*d, all);
        report(errc::invalid_value, t.get("dialect")->source(), key_path_append(path, "dialect"), *d,
               "duckdb, postgres (postgresql, pg), sqlite (sqlite3); plan-only: snowflake, "
               "bigquery (bq), databricks (delta, spark), trino (presto)",
               near.empty() ? fmt::format("unknown dialect '{}'", *d)
                            : fmt::format("unknown dialect '{}'; did you mean '{}'?", *d, near));
      }
    } else if (!t.contains("dialect")) {
      report(errc::missing_key, t.source(), key_path_append(path, "dialect"), "",
             "duckdb, postgres, sqlite, snowflake, bigquery, databricks, trino",
             fmt::format("target '{}' has no dialect", name));
    }
    tc.executed = is_executed_dialect(tc.dialect);
    auto file = string(t, "path", path);
    auto dsn = string(t, "dsn", path);
    if (file && usable_path(t, "path", path, *file))
      tc.path = resolve_path(*file);
    if (dsn) {
      tc.dsn = *dsn;
      if (dsn_has_stray_at(tc.dsn))
        report(errc::invalid_value, t.get("dsn")->source(), key_path_append(path, "dsn"), "",
               "", std::string(stray_at_message));
    }
    const bool file_dialect = tc.dialect == "duckdb" || tc.dialect == "sqlite";
    if (file_dialect) {
      if (!t.contains("path"))
        report(errc::missing_key, t.source(), key_path_append(path, "path"), "",
               "a database file path",
               fmt::format("target '{}' ({}) needs path = \"<database file>\"", name, tc.dialect));
      if (const auto* n = t.get("dsn"))
        report(errc::not_applicable, n->source(), key_path_append(path, "dsn"), render(*n), "path",
               fmt::format("dsn does not apply to a {} target; use path", tc.dialect));
      if (file && tc.dialect == "duckdb") {
        if (auto kind = data_file_kind(*file); !kind.empty())
          report(errc::invalid_value, t.get("path")->source(), key_path_append(path, "path"),
                 *file, "a DuckDB database file, e.g. warehouse.duckdb",
                 fmt::format("target '{}' (duckdb) names a {} file: DuckDB opens such a path as "
                             "an in-memory database over that file, so nothing loaded into it "
                             "would be kept; name a database file instead (warehouse.duckdb)",
                             name, kind));
      }
    } else if (!tc.dialect.empty()) {
      if (tc.dialect == "postgres" && !t.contains("dsn"))
        report(errc::missing_key, t.source(), key_path_append(path, "dsn"), "",
               "a libpq connection string",
               fmt::format("target '{}' (postgres) needs dsn = \"postgresql://...\"", name));
      if (const auto* n = t.get("path"))
        report(errc::not_applicable, n->source(), key_path_append(path, "path"), render(*n), "dsn",
               fmt::format("path does not apply to a {} target", tc.dialect));
    }
    auto db = string(t, "database", path);
    auto cat = string(t, "catalog", path);
    if (db && cat)
      report(errc::conflicting_keys, t.get("catalog")->source(), key_path_append(path, "catalog"),
             *cat, "one of database or catalog",
             "database and catalog name the same thing; set only one");
    tc.database = db ? *db : cat ? *cat : "";
    // An executed target is one database already (a file, or the DSN's database): a
    // catalog beside it is for the plan-only warehouses.
    if (!tc.database.empty() &&
        (tc.dialect == "duckdb" || tc.dialect == "sqlite" || tc.dialect == "postgres")) {
      const char* which = db ? "database" : "catalog";
      report(errc::not_applicable, t.get(which)->source(), key_path_append(path, which),
             tc.database, "snowflake, bigquery, databricks or trino targets",
             fmt::format("{} does not apply to a {} target: {}; remove it", which, tc.dialect,
                         tc.dialect == "postgres"
                             ? "the database is the one the dsn names (postgresql://.../DBNAME)"
                             : "the database is the file `path` names"));
      tc.database.clear();
    }
    if (auto s = string(t, "schema", path, false)) {
      tc.schema = *s;
      tc.schema_at = pos_of(t.get("schema")->source());
    }
    if (const auto* n = t.get("block_size")) {
      if (tc.dialect != "duckdb" && !tc.dialect.empty())
        report(errc::not_applicable, n->source(), key_path_append(path, "block_size"), render(*n),
               "a duckdb target",
               fmt::format("block_size applies to a duckdb target, not {}", tc.dialect));
      else if (auto b = integer(t, "block_size", path, 16384, 262144)) {
        if ((*b & (*b - 1)) != 0)
          report(errc::invalid_value, n->source(), key_path_append(path, "block_size"), render(*n),
                 "16384, 32768, 65536, 131072 or 262144",
                 fmt::format("block_size {} is not a power of two", *b));
        else
          tc.block_size = static_cast<std::uint32_t>(*b);
      }
    }
    if (const auto* n = t.get("in_place_max_bytes")) {
      if (tc.dialect != "postgres" && !tc.dialect.empty())
        report(errc::not_applicable, n->source(), key_path_append(path, "in_place_max_bytes"),
               render(*n), "a postgres target",
               fmt::format("in_place_max_bytes applies to a postgres target, not {}", tc.dialect));
      else if (auto b = integer(t, "in_place_max_bytes", path, 0, std::int64_t{1} << 50))
        tc.in_place_max_bytes = static_cast<std::uint64_t>(*b);
    }
    p_.targets.push_back(std::move(tc));
  }

  /// `[targets.NAME]` with dialect kafka or pubsub: an event stream for `flotilla stream`.
  void load_event_target(std::string_view name, const toml::table& t, const std::string& kind,
                         const std::string& path) {
    event_target_config ec;
    ec.name = std::string{name};
    ec.kind = kind;
    ec.at = pos_of(t.source());
    if (kind == "kafka") {
      check_keys(t, path, kafka_target_keys);
      ec.kafka = kafka_of(t, path);
    } else {
      check_keys(t, path, pubsub_target_keys);
      ec.pubsub = pubsub_of(t, path);
    }
    p_.event_targets.push_back(std::move(ec));
  }

  void load_source(std::string_view name, const toml::table& t) {
    const std::string path = key_path({"sources", name});
    check_keys(t, path, source_keys, &table_only_keys,
               fmt::format("a table section: [{}.tables.NAME]", path));
    source_config sc;
    sc.name = std::string{name};
    sc.at = pos_of(t.source());
    bool adapter_known = false;
    if (auto a = choice(t, "adapter", path, adapter_names, "adapter")) {
      sc.adapter = *a;
      adapter_known = true;
    } else if (!t.contains("adapter")) {
      report(errc::missing_key, t.source(), key_path_append(path, "adapter"), "",
             join_names(adapter_names), fmt::format("source '{}' has no adapter", name));
    }
    if (auto f = string(t, "path", path); f && usable_path(t, "path", path, *f))
      sc.path = resolve_path(*f);
    if (auto d = string(t, "dsn", path)) {
      sc.dsn = *d;
      if (dsn_has_stray_at(sc.dsn))
        report(errc::invalid_value, t.get("dsn")->source(), key_path_append(path, "dsn"), "",
               "", std::string(stray_at_message));
    }
    if (adapter_known) {
      const std::string_view an = to_string(sc.adapter);
      if (is_file_adapter(sc.adapter)) {
        if (!t.contains("path"))
          report(errc::missing_key, t.source(), key_path_append(path, "path"), "",
                 "a file or directory path",
                 fmt::format("source '{}' ({}) needs path = \"...\"", name, an));
        if (const auto* n = t.get("dsn"))
          report(errc::not_applicable, n->source(), key_path_append(path, "dsn"), render(*n),
                 "path", fmt::format("dsn does not apply to a {} source; use path", an));
      } else {
        if (!t.contains("dsn"))
          report(errc::missing_key, t.source(), key_path_append(path, "dsn"), "",
                 "a libpq connection string",
                 fmt::format("source '{}' (postgres) needs dsn = \"postgresql://...\"", name));
        if (const auto* n = t.get("path"))
          report(errc::not_applicable, n->source(), key_path_append(path, "path"), render(*n),
                 "dsn", "path does not apply to a postgres source; use dsn");
      }
    }
    if (auto c = string(t, "capture", path)) {
      const toml::node& n = *t.get("capture");
      if (*c != "logical")
        report(errc::invalid_value, n.source(), key_path_append(path, "capture"), *c, "logical",
               fmt::format("unknown capture '{}'", *c));
      else if (adapter_known && sc.adapter != adapter_kind::postgres)
        report(errc::not_applicable, n.source(), key_path_append(path, "capture"), *c,
               "postgres sources only",
               fmt::format("capture does not apply to a {} source", to_string(sc.adapter)));
      else
        sc.capture = *c;
    }
    if (auto tg = string(t, "target", path))
      sc.target = *tg;
    if (auto more = strings(t, "stream_to", path, false))
      sc.stream_to = std::move(*more);
    if (const auto* tags = section(t, "tags", path)) {
      sc.tags_at = pos_of(t.get("tags")->source());
      load_tags(sc, *tags, key_path_append(path, "tags"));
    }
    if (auto inc = strings(t, "include", path, true))
      sc.include = std::move(*inc);
    if (auto exc = strings(t, "exclude", path, true)) {
      sc.exclude = std::move(*exc);
      sc.exclude_at = pos_of(t.get("exclude")->source());
    }
    if (auto b = integer(t, "batch_rows", path, 1, 10'000'000))
      sc.batch_rows = static_cast<std::uint32_t>(*b);
    sc.policy = policies(t, path);
    if (const auto* tables = section(t, "tables", path)) {
      const std::string tpath = key_path_append(path, "tables");
      sc.tables.reserve(tables->size());
      std::unordered_map<std::string, std::string> seen;
      for (auto [k, v] : in_file_order(*tables))
        load_table(sc, seen, k->str(), *k, *v, tpath);
      index_tables(sc);
    }
    p_.sources.push_back(std::move(sc));
  }

  void load_tags(source_config& sc, const toml::table& t, const std::string& path) {
    for (auto [k, v] : in_file_order(t)) {
      const std::string kp = key_path_append(path, k->str());
      if (!valid_name(k->str()) || contains(reserved_tags, k->str())) {
        report(errc::invalid_name, k->source(), kp, std::string{k->str()},
               "letters, digits, '_' and '-'; not 'source' or 'table'",
               fmt::format("'{}' cannot be a tag name", k->str()));
        continue;
      }
      if (auto* s = v->as_string()) {
        // A tag lands in schema names (templates): a NUL byte ends a name in every engine.
        if (s->get().find('\0') != std::string::npos) {
          std::string shown;
          for (const char c : s->get())
            shown += c == '\0' ? std::string("\\u0000") : std::string(1, c);
          report(errc::invalid_name, v->source(), kp, shown, "text without NUL bytes",
                 fmt::format("tag '{}' holds a NUL byte (\\u0000), which no schema or table "
                             "name can hold; remove it",
                             k->str()));
          // Still the source's tag: a schema template using it is not also "no such tag".
          sc.tags.emplace(std::string{k->str()}, shown);
          continue;
        }
        sc.tags.emplace(std::string{k->str()}, s->get());
      } else {
        wrong_type(*v, kp, "a string");
        sc.tags.emplace(std::string{k->str()}, std::string());  // as above
      }
    }
  }

  // `seen`: lower-cased section names of the source so far -> the name as written.
  void load_table(source_config& sc, std::unordered_map<std::string, std::string>& seen,
                  std::string_view name, const toml::key& k, const toml::node& v,
                  const std::string& tables_path) {
    const std::string path = key_path_append(tables_path, name);
    auto* t = v.as_table();
    if (!t) {
      wrong_type(v, path, fmt::format("a table ([{}])", path));
      return;
    }
    std::string folded{name};
    for (char& c : folded)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (auto [it, fresh] = seen.emplace(std::move(folded), std::string{name}); !fresh)
      report(errc::duplicate_name, k.source(), path, std::string{name}, "one section per table",
             fmt::format("table '{}' already has a section ('{}')", name, it->second));
    // `[sources.s.tables.public.orders]` (unquoted) nests a table `orders` in `public`.
    for (auto&& [ck, cv] : *t)
      if (cv.is_table() && !contains(table_keys, ck.str())) {
        const std::string dotted = fmt::format("{}.{}", name, ck.str());
        // A mistyped key holding an inline table (`colums = { ... }`) is a typo, not a
        // nested table name.
        const auto near = nearest(ck.str(), table_keys);
        const std::string homes = homes_of(ck.str(), table_keys);
        report(errc::unknown_key, ck.source(), key_path_append(path, ck.str()),
               std::string{ck.str()}, join(table_keys),
               !homes.empty()
                   ? fmt::format("'{}' does not belong in a table section; it belongs in {}",
                                 ck.str(), homes)
               : !near.empty()
                   ? fmt::format("unknown key '{}'; did you mean '{}'?", ck.str(), near)
                   : fmt::format("'{}' is not a key of a table section; a dotted table name "
                                 "must be quoted: tables.\"{}\"",
                                 ck.str(), dotted));
      }
    check_table_keys(*t, path);

    table_config tc;
    tc.name = std::string{name};
    tc.at = pos_of(t->source());
    tc.cursor_column_at = tc.unique_key_at = tc.on_source_drift_at = tc.at;
    if (const toml::node* n = t->get("on_source_drift"))
      tc.on_source_drift_at = pos_of(n->source());
    if (auto d = string(*t, "description", path, false))
      tc.description = *d;
    if (auto c = string(*t, "cursor_column", path)) {
      tc.cursor_column = *c;
      tc.cursor_column_at = pos_of(t->get("cursor_column")->source());
    }
    if (auto u = strings(*t, "unique_key", path, true)) {
      tc.unique_key_at = pos_of(t->get("unique_key")->source());
      // An empty key reads as "no key", which it is not: a table without unique_key merges
      // on the source's primary key, where it has one.
      if (u->empty())
        report(errc::out_of_range, t->get("unique_key")->source(),
               key_path_append(path, "unique_key"), "[]", "one column or more",
               "'unique_key' must name at least one column; leave the key out to merge on the "
               "source's primary key (or, without one, to append)");
      tc.unique_key = std::move(*u);
      check_duplicates(tc.unique_key, *t->get("unique_key"), key_path_append(path, "unique_key"));
    }
    if (const auto* cols = section(*t, "columns", path))
      load_columns(tc, *cols, key_path_append(path, "columns"));
    tc.policy = policies(*t, path);
    sc.tables.push_back(std::move(tc));
  }

  // Unknown keys of a table section, except nested tables already reported above.
  void check_table_keys(const toml::table& t, const std::string& path) {
    for (auto&& [k, v] : t) {
      if (contains(table_keys, k.str()) || v.is_table())
        continue;
      auto near = nearest(k.str(), table_keys);
      const std::string homes = homes_of(k.str(), table_keys);
      report(errc::unknown_key, k.source(), key_path_append(path, k.str()), std::string{k.str()},
             join(table_keys),
             !homes.empty()
                 ? fmt::format("'{}' does not belong in a table section; it belongs in {}",
                               k.str(), homes)
             : near.empty() ? fmt::format("unknown key '{}'", k.str())
                            : fmt::format("unknown key '{}'; did you mean '{}'?", k.str(), near));
    }
  }

  void check_duplicates(const std::vector<std::string>& names, const toml::node& at,
                        const std::string& path) {
    // Column names are unique ignoring case (as the engines compare them): `id` and `ID`
    // are one column listed twice.
    for (std::size_t i = 0; i < names.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (iequals(names[i], names[j])) {
          report(errc::duplicate_name, at.source(), path, names[i], "each column once",
                 names[i] == names[j]
                     ? fmt::format("column '{}' is listed twice", names[i])
                     : fmt::format("column '{}' is listed twice (also as '{}': column names "
                                   "are unique ignoring case)",
                                   names[i], names[j]));
          break;
        }
  }

  void load_columns(table_config& tc, const toml::table& cols, const std::string& path) {
    tc.columns.reserve(cols.size());
    std::vector<std::string> seen;  // every name, declared well or not: each twice reported
    for (auto [k, v] : in_file_order(cols)) {
      const std::string kp = key_path_append(path, k->str());
      if (k->str().empty()) {
        report(errc::out_of_range, k->source(), kp, "", "a column name",
               "a column declared with an empty name; name the source column it types");
        ++tc.columns_rejected;
        continue;
      }
      bool twice = false;
      for (const auto& c : seen)
        if (!twice && iequals(c, k->str())) {
          report(errc::duplicate_name, k->source(), kp, std::string{k->str()},
                 "column names unique ignoring case",
                 fmt::format("column '{}' is declared twice (also as '{}')", k->str(), c));
          twice = true;
        }
      seen.emplace_back(k->str());
      auto* s = v->as_string();
      if (!s) {
        wrong_type(*v, kp, "a portable type name such as \"decimal(18,2)\"");
        ++tc.columns_rejected;
        continue;
      }
      auto type = schema::parse_type(s->get());
      if (!type) {
        report(errc::invalid_column_type, v->source(), kp, s->get(),
               std::string{schema::valid_type_names()}, type.error().message);
        ++tc.columns_rejected;
        continue;
      }
      if (twice) {
        ++tc.columns_rejected;
        continue;
      }
      tc.columns.push_back(declared_column{std::string{k->str()}, *type, s->get()});
    }
  }

  // Every source must name a defined target; without `target`, the only one is used.
  void resolve_targets(const toml::table& root) {
    if (p_.sources.empty())
      return;
    keys names;
    for (const auto& t : p_.targets)
      names.push_back(t.name);
    for (const auto& t : p_.event_targets)
      names.push_back(t.name);
    const toml::table* sources = root.get_as<toml::table>("sources");
    if (names.empty()) {
      const toml::node* at = root.get("targets");
      report(errc::missing_key, at ? at->source() : sources->source(), "targets", "",
             "[targets.NAME] with a dialect",
             "sources are defined but no target is: add a [targets.NAME] section");
      return;
    }
    for (auto& s : p_.sources) {
      const toml::table* st = sources->get_as<toml::table>(s.name);
      const std::string path = key_path({"sources", s.name, "target"});
      check_stream_to(s, st, names);
      if (s.target.empty()) {
        if (st && st->contains("target"))
          continue;  // wrong type, already reported
        if (p_.targets.size() == 1) {
          s.target = p_.targets.front().name;
        } else if (p_.targets.empty() && p_.event_targets.size() == 1) {
          s.target = p_.event_targets.front().name;
          check_event_target(s, st, path, s.target, "target");
        } else {
          report(errc::unknown_target, st ? st->source() : toml::source_region{}, path, "",
                 join(names),
                 fmt::format("source '{}' names no target and {} targets are defined; set target",
                             s.name, names.size()));
        }
        continue;
      }
      if (p_.find_target(s.target))
        continue;
      if (p_.find_event_target(s.target)) {
        check_event_target(s, st, path, s.target, "target");
        continue;
      }
      auto near = nearest(s.target, names);
      report(errc::unknown_target, st->get("target")->source(), path, s.target, join(names),
             near.empty() ? fmt::format("source '{}' names target '{}', which is not defined",
                                        s.name, s.target)
                          : fmt::format("source '{}' names target '{}', which is not defined; did "
                                        "you mean '{}'?",
                                        s.name, s.target, near));
    }
  }

  /// An event stream receives changes only from `flotilla stream`.
  void check_event_target(const source_config& s, const toml::table* st, const std::string& path,
                          const std::string& target, std::string_view key) {
    if (s.capture == "logical")
      return;
    const auto* et = p_.find_event_target(target);
    const toml::node* at = st ? st->get(key) : nullptr;
    report(errc::not_applicable, at ? at->source() : st ? st->source() : toml::source_region{},
           path, target, "a source with capture = \"logical\"",
           fmt::format("source '{}' names target '{}', a {} event stream; only a source with "
                       "capture = \"logical\" publishes to it (flotilla stream). Set capture "
                       "or name a warehouse target",
                       s.name, target, et ? et->kind : "kafka"));
  }

  void check_stream_to(const source_config& s, const toml::table* st, const keys& names) {
    if (s.stream_to.empty())
      return;
    const std::string path = key_path({"sources", s.name, "stream_to"});
    const toml::array* a = st ? st->get_as<toml::array>("stream_to") : nullptr;
    if (s.capture != "logical") {
      report(errc::not_applicable, a ? a->source() : toml::source_region{}, path, "",
             "a source with capture = \"logical\"",
             fmt::format("stream_to applies to sources with capture = \"logical\" only "
                         "(flotilla stream); source '{}' has none",
                         s.name));
      return;
    }
    for (std::size_t i = 0; i < s.stream_to.size(); ++i) {
      const auto& n = s.stream_to[i];
      if (p_.find_target(n) || p_.find_event_target(n))
        continue;
      auto near = nearest(n, names);
      const toml::node* at = a ? a->get(i) : nullptr;
      report(errc::unknown_target, at ? at->source() : toml::source_region{},
             fmt::format("{}[{}]", path, i), n, join(names),
             near.empty() ? fmt::format("source '{}' streams to target '{}', which is not defined",
                                        s.name, n)
                          : fmt::format("source '{}' streams to target '{}', which is not "
                                        "defined; did you mean '{}'?",
                                        s.name, n, near));
    }
  }

  void load_grants(const toml::table& t) {
    check_keys(t, "policy", governance_keys);
    auto grants = strings(t, "grants", "policy", false);
    if (!grants)
      return;
    const toml::array& a = *t.get_as<toml::array>("grants");
    for (std::size_t i = 0; i < grants->size(); ++i) {
      const std::string& g = (*grants)[i];
      if (contains(known_grants, g)) {
        p_.governance.grants.push_back(g);
        continue;
      }
      auto near = nearest(g, known_grants);
      report(errc::unknown_grant, a.get(i)->source(), fmt::format("policy.grants[{}]", i), g,
             join(known_grants),
             near.empty() ? fmt::format("unknown grant '{}'", g)
                          : fmt::format("unknown grant '{}'; did you mean '{}'?", g, near));
    }
  }

  void load_events(const toml::table& e) {
    check_keys(e, "events", events_keys);
    if (const auto* k = section(e, "kafka", "events")) {
      check_keys(*k, "events.kafka", kafka_keys);
      p_.events.kafka = kafka_of(*k, "events.kafka");
    }
    if (const auto* ps = section(e, "pubsub", "events")) {
      check_keys(*ps, "events.pubsub", pubsub_keys);
      p_.events.pubsub = pubsub_of(*ps, "events.pubsub");
    }
  }

  kafka_options kafka_of(const toml::table& k, const std::string& path) {
    kafka_options ko;
    if (const auto* b = k.get("brokers")) {
      if (b->is_array()) {
        if (auto list = strings(k, "brokers", path, false)) {
          for (const auto& x : *list)
            ko.brokers += (ko.brokers.empty() ? "" : ",") + x;
          if (ko.brokers.empty())
            report(errc::out_of_range, b->source(), key_path_append(path, "brokers"), "[]",
                   "host:port, ...", "brokers must not be empty");
        }
      } else if (auto s = string(k, "brokers", path)) {
        ko.brokers = *s;
      }
    } else {
      report(errc::missing_key, k.source(), key_path_append(path, "brokers"), "",
             "\"host:port,host:port\" or an array of them", "Kafka needs brokers");
    }
    // Each broker as librdkafka reads one, said here rather than as a parse error once a
    // run has waited its whole delivery timeout.
    if (const auto* b = k.get("brokers"); b != nullptr && !ko.brokers.empty())
      if (const std::string bad = broker_problem(ko.brokers); !bad.empty())
        report(errc::invalid_value, b->source(), key_path_append(path, "brokers"), ko.brokers,
               "host:port, ... (each optionally with plaintext://, ssl://, sasl_plaintext:// "
               "or sasl_ssl://)",
               fmt::format("brokers: {}; write each broker as host:port (127.0.0.1:9092), "
                           "separated by commas",
                           bad));
    required_string(k, "topic", path, ko.topic, "Kafka needs a topic");
    // Kafka's own rule for topic names, said here rather than as a broker's refusal at
    // the first delivery.
    if (!ko.topic.empty())
      if (const auto* n = k.get("topic")) {
        const bool legal = std::all_of(ko.topic.begin(), ko.topic.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '.' || c == '_' || c == '-';
        });
        if (!legal || ko.topic.size() > 249 || ko.topic == "." || ko.topic == "..")
          report(errc::invalid_value, n->source(), key_path_append(path, "topic"), ko.topic,
                 "letters, digits, '.', '_' and '-', at most 249 of them",
                 "a Kafka topic name has only ASCII letters, digits, '.', '_' and '-' (at most "
                 "249, and not '.' or '..'): rename the topic");
      }
    if (auto f = choice(k, "format", path, format_names, "event format"))
      ko.format = *f;
    if (const auto* s = section(k, "settings", path)) {
      const std::string sp = key_path_append(path, "settings");
      for (auto&& [sk, sv] : *s) {
        if (sv.is_table() || sv.is_array()) {
          if (names_secret(sk.str()))  // the value is not repeated (sasl.password = ["..."])
            report(errc::wrong_type, sv.source(), key_path_append(sp, sk.str()), "***",
                   "a string, number or boolean",
                   fmt::format("expected a string, number or boolean, found {} (its value not "
                               "repeated: the key names a secret)",
                               type_name(sv)));
          else
            wrong_type(sv, key_path_append(sp, sk.str()), "a string, number or boolean");
          continue;
        }
        // A string setting names environment variables as any string value does (a
        // sasl.password kept out of the file).
        std::optional<std::string> value = render(sv);
        if (sv.is_string())
          value = expand_environment(*value, sv.source(), key_path_append(sp, sk.str()));
        if (!value)
          continue;
        ko.settings.emplace(std::string{sk.str()}, *value);
        // The brokers come from `brokers`: the same list said again is no conflict.
        if ((sk.str() == "bootstrap.servers" || sk.str() == "metadata.broker.list") &&
            !ko.brokers.empty() && *value != ko.brokers)
          report(errc::conflicting_keys, sv.source(), key_path_append(sp, sk.str()), *value,
                 ko.brokers,
                 fmt::format("{} differs from brokers ({}): set the brokers with brokers only",
                             sk.str(), ko.brokers));
      }
    }
    return ko;
  }

  pubsub_options pubsub_of(const toml::table& ps, const std::string& path) {
    pubsub_options po;
    required_string(ps, "project", path, po.project, "Pub/Sub needs a project");
    required_string(ps, "topic", path, po.topic, "Pub/Sub needs a topic");
    // Ids, not paths: the service builds projects/<project>/topics/<topic> from them.
    for (const auto& [key, value] : {std::pair<std::string_view, const std::string*>{"project", &po.project},
                                     {"topic", &po.topic}})
      if (value->find('/') != std::string::npos)
        if (const auto* n = ps.get(key))
          report(errc::invalid_value, n->source(), key_path_append(path, key), *value,
                 fmt::format("a {} id, not a path", key),
                 fmt::format("give the {0}'s id, not its full name: {0} = \"{1}\"", key,
                             value->substr(value->rfind('/') + 1)));
    // A project id has lower-case letters, digits and hyphens (a domain-scoped one,
    // "example.com:proj", a dot and a colon): said here, not as the service's HTTP 400.
    if (po.project.size() && po.project.find('/') == std::string::npos)
      if (const auto* n = ps.get("project"))
        if (!std::all_of(po.project.begin(), po.project.end(), [](unsigned char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                     c == ':';
            }))
          report(errc::invalid_value, n->source(), key_path_append(path, "project"), po.project,
                 "a Google Cloud project id",
                 "a Google Cloud project id has only lower-case ASCII letters, digits and "
                 "hyphens (\"my-project-123\"): give the project's id, not its name");
    // The service's rule for topic ids, said here rather than as its refusal after a run
    // copied every table (the emulator applies it too).
    if (po.topic.size() && po.topic.find('/') == std::string::npos)
      if (const auto* n = ps.get("topic")) {
        const auto& t = po.topic;
        const bool letter = std::isalpha(static_cast<unsigned char>(t.front())) != 0;
        const bool legal = std::all_of(t.begin(), t.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '+' ||
                 c == '%';
        });
        std::string head = t.substr(0, 4);
        for (auto& c : head)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const bool goog = head == "goog";
        if (!letter || !legal || goog || t.size() < 3 || t.size() > 255)
          report(errc::invalid_value, n->source(), key_path_append(path, "topic"), t,
                 "a Pub/Sub topic id",
                 "a Pub/Sub topic id starts with a letter, has 3 to 255 ASCII letters, digits and "
                 "'-', '_', '.', '~', '+', '%', and does not start with 'goog': rename the topic");
      }
    if (auto h = string(ps, "emulator_host", path)) {
      po.emulator_host = *h;
      // host:port, as the emulator prints it: a path, a space or a missing port would only
      // fail a run's delivery, after its tables, with a message about something else.
      if (const std::string why = emulator_host_problem(*h); !why.empty())
        report(errc::invalid_value, ps.get("emulator_host")->source(),
               key_path_append(path, "emulator_host"), *h, "host:port",
               fmt::format("{}: give the emulator's address as host:port, as it prints it "
                           "(\"127.0.0.1:8085\"), with no scheme, path or spaces",
                           why));
    }
    if (auto f = choice(ps, "format", path, format_names, "event format"))
      po.format = *f;
    return po;
  }

  void required_string(const toml::table& t, std::string_view key, const std::string& path,
                       std::string& out, std::string_view message) {
    if (auto s = string(t, key, path))
      out = *s;
    else if (!t.contains(key))
      report(errc::missing_key, t.source(), key_path_append(path, key), "", "a non-empty string",
             std::string{message});
  }

  std::string file_;
  fs::path dir_;
  project& p_;
  std::vector<diagnostic> out_;
};

fs::path config_dir(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(fs::path{path}, ec);
  if (ec)
    abs = fs::path{path};
  return abs.lexically_normal().parent_path();
}

load_result finish(std::shared_ptr<project> p, std::vector<diagnostic> ds) {
  std::stable_sort(ds.begin(), ds.end(), [](const diagnostic& a, const diagnostic& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  return load_result{std::move(p), std::move(ds)};
}

std::shared_ptr<project> empty_project(const std::string& path) {
  auto p = std::make_shared<project>();
  p->config_path = path;
  const fs::path dir = config_dir(path);
  p->config_dir = dir.string();
  p->name = dir.filename().string();
  p->state_dir = (dir / ".flotilla").string();
  return p;
}

}  // namespace

load_result load_project_text(std::string_view toml_text, const std::string& path) {
  auto p = empty_project(path);
  std::vector<diagnostic> ds;
  toml::table root;
  try {
    root = toml::parse(toml_text, path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    // The parser's words for a string left open at the end of its line: what to do, too.
    const std::string_view what = e.description();
    // An array or inline table left open runs into the end of the file, or into the next
    // key (read as a value): said before the string hint, which fits a line break only.
    const bool open_array = what.find("parsing array") != std::string_view::npos ||
                            what.find("parsing inline table") != std::string_view::npos;
    const bool open_string = !open_array &&
                             (what.find("unescaped control characters") != std::string_view::npos ||
                              what.find("encountered end-of-file") != std::string_view::npos);
    const bool bare_word = what.find("could not determine value type") != std::string_view::npos ||
                           (what.find("parsing boolean") != std::string_view::npos);
    const char* hint =
        open_array ? " (an array [ or inline table { not closed? close it with ] or } before "
                     "the next key)"
        : open_string ? " (a string not closed on its line? end it with its closing quote)"
        : bare_word   ? " (a text value is written in double quotes: dialect = \"duckdb\"; or "
                        "an array [ opened above and not closed?)"
                      : "";
    ds.push_back(diagnostic{errc::syntax_error, severity::error, path, b.line, b.column, "", "",
                            "", fmt::format("invalid TOML: {}{}", what, hint)});
    return finish(std::move(p), std::move(ds));
  }
  loader l{path, fs::path{p->config_dir}, *p};
  l.load(root);
  ds = l.take();
  auto cross = validate(*p);
  ds.insert(ds.end(), std::make_move_iterator(cross.begin()), std::make_move_iterator(cross.end()));
  return finish(std::move(p), std::move(ds));
}

load_result load_project(const std::string& path) {
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  std::ifstream in;
  const bool directory = exists && fs::is_directory(path, ec);
  int open_errno = 0;
  if (exists && !directory) {
    errno = 0;
    in.open(path, std::ios::binary);
    open_errno = errno;
  }
  if (!in.is_open()) {
    diagnostic d;
    d.code = errc::file_not_found;
    d.file = path;
    d.value = path;
    if (!exists && path == "flotilla.toml")  // the default: no -c given
      d.message = fmt::format("config file '{}' not found; pass -c <path> or create "
                              "flotilla.toml in the working directory",
                              path);
    else if (!exists)
      d.message = fmt::format("config file '{}' not found (from the working directory '{}'); "
                              "check the path given with -c, or create flotilla.toml in the "
                              "working directory and leave -c out",
                              path, fs::current_path(ec).string());
    else if (directory)
      d.message = fmt::format("cannot read config file '{}': it is a directory; pass -c with "
                              "the path of the flotilla.toml inside it",
                              path);
    else
      d.message = fmt::format("cannot read config file '{}': {}; give the user running flotilla "
                              "read access to it (e.g. chmod a+r), or pass -c with a readable copy",
                              path, open_errno != 0 ? std::strerror(open_errno) : "unreadable");
    return load_result{empty_project(path), {std::move(d)}};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return load_project_text(text.str(), path);
}

}  // namespace flotilla::config
