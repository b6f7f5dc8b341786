// kafka-events: events/s through Flotilla's Kafka event sink against plain librdkafka
// producing the same messages (key, value, headers, timestamp) to the same mock cluster.
// The sink comes from the events module; a build without it still measures the raw
// side and reports the sink as not measurable.
#include <charconv>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "bench/kafka.hpp"
#include "bench/scenario.hpp"
#include "bench/steps.hpp"

#if FLOTILLA_BENCH_HAVE_EVENTS
#include "events/event.hpp"
#include "events/kafka_sink.hpp"
#include "events/outbox_relay.hpp"
#endif

namespace flotilla::bench {
namespace {

constexpr const char* run_id = "20261130T180102Z-3fa2";
constexpr std::int64_t base_us = 1'796'061'662'000'000;  // 2026-11-30T18:01:02Z

#if FLOTILLA_BENCH_HAVE_EVENTS
std::vector<events::pb::Event> flotilla_events(std::uint64_t count) {
  std::vector<events::pb::Event> out;
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t k = i / 2;
    const auto source = fmt::format("c{:04}", k % 100);
    const auto table = fmt::format("public.t{:05}", k);
    const auto target = fmt::format("staging__{}.t{:05}", source, k);
    events::pb::Event e;
    if (i % 2 == 0) {
      e = events::table_started(source, table, target, "full");
    } else if (k % 10 == 0) {
      e = events::schema_action(source, table,
                                {"add_columns", "discount", "", "decimal(12,2)",
                                 "column 'discount' added on the source",
                                 fmt::format("ALTER TABLE {} ADD COLUMN discount DECIMAL(12,2)", target)});
    } else {
      events::table_outcome o;
      o.status = "copied";
      o.rows = (k * 7919) % 100000;
      o.duration_us = static_cast<std::int64_t>((k * 104729) % 5'000'000);
      o.target_table = target;
      e = events::table_finished(source, table, o);
    }
    e.set_run_id(run_id);
    e.set_project("bench");
    e.set_sequence(i + 1);
    e.set_timestamp_us(base_us + static_cast<std::int64_t>(i) * 137);
    out.push_back(std::move(e));
  }
  return out;
}
#endif

}  // namespace

bool have_kafka_sink() { return FLOTILLA_BENCH_HAVE_EVENTS != 0; }

std::vector<kafka_event> make_events(std::uint64_t count) {
  std::vector<kafka_event> out;
  out.reserve(count);
#if FLOTILLA_BENCH_HAVE_EVENTS
  for (const auto& e : flotilla_events(count))
    out.push_back({events::event_key(e), events::to_json(e), e.type(), e.run_id(),
                   e.timestamp_us() / 1000});
#else
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t k = i / 2;
    const auto source = fmt::format("c{:04}", k % 100);
    const auto table = fmt::format("public.t{:05}", k);
    const std::string type = i % 2 == 0 ? "table_started" : "table_finished";
    const std::int64_t ts = base_us + static_cast<std::int64_t>(i) * 137;
    out.push_back({source + "." + table,
                   fmt::format(R"({{"run_id":"{}","sequence":{},"timestamp_us":{},"type":"{}",)"
                               R"("source":"{}","table":"{}","project":"bench","{}":{{"status":"copied",)"
                               R"("rows":{},"target_table":"staging__{}.t{:05}"}}}})",
                               run_id, i + 1, ts, type, source, table, type, (k * 7919) % 100000,
                               source, k),
                   type, run_id, ts / 1000});
  }
#endif
  return out;
}

kafka_produce_result flotilla_kafka_deliver(const std::string& bootstraps, const std::string& topic,
                                            std::uint64_t count, std::size_t batch,
                                            bool mixed_outbox) {
#if FLOTILLA_BENCH_HAVE_EVENTS
  // The outbox holds each event as its JSON line, the sink's format, as a run's outbox
  // does: the sink sends it as it is. A mixed outbox (a run with a protobuf sink beside
  // the JSON one) holds the serialized Event beside the line.
  std::vector<storage::pb::OutboxEntry> entries;
  entries.reserve(count);
  for (const auto& e : flotilla_events(count)) {
    auto o = events::outbox_entry(e, events::to_json(e), storage::pb::PAYLOAD_FORMAT_JSON);
    if (mixed_outbox)
      o.set_protobuf_payload(events::to_protobuf(e));
    o.set_sequence(e.sequence());
    entries.push_back(std::move(o));
  }
  stopwatch sw;
  config::kafka_options options;
  options.brokers = bootstraps;
  options.topic = topic;
  options.format = config::event_format::json;
  auto sink = events::kafka_sink::create(options);
  if (!sink)
    throw std::runtime_error(sink.error().text());
  kafka_produce_result r;
  for (std::size_t at = 0; at < entries.size(); at += batch) {
    const std::size_t n = std::min(batch, entries.size() - at);
    const auto d = (*sink)->deliver(std::span(entries).subspan(at, n), (*sink)->delivery_timeout());
    r.delivered += d.delivered;
    if (d.failure)
      throw std::runtime_error(d.failure->text());
  }
  sink->reset();  // the producer's shutdown is part of a run, as for the raw producer
  r.wall_s = sw.wall_s();
  r.cpu_s = sw.cpu_s();
  return r;
#else
  (void)bootstraps, (void)topic, (void)count, (void)batch, (void)mixed_outbox;
  throw std::runtime_error("this build has no Kafka event sink (the events module is missing)");
#endif
}

std::size_t kafka_batch_from_env() {
  const char* b = std::getenv("FLOTILLA_BENCH_KAFKA_BATCH");
  if (b == nullptr)
    return 0;
  const std::string_view text(b);
  std::size_t batch = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), batch);
  if (ec != std::errc{} || p != text.data() + text.size() || batch == 0)
    throw std::invalid_argument(fmt::format("FLOTILLA_BENCH_KAFKA_BATCH='{}' is not a batch "
                                            "size; set a whole number of at least 1, or unset it",
                                            text));
  return batch;
}

scenario_result run_kafka_events(bench_context& ctx) {
  scenario_result r;
  r.name = "kafka-events";
  const std::uint64_t n = ctx.opt.events;
  // As the outbox relay hands a backlog to a sink: this many entries per deliver() call.
#if FLOTILLA_BENCH_HAVE_EVENTS
  std::size_t batch = events::relay_options{}.batch_size;
  if (const auto b = kafka_batch_from_env(); b != 0)
    batch = b;
#else
  const std::size_t batch = 5000;
#endif
  r.sizes = fmt::format("{} events (~{} bytes each) to a librdkafka mock cluster (1 broker, 3 "
                        "partitions); {}",
                        grouped(n), make_events(2)[1].payload.size(), ctx.runs_text());
  const std::string topic = "flotilla.events";
  kafka_mock_cluster cluster(1, topic, 3);
  const std::string events = std::to_string(n);
  const std::string group = fmt::format("{} events", grouped(n));
  auto& raw = r.add(group, "raw librdkafka (idempotent)", "raw", "events");
  auto& raw_default = r.add(group, "raw librdkafka (defaults)", "raw", "events", "raw librdkafka (idempotent)");
  series* sink = nullptr;
  series* sink_mixed = nullptr;
  if (have_kafka_sink()) {
    sink = &r.add(group, "flotilla kafka_sink", "flotilla", "events", "raw librdkafka (idempotent)");
    sink_mixed = &r.add(group, "kafka_sink, mixed outbox", "flotilla", "events",
                        "raw librdkafka (idempotent)");
  }

  auto raw_body = [&](bool idempotent) {
    return [&, idempotent] {
      return measure_step("kafka-raw", {{"bootstrap", cluster.bootstrap_servers()},
                                        {"topic", topic},
                                        {"events", events},
                                        {"idempotent", idempotent ? "1" : "0"}});
    };
  };
  std::vector<std::pair<series*, std::function<measurement()>>> bodies;
  bodies.emplace_back(&raw, raw_body(true));
  bodies.emplace_back(&raw_default, raw_body(false));
  auto sink_body = [&](const char* outbox) {
    return [&, outbox] {
      return measure_step("kafka-sink", {{"bootstrap", cluster.bootstrap_servers()},
                                         {"topic", topic},
                                         {"events", events},
                                         {"batch", std::to_string(batch)},
                                         {"outbox", outbox}});
    };
  };
  if (sink) {
    bodies.emplace_back(sink, sink_body("json"));
    bodies.emplace_back(sink_mixed, sink_body("mixed"));
  }
  interleave(ctx.opt.warmup, ctx.opt.runs, bodies);

  if (!sink) {
    r.status = "not measurable";
    r.message = "the Kafka event sink is not in this build yet; the raw librdkafka side is "
                "measured, the sink's figure and ratio are not";
    r.targets.push_back({"kafka-events >= 0.9x raw librdkafka", "not measurable yet", std::nullopt});
    return r;
  }
  const auto ratio = spread_of(r.ratios(*sink));
  sink->ratio_target = 0.9;
  r.targets.push_back({"kafka-events >= 0.9x raw librdkafka (same guarantees: idempotent)",
                       ratio_text(ratio, 0.9), ratio.median >= 0.9, spread_caveat(ratio, 0.9)});
  const auto ratio_mixed = spread_of(r.ratios(*sink_mixed));
  r.figures = {{"ratio", ratio.median}, {"ratio_mixed_outbox", ratio_mixed.median}, {"batch", batch}};
  r.notes.push_back(fmt::format("the sink is called as the outbox relay calls it: deliver() of "
                                "up to {} outbox entries (JSON lines, the sink's format) at a "
                                "time, each call waiting for its acknowledgements; the raw "
                                "producer flushes once at the end",
                                batch));
  r.notes.push_back(fmt::format("with a mixed outbox (what a run writes when a protobuf sink "
                                "is configured beside the JSON one: each entry also holds the "
                                "serialized Event): {} of raw librdkafka",
                                ratio_text(ratio_mixed)));
  return r;
}

}  // namespace flotilla::bench
