#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "config/load.hpp"
#include "config/selection.hpp"
#include "tests/config/helpers.hpp"

using namespace flotilla::config;
using namespace flotilla::config::testing;
namespace fs = std::filesystem;

namespace {

const char* full_config = R"toml(
[project]
name = "acme-fleet"
on_source_drift = "warn"

[targets.warehouse]
dialect = "duckdb"
path = "warehouse.duckdb"
schema = "staging__{region}__{source}"

[targets.pg]
dialect = "postgresql"
dsn = "postgresql://127.0.0.1/flotilla"

[targets.snow]
dialect = "Snowflake"
catalog = "RAW"

[sources.shop_acme]
adapter = "sqlite"
path = "data/acme.db"
target = "warehouse"
tags = { client = "acme", region = "us_west" }
include = ["orders", "customers"]
exclude = ["tmp_*"]
prune_unchanged = true
contract = "none"
on_schema_change = "append_new_columns"
type_change_rebuild = "require_confirmation"
auto_widen = false
batch_rows = 1000

[sources.shop_acme.tables."public.orders"]
description = "Orders, one row per order."
cursor_column = "updated_at"
unique_key = ["id"]
columns = { total = "decimal(18,2)", id = "bigint", updated_at = "timestamp_tz" }
on_source_drift = "ignore"
contract = "enforced"

[sources.shop_acme.tables.customers]
unique_key = "id"
auto_widen = true
on_source_drift = "fail"

[sources.crm]
adapter = "postgres"
dsn = "postgresql://127.0.0.1/crm"
capture = "logical"
target = "pg"
tags = { client = "globex", region = "eu" }

[resilience]
auto_apply_additive_drift = true

[policy]
grants = ["schema_change.additive"]

[events.kafka]
brokers = ["127.0.0.1:9092", "127.0.0.1:9093"]
topic = "flotilla.events"
format = "protobuf"

[events.kafka.settings]
"linger.ms" = 5
"enable.idempotence" = true
"client.id" = "flotilla"

[events.pubsub]
project = "demo"
topic = "flotilla-events"
emulator_host = "127.0.0.1:8085"

[io]
max_connections_per_endpoint = 8
)toml";

}  // namespace

TEST_CASE("a valid full configuration loads every key into the model") {
  auto r = load_project_text(full_config, "/srv/fleet/flotilla.toml");
  INFO(all_messages(r));
  REQUIRE(r.ok());
  REQUIRE(r.diagnostics.empty());
  const project& p = *r.model;

  CHECK(p.name == "acme-fleet");
  CHECK(p.config_dir == "/srv/fleet");
  CHECK(p.state_dir == "/srv/fleet/.flotilla");
  CHECK(p.policy.on_source_drift == drift_policy::warn);

  REQUIRE(p.targets.size() == 3);
  CHECK(p.targets[0].name == "warehouse");
  CHECK(p.targets[0].dialect == "duckdb");
  CHECK(p.targets[0].executed);
  CHECK(p.targets[0].path == "/srv/fleet/warehouse.duckdb");
  CHECK(p.targets[0].schema == "staging__{region}__{source}");
  CHECK(p.targets[1].dialect == "postgres");
  CHECK(p.targets[1].dsn == "postgresql://127.0.0.1/flotilla");
  CHECK(p.targets[1].database.empty());  // the dsn names a postgres target's database
  CHECK(p.targets[1].schema == "{source}");
  CHECK(p.targets[2].dialect == "snowflake");
  CHECK_FALSE(p.targets[2].executed);
  CHECK(p.targets[2].database == "RAW");

  REQUIRE(p.sources.size() == 2);
  const source_config& s = p.sources[0];
  CHECK(s.name == "shop_acme");
  CHECK(s.adapter == adapter_kind::sqlite);
  CHECK(s.path == "/srv/fleet/data/acme.db");
  CHECK(s.target == "warehouse");
  CHECK(s.tags.at("client") == "acme");
  CHECK(s.tags.at("region") == "us_west");
  CHECK(s.include == std::vector<std::string>{"orders", "customers"});
  CHECK(s.exclude == std::vector<std::string>{"tmp_*"});
  CHECK(s.policy.prune_unchanged == true);
  CHECK(s.policy.contract == contract_mode::none);
  CHECK(s.policy.on_schema_change == schema_change_policy::append_new_columns);
  CHECK(s.policy.type_change_rebuild == rebuild_policy::require_confirmation);
  CHECK(s.policy.auto_widen == false);
  CHECK_FALSE(s.policy.on_source_drift.has_value());
  CHECK(s.batch_rows == 1000);

  REQUIRE(s.tables.size() == 2);
  const table_config& orders = s.tables[0];
  CHECK(orders.name == "public.orders");
  CHECK(orders.description == "Orders, one row per order.");
  CHECK(orders.cursor_column == "updated_at");
  CHECK(orders.unique_key == std::vector<std::string>{"id"});
  REQUIRE(orders.columns.size() == 3);
  CHECK(orders.columns[0].name == "total");
  CHECK(orders.columns[0].type == flotilla::schema::portable_type::decimal(18, 2));
  CHECK(orders.columns[0].type_text == "decimal(18,2)");
  CHECK(orders.policy.on_source_drift == drift_policy::ignore);
  CHECK(orders.policy.contract == contract_mode::enforced);
  CHECK(s.tables[1].name == "customers");
  CHECK(s.tables[1].unique_key == std::vector<std::string>{"id"});
  CHECK(s.tables[1].policy.auto_widen == true);
  CHECK(s.tables[1].policy.on_source_drift == drift_policy::fail);

  const source_config& crm = p.sources[1];
  CHECK(crm.adapter == adapter_kind::postgres);
  CHECK(crm.dsn == "postgresql://127.0.0.1/crm");
  CHECK(crm.capture == "logical");
  CHECK(crm.path.empty());
  CHECK(crm.batch_rows == 8192);
  CHECK(crm.include == std::vector<std::string>{"*"});
  CHECK(p.target_of(crm) == &p.targets[1]);

  CHECK(p.governance.auto_apply_additive_drift);
  CHECK(p.governance.grants == std::vector<std::string>{"schema_change.additive"});

  REQUIRE(p.events.kafka.has_value());
  CHECK(p.events.kafka->brokers == "127.0.0.1:9092,127.0.0.1:9093");
  CHECK(p.events.kafka->topic == "flotilla.events");
  CHECK(p.events.kafka->format == event_format::protobuf);
  CHECK(p.events.kafka->settings.at("linger.ms") == "5");
  CHECK(p.events.kafka->settings.at("enable.idempotence") == "true");
  CHECK(p.events.kafka->settings.at("client.id") == "flotilla");
  REQUIRE(p.events.pubsub.has_value());
  CHECK(p.events.pubsub->project == "demo");
  CHECK(p.events.pubsub->topic == "flotilla-events");
  CHECK(p.events.pubsub->emulator_host == "127.0.0.1:8085");
  CHECK(p.io.max_connections_per_endpoint == 8);
}

TEST_CASE("a configuration with only the required keys takes every default") {
  auto r = load_project_text(std::string{one_target} + R"toml(
[sources.shop]
adapter = "csv"
path = "/data/shop"
)toml",
                             "/srv/x/flotilla.toml");
  INFO(all_messages(r));
  REQUIRE(r.ok());
  const project& p = *r.model;
  CHECK(p.name == "x");
  CHECK_FALSE(p.policy.on_source_drift.has_value());
  CHECK(p.sources[0].target == "wh");  // the only target
  CHECK(p.sources[0].include == std::vector<std::string>{"*"});
  CHECK(p.sources[0].exclude.empty());
  CHECK(p.sources[0].path == "/data/shop");
  CHECK_FALSE(p.events.kafka.has_value());
  CHECK_FALSE(p.events.pubsub.has_value());
  CHECK(p.io.max_connections_per_endpoint == 4);
  CHECK_FALSE(p.governance.auto_apply_additive_drift);
  CHECK(p.targets[0].schema == "{source}");
}

TEST_CASE("a path with a leading ~ or holding a URI is refused, the URI's password not repeated") {
  auto r = load_project_text(R"toml(
[project]
state_dir = "~/state"
[targets.wh]
dialect = "duckdb"
path = "~/wh.duckdb"
[sources.a]
adapter = "duckdb"
path = "postgresql://u:Hunter11@127.0.0.1:5432/db"
)toml",
                             "/srv/x/flotilla.toml");
  const std::string all = all_messages(r);
  INFO(all);
  CHECK_FALSE(r.ok());
  CHECK_THAT(all, Catch::Contains("project.state_dir") && Catch::Contains("targets.wh.path") &&
                      Catch::Contains("${HOME}/wh.duckdb") && Catch::Contains("sources.a.path") &&
                      Catch::Contains("holds a URI") && !Catch::Contains("Hunter11"));
  for (const auto& d : r.diagnostics)
    CHECK(d.value.find("Hunter11") == std::string::npos);
}

TEST_CASE("per-table sections accept quoted dotted names and bare names") {
  auto r = load_project_text(std::string{one_target} + R"toml(
[sources.app]
adapter = "duckdb"
path = "app.duckdb"

[sources.app.tables."public.orders"]
cursor_column = "updated_at"

[sources.app.tables.customers]
description = "bare"

[sources.app.tables."sales.line items"]
description = "spaces too"
)toml",
                             "/w/flotilla.toml");
  INFO(all_messages(r));
  REQUIRE(r.ok());
  const auto& tables = r.model->sources[0].tables;
  REQUIRE(tables.size() == 3);
  CHECK(tables[0].name == "public.orders");
  CHECK(tables[1].name == "customers");
  CHECK(tables[2].name == "sales.line items");
}

TEST_CASE("sources, tables and columns keep the order they are written in") {
  auto r = load_project_text(std::string{one_target} + R"toml(
[sources.zeta]
adapter = "sqlite"
path = "z.db"

[sources.zeta.tables.zz]
columns = { zulu = "int", alpha = "text", mike = "decimal(10,2)", bravo = "bool" }

[sources.zeta.tables.aa]
[sources.zeta.tables.aa.columns]
yankee = "int"
charlie = "date"
xray = "uuid"

[sources.alpha]
adapter = "sqlite"
path = "a.db"
include = "orders"
)toml",
                             "/w/flotilla.toml");
  INFO(all_messages(r));
  REQUIRE(r.ok());
  const auto& p = *r.model;
  REQUIRE(p.sources.size() == 2);
  CHECK(p.sources[0].name == "zeta");
  CHECK(p.sources[1].name == "alpha");
  CHECK(p.sources[1].include == std::vector<std::string>{"orders"});  // one string is a list of one
  const auto& t = p.sources[0].tables;
  REQUIRE(t.size() == 2);
  CHECK(t[0].name == "zz");
  CHECK(t[1].name == "aa");
  std::vector<std::string> names;
  for (const auto& c : t[0].columns)
    names.push_back(c.name);
  CHECK(names == std::vector<std::string>{"zulu", "alpha", "mike", "bravo"});
  names.clear();
  for (const auto& c : t[1].columns)
    names.push_back(c.name);
  CHECK(names == std::vector<std::string>{"yankee", "charlie", "xray"});
}

TEST_CASE("relative paths resolve against the config file's directory") {
  auto r = load_project_text(R"toml(
[project]
state_dir = "state"

[targets.wh]
dialect = "sqlite"
path = "../out/wh.sqlite"

[sources.a]
adapter = "json"
path = "./data/events"

[sources.b]
adapter = "sqlite"
path = "/abs/b.db"
)toml",
                             "/srv/fleet/conf/flotilla.toml");
  INFO(all_messages(r));
  REQUIRE(r.ok());
  const auto& p = *r.model;
  CHECK(p.targets[0].path == "/srv/fleet/out/wh.sqlite");
  CHECK(p.sources[0].path == "/srv/fleet/conf/data/events");
  CHECK(p.sources[1].path == "/abs/b.db");
  CHECK(p.state_dir == "/srv/fleet/conf/state");
}

TEST_CASE("a relative config path resolves against the working directory") {
  auto r = load_project_text(std::string{one_target}, "sub/flotilla.toml");
  REQUIRE(r.ok());
  const fs::path expected = (fs::current_path() / "sub").lexically_normal();
  CHECK(r.model->config_dir == expected.string());
  CHECK(r.model->targets[0].path == (expected / "wh.duckdb").string());
}

TEST_CASE("a config file on disk loads the same as its text") {
  const fs::path dir = fs::temp_directory_path() / "flotilla_config_load_test";
  fs::create_directories(dir);
  const fs::path file = dir / "flotilla.toml";
  {
    std::ofstream out(file);
    out << full_config;
  }
  auto r = load_project(file.string());
  INFO(all_messages(r));
  REQUIRE(r.ok());
  CHECK(r.model->config_path == file.string());
  CHECK(r.model->sources.size() == 2);
  CHECK(r.model->targets[0].path == (dir / "warehouse.duckdb").string());
  fs::remove_all(dir);
}

TEST_CASE("the repository's example configuration, when present, loads without errors") {
  const fs::path file = fs::path{FLOTILLA_SOURCE_DIR} / "examples" / "flotilla.toml";
  if (!fs::exists(file))
    return;
  auto r = load_project(file.string());
  INFO(all_messages(r));
  CHECK(r.ok());
}
