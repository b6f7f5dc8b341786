// `flotilla run` end to end with a Kafka event sink: the real binary produces to
// librdkafka's mock cluster, and a real consumer reads the events back.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "tests/events/support.hpp"

using namespace flotilla::events::test;

namespace {

int run_in(const std::filesystem::path& dir, const std::string& args) {
  const char* bin = std::getenv("FLOTILLA_BIN");
  REQUIRE(bin != nullptr);
  const std::string cmd = fmt::format("cd '{}' && '{}' {} > out.txt 2> err.txt", dir.string(), bin, args);
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("a run's events reach Kafka, keyed by table and in order per table") {
  temp_dir dir;
  mock_kafka kafka("flotilla.events", 3);
  const auto db = dir.path() / "app.db";
  REQUIRE(std::system(fmt::format("sqlite3 '{}' \"CREATE TABLE orders (id INTEGER PRIMARY KEY, total "
                                  "DECIMAL(12,2)); INSERT INTO orders VALUES (1, 2.50); CREATE TABLE "
                                  "customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers "
                                  "VALUES (1, 'Ada');\"",
                                  db.string())
                          .c_str()) == 0);
  std::ofstream(dir.path() / "flotilla.toml")
      << fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                     "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                     "[events.kafka]\nbrokers = \"{}\"\ntopic = \"flotilla.events\"\nformat = \"json\"\n",
                     kafka.bootstraps());
  REQUIRE(run_in(dir.path(), "run") == 0);

  // run_started, 2 x (table_started, table_finished), run_finished
  auto messages = consume(kafka.bootstraps(), "flotilla.events", 3, 6);
  REQUIRE(messages.size() == 6);
  std::map<std::string, std::vector<std::string>> by_key;
  for (const auto& m : messages)
    by_key[m.key].push_back(nlohmann::json::parse(m.value)["type"].get<std::string>());
  CHECK(by_key["app.orders"] == std::vector<std::string>{"table_started", "table_finished"});
  CHECK(by_key["app.customers"] == std::vector<std::string>{"table_started", "table_finished"});
  REQUIRE(by_key.size() == 3);  // the run's own key carries run_started and run_finished
  for (const auto& [key, types] : by_key)
    if (key != "app.orders" && key != "app.customers")
      CHECK(types == std::vector<std::string>{"run_started", "run_finished"});
}

TEST_CASE("a run that cannot write its event file still sends its events to Kafka, and says "
          "FLT-E004") {
  temp_dir dir;
  mock_kafka kafka("flotilla.events", 1);
  REQUIRE(std::system(fmt::format("sqlite3 '{}' \"CREATE TABLE orders (id INTEGER PRIMARY KEY); "
                                  "INSERT INTO orders VALUES (1);\"",
                                  (dir.path() / "app.db").string())
                          .c_str()) == 0);
  std::ofstream(dir.path() / "flotilla.toml")
      << fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                     "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                     "[events.kafka]\nbrokers = \"{}\"\ntopic = \"flotilla.events\"\n",
                     kafka.bootstraps());
  // No run directory can be made: runs/ is a file.
  std::filesystem::create_directories(dir.path() / ".flotilla");
  std::ofstream(dir.path() / ".flotilla" / "runs") << "not a directory\n";
  CHECK(run_in(dir.path(), "run --output json") == 1);
  std::ifstream out(dir.path() / "out.txt");
  auto run = nlohmann::json::parse(out);
  CHECK(run["status"] == "success");  // the table loaded
  REQUIRE(run["events"]["errors"].size() == 1);
  CHECK(run["events"]["errors"][0].get<std::string>().starts_with("FLT-E004"));
  // At most the events_undelivered event that reports the file (docs/events.md), for the
  // next run to send.
  CHECK(run["events"]["pending"] <= 1);
  // run_started, table_started, table_finished, run_finished: all on the topic.
  auto messages = consume(kafka.bootstraps(), "flotilla.events", 1, 4);
  REQUIRE(messages.size() == 4);
  for (const auto& m : messages)
    CHECK(nlohmann::json::parse(m.value)["run_id"] == run["run_id"]);
}

TEST_CASE("a run whose broker is down reports it, keeps the events, and the next run sends them first") {
  temp_dir dir;
  const auto db = dir.path() / "app.db";
  REQUIRE(std::system(fmt::format("sqlite3 '{}' \"CREATE TABLE orders (id INTEGER PRIMARY KEY); "
                                  "INSERT INTO orders VALUES (1);\"",
                                  db.string())
                          .c_str()) == 0);
  auto write_config = [&](const std::string& brokers) {
    std::ofstream(dir.path() / "flotilla.toml")
        << fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                       "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                       "[events.kafka]\nbrokers = \"{}\"\ntopic = \"flotilla.events\"\n"
                       "[events.kafka.settings]\n\"message.timeout.ms\" = \"2000\"\n",
                       brokers);
  };
  write_config(fmt::format("127.0.0.1:{}", closed_port()));
  CHECK(run_in(dir.path(), "run --output json") == 1);
  std::ifstream out(dir.path() / "out.txt");
  auto run = nlohmann::json::parse(out);
  CHECK(run["status"] == "success");  // the tables themselves loaded
  REQUIRE(run["events"]["errors"].size() >= 1);
  CHECK(run["events"]["errors"][0].get<std::string>().find("FLT-E001") != std::string::npos);
  CHECK(run["events"]["pending"].get<int>() >= 4);
  const std::string first_run = run["run_id"];
  {
    // The only sink wants JSON: the outbox keeps each event's NDJSON line, byte for byte
    // the line of the run's event log, for the sink to send as it is.
    auto store = open_store(dir.path() / ".flotilla" / "state");
    auto pending = store.scan_outbox();
    REQUIRE(pending.has_value());
    REQUIRE(pending->size() >= 4);
    std::set<std::string> log_lines;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path() / ".flotilla" / "runs"))
      if (f.path().extension() == ".ndjson")
        for (auto& line : read_lines(f.path()))
          log_lines.insert(line);
    for (const auto& e : *pending) {
      CHECK(e.format() == flotilla::storage::pb::PAYLOAD_FORMAT_JSON);
      CHECK(log_lines.contains(e.payload()));
    }
  }

  mock_kafka kafka("flotilla.events", 1);
  write_config(kafka.bootstraps());
  REQUIRE(run_in(dir.path(), "run") == 0);
  // First run's 4 events (+ its events_undelivered notice) come first, then this run's 4.
  auto messages = consume(kafka.bootstraps(), "flotilla.events", 1, 9);
  REQUIRE(messages.size() >= 8);
  std::vector<std::string> runs;
  for (const auto& m : messages) {
    auto e = nlohmann::json::parse(m.value);
    if (e["type"] == "run_started")
      runs.push_back(e["run_id"]);
  }
  REQUIRE(runs.size() == 2);
  CHECK(runs[0] == first_run);  // the backlog went out first
}

TEST_CASE("retry with no failed table sends what a run left undelivered") {
  temp_dir dir;
  const auto db = dir.path() / "app.db";
  REQUIRE(std::system(fmt::format("sqlite3 '{}' \"CREATE TABLE orders (id INTEGER PRIMARY KEY); "
                                  "INSERT INTO orders VALUES (1);\"",
                                  db.string())
                          .c_str()) == 0);
  auto write_config = [&](const std::string& brokers) {
    std::ofstream(dir.path() / "flotilla.toml")
        << fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                       "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                       "[events.kafka]\nbrokers = \"{}\"\ntopic = \"flotilla.events\"\n"
                       "[events.kafka.settings]\n\"message.timeout.ms\" = \"2000\"\n",
                       brokers);
  };
  write_config(fmt::format("127.0.0.1:{}", closed_port()));
  CHECK(run_in(dir.path(), "run") == 1);  // the tables loaded; the events did not go out
  std::uint64_t waiting = 0;
  {
    auto store = open_store(dir.path() / ".flotilla" / "state");
    waiting = store.outbox_size().value_or(0);
  }
  REQUIRE(waiting >= 4);
  // plan says they wait, and that the run sends them first.
  CHECK(run_in(dir.path(), "plan --output json") == 0);
  {
    std::ifstream out(dir.path() / "out.txt");
    auto j = nlohmann::json::parse(out);
    CHECK(j["events"]["pending"] == waiting);
    CHECK(j["events"]["message"].get<std::string>().find("sends them first") != std::string::npos);
  }
  // Still down: retry says so, exit 1 and in its JSON, and keeps them.
  CHECK(run_in(dir.path(), "retry --output json") == 1);
  {
    std::ifstream out(dir.path() / "out.txt");
    auto j = nlohmann::json::parse(out);
    CHECK(j["status"] == "failed");
    REQUIRE(j["errors"].size() >= 1);
    CHECK(j["errors"][0]["code"] == "FLT-E001");
    // The run JSON's events section too: what waits, and why it could not go out.
    CHECK(j["events"]["delivered"] == 0);
    CHECK(j["events"]["pending"] == waiting);
    REQUIRE(j["events"]["errors"].size() >= 1);
    CHECK(j["events"]["errors"][0].get<std::string>().find("FLT-E001") != std::string::npos);
  }
  mock_kafka kafka("flotilla.events", 1);
  write_config(kafka.bootstraps());
  CHECK(run_in(dir.path(), "retry --output json") == 0);
  {
    std::ifstream out(dir.path() / "out.txt");
    auto j = nlohmann::json::parse(out);
    CHECK(j["status"] == "success");
    CHECK(j["events"]["delivered"] == waiting);
    CHECK(j["events"]["pending"] == 0);
    CHECK(j["events"]["errors"].empty());
  }
  {
    auto store = open_store(dir.path() / ".flotilla" / "state");
    CHECK(store.outbox_size().value_or(1) == 0);
  }
  CHECK(consume(kafka.bootstraps(), "flotilla.events", 1, waiting).size() >= waiting);
}

TEST_CASE("drift events reach Kafka in order per table, with the table's other events") {
  temp_dir dir;
  mock_kafka kafka("flotilla.events", 3);
  const auto db = dir.path() / "app.db";
  auto sql = [&](const std::string& s) {
    REQUIRE(std::system(fmt::format("sqlite3 '{}' \"{}\"", db.string(), s).c_str()) == 0);
  };
  sql("CREATE TABLE orders (id INTEGER PRIMARY KEY, total BIGINT); INSERT INTO orders VALUES (1, 2);"
      "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'Ada');");
  std::ofstream(dir.path() / "flotilla.toml")
      << fmt::format("[project]\non_source_drift = \"warn\"\n"
                     "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                     "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                     "[events.kafka]\nbrokers = \"{}\"\ntopic = \"flotilla.events\"\nformat = \"json\"\n",
                     kafka.bootstraps());
  REQUIRE(run_in(dir.path(), "run") == 0);  // seeds the baselines: no drift event
  sql("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (2, 3, 'x');");
  REQUIRE(run_in(dir.path(), "run") == 0);  // warn: the run succeeds

  // run 1: 6 events; run 2: run_started, orders x 4, customers x 2, run_finished
  auto messages = consume(kafka.bootstraps(), "flotilla.events", 3, 14);
  REQUIRE(messages.size() == 14);
  std::map<std::string, std::vector<std::string>> by_key;
  nlohmann::json drift;
  for (const auto& m : messages) {
    auto e = nlohmann::json::parse(m.value);
    by_key[m.key].push_back(e["type"].get<std::string>());
    if (e["type"] == "source_drift_detected")
      drift = e;
  }
  CHECK(by_key["app.orders"] ==
        std::vector<std::string>{"table_started", "table_finished", "table_started", "schema_action",
                                 "source_drift_detected", "table_finished"});
  CHECK(by_key["app.customers"] == std::vector<std::string>{"table_started", "table_finished",
                                                            "table_started", "table_finished"});
  REQUIRE(drift.is_object());
  const auto& d = drift["source_drift_detected"];
  CHECK(d["policy"] == "warn");
  CHECK(d["changes"].size() == 1);
  CHECK(d["changes"][0] == nlohmann::json{{"kind", "added"}, {"column", "note"}, {"from", ""}, {"to", "text"}});
  CHECK(d["observed"].size() == 3);
  CHECK(d["hints_hash"].get<std::string>().size() == 16);
}

TEST_CASE("the text summary of a run whose events did not go out says so") {
  temp_dir dir;
  const auto db = dir.path() / "app.db";
  REQUIRE(std::system(fmt::format("sqlite3 '{}' \"CREATE TABLE orders (id INTEGER PRIMARY KEY); "
                                  "INSERT INTO orders VALUES (1);\"",
                                  db.string())
                          .c_str()) == 0);
  std::ofstream(dir.path() / "flotilla.toml")
      << fmt::format("[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                     "[sources.app]\nadapter = \"sqlite\"\npath = \"app.db\"\n"
                     "[events.kafka]\nbrokers = \"127.0.0.1:{}\"\ntopic = \"flotilla.events\"\n"
                     "[events.kafka.settings]\n\"message.timeout.ms\" = \"1000\"\n",
                     closed_port());
  CHECK(run_in(dir.path(), "run") == 1);
  std::ifstream out(dir.path() / "out.txt");
  const std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("success: 1 copied") &&
                       Catch::Contains("not delivered, kept in the outbox for the next run"));
}
