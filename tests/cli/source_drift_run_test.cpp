// Seed 004 end to end: `on_source_drift` in real runs (SQLite and CSV sources into
// DuckDB), `flotilla schema accept` and `flotilla retry` reusing staged data.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/core.h>

#include "tests/cli/harness.hpp"

using namespace flotilla::test;

namespace {

struct shop {
  workdir w;

  explicit shop(const std::string& policy, const std::string& extra = "") {
    sqlite_exec(w.file("shop.db"),
                "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount BIGINT);"
                "INSERT INTO orders VALUES (1, 10), (2, 20);"
                "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                "INSERT INTO customers VALUES (1, 'Ada');");
    config(policy, extra);
  }
  void config(const std::string& policy, const std::string& extra = "") const {
    w.write("flotilla.toml",
            fmt::format("[project]\nname = \"acme\"\non_source_drift = \"{}\"\n\n"
                        "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n\n"
                        "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\ntarget = \"wh\"\n"
                        "include = [\"*\"]\n{}\n",
                        policy, extra));
  }
  void source(const std::string& sql) const { sqlite_exec(w.file("shop.db"), sql); }
  std::vector<std::vector<std::string>> target(const std::string& sql) const {
    return duckdb_query(w.file("wh.duckdb"), sql);
  }
  std::size_t staged_files() const {
    std::size_t n = 0;
    auto dir = w.path() / ".flotilla" / "staged";
    if (std::filesystem::exists(dir))
      for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
        n += e.is_regular_file() ? 1 : 0;
    return n;
  }
  /// Every event of every run, in file order per run.
  std::vector<nlohmann::json> events_of(const std::string& run_id) const {
    std::vector<nlohmann::json> out;
    std::ifstream in(w.path() / ".flotilla" / "runs" / run_id / "events.ndjson");
    for (std::string line; std::getline(in, line);)
      out.push_back(nlohmann::json::parse(line));
    return out;
  }
};

/// A project whose CSV source `crm` reads ./files into target `wh` (`dialect`, file
/// `path`, schema `raw`); `project_keys` go under [project], `extra` after everything.
void csv_project(const workdir& w, const std::string& dialect, const std::string& path,
                 const std::string& project_keys = "", const std::string& extra = "") {
  std::filesystem::create_directories(w.path() / "files");
  w.write("flotilla.toml",
          fmt::format("[project]\nname = \"p\"\n{}\n[targets.wh]\ndialect = \"{}\"\n"
                      "path = \"{}\"\nschema = \"raw\"\n\n[sources.crm]\nadapter = \"csv\"\n"
                      "path = \"files\"\ntarget = \"wh\"\ninclude = [\"*\"]\n{}",
                      project_keys, dialect, path, extra));
}

std::size_t count_type(const std::vector<nlohmann::json>& events, const std::string& type) {
  std::size_t n = 0;
  for (const auto& e : events)
    n += e["type"] == type ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("on_source_drift = ignore is a true no-op: no staging, no baseline, no event") {
  shop s("ignore");
  auto run = flotilla_json(s.w, {"run"});
  REQUIRE(run["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT");
  run = flotilla_json(s.w, {"run"});
  REQUIRE(run["status"] == "success");
  CHECK_FALSE(run.contains("source_drift"));  // the run JSON as before the gate existed
  CHECK_FALSE(find_table(run, "raw.orders")->contains("source_drift"));
  CHECK_FALSE(std::filesystem::exists(s.w.path() / ".flotilla" / "staged"));
  CHECK(count_type(s.events_of(run["run_id"]), "source_drift_detected") == 0);
  auto accept = run_flotilla(s.w, {"schema", "accept"});
  CHECK(accept.exit_code == 0);
  CHECK(accept.out == "nothing to accept\n");
}

TEST_CASE("warn: the first run seeds silently; a change warns every run until accepted") {
  shop s("warn", "prune_unchanged = true");
  auto first = run_flotilla(s.w, {"run", "--output", "json"});
  REQUIRE(first.exit_code == 0);
  CHECK(first.err.find("source drift") == std::string::npos);
  auto j1 = nlohmann::json::parse(first.out);
  CHECK((*find_table(j1, "raw.orders"))["source_drift"]["decision"] == "seed");
  CHECK(count_type(s.events_of(j1["run_id"]), "source_drift_detected") == 0);

  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'x')");
  for (int round = 0; round < 2; ++round) {
    auto r = run_flotilla(s.w, {"run", "--output", "json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);  // warn never fails a run
    CHECK(r.err.find("warning: source drift on shop.orders: column 'note' added TEXT") !=
          std::string::npos);
    CHECK(r.err.find("flotilla schema accept shop.orders") != std::string::npos);
    auto j = nlohmann::json::parse(r.out);
    const auto& orders = *find_table(j, "raw.orders");
    CHECK(orders["status"] == "copied");  // not pruned: the warning repeats
    if (round == 1) {  // and says why, as plan does
      CHECK_THAT(orders["not_pruned"].get<std::string>(),
                 Catch::Contains("flotilla schema accept shop.orders"));
      auto plan = flotilla_json(s.w, {"plan"});
      CHECK((*find_table(plan, "raw.orders"))["status"] != "pruned");
    }
    CHECK(orders["source_drift"]["decision"] == "warn");
    CHECK(orders["source_drift"]["changes"][0]["kind"] == "added");
    CHECK(orders["source_drift"]["changes"][0]["column"] == "note");
    if (round == 1)  // unchanged since the previous run
      CHECK((*find_table(j, "raw.customers"))["status"] == "pruned");
    auto events = s.events_of(j["run_id"]);
    REQUIRE(count_type(events, "source_drift_detected") == 1);
    for (const auto& e : events)
      if (e["type"] == "source_drift_detected") {
        CHECK(e["source"] == "shop");
        CHECK(e["table"] == "orders");
        CHECK(e["source_drift_detected"]["policy"] == "warn");
        CHECK(e["source_drift_detected"]["observed"].size() == 3);
        CHECK(e["source_drift_detected"]["baseline_run_id"] == j1["run_id"]);
      }
  }
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "3");
  // The text summary counts the source drift beside the target's.
  auto text = run_flotilla(s.w, {"run"});
  CHECK(text.out.find("; source drift: 1 checked, 1 drifted\n") != std::string::npos);

  // On a terminal the warning is the table's yellow child node, under the progress line
  // (`script` gives the run a pseudo-terminal).
  const char* bin = std::getenv("FLOTILLA_BIN");
  REQUIRE(bin != nullptr);
  REQUIRE(std::system(fmt::format("cd '{}' && script -qec '{} run' /dev/null > tty.out 2>&1",
                                  s.w.path().string(), bin)
                          .c_str()) == 0);
  std::ifstream tty(s.w.file("tty.out"));
  const std::string screen((std::istreambuf_iterator<char>(tty)), std::istreambuf_iterator<char>());
  CHECK(screen.find("shop.orders\r\n\u2514\u2500\u2500 \x1b[33mwarning: source drift on shop.orders: "
                    "column 'note' added TEXT") != std::string::npos);

  // What would be accepted, as JSON for a scheduler: the named dataset that has no
  // observed schema refuses it all, nothing written.
  auto refused = run_flotilla(s.w, {"schema", "accept", "--output", "json", "shop.nope"});
  CHECK(refused.exit_code == 2);
  auto jr = nlohmann::json::parse(refused.out);
  CHECK(jr["status"] == "failed");
  REQUIRE(jr["errors"].size() == 1);
  CHECK(jr["errors"][0]["code"] == "FLT-D002");
  CHECK(jr["accepted"].empty());
  auto accept = run_flotilla(s.w, {"schema", "accept", "--output", "json"});
  CHECK(accept.exit_code == 0);
  INFO(accept.out);
  auto j = nlohmann::json::parse(accept.out);
  CHECK(j["status"] == "accepted");
  CHECK(j["changes"] == 1);
  REQUIRE(j["accepted"].size() == 1);
  CHECK(j["accepted"][0]["dataset"] == "shop.orders");
  CHECK(j["accepted"][0]["changes"][0]["column"] == "note");
  CHECK(j["accepted"][0]["changes"][0]["kind"] == "added");

  auto after = run_flotilla(s.w, {"run", "--output", "json"});
  REQUIRE(after.exit_code == 0);
  CHECK(after.err.find("source drift") == std::string::npos);
  auto ja = nlohmann::json::parse(after.out);
  CHECK((*find_table(ja, "raw.orders"))["status"] == "pruned");
  CHECK(run_flotilla(s.w, {"schema", "accept"}).out == "nothing to accept\n");
  CHECK(nlohmann::json::parse(run_flotilla(s.w, {"schema", "accept", "--output", "json"}).out)
            ["status"] == "nothing_to_accept");
}

TEST_CASE("fail -> schema accept -> retry loads the staged data without extracting again") {
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN amount_text VARCHAR(20);"
           "INSERT INTO orders VALUES (3, 30, 'thirty')");

  int code = 0;
  auto failed = flotilla_json(s.w, {"run"}, &code);
  CHECK(code == 1);
  CHECK(failed["status"] == "partial");
  const auto& orders = *find_table(failed, "raw.orders");
  CHECK(orders["status"] == "failed");
  CHECK(orders["error_code"] == "FLT-D001");
  const std::string error = orders["error"];
  CHECK(error.find("shop.orders") != std::string::npos);
  CHECK(error.find("column 'amount_text' added VARCHAR(20)") != std::string::npos);
  CHECK(error.find("flotilla schema accept shop.orders") != std::string::npos);
  CHECK((*find_table(failed, "raw.customers"))["status"] == "copied");
  // Nothing reached the target: old shape, old rows. The staged data is kept.
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "2");
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'raw' "
                 "AND table_name = 'orders'")[0][0] == "2");
  CHECK(s.staged_files() == 1);
  CHECK(count_type(s.events_of(failed["run_id"]), "source_drift_detected") == 1);

  // Retrying before accepting fails again, and loads nothing.
  auto again = flotilla_json(s.w, {"retry"}, &code);
  CHECK(code == 1);
  CHECK((*find_table(again, "raw.orders"))["error_code"] == "FLT-D001");
  CHECK(again["retry_of"] == failed["run_id"]);
  CHECK(again["tables"].size() == 1);  // only the failed table
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "2");

  auto accept = run_flotilla(s.w, {"schema", "accept", "shop.orders"});
  CHECK(accept.exit_code == 0);
  CHECK(accept.out ==
        "shop.orders: column 'amount_text' added VARCHAR(20)\naccepted 1 schema change(s)\n");

  // The source moves on; the retry must load what was staged, not this.
  s.source("INSERT INTO orders VALUES (4, 40, 'forty')");
  auto retry = flotilla_json(s.w, {"retry"}, &code);
  CHECK(code == 0);
  CHECK(retry["status"] == "success");
  REQUIRE(retry["tables"].size() == 1);
  const auto& r = retry["tables"][0];
  CHECK(r["status"] == "copied");
  CHECK(r["reused_staged"] == true);
  CHECK(r["rows"] == 3);
  CHECK(s.target("SELECT count(*), max(amount_text) FROM raw.orders")[0] ==
        std::vector<std::string>{"3", "thirty"});
  CHECK(s.staged_files() == 0);
  auto events = s.events_of(retry["run_id"]);
  REQUIRE_FALSE(events.empty());
  CHECK(events.front()["run_started"]["command"] == "retry");
  CHECK(events.front()["run_started"]["retry_of"] == again["run_id"]);

  // Nothing is left to retry; the next run picks up the newer row.
  auto none = run_flotilla(s.w, {"retry"});
  CHECK(none.exit_code == 0);
  CHECK(none.out.find("nothing to retry") != std::string::npos);
  auto none_json = flotilla_json(s.w, {"retry"}, &code);  // JSON under --output json too
  CHECK(code == 0);
  CHECK(none_json["status"] == "success");
  CHECK(none_json["tables"].empty());
  CHECK(none_json["run_id"].is_null());
  CHECK(none_json["events"]["errors"].empty());  // the same section a run JSON has
  CHECK(none_json["retry_of"] == retry["run_id"]);
  auto next = flotilla_json(s.w, {"run"});
  CHECK(next["status"] == "success");
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "4");
}

TEST_CASE("schema accept after a filtered run says which tables that run observed; a source "
          "the latest run could not read is named") {
  shop s("warn");
  int code = 0;
  REQUIRE(flotilla_json(s.w, {"run"}, &code)["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT");
  REQUIRE(flotilla_json(s.w, {"run"}, &code)["status"] == "success");  // warned
  REQUIRE(flotilla_json(s.w, {"run", "--filter", "table=customers"}, &code)["status"] ==
          "success");
  // Nothing of the latest run to accept, and why the warned table is not among it.
  auto none = run_flotilla(s.w, {"schema", "accept"});
  CHECK(none.exit_code == 0);
  CHECK_THAT(none.out, Catch::Contains("nothing to accept: no table the latest run") &&
                           Catch::Contains("--filter table=customers") &&
                           Catch::Contains("run `flotilla run` (without the filter)"));
  // The source unreadable in the latest run: accepting one of its tables says so.
  std::filesystem::rename(s.w.file("shop.db"), s.w.file("shop.db.away"));
  flotilla_json(s.w, {"run"}, &code);
  REQUIRE(code == 1);
  auto named = run_flotilla(s.w, {"schema", "accept", "shop.orders"});
  CHECK(named.exit_code == 2);
  CHECK_THAT(named.err, Catch::Contains("could not read source 'shop'") &&
                            !Catch::Contains("on_source_drift = \"warn\" or"));
  // Once it is back, a run observes the drift again and accept takes it.
  std::filesystem::rename(s.w.file("shop.db.away"), s.w.file("shop.db"));
  REQUIRE(flotilla_json(s.w, {"run"}, &code)["status"] == "success");
  auto taken = run_flotilla(s.w, {"schema", "accept", "shop.orders"});
  CHECK(taken.exit_code == 0);
}

TEST_CASE("retry loads staged data while the source is unavailable; other failures need it") {
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'x')");
  int code = 0;
  REQUIRE((*find_table(flotilla_json(s.w, {"run"}, &code), "raw.orders"))["error_code"] ==
          "FLT-D001");
  REQUIRE(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).exit_code == 0);
  std::filesystem::rename(s.w.file("shop.db"), s.w.file("shop.db.away"));
  const auto text = run_flotilla(s.w, {"retry"});
  CHECK(text.exit_code == 0);
  // The text says the rows came from the staged data, not from the source.
  CHECK_THAT(text.out, Catch::Contains("staged  raw.orders  loaded the rows the failed run read "
                                       "and staged, not read from the source again"));
  CHECK(s.target("SELECT count(*), max(note) FROM raw.orders")[0] ==
        std::vector<std::string>{"3", "x"});
  // A run (nothing staged) still needs the source, and says so.
  auto run = flotilla_json(s.w, {"run"}, &code);
  CHECK(code == 1);
  REQUIRE(run["errors"].size() == 1);
  CHECK(run["errors"][0]["error"].get<std::string>().find("shop.db") != std::string::npos);
  // Its retry has no staged data either: the source's error again, nothing loaded.
  auto again = flotilla_json(s.w, {"retry"}, &code);
  CHECK(code == 1);
  CHECK(again["errors"].size() == 1);
  for (const auto& t : again["tables"]) {  // listed, as the source's: failed, not loaded
    CHECK(t["status"] == "failed");
    CHECK(t["error_code"] == "FLT-R002");
  }
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "3");
}

TEST_CASE("a table the gate stops reports no warning about a load that did not happen") {
  shop s("warn");
  s.source("ALTER TABLE customers ADD COLUMN email TEXT; UPDATE customers SET email = 'a@x.io'");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
  s.config("fail");
  s.source("ALTER TABLE customers DROP COLUMN email");  // the target keeps it: live only
  int code = 0;
  auto run = flotilla_json(s.w, {"run"}, &code);
  CHECK(code == 1);
  const auto* customers = find_table(run, "raw.customers");
  REQUIRE(customers != nullptr);
  CHECK((*customers)["error_code"] == "FLT-D001");
  CHECK(customers->value("warnings", nlohmann::json::array()).dump().find("live table only") ==
        std::string::npos);
  // Under warn the same table loads, and says what its load did with the column.
  s.config("warn");
  auto loaded = flotilla_json(s.w, {"run"}, &code);
  INFO(loaded.dump(2));
  CHECK(code == 0);
  const auto* again = find_table(loaded, "raw.customers");
  REQUIRE(again != nullptr);
  CHECK(again->value("warnings", nlohmann::json::array()).dump().find("live table only") !=
        std::string::npos);
}

TEST_CASE("retry opens no source it retries nothing of: another source down leaves it a success") {
  shop s("fail", "\n[sources.crm]\nadapter = \"sqlite\"\npath = \"crm.db\"\ntarget = \"wh\"\n"
                 "include = [\"*\"]\n");
  sqlite_exec(s.w.file("crm.db"), "CREATE TABLE leads (id INTEGER PRIMARY KEY); INSERT INTO leads VALUES (1)");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'x')");
  int code = 0;
  auto gated = flotilla_json(s.w, {"run"}, &code);
  REQUIRE(code == 1);
  const auto* leads = find_table(gated, "raw.leads");
  REQUIRE(leads != nullptr);
  CHECK((*leads)["status"] == "copied");
  REQUIRE(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).exit_code == 0);
  std::filesystem::rename(s.w.file("crm.db"), s.w.file("crm.db.away"));  // crm: nothing to retry
  auto retry = flotilla_json(s.w, {"retry"}, &code);
  CHECK(code == 0);
  CHECK(retry["status"] == "success");
  CHECK(retry["errors"].empty());
  REQUIRE(retry["tables"].size() == 1);
  CHECK(retry["tables"][0]["table"] == "raw.orders");
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "3");
  // Nothing failed, so nothing is left to retry (crm's table is not copied again).
  std::filesystem::rename(s.w.file("crm.db.away"), s.w.file("crm.db"));
  auto again = flotilla_json(s.w, {"retry"}, &code);
  CHECK(code == 0);
  CHECK(again["tables"].empty());
}

TEST_CASE("retry loads the staged data of a table the source no longer lists, and fails one "
          "with nothing staged, named; neither leaves the retry a success that drops it") {
  // The retry left a table the source no longer listed out: `success`, 0 tables, and the
  // next retry had nothing to retry, so the staged rows were never loaded.
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'x')");
  int code = 0;
  REQUIRE((*find_table(flotilla_json(s.w, {"run"}, &code), "raw.orders"))["error_code"] ==
          "FLT-D001");
  REQUIRE(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).exit_code == 0);
  SECTION("staged: loaded") {
    s.source("ALTER TABLE orders RENAME TO orders_old");
    auto retry = flotilla_json(s.w, {"retry"}, &code);
    INFO(retry.dump());
    CHECK(code == 0);
    REQUIRE(retry["tables"].size() == 1);
    CHECK(retry["tables"][0]["status"] == "copied");
    CHECK(retry["tables"][0]["reused_staged"] == true);
    CHECK(s.target("SELECT count(*), max(note) FROM raw.orders")[0] ==
          std::vector<std::string>{"3", "x"});
  }
  SECTION("nothing staged: failed, named") {
    for (const auto& e : std::filesystem::directory_iterator(s.w.path() / ".flotilla" / "staged"))
      std::filesystem::remove_all(e.path());
    s.source("ALTER TABLE orders RENAME TO orders_old");
    auto retry = flotilla_json(s.w, {"retry"}, &code);
    INFO(retry.dump());
    CHECK(code == 1);
    REQUIRE(retry["tables"].size() == 1);
    CHECK(retry["tables"][0]["status"] == "failed");
    CHECK_THAT(retry["tables"][0]["error"].get<std::string>(),
               Catch::Contains("no longer has table 'orders'") && Catch::Contains("flotilla retry"));
    CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "2");
    // Still the latest run's failure: a second retry tries it again.
    auto again = flotilla_json(s.w, {"retry"}, &code);
    CHECK(code == 1);
    CHECK(again["tables"].size() == 1);
  }
}

TEST_CASE("with prune_unchanged, rows added after the staged run arrive with the next run") {
  shop s("fail", "prune_unchanged = true\n");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'x')");
  int code = 0;
  REQUIRE((*find_table(flotilla_json(s.w, {"run"}, &code), "raw.orders"))["error_code"] ==
          "FLT-D001");
  s.source("INSERT INTO orders VALUES (4, 40, 'y')");  // after the data was staged
  REQUIRE(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).exit_code == 0);
  REQUIRE(flotilla_json(s.w, {"retry"})["status"] == "success");
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "3");  // as staged
  auto next = flotilla_json(s.w, {"run"});
  CHECK((*find_table(next, "raw.orders"))["status"] == "copied");
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "4");
  auto after = flotilla_json(s.w, {"run"});  // and then it is pruned as usual
  CHECK((*find_table(after, "raw.orders"))["status"] == "pruned");
}

TEST_CASE("seed 004 edge case: a warn retry reusing staged data leaves accept nothing to read") {
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "partial");
  s.config("warn");
  auto retry = flotilla_json(s.w, {"retry"});
  CHECK(retry["status"] == "success");
  CHECK(retry["tables"][0]["reused_staged"] == true);
  CHECK_FALSE(retry["tables"][0].contains("source_drift"));
  auto accept = run_flotilla(s.w, {"schema", "accept", "shop.orders"});
  CHECK(accept.exit_code == 2);
  CHECK(accept.err.find("FLT-D002") != std::string::npos);
  // A fresh run observes again, and accept then has something to promote.
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  CHECK(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).out ==
        "shop.orders: column 'note' added TEXT\naccepted 1 schema change(s)\n");
}

TEST_CASE("a changed read shape reseeds silently; an incremental watermark does not") {
  shop s("warn");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  // A cursor column changes the pushed-down filter: the read changed, not the source.
  s.config("warn", "[sources.shop.tables.orders]\ncursor_column = \"id\"\n");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'x')");
  auto r = run_flotilla(s.w, {"run", "--output", "json"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("source drift") == std::string::npos);
  auto j = nlohmann::json::parse(r.out);
  CHECK((*find_table(j, "raw.orders"))["source_drift"]["decision"] == "reseed");
  // Incremental runs with a new watermark each time keep the same hash.
  s.source("INSERT INTO orders VALUES (4, 40, 'y')");
  j = flotilla_json(s.w, {"run"});
  CHECK((*find_table(j, "raw.orders"))["source_drift"]["decision"] == "unchanged");
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "4");
}

TEST_CASE("fail on an incremental table: retry commits the staged rows and their watermark") {
  shop s("fail", "[sources.shop.tables.orders]\ncursor_column = \"id\"\nunique_key = [\"id\"]\n");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'x')");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "partial");
  REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
  auto retry = flotilla_json(s.w, {"retry"});
  CHECK(retry["status"] == "success");
  // Every row was staged: the column added gives the rows loaded before a value, so a
  // merging table reads them all again.
  CHECK(retry["tables"][0]["rows"] == 3);
  CHECK(s.target("SELECT count(*) FROM raw.orders")[0][0] == "3");
  // The watermark moved with the staged rows: the next run reads only from row 3 on.
  s.source("INSERT INTO orders VALUES (4, 40, 'y')");
  auto next = flotilla_json(s.w, {"run"});
  CHECK((*find_table(next, "raw.orders"))["rows"] == 2);
  CHECK(s.target("SELECT count(*), count(DISTINCT id) FROM raw.orders")[0] ==
        std::vector<std::string>{"4", "4"});
}

TEST_CASE("fail on a keyless incremental table with no new rows: retry makes the accepted "
          "change it reports") {
  // The staged read found nothing past the watermark, whose value the target already
  // holds: the retry took that for rows a killed run had committed, and skipped the DDL
  // it reported as made.
  shop s("fail", "[sources.shop.tables.logs]\ncursor_column = \"at\"\n");
  s.source("CREATE TABLE logs (msg TEXT, at INTEGER); INSERT INTO logs VALUES ('a', 1), ('b', 2)");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE logs ADD COLUMN extra INTEGER");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "partial");
  REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
  auto retry = flotilla_json(s.w, {"retry"});
  INFO(retry.dump(2));
  CHECK(retry["status"] == "success");
  CHECK(retry["drift"]["actions_taken"].dump().find("add_columns") != std::string::npos);
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_name = 'logs' "
                 "AND column_name = 'extra'")[0][0] == "1");
  CHECK(s.target("SELECT count(*) FROM raw.logs")[0][0] == "2");
  s.source("INSERT INTO logs VALUES ('c', 3, 9)");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  CHECK(s.target("SELECT count(*), sum(extra) FROM raw.logs")[0] ==
        std::vector<std::string>{"3", "9"});
}

TEST_CASE("retry reads the source again when the staged read's settings changed since") {
  // Staged as an increment: only the rows past the watermark (a column dropped at the
  // source reads no row again; an added one would have read them all).
  shop s("fail", "[sources.shop.tables.orders]\ncursor_column = \"id\"\n");
  s.source("ALTER TABLE orders ADD COLUMN seq INTEGER; ALTER TABLE orders ADD COLUMN note TEXT;"
           "UPDATE orders SET seq = id + 100");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders DROP COLUMN note; INSERT INTO orders VALUES (3, 30, 103)");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "partial");
  REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
  SECTION("no cursor now: a full refresh of the staged increment would lose rows 1 and 2") {
    s.config("fail");
  }
  SECTION("another cursor column: the old one's value would become its watermark") {
    s.config("fail", "[sources.shop.tables.orders]\ncursor_column = \"seq\"\n");
  }
  SECTION("a new unique_key: the table is created anew, and the increment is not all of it") {
    s.config("fail", "[sources.shop.tables.orders]\ncursor_column = \"id\"\n"
                     "unique_key = [\"id\", \"amount\"]\n");
  }
  auto retry = flotilla_json(s.w, {"retry"});
  INFO(retry.dump(2));
  const auto* orders = find_table(retry, "raw.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "copied");
  CHECK_FALSE(orders->contains("reused_staged"));
  REQUIRE(orders->contains("warnings"));
  CHECK_THAT((*orders)["warnings"].dump(), Catch::Contains("read from the source again"));
  CHECK(s.target("SELECT count(*), count(DISTINCT id) FROM raw.orders")[0] ==
        std::vector<std::string>{"3", "3"});
  // The next row arrives: the watermark is the current cursor's own.
  s.source("INSERT INTO orders VALUES (4, 40, 104)");
  CHECK(flotilla_json(s.w, {"run"})["status"] == "success");
  CHECK(s.target("SELECT count(*), count(DISTINCT id) FROM raw.orders")[0] ==
        std::vector<std::string>{"4", "4"});
}

TEST_CASE("retry reads the source again when a contract declared since leaves staged columns "
          "out") {
  // The staged rows hold the new column; the enforced contract reads two: loading them
  // failed every retry, telling the user to fix the target.
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN secret TEXT; UPDATE orders SET secret = 'pw'");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "partial");
  s.config("fail", "[sources.shop.tables.orders]\ncontract = \"enforced\"\n"
                   "columns = { id = \"bigint\", amount = \"bigint\" }\n");
  auto retry = flotilla_json(s.w, {"retry"});
  INFO(retry.dump(2));
  const auto* orders = find_table(retry, "raw.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "copied");
  CHECK_FALSE(orders->contains("reused_staged"));
  REQUIRE(orders->contains("warnings"));
  CHECK_THAT((*orders)["warnings"].dump(), Catch::Contains("read from the source again"));
  CHECK(s.target("SELECT count(*), sum(amount) FROM raw.orders")[0] ==
        std::vector<std::string>{"2", "30"});
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' "
                 "AND column_name = 'secret'")[0][0] == "0");
}

TEST_CASE("CSV datasets: the inferred schema is the observed schema") {
  workdir w;
  std::filesystem::create_directories(w.path() / "files");
  w.write("files/leads.csv", "id,email\n1,a@example.com\n2,b@example.com\n");
  w.write("flotilla.toml",
          "[project]\non_source_drift = \"fail\"\n\n[targets.wh]\ndialect = \"duckdb\"\n"
          "path = \"wh.duckdb\"\nschema = \"raw\"\n\n[sources.crm]\nadapter = \"csv\"\n"
          "path = \"files\"\ntarget = \"wh\"\ninclude = [\"*\"]\n");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  w.write("files/leads.csv", "id,email,score\n1,a@example.com,0.5\n2,b@example.com,1.5\n");
  int code = 0;
  auto j = flotilla_json(w, {"run"}, &code);
  CHECK(code == 1);
  const auto& leads = *find_table(j, "raw.leads");
  CHECK(leads["error_code"] == "FLT-D001");
  CHECK(leads["source_drift"]["changes"][0]["column"] == "score");
  CHECK(leads["source_drift"]["changes"][0]["kind"] == "added");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT count(*) FROM information_schema.columns WHERE "
                                          "table_name = 'leads'")[0][0] == "2");
}

TEST_CASE("CSV datasets: a column that outgrew its inferred type still goes through the gate") {
  // The plan refuses the retype (FLT-S005); the gate sees it first: under fail it is the
  // gate's refusal, under warn its warning, and either way `schema accept` can take it.
  const std::string policy = GENERATE(std::string("warn"), std::string("fail"));
  CAPTURE(policy);
  workdir w;
  csv_project(w, "duckdb", "wh.duckdb", fmt::format("on_source_drift = \"{}\"\n", policy));
  w.write("files/leads.csv", "id,score\n1,5\n2,7\n");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  w.write("files/leads.csv", "id,score\n1,5\n2,seven\n");
  auto r = run_flotilla(w, {"run", "--output", "json"});
  CHECK(r.exit_code == 1);
  auto j = nlohmann::json::parse(r.out);
  const auto& leads = *find_table(j, "raw.leads");
  CHECK(leads["error_code"] == (policy == "fail" ? "FLT-D001" : "FLT-S005"));
  if (policy == "fail") {  // nothing was staged: retry has nothing to load, and says so
    CHECK_THAT(leads["error"].get<std::string>(),
               Catch::Contains("nothing was staged") && Catch::Contains("FLT-S005") &&
                   !Catch::Contains("flotilla retry"));
  }
  CHECK(leads["source_drift"]["decision"] == policy);
  CHECK(leads["source_drift"]["changes"][0]["column"] == "score");
  CHECK(leads["source_drift"]["changes"][0]["kind"] == "retyped");
  CHECK((r.err.find("warning: source drift on crm.leads") != std::string::npos) ==
        (policy == "warn"));
  auto accept = run_flotilla(w, {"schema", "accept", "crm.leads"});
  CHECK(accept.exit_code == 0);
  CHECK(accept.out.find("column 'score' retyped") != std::string::npos);
  // Nothing reached the target: the live column keeps its type and rows.
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT sum(score) FROM raw.leads")[0][0] == "12");
}

TEST_CASE("CSV and JSON datasets: a text column now all numbers is drift, though it loads as "
          "text") {
  // Seed 004: DuckDB's inferred schema is the observed one. The live text column still
  // takes the values (seed 000), but the source's column changed type.
  const std::string kind = GENERATE(std::string("csv"), std::string("json"));
  CAPTURE(kind);
  workdir w;
  std::filesystem::create_directories(w.path() / "files");
  w.write("flotilla.toml",
          "[project]\nname = \"p\"\non_source_drift = \"fail\"\n[targets.wh]\n"
          "dialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n[sources.crm]\n"
          "adapter = \"" + kind + "\"\npath = \"files\"\n");
  const auto write = [&](const std::string& code) {
    if (kind == "csv")
      w.write("files/leads.csv", "id,code\n1," + code + "\n");
    else
      w.write("files/leads.ndjson", "{\"id\": 1, \"code\": " +
                                        (code == "abc" ? std::string("\"abc\"") : code) + "}\n");
  };
  write("abc");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  write("100");
  int rc = -1;
  auto j = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto& leads = *find_table(j, "raw.leads");
  CHECK(leads["error_code"] == "FLT-D001");
  CHECK(leads["source_drift"]["changes"][0]["column"] == "code");
  CHECK(leads["source_drift"]["changes"][0]["kind"] == "retyped");
  REQUIRE(run_flotilla(w, {"schema", "accept", "crm.leads"}).exit_code == 0);
  REQUIRE(run_flotilla(w, {"retry"}).exit_code == 0);
  // Loaded as text, into the live column, and the next run sees no drift.
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT code FROM raw.leads")[0][0] == "100");
  CHECK(flotilla_json(w, {"run", "--no-prune"}, &rc)["status"] == "success");
  CHECK(rc == 0);
}

TEST_CASE("CSV datasets: accept, then auto_widen: the wider read reseeds, no second accept") {
  workdir w;
  csv_project(w, "duckdb", "wh.duckdb", "on_source_drift = \"fail\"\n");
  w.write("files/pay.csv", "id,amount\n1,10\n2,20\n");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  w.write("files/pay.csv", "id,amount\n1,10\n2,20\n3,2.5\n");
  int rc = -1;
  auto refused = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(refused, "raw.pay"))["error_code"] == "FLT-D001");
  REQUIRE(run_flotilla(w, {"schema", "accept", "crm.pay"}).exit_code == 0);
  // The fix the refusal names: auto_widen reads amount as a decimal; the file is the same.
  csv_project(w, "duckdb", "wh.duckdb", "on_source_drift = \"fail\"\n", "auto_widen = true\n");
  auto widened = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK((*find_table(widened, "raw.pay"))["status"] == "copied");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT sum(amount) FROM raw.pay")[0][0] == "32.5");
}

TEST_CASE("CSV datasets: values the live column still holds load in its type") {
  // A header-only first file makes every column text; later values that look like
  // numbers load as text. Whole numbers in a double column load as doubles.
  const std::string target = GENERATE(std::string("duckdb"), std::string("sqlite"));
  CAPTURE(target);
  workdir w;
  csv_project(w, target, "wh.db");
  w.write("files/leads.csv", "id,code,score\n1,a,0.5\n");
  w.write("files/empty.csv", "id,note\n");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  w.write("files/leads.csv", "id,code,score\n1,7,2\n2,8,3\n");
  w.write("files/empty.csv", "id,note\n1,42\n");
  auto run = flotilla_json(w, {"run"});
  CHECK(run["status"] == "success");
  CHECK(run["drift"]["tables_drifted"] == 0);
  const auto q = [&](const std::string& sql) {
    return target == "duckdb" ? duckdb_query(w.file("wh.db"), sql)
                              : sqlite_query(w.file("wh.db"), sql);
  };
  const std::string leads = target == "duckdb" ? "raw.leads" : "raw__leads";
  const std::string empty = target == "duckdb" ? "raw.empty" : "raw__empty";
  CHECK(q("SELECT count(*), max(code), sum(score) FROM " + leads)[0] ==
        std::vector<std::string>{"2", "8", "5.0"});
  CHECK(q("SELECT note FROM " + empty)[0][0] == "42");
  CHECK(q(target == "duckdb" ? "SELECT data_type FROM information_schema.columns WHERE "
                               "table_name = 'leads' AND column_name = 'score'"
                             : "SELECT type FROM pragma_table_info('raw__leads') WHERE name = "
                               "'score'")[0][0] ==
        "DOUBLE");
}

TEST_CASE("CSV datasets: a value past DuckDB's default sample counts in the inference, and a "
          "pin reads it into a live column of numbers") {
  workdir w;
  csv_project(w, "sqlite", "wh.db");
  std::string csv = "id,amount\n";
  for (int i = 1; i <= 25000; ++i)  // past DuckDB's default sniffing sample
    csv += fmt::format("{},{}\n", i, i);
  w.write("files/payments.csv", csv + "25001,2.5\n");
  w.write("files/orders.csv", csv);
  int code = 0;
  // Inferred from every row: 2.5 makes the column a double, not a bigint that rounds it.
  CHECK(flotilla_json(w, {"run"}, &code)["status"] == "success");
  CHECK(sqlite_query(w.file("wh.db"), "SELECT amount FROM raw__payments WHERE id = 25001")[0][0] ==
        "2.5");
  // Text far down a column the live table holds as numbers: the table fails naming the
  // pin, never casting the value.
  w.write("files/orders.csv", csv + "25001,n/a\n");
  auto failed = flotilla_json(w, {"run"}, &code);
  CHECK(code == 1);
  const std::string error = (*find_table(failed, "raw__orders"))["error"];
  CHECK_THAT(error, Catch::Contains("amount") && Catch::Contains("columns = { amount = \"text\" }") &&
                        !Catch::Contains("sample_size"));
  // The pin the message names: the file is parsed with it, every row loads.
  csv_project(w, "sqlite", "wh.db", "",
              "\n[sources.crm.tables.\"orders\"]\ncolumns = { amount = \"text\" }\n");
  CHECK(flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &code)["status"] == "success");
  CHECK(sqlite_query(w.file("wh.db"), "SELECT count(*), max(id) FROM raw__orders WHERE amount = "
                                      "'n/a'")[0] == std::vector<std::string>{"1", "25001"});
  CHECK(sqlite_query(w.file("wh.db"), "SELECT count(*) FROM raw__orders")[0][0] == "25001");
}

TEST_CASE("a dataset whose enforced contract declares its columns is skipped by the gate") {
  shop s("fail", "[sources.shop.tables.orders]\ncontract = \"enforced\"\n"
                 "columns = { id = \"bigint\", amount = \"bigint\" }\n");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT");
  auto j = flotilla_json(s.w, {"run"});
  CHECK(j["status"] == "success");
  CHECK_FALSE(find_table(j, "raw.orders")->contains("source_drift"));
  CHECK(find_table(j, "raw.customers")->contains("source_drift"));
  // The read is pruned to the declared columns: the new one is not loaded.
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' "
                 "AND column_name = 'note'")[0][0] == "0");
}

TEST_CASE("declared columns under contract none only pin types: the gate checks the table, and "
          "a pin added or removed reseeds its baseline") {
  const std::string pinned =
      "[sources.shop.tables.orders]\ncolumns = { id = \"bigint\", amount = \"bigint\" }\n";
  shop s("fail", pinned);
  auto first = flotilla_json(s.w, {"run"});
  REQUIRE(first["status"] == "success");
  CHECK((*find_table(first, "raw.orders"))["source_drift"]["decision"] == "seed");
  // A new source column would load (no contract prunes the read): the gate stops it.
  s.source("ALTER TABLE orders ADD COLUMN note TEXT");
  int rc = -1;
  auto stopped = flotilla_json(s.w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* orders = find_table(stopped, "raw.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "failed");
  CHECK((*orders)["error_code"] == "FLT-D001");
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' "
                 "AND column_name = 'note'")[0][0] == "0");
  REQUIRE(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).exit_code == 0);
  REQUIRE(flotilla_json(s.w, {"retry"})["status"] == "success");
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' "
                 "AND column_name = 'note'")[0][0] == "1");
  // The pins taken out: the read changed, not the source. Reseeded, not a drift.
  s.config("fail");
  auto unpinned = flotilla_json(s.w, {"run"}, &rc);
  INFO(unpinned.dump(2));
  CHECK(rc == 0);
  CHECK((*find_table(unpinned, "raw.orders"))["source_drift"]["decision"] == "reseed");
}

TEST_CASE("a pinned column keeps its declared type in what the gate observes where the plan "
          "refuses the change too") {
  // SQLite reads a pinned column as declared: the baseline has it so. The gate's look at
  // a table the plan refuses (a new column under on_schema_change = fail) must too, or it
  // reports a retype that never happened, and accepting that breaks the next run.
  const std::string pinned =
      "[sources.shop.tables.orders]\ncolumns = { amount = \"text\" }\n";
  shop s("fail", "on_schema_change = \"fail\"\n" + pinned);
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT");
  int rc = -1;
  auto stopped = flotilla_json(s.w, {"run"}, &rc);
  CHECK(rc == 1);
  const auto* orders = find_table(stopped, "raw.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["error_code"] == "FLT-D001");
  CHECK_THAT((*orders)["error"].get<std::string>(),
             Catch::Contains("column 'note' added") && !Catch::Contains("retyped"));
  REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
  s.config("fail", pinned);
  auto next = flotilla_json(s.w, {"run"}, &rc);
  INFO(next.dump(2));
  CHECK(rc == 0);
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' "
                 "AND column_name = 'note'")[0][0] == "1");
}

TEST_CASE("a column name holding a line break is shown escaped in the text output, never "
          "split or changed") {
  shop s("warn");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN \"new\ncol\" INTEGER");
  const auto r = run_flotilla(s.w, {"run"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  // The drift warning (stderr) and the action line (stdout) name it as it is.
  CHECK_THAT(r.err, Catch::Contains("column 'new\\x0acol' added"));
  CHECK_THAT(r.out, Catch::Contains("column 'new\\x0acol' added as"));
  CHECK(r.out.find("new; col") == std::string::npos);
  CHECK(r.err.find("new\ncol") == std::string::npos);
  // So does `schema accept`: one change a line.
  const auto accepted = run_flotilla(s.w, {"schema", "accept"});
  CHECK(accepted.exit_code == 0);
  CHECK_THAT(accepted.out, Catch::Contains("column 'new\\x0acol' added"));
  CHECK(accepted.out.find("new\ncol") == std::string::npos);
}

TEST_CASE("table events carry the DDL that ran, the table's duration, and a violation's column "
          "and types") {
  shop s("ignore", "[sources.shop.tables.customers]\ncolumns = { name = \"int\" }\n");
  int code = 0;
  auto first = flotilla_json(s.w, {"run"}, &code);
  REQUIRE(code == 1);  // customers fails its contract
  CHECK(first["status"] == "partial");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'n');");
  auto run = flotilla_json(s.w, {"run"}, &code);
  REQUIRE(code == 1);
  const auto events = s.events_of(run["run_id"]);

  std::size_t actions = 0;
  std::size_t violations = 0;
  std::int64_t orders_started = 0, orders_action = 0;
  for (const auto& e : events) {
    if (e["type"] == "table_started" && e["table"] == "orders")
      orders_started = e["timestamp_us"];
    if (e["type"] == "schema_action")
      orders_action = e["timestamp_us"];
    if (e["type"] == "schema_action") {
      ++actions;
      CHECK(e["table"] == "orders");
      CHECK(e["schema_action"]["action"] == "add_columns");
      CHECK(e["schema_action"]["sql"] ==
            R"(ALTER TABLE "raw"."orders" ADD COLUMN "note" VARCHAR)");
    } else if (e["type"] == "contract_violation") {
      ++violations;
      CHECK(e["table"] == "customers");
      CHECK(e["contract_violation"]["column"] == "name");
      CHECK(e["contract_violation"]["expected"] == "int");
      CHECK(e["contract_violation"]["actual"] == "text");
      CHECK(e["contract_violation"]["error_code"] == "FLT-S002");
    } else if (e["type"] == "table_finished" && e["table"] == "orders") {
      CHECK(e["table_finished"]["status"] == "copied");
      CHECK(e["table_finished"]["duration_us"].get<std::int64_t>() > 0);
      // The timestamps are when the copy began and ended, its actions at its end.
      CHECK(e["timestamp_us"].get<std::int64_t>() - orders_started ==
            e["table_finished"]["duration_us"].get<std::int64_t>());
      CHECK(orders_action == e["timestamp_us"].get<std::int64_t>());
    }
  }
  CHECK(actions == 1);
  CHECK(violations == 1);
}

TEST_CASE("a run removes the staged files of a killed run, and keeps those a retry needs") {
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'n')");
  int code = 0;
  (void)flotilla_json(s.w, {"run"}, &code);
  REQUIRE(code == 1);
  REQUIRE(s.staged_files() == 1);  // kept for `flotilla retry`
  // What a kill -9 leaves: a run's files that no table's state refers to.
  const auto killed = s.w.path() / ".flotilla" / "staged" / "20200101T000000Z-dead";
  std::filesystem::create_directories(killed);
  std::ofstream(killed / "shop.orders.rows") << "rows";
  std::ofstream(killed / "shop.customers.rows.tmp") << "half";
  REQUIRE(s.staged_files() == 3);

  auto run = flotilla_json(s.w, {"run", "--filter", "table=customers"}, &code);
  CHECK(code == 0);
  CHECK_FALSE(std::filesystem::exists(killed));
  CHECK(s.staged_files() == 1);
}

TEST_CASE("seed 004: many tables staged at once all load; none trips over another's cleanup") {
  // Each table stages its rows in the run's directory and removes its file (and the
  // directory, once empty) after loading: another table may be creating its file there.
  shop s("warn");
  std::string sql;
  for (int i = 0; i < 400; ++i)
    sql += fmt::format("CREATE TABLE t{0:03d} (id INTEGER PRIMARY KEY, v INT);"
                       "INSERT INTO t{0:03d} VALUES (1, {0});",
                       i);
  s.source(sql);
  for (int run = 0; run < 3; ++run) {
    int rc = -1;
    auto j = flotilla_json(s.w, {"run", "--no-prune"}, &rc);
    std::size_t copied = 0;
    for (const auto& t : j["tables"]) {
      INFO(t.dump());
      CHECK(t["status"] == "copied");
      copied += t["status"] == "copied" ? 1 : 0;
    }
    CHECK(rc == 0);
    CHECK(copied == 402);
  }
  CHECK(s.staged_files() == 0);
}

TEST_CASE("seed 004: a retry killed after its target commit is finished by the next, rows once") {
  workdir w;
  sqlite_exec(w.file("src.db"), "CREATE TABLE ap (id INT, v TEXT, u INT);"
                                "INSERT INTO ap VALUES (1, 'a', 1), (2, 'b', 2);");
  w.write("flotilla.toml", "[project]\non_source_drift = \"fail\"\n[targets.wh]\n"
                           "dialect = \"sqlite\"\npath = \"wh.sqlite\"\n[sources.s]\n"
                           "adapter = \"sqlite\"\npath = \"src.db\"\n[sources.s.tables.ap]\n"
                           "cursor_column = \"u\"\n");
  int rc = -1;
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 0);
  // Drift under fail: the new rows are staged; accepted, a retry loads them (keyless: append).
  sqlite_exec(w.file("src.db"), "ALTER TABLE ap ADD COLUMN x INT;"
                                "INSERT INTO ap VALUES (3, 'c', 3, 0), (4, 'd', 4, 0);");
  flotilla_json(w, {"run"}, &rc);
  REQUIRE(rc == 1);
  REQUIRE(run_flotilla(w, {"schema", "accept"}).exit_code == 0);
  {
    scoped_env crash("FLOTILLA_CRASH_AT", "1:before_state");
    CHECK(run_flotilla(w, {"retry"}).exit_code != 0);
  }
  auto retry = flotilla_json(w, {"retry"}, &rc);
  INFO(retry.dump());
  CHECK(rc == 0);
  CHECK(sqlite_query(w.file("wh.sqlite"), "SELECT count(*), count(DISTINCT id) FROM s__ap") ==
        std::vector<std::vector<std::string>>{{"4", "4"}});
}

namespace {

/// A SQLite source `s` (table `a`) into a SQLite target whose table a trigger can make
/// fail, as a target that is down fails a load after the gate has looked at the rows.
struct failing_target {
  workdir w;
  failing_target() {
    sqlite_exec(w.file("src.db"),
                "CREATE TABLE a (id INTEGER PRIMARY KEY, amount INTEGER); INSERT INTO a VALUES (1, 5);");
    config("ignore");
    int rc = -1;
    flotilla_json(w, {"run"}, &rc);  // the target table exists
    REQUIRE(rc == 0);
    config("fail");
  }
  void config(const std::string& policy) const {
    w.write("flotilla.toml",
            fmt::format("[project]\nname = \"p\"\non_source_drift = \"{}\"\n"
                        "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
                        "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\ntarget = \"wh\"\n"
                        "include = [\"*\"]\n",
                        policy));
  }
  void break_target(bool broken) const {
    sqlite_exec(w.file("wh.sqlite"),
                broken ? "CREATE TRIGGER boom BEFORE INSERT ON s__a BEGIN "
                         "SELECT raise(ABORT, 'target down'); END;"
                       : "DROP TRIGGER boom;");
  }
};

}  // namespace

TEST_CASE("seed 004: a first gated run whose target fails still seeds the baseline") {
  failing_target f;
  f.break_target(true);
  int rc = -1;
  auto first = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(first["tables"][0]["error_code"] == "FLT-R001");
  // Which target, and what to do.
  CHECK_THAT(first["tables"][0]["error"].get<std::string>(),
             Catch::StartsWith("target 'wh': ") && Catch::Contains("flotilla retry"));
  f.break_target(false);
  // The source drifts before the next run: seeding again now would let it through.
  sqlite_exec(f.w.file("src.db"),
              "CREATE TABLE a2 (id INTEGER PRIMARY KEY, amount TEXT); INSERT INTO a2 SELECT * FROM a;"
              "INSERT INTO a2 VALUES (2, 'n/a'); DROP TABLE a; ALTER TABLE a2 RENAME TO a;");
  auto second = flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK(second["tables"][0]["error_code"] == "FLT-D001");
  CHECK(sqlite_query(f.w.file("wh.sqlite"), "SELECT count(*) FROM s__a")[0][0] == "1");
}

TEST_CASE("seed 004: rows staged before the target failed load through retry, without the source") {
  failing_target f;
  sqlite_exec(f.w.file("src.db"), "INSERT INTO a VALUES (2, 6);");
  f.break_target(true);
  int rc = -1;
  flotilla_json(f.w, {"run"}, &rc);
  CHECK(rc == 1);
  f.break_target(false);
  std::filesystem::rename(f.w.file("src.db"), f.w.file("away.db"));
  auto retry = flotilla_json(f.w, {"retry"}, &rc);
  CHECK(rc == 0);
  REQUIRE(retry["tables"].size() == 1);
  CHECK(retry["tables"][0]["reused_staged"] == true);
  CHECK(sqlite_query(f.w.file("wh.sqlite"), "SELECT group_concat(amount) FROM s__a")[0][0] ==
        "5,6");
}

TEST_CASE("warn: a retry loading staged rows leaves the drift standing: the next run warns") {
  failing_target f;
  f.w.write("flotilla.toml",
            "[project]\nname = \"p\"\non_source_drift = \"warn\"\n"
            "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.sqlite\"\n"
            "[sources.s]\nadapter = \"sqlite\"\npath = \"src.db\"\ntarget = \"wh\"\n"
            "include = [\"*\"]\nprune_unchanged = true\n");
  int rc = -1;
  flotilla_json(f.w, {"run"}, &rc);  // seeds the baseline
  REQUIRE(rc == 0);
  sqlite_exec(f.w.file("src.db"), "ALTER TABLE a ADD COLUMN note TEXT; INSERT INTO a VALUES (3, 30, 'x');");
  f.break_target(true);
  flotilla_json(f.w, {"run"}, &rc);
  REQUIRE(rc == 1);
  f.break_target(false);
  flotilla_json(f.w, {"retry"}, &rc);
  REQUIRE(rc == 0);
  auto next = run_flotilla(f.w, {"run", "--output", "json"});
  CHECK(next.exit_code == 0);
  CHECK(next.err.find("warning: source drift on s.a") != std::string::npos);
  auto j = nlohmann::json::parse(next.out);
  CHECK(j["tables"][0]["status"] == "copied");
  CHECK_THAT(j["tables"][0]["not_pruned"].get<std::string>(),
             Catch::Contains("flotilla schema accept s.a"));
}

TEST_CASE("CSV datasets: a column with no values in today's file keeps its live type") {
  // DuckDB says text (csv) or json for a column it has no value to infer from: the rows
  // load with NULLs into the live column, which keeps its type; no drift is reported.
  for (const std::string target : {"sqlite", "duckdb"}) {
    INFO(target);
    workdir w;
    const std::string path = target == "sqlite" ? "wh.db" : "wh.duckdb";
    csv_project(w, target, path);
    w.write("files/t.csv", "id,n,d,b\n1,10,2024-03-15,true\n2,20,2024-03-16,false\n");
    int code = 0;
    REQUIRE(flotilla_json(w, {"run"}, &code)["status"] == "success");
    w.write("files/t.csv", "id,n,d,b\n1,,,\n2,,,\n3,,,\n");
    auto run = flotilla_json(w, {"run"}, &code);
    INFO(run.dump());
    CHECK(code == 0);
    CHECK(run["status"] == "success");
    CHECK(run["drift"]["tables_drifted"] == 0);
    const std::string q = target == "sqlite"
                              ? "SELECT count(*), count(n), typeof(max(id)) FROM raw__t"
                              : "SELECT count(*), count(n), typeof(max(id)) FROM raw.t";
    const auto rows = target == "sqlite" ? sqlite_query(w.file(path), q) : duckdb_query(w.file(path), q);
    CHECK(rows[0][0] == "3");
    CHECK(rows[0][1] == "0");
    const std::string types =
        target == "sqlite"
            ? "SELECT group_concat(type, ',') FROM pragma_table_info('raw__t')"
            : "SELECT string_agg(data_type, ',' ORDER BY ordinal_position) FROM "
              "information_schema.columns WHERE table_schema = 'raw' AND table_name = 't'";
    const auto live = target == "sqlite" ? sqlite_query(w.file(path), types) : duckdb_query(w.file(path), types);
    CHECK_THAT(live[0][0], !Catch::Contains("TEXT") && !Catch::Contains("VARCHAR"));
  }
}

TEST_CASE("JSON datasets: a column first seen with no values takes later values as json") {
  // A key null in every record lands as a json column; numbers, strings and booleans
  // later read into it as the JSON they are, instead of failing as a type change.
  workdir w;
  std::filesystem::create_directories(w.path() / "files");
  w.write("flotilla.toml", "[project]\nname = \"p\"\n[targets.wh]\ndialect = \"duckdb\"\n"
                           "path = \"wh.duckdb\"\nschema = \"raw\"\n\n[sources.crm]\n"
                           "adapter = \"json\"\npath = \"files\"\ntarget = \"wh\"\n");
  w.write("files/t.ndjson", "{\"id\": 1, \"n\": null}\n{\"id\": 2, \"n\": null}\n");
  int code = 0;
  REQUIRE(flotilla_json(w, {"run"}, &code)["status"] == "success");
  w.write("files/t.ndjson", "{\"id\": 1, \"n\": 5}\n{\"id\": 2, \"n\": 7.5}\n");
  auto run = flotilla_json(w, {"run"}, &code);
  INFO(run.dump());
  CHECK(run["status"] == "success");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT CAST(n AS VARCHAR), typeof(n) FROM raw.t ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"5", "JSON"}, {"7.5", "JSON"}});
  w.write("files/t.ndjson", "{\"id\": 1, \"n\": \"hello\"}\n{\"id\": 2, \"n\": true}\n");
  CHECK(flotilla_json(w, {"run"}, &code)["status"] == "success");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT CAST(n AS VARCHAR) FROM raw.t ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"\"hello\""}, {"true"}});
}

TEST_CASE("CSV datasets: a timestamp_ntz pin refuses a value with a UTC offset it would drop") {
  // DuckDB (as PostgreSQL) reads 10:00+02:00 as a timestamp without time zone by dropping
  // the offset: the plan fails naming the value and the pin that keeps it.
  workdir w;
  csv_project(w, "duckdb", "wh.duckdb", "",
              "\n[sources.crm.tables.\"t\"]\ncolumns = { at = \"timestamp_ntz\" }\n");
  w.write("files/t.csv", "id,at\n1,2024-01-01 10:00:00\n2,2024-01-01T10:00:00+02:00\n");
  int code = 0;
  auto run = flotilla_json(w, {"run"}, &code);
  CHECK(code == 1);
  const auto* t = find_table(run, "raw.t");
  REQUIRE(t != nullptr);
  CHECK((*t)["error_code"] == "FLT-S002");
  CHECK_THAT((*t)["error"].get<std::string>(),
             Catch::Contains("2024-01-01T10:00:00+02:00") && Catch::Contains("UTC offset") &&
                 Catch::Contains("columns = { at = \"timestamp_tz\" }"));
  // Without offsets the pin reads every value.
  w.write("files/t.csv", "id,at\n1,2024-01-01 10:00:00\n2,2024-01-01T11:00:00.5\n");
  CHECK(flotilla_json(w, {"run"}, &code)["status"] == "success");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT CAST(\"at\" AS VARCHAR) FROM raw.t ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"2024-01-01 10:00:00"}, {"2024-01-01 11:00:00.5"}});
}

TEST_CASE("turning on_source_drift on copies a pruned table once, seeding its baseline, so the "
          "next change is reported") {
  workdir w;
  csv_project(w, "duckdb", "wh.duckdb", "", "prune_unchanged = true\n");
  w.write("files/stores.csv", "id,price,country\n1,1.5,FR\n");
  int code = 0;
  REQUIRE(flotilla_json(w, {"run"}, &code)["status"] == "success");
  csv_project(w, "duckdb", "wh.duckdb", "", "prune_unchanged = true\non_source_drift = \"fail\"\n");
  auto seeded = flotilla_json(w, {"run"}, &code);
  const auto* t = find_table(seeded, "raw.stores");
  REQUIRE(t != nullptr);
  CHECK((*t)["status"] == "copied");
  CHECK((*t)["source_drift"]["decision"] == "seed");
  w.write("files/stores.csv", "id,price,zip\n1,1.5,75001\n");
  auto drifted = flotilla_json(w, {"run"}, &code);
  CHECK(code == 1);
  const auto* d = find_table(drifted, "raw.stores");
  REQUIRE(d != nullptr);
  CHECK((*d)["source_drift"]["decision"] == "fail");
  CHECK_THAT((*d)["error"].get<std::string>(), Catch::Contains("country") && Catch::Contains("zip"));
}

TEST_CASE("retry refuses a failed run whose source flotilla.toml no longer defines, and keeps "
          "the failure retryable") {
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT");
  int code = 0;
  auto failed = flotilla_json(s.w, {"run"}, &code);
  REQUIRE(code == 1);
  // The source's section is gone (or another config shares the state directory).
  std::string toml;
  {
    std::ifstream in(s.w.file("flotilla.toml"));
    toml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  s.w.write("flotilla.toml", toml.substr(0, toml.find("[sources.shop]")) +
                                 "[sources.other]\nadapter = \"sqlite\"\npath = \"other.db\"\n");
  auto refused = run_flotilla(s.w, {"retry"});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("shop.orders") && Catch::Contains("[sources]") &&
                              Catch::Contains("nothing was retried"));
  // No run was recorded over the failure: restored, the source's retry still works.
  s.w.write("flotilla.toml", toml);
  REQUIRE(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).exit_code == 0);
  auto retried = flotilla_json(s.w, {"retry"}, &code);
  CHECK(code == 0);
  CHECK(retried["retry_of"] == failed["run_id"]);
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'raw' "
                 "AND table_name = 'orders'")[0][0] == "3");
}

TEST_CASE("CSV: the double pin FLT-S005 names for a number column that outgrew it copies the "
          "table anew under it, once the rebuild is confirmed") {
  workdir w;
  csv_project(w, "duckdb", "wh.duckdb");
  w.write("files/m.csv", "id,n\n1,5\n");
  REQUIRE(flotilla_json(w, {"run"})["status"] == "success");
  w.write("files/m.csv", "id,n\n1,5\n2,1.5e300\n");
  int rc = -1;
  auto outgrew = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK_THAT((*find_table(outgrew, "raw.m"))["error"].get<std::string>(),
             Catch::Contains("columns = { n = \"double\" } in [sources.crm.tables.\"m\"]"));
  // The pin as advised: a rebuild, which type_change_rebuild's default confirms by flag.
  const std::string pin = "[sources.crm.tables.m]\ncolumns = { n = \"double\" }\n";
  csv_project(w, "duckdb", "wh.duckdb", "", pin);
  auto unconfirmed = flotilla_json(w, {"run"}, &rc);
  CHECK(rc == 1);
  CHECK((*find_table(unconfirmed, "raw.m"))["error_code"] == "FLT-S006");
  auto rebuilt = flotilla_json(w, {"run", "--allow-type-change-rebuild"}, &rc);
  INFO(rebuilt.dump());
  CHECK(rc == 0);
  REQUIRE(rebuilt["drift"]["actions_taken"].size() == 1);
  CHECK(rebuilt["drift"]["actions_taken"][0]["action"] == "drop_and_recreate");
  CHECK(duckdb_query(w.file("wh.duckdb"), "SELECT typeof(n), CAST(n AS VARCHAR) FROM raw.m "
                                          "ORDER BY id") ==
        std::vector<std::vector<std::string>>{{"DOUBLE", "5.0"}, {"DOUBLE", "1.5e+300"}});
}

TEST_CASE("plan says what the source-drift gate would decide, and records nothing") {
  shop s("fail");
  int rc = -1;
  REQUIRE(flotilla_json(s.w, {"run"}, &rc)["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT");
  const auto find = [](const nlohmann::json& plan, const std::string& table) {
    for (const auto& t : plan["tables"])
      if (t["source_table"] == table)
        return t;
    return nlohmann::json();
  };
  SECTION("fail: the table fails in plan as in run, and plan changes nothing") {
    auto plan = flotilla_json(s.w, {"plan"}, &rc);
    INFO(plan.dump(2));
    CHECK(rc == 1);
    const auto orders = find(plan, "orders");
    CHECK(orders["status"] == "failed");
    CHECK(orders["error_code"] == "FLT-D001");
    CHECK_THAT(orders["error"].get<std::string>(),
               Catch::Contains("column 'note' added") &&
                   Catch::Contains("then `flotilla schema accept shop.orders`, then "
                                   "`flotilla retry`"));
    CHECK(orders["source_drift"]["decision"] == "fail");
    // What plan advises is what works: accept straight after a plan has nothing to read.
    CHECK_THAT(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).out,
               Catch::Contains("nothing to accept"));
    CHECK(orders["source_drift"]["changes"][0]["column"] == "note");
    CHECK(find(plan, "customers")["status"] == "planned");
    CHECK(s.staged_files() == 0);
    // The run decides the same: plan seeded or accepted nothing.
    auto run = flotilla_json(s.w, {"run"}, &rc);
    CHECK(rc == 1);
    CHECK(find(run, "orders")["error_code"] == "FLT-D001");
    // Accepted, the plan goes on to the change itself.
    REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
    plan = flotilla_json(s.w, {"plan"}, &rc);
    CHECK(rc == 0);
    CHECK(find(plan, "orders")["status"] == "planned");
    CHECK_FALSE(find(plan, "orders").contains("source_drift"));
  }
  SECTION("warn: the plan shows the warning, text and JSON") {
    s.config("warn");
    auto plan = flotilla_json(s.w, {"plan"}, &rc);
    INFO(plan.dump(2));
    CHECK(rc == 0);
    const auto orders = find(plan, "orders");
    CHECK(orders["status"] == "planned");
    CHECK(orders["source_drift"]["decision"] == "warn");
    REQUIRE(orders["warnings"].size() == 1);
    CHECK_THAT(orders["warnings"][0].get<std::string>(),
               Catch::StartsWith("source drift on shop.orders: column 'note' added"));
    auto text = run_flotilla(s.w, {"plan"});
    CHECK_THAT(text.out, Catch::Contains("warning  source drift on shop.orders"));
    CHECK(text.err.find("source drift") == std::string::npos);  // shown once, in the plan
  }
}

TEST_CASE("the gate sees a new source column that on_schema_change = ignore leaves out") {
  shop s("fail", "on_schema_change = \"ignore\"");
  int rc = -1;
  REQUIRE(flotilla_json(s.w, {"run"}, &rc)["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'x')");
  // plan and run both say the source changed, though the target does not follow it.
  auto plan = flotilla_json(s.w, {"plan"}, &rc);
  CHECK((*find_table(plan, "raw.orders"))["error_code"] == "FLT-D001");
  auto run = flotilla_json(s.w, {"run"}, &rc);
  INFO(run.dump(2));
  CHECK(rc == 1);
  const auto& orders = *find_table(run, "raw.orders");
  CHECK(orders["error_code"] == "FLT-D001");
  CHECK(orders["source_drift"]["changes"][0]["column"] == "note");
  CHECK(orders["source_drift"]["changes"][0]["kind"] == "added");
  CHECK(count_type(s.events_of(run["run_id"]), "source_drift_detected") == 1);
  CHECK(s.target("SELECT count(*) FROM raw.orders") == std::vector<std::vector<std::string>>{{"2"}});
  // Accepted, the retry loads the staged rows (without the column the target ignores),
  // checking what the run observed rather than the staged columns alone.
  REQUIRE(run_flotilla(s.w, {"schema", "accept", "shop.orders"}).exit_code == 0);
  auto retry = flotilla_json(s.w, {"retry"}, &rc);
  INFO(retry.dump(2));
  CHECK(rc == 0);
  CHECK((*find_table(retry, "raw.orders"))["status"] == "copied");
  CHECK(s.target("SELECT count(*) FROM raw.orders") == std::vector<std::vector<std::string>>{{"3"}});
  CHECK(s.target("SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' "
                 "AND column_name = 'note'") == std::vector<std::vector<std::string>>{{"0"}});
  // And the next run has nothing to report.
  run = flotilla_json(s.w, {"run"}, &rc);
  CHECK(rc == 0);
  CHECK((*find_table(run, "raw.orders"))["source_drift"]["decision"] == "unchanged");

  SECTION("warn says so too, every run") {
    s.config("warn", "on_schema_change = \"ignore\"");
    s.source("ALTER TABLE orders ADD COLUMN extra INT");
    for (int round = 0; round < 2; ++round) {
      auto r = run_flotilla(s.w, {"run", "--output", "json"});
      INFO(r.err);
      CHECK(r.exit_code == 0);
      CHECK_THAT(r.err, Catch::Contains("source drift on shop.orders: column 'extra' added"));
    }
  }
}

TEST_CASE("retry of a keyless incremental table whose source moved since reads every row again "
          "rather than keep only the staged increment") {
  // The failed run staged the rows past the watermark only; the source now points at
  // another file (a replica), so this run reads every row, as a first run does: the
  // staged increment loaded as the whole table would lose the rows below the watermark.
  shop s("fail", "[sources.shop.tables.log]\ncursor_column = \"seq\"\n");
  s.source("CREATE TABLE log (seq INTEGER, msg TEXT);"
           "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 50) "
           "INSERT INTO log SELECT i, 'm' || i FROM r");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE log ADD COLUMN lvl INTEGER; INSERT INTO log VALUES (51, 'm51', 1)");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "partial");
  REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
  std::filesystem::copy_file(s.w.file("shop.db"), s.w.file("replica.db"));
  std::ifstream in(s.w.path() / "flotilla.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("shop.db"), 7, "replica.db");
  s.w.write("flotilla.toml", text);
  auto retry = flotilla_json(s.w, {"retry"});
  INFO(retry.dump(2));
  const auto* log = find_table(retry, "raw.log");
  REQUIRE(log != nullptr);
  CHECK((*log)["status"] == "copied");
  CHECK_FALSE(log->contains("reused_staged"));
  CHECK_THAT((*log)["warnings"].dump(), Catch::Contains("read from the source again"));
  CHECK(s.target("SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM raw.log")[0] ==
        std::vector<std::string>{"51", "51", "1", "51"});
  // The watermark is the replica's now: its next row is read, and only it.
  sqlite_exec(s.w.file("replica.db"), "INSERT INTO log VALUES (52, 'm52', 2)");
  auto next = flotilla_json(s.w, {"run"});
  CHECK((*find_table(next, "raw.log"))["rows"] == 1);
  CHECK(s.target("SELECT count(*), count(DISTINCT seq) FROM raw.log")[0] ==
        std::vector<std::string>{"52", "52"});
}

TEST_CASE("retry loads the staged rows of a keyed incremental table whose drift added a column "
          "without the source: the failed run staged every row") {
  // An added column makes the run read every row again, merged on the key: the rows it
  // staged are the whole table, so the retry needs no source (seed 004, step 3).
  shop s("fail", "[sources.shop.tables.orders]\ncursor_column = \"id\"\n");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; UPDATE orders SET note = 'old';"
           "INSERT INTO orders VALUES (3, 30, 'new')");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "partial");
  REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
  std::filesystem::rename(s.w.file("shop.db"), s.w.file("away.db"));
  auto retry = flotilla_json(s.w, {"retry"});
  INFO(retry.dump(2));
  const auto* orders = find_table(retry, "raw.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "copied");
  CHECK((*orders)["reused_staged"] == true);
  CHECK(s.target("SELECT count(*), count(note), min(note), max(note) FROM raw.orders")[0] ==
        std::vector<std::string>{"3", "3", "new", "old"});
}

TEST_CASE("a file column with no value (empty, null, or a header alone) is no drift; plan and "
          "run agree, and the baseline keeps its type") {
  workdir w;
  csv_project(w, "duckdb", "wh.duckdb", "on_source_drift = \"fail\"");
  w.write("files/people.csv", "id,score\n1,7\n2,8\n");
  int code = -1;
  REQUIRE(flotilla_json(w, {"run"}, &code)["status"] == "success");
  for (const std::string body : {"id,score\n3,\n4,\n", "id,score\n"}) {
    INFO(body);
    w.write("files/people.csv", body);
    auto plan = flotilla_json(w, {"plan"}, &code);
    CHECK(code == 0);
    CHECK(plan["failed"] == 0);
    auto run = flotilla_json(w, {"run"}, &code);
    INFO(run.dump(2));
    CHECK(code == 0);
    CHECK(run["status"] == "success");
    CHECK(run["source_drift"]["tables_drifted"] == 0);
  }
  // A value of another type is drift, against the baseline's own type.
  w.write("files/people.csv", "id,score\n5,high\n");
  auto run = flotilla_json(w, {"run"}, &code);
  CHECK(code == 1);
  REQUIRE(run["tables"].size() == 1);
  CHECK(run["tables"][0]["error_code"] == "FLT-D001");
  CHECK_THAT(run["tables"][0]["error"].get<std::string>(),
             Catch::Contains("column 'score' retyped BIGINT -> TEXT"));
  // The plan's advice, with the target refusing too, is the run's: nothing is staged.
  auto plan = flotilla_json(w, {"plan"}, &code);
  REQUIRE(plan["tables"].size() == 1);
  CHECK_THAT(plan["tables"][0]["error"].get<std::string>(),
             Catch::Contains("then `flotilla run`") && !Catch::Contains("flotilla retry"));
}

TEST_CASE("a table its plan refuses seeds no baseline: the run that loads it does") {
  // What a refused plan observed is no data a run read: seeded, the column that outgrew
  // its type (a double) made the corrected file (whole numbers again) drift.
  workdir w;
  csv_project(w, "duckdb", "wh.duckdb");
  w.write("files/t.csv", "id,amt\n1,10\n");
  int code = -1;
  REQUIRE(flotilla_json(w, {"run"}, &code)["status"] == "success");
  csv_project(w, "duckdb", "wh.duckdb", "on_source_drift = \"fail\"");
  w.write("files/t.csv", "id,amt\n1,10.5\n");
  auto refused = flotilla_json(w, {"run"}, &code);
  INFO(refused.dump(2));
  CHECK(code == 1);
  REQUIRE(refused["tables"].size() == 1);
  CHECK(refused["tables"][0]["error_code"] == "FLT-S005");
  w.write("files/t.csv", "id,amt\n1,10\n2,11\n");
  auto fixed = flotilla_json(w, {"run"}, &code);
  INFO(fixed.dump(2));
  CHECK(code == 0);
  CHECK(fixed["status"] == "success");
  // Seeded by that run: a double now is drift against BIGINT.
  w.write("files/t.csv", "id,amt\n1,10\n2,11.5\n");
  auto drifted = flotilla_json(w, {"run"}, &code);
  REQUIRE(drifted["tables"].size() == 1);
  CHECK_THAT(drifted["tables"][0]["error"].get<std::string>(),
             Catch::Contains("column 'amt' retyped BIGINT -> DOUBLE"));
}

TEST_CASE("a file column with no values yet has no type in the baseline: its first values "
          "type it, never text or json from nothing") {
  workdir w;
  csv_project(w, "duckdb", "wh.duckdb", "on_source_drift = \"fail\"");
  int code = -1;
  SECTION("empty from the first run, a header alone too") {
    const std::string first = GENERATE(std::string("id,qty\n1,\n2,\n"), std::string("id,qty\n"));
    w.write("files/t.csv", first);
    REQUIRE(flotilla_json(w, {"run"}, &code)["status"] == "success");
    w.write("files/t.csv", "id,qty\n1,3\n2,4\n");
    auto run = flotilla_json(w, {"run"}, &code);
    INFO(run.dump(2));
    CHECK(code == 0);
    CHECK(run["source_drift"]["tables_drifted"] == 0);
  }
  SECTION("added empty later: drift said as such; accepted, its first values pass, then "
          "another type is drift against them") {
    w.write("files/t.csv", "id,amt\n1,10\n");
    REQUIRE(flotilla_json(w, {"run"}, &code)["status"] == "success");
    w.write("files/t.csv", "id,amt,qty\n1,10,\n");
    auto added = flotilla_json(w, {"run"}, &code);
    REQUIRE(added["tables"].size() == 1);
    CHECK_THAT(added["tables"][0]["error"].get<std::string>(),
               Catch::Contains("column 'qty' added (no values yet)"));
    auto accept = run_flotilla(w, {"schema", "accept"});
    CHECK(accept.exit_code == 0);
    CHECK_THAT(accept.out, Catch::Contains("column 'qty' added (no values yet)"));
    REQUIRE(flotilla_json(w, {"retry"}, &code)["status"] == "success");
    w.write("files/t.csv", "id,amt,qty\n1,10,3\n");
    auto typed = flotilla_json(w, {"run"}, &code);
    INFO(typed.dump(2));
    CHECK(code == 0);
    CHECK(typed["source_drift"]["tables_drifted"] == 0);
    w.write("files/t.csv", "id,amt,qty\n1,10,x\n");
    auto text = flotilla_json(w, {"run"}, &code);
    CHECK(code == 1);
    REQUIRE(text["tables"].size() == 1);
    CHECK_THAT(text["tables"][0]["error"].get<std::string>(),
               Catch::Contains("column 'qty' retyped BIGINT -> TEXT"));
  }
}

TEST_CASE("retry reads the source again, and says so, when the table's target changed or its "
          "staged file is gone") {
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'n')");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "partial");
  REQUIRE(run_flotilla(s.w, {"schema", "accept"}).exit_code == 0);
  s.source("INSERT INTO orders VALUES (4, 40, 'after')");
  std::string expected;
  SECTION("another target") {
    s.w.write("flotilla.toml",
              "[project]\nname = \"acme\"\non_source_drift = \"fail\"\n\n"
              "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\nschema = \"raw\"\n\n"
              "[targets.wh2]\ndialect = \"duckdb\"\npath = \"wh2.duckdb\"\nschema = \"raw\"\n\n"
              "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\ntarget = \"wh2\"\n"
              "include = [\"*\"]\n");
    expected = "its staged data was read for target 'wh', and the table loads into 'wh2' now: "
               "it is read from the source again";
  }
  SECTION("the staged file removed") {
    for (const auto& e : std::filesystem::recursive_directory_iterator(s.w.path() / ".flotilla" /
                                                                        "staged"))
      if (e.is_regular_file())
        std::filesystem::remove(e.path());
    expected = "is gone: it is read from the source again";
  }
  int code = -1;
  auto retry = flotilla_json(s.w, {"retry"}, &code);
  INFO(retry.dump(2));
  CHECK(code == 0);
  const auto* orders = find_table(retry, "raw.orders");
  REQUIRE(orders != nullptr);
  CHECK((*orders)["status"] == "copied");
  CHECK((*orders)["rows"] == 4);  // read again: the row inserted since is there
  CHECK_FALSE(orders->contains("reused_staged"));
  REQUIRE(orders->contains("warnings"));
  CHECK_THAT((*orders)["warnings"].dump(), Catch::Contains(expected));
}

TEST_CASE("the staged data of a table flotilla.toml no longer selects goes with the next run") {
  shop s("fail");
  REQUIRE(flotilla_json(s.w, {"run"})["status"] == "success");
  s.source("ALTER TABLE orders ADD COLUMN note TEXT; INSERT INTO orders VALUES (3, 30, 'n')");
  int code = 0;
  (void)flotilla_json(s.w, {"run"}, &code);
  REQUIRE(code == 1);
  REQUIRE(s.staged_files() == 1);
  // Excluded: no retry can load it any more.
  s.config("fail", "exclude = [\"orders\"]\n");
  SECTION("a retry keeps it") {
    (void)flotilla_json(s.w, {"retry"}, &code);
    CHECK(s.staged_files() == 1);
  }
  SECTION("a run drops it") {
    CHECK(flotilla_json(s.w, {"run"}, &code)["status"] == "success");
    CHECK(s.staged_files() == 0);
    // Taken back in, the table is read from the source: nothing staged is left to load.
    s.config("fail");
    auto back = flotilla_json(s.w, {"run"}, &code);
    INFO(back.dump(2));
    CHECK(s.staged_files() == 1);  // its drift, still not accepted, stages it again
  }
}
