#include "cdc/change_event.hpp"

#include <nlohmann/json.hpp>

#include "proto/changes.pb.h"

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
    return j.dump();
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
  return m.SerializeAsString();
}

}  // namespace flotilla::cdc
