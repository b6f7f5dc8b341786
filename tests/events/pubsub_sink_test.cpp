// Events through Google Pub/Sub: the real emulator the machine image ships
// (tests/events/pubsub_emulator.hpp), a subscription with message ordering reading the
// messages back over REST.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "events/pubsub_sink.hpp"
#include "events/run_events.hpp"
#include "tests/events/pubsub_emulator.hpp"
#include "tests/events/support.hpp"

using namespace flotilla::events;
using namespace flotilla::events::test;
using namespace std::chrono_literals;
using flotilla::test::pubsub_emulator;
using flotilla::test::pubsub_received;
namespace config = flotilla::config;

namespace {

constexpr const char* project_id = "flotilla-test";

/// One emulator for the whole test binary (it takes seconds to start); each test uses
/// its own topics and subscriptions.
pubsub_emulator& emulator() {
  static pubsub_emulator emu;
  return emu;
}

std::string unique(const std::string& prefix) {
  static std::atomic<int> n{0};
  return fmt::format("{}-{}-{}", prefix, ::getpid(), n++);
}

config::project project_for(const temp_dir& dir, const std::string& host, const std::string& topic,
                            config::event_format format = config::event_format::json) {
  config::project p;
  p.name = "acme";
  p.state_dir = (dir.path() / ".flotilla").string();
  config::pubsub_options o;
  o.project = project_id;
  o.topic = topic;
  o.emulator_host = host;
  o.format = format;
  p.events.pubsub = o;
  return p;
}

/// run_started, then `tables` tables each emitting table_started, schema_action and
/// table_finished from its own thread, then run_finished: 2 + 3 x tables events.
void emit_run(run_events& ev, int tables, const std::string& source = "shop") {
  REQUIRE(ev.emit(
      run_started({.command = "run", .tables_selected = static_cast<std::uint64_t>(tables)})));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < tables; ++t)
    threads.emplace_back([&, t] {
      const std::string table = "t" + std::to_string(t);
      failures += !ev.emit(table_started(source, table, "s." + table, "full"));
      failures += !ev.emit(
          schema_action(source, table,
                        {.action = "add_columns", .column = "c", .to = "text", .reason = "added"}));
      failures += !ev.emit(table_finished(source, table, {.status = "copied", .rows = 10}));
    });
  for (auto& th : threads)
    th.join();
  CHECK(failures == 0);
  REQUIRE(ev.emit(
      run_finished({.status = "success", .tables_copied = static_cast<std::uint64_t>(tables)})));
}

pb::Event decode(const pubsub_received& m) {
  REQUIRE(m.attributes.contains("content-type"));
  auto e = m.attributes.at("content-type") == "application/json" ? from_json(m.data)
                                                                 : from_protobuf(m.data);
  INFO(m.data);
  REQUIRE(e.has_value());
  return *e;
}

/// Every message's ordering key is its event's key, and per key the events arrive in
/// the order `before` gives (a strict order on events).
template <class Before>
void check_order_per_key(const std::vector<pubsub_received>& msgs, Before before) {
  std::map<std::string, pb::Event> last;
  for (const auto& m : msgs) {
    pb::Event e = decode(m);
    CHECK(m.ordering_key == event_key(e));
    if (auto it = last.find(m.ordering_key); it != last.end()) {
      INFO(m.ordering_key << ": " << it->second.run_id() << "/" << it->second.sequence()
                          << " then " << e.run_id() << "/" << e.sequence());
      CHECK(before(it->second, e));
    }
    last[m.ordering_key] = e;
  }
}

bool same_run_in_sequence(const pb::Event& a, const pb::Event& b) {
  return a.run_id() == b.run_id() && a.sequence() < b.sequence();
}

std::unique_ptr<pubsub_client> client_for(pubsub_target t) {
  auto c = pubsub_client::create(std::move(t));
  INFO((c ? std::string() : c.error().text()));
  REQUIRE(c.has_value());
  return std::move(*c);
}


/// A loopback HTTP server giving each request the next canned answer (the last one
/// repeats); a `silent` answer keeps the connection open and says nothing, so the
/// client times out. Records each request's head and body. Serves on its own thread.
class canned_server {
 public:
  struct answer {
    int status = 200;
    std::string body;
    bool silent = false;
  };

  explicit canned_server(std::vector<answer> answers) : answers_(std::move(answers)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }

  ~canned_server() {
    stop_ = true;
    thread_.join();
    for (int c : held_)
      ::close(c);
    ::close(fd_);
  }

  [[nodiscard]] std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0)
        continue;  // look at stop_ again
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0)
        continue;
      std::string in;
      char buf[4096];
      std::size_t need = std::string::npos;
      while (need == std::string::npos || in.size() < need) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 2000) <= 0)
          break;
        const auto n = ::read(c, buf, sizeof buf);
        if (n <= 0)
          break;
        in.append(buf, static_cast<std::size_t>(n));
        const auto end = in.find("\r\n\r\n");
        if (end != std::string::npos && need == std::string::npos) {
          std::size_t length = 0;
          if (auto at = in.find("Content-Length: "); at != std::string::npos && at < end)
            length = std::stoul(in.substr(at + 16));
          need = end + 4 + length;
        }
      }
      answer a;
      {
        std::lock_guard lock(mu_);
        a = answers_[std::min(requests_.size(), answers_.size() - 1)];
        requests_.push_back(in);
      }
      if (a.silent) {
        held_.push_back(c);
        continue;
      }
      const std::string out = fmt::format(
          "HTTP/1.1 {} Canned\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
          "Connection: close\r\n\r\n{}",
          a.status, a.body.size(), a.body);
      (void)!::write(c, out.data(), out.size());
      ::close(c);
    }
  }

  std::vector<answer> answers_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::vector<int> held_;
};

pubsub_target service_target(const std::string& host) {
  pubsub_target t;  // the real service's code path, against a local server
  t.endpoint = "http://" + host;
  t.access_token = "test-token";
  t.project = project_id;
  t.topic = "events-1";
  return t;
}

std::string google_error(int code, const std::string& message, const std::string& status) {
  return nlohmann::json{{"error", {{"code", code}, {"message", message}, {"status", status}}}}
      .dump();
}

}  // namespace

TEST_CASE("the emulator fixture starts, answers and reads back what was published",
          "[pubsub]") {
  auto& emu = emulator();
  CHECK(emu.host().starts_with("127.0.0.1:"));
  const auto topic = unique("fixture"), sub = topic + "-sub";
  emu.create_subscription(project_id, topic, sub);
  auto a = emu.http(
      "POST", fmt::format("/v1/projects/{}/topics/{}:publish", project_id, topic),
      R"({"messages":[{"data":"aGVsbG8=","orderingKey":"k","attributes":{"a":"b"}}]})");
  REQUIRE(a.status == 200);
  auto got = emu.pull(project_id, sub, 1, 20s);
  REQUIRE(got.size() == 1);
  CHECK(got[0].data == "hello");
  CHECK(got[0].ordering_key == "k");
  CHECK(got[0].attributes == std::map<std::string, std::string>{{"a", "b"}});
  // Acknowledged: nothing comes again.
  CHECK(emu.pull(project_id, sub, 1, 300ms).empty());
}

TEST_CASE("the client publishes in order with ordering keys, data and attributes", "[pubsub]") {
  auto& emu = emulator();
  const auto topic = unique("client"), sub = topic + "-sub";
  emu.create_subscription(project_id, topic, sub);  // creates the topic as well

  pubsub_target t;
  t.emulator_host = emu.host();
  t.project = project_id;
  t.topic = topic;
  auto client = client_for(t);
  CHECK(client->emulator());
  CHECK(client->destination() ==
        fmt::format("emulator {}, topic projects/{}/topics/{}", emu.host(), project_id, topic));

  // 3 keys interleaved; binary data with every byte value (and lengths 0..3 mod 3) to
  // check the base64 round trip.
  std::vector<pubsub_message> msgs;
  const int n = 1203;  // more than one request (1,000 per request)
  for (int i = 0; i < n; ++i) {
    pubsub_message m;
    m.ordering_key = "key-" + std::to_string(i % 3);
    m.data = std::to_string(i) + ":";
    for (int b = 0; b < i % 7; ++b)
      m.data += static_cast<char>((i * 31 + b * 97) & 0xff);
    m.attributes = {{"index", std::to_string(i)}, {"parity", i % 2 ? "odd" : "even"}};
    msgs.push_back(std::move(m));
  }
  auto out = client->publish(msgs);
  INFO((out.failure ? out.failure->text() : ""));
  REQUIRE_FALSE(out.failure.has_value());
  CHECK(out.acknowledged == msgs.size());

  auto got = emu.pull(project_id, sub, msgs.size(), 30s);
  REQUIRE(got.size() == msgs.size());
  CHECK(emu.pull(project_id, sub, 1, 300ms).empty());  // each exactly once
  std::map<std::string, int> last_index;
  std::set<int> seen;
  for (const auto& g : got) {
    REQUIRE(g.attributes.contains("index"));
    const int i = std::stoi(g.attributes.at("index"));
    REQUIRE(i >= 0);
    REQUIRE(i < n);
    CHECK(g.data == msgs[i].data);
    CHECK(g.ordering_key == msgs[i].ordering_key);
    CHECK(g.attributes == msgs[i].attributes);
    if (auto it = last_index.find(g.ordering_key); it != last_index.end())
      CHECK(it->second < i);  // in publish order per ordering key
    last_index[g.ordering_key] = i;
    seen.insert(i);
  }
  CHECK(seen.size() == msgs.size());
  CHECK(last_index.size() == 3);
}

TEST_CASE("an emulator that lost the topic (restarted) gets it created again", "[pubsub]") {
  auto& emu = emulator();
  const auto topic = unique("lost");
  pubsub_target t;
  t.emulator_host = emu.host();
  t.project = project_id;
  t.topic = topic;
  auto client = client_for(t);
  std::vector<pubsub_message> msgs(1);
  msgs[0].data = "before";
  auto out = client->publish(msgs);  // creates the topic
  REQUIRE_FALSE(out.failure.has_value());
  REQUIRE(emu.http("DELETE", fmt::format("/v1/projects/{}/topics/{}", project_id, topic)).status ==
          200);
  REQUIRE(emu.http("GET", fmt::format("/v1/projects/{}/topics/{}", project_id, topic)).status ==
          404);
  // The same client (which created the topic once already) creates it again.
  msgs[0].data = "after";
  out = client->publish(msgs);
  INFO((out.failure ? out.failure->text() : ""));
  CHECK_FALSE(out.failure.has_value());
  CHECK(out.acknowledged == 1);
  CHECK(emu.http("GET", fmt::format("/v1/projects/{}/topics/{}", project_id, topic)).status == 200);
}

TEST_CASE("the sink delivers a run's events as NDJSON lines, in order per table, and empties "
          "the outbox",
          "[pubsub]") {
  auto& emu = emulator();
  const auto topic = unique("run-json"), sub = topic + "-sub";
  emu.create_subscription(project_id, topic, sub);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto ev = run_events::open(&store, project_for(dir, emu.host(), topic), "run-1");
  REQUIRE(ev.has_value());
  emit_run(**ev, 6);
  auto report = (*ev)->finish();
  INFO((report.errors.empty() ? "" : report.errors[0].text()));
  REQUIRE(report.ok());
  CHECK(report.emitted == 20);
  CHECK(report.delivered == 20);
  CHECK(report.pending == 0);
  CHECK(store.outbox_size().value() == 0);

  auto lines = read_lines(report.log_path);
  REQUIRE(lines.size() == 20);
  auto msgs = emu.pull(project_id, sub, 20, 30s);
  REQUIRE(msgs.size() == 20);
  CHECK(emu.pull(project_id, sub, 1, 300ms).empty());  // each exactly once
  std::set<std::uint64_t> seen;
  for (const auto& m : msgs) {
    pb::Event e = decode(m);
    REQUIRE(e.sequence() >= 1);
    REQUIRE(e.sequence() <= 20);
    CHECK(m.data == lines[e.sequence() - 1]);  // byte for byte the NDJSON line
    CHECK(m.attributes.at("content-type") == "application/json");
    CHECK(m.attributes.at("flotilla-event-type") == e.type());
    CHECK(m.attributes.at("flotilla-run-id") == "run-1");
    CHECK(m.attributes.size() == 3);
    CHECK(e.project() == "acme");
    seen.insert(e.sequence());
  }
  CHECK(seen.size() == 20);
  check_order_per_key(msgs, same_run_in_sequence);
  std::vector<std::string> t3;
  for (const auto& m : msgs)
    if (m.ordering_key == "shop.t3")
      t3.push_back(decode(m).type());
  CHECK(t3 == std::vector<std::string>{"table_started", "schema_action", "table_finished"});
  std::vector<std::string> run_level;
  for (const auto& m : msgs)
    if (m.ordering_key == "run-1")
      run_level.push_back(decode(m).type());
  CHECK(run_level == std::vector<std::string>{"run_started", "run_finished"});
}

TEST_CASE("Pub/Sub with format = protobuf: the serialized Event with the NDJSON line's fields",
          "[pubsub]") {
  auto& emu = emulator();
  const auto topic = unique("run-pb"), sub = topic + "-sub";
  emu.create_subscription(project_id, topic, sub);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto ev = run_events::open(
      &store, project_for(dir, emu.host(), topic, config::event_format::protobuf), "run-pb");
  REQUIRE(ev.has_value());
  emit_run(**ev, 3);
  auto report = (*ev)->finish();
  INFO((report.errors.empty() ? "" : report.errors[0].text()));
  REQUIRE(report.ok());
  CHECK(store.outbox_size().value() == 0);
  auto lines = read_lines(report.log_path);
  REQUIRE(lines.size() == 11);
  auto msgs = emu.pull(project_id, sub, lines.size(), 30s);
  REQUIRE(msgs.size() == lines.size());
  for (const auto& m : msgs) {
    CHECK(m.attributes.at("content-type") == "application/x-protobuf");
    auto e = from_protobuf(m.data);
    REQUIRE(e.has_value());
    CHECK(m.attributes.at("flotilla-event-type") == e->type());
    CHECK(m.attributes.at("flotilla-run-id") == "run-pb");
    auto line = from_json(lines[e->sequence() - 1]);
    REQUIRE(line.has_value());
    CHECK(e->SerializeAsString() == line->SerializeAsString());
  }
  check_order_per_key(msgs, same_run_in_sequence);
}

TEST_CASE("an unreachable emulator is FLT-E001 naming it; nothing is lost and the next run "
          "sends the backlog first",
          "[pubsub]") {
  auto& emu = emulator();
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  const auto topic = unique("down");
  const std::string down = "127.0.0.1:" + std::to_string(closed_port());
  std::uint64_t first_run = 0;
  {
    auto ev = run_events::open(&store, project_for(dir, down, topic), "run-1");
    REQUIRE(ev.has_value());
    emit_run(**ev, 3);
    const auto start = std::chrono::steady_clock::now();
    auto report = (*ev)->finish();
    CHECK(std::chrono::steady_clock::now() - start < 10s);  // refused: no long wait
    REQUIRE(report.errors.size() == 1);
    const auto& e = report.errors[0];
    INFO(e.text());
    CHECK(e.code == errc::broker_unreachable);
    CHECK(e.transient());
    CHECK_THAT(e.text(),
               Catch::StartsWith(fmt::format("FLT-E001: Pub/Sub (emulator {}, topic projects/{}/"
                                             "topics/{}) did not answer",
                                             down, project_id, topic)));
    CHECK_THAT(e.message, Catch::Contains("Check that the emulator runs and listens on " + down));
    CHECK_THAT(e.message, Catch::Contains("12 event(s) are kept in the outbox"));
    CHECK_THAT(e.message, Catch::Contains("kept in the outbox"));
    CHECK(report.delivered == 0);
    first_run = report.emitted;
    CHECK(first_run == 12);  // 11 run events and the events_undelivered notice
    CHECK(report.pending == first_run);
    CHECK(store.outbox_size().value() == first_run);
    auto lines = read_lines(report.log_path);
    REQUIRE(lines.size() == first_run);
    auto last = from_json(lines.back());
    REQUIRE(last.has_value());
    CHECK(last->type() == "events_undelivered");
    CHECK(last->events_undelivered().error_code() == "FLT-E001");
    CHECK(last->events_undelivered().sink() == "pubsub");
    CHECK(last->events_undelivered().destination() ==
          fmt::format("emulator {}, topic projects/{}/topics/{}", down, project_id, topic));
    CHECK(last->events_undelivered().pending() == 12);  // itself included
  }

  // The emulator is reachable now: the backlog goes first, then this run's events.
  const auto sub = topic + "-sub";
  emu.create_subscription(project_id, topic, sub);
  auto ev = run_events::open(&store, project_for(dir, emu.host(), topic), "run-2");
  REQUIRE(ev.has_value());
  emit_run(**ev, 3);
  auto report = (*ev)->finish();
  INFO((report.errors.empty() ? "" : report.errors[0].text()));
  REQUIRE(report.ok());
  CHECK(report.delivered == first_run + 11);
  CHECK(report.pending == 0);
  CHECK(store.outbox_size().value() == 0);
  auto msgs = emu.pull(project_id, sub, first_run + 11, 30s);
  REQUIRE(msgs.size() == first_run + 11);
  CHECK(emu.pull(project_id, sub, 1, 300ms).empty());
  check_order_per_key(msgs, [](const pb::Event& a, const pb::Event& b) {
    return a.run_id() == b.run_id() ? a.sequence() < b.sequence()
                                    : (a.run_id() == "run-1" && b.run_id() == "run-2");
  });
  std::vector<std::string> t0;
  for (const auto& m : msgs)
    if (m.ordering_key == "shop.t0") {
      auto e = decode(m);
      t0.push_back(e.run_id() + ":" + e.type());
    }
  CHECK(t0 == std::vector<std::string>{"run-1:table_started", "run-1:schema_action",
                                       "run-1:table_finished", "run-2:table_started",
                                       "run-2:schema_action", "run-2:table_finished"});
}

TEST_CASE("an error answer is FLT-E002 with the service's message; the events stay in the "
          "outbox",
          "[pubsub]") {
  auto& emu = emulator();

  SECTION("a topic name the service rejects") {
    pubsub_target t;
    t.emulator_host = emu.host();
    t.project = project_id;
    t.topic = "ab";  // names need at least 3 characters
    auto client = client_for(t);
    std::vector<pubsub_message> msgs(2);
    msgs[0].data = "x";
    msgs[1].data = "y";
    auto out = client->publish(msgs);
    CHECK(out.acknowledged == 0);
    REQUIRE(out.failure.has_value());
    INFO(out.failure->text());
    CHECK(out.failure->code == errc::broker_refused);
    CHECK_FALSE(out.failure->transient());
    CHECK_THAT(out.failure->text(),
               Catch::StartsWith(fmt::format("FLT-E002: Pub/Sub (emulator {}, topic projects/{}/"
                                             "topics/ab) refused to create the topic: HTTP 400: ",
                                             emu.host(), project_id)));
    CHECK_THAT(out.failure->message, Catch::Contains("Invalid [topics] name"));
    CHECK_THAT(out.failure->message, Catch::Contains("Check events.pubsub.project and topic"));
  }

  SECTION("a missing topic on the service path (no topic creation there)") {
    const auto topic = unique("missing");
    pubsub_target t;  // the service's code path, sent to the emulator
    t.endpoint = "http://" + emu.host();
    t.access_token = "test-token";
    t.project = project_id;
    t.topic = topic;
    auto client = client_for(t);
    CHECK_FALSE(client->emulator());
    std::vector<pubsub_message> msgs(1);
    msgs[0].data = "x";
    auto out = client->publish(msgs);
    CHECK(out.acknowledged == 0);
    REQUIRE(out.failure.has_value());
    INFO(out.failure->text());
    CHECK(out.failure->code == errc::broker_refused);
    CHECK_THAT(out.failure->text(),
               Catch::StartsWith(fmt::format("FLT-E002: Pub/Sub (http://{}, topic projects/{}/"
                                             "topics/{}) refused the events: HTTP 404: Topic not "
                                             "found. Create the topic (`gcloud pubsub topics "
                                             "create {} --project {}`)",
                                             emu.host(), project_id, topic, topic, project_id)));
    // ensure_topic on that path only looks: still missing.
    auto st = client->ensure_topic();
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().code == errc::broker_refused);
    CHECK_THAT(st.error().message,
               Catch::Contains("refused the topic lookup: HTTP 404: Topic not found"));
    // Once it exists, the same client publishes.
    emu.create_topic(project_id, topic);
    out = client->publish(msgs);
    INFO((out.failure ? out.failure->text() : ""));
    CHECK_FALSE(out.failure.has_value());
    CHECK(out.acknowledged == 1);
  }

  SECTION("a project the emulator does not serve, through a run: nothing lost") {
    pubsub_emulator strict({"--projects=flotilla-test"});
    temp_dir dir;
    auto store = open_store(dir.path() / "state");
    auto p = project_for(dir, strict.host(), "events-1");
    p.events.pubsub->project = "other-project";
    auto ev = run_events::open(&store, p, "run-1");
    REQUIRE(ev.has_value());
    emit_run(**ev, 2);
    auto report = (*ev)->finish();
    REQUIRE(report.errors.size() == 1);
    const auto& e = report.errors[0];
    INFO(e.text());
    CHECK(e.code == errc::broker_refused);
    CHECK_THAT(e.text(), Catch::StartsWith(fmt::format(
                             "FLT-E002: Pub/Sub (emulator {}, topic "
                             "projects/other-project/topics/events-1) refused to create the topic: "
                             "HTTP 404: Invalid (project=other-project) out of valid projects",
                             strict.host())));
    CHECK_THAT(e.message, Catch::Contains("Check events.pubsub.project (other-project)"));
    CHECK_THAT(e.message, Catch::Contains("kept in the outbox"));
    CHECK(report.delivered == 0);
    CHECK(report.pending == report.emitted);
    CHECK(store.outbox_size().value() == report.emitted);
    auto lines = read_lines(report.log_path);
    auto last = from_json(lines.back());
    REQUIRE(last.has_value());
    CHECK(last->events_undelivered().error_code() == "FLT-E002");
    CHECK(last->events_undelivered().sink() == "pubsub");
  }
}

TEST_CASE("the service path: bearer token, 429/5xx retried, then FLT-E001; 401/403 are FLT-E002",
          "[pubsub]") {
  std::vector<pubsub_message> msgs(2);
  msgs[0].data = "one";
  msgs[0].ordering_key = "shop.orders";
  msgs[1].data = "two";
  msgs[1].ordering_key = "shop.orders";
  const auto unavailable =
      google_error(503, "The service is currently unavailable.", "UNAVAILABLE");

  SECTION("a 503 then success: retried, acknowledged once") {
    canned_server server({{503, unavailable}, {200, R"({"messageIds":["1","2"]})"}});
    auto client = client_for(service_target(server.host()));
    auto out = client->publish(msgs);
    INFO((out.failure ? out.failure->text() : ""));
    CHECK_FALSE(out.failure.has_value());
    CHECK(out.acknowledged == 2);
    auto reqs = server.requests();
    REQUIRE(reqs.size() == 2);
    CHECK(reqs[0] == reqs[1]);  // the same request again
    CHECK_THAT(reqs[0],
               Catch::StartsWith(
                   "POST /v1/projects/flotilla-test/topics/events-1:publish HTTP/1.1\r\n"));
    CHECK_THAT(reqs[0], Catch::Contains("\r\nAuthorization: Bearer test-token\r\n"));
    CHECK_THAT(reqs[0], Catch::Contains("\r\nContent-Type: application/json\r\n"));
    auto body = nlohmann::json::parse(reqs[0].substr(reqs[0].find("\r\n\r\n") + 4));
    CHECK(body == nlohmann::json::parse(
                      R"({"messages":[{"data":"b25l","orderingKey":"shop.orders"},)"
                      R"({"data":"dHdv","orderingKey":"shop.orders"}]})"));
  }

  SECTION("503 every time: three attempts, then FLT-E001 with the service's message") {
    canned_server server({{503, unavailable}});
    auto client = client_for(service_target(server.host()));
    auto out = client->publish(msgs);
    CHECK(out.acknowledged == 0);
    REQUIRE(out.failure.has_value());
    INFO(out.failure->text());
    CHECK(out.failure->code == errc::broker_unreachable);
    CHECK_THAT(out.failure->text(),
               Catch::StartsWith(fmt::format(
                   "FLT-E001: Pub/Sub (http://{}, topic projects/flotilla-test/topics/events-1) "
                   "could not take the events for now: HTTP 503: The service is currently "
                   "unavailable. The service is overloaded or unavailable",
                   server.host())));
    CHECK(server.requests().size() == 3);
  }

  SECTION("the emulator's topic creation answered 503 every time: asked three times too") {
    canned_server server({{503, unavailable}});
    pubsub_target t;
    t.emulator_host = server.host();
    t.project = project_id;
    t.topic = "events-1";
    auto client = client_for(t);
    auto out = client->publish(msgs);
    REQUIRE(out.failure.has_value());
    INFO(out.failure->text());
    CHECK(out.failure->code == errc::broker_unreachable);
    CHECK_THAT(out.failure->text(), Catch::Contains("could not create the topic for now: HTTP 503"));
    const auto reqs = server.requests();
    REQUIRE(reqs.size() == 3);
    for (const auto& r : reqs)
      CHECK_THAT(r, Catch::StartsWith("PUT /v1/projects/flotilla-test/topics/events-1 "));
  }

  SECTION("401: no retry, FLT-E002 saying to renew the token") {
    canned_server server(
        {{401, google_error(401, "Request had invalid authentication credentials.",
                            "UNAUTHENTICATED")}});
    auto client = client_for(service_target(server.host()));
    auto out = client->publish(msgs);
    REQUIRE(out.failure.has_value());
    INFO(out.failure->text());
    CHECK(out.failure->code == errc::broker_refused);
    CHECK_THAT(out.failure->message,
               Catch::Contains("HTTP 401: Request had invalid authentication credentials. The "
                               "access token is missing, invalid or expired"));
    CHECK_THAT(out.failure->message, Catch::Contains("renew GOOGLE_OAUTH_ACCESS_TOKEN"));
    CHECK(server.requests().size() == 1);
  }

  SECTION("403: FLT-E002 naming the role to grant") {
    canned_server server({{403, google_error(403, "User not authorized to perform this action.",
                                             "PERMISSION_DENIED")}});
    auto client = client_for(service_target(server.host()));
    auto out = client->publish(msgs);
    REQUIRE(out.failure.has_value());
    INFO(out.failure->text());
    CHECK(out.failure->code == errc::broker_refused);
    CHECK_THAT(out.failure->message, Catch::Contains("HTTP 403: User not authorized"));
    CHECK_THAT(out.failure->message, Catch::Contains("roles/pubsub.publisher"));
    CHECK(server.requests().size() == 1);
  }
}

TEST_CASE("a service that never answers is FLT-E001 within the delivery timeout", "[pubsub]") {
  canned_server server({{200, "", true}});
  auto client = client_for(service_target(server.host()));
  std::vector<pubsub_message> msgs(1);
  msgs[0].data = "x";
  const auto start = std::chrono::steady_clock::now();
  auto out = client->publish(msgs, 700ms);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= 600ms);
  CHECK(took < 5s);
  CHECK(out.acknowledged == 0);
  REQUIRE(out.failure.has_value());
  INFO(out.failure->text());
  CHECK(out.failure->code == errc::broker_unreachable);
  CHECK_THAT(out.failure->message, Catch::Contains("did not answer when sending the events"));
  CHECK_THAT(out.failure->message, Catch::Contains("timed out"));
  CHECK_THAT(out.failure->message, Catch::Contains("Check that this machine reaches the service"));
}

TEST_CASE("a 200 answer without a message ID per event is no delivery: FLT-E002, events kept",
          "[pubsub]") {
  std::vector<pubsub_message> msgs(2);
  msgs[0].data = "one";
  msgs[1].data = "two";
  for (const char* body : {"{}", "<html>proxy</html>", R"({"messageIds":["1"]})"}) {
    INFO(body);
    canned_server server({{200, body}});
    auto client = client_for(service_target(server.host()));
    auto out = client->publish(msgs);
    CHECK(out.acknowledged == 0);
    REQUIRE(out.failure.has_value());
    CHECK(out.failure->code == errc::broker_refused);
    CHECK_THAT(out.failure->message,
               Catch::Contains("answered HTTP 200 to a publish of 2 event(s) with") &&
                   Catch::Contains("nothing confirms the events arrived"));
  }
}

TEST_CASE("a stop asked for ends the wait for a server that does not answer", "[pubsub]") {
  canned_server server({{200, "", true}});
  auto client = client_for(service_target(server.host()));
  std::vector<pubsub_message> msgs(1);
  msgs[0].data = "x";
  std::atomic<bool> stop{true};
  flotilla::events::set_stop_request(&stop);
  const auto start = std::chrono::steady_clock::now();
  auto out = client->publish(msgs, 20s);
  const auto took = std::chrono::steady_clock::now() - start;
  flotilla::events::set_stop_request(nullptr);
  CHECK(took < 5s);
  CHECK(out.acknowledged == 0);
  CHECK(out.failure.has_value());
}

TEST_CASE("Pub/Sub settings: project and topic required, a token for the real service",
          "[pubsub]") {
  pubsub_target t;
  t.topic = "events-1";
  auto c = pubsub_client::create(t);
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == errc::sink_config);
  CHECK_THAT(c.error().text(), Catch::StartsWith("FLT-E003: [events.pubsub] needs a project"));

  t.project = project_id;
  t.topic.clear();
  c = pubsub_client::create(t);
  REQUIRE_FALSE(c.has_value());
  CHECK_THAT(c.error().text(), Catch::StartsWith("FLT-E003: [events.pubsub] needs a topic"));

  // The real service without a token (and no emulator in the environment).
  t.topic = "events-1";
  const char* saved_host = std::getenv("PUBSUB_EMULATOR_HOST");
  const char* saved_token = std::getenv("GOOGLE_OAUTH_ACCESS_TOKEN");
  const std::string host_value = saved_host ? saved_host : "";
  const std::string token_value = saved_token ? saved_token : "";
  ::unsetenv("PUBSUB_EMULATOR_HOST");
  ::unsetenv("GOOGLE_OAUTH_ACCESS_TOKEN");
  c = pubsub_client::create(t);
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == errc::sink_config);
  CHECK_THAT(c.error().message, Catch::Contains("GOOGLE_OAUTH_ACCESS_TOKEN"));
  CHECK_THAT(c.error().message, Catch::Contains("emulator_host"));

  // The token from the environment: the service's endpoint.
  ::setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.test", 1);
  c = pubsub_client::create(t);
  REQUIRE(c.has_value());
  CHECK_FALSE((*c)->emulator());
  CHECK((*c)->destination() ==
        "https://pubsub.googleapis.com, topic projects/flotilla-test/topics/events-1");

  // PUBSUB_EMULATOR_HOST, as Google's client libraries read it.
  ::setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:8681", 1);
  c = pubsub_client::create(t);
  REQUIRE(c.has_value());
  CHECK((*c)->emulator());
  CHECK((*c)->destination() ==
        "emulator 127.0.0.1:8681, topic projects/flotilla-test/topics/events-1");

  if (saved_host)
    ::setenv("PUBSUB_EMULATOR_HOST", host_value.c_str(), 1);
  else
    ::unsetenv("PUBSUB_EMULATOR_HOST");
  if (saved_token)
    ::setenv("GOOGLE_OAUTH_ACCESS_TOKEN", token_value.c_str(), 1);
  else
    ::unsetenv("GOOGLE_OAUTH_ACCESS_TOKEN");

  // Through run_events: the settings error is reported, the events kept.
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto p = project_for(dir, "", "events-1");
  p.events.pubsub->project.clear();
  auto ev = run_events::open(&store, p, "run-1");
  REQUIRE(ev.has_value());
  emit_run(**ev, 1);
  auto report = (*ev)->finish();
  REQUIRE(report.errors.size() == 1);
  CHECK(report.errors[0].code == errc::sink_config);
  CHECK(store.outbox_size().value() == report.emitted);
  auto last = from_json(read_lines(report.log_path).back());
  REQUIRE(last.has_value());
  CHECK(last->events_undelivered().sink() == "pubsub");
  CHECK(last->events_undelivered().error_code() == "FLT-E003");
}

// ---- `flotilla run` end to end ---------------------------------------------------------

namespace {

int run_in(const std::filesystem::path& dir, const std::string& args) {
  const char* bin = std::getenv("FLOTILLA_BIN");
  INFO("FLOTILLA_BIN must name the flotilla binary (ctest sets it)");
  REQUIRE(bin != nullptr);
  const std::string cmd =
      fmt::format("cd '{}' && '{}' {} > out.txt 2> err.txt", dir.string(), bin, args);
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("a flotilla run's events reach a Pub/Sub subscription in order per table", "[pubsub]") {
  auto& emu = emulator();
  const auto topic = unique("cli"), sub = topic + "-sub";
  emu.create_subscription(project_id, topic, sub);
  temp_dir dir;
  const auto db = dir.path() / "app.db";
  REQUIRE(std::system(fmt::format("sqlite3 '{}' \"CREATE TABLE orders (id INTEGER PRIMARY KEY, "
                                  "total BIGINT); INSERT INTO orders VALUES (1, 2); CREATE TABLE "
                                  "customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO "
                                  "customers VALUES (1, 'Ada');\"",
                                  db.string())
                          .c_str()) == 0);
  std::ofstream(dir.path() / "flotilla.toml") << fmt::format(
      "[project]\non_source_drift = \"warn\"\n"
      "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
      "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
      "[events.pubsub]\nproject = \"{}\"\ntopic = \"{}\"\nemulator_host = \"{}\"\n"
      "format = \"json\"\n",
      project_id, topic, emu.host());
  auto stderr_of = [&] {
    std::string all;
    for (const auto& l : read_lines(dir.path() / "err.txt"))
      all += l + "\n";
    return all;
  };
  const int first = run_in(dir.path(), "run --output json");
  INFO(stderr_of());
  REQUIRE(first == 0);  // seeds the drift baselines
  {
    std::ifstream out(dir.path() / "out.txt");
    auto run = nlohmann::json::parse(out);
    CHECK(run["events"]["errors"].empty());
    CHECK(run["events"]["pending"] == 0);
  }
  REQUIRE(std::system(fmt::format("sqlite3 '{}' \"ALTER TABLE orders ADD COLUMN note TEXT; "
                                  "INSERT INTO orders VALUES (2, 3, 'x');\"",
                                  db.string())
                          .c_str()) == 0);
  const int second = run_in(dir.path(), "run");
  INFO(stderr_of());
  REQUIRE(second == 0);  // warn: the run succeeds, with a drift event

  // run 1: 6 events; run 2: run_started, orders x 4, customers x 2, run_finished
  auto msgs = emu.pull(project_id, sub, 14, 30s);
  REQUIRE(msgs.size() == 14);
  CHECK(emu.pull(project_id, sub, 1, 300ms).empty());
  std::map<std::string, std::vector<std::string>> by_key;
  std::vector<std::string> runs;
  nlohmann::json drift;
  for (const auto& m : msgs) {
    auto e = nlohmann::json::parse(m.data);
    CHECK(m.attributes.at("content-type") == "application/json");
    CHECK(m.attributes.at("flotilla-event-type") == e["type"]);
    CHECK(m.attributes.at("flotilla-run-id") == e["run_id"]);
    by_key[m.ordering_key].push_back(e["type"].get<std::string>());
    if (e["type"] == "run_started")
      runs.push_back(e["run_id"]);
    if (e["type"] == "source_drift_detected")
      drift = e;
  }
  CHECK(by_key["app.orders"] ==
        std::vector<std::string>{"table_started", "table_finished", "table_started",
                                 "schema_action", "source_drift_detected", "table_finished"});
  CHECK(by_key["app.customers"] == std::vector<std::string>{"table_started", "table_finished",
                                                            "table_started", "table_finished"});
  REQUIRE(runs.size() == 2);
  REQUIRE(by_key.size() == 4);  // two tables and each run's own key
  for (const auto& r : runs)
    CHECK(by_key[r] == std::vector<std::string>{"run_started", "run_finished"});
  REQUIRE(drift.is_object());
  CHECK(drift["source_drift_detected"]["changes"][0]["column"] == "note");
}

TEST_CASE("a table whose key is past the 1,024 bytes of an ordering key gets one key of its own "
          "within them",
          "[pubsub]") {
  auto& emu = emulator();
  const auto topic = unique("long-key"), sub = topic + "-sub";
  emu.create_subscription(project_id, topic, sub);
  temp_dir dir;
  auto store = open_store(dir.path() / "state");
  auto ev = run_events::open(&store, project_for(dir, emu.host(), topic), "run-1");
  REQUIRE(ev.has_value());
  const std::string table(1100, 't');
  REQUIRE(ev->get()->emit(table_started("shop", table, "s.t", "full")));
  REQUIRE(ev->get()->emit(table_finished("shop", table, {.status = "copied", .rows = 1})));
  auto report = (*ev)->finish();
  INFO((report.errors.empty() ? "" : report.errors[0].text()));
  REQUIRE(report.ok());
  auto msgs = emu.pull(project_id, sub, 2, 30s);
  REQUIRE(msgs.size() == 2);
  for (const auto& m : msgs) {
    INFO(m.ordering_key);
    CHECK(m.ordering_key.size() <= 1024);
    CHECK(m.ordering_key.starts_with("shop.ttt"));
    CHECK(m.ordering_key == msgs[0].ordering_key);  // one key for the table: its order kept
  }
}
