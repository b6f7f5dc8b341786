#include "cdc/change_event.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "events/event.hpp"
#include "proto/changes.pb.h"
#include "schema/utf8.hpp"

namespace flotilla::cdc {
namespace {

nlohmann::json values_json(const std::vector<change_value>& vs) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& v : vs) {
    if (v.unchanged)
      continue;
    o[v.column] = v.text ? nlohmann::json(*v.text) : nlohmann::json(nullptr);
  }
  return o;
}

void fill(google::protobuf::RepeatedPtrField<flotilla::changes::v1::Value>* out,
          const std::vector<change_value>& vs) {
  for (const auto& v : vs) {
    auto* x = out->Add();
    x->set_column(v.column);
    if (v.text)
      x->set_text(*v.text);
    x->set_is_null(!v.text && !v.unchanged);
    x->set_unchanged(v.unchanged);
  }
}

/// Whether every text of the event is UTF-8 (the check runs on the values as they are,
/// without walking the message built from them).
bool all_utf8(const change_event& e) {
  const auto ok = [](const std::string& s) { return schema::valid_utf8(s); };
  const auto values_ok = [&](const std::vector<change_value>& vs) {
    return std::all_of(vs.begin(), vs.end(), [&](const change_value& v) {
      return ok(v.column) && (!v.text || ok(*v.text));
    });
  };
  return ok(e.type) && ok(e.op) && ok(e.project) && ok(e.source) && ok(e.table) &&
         ok(e.target) && ok(e.position) && ok(e.ddl) && ok(e.outcome) && values_ok(e.key) &&
         values_ok(e.row) && values_ok(e.old_key) &&
         std::all_of(e.columns.begin(), e.columns.end(), ok);
}

}  // namespace

std::string encode(const change_event& e, config::event_format format) {
  if (format == config::event_format::json) {
    nlohmann::json j{{"type", e.type},         {"project", e.project},
                     {"source", e.source},     {"table", e.table},
                     {"target", e.target},     {"position", e.position}};
    if (e.change != 0)
      j["change"] = e.change;
    if (!e.op.empty())
      j["op"] = e.op;
    if (!e.key.empty())
      j["key"] = values_json(e.key);
    if (!e.row.empty())
      j["row"] = values_json(e.row);
    if (!e.old_key.empty())
      j["old_key"] = values_json(e.old_key);
    if (e.type == "schema_change") {
      j["ddl"] = e.ddl;
      j["outcome"] = e.outcome;
      j["columns"] = e.columns;
    }
    // A database whose text is not UTF-8 (SQL_ASCII) can hand over any byte: replaced
    // with U+FFFD rather than the event refused, as the run's events are.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  flotilla::changes::v1::ChangeEvent m;
  m.set_type(e.type);
  m.set_op(e.op);
  m.set_project(e.project);
  m.set_source(e.source);
  m.set_table(e.table);
  m.set_target(e.target);
  m.set_position(e.position);
  m.set_change(e.change);
  fill(m.mutable_key(), e.key);
  fill(m.mutable_row(), e.row);
  fill(m.mutable_old_key(), e.old_key);
  m.set_ddl(e.ddl);
  m.set_outcome(e.outcome);
  for (const auto& c : e.columns)
    m.add_columns(c);
  // Protobuf strings hold UTF-8: the bad bytes replaced as the JSON form replaces them.
  if (!all_utf8(e))
    events::replace_invalid_utf8(m);
  return m.SerializeAsString();
}

}  // namespace flotilla::cdc
