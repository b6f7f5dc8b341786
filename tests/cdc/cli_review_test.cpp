// `flotilla review` end to end: the real binary (FLOTILLA_BIN) on a project whose state
// store holds reviews, with and without a running writer holding the store.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <chrono>

#include <nlohmann/json.hpp>

#include "cdc/decide.hpp"
#include "cdc/review_store.hpp"
#include "tests/cdc/support.hpp"

using namespace flotilla;
using namespace flotilla::cdc;
using flotilla::test::held_draft;
using flotilla::test::kept;
using flotilla::test::now_us;
using flotilla::test::temp_dir;

namespace {

struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The command running in the background; finish() waits for it.
class running_cli {
 public:
  /// `prefix`: a command the binary runs under (`timeout -s INT 2`).
  running_cli(const temp_dir& dir, const std::vector<std::string>& args,
              const std::string& prefix = "")
      : err_file_(dir.path() / ("stderr_" + test::unique_suffix() + ".txt")) {
    const char* bin = std::getenv("FLOTILLA_BIN");
    if (bin == nullptr || *bin == '\0')
      FAIL("FLOTILLA_BIN is not set: run the suite through ctest");
    std::string cmd = "cd " + shell_quote(dir.path().string()) + " && " + prefix + shell_quote(bin);
    for (const auto& a : args)
      cmd += " " + shell_quote(a);
    cmd += " 2>" + shell_quote(err_file_.string());
    pipe_ = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe_ != nullptr);
  }
  ~running_cli() {
    if (pipe_ != nullptr)
      ::pclose(pipe_);
  }
  running_cli(const running_cli&) = delete;
  running_cli& operator=(const running_cli&) = delete;

  run_result finish() {
    run_result r;
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, pipe_)) > 0)
      r.out.append(buf, n);
    const int status = ::pclose(pipe_);
    pipe_ = nullptr;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = slurp(err_file_);
    return r;
  }

 private:
  std::filesystem::path err_file_;
  FILE* pipe_ = nullptr;
};

run_result run_cli(const temp_dir& dir, const std::vector<std::string>& args) {
  return running_cli(dir, args).finish();
}

/// A project with one DuckDB target `wh` holding <schema>.orders, and a state store with
/// a review of a renamed key column (two kept changes) and one of a key change.
struct project {
  temp_dir dir;
  sinks::warehouse_options wh;
  dialects::table_ref table{"", "s", "orders"};
  std::string rename_table = "shop.public.orders";
  std::string key_table = "shop.public.lines";

  project() {
    {
      std::ofstream toml(dir.path() / "flotilla.toml");
      // The capture source whose stream held the tables (never reached: no stream runs).
      toml << "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
              "[sources.shop]\nadapter = \"postgres\"\ndsn = \"postgresql://127.0.0.1:1/shop\"\n"
              "capture = \"logical\"\n";
    }
    wh.name = "wh";
    wh.dialect = "duckdb";
    wh.path = (dir.path() / "wh.duckdb").string();
    {
      auto w = sinks::open_warehouse(wh);
      const auto q = w->dialect().qualified(table);
      w->execute({"CREATE SCHEMA s", "CREATE TABLE " + q +
                                         " (id INTEGER NOT NULL PRIMARY KEY, note VARCHAR, code VARCHAR)"});
    }  // closed: the command opens the file itself
    auto store = storage::state_store::open(dir.path() / ".flotilla" / "state");
    REQUIRE(store.has_value());
    const target_info info{"wh", target_kind::duckdb, table, std::nullopt};
    REQUIRE(create_review(*store, held_draft(test::orders(), rename_column{"id", "order_id"}, info),
                          std::vector{kept("0/1", "a"), kept("0/2", "b")}, now_us()));
    REQUIRE(create_review(*store,
                          held_draft(test::orders("public.lines"), key_change{{"id", "code"}, ""}, info),
                          {}, now_us()));
  }

  [[nodiscard]] std::vector<std::string> columns() const {
    auto w = sinks::open_warehouse(wh);
    std::vector<std::string> out;
    const auto live = w->describe(table);
    REQUIRE(live.has_value());
    for (const auto& c : live->columns)
      out.push_back(c.name);
    return out;
  }

  [[nodiscard]] storage::state_store store() const {
    auto s = storage::state_store::open(dir.path() / ".flotilla" / "state");
    REQUIRE(s.has_value());
    return std::move(*s);
  }
};

nlohmann::json parse(const run_result& r) {
  INFO(r.out << r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("review list and show print every part of the review, in text and JSON") {
  project p;
  auto list = run_cli(p.dir, {"review", "list", "--output", "json"});
  REQUIRE(list.exit_code == 0);
  auto j = parse(list);
  REQUIRE(j["reviews"].size() == 2);
  const auto& lines = j["reviews"][0];  // ordered by (target, table)
  const auto& orders = j["reviews"][1];
  CHECK(lines["table"] == p.key_table);
  CHECK(lines["kind"] == "key_change");
  CHECK(lines["requires_resync"] == true);
  CHECK(lines["proposal_needs_edit"] == true);
  CHECK(orders["table"] == p.rename_table);
  CHECK(orders["target"] == "wh");
  CHECK(orders["state"] == "awaiting_review");
  CHECK(orders["state_label"] == "paused: awaiting review");
  CHECK(orders["kind"] == "rename_column");
  CHECK(orders["source_change"] == "public.orders: column id renamed to order_id (source LSN 0/16B3748)");
  CHECK(orders["position"] == "0/16B3748");
  CHECK(orders["kept_changes"] == 2);
  CHECK(orders["id"].get<std::string>().size() == 8);

  auto text = run_cli(p.dir, {"review", "list"});
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("paused: awaiting review"));
  CHECK_THAT(text.out, Catch::Contains("rename column"));
  CHECK_THAT(text.out, Catch::Contains("key change"));

  auto show = run_cli(p.dir, {"review", "show", orders["id"].get<std::string>()});
  REQUIRE(show.exit_code == 0);
  CHECK_THAT(show.out, Catch::Contains("Table:  shop.public.orders"));
  CHECK_THAT(show.out, Catch::Contains("State:  paused: awaiting review"));
  CHECK_THAT(show.out, Catch::Contains("Kind:   rename column"));
  CHECK_THAT(show.out, Catch::Contains(
                           "Source change: public.orders: column id renamed to order_id (source LSN 0/16B3748)"));
  CHECK_THAT(show.out, Catch::Contains("Why it was not applied automatically:\n  column 'id' is part of the row key"));
  CHECK_THAT(show.out, Catch::Contains("Proposed DDL:\n  ALTER TABLE \"s\".\"orders\" RENAME COLUMN \"id\" TO \"order_id\";"));
  CHECK_THAT(show.out, Catch::Contains("Data consequence:\n  The column keeps its values"));
  CHECK_THAT(show.out, Catch::Contains("Kept changes: 2"));

  auto key = run_cli(p.dir, {"review", "show", "wh", p.key_table});
  REQUIRE(key.exit_code == 0);
  CHECK_THAT(key.out, Catch::Contains("The proposal needs an edit first (see its comments)."));
  CHECK_THAT(key.out, Catch::Contains("Data consequence:\n  Requires table resync."));

  auto missing = run_cli(p.dir, {"review", "show", "wh", "shop.public.nope"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("FLT-V011"));
  // In JSON: review's own fields, and the ones every refused command prints.
  auto as_json = run_cli(p.dir, {"review", "show", "wh", "shop.public.nope", "--output", "json"});
  CHECK(as_json.exit_code == 2);
  auto refused = parse(as_json);
  CHECK(refused["status"] == "refused");
  CHECK(refused["code"] == "FLT-V011");
  CHECK(refused["exit_code"] == 2);
  REQUIRE(refused["errors"].size() == 1);
  CHECK(refused["errors"][0]["code"] == "FLT-V011");
  CHECK(refused["errors"][0]["message"] == refused["message"]);
  CHECK_THAT(as_json.err, Catch::Contains("error FLT-V011"));  // said on stderr too
  CHECK_THAT(refused["hint"].get<std::string>(), Catch::Contains("`flotilla review list`"));
  // The table named without its schema: the hint names the review it likely means.
  auto near = parse(run_cli(p.dir, {"review", "show", "wh", "shop.orders", "--output", "json"}));
  CHECK(near["code"] == "FLT-V011");
  CHECK(near["hint"] == "did you mean `flotilla review show wh " + p.rename_table + "`?");
  // --wait takes seconds, 0 or more, said plainly.
  auto negative = run_cli(p.dir, {"review", "apply", "wh", p.rename_table, "--wait", "-1"});
  CHECK(negative.exit_code == 2);
  CHECK_THAT(negative.err, Catch::Contains("a number of seconds, 0 or more, not '-1'") &&
                               !Catch::Contains("1797693"));
}

TEST_CASE("review apply carries the decision out on the target when no stream runs") {
  project p;
  auto res = run_cli(p.dir, {"review", "apply", "wh", p.rename_table, "--output", "json"});
  REQUIRE(res.exit_code == 0);
  auto j = parse(res);
  CHECK(j["status"] == "done");
  CHECK(j["review"]["state_label"] == "applying");
  CHECK(j["review"]["applied_ddl"] == "ALTER TABLE \"s\".\"orders\" RENAME COLUMN \"id\" TO \"order_id\";");
  auto cols = p.columns();
  CHECK(std::find(cols.begin(), cols.end(), "order_id") != cols.end());

  auto again = run_cli(p.dir, {"review", "apply", "wh", p.rename_table});
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.err, Catch::Contains("This review is applying; it does not accept a decision.") &&
                           Catch::Contains("hint: start `flotilla stream`"));

  SECTION("a comment-only proposal is refused with the seed's hint; edit it, then it applies") {
    auto refused = run_cli(p.dir, {"review", "apply", "wh", p.key_table});
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("The proposed DDL needs an edit before it can be applied"));
    CHECK_THAT(refused.err, Catch::Contains("The proposal needs an edit first (see its comments)."));
    // In JSON, a refusal by the review's state carries exit_code and errors[] too.
    auto as_json = parse(run_cli(p.dir, {"review", "apply", "wh", p.key_table, "--output", "json"}));
    CHECK(as_json["status"] == "refused");
    CHECK(as_json["code"] == "FLT-V001");
    CHECK(as_json["exit_code"] == 2);
    REQUIRE(as_json["errors"].size() == 1);
    CHECK(as_json["errors"][0]["code"] == "FLT-V001");
    auto resync = run_cli(p.dir, {"review", "resync", "wh", p.key_table});
    CHECK(resync.exit_code == 2);
    CHECK_THAT(resync.err, Catch::Contains("Edit the target DDL before resync."));
    auto usage = run_cli(p.dir, {"review", "edit", "wh", p.key_table, "--ddl", "-- x"});
    CHECK(usage.exit_code == 2);
    std::ofstream(p.dir.path() / "fix.sql") << "-- the target key is rebuilt by the resync copy\n";
    auto edited = run_cli(p.dir, {"review", "edit", "wh", p.key_table, "--ddl-file",
                                   (p.dir.path() / "fix.sql").string(), "--apply", "--output", "json"});
    REQUIRE(edited.exit_code == 0);
    CHECK(parse(edited)["review"]["state_label"] == "paused: awaiting resync");
    // The file's last line end is the file's, not the DDL's.
    CHECK(parse(edited)["review"]["applied_ddl"] == "-- the target key is rebuilt by the resync copy");
    auto bound = run_cli(p.dir, {"review", "edit", "wh", p.key_table, "--ddl", "ALTER TABLE t ADD c INT",
                                  "--resync"});
    CHECK(bound.exit_code == 2);
    CHECK_THAT(bound.err, Catch::Contains("This review already applied target DDL; resync must use that exact DDL."));
  }

  SECTION("a failing edited DDL exits 1 and the card shows the tried DDL and the error") {
    auto bad = run_cli(p.dir, {"review", "edit", "wh", p.key_table, "--ddl",
                                "ALTER TABLE \"s\".\"orders\" ADD COLUMN note VARCHAR", "--apply"});
    CHECK(bad.exit_code == 1);
    CHECK_THAT(bad.err, Catch::Contains("apply DDL failed: "));
    auto show = run_cli(p.dir, {"review", "show", "wh", p.key_table});
    CHECK_THAT(show.out, Catch::Contains("State:  paused: last decision failed"));
    CHECK_THAT(show.out, Catch::Contains("Tried DDL:\n  ALTER TABLE \"s\".\"orders\" ADD COLUMN note VARCHAR"));
    CHECK_THAT(show.out, Catch::Contains("Error: apply DDL failed: "));
  }
}

TEST_CASE("while another process holds the store, review reads it read-only and queues decisions") {
  project p;
  auto store = p.store();  // the running stream, as far as the command can tell
  // Opening the store replays its log and flushes it in the background; a read-only open
  // while that flush swaps the log for a table file may see neither (RocksDB's
  // OpenForReadOnly is not made for a writer that moves files under it). The listing is
  // asked again until the flush is done, for at most 10 s: what is asserted is that it
  // shows both reviews, never something else.
  run_result list;
  for (int i = 0; i < 100; ++i) {
    list = run_cli(p.dir, {"review", "list", "--output", "json"});
    REQUIRE(list.exit_code == 0);
    if (parse(list)["reviews"].size() == 2)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(parse(list)["reviews"].size() == 2);

  // A refusal is immediate, from the read-only view.
  auto refused = run_cli(p.dir, {"review", "apply", "wh", p.key_table, "--wait", "0"});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("The proposal needs an edit first (see its comments)."));
  const auto inbox = inbox_dir(p.dir.path() / ".flotilla");
  CHECK((!std::filesystem::exists(inbox) || std::filesystem::is_empty(inbox)));

  // Nobody takes the decision: it is withdrawn, like a decision for an offline agent.
  auto untaken = run_cli(p.dir, {"review", "apply", "wh", p.rename_table, "--wait", "0"});
  CHECK(untaken.exit_code == 2);
  CHECK_THAT(untaken.err, Catch::Contains("FLT-V013"));
  CHECK_THAT(untaken.err, Catch::Contains("did not take the decision"));
  CHECK(std::filesystem::is_empty(inbox));
  auto still = load_review(store, "wh", p.rename_table);
  REQUIRE(still.has_value());
  CHECK((*still)->hold.state() == pb::HOLD_STATE_AWAITING_REVIEW);

  // Ctrl-C while it waits: withdrawn at once, never carried out later.
  auto stopped = running_cli(p.dir, {"review", "apply", "wh", p.rename_table, "--wait", "120"},
                             "timeout --preserve-status -s INT 2 ")
                     .finish();
  INFO(stopped.err);
  CHECK(stopped.exit_code == 2);
  CHECK_THAT(stopped.err, Catch::Contains("Stopped (Ctrl-C or SIGTERM) before the stream took "
                                          "the decision; it was withdrawn and nothing ran."));
  CHECK(std::filesystem::is_empty(inbox));
  CHECK(process_inbox(store, opener_for({p.wh}), p.dir.path() / ".flotilla", [] { return now_us(); })
            .empty());

  // The stream takes the request while the command waits for its result.
  running_cli cli(p.dir, {"review", "apply", "wh", p.rename_table, "--wait", "120", "--output", "json"});
  std::vector<decision_result> results;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (results.empty() && std::chrono::steady_clock::now() < give_up)
    results = process_inbox(store, opener_for({p.wh}), p.dir.path() / ".flotilla", [] { return now_us(); });
  REQUIRE(results.size() == 1);
  CHECK(results[0].exit_code() == 0);
  // The DDL ran; the command waits for the stream's replay of the kept changes, whose
  // outcome is the decision's. Here the stream finds none to replay: the table resumes.
  auto applying = load_review(store, "wh", p.rename_table);
  REQUIRE(applying.has_value());
  REQUIRE(applying->has_value());
  CHECK((*applying)->hold.state() == pb::HOLD_STATE_APPLYING);
  REQUIRE(save_review(store, replay_finished(**applying, now_us())));
  auto done = cli.finish();
  INFO(done.out << done.err);
  REQUIRE(done.exit_code == 0);
  auto j = parse(done);
  CHECK(j["status"] == "done");
  CHECK(j["review"]["state_label"] == "resumed");
  auto r = load_review(store, "wh", p.rename_table);
  REQUIRE(r.has_value());
  REQUIRE(r->has_value());
  CHECK((*r)->hold.state() == pb::HOLD_STATE_RESUMED);
  auto cols = p.columns();
  CHECK(std::find(cols.begin(), cols.end(), "order_id") != cols.end());
}

TEST_CASE("flotilla run leaves a table an open review holds alone and reports it held") {
  temp_dir dir;
  {
    std::ofstream toml(dir.path() / "flotilla.toml");
    toml << "[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.db\"\n"
            "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\ntarget = \"wh\"\n";
  }
  {
    sinks::warehouse_options src;
    src.name = "shop";
    src.dialect = "sqlite";
    src.path = (dir.path() / "shop.db").string();
    auto w = sinks::open_warehouse(src);
    w->execute({"CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)",
                "INSERT INTO orders VALUES (1, 'a')", "CREATE TABLE lines (id INTEGER)",
                "INSERT INTO lines VALUES (7)"});
  }
  {
    auto store = storage::state_store::open(dir.path() / ".flotilla" / "state");
    REQUIRE(store.has_value());
    const target_info info{"wh", target_kind::duckdb, {"", "", "shop__orders"}, std::nullopt};
    REQUIRE(create_review(*store,
                          held_draft(test::orders("orders"), rename_column{"id", "order_id"}, info),
                          {}, now_us()));
  }
  // plan says what the run will do: leave it alone.
  const auto plan_text = run_cli(dir, {"plan"});
  INFO(plan_text.out << plan_text.err);
  CHECK(plan_text.exit_code == 0);
  CHECK(plan_text.out.find("held") != std::string::npos);
  CHECK(plan_text.out.find("FLT-V014") != std::string::npos);
  const auto plan_json = parse(run_cli(dir, {"plan", "--output", "json"}));
  CHECK(plan_json["held"] == 1);  // counted, as the text headline counts it
  CHECK(plan_json["skipped"] == 0);
  for (const auto& t : plan_json["tables"])
    if (t["source_table"] == "orders") {
      CHECK(t["status"] == "held");
      CHECK(t["error_code"] == "FLT-V014");
    }
  const auto r = run_cli(dir, {"run", "--output", "json"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  const auto j = parse(r);
  REQUIRE(j["tables"].size() == 2);
  for (const auto& t : j["tables"]) {
    if (t["source_table"] == "orders") {
      CHECK(t["status"] == "held");
      CHECK(t["error_code"] == "FLT-V014");
      CHECK_THAT(t["error"].get<std::string>(), Catch::Contains("flotilla review show"));
    } else {
      CHECK(t["status"] == "copied");
    }
  }
  // Nothing of the held table reached the target.
  sinks::warehouse_options wh;
  wh.name = "wh";
  wh.dialect = "sqlite";
  wh.path = (dir.path() / "wh.db").string();
  auto w = sinks::open_warehouse(wh);
  CHECK_FALSE(w->describe({"", "", "shop__orders"}).has_value());
  CHECK(w->describe({"", "", "shop__lines"}).has_value());
  // The text output names the held table and counts it.
  const auto text = run_cli(dir, {"run"});
  INFO(text.out << text.err);
  CHECK(text.out.find("held    shop__orders  FLT-V014: ") != std::string::npos);
  CHECK(text.out.find(", 1 held,") != std::string::npos);
}

TEST_CASE("stream refuses a --filter table=: one slot carries all of a source's changes") {
  // A stream of one table confirmed the slot past the other tables' changes, which no
  // later stream applied; a --reload of one left the others uncaptured.
  temp_dir dir;
  {
    std::ofstream toml(dir.path() / "flotilla.toml");
    toml << "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
            "[sources.shop]\nadapter = \"postgres\"\n"
            "dsn = \"postgresql://nobody@127.0.0.1:1/none\"\ncapture = \"logical\"\n";
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"stream", "--filter", "table=public.orders"},
        std::vector<std::string>{"stream", "--reload", "--filter", "source=shop", "--filter",
                                 "table=public.orders"},
        std::vector<std::string>{"stream", "--setup-sql", "--filter", "table=public.orders"}}) {
    const auto r = run_cli(dir, args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--filter table=public.orders") &&
                          Catch::Contains("Select whole sources (--filter source=NAME or a tag)"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / ".flotilla" / "state"));
  }
}

TEST_CASE("review show says a removed review was superseded by a reload") {
  project p;
  {
    auto store = p.store();
    auto all = list_reviews(store, "wh");
    REQUIRE(all);
    for (auto r : *all)
      if (r.hold.table() == p.rename_table) {
        // As `flotilla stream --reload` leaves a removed review: closed, its table copied again.
        r.hold.set_state(storage::pb::HOLD_STATE_REMOVED);
        r.note.phase = "reloaded";
        REQUIRE(save_review(store, r));
      }
  }
  auto j = parse(run_cli(p.dir, {"review", "show", "wh", p.rename_table, "--output", "json"}));
  CHECK(j["state"] == "removed");
  CHECK(j["superseded_by_reload"] == true);
  // A closed review keeps no changes: those the table has are an open review's.
  CHECK(j["kept_changes"] == 0);
  for (const auto& r : parse(run_cli(p.dir, {"review", "list", "--output", "json"}))["reviews"])
    if (r["table"] == p.rename_table)
      CHECK(r["kept_changes"] == 0);
  auto text = run_cli(p.dir, {"review", "show", "wh", p.rename_table});
  CHECK_THAT(text.out, Catch::Contains("State:  removed from pipeline, superseded by `flotilla "
                                       "stream --reload`"));
  auto other = parse(run_cli(p.dir, {"review", "show", "wh", p.key_table, "--output", "json"}));
  CHECK(other["superseded_by_reload"] == false);
  // The list says it too.
  auto list = run_cli(p.dir, {"review", "list"});
  CHECK_THAT(list.out, Catch::Contains("removed from pipeline (superseded by a reload)"));
  // A target flotilla.toml does not name: refused with a code, in JSON as every refusal.
  auto nope = run_cli(p.dir, {"review", "list", "--target", "nope", "--output", "json"});
  CHECK(nope.exit_code == 2);
  auto refused = parse(nope);
  CHECK(refused["code"] == "FLT-V011");
  CHECK(refused["exit_code"] == 2);
  CHECK_THAT(refused["message"].get<std::string>(), Catch::Contains("--target 'nope'"));
}

TEST_CASE("a table held on one target and closed on another is named alone by its open review") {
  project p;
  {
    auto store = p.store();
    const target_info other{"wh2", target_kind::duckdb, p.table, std::nullopt};
    REQUIRE(create_review(store, held_draft(test::orders(), rename_column{"id", "order_id"}, other),
                          {}, now_us()));
    auto all = list_reviews(store);
    REQUIRE(all.has_value());
    bool closed = false;
    for (auto r : *all)
      if (r.hold.target() == "wh2") {
        r.hold.set_state(pb::HOLD_STATE_REMOVED);
        REQUIRE(save_review(store, r));
        closed = true;
      }
    REQUIRE(closed);
  }
  auto show = run_cli(p.dir, {"review", "show", p.rename_table});
  INFO(show.out << show.err);
  CHECK(show.exit_code == 0);
  CHECK_THAT(show.out, Catch::Contains("Target: wh\n") || Catch::Contains("paused: awaiting review"));
  // Named on a target that holds nothing: the hint is the open review, not the closed one.
  auto wrong = parse(run_cli(p.dir, {"review", "show", "wh3", p.rename_table, "--output", "json"}));
  CHECK(wrong["code"] == "FLT-V011");
  CHECK(wrong["hint"] == "did you mean `flotilla review show wh " + p.rename_table + "`?");
}

TEST_CASE("another project's config pointed at the state directory decides none of its reviews") {
  project p;
  // The project's own run claims the state directory (its source file is missing: the
  // run fails its table, and still records whose state it is).
  auto own = run_cli(p.dir, {"run"});
  INFO(own.err);
  REQUIRE(own.exit_code != 2);
  std::ofstream(p.dir.path() / "other.toml")
      << "[project]\nname = \"other\"\nstate_dir = \".flotilla\"\n"
         "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
         "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n";
  auto apply = run_cli(p.dir, {"-c", "other.toml", "review", "apply", "wh", p.rename_table});
  CHECK(apply.exit_code == 2);
  CHECK_THAT(apply.err, Catch::Contains("FLT-R007") && Catch::Contains("belongs to project"));
  auto cols = p.columns();
  CHECK(std::find(cols.begin(), cols.end(), "id") != cols.end());
  CHECK(std::find(cols.begin(), cols.end(), "order_id") == cols.end());
  auto list = run_cli(p.dir, {"-c", "other.toml", "review", "list", "--output", "json"});
  CHECK(list.exit_code == 2);
  CHECK_THAT(list.err, Catch::Contains("FLT-R007"));
  auto remove = run_cli(p.dir, {"-c", "other.toml", "review", "remove", "wh", p.key_table});
  CHECK(remove.exit_code == 2);
  // The project itself still has both reviews open.
  auto mine = parse(run_cli(p.dir, {"review", "list", "--output", "json"}));
  CHECK(mine["reviews"].size() == 2);
}

TEST_CASE("a decision for a source flotilla.toml no longer streams is refused; remove is taken") {
  project p;
  std::ofstream(p.dir.path() / "flotilla.toml", std::ios::trunc)
      << "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
         "[sources.other]\nadapter = \"sqlite\"\npath = \"other.db\"\n";
  auto apply = run_cli(p.dir, {"review", "apply", "wh", p.rename_table});
  CHECK(apply.exit_code == 2);
  CHECK_THAT(apply.err, Catch::Contains("FLT-V013") && Catch::Contains("source 'shop'") &&
                            Catch::Contains("Nothing ran"));
  auto cols = p.columns();
  CHECK(std::find(cols.begin(), cols.end(), "order_id") == cols.end());
  auto remove = run_cli(p.dir, {"review", "remove", "wh", p.rename_table, "--output", "json"});
  INFO(remove.err);
  CHECK(remove.exit_code == 0);
}

TEST_CASE("a decision queued while another command held the store is carried out once it lets go") {
  // The holder is no stream (another review command, a run): nobody takes the request,
  // and once the lock is free the waiting command carries the decision out itself.
  project p;
  std::optional<storage::state_store> holder(p.store());
  // The holder's open flushes its log in the background; a read-only open during that
  // swap may see no review (see the test above): the listing is asked until it shows them.
  for (int i = 0; i < 100; ++i) {
    auto list = run_cli(p.dir, {"review", "list", "--output", "json"});
    if (list.exit_code == 0 && parse(list)["reviews"].size() == 2)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  running_cli waiting(p.dir, {"review", "apply", "wh", p.rename_table, "--wait", "60",
                              "--output", "json"});
  const auto inbox = inbox_dir(p.dir.path() / ".flotilla");
  const auto queued = [&] {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(inbox, ec))
      if (f.path().extension() == ".req")
        return true;
    return false;
  };
  for (int i = 0; i < 300 && !queued(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(queued());
  holder.reset();  // the other command ends
  auto res = waiting.finish();
  INFO(res.out << res.err);
  CHECK(res.exit_code == 0);
  CHECK(parse(res)["status"] == "done");
  auto cols = p.columns();
  CHECK(std::find(cols.begin(), cols.end(), "order_id") != cols.end());
  CHECK(std::filesystem::is_empty(inbox));
}
