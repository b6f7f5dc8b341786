#include "events/run_events.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "events/kafka_sink.hpp"
#include "events/pubsub_sink.hpp"

namespace flotilla::events {
namespace {

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Which sink an error is about, and its destination: (kind, destination).
std::pair<std::string, std::string> sink_of(const error& e, const outbox_relay* relay) {
  // A delivery error names its sink's destination; a settings error (the sink was never
  // built) names its section.
  if (relay != nullptr)
    for (const auto& s : relay->sinks())
      if (e.message.find(s->destination()) != std::string::npos)
        return {std::string(s->kind()), s->destination()};
  if (e.message.find("events.pubsub") != std::string::npos)
    return {"pubsub", ""};
  if (e.message.find("events.kafka") != std::string::npos)
    return {"kafka", ""};
  if (relay != nullptr && relay->sinks().size() == 1)
    return {std::string(relay->sinks().front()->kind()), relay->sinks().front()->destination()};
  return {e.code == errc::outbox ? "outbox" : "", ""};
}

}  // namespace

std::vector<std::unique_ptr<event_sink>> make_sinks(const config::events_options& options,
                                                    std::vector<error>& errors) {
  std::vector<std::unique_ptr<event_sink>> out;
  if (options.kafka) {
    auto k = kafka_sink::create(*options.kafka);
    if (k) {
      out.push_back(std::move(*k));
    } else {
      errors.push_back(std::move(k.error()));
      out.push_back(std::make_unique<rejected_sink>(
          "kafka", fmt::format("brokers {}, topic {}", options.kafka->brokers, options.kafka->topic)));
    }
  }
  if (options.pubsub) {
    auto ps = pubsub_sink::create(*options.pubsub);
    if (ps) {
      out.push_back(std::move(*ps));
    } else {
      errors.push_back(std::move(ps.error()));
      out.push_back(std::make_unique<rejected_sink>(
          "pubsub", fmt::format("topic projects/{}/topics/{}", options.pubsub->project,
                                options.pubsub->topic)));
    }
  }
  return out;
}

result<std::unique_ptr<run_events>> run_events::open(storage::state_store* store,
                                                     const config::project& project,
                                                     std::string run_id,
                                                     run_events_options options) {
  std::vector<error> setup;
  auto sinks = make_sinks(project.events, setup);
  const bool configured = project.events.kafka.has_value() || project.events.pubsub.has_value();
  const auto file = event_log::path_for(project.state_dir, run_id);
  return open(store, file, std::move(run_id), project.name, std::move(sinks), configured, options,
              std::move(setup));
}

result<std::unique_ptr<run_events>> run_events::open(storage::state_store* store,
                                                     const std::filesystem::path& log_file,
                                                     std::string run_id, std::string project,
                                                     std::vector<std::unique_ptr<event_sink>> sinks,
                                                     bool outbox, run_events_options options,
                                                     std::vector<error> setup_errors) {
  auto log = event_log::open(log_file);
  if (!log) {
    // The file is one destination among others: the events still go to the outbox and
    // its sinks, and the run reports the file's failure (FLT-E004).
    error why = log.error();
    setup_errors.push_back(why);
    log = event_log::unopened(log_file, std::move(why));
  }
  outbox = store != nullptr && (outbox || !sinks.empty());
  // Each sink sends its own format as the outbox holds it, without decoding and encoding
  // the event again: the NDJSON line each event already has for a JSON sink, the
  // serialized Event for a protobuf one, both when the sinks differ.
  const bool json_payload =
      std::any_of(sinks.begin(), sinks.end(), [](const auto& s) { return s->wants_json(); });
  const bool protobuf_payload =
      sinks.empty() ||
      std::any_of(sinks.begin(), sinks.end(), [](const auto& s) { return !s->wants_json(); });
  std::unique_ptr<outbox_relay> relay;
  if (store != nullptr && !sinks.empty()) {
    relay = std::make_unique<outbox_relay>(*store, std::move(sinks), options.relay);
    if (options.deliver_in_background)
      relay->start();
  }
  return std::unique_ptr<run_events>(new run_events(store, std::move(*log), std::move(run_id),
                                                    std::move(project), std::move(relay), outbox,
                                                    json_payload, protobuf_payload,
                                                    std::move(setup_errors)));
}

run_events::run_events(storage::state_store* store, event_log log, std::string run_id,
                       std::string project, std::unique_ptr<outbox_relay> relay, bool outbox,
                       bool json_payload, bool protobuf_payload,
                       std::vector<error> setup_errors)
    : store_(store),
      log_(std::move(log)),
      run_id_(std::move(run_id)),
      project_(std::move(project)),
      relay_(std::move(relay)),
      outbox_(outbox),
      json_payload_(json_payload),
      protobuf_payload_(protobuf_payload),
      errors_(std::move(setup_errors)) {}

run_events::~run_events() = default;

std::uint64_t run_events::emitted() const {
  std::lock_guard lock(mu_);
  return sequence_;
}

void run_events::continue_after(std::uint64_t sequence) {
  std::lock_guard lock(mu_);
  sequence_ = sequence;
}

const std::filesystem::path& run_events::log_path() const { return log_.path(); }

void run_events::keep(const error& e) {
  // One entry per kind of failure: a full disk would otherwise repeat itself per event.
  for (const auto& k : errors_)
    if (k.code == e.code)
      return;
  errors_.push_back(e);
}

storage::pb::OutboxEntry outbox_entry(const pb::Event& e, std::string payload,
                                      storage::pb::PayloadFormat format) {
  storage::pb::OutboxEntry entry;
  entry.set_key(event_key(e));
  entry.set_payload(std::move(payload));
  entry.set_format(format);
  auto& h = *entry.mutable_headers();
  h.set_type(e.type());
  h.set_run_id(e.run_id());
  h.set_timestamp_us(e.timestamp_us());
  return entry;
}

const std::string* ready_payload(const storage::pb::OutboxEntry& entry, bool want_json) {
  if (!entry.has_headers())
    return nullptr;
  const auto format = entry.format();
  if (want_json)
    return format == storage::pb::PAYLOAD_FORMAT_JSON ? &entry.payload() : nullptr;
  if (format == storage::pb::PAYLOAD_FORMAT_PROTOBUF)
    return &entry.payload();
  if (format == storage::pb::PAYLOAD_FORMAT_JSON && !entry.protobuf_payload().empty())
    return &entry.protobuf_payload();
  return nullptr;
}

storage::pb::OutboxEntry run_events::stamp(pb::Event& e, std::string& lines, bool kept) {
  e.set_sequence(++sequence_);
  if (e.timestamp_us() == 0)  // else it carries when it happened (a table's copy)
    e.set_timestamp_us(now_us());
  if (e.type().empty())
    e.set_type(std::string(payload_name(e)));
  const std::size_t start = lines.size();
  // An event nobody reads after its line is written (emit_all without an outbox) need
  // not carry the run id and project itself: two string copies per table event.
  if (kept || outbox_ || !append_json(lines, e, run_id_, project_)) {
    e.set_run_id(run_id_);
    e.set_project(project_);
    append_json(lines, e);
  }
  storage::pb::OutboxEntry entry;
  if (outbox_ && json_payload_) {
    entry = outbox_entry(e, lines.substr(start), storage::pb::PAYLOAD_FORMAT_JSON);
    if (protobuf_payload_)
      entry.set_protobuf_payload(to_protobuf(e));
  } else if (outbox_) {
    entry = outbox_entry(e, to_protobuf(e), storage::pb::PAYLOAD_FORMAT_PROTOBUF);
  }
  lines += '\n';
  return entry;
}

result<storage::pb::OutboxEntry> run_events::record(pb::Event& e) {
  std::string line;
  auto entry = stamp(e, line, true);
  line.pop_back();  // append() adds the newline
  if (auto st = log_.append(line); !st)
    keep(st.error());  // the outbox still gets the event
  return entry;
}

result<std::size_t> run_events::emit_all(std::vector<pb::Event> events) {
  std::vector<batch_event> batch;
  batch.reserve(events.size());
  for (auto& e : events)
    batch.emplace_back(std::move(e));
  return emit_batch(std::move(batch));
}

result<std::size_t> run_events::emit_batch(std::vector<batch_event> events) {
  if (events.empty())
    return 0;
  {
    std::lock_guard lock(mu_);
    // The lines go to the file in pieces of about chunk_bytes, each ending with a whole
    // line: a fleet's events are megabytes, and one buffer of them all would be fresh
    // memory (a page fault per 4 KB) written once. After a failed write no later piece is
    // written, so the file never has a gap.
    constexpr std::size_t chunk_bytes = std::size_t{256} << 10;
    std::string lines;
    lines.reserve(std::min(events.size() * 400, chunk_bytes + (std::size_t{16} << 10)));
    bool log_ok = true;
    auto write_lines = [&] {
      lines.pop_back();  // append() adds the last newline
      if (log_ok) {
        if (auto st = log_.append(lines); !st) {
          keep(st.error());  // the outbox still gets the events
          log_ok = false;
        }
      }
      lines.clear();
    };
    std::vector<storage::pb::OutboxEntry> entries;
    if (outbox_)
      entries.reserve(events.size());
    const std::uint64_t first = sequence_ + 1;
    for (auto& item : events) {
      if (lines.size() >= chunk_bytes)
        write_lines();
      if (auto* t = std::get_if<table_event_line>(&item)) {
        if (!outbox_) {
          append_json(lines, *t, run_id_, ++sequence_,
                      t->timestamp_us != 0 ? t->timestamp_us : now_us(), project_);
          lines += '\n';
          continue;
        }
        item = t->to_event();
      }
      auto entry = stamp(std::get<pb::Event>(item), lines, false);
      if (outbox_)
        entries.push_back(std::move(entry));
    }
    write_lines();
    if (outbox_) {
      if (auto st = store_->append_outbox(entries); !st) {
        error err{errc::outbox,
                  fmt::format("events {} to {} of run {} could not be added to the outbox, so no "
                              "event sink will receive them (they are in {}): {}",
                              first, sequence_, run_id_, log_.path().string(), st.error().message)};
        keep(err);
        return std::unexpected(std::move(err));
      }
    }
  }
  if (relay_)
    relay_->notify();
  return events.size();
}

result<pb::Event> run_events::emit(pb::Event e) {
  {
    std::lock_guard lock(mu_);
    auto entry = record(e);
    if (outbox_) {
      if (auto st = store_->append_outbox(std::span(&*entry, 1)); !st) {
        error err{errc::outbox,
                  fmt::format("event {} of run {} could not be added to the outbox, so no event "
                              "sink will receive it (it is in {}): {}",
                              e.sequence(), run_id_, log_.path().string(), st.error().message)};
        keep(err);
        return std::unexpected(std::move(err));
      }
    }
  }
  if (relay_)
    relay_->notify();
  return e;
}

result<pb::Event> run_events::emit_with(storage::table_commit& commit, pb::Event e) {
  std::lock_guard lock(mu_);
  auto entry = record(e);
  if (outbox_)
    commit.events.push_back(std::move(*entry));
  return e;
}

events_report run_events::finish(std::optional<std::chrono::milliseconds> timeout) {
  events_report r;
  r.log_path = log_.path();
  if (finished_) {
    std::lock_guard lock(mu_);
    r.emitted = sequence_;
    r.errors = errors_;
    return r;
  }
  finished_ = true;
  drain_report d;
  if (relay_) {
    d = relay_->finish(timeout);
  } else if (store_ != nullptr) {
    // No sink to deliver to: a backlog earlier runs left stays in the outbox, and counts.
    auto n = store_->outbox_size();
    d.pending = n ? *n : 0;
  }
  std::vector<error> failures;
  {
    std::lock_guard lock(mu_);
    if (d.failure)
      keep(*d.failure);
    // Each failure's events_undelivered notice below joins the outbox too: the count the
    // relay gave is raised by them, so the message and the run JSON's `pending` agree.
    if (outbox_ && store_ != nullptr) {
      const std::string said = fmt::format(". {} event(s) are kept", d.pending);
      d.pending += errors_.size();
      for (auto& e : errors_)
        if (auto at = e.message.find(said); at != std::string::npos)
          e.message.replace(at, said.size(), fmt::format(". {} event(s) are kept", d.pending));
    }
    failures = errors_;
  }
  // Tell the file (and, through the outbox, the next delivery) what went wrong.
  for (const auto& f : failures) {
    undelivered_info info;
    if (f.code == errc::event_log) {
      info.sink = "ndjson";
      info.destination = log_.path().string();
    } else {
      std::tie(info.sink, info.destination) = sink_of(f, relay_.get());
    }
    info.error = f.message;
    info.error_code = code_name(f.code);
    info.pending = d.pending;
    (void)emit(events_undelivered(info));
  }
  std::lock_guard lock(mu_);
  r.emitted = sequence_;
  r.delivered = d.delivered;
  r.pending = d.pending;
  if (store_ != nullptr && outbox_ && !failures.empty())
    if (auto n = store_->outbox_size())
      r.pending = *n;
  r.errors = errors_;
  return r;
}

}  // namespace flotilla::events
