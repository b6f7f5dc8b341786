#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "events/event.hpp"
#include "events/event_log.hpp"
#include "events/run_events.hpp"
#include "events/source_drift.hpp"
#include "tests/events/support.hpp"

using namespace flotilla::events;
using flotilla::events::test::read_lines;
using flotilla::events::test::temp_dir;

namespace {

std::vector<std::string> keys_of(const nlohmann::ordered_json& j) {
  std::vector<std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it)
    out.push_back(it.key());
  return out;
}

std::vector<pb::Event> one_of_each() {
  std::vector<pb::Event> out;
  out.push_back(run_started({.command = "run", .filters = {"client=acme"}, .tables_selected = 3}));
  out.push_back(table_started("shop", "public.orders", "staging__shop.orders", "full"));
  out.push_back(schema_action("shop", "public.orders",
                              {.action = "add_columns",
                               .column = "coupon",
                               .to = "text",
                               .reason = "added column 'coupon' text",
                               .sql = "ALTER TABLE x ADD COLUMN coupon TEXT"}));
  out.push_back(contract_violation("shop", "public.orders",
                                   {.column = "total",
                                    .expected = "decimal(18,2)",
                                    .actual = "text",
                                    .reason = "type differs",
                                    .error_code = "FLT-X001"}));
  out.push_back(review_required("shop", "public.orders",
                                {.target = "warehouse",
                                 .kind = "rename_column",
                                 .source_change = "note renamed to notes",
                                 .reason = "ambiguous",
                                 .proposed_ddl = "ALTER ...",
                                 .data_consequence = "none",
                                 .requires_resync = true,
                                 .position = "0/16B3748"}));
  out.push_back(warning("shop", "public.orders", "staging__shop.orders",
                        "column 'note' is in the live table only"));
  out.push_back(table_finished("shop", "public.orders",
                               {.status = "copied",
                                .rows = 120,
                                .duration_us = 5000,
                                .target_table = "staging__shop.orders"}));
  out.push_back(run_finished({.status = "success", .tables_copied = 1, .duration_us = 7}));
  out.push_back(events_undelivered({.sink = "kafka",
                                    .destination = "brokers b, topic t",
                                    .error = "down",
                                    .error_code = "FLT-E001",
                                    .pending = 4}));
  return out;
}

}  // namespace

TEST_CASE("every builder sets the type to its payload's field name") {
  for (const auto& e : one_of_each())
    CHECK(e.type() == payload_name(e));
}

TEST_CASE("table events are keyed by source and table, run events by the run id") {
  auto t = table_started("shop", "public.orders", "s.orders", "full");
  CHECK(event_key(t) == "shop.public.orders");
  auto r = run_started({});
  r.set_run_id("20260101T000000Z-abcd");
  CHECK(event_key(r) == "20260101T000000Z-abcd");
  // A source's own warning that names no table: keyed by the source.
  CHECK(event_key(warning("shop", "", "", "source 'shop' lists no tables")) == "shop");
  // A name that is not UTF-8: the key is <source>.<table> as the payload writes them.
  auto bad = table_started("shop", "bad\xff\xfename", "s.bad", "full");
  CHECK(event_key(bad) == "shop.bad\xef\xbf\xbd\xef\xbf\xbdname");
  const auto line = nlohmann::json::parse(to_json(bad));
  CHECK(line["source"].get<std::string>() + "." + line["table"].get<std::string>() ==
        event_key(bad));
}

TEST_CASE("the JSON form has every envelope field and the payload under its field name") {
  auto e = table_finished("shop", "orders",
                          {.status = "failed",
                           .rows = 0,
                           .error = "boom",
                           .error_code = "FLT-D001",
                           .duration_us = 12,
                           .target_table = "s.orders"});
  e.set_run_id("r1");
  e.set_sequence(7);
  e.set_timestamp_us(1'700'000'000'000'000);
  e.set_project("acme");
  auto j = nlohmann::ordered_json::parse(to_json(e));  // keeps the line's key order
  CHECK(keys_of(j) == std::vector<std::string>{"run_id", "sequence", "timestamp_us", "type",
                                               "source", "table", "project", "table_finished"});
  CHECK(j["sequence"] == 7);  // numbers stay numbers
  CHECK(j["timestamp_us"] == 1'700'000'000'000'000);
  CHECK(j["type"] == "table_finished");
  const auto& p = j["table_finished"];
  CHECK(keys_of(p) == std::vector<std::string>{"status", "rows", "error", "error_code",
                                               "duration_us", "target_table", "recovered_rows",
                                               "recovered_run_id"});
  CHECK(p["error_code"] == "FLT-D001");
  CHECK(p["rows"] == 0);  // defaults are written too: every line has the same shape
}

TEST_CASE("JSON and Protobuf carry the same fields for every event kind") {
  for (auto e : one_of_each()) {
    e.set_run_id("r1");
    e.set_sequence(3);
    e.set_timestamp_us(42);
    auto from_j = from_json(to_json(e));
    REQUIRE(from_j.has_value());
    auto from_p = from_protobuf(to_protobuf(e));
    REQUIRE(from_p.has_value());
    CHECK(from_j->SerializeAsString() == e.SerializeAsString());
    CHECK(from_p->SerializeAsString() == e.SerializeAsString());
  }
}

TEST_CASE("a name that is not UTF-8 reaches Protobuf consumers as the JSON form writes it") {
  // A SQLite column name can hold any byte. Protobuf string fields must be UTF-8: the raw
  // bytes made messages consumers refuse. Both forms now carry U+FFFD for them.
  const std::string bad = "bad\xFFname\x02";
  auto e = schema_action("sh\xC3op", "public.orders",
                         {.action = "add_columns",
                          .column = bad,
                          .to = "text",
                          .reason = "added column '" + bad + "' text",
                          .sql = "ALTER TABLE x ADD COLUMN \"" + bad + "\" TEXT"});
  e.set_run_id("r1");
  CHECK_FALSE(all_utf8(e));
  const std::string bytes = to_protobuf(e);
  auto from_p = from_protobuf(bytes);
  REQUIRE(from_p.has_value());
  CHECK(all_utf8(*from_p));
  CHECK(from_p->schema_action().column() == "bad\xEF\xBF\xBDname\x02");
  CHECK(from_p->source() == "sh\xEF\xBF\xBD" "op");  // a sequence cut short: one U+FFFD
  auto from_j = from_json(to_json(e));
  REQUIRE(from_j.has_value());
  CHECK(from_j->SerializeAsString() == from_p->SerializeAsString());
  // Text that is UTF-8 goes out as it is.
  auto good = schema_action("shop", "public.orders", {.column = "n\xC3\xBC"});
  CHECK(all_utf8(good));
  CHECK(to_protobuf(good) == good.SerializeAsString());
}

TEST_CASE("a JSON line with fields this build does not know still parses") {
  auto e = from_json(R"({"run_id":"r","sequence":1,"type":"run_started","future_field":{"x":1},)"
                     R"("run_started":{"command":"run","tables_selected":2,"new":true}})");
  REQUIRE(e.has_value());
  CHECK(e->run_started().tables_selected() == 2);
  CHECK_FALSE(from_json("not json").has_value());
  CHECK_FALSE(from_json(R"({"sequence":"seven"})").has_value());
}

TEST_CASE("the source drift event names each change, the full observed schema and the hints hash") {
  using flotilla::schema::column;
  using flotilla::schema::portable_type;
  using flotilla::schema::type_kind;
  flotilla::schema::table_schema observed{
      {column{"id", portable_type::of(type_kind::bigint), false, true},
       column{"amount", portable_type::varchar(20)},
       column{"coupon", portable_type::of(type_kind::text)}}};
  flotilla::storage::pb::SchemaBaseline b;
  for (auto [n, t] : {std::pair{"id", "bigint"}, {"amount", "bigint"}, {"note", "text"}}) {
    auto* c = b.add_columns();
    c->set_name(n);
    c->set_type(t);
  }
  b.set_hints_hash("h1");
  b.set_run_id("run-0");
  auto v = evaluate_source_drift({.policy = flotilla::config::drift_policy::warn,
                                  .source = "shop",
                                  .table = "orders",
                                  .run_id = "run-1",
                                  .observed = &observed,
                                  .hints_hash = "h1",
                                  .baseline = &b});
  REQUIRE(v.decision == drift_decision::warn);
  auto j = nlohmann::json::parse(to_json(source_drift_detected(v)));
  CHECK(j["type"] == "source_drift_detected");
  CHECK(j["source"] == "shop");
  CHECK(j["table"] == "orders");
  const auto& p = j["source_drift_detected"];
  REQUIRE(p["changes"].size() == 3);
  CHECK(p["changes"][0] ==
        nlohmann::json{
            {"kind", "retyped"}, {"column", "amount"}, {"from", "bigint"}, {"to", "varchar(20)"}});
  CHECK(p["changes"][1] ==
        nlohmann::json{{"kind", "removed"}, {"column", "note"}, {"from", "text"}, {"to", ""}});
  CHECK(p["changes"][2] ==
        nlohmann::json{{"kind", "added"}, {"column", "coupon"}, {"from", ""}, {"to", "text"}});
  REQUIRE(p["observed"].size() == 3);
  CHECK(p["observed"][0] ==
        nlohmann::json{{"name", "id"}, {"type", "bigint"}, {"nullable", false}});
  CHECK(p["hints_hash"] == "h1");
  CHECK(p["baseline_run_id"] == "run-0");
  CHECK(p["policy"] == "warn");
}

TEST_CASE("the NDJSON file lives under runs/<run_id>/ and takes one line per append") {
  temp_dir dir;
  auto path = event_log::path_for(dir.path() / ".flotilla", "run-9");
  CHECK(path == dir.path() / ".flotilla" / "runs" / "run-9" / "events.ndjson");
  {
    auto log = event_log::open(path);
    REQUIRE(log.has_value());
    REQUIRE(log->append(R"({"a":1})"));
    REQUIRE(log->append(R"({"b":2})"));
    // Written through at once: readable before the log is closed.
    CHECK(read_lines(path) == std::vector<std::string>{R"({"a":1})", R"({"b":2})"});
  }
}

TEST_CASE("an event file that cannot be created is FLT-E004 naming the path") {
  temp_dir dir;
  std::ofstream(dir.path() / "file") << "x";
  auto log = event_log::open(dir.path() / "file" / "runs" / "events.ndjson");
  REQUIRE_FALSE(log.has_value());
  CHECK(log.error().code == errc::event_log);
  CHECK(log.error().text().starts_with("FLT-E004: "));
  CHECK_THAT(log.error().message, Catch::Contains((dir.path() / "file").string()));
}

TEST_CASE("events emitted from many threads get unique sequences, in file order") {
  temp_dir dir;
  auto file = dir.path() / "runs" / "r" / "events.ndjson";
  auto ev = run_events::open(nullptr, file, "r", "acme", {}, false);
  REQUIRE(ev.has_value());
  constexpr int threads = 8, per_thread = 500;
  std::atomic<int> failures{0};  // Catch2 assertions are not thread-safe
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      const std::string table = "t" + std::to_string(t);
      for (int i = 0; i < per_thread; ++i)
        if (!(*ev)->emit(table_finished(
                "src", table, {.status = "copied", .rows = static_cast<std::uint64_t>(i)})))
          ++failures;
    });
  for (auto& w : workers)
    w.join();
  CHECK(failures == 0);
  auto report = (*ev)->finish();
  CHECK(report.ok());
  CHECK(report.emitted == threads * per_thread);
  CHECK(report.log_path == file);
  auto lines = read_lines(file);
  REQUIRE(lines.size() == threads * per_thread);
  std::map<std::string, std::uint64_t> last_rows;
  std::int64_t last_ts = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto e = from_json(lines[i]);
    REQUIRE(e.has_value());
    CHECK(e->sequence() == i + 1);
    CHECK(e->run_id() == "r");
    CHECK(e->project() == "acme");
    CHECK(e->timestamp_us() >= last_ts);
    last_ts = e->timestamp_us();
    // one table's events keep the order they were emitted in
    auto it = last_rows.find(e->table());
    if (it != last_rows.end())
      CHECK(e->table_finished().rows() == it->second + 1);
    last_rows[e->table()] = e->table_finished().rows();
  }
}

TEST_CASE("without an event sink the outbox stays empty") {
  temp_dir dir;
  auto store = flotilla::events::test::open_store(dir.path() / "state");
  flotilla::config::project p;
  p.name = "acme";
  p.state_dir = (dir.path() / ".flotilla").string();
  auto ev = run_events::open(&store, p, "run-1");
  REQUIRE(ev.has_value());
  REQUIRE((*ev)->emit(run_started({})));
  REQUIRE((*ev)->emit(run_finished({.status = "success"})));
  auto report = (*ev)->finish();
  CHECK(report.ok());
  CHECK(report.pending == 0);
  CHECK(store.outbox_size().value() == 0);
  CHECK(read_lines(dir.path() / ".flotilla" / "runs" / "run-1" / "events.ndjson").size() == 2);
}

TEST_CASE("the JSON line is byte for byte the JSON tree's dump, whatever the text holds") {
  auto events = one_of_each();
  const std::vector<std::string> awkward = {
      "",       "plain",         "quote \" and backslash \\", "new\nline\ttab\r",
      "\x01\x1f control", "del \x7f", "caf\xc3\xa9 \xe2\x82\xac",  "bad \xff\xfe utf-8",
      "\xc3",  "emoji \xf0\x9f\x9a\x80"};
  for (const auto& text : awkward) {
    events.push_back(table_finished(text, text,
                                    {.status = text, .rows = 18446744073709551615ull,
                                     .error = text, .error_code = text, .target_table = text}));
    events.push_back(run_started({.command = text, .filters = {text, text}, .retry_of = text}));
    events.push_back(table_started(text, text, text, text));
  }
  std::int64_t ts = -5;
  for (auto& e : events) {
    e.set_run_id("run-\"1\"");
    e.set_project("acme");
    e.set_sequence(static_cast<std::uint64_t>(ts + 10));
    e.set_timestamp_us(ts);
    ts *= -7;
    INFO(to_json_tree(e));
    CHECK(to_json(e) == to_json_tree(e));
    CHECK(from_json(to_json(e)).has_value());
  }
  CHECK(to_json(pb::Event{}) == to_json_tree(pb::Event{}));
}

namespace {
/// `b` holds the lines of `a`, one for one, but for their timestamps: sequences 1..n,
/// the same bytes once the timestamp is copied over, and each line reads back to itself.
void check_same_lines_but_timestamps(const std::vector<std::string>& a,
                                     const std::vector<std::string>& b, std::size_t n) {
  REQUIRE(a.size() == n);
  REQUIRE(b.size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto x = from_json(a[i]);
    auto y = from_json(b[i]);
    REQUIRE(x.has_value());
    REQUIRE(y.has_value());
    CHECK(y->sequence() == i + 1);
    CHECK(y->timestamp_us() > 0);
    y->set_timestamp_us(x->timestamp_us());
    CHECK(to_json(*y) == a[i]);
    CHECK(to_json(*from_json(b[i])) == b[i]);
  }
}
}  // namespace

TEST_CASE("emit_all without an outbox writes the lines emit would, run id and project included") {
  temp_dir dir;
  auto one_by_one = dir.path() / "a" / "events.ndjson";
  auto batched = dir.path() / "b" / "events.ndjson";
  auto events = one_of_each();
  events.push_back(table_started("shop", "we\"ird", "shop.we\"ird", "full"));
  events.push_back(table_finished("shop", "we\"ird", {.status = "pruned", .target_table = "x"}));
  {
    auto ev = run_events::open(nullptr, one_by_one, "run-\"7\"", "ac\\me", {}, false);
    REQUIRE(ev.has_value());
    for (auto e : events)
      REQUIRE((*ev)->emit(std::move(e)));
  }
  {
    auto ev = run_events::open(nullptr, batched, "run-\"7\"", "ac\\me", {}, false);
    REQUIRE(ev.has_value());
    REQUIRE((*ev)->emit_all(events).value() == events.size());
  }
  auto a = read_lines(one_by_one);
  auto b = read_lines(batched);
  check_same_lines_but_timestamps(a, b, events.size());
  for (const auto& line : b) {
    auto y = from_json(line);
    REQUIRE(y.has_value());
    CHECK(y->run_id() == "run-\"7\"");
    CHECK(y->project() == "ac\\me");
  }
}

TEST_CASE("table events by their fields write the lines their Events would, with and without an outbox") {
  // Hostile strings in every viewed field; one event of another kind between them.
  const std::string src = "sh\"op\\", tbl = "t\u00e9\n\x01", target = "a.\"b\"";
  const std::string err = "boom \"x\"\t", code = "FLT-R001";
  std::vector<table_event_line> lines{
      {.source = src, .table = tbl, .target_table = target, .mode = "full"},
      {.finished = true, .source = src, .table = tbl, .target_table = target, .status = "failed",
       .rows = 42, .error = err, .error_code = code, .duration_us = -5},
      {.finished = true, .source = src, .table = tbl, .target_table = target, .status = "pruned"}};
  for (const bool outbox : {false, true}) {
    INFO("outbox: " << outbox);
    temp_dir dir;
    auto store = flotilla::events::test::open_store(dir.path() / "state");
    auto as_events = dir.path() / "a" / "events.ndjson";
    auto by_fields = dir.path() / "b" / "events.ndjson";
    std::vector<pb::Event> events;
    std::vector<run_events::batch_event> batch;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      events.push_back(lines[i].to_event());
      batch.emplace_back(lines[i]);
      if (i == 0) {
        events.push_back(run_started({}));
        batch.emplace_back(run_started({}));
      }
    }
    {
      auto ev = run_events::open(nullptr, as_events, "run-\"7\"", "ac\\me", {}, false);
      REQUIRE(ev.has_value());
      REQUIRE((*ev)->emit_all(events).value() == events.size());
    }
    {
      auto ev = run_events::open(outbox ? &store : nullptr, by_fields, "run-\"7\"", "ac\\me", {},
                                 outbox);
      REQUIRE(ev.has_value());
      REQUIRE((*ev)->emit_batch(std::move(batch)).value() == events.size());
    }
    auto a = read_lines(as_events);
    auto b = read_lines(by_fields);
    check_same_lines_but_timestamps(a, b, events.size());
    auto y = from_json(b[2]);
    CHECK(y->table_finished().error() == err);
    CHECK(y->table() == tbl);
    if (outbox) {
      auto kept = store.scan_outbox();
      REQUIRE(kept.has_value());
      CHECK(kept->size() == events.size());
    }
  }
}

TEST_CASE("a table event line with plain strings is the Event's JSON byte for byte, numbers at their limits") {
  // Strings that need no escaping take a faster writer: it must write what the general
  // one writes, for both kinds and for the widest numbers.
  const std::vector<table_event_line> lines{
      {.source = "shop", .table = "public.orders", .target_table = "staging.orders", .mode = "full"},
      {.source = "", .table = "", .target_table = "", .mode = ""},
      {.finished = true, .source = "shop", .table = "t", .target_table = "s.t", .status = "failed",
       .rows = std::numeric_limits<std::uint64_t>::max(), .error = "boom (x) ~ 42",
       .error_code = "FLT-R001", .duration_us = std::numeric_limits<std::int64_t>::min()},
      {.finished = true, .source = "a", .table = "b", .target_table = "c", .status = "pruned"}};
  const std::vector<std::pair<std::uint64_t, std::int64_t>> stamps{
      {1, 0}, {std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::int64_t>::min()},
      {42, std::numeric_limits<std::int64_t>::max()}};
  for (const auto& line : lines)
    for (const auto& [sequence, timestamp] : stamps) {
      std::string fast = "prefix ";
      append_json(fast, line, "20261201T000000Z-abcd", sequence, timestamp, "acme-fleet");
      auto e = line.to_event();
      e.set_run_id("20261201T000000Z-abcd");
      e.set_project("acme-fleet");
      e.set_sequence(sequence);
      e.set_timestamp_us(timestamp);
      CHECK(fast == "prefix " + to_json_tree(e));
      CHECK(fast == "prefix " + to_json(e));
    }
}

TEST_CASE("a batch of megabytes reaches the file whole, line by line in sequence order") {
  // Large enough that the lines go to the file in several writes: none may be lost,
  // repeated, split or reordered at a write's edge, with or without an outbox.
  const std::size_t tables = 6000;
  for (const bool outbox : {false, true}) {
    INFO("outbox: " << outbox);
    temp_dir dir;
    auto store = flotilla::events::test::open_store(dir.path() / "state");
    auto file = dir.path() / "events.ndjson";
    std::vector<std::string> names;
    names.reserve(tables);
    for (std::size_t i = 0; i < tables; ++i)
      names.push_back("table_" + std::to_string(i) + std::string(i % 97, 'x'));
    std::vector<run_events::batch_event> batch;
    for (const auto& name : names) {
      batch.emplace_back(table_event_line{.source = "shop", .table = name, .target_table = name,
                                          .mode = "full"});
      batch.emplace_back(table_event_line{.finished = true, .source = "shop", .table = name,
                                          .target_table = name, .status = "copied", .rows = 7});
    }
    {
      auto ev = run_events::open(outbox ? &store : nullptr, file, "r", "acme", {}, outbox);
      REQUIRE(ev.has_value());
      REQUIRE((*ev)->emit_batch(std::move(batch)).value() == 2 * tables);
      REQUIRE((*ev)->emit(run_started({})));
    }
    CHECK(std::filesystem::file_size(file) > (std::size_t{1} << 20));
    auto lines = read_lines(file);
    REQUIRE(lines.size() == 2 * tables + 1);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      auto e = from_json(lines[i]);
      REQUIRE(e.has_value());
      REQUIRE(e->sequence() == i + 1);
      if (i < 2 * tables) {
        REQUIRE(e->table() == names[i / 2]);
        CHECK(e->type() == (i % 2 == 0 ? "table_started" : "table_finished"));
      }
    }
    if (outbox) {
      auto kept = store.scan_outbox(0, 3 * tables);
      REQUIRE(kept.has_value());
      CHECK(kept->size() == 2 * tables + 1);
    }
  }
}

TEST_CASE("emit_all writes the lines emit would, and fills the outbox in order") {
  temp_dir dir;
  auto store = flotilla::events::test::open_store(dir.path() / "state");
  auto one_by_one = dir.path() / "a" / "events.ndjson";
  auto batched = dir.path() / "b" / "events.ndjson";
  {
    auto ev = run_events::open(nullptr, one_by_one, "r", "acme", {}, false);
    REQUIRE(ev.has_value());
    for (auto& e : one_of_each())
      REQUIRE((*ev)->emit(std::move(e)));
    CHECK((*ev)->finish().emitted == one_of_each().size());
  }
  {
    auto ev = run_events::open(&store, batched, "r", "acme", {}, true);
    REQUIRE(ev.has_value());
    REQUIRE((*ev)->emit(run_started({})));
    auto n = (*ev)->emit_all(one_of_each());
    REQUIRE(n.has_value());
    CHECK(*n == one_of_each().size());
    CHECK((*ev)->emit_all({}).value() == 0);
    CHECK((*ev)->emitted() == one_of_each().size() + 1);
  }
  auto a = read_lines(one_by_one);
  auto b = read_lines(batched);
  REQUIRE(b.size() == a.size() + 1);
  auto outbox = store.scan_outbox();
  REQUIRE(outbox.has_value());
  REQUIRE(outbox->size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto x = from_json(a[i]);
    auto y = from_json(b[i + 1]);
    REQUIRE(x.has_value());
    REQUIRE(y.has_value());
    CHECK(y->sequence() == x->sequence() + 1);
    x->set_sequence(0);
    y->set_sequence(0);
    x->set_timestamp_us(0);
    y->set_timestamp_us(0);
    CHECK(to_json(*x) == to_json(*y));
    const auto& entry = (*outbox)[i + 1];
    auto z = from_protobuf(entry.payload());
    REQUIRE(z.has_value());
    CHECK(to_json(*z) == b[i + 1]);
    CHECK(entry.key() == event_key(*z));
  }
}
