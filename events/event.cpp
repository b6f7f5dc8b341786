#include "events/event.hpp"

#include <charconv>
#include <cstring>
#include <memory>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <nlohmann/json.hpp>

#include "schema/utf8.hpp"

namespace flotilla::events {
namespace {

namespace gp = google::protobuf;
using ojson = nlohmann::ordered_json;

pb::Event table_event(std::string_view source, std::string_view table) {
  pb::Event e;
  e.set_source(std::string(source));
  e.set_table(std::string(table));
  return e;
}

// ---- JSON by reflection: the same fields as the Protobuf form ----------------------

ojson to_value(const gp::Message& m);

ojson scalar(const gp::Message& m, const gp::FieldDescriptor* f, int index) {
  const gp::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case gp::FieldDescriptor::CPPTYPE_STRING:
      if (f->type() == gp::FieldDescriptor::TYPE_BYTES) {
        // Bytes are not valid JSON text in general: emit them as an array of octets.
        const std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
        ojson a = ojson::array();
        for (unsigned char c : s)
          a.push_back(static_cast<unsigned>(c));
        return a;
      }
      return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case gp::FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case gp::FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case gp::FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case gp::FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case gp::FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case gp::FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case gp::FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case gp::FieldDescriptor::CPPTYPE_ENUM:
      return rep ? r->GetRepeatedEnum(m, f, index)->name() : r->GetEnum(m, f)->name();
    case gp::FieldDescriptor::CPPTYPE_MESSAGE:
      return to_value(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

ojson to_value(const gp::Message& m) {
  const gp::Descriptor* d = m.GetDescriptor();
  const gp::Reflection* r = m.GetReflection();
  ojson out = ojson::object();
  for (int i = 0; i < d->field_count(); ++i) {
    const gp::FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      ojson a = ojson::array();
      for (int k = 0; k < r->FieldSize(m, f); ++k)
        a.push_back(scalar(m, f, k));
      out[f->name()] = std::move(a);
    } else if (f->real_containing_oneof() != nullptr) {
      if (r->HasField(m, f))  // only the payload that is set
        out[f->name()] = scalar(m, f, 0);
    } else {
      out[f->name()] = scalar(m, f, 0);
    }
  }
  return out;
}

std::string from_value(const nlohmann::json& j, gp::Message& m);

std::string set_scalar(const nlohmann::json& v, gp::Message& m, const gp::FieldDescriptor* f) {
  const gp::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  try {
    switch (f->cpp_type()) {
      case gp::FieldDescriptor::CPPTYPE_STRING: {
        std::string s;
        if (v.is_array())
          for (const auto& c : v)
            s.push_back(static_cast<char>(c.get<unsigned>()));
        else
          s = v.get<std::string>();
        rep ? r->AddString(&m, f, std::move(s)) : r->SetString(&m, f, std::move(s));
        break;
      }
      case gp::FieldDescriptor::CPPTYPE_BOOL:
        rep ? r->AddBool(&m, f, v.get<bool>()) : r->SetBool(&m, f, v.get<bool>());
        break;
      case gp::FieldDescriptor::CPPTYPE_INT32:
        rep ? r->AddInt32(&m, f, v.get<std::int32_t>()) : r->SetInt32(&m, f, v.get<std::int32_t>());
        break;
      case gp::FieldDescriptor::CPPTYPE_INT64:
        rep ? r->AddInt64(&m, f, v.get<std::int64_t>()) : r->SetInt64(&m, f, v.get<std::int64_t>());
        break;
      case gp::FieldDescriptor::CPPTYPE_UINT32:
        rep ? r->AddUInt32(&m, f, v.get<std::uint32_t>())
            : r->SetUInt32(&m, f, v.get<std::uint32_t>());
        break;
      case gp::FieldDescriptor::CPPTYPE_UINT64:
        rep ? r->AddUInt64(&m, f, v.get<std::uint64_t>())
            : r->SetUInt64(&m, f, v.get<std::uint64_t>());
        break;
      case gp::FieldDescriptor::CPPTYPE_DOUBLE:
        rep ? r->AddDouble(&m, f, v.get<double>()) : r->SetDouble(&m, f, v.get<double>());
        break;
      case gp::FieldDescriptor::CPPTYPE_FLOAT:
        rep ? r->AddFloat(&m, f, v.get<float>()) : r->SetFloat(&m, f, v.get<float>());
        break;
      case gp::FieldDescriptor::CPPTYPE_ENUM: {
        const gp::EnumValueDescriptor* e =
            v.is_string() ? f->enum_type()->FindValueByName(v.get<std::string>())
                          : f->enum_type()->FindValueByNumber(v.get<int>());
        if (e == nullptr)
          return "unknown value of '" + f->name() + "'";
        rep ? r->AddEnum(&m, f, e) : r->SetEnum(&m, f, e);
        break;
      }
      case gp::FieldDescriptor::CPPTYPE_MESSAGE:
        return from_value(v, rep ? *r->AddMessage(&m, f) : *r->MutableMessage(&m, f));
    }
  } catch (const nlohmann::json::exception&) {
    return "field '" + f->name() + "' has the wrong JSON type";
  }
  return {};
}

std::string from_value(const nlohmann::json& j, gp::Message& m) {
  if (!j.is_object())
    return "expected a JSON object for " + m.GetDescriptor()->name();
  const gp::Descriptor* d = m.GetDescriptor();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const gp::FieldDescriptor* f = d->FindFieldByName(it.key());
    if (f == nullptr || it->is_null())
      continue;  // a field of a newer build, or an absent value
    if (f->is_repeated()) {
      if (!it->is_array())
        return "field '" + f->name() + "' must be an array";
      for (const auto& v : *it)
        if (auto e = set_scalar(v, m, f); !e.empty())
          return e;
    } else if (auto e = set_scalar(*it, m, f); !e.empty()) {
      return e;
    }
  }
  return {};
}

/// The text the JSON forms write for `s` (nlohmann's replacement of bad bytes).
std::string utf8_as_json_writes_it(const std::string& s) {
  return nlohmann::json::parse(
             nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

}  // namespace

// ---- builders -------------------------------------------------------------------------

pb::Event run_started(const run_started_info& info) {
  pb::Event e;
  e.set_type("run_started");
  auto* p = e.mutable_run_started();
  p->set_command(info.command);
  for (const auto& f : info.filters)
    p->add_filters(f);
  p->set_tables_selected(info.tables_selected);
  p->set_retry_of(info.retry_of);
  return e;
}

pb::Event run_finished(const run_totals& t) {
  pb::Event e;
  e.set_type("run_finished");
  auto* p = e.mutable_run_finished();
  p->set_status(t.status);
  p->set_tables_copied(t.tables_copied);
  p->set_tables_pruned(t.tables_pruned);
  p->set_tables_failed(t.tables_failed);
  p->set_tables_skipped(t.tables_skipped);
  p->set_tables_held(t.tables_held);
  p->set_tables_checked(t.tables_checked);
  p->set_tables_drifted(t.tables_drifted);
  p->set_duration_us(t.duration_us);
  p->set_sources_failed(t.source_errors.size());
  for (const auto& [source, error] : t.source_errors) {
    auto* f = p->add_source_errors();
    f->set_source(source);
    f->set_error(error);
  }
  return e;
}

pb::Event events_undelivered(const undelivered_info& info) {
  pb::Event e;
  e.set_type("events_undelivered");
  auto* p = e.mutable_events_undelivered();
  p->set_sink(info.sink);
  p->set_destination(info.destination);
  p->set_error(info.error);
  p->set_error_code(info.error_code);
  p->set_pending(info.pending);
  return e;
}

pb::Event table_started(std::string_view source, std::string_view table,
                        std::string_view target_table, std::string_view mode) {
  pb::Event e = table_event(source, table);
  e.set_type("table_started");
  auto* p = e.mutable_table_started();
  p->set_target_table(std::string(target_table));
  p->set_mode(std::string(mode));
  return e;
}

pb::Event table_finished(std::string_view source, std::string_view table, const table_outcome& o) {
  pb::Event e = table_event(source, table);
  e.set_type("table_finished");
  auto* p = e.mutable_table_finished();
  p->set_status(o.status);
  p->set_rows(o.rows);
  p->set_error(o.error);
  p->set_error_code(o.error_code);
  p->set_duration_us(o.duration_us);
  p->set_target_table(o.target_table);
  p->set_recovered_rows(o.recovered_rows);
  p->set_recovered_run_id(o.recovered_run_id);
  return e;
}

pb::Event schema_action(std::string_view source, std::string_view table,
                        const schema_action_info& info) {
  pb::Event e = table_event(source, table);
  e.set_type("schema_action");
  auto* p = e.mutable_schema_action();
  p->set_action(info.action);
  p->set_column(info.column);
  p->set_from(info.from);
  p->set_to(info.to);
  p->set_reason(info.reason);
  p->set_sql(info.sql);
  for (const auto& a : info.also)
    p->add_also(a);
  return e;
}

pb::Event contract_violation(std::string_view source, std::string_view table,
                             const contract_violation_info& info) {
  pb::Event e = table_event(source, table);
  e.set_type("contract_violation");
  auto* p = e.mutable_contract_violation();
  p->set_column(info.column);
  p->set_expected(info.expected);
  p->set_actual(info.actual);
  p->set_reason(info.reason);
  p->set_error_code(info.error_code);
  return e;
}

pb::Event warning(std::string_view source, std::string_view table,
                  std::string_view target_table, std::string_view message) {
  pb::Event e = table_event(source, table);
  e.set_type("warning");
  auto* p = e.mutable_warning();
  p->set_target_table(std::string(target_table));
  p->set_message(std::string(message));
  return e;
}

pb::Event review_required(std::string_view source, std::string_view table,
                          const review_info& info) {
  pb::Event e = table_event(source, table);
  e.set_type("review_required");
  auto* p = e.mutable_review_required();
  p->set_target(info.target);
  p->set_kind(info.kind);
  p->set_source_change(info.source_change);
  p->set_reason(info.reason);
  p->set_proposed_ddl(info.proposed_ddl);
  p->set_data_consequence(info.data_consequence);
  p->set_requires_resync(info.requires_resync);
  p->set_position(info.position);
  return e;
}

// ---- keys and encodings -----------------------------------------------------------------

std::string event_key(const pb::Event& e) {
  if (e.source().empty() && e.table().empty())
    return e.run_id();
  // A source's own warning names no table: keyed by the source.
  std::string key = e.table().empty() ? e.source() : e.source() + "." + e.table();
  // As the payload writes them: a name that is not UTF-8 (a SQLite table's bytes) with
  // U+FFFD for its bad bytes, so the key is still <source>.<table> of the payload.
  if (!schema::valid_utf8(key))
    key = utf8_as_json_writes_it(key);
  return key;
}

std::string_view payload_name(const pb::Event& e) {
  static const gp::OneofDescriptor* const o = pb::Event::descriptor()->FindOneofByName("payload");
  const gp::FieldDescriptor* f = e.GetReflection()->GetOneofFieldDescriptor(e, o);
  return f == nullptr ? std::string_view{} : std::string_view(f->name());
}

namespace {

// ---- JSON written directly: byte for byte what to_value(e).dump(...) gives ---------
// The NDJSON line of every event (two or more per table and run) is written without
// building a JSON tree; only values whose text needs nlohmann's own rules (strings
// with escapes or non-ASCII bytes, floating point) go through nlohmann, one value at a
// time.

template <class Value>
void append_dumped(std::string& out, const Value& v) {
  out += ojson(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void append_message(std::string& out, const gp::Message& m);

template <class Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

/// A message type's fields in declaration order, each with its key already written
/// (`"name":`): every event of a run has the same few types.
struct field_layout {
  const gp::FieldDescriptor* field;
  std::string key;
  bool repeated;
  bool in_oneof;
};

const std::vector<field_layout>& layout_of(const gp::Descriptor* d) {
  // Per thread, so no lock; a pointer per type, so a nested type's entry added while
  // its parent's is in use never moves the parent's.
  thread_local std::vector<std::pair<const gp::Descriptor*, std::unique_ptr<std::vector<field_layout>>>>
      cache;
  for (const auto& [type, fields] : cache)
    if (type == d)
      return *fields;
  auto fields = std::make_unique<std::vector<field_layout>>();
  fields->reserve(static_cast<std::size_t>(d->field_count()));
  for (int i = 0; i < d->field_count(); ++i) {
    const gp::FieldDescriptor* f = d->field(i);
    field_layout l{f, {}, f->is_repeated(), f->real_containing_oneof() != nullptr};
    append_json_string(l.key, f->name());
    l.key += ':';
    fields->push_back(std::move(l));
  }
  cache.emplace_back(d, std::move(fields));
  return *cache.back().second;
}

void append_scalar(std::string& out, const gp::Message& m, const gp::FieldDescriptor* f,
                   int index) {
  const gp::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case gp::FieldDescriptor::CPPTYPE_STRING:
      if (f->type() == gp::FieldDescriptor::TYPE_BYTES) {
        const std::string& s = rep ? r->GetRepeatedStringReference(m, f, index, nullptr)
                                   : r->GetStringReference(m, f, nullptr);
        out += '[';
        for (std::size_t i = 0; i < s.size(); ++i) {
          if (i)
            out += ',';
          append_int(out, static_cast<unsigned>(static_cast<unsigned char>(s[i])));
        }
        out += ']';
        return;
      }
      {
        std::string scratch;
        append_json_string(out, rep ? r->GetRepeatedStringReference(m, f, index, &scratch)
                               : r->GetStringReference(m, f, &scratch));
      }
      return;
    case gp::FieldDescriptor::CPPTYPE_BOOL:
      out += (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
      return;
    case gp::FieldDescriptor::CPPTYPE_INT32:
      append_int(out, rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      return;
    case gp::FieldDescriptor::CPPTYPE_INT64:
      append_int(out, rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
      return;
    case gp::FieldDescriptor::CPPTYPE_UINT32:
      append_int(out, rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
      return;
    case gp::FieldDescriptor::CPPTYPE_UINT64:
      append_int(out, rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
      return;
    case gp::FieldDescriptor::CPPTYPE_DOUBLE:
      append_dumped(out, rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      return;
    case gp::FieldDescriptor::CPPTYPE_FLOAT:
      append_dumped(out, rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
      return;
    case gp::FieldDescriptor::CPPTYPE_ENUM:
      append_json_string(out, rep ? r->GetRepeatedEnum(m, f, index)->name() : r->GetEnum(m, f)->name());
      return;
    case gp::FieldDescriptor::CPPTYPE_MESSAGE:
      append_message(out, rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
      return;
  }
  out += "null";
}

void append_message(std::string& out, const gp::Message& m) {
  const gp::Reflection* r = m.GetReflection();
  out += '{';
  bool first = true;
  for (const auto& l : layout_of(m.GetDescriptor())) {
    if (l.in_oneof && !r->HasField(m, l.field))
      continue;  // only the payload that is set
    if (!first)
      out += ',';
    first = false;
    out += l.key;
    if (l.repeated) {
      out += '[';
      const int n = r->FieldSize(m, l.field);
      for (int k = 0; k < n; ++k) {
        if (k)
          out += ',';
        append_scalar(out, m, l.field, k);
      }
      out += ']';
    } else {
      append_scalar(out, m, l.field, 0);
    }
  }
  out += '}';
}

/// True when `s` is written as itself between quotes: no control, non-ASCII, quote or
/// backslash byte to escape.
bool plain_json(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
      return false;
  return true;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  if (!plain_json(s)) {
    append_dumped(out, std::string(s));
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

std::string to_json(const pb::Event& e) {
  std::string out;
  out.reserve(512);
  append_json(out, e);
  return out;
}

namespace {

/// The fields of a table_started or table_finished line in declaration order, every field
/// written (the bytes append_message writes for its Event), through `w`: w.raw(bytes),
/// w.text(key, string) and w.number(key, integer), where `key` is the field's name with
/// its quotes, the separator before it and the colon.
template <class Writer>
void write_table_line(Writer& w, const table_event_line& t, std::string_view run_id,
                      std::uint64_t sequence, std::int64_t timestamp_us,
                      std::string_view project) {
  w.text("{\"run_id\":", run_id);
  w.number(",\"sequence\":", sequence);
  w.number(",\"timestamp_us\":", timestamp_us);
  w.raw(t.finished ? ",\"type\":\"table_finished\"" : ",\"type\":\"table_started\"");
  w.text(",\"source\":", t.source);
  w.text(",\"table\":", t.table);
  w.text(",\"project\":", project);
  if (!t.finished) {
    w.text(",\"table_started\":{\"target_table\":", t.target_table);
    w.text(",\"mode\":", t.mode);
  } else {
    w.text(",\"table_finished\":{\"status\":", t.status);
    w.number(",\"rows\":", t.rows);
    w.text(",\"error\":", t.error);
    w.text(",\"error_code\":", t.error_code);
    w.number(",\"duration_us\":", t.duration_us);
    w.text(",\"target_table\":", t.target_table);
    w.number(",\"recovered_rows\":", t.recovered_rows);
    w.text(",\"recovered_run_id\":", t.recovered_run_id);
  }
  w.raw("}}");
}

/// Appends to a string, escaping each text as JSON.
struct string_writer {
  std::string& out;
  void raw(std::string_view v) { out += v; }
  void text(std::string_view key, std::string_view value) {
    out += key;
    append_json_string(out, value);
  }
  template <class Int>
  void number(std::string_view key, Int value) {
    out += key;
    append_int(out, value);
  }
};

/// Writes through a cursor into space already reserved; texts go as they are (plain).
struct cursor_writer {
  char* p;
  void raw(std::string_view v) {
    std::memcpy(p, v.data(), v.size());
    p += v.size();
  }
  void text(std::string_view key, std::string_view value) {
    raw(key);
    *p++ = '"';
    raw(value);
    *p++ = '"';
  }
  template <class Int>
  void number(std::string_view key, Int value) {
    raw(key);
    p = std::to_chars(p, p + 20, value).ptr;  // 20: the longest 64-bit integer
  }
};

/// The line of a table_started or table_finished event, two lines per table and run,
/// written from its fields; tests/events/event_test.cpp checks it against the JSON
/// tree's dump. When no string needs escaping (nearly every line) it is written through
/// a cursor into space reserved once.
void append_table_line(std::string& out, const table_event_line& t, std::string_view run_id,
                       std::uint64_t sequence, std::int64_t timestamp_us, std::string_view project) {
  const bool plain = plain_json(run_id) && plain_json(project) && plain_json(t.source) &&
                     plain_json(t.table) && plain_json(t.target_table) && plain_json(t.mode) &&
                     plain_json(t.status) && plain_json(t.error) && plain_json(t.error_code) &&
                     plain_json(t.recovered_run_id);
  if (!plain) {
    string_writer w{out};
    write_table_line(w, t, run_id, sequence, timestamp_us, project);
    return;
  }
  // Every key, two quotes per text and five numbers of at most 20 characters: under 400.
  constexpr std::size_t keys_quotes_numbers = 400;
  const std::size_t most = keys_quotes_numbers + run_id.size() + project.size() +
                           t.source.size() + t.table.size() + t.target_table.size() +
                           t.mode.size() + t.status.size() + t.error.size() + t.error_code.size() +
                           t.recovered_run_id.size();
  const std::size_t at = out.size();
  out.resize_and_overwrite(at + most, [&](char* data, std::size_t) {
    cursor_writer w{data + at};
    write_table_line(w, t, run_id, sequence, timestamp_us, project);
    return static_cast<std::size_t>(w.p - data);
  });
}

/// append_table_line for an Event holding table_started or table_finished (and that
/// type); false, writing nothing, for any other.
bool append_table_event(std::string& out, const pb::Event& e, std::string_view run_id,
                        std::string_view project) {
  const auto payload = e.payload_case();
  table_event_line t;
  if (payload == pb::Event::kTableStarted && e.type() == "table_started") {
    const auto& p = e.table_started();
    t.target_table = p.target_table();
    t.mode = p.mode();
  } else if (payload == pb::Event::kTableFinished && e.type() == "table_finished") {
    const auto& p = e.table_finished();
    t.finished = true;
    t.status = p.status();
    t.rows = p.rows();
    t.error = p.error();
    t.error_code = p.error_code();
    t.duration_us = p.duration_us();
    t.target_table = p.target_table();
    t.recovered_rows = p.recovered_rows();
    t.recovered_run_id = p.recovered_run_id();
  } else {
    return false;
  }
  t.source = e.source();
  t.table = e.table();
  append_table_line(out, t, run_id, e.sequence(), e.timestamp_us(), project);
  return true;
}

}  // namespace

void append_json(std::string& out, const pb::Event& e) {
  if (!append_table_event(out, e, e.run_id(), e.project()))
    append_message(out, e);
}

bool append_json(std::string& out, const pb::Event& e, std::string_view run_id,
                 std::string_view project) {
  return append_table_event(out, e, run_id, project);
}

void append_json(std::string& out, const table_event_line& t, std::string_view run_id,
                 std::uint64_t sequence, std::int64_t timestamp_us, std::string_view project) {
  append_table_line(out, t, run_id, sequence, timestamp_us, project);
}

pb::Event table_event_line::to_event() const {
  pb::Event e = finished ? table_finished(source, table,
                                          {std::string(status), rows, std::string(error),
                                           std::string(error_code), duration_us,
                                           std::string(target_table), recovered_rows,
                                           std::string(recovered_run_id)})
                         : table_started(source, table, target_table, mode);
  e.set_timestamp_us(timestamp_us);
  return e;
}

std::string to_json_tree(const pb::Event& e) {
  return to_value(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::expected<pb::Event, std::string> from_json(std::string_view line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded())
    return std::unexpected("not valid JSON: " + std::string(line.substr(0, 80)));
  pb::Event e;
  if (auto problem = from_value(j, e); !problem.empty())
    return std::unexpected(problem);
  return e;
}

namespace {

namespace gp = google::protobuf;

/// Visits every string value of `m`, nested messages too; `fix` null: only checks.
bool walk_utf8(const gp::Message& m, gp::Message* fix) {
  const auto* r = m.GetReflection();
  std::vector<const gp::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  bool bad = false;
  for (const auto* f : fields) {
    if (f->type() == gp::FieldDescriptor::TYPE_STRING) {
      const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
      for (int i = 0; i < n; ++i) {
        std::string scratch;  // filled only for a string the message does not hold as one
        const std::string& v = f->is_repeated() ? r->GetRepeatedStringReference(m, f, i, &scratch)
                                                : r->GetStringReference(m, f, &scratch);
        if (schema::valid_utf8(v))
          continue;
        bad = true;
        if (!fix)
          return true;
        std::string fixed = utf8_as_json_writes_it(v);  // before `v`'s field is replaced
        if (f->is_repeated())
          fix->GetReflection()->SetRepeatedString(fix, f, i, std::move(fixed));
        else
          fix->GetReflection()->SetString(fix, f, std::move(fixed));
      }
    } else if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_MESSAGE) {
      const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
      for (int i = 0; i < n; ++i) {
        const gp::Message& sub =
            f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
        gp::Message* sub_fix = nullptr;
        if (fix)
          sub_fix = f->is_repeated() ? fix->GetReflection()->MutableRepeatedMessage(fix, f, i)
                                     : fix->GetReflection()->MutableMessage(fix, f);
        if (walk_utf8(sub_fix ? *sub_fix : sub, sub_fix)) {
          bad = true;
          if (!fix)
            return true;
        }
      }
    }
  }
  return bad;
}

}  // namespace

bool all_utf8(const google::protobuf::Message& m) { return !walk_utf8(m, nullptr); }

bool replace_invalid_utf8(google::protobuf::Message& m) { return walk_utf8(m, &m); }

std::string to_protobuf(const pb::Event& e) {
  if (all_utf8(e))
    return e.SerializeAsString();
  pb::Event fixed = e;
  replace_invalid_utf8(fixed);
  return fixed.SerializeAsString();
}

std::expected<pb::Event, std::string> from_protobuf(std::string_view bytes) {
  pb::Event e;
  if (!e.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return std::unexpected(std::string("not a serialized flotilla.events.v1.Event"));
  return e;
}

}  // namespace flotilla::events
