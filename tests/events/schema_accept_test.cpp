// `flotilla schema accept` end to end: the built binary on state written here, with a
// config whose source and target cannot be reached.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/wait.h>

#include "events/source_drift.hpp"
#include "tests/events/support.hpp"

using namespace flotilla::events;
using flotilla::events::test::temp_dir;
namespace spb = flotilla::storage::pb;

namespace {

struct command_result {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::chrono::milliseconds took{0};
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

command_result run_flotilla(const temp_dir& dir, const std::vector<std::string>& args) {
  const char* bin = std::getenv("FLOTILLA_BIN");
  REQUIRE(bin != nullptr);
  std::string cmd = "cd " + quote(dir.path().string()) + " && " + quote(bin);
  for (const auto& a : args)
    cmd += " " + quote(a);
  cmd += " >.out 2>.err";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  command_result r;
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir.path() / ".out");
  r.err = slurp(dir.path() / ".err");
  return r;
}

// Nothing answers on 10.255.255.1 (packets vanish): a connection attempt would hang
// for connect_timeout, so a quick answer also shows that none was made.
constexpr const char* unreachable_config = R"(
[project]
name = "acme"
on_source_drift = "fail"

[targets.warehouse]
dialect = "postgres"
dsn = "postgresql://flotilla@10.255.255.1:5432/warehouse?connect_timeout=30"

[sources.shop]
adapter = "postgres"
dsn = "postgresql://flotilla@10.255.255.1:5432/shop?connect_timeout=30"
target = "warehouse"

[sources.crm]
adapter = "postgres"
dsn = "postgresql://flotilla@10.255.255.1:5433/crm?connect_timeout=30"
target = "warehouse"
)";

observed_columns cols(std::initializer_list<std::pair<const char*, const char*>> list) {
  observed_columns out;
  for (auto [name, type] : list) {
    auto* c = out.Add();
    c->set_name(name);
    c->set_type(type);
    c->set_nullable(true);
  }
  return out;
}

void put_baseline(flotilla::storage::state_store& s, const std::string& key, observed_columns c) {
  spb::SchemaBaseline b;
  *b.mutable_columns() = std::move(c);
  b.set_hints_hash("h1");
  b.set_run_id("run-1");
  REQUIRE(s.put(key, b));
}

spb::TableResult* observed_table(spb::RunRecord& run, const std::string& source,
                                 const std::string& table, observed_columns c) {
  auto* t = run.add_tables();
  t->set_source(source);
  t->set_source_table(table);
  t->set_table("staging." + table);
  t->set_status("failed");
  t->set_error_code("FLT-D001");
  t->set_run_id(run.run_id());
  t->set_hints_hash("h1");
  *t->mutable_observed_schema() = std::move(c);
  t->set_has_observed_schema(true);
  return t;
}

/// Baselines for shop.orders and crm.leads, and a latest run (run-2) that observed
/// shop.orders' amount retyped and crm.leads with a column added.
void drifted_state(const temp_dir& dir) {
  auto s = flotilla::events::test::open_store(dir.path() / ".flotilla" / "state");
  put_baseline(s, "shop.orders", cols({{"id", "bigint"}, {"amount", "bigint"}}));
  put_baseline(s, "crm.leads", cols({{"id", "bigint"}}));
  spb::RunRecord run;
  run.set_run_id("run-2");
  run.set_status("partial");
  run.set_command("run");
  run.set_started_at_us(2);
  observed_table(run, "shop", "orders", cols({{"id", "bigint"}, {"amount", "varchar"}}));
  observed_table(run, "crm", "leads", cols({{"id", "bigint"}, {"email", "text"}}));
  REQUIRE(s.put_run(run));
}

spb::SchemaBaseline baseline(const temp_dir& dir, const std::string& key) {
  auto s = flotilla::events::test::open_store(dir.path() / ".flotilla" / "state");
  auto b = s.get<spb::SchemaBaseline>(key);
  REQUIRE(b.has_value());
  REQUIRE(b->has_value());
  return **b;
}

}  // namespace

TEST_CASE("schema accept promotes every drifted dataset with no source or target reachable") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  drifted_state(dir);

  auto r = run_flotilla(dir, {"schema", "accept"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "crm.leads: column 'email' added TEXT\n"
        "shop.orders: column 'amount' retyped BIGINT -> VARCHAR\n"
        "accepted 2 schema change(s)\n");
  CHECK(r.took < std::chrono::seconds(10));  // no connection attempt (it would hang 30 s)

  auto b = baseline(dir, "shop.orders");
  REQUIRE(b.columns_size() == 2);
  CHECK(b.columns(1).type() == "varchar");
  CHECK(b.run_id() == "run-2");
  CHECK(b.hints_hash() == "h1");

  auto again = run_flotilla(dir, {"schema", "accept"});
  CHECK(again.exit_code == 0);
  CHECK(again.out == "nothing to accept\n");
}

TEST_CASE("schema accept with names promotes only those") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  drifted_state(dir);

  auto r = run_flotilla(dir, {"-c", "flotilla.toml", "schema", "accept", "shop.orders"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "shop.orders: column 'amount' retyped BIGINT -> VARCHAR\n"
        "accepted 1 schema change(s)\n");
  CHECK(baseline(dir, "crm.leads").columns_size() == 1);  // untouched

  auto same = run_flotilla(dir, {"schema", "accept", "shop.orders"});
  CHECK(same.exit_code == 0);
  CHECK(same.out == "nothing to accept\n");

  auto rest = run_flotilla(dir, {"schema", "accept"});
  CHECK(rest.out == "crm.leads: column 'email' added TEXT\naccepted 1 schema change(s)\n");
}

TEST_CASE("schema accept of a dataset the latest run did not observe is FLT-D002, exit 2") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  drifted_state(dir);

  auto r = run_flotilla(dir, {"schema", "accept", "shop.orders", "shop.customers"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains("FLT-D002"));
  CHECK_THAT(r.err, Catch::Contains("'shop.customers'"));
  CHECK_THAT(r.err, Catch::Contains("the latest run (run-2) had no table of that name"));
  CHECK_THAT(r.err, Catch::Contains("on_source_drift = \"warn\" or \"fail\""));
  CHECK_THAT(r.err, Catch::Contains("nothing was accepted"));
  // All or nothing: the valid name was not accepted either.
  CHECK(baseline(dir, "shop.orders").columns(1).type() == "bigint");
  // A typo: the nearest name is suggested.
  auto typo = run_flotilla(dir, {"schema", "accept", "shop.ordres"});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("did you mean 'shop.orders'?"));
}

TEST_CASE(
    "after a retry that reused staged data, schema accept has nothing to promote (seed 004)") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  drifted_state(dir);
  {
    auto s = flotilla::events::test::open_store(dir.path() / ".flotilla" / "state");
    spb::RunRecord retry;
    retry.set_run_id("run-3");
    retry.set_command("retry");
    retry.set_retry_of("run-2");
    retry.set_started_at_us(3);
    auto* t = retry.add_tables();
    t->set_source("shop");
    t->set_source_table("orders");
    t->set_status("copied");
    t->set_reused_staged(true);  // the gate did not run: no observed schema
    REQUIRE(s.put_run(retry));
  }
  auto named = run_flotilla(dir, {"schema", "accept", "shop.orders"});
  CHECK(named.exit_code == 2);
  CHECK_THAT(named.err, Catch::Contains("FLT-D002"));
  CHECK_THAT(named.err, Catch::Contains("run-3"));
  auto all = run_flotilla(dir, {"schema", "accept"});
  CHECK(all.exit_code == 0);
  CHECK(all.out == "nothing to accept\n");
}

namespace {

/// A PostgreSQL dataset pg.public.orders whose latest run observed a new column, landing
/// in the target table `target`.
void pg_orders_drifted(const temp_dir& dir, const std::string& target) {
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  auto s = flotilla::events::test::open_store(dir.path() / ".flotilla" / "state");
  put_baseline(s, "pg.public.orders", cols({{"id", "bigint"}}));
  spb::RunRecord run;
  run.set_run_id("run-3");
  run.set_status("partial");
  run.set_started_at_us(3);
  observed_table(run, "pg", "public.orders", cols({{"id", "bigint"}, {"note", "text"}}))
      ->set_table(target);
  REQUIRE(s.put_run(run));
}

}  // namespace

TEST_CASE("schema accept of a name without its schema takes the one dataset of the source so "
          "named (seed 004's `pg.orders`), and counts it once when named twice") {
  temp_dir dir;
  pg_orders_drifted(dir, "staging.public.orders");
  auto r = run_flotilla(dir, {"schema", "accept", "staging.public.orders", "pg.orders",
                              "pg.public.orders"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "pg.public.orders: column 'note' added TEXT\naccepted 1 schema change(s)\n");
  CHECK(baseline(dir, "pg.public.orders").columns_size() == 2);
}

TEST_CASE("schema accept of a name without its schema that two schemas have suggests both's "
          "first") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  {
    auto s = flotilla::events::test::open_store(dir.path() / ".flotilla" / "state");
    spb::RunRecord run;
    run.set_run_id("run-3");
    run.set_status("partial");
    run.set_started_at_us(3);
    observed_table(run, "pg", "audit.orders", cols({{"id", "bigint"}}))->set_table("s.audit_orders");
    observed_table(run, "pg", "public.orders", cols({{"id", "bigint"}}))->set_table("s.orders");
    REQUIRE(s.put_run(run));
  }
  auto r = run_flotilla(dir, {"schema", "accept", "pg.orders"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("did you mean 'pg."));
  CHECK_THAT(r.err, Catch::Contains("the run JSON's `table`"));
}

TEST_CASE("schema accept takes a dataset by its target table, the run JSON's `table`") {
  temp_dir dir;
  pg_orders_drifted(dir, "pg.orders");
  auto r = run_flotilla(dir, {"schema", "accept", "pg.orders"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "pg.public.orders: column 'note' added TEXT\naccepted 1 schema change(s)\n");
  CHECK(baseline(dir, "pg.public.orders").columns_size() == 2);
}

TEST_CASE("schema accept reads the latest finished run, past a run that was killed") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  drifted_state(dir);
  {
    auto s = flotilla::events::test::open_store(dir.path() / ".flotilla" / "state");
    spb::RunRecord killed;
    killed.set_run_id("run-3");
    killed.set_status("running");  // recorded at its start; the process died
    killed.set_command("run");
    killed.set_started_at_us(3);
    REQUIRE(s.put_run(killed));
  }
  auto r = run_flotilla(dir, {"schema", "accept", "shop.orders"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "shop.orders: column 'amount' retyped BIGINT -> VARCHAR\n"
        "accepted 1 schema change(s)\n");
}

TEST_CASE("schema accept before any run: nothing to accept, or FLT-D002 for a name") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  auto all = run_flotilla(dir, {"schema", "accept"});
  CHECK(all.exit_code == 0);
  CHECK(all.out == "nothing to accept\n");
  CHECK_FALSE(std::filesystem::exists(dir.path() / ".flotilla" / "state"));  // nothing created
  auto named = run_flotilla(dir, {"schema", "accept", "shop.orders"});
  CHECK(named.exit_code == 2);
  CHECK_THAT(named.err, Catch::Contains("FLT-D002: cannot accept 'shop.orders': no run has been "
                                        "recorded yet"));
}

TEST_CASE("schema accept reports configuration errors and usage errors with exit 2") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml") << "[project]\non_source_drift = \"banana\"\n"
                                              << "[targets.w]\ndialect = \"nope\"\n";
  auto bad = run_flotilla(dir, {"schema", "accept"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("FLT-C011"));
  auto missing = run_flotilla(dir, {"-c", "missing.toml", "schema", "accept"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("FLT-C001"));
  std::ofstream(dir.path() / "flotilla.toml") << unreachable_config;
  auto no_sub = run_flotilla(dir, {"schema"});
  CHECK(no_sub.exit_code == 2);
}

TEST_CASE("schema accept of a table that declares columns says the gate skips it") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml")
      << unreachable_config
      << "\n[sources.shop.tables.customers]\ncontract = \"enforced\"\n"
      << "columns = { id = \"int\", name = \"text\" }\n"
      << "\n[sources.shop.tables.orders]\ncontract = \"enforced\"\n"
      << "columns = { id = \"bigint\", amount = \"text\" }\n";
  drifted_state(dir);
  // Declared since the latest run observed it: not the gate's any more, named or not.
  auto all = run_flotilla(dir, {"schema", "accept"});
  CHECK(all.exit_code == 0);
  CHECK_THAT(all.out, !Catch::Contains("shop.orders") && Catch::Contains("crm.leads"));
  auto orders = run_flotilla(dir, {"schema", "accept", "shop.orders"});
  CHECK(orders.exit_code == 2);
  CHECK_THAT(orders.err, Catch::Contains("its table section declares columns"));
  for (const char* name : {"shop.customers", "shop.public.customers"}) {
    INFO(name);
    auto r = run_flotilla(dir, {"schema", "accept", name});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("FLT-D002") &&
                          Catch::Contains("its table section declares columns") &&
                          Catch::Contains("on_source_drift skips such tables") &&
                          !Catch::Contains("recorded no observed schema"));
  }
}

TEST_CASE("schema accept of a declared table named by its target table says the gate skips it") {
  temp_dir dir;
  std::ofstream(dir.path() / "flotilla.toml")
      << unreachable_config
      << "\n[sources.shop.tables.customers]\ncontract = \"enforced\"\n"
      << "columns = { id = \"int\", name = \"text\" }\n";
  {
    auto s = flotilla::events::test::open_store(dir.path() / ".flotilla" / "state");
    spb::RunRecord run;
    run.set_run_id("run-3");
    run.set_status("success");
    run.set_command("run");
    run.set_started_at_us(3);
    // Declared: the gate observed nothing of it.
    auto* t = run.add_tables();
    t->set_source("shop");
    t->set_source_table("customers");
    t->set_table("staging.customers");
    t->set_status("copied");
    t->set_run_id("run-3");
    REQUIRE(s.put_run(run));
  }
  auto r = run_flotilla(dir, {"schema", "accept", "staging.customers"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("FLT-D002") &&
                        Catch::Contains("its table section declares columns") &&
                        !Catch::Contains("recorded no observed schema"));
}
