#include "config/model.hpp"

#include "dialects/dialect.hpp"

#include <algorithm>
#include <cctype>

namespace flotilla::config {

std::string_view to_string(contract_mode v) {
  switch (v) {
    case contract_mode::none: return "none";
    case contract_mode::enforced: return "enforced";
  }
  return "none";
}

std::string_view to_string(schema_change_policy v) {
  switch (v) {
    case schema_change_policy::append_new_columns: return "append_new_columns";
    case schema_change_policy::ignore: return "ignore";
    case schema_change_policy::fail: return "fail";
  }
  return "append_new_columns";
}

std::string_view to_string(rebuild_policy v) {
  switch (v) {
    case rebuild_policy::require_confirmation: return "require_confirmation";
    case rebuild_policy::allow: return "allow";
    case rebuild_policy::deny: return "deny";
  }
  return "require_confirmation";
}

std::string_view to_string(drift_policy v) {
  switch (v) {
    case drift_policy::ignore: return "ignore";
    case drift_policy::warn: return "warn";
    case drift_policy::fail: return "fail";
  }
  return "ignore";
}

std::string_view to_string(adapter_kind v) {
  switch (v) {
    case adapter_kind::sqlite: return "sqlite";
    case adapter_kind::duckdb: return "duckdb";
    case adapter_kind::postgres: return "postgres";
    case adapter_kind::csv: return "csv";
    case adapter_kind::json: return "json";
  }
  return "sqlite";
}

std::string_view to_string(event_format v) {
  switch (v) {
    case event_format::json: return "json";
    case event_format::protobuf: return "protobuf";
  }
  return "json";
}

bool is_file_adapter(adapter_kind a) {
  return a != adapter_kind::postgres;
}

std::string canonical_dialect(std::string_view name) {
  return std::string(dialects::canonical_dialect_name(name));
}

bool is_executed_dialect(std::string_view canonical) {
  return std::find(std::begin(executed_dialects), std::end(executed_dialects), canonical) !=
         std::end(executed_dialects);
}

const target_config* project::find_target(std::string_view n) const {
  for (const auto& t : targets)
    if (t.name == n)
      return &t;
  return nullptr;
}

const source_config* project::find_source(std::string_view n) const {
  for (const auto& s : sources)
    if (s.name == n)
      return &s;
  return nullptr;
}

const event_target_config* project::find_event_target(std::string_view n) const {
  for (const auto& t : event_targets)
    if (t.name == n)
      return &t;
  return nullptr;
}

std::vector<std::string> project::stream_targets_of(const source_config& s) const {
  std::vector<std::string> out;
  if (!s.target.empty())
    out.push_back(s.target);
  for (const auto& t : s.stream_to)
    if (std::find(out.begin(), out.end(), t) == out.end())
      out.push_back(t);
  return out;
}

const target_config* project::target_of(const source_config& s) const {
  return find_target(s.target);
}

}  // namespace flotilla::config
