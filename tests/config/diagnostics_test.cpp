#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "config/load.hpp"
#include "tests/config/helpers.hpp"

using namespace flotilla::config;
using namespace flotilla::config::testing;

namespace {

const std::string file = "/w/flotilla.toml";

load_result load(const std::string& text) {
  return load_project_text(text, file);
}

// The single diagnostic with `code`, checked for its key path.
const diagnostic& expect(const load_result& r, errc code, const std::string& key) {
  INFO(all_messages(r));
  const diagnostic* d = find_code(r, code);
  REQUIRE(d != nullptr);
  CHECK(d->key == key);
  CHECK(d->file == file);
  CHECK(d->is_error() ==
        (code != errc::excluded_section && code != errc::gate_on_declared_table &&
         code != errc::new_columns_under_contract));
  CHECK(format(*d).find(code_name(code)) != std::string::npos);
  return *d;
}

}  // namespace

TEST_CASE("codes print as FLT-C and three digits") {
  CHECK(code_name(errc::file_not_found) == "FLT-C001");
  CHECK(code_name(errc::invalid_source_drift) == "FLT-C011");
  CHECK(code_name(errc::excluded_section) == "FLT-C022");
}

TEST_CASE("a missing config file names the path and says to pass -c or create flotilla.toml") {
  auto r = load_project("/nonexistent/dir/flotilla.toml");
  REQUIRE(r.diagnostics.size() == 1);
  const auto& d = r.diagnostics[0];
  CHECK(d.code == errc::file_not_found);
  CHECK(d.message.find("/nonexistent/dir/flotilla.toml") != std::string::npos);
  CHECK(d.message.find("-c") != std::string::npos);
  CHECK(d.message.find("create flotilla.toml") != std::string::npos);
  CHECK(d.message.find("check the path given with -c") != std::string::npos);
  CHECK(r.model != nullptr);
  CHECK_FALSE(r.ok());
  // The default path (no -c): pass one, or create the file.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path("/");
  auto dflt = load_project("flotilla.toml");
  std::filesystem::current_path(cwd);
  REQUIRE(dflt.diagnostics.size() == 1);
  CHECK(dflt.diagnostics[0].message.find("pass -c <path> or create flotilla.toml") !=
        std::string::npos);
}

TEST_CASE("a TOML syntax error reports file, line and column") {
  auto r = load("[project]\nname = \"x\"\n\n[sources.a]\nadapter = \n");
  REQUIRE(r.diagnostics.size() == 1);
  const auto& d = r.diagnostics[0];
  CHECK(d.code == errc::syntax_error);
  CHECK(d.line == 5);
  CHECK(d.column > 0);
  CHECK(format(d).rfind("/w/flotilla.toml:5:", 0) == 0);
  // A string left open: the line and what to do.
  auto open = load("[targets.wh]\ndialect = \"duckdb\"\npath = \"a.duckdb\n");
  REQUIRE(open.diagnostics.size() == 1);
  CHECK(open.diagnostics[0].line == 3);
  CHECK_THAT(open.diagnostics[0].message, Catch::Contains("end it with its closing quote"));
}

TEST_CASE("an unknown key is reported with the nearest valid key") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
on_schema_chnage = "fail"
)toml");
  const auto& d = expect(r, errc::unknown_key, "sources.shop.on_schema_chnage");
  CHECK(d.message.find("did you mean 'on_schema_change'?") != std::string::npos);
  CHECK(d.line == 9);
  CHECK(d.allowed.find("on_schema_change") != std::string::npos);
}

TEST_CASE("a mistyped key holding an inline table in a table section suggests the key") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
[sources.shop.tables.orders]
colums = { id = "int" }
)toml");
  const auto& d = expect(r, errc::unknown_key, "sources.shop.tables.orders.colums");
  CHECK(d.message.find("did you mean 'columns'?") != std::string::npos);
  CHECK(d.message.find("must be quoted") == std::string::npos);
}

TEST_CASE("an unknown section at the top level suggests the nearest section") {
  auto r = load(std::string{one_target} + "[sorces.shop]\nadapter = \"csv\"\n");
  const auto& d = expect(r, errc::unknown_key, "sorces");
  CHECK(d.message.find("did you mean 'sources'?") != std::string::npos);
}

TEST_CASE("a table-section key on a source says where it belongs") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
cursor_column = "updated_at"
)toml");
  const auto& d = expect(r, errc::unknown_key, "sources.shop.cursor_column");
  CHECK(d.message.find("sources.shop.tables.NAME") != std::string::npos);
}

TEST_CASE("a key written in another section's place says which sections take it") {
  const std::string source = "\n[sources.shop]\nadapter = \"sqlite\"\npath = \"s.db\"\n";
  CHECK_THAT(expect(load(std::string{one_target} + "\n[resilience]\ngrants = []\n" + source),
                    errc::unknown_key, "resilience.grants")
                 .message,
             Catch::Contains("it belongs in [policy]"));
  CHECK_THAT(expect(load(std::string{one_target} + "\n[io]\nprune_unchanged = true\n" + source),
                    errc::unknown_key, "io.prune_unchanged")
                 .message,
             Catch::Contains("[project] or a source section [sources.NAME]"));
  CHECK_THAT(expect(load(std::string{one_target} + source + "schema = \"raw\"\n"),
                    errc::unknown_key, "sources.shop.schema")
                 .message,
             Catch::Contains("a target section [targets.NAME]"));
  CHECK_THAT(expect(load("keep_runs = 3\n" + std::string{one_target} + source), errc::unknown_key,
                    "keep_runs")
                 .message,
             Catch::Contains("not a top-level key; it belongs in [project]"));
  // A section under a misspelt name: the near section, not the source key `target`.
  CHECK(expect(load("[target.w]\ndialect = \"duckdb\"\npath = \"w.duckdb\"\n" + source),
               errc::unknown_key, "target")
            .message == "unknown key 'target'; did you mean 'targets'?");
  // In a table section too, an inline table (tags = {...}) included.
  CHECK_THAT(expect(load(std::string{one_target} + source +
                         "[sources.shop.tables.t]\ninclude = [\"t\"]\n"),
                    errc::unknown_key, "sources.shop.tables.t.include")
                 .message,
             Catch::Contains("belongs in a source section [sources.NAME]"));
  CHECK_THAT(expect(load(std::string{one_target} + source +
                         "[sources.shop.tables.t]\ntags = { client = \"acme\" }\n"),
                    errc::unknown_key, "sources.shop.tables.t.tags")
                 .message,
             Catch::Contains("belongs in a source section [sources.NAME]"));
}

TEST_CASE("an unquoted dotted table name is reported with the quoted form") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"

[sources.shop.tables.public.orders]
cursor_column = "x"
)toml");
  const auto& d = expect(r, errc::unknown_key, "sources.shop.tables.public.orders");
  CHECK(d.message.find("tables.\"public.orders\"") != std::string::npos);
}

TEST_CASE("a value of the wrong type is FLT-C004") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
prune_unchanged = "yes"
)toml");
  const auto& d = expect(r, errc::wrong_type, "sources.shop.prune_unchanged");
  CHECK(d.value == "yes");
  CHECK(d.message.find("expected a boolean") != std::string::npos);
}

TEST_CASE("a value outside its set is FLT-C005 with the allowed values and a suggestion") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqllite"
path = "s.db"
)toml");
  const auto& d = expect(r, errc::invalid_value, "sources.shop.adapter");
  CHECK(d.value == "sqllite");
  CHECK(d.allowed == "sqlite, duckdb, postgres, csv, json");
  CHECK(d.message.find("did you mean 'sqlite'?") != std::string::npos);
}

TEST_CASE("every policy key rejects values outside its set") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
contract = "strict"
on_schema_change = "append"
type_change_rebuild = "maybe"

[sources.shop.tables.orders]
contract = "enforce"
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::invalid_value) == 4);
  CHECK(r.diagnostics[0].key == "sources.shop.contract");
  CHECK(r.diagnostics[1].key == "sources.shop.on_schema_change");
  CHECK(r.diagnostics[2].key == "sources.shop.type_change_rebuild");
  CHECK(r.diagnostics[3].key == "sources.shop.tables.orders.contract");
  CHECK(r.diagnostics[3].message.find("did you mean 'enforced'?") != std::string::npos);
}

TEST_CASE("a dialect outside the known set is FLT-C005 naming the executed and plan-only ones") {
  auto r = load("[targets.wh]\ndialect = \"mysql\"\n");
  const auto& d = expect(r, errc::invalid_value, "targets.wh.dialect");
  CHECK(d.allowed.find("plan-only") != std::string::npos);
}

TEST_CASE("every alias docs/dialects.md lists loads as its dialect") {
  for (auto [alias, canonical] : {std::pair{"sqlite3", "sqlite"}, {"bq", "bigquery"},
                                  {"delta", "databricks"}, {"spark", "databricks"},
                                  {"presto", "trino"}, {"PG", "postgres"}}) {
    INFO(alias);
    auto r = load(fmt::format("[targets.wh]\ndialect = \"{}\"\n", alias));
    CHECK(count_code(r, errc::invalid_value) == 0);
    REQUIRE(r.model->find_target("wh") != nullptr);
    CHECK(r.model->find_target("wh")->dialect == canonical);
  }
}

TEST_CASE("required keys are FLT-C006") {
  auto r = load(R"toml(
[targets.wh]
dialect = "duckdb"

[targets.pg]
dialect = "pg"

[targets.nodialect]
schema = "x"

[sources.a]
adapter = "sqlite"
target = "wh"

[sources.b]
adapter = "postgres"
target = "pg"

[sources.c]
path = "c.db"
target = "wh"

[events.kafka]
topic = "t"

[events.pubsub]
topic = "ttt"
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::missing_key) == 8);
  expect(r, errc::missing_key, "targets.wh.path");
  auto keys = std::vector<std::string>{};
  for (const auto& d : r.diagnostics)
    keys.push_back(d.key);
  CHECK(keys == std::vector<std::string>{"targets.wh.path", "targets.pg.dsn",
                                         "targets.nodialect.dialect", "sources.a.path",
                                         "sources.b.dsn", "sources.c.adapter",
                                         "events.kafka.brokers", "events.pubsub.project"});
}

TEST_CASE("a tag refused for its value is still the source's tag: no false FLT-C009") {
  auto r = load(R"toml(
[targets.wh]
dialect = "duckdb"
path = "w.duckdb"
schema = "{x}_{y}"

[sources.p4]
adapter = "sqlite"
path = "s.db"
tags = { x = "a\u0000b", y = 3 }
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::invalid_name) == 1);
  CHECK(count_code(r, errc::wrong_type) == 1);
  CHECK(count_code(r, errc::unknown_placeholder) == 0);
}

TEST_CASE("a Pub/Sub topic given by its full name is FLT-C005, naming the id to give") {
  auto r = load(R"toml(
[targets.wh]
dialect = "duckdb"
path = "w.duckdb"

[events.pubsub]
project = "demo"
topic = "projects/demo/topics/drift"
)toml");
  INFO(all_messages(r));
  expect(r, errc::invalid_value, "events.pubsub.topic");
  CHECK(all_messages(r).find("topic = \"drift\"") != std::string::npos);
}

TEST_CASE("a Pub/Sub project given as a path, and Kafka settings naming other brokers, are "
          "refused when flotilla.toml is read") {
  auto r = load(R"toml(
[targets.wh]
dialect = "duckdb"
path = "w.duckdb"

[events.pubsub]
project = "projects/demo"
topic = "drift"

[events.kafka]
brokers = "127.0.0.1:9092"
topic = "t"

[events.kafka.settings]
"bootstrap.servers" = "127.0.0.1:1"
)toml");
  INFO(all_messages(r));
  expect(r, errc::invalid_value, "events.pubsub.project");
  expect(r, errc::conflicting_keys, "events.kafka.settings.\"bootstrap.servers\"");
  // The same brokers again: accepted.
  auto same = load(R"toml(
[targets.wh]
dialect = "duckdb"
path = "w.duckdb"

[events.kafka]
brokers = "127.0.0.1:9092"
topic = "t"

[events.kafka.settings]
"bootstrap.servers" = "127.0.0.1:9092"
)toml");
  INFO(all_messages(same));
  CHECK(same.diagnostics.empty());
}

TEST_CASE("a source naming an undefined target is FLT-C007 with a suggestion") {
  auto r = load(R"toml(
[targets.warehouse]
dialect = "duckdb"
path = "w.duckdb"

[targets.lake]
dialect = "bigquery"

[sources.a]
adapter = "csv"
path = "a"
target = "warehuose"

[sources.b]
adapter = "csv"
path = "b"
)toml");
  INFO(all_messages(r));
  REQUIRE(count_code(r, errc::unknown_target) == 2);
  const auto& d = expect(r, errc::unknown_target, "sources.a.target");
  CHECK(d.value == "warehuose");
  CHECK(d.message.find("did you mean 'warehouse'?") != std::string::npos);
  CHECK(r.diagnostics[1].key == "sources.b.target");
  CHECK(r.diagnostics[1].message.find("2 targets") != std::string::npos);
}

TEST_CASE("sources without any target are one FLT-C006 on targets") {
  auto r = load("[sources.a]\nadapter = \"csv\"\npath = \"a\"\n");
  INFO(all_messages(r));
  REQUIRE(r.diagnostics.size() == 1);
  expect(r, errc::missing_key, "targets");
}

TEST_CASE("a declared column type that does not parse quotes the type parser") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"

[sources.shop.tables."public.orders"]
columns = { id = "bigint", total = "decimal(18,2", note = 5 }
)toml");
  INFO(all_messages(r));
  const auto& d =
      expect(r, errc::invalid_column_type, "sources.shop.tables.\"public.orders\".columns.total");
  CHECK(d.value == "decimal(18,2");
  const auto parsed = flotilla::schema::parse_type("decimal(18,2");
  REQUIRE_FALSE(parsed.has_value());
  CHECK(d.message == parsed.error().message);
  expect(r, errc::wrong_type, "sources.shop.tables.\"public.orders\".columns.note");
  // The valid column is kept.
  REQUIRE(r.model->sources[0].tables[0].columns.size() == 1);
  CHECK(r.model->sources[0].tables[0].columns[0].name == "id");
}

TEST_CASE("a schema template naming a tag a source lacks names source, target and placeholder") {
  auto r = load(R"toml(
[targets.wh]
dialect = "duckdb"
path = "w.duckdb"
schema = "staging__{region}__{source}"

[sources.acme]
adapter = "csv"
path = "a"
tags = { region = "us_west" }

[sources.globex]
adapter = "csv"
path = "g"
tags = { client = "globex" }
)toml");
  INFO(all_messages(r));
  REQUIRE(count_code(r, errc::unknown_placeholder) == 1);
  // Reported where the fix usually goes, the source lacking the tag; the message names
  // the template's key and line too.
  const auto& d = expect(r, errc::unknown_placeholder, "sources.globex.tags");
  CHECK(d.value == "{region}");
  CHECK(d.message.find("globex") != std::string::npos);
  CHECK(d.message.find("'wh'") != std::string::npos);
  CHECK(d.message.find("targets.wh.schema, line 5") != std::string::npos);
  CHECK(d.message.find("add region = \"...\" to its tags") != std::string::npos);
  CHECK(d.line == 15);  // the source's tags
}

TEST_CASE("a misspelt placeholder is FLT-C009 with the tag it most likely meant") {
  auto r = load(R"toml(
[targets.wh]
dialect = "duckdb"
path = "w.duckdb"
schema = "s_{regoin}"

[sources.shop]
adapter = "sqlite"
path = "a.db"
tags = { region = "eu" }
)toml");
  const auto& d = expect(r, errc::unknown_placeholder, "sources.shop.tags");
  CHECK(d.message.find("its tag 'region' is close to it") != std::string::npos);
  CHECK(d.message.find("the template's {regoin}") != std::string::npos);
  CHECK(d.line == 10);  // where the source's tags are
}

TEST_CASE("a schema template with unbalanced braces is FLT-C010") {
  auto r = load(R"toml(
[targets.wh]
dialect = "postgres"
dsn = "postgresql://x"
schema = "staging__{region"
)toml");
  const auto& d = expect(r, errc::malformed_template, "targets.wh.schema");
  CHECK(d.line == 5);  // the schema key, not the section header
  CHECK(d.column == 10);
}

TEST_CASE("numbers out of range and empty strings are FLT-C012") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = ""
batch_rows = 0

[io]
max_connections_per_endpoint = -1
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::out_of_range) == 3);
  expect(r, errc::out_of_range, "sources.shop.path");
}

TEST_CASE("keys that do not apply to an adapter or dialect are FLT-C013") {
  auto r = load(R"toml(
[targets.wh]
dialect = "duckdb"
path = "w.duckdb"
dsn = "postgresql://x"

[sources.file]
adapter = "sqlite"
path = "f.db"
dsn = "postgresql://x"
capture = "logical"

[sources.pg]
adapter = "postgres"
dsn = "postgresql://x"
path = "x.db"
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::not_applicable) == 4);
  expect(r, errc::not_applicable, "targets.wh.dsn");
  CHECK(r.diagnostics[2].key == "sources.file.capture");
  CHECK(r.diagnostics[3].key == "sources.pg.path");
}

TEST_CASE("block_size is a DuckDB block size, on a duckdb target only") {
  auto with = [](const std::string& dialect_and_place, const std::string& value) {
    return load("[targets.wh]\n" + dialect_and_place + "block_size = " + value +
                "\n\n[sources.s]\nadapter = \"sqlite\"\npath = \"s.db\"\n");
  };
  const std::string duck = "dialect = \"duckdb\"\npath = \"w.duckdb\"\n";
  {
    auto r = with(duck, "16384");
    INFO(all_messages(r));
    REQUIRE(r.ok());
    CHECK(r.model->targets.at(0).block_size == 16384);
  }
  {
    auto r = with(duck, "262144");
    REQUIRE(r.ok());
    CHECK(r.model->targets.at(0).block_size == 262144);
  }
  CHECK(load(std::string{one_target} + "[sources.s]\nadapter = \"sqlite\"\npath = \"s.db\"\n")
            .model->targets.at(0)
            .block_size == 0);
  expect(with(duck, "8192"), errc::out_of_range, "targets.wh.block_size");
  expect(with(duck, "524288"), errc::out_of_range, "targets.wh.block_size");
  const auto& odd = expect(with(duck, "20000"), errc::invalid_value, "targets.wh.block_size");
  CHECK(odd.message.find("power of two") != std::string::npos);
  expect(with(duck, "\"16KB\""), errc::wrong_type, "targets.wh.block_size");
  const auto& pg = expect(with("dialect = \"postgres\"\ndsn = \"postgresql://x\"\n", "16384"),
                          errc::not_applicable, "targets.wh.block_size");
  CHECK(pg.message.find("duckdb") != std::string::npos);
  expect(with("dialect = \"sqlite\"\npath = \"w.db\"\n", "16384"), errc::not_applicable,
         "targets.wh.block_size");
}

TEST_CASE("in_place_max_bytes is a byte count, on a postgres target only") {
  auto with = [](const std::string& dialect_and_place, const std::string& value) {
    return load("[targets.wh]\n" + dialect_and_place + "in_place_max_bytes = " + value +
                "\n\n[sources.s]\nadapter = \"sqlite\"\npath = \"s.db\"\n");
  };
  const std::string pg = "dialect = \"postgres\"\ndsn = \"postgresql://x\"\n";
  for (const auto& [text, bytes] : {std::pair{"0", 0ull}, std::pair{"8388608", 8388608ull}}) {
    auto r = with(pg, text);
    INFO(all_messages(r));
    REQUIRE(r.ok());
    CHECK(r.model->targets.at(0).in_place_max_bytes == bytes);
  }
  CHECK(load("[targets.wh]\n" + pg + "\n[sources.s]\nadapter = \"sqlite\"\npath = \"s.db\"\n")
            .model->targets.at(0)
            .in_place_max_bytes == 1048576);
  expect(with(pg, "-1"), errc::out_of_range, "targets.wh.in_place_max_bytes");
  expect(with(pg, "\"1MB\""), errc::wrong_type, "targets.wh.in_place_max_bytes");
  const auto& duck = expect(with("dialect = \"duckdb\"\npath = \"w.duckdb\"\n", "0"),
                            errc::not_applicable, "targets.wh.in_place_max_bytes");
  CHECK(duck.message.find("postgres") != std::string::npos);
}

TEST_CASE("names with dots or reserved tag names are FLT-C014") {
  auto r = load(std::string{one_target} + R"toml(
[sources."shop.eu"]
adapter = "csv"
path = "x"

[sources.ok]
adapter = "csv"
path = "y"
tags = { source = "x", "bad tag" = "y" }
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::invalid_name) == 3);
  expect(r, errc::invalid_name, "sources.\"shop.eu\"");
}

TEST_CASE("a tag value holding a NUL byte is FLT-C014, naming the tag") {
  // It lands in schema names: every run failed each table, telling to fix the target.
  auto r = load(std::string{one_target} + "[sources.a]\nadapter = \"csv\"\npath = \"x\"\n"
                                          "tags = { region = \"x\\u0000y\" }\n");
  INFO(all_messages(r));
  REQUIRE(count_code(r, errc::invalid_name) == 1);
  expect(r, errc::invalid_name, "sources.a.tags.region");
  CHECK(all_messages(r).find("NUL byte") != std::string::npos);
}

TEST_CASE("${VAR} in a string value is the environment variable; unset without a default is FLT-C024") {
  ::setenv("FLOTILLA_TEST_WH", "from_env.duckdb", 1);
  ::unsetenv("FLOTILLA_TEST_UNSET");
  auto r = load("[targets.t]\ndialect = \"duckdb\"\npath = \"${FLOTILLA_TEST_WH}\"\n"
                "[targets.u]\ndialect = \"duckdb\"\npath = \"${FLOTILLA_TEST_UNSET:-dflt.duckdb}\"\n"
                "[targets.v]\ndialect = \"duckdb\"\npath = \"a$${b}\"\n");
  REQUIRE(r.diagnostics.empty());
  CHECK(r.model->targets[0].path.ends_with("from_env.duckdb"));
  CHECK(r.model->targets[1].path.ends_with("dflt.duckdb"));
  CHECK(r.model->targets[2].path.ends_with("a${b}"));
  auto bad = load("[targets.t]\ndialect = \"postgres\"\ndsn = \"postgresql://u:${FLOTILLA_TEST_UNSET}@h/db\"\n");
  REQUIRE(bad.diagnostics.size() == 1);
  CHECK(bad.diagnostics[0].code == errc::environment_variable);
  CHECK(bad.diagnostics[0].key == "targets.t.dsn");
  CHECK(bad.diagnostics[0].message.find("environment variable FLOTILLA_TEST_UNSET is not set") !=
        std::string::npos);
  ::unsetenv("FLOTILLA_TEST_WH");
}

TEST_CASE("${VAR} in Kafka settings is expanded; a variable set to empty is a value") {
  ::setenv("FLOTILLA_TEST_LINGER", "5", 1);
  ::setenv("FLOTILLA_TEST_EMPTY", "", 1);
  ::unsetenv("FLOTILLA_TEST_UNSET");
  auto r = load(std::string{one_target} + R"toml(
[events.kafka]
brokers = "127.0.0.1:9092"
topic = "ev${FLOTILLA_TEST_EMPTY}"

[events.kafka.settings]
"linger.ms" = "${FLOTILLA_TEST_LINGER}"
"client.id" = "c${FLOTILLA_TEST_EMPTY:-dflt}"
)toml");
  INFO(all_messages(r));
  REQUIRE(r.diagnostics.empty());
  const auto& k = *r.model->events.kafka;
  CHECK(k.topic == "ev");  // set, empty: taken as it is
  CHECK(k.settings.at("linger.ms") == "5");
  CHECK(k.settings.at("client.id") == "cdflt");  // :- takes the default for empty too
  auto bad = load(std::string{one_target} + R"toml(
[events.kafka]
brokers = "127.0.0.1:9092"
topic = "ev"

[events.kafka.settings]
"sasl.password" = "${FLOTILLA_TEST_UNSET}"
)toml");
  expect(bad, errc::environment_variable, "events.kafka.settings.\"sasl.password\"");
  ::unsetenv("FLOTILLA_TEST_LINGER");
  ::unsetenv("FLOTILLA_TEST_EMPTY");
}

TEST_CASE("${VAR} in a list's entries is expanded too; unset, FLT-C024 names the entry") {
  ::setenv("FLOTILLA_TEST_TABLE", "orders", 1);
  ::unsetenv("FLOTILLA_TEST_UNSET");
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
include = ["${FLOTILLA_TEST_TABLE}", "${FLOTILLA_TEST_UNSET:-customers}"]
exclude = "tmp_${FLOTILLA_TEST_TABLE}"
)toml");
  INFO(all_messages(r));
  REQUIRE(r.diagnostics.empty());
  CHECK(r.model->sources[0].include == std::vector<std::string>{"orders", "customers"});
  CHECK(r.model->sources[0].exclude == std::vector<std::string>{"tmp_orders"});
  auto bad = load(std::string{one_target} +
                  "[sources.shop]\nadapter = \"sqlite\"\npath = \"s.db\"\n"
                  "include = [\"a\", \"${FLOTILLA_TEST_UNSET}\"]\n");
  const auto& d = expect(bad, errc::environment_variable, "sources.shop.include[1]");
  CHECK(d.message.find("FLOTILLA_TEST_UNSET") != std::string::npos);
  // Placeholders do not nest: said, not taken for text.
  auto nested = load(std::string{one_target} +
                     "[sources.shop]\nadapter = \"sqlite\"\npath = \"s.db\"\n"
                     "include = [\"${FLOTILLA_TEST_UNSET:-${FLOTILLA_TEST_TABLE:-x}}\"]\n");
  const auto& n = expect(nested, errc::environment_variable, "sources.shop.include[0]");
  CHECK(n.message.find("placeholders do not nest") != std::string::npos);
  ::unsetenv("FLOTILLA_TEST_TABLE");
}

TEST_CASE("database or catalog on an executed target is FLT-C013; postgresql names the adapter") {
  for (const char* dialect : {"duckdb", "sqlite"}) {
    auto r = load(fmt::format("[targets.t]\ndialect = \"{}\"\npath = \"w.db\"\ncatalog = \"x\"\n",
                              dialect));
    REQUIRE(r.diagnostics.size() == 1);
    CHECK(r.diagnostics[0].code == errc::not_applicable);
    CHECK(r.diagnostics[0].key == "targets.t.catalog");
  }
  auto pg = load("[targets.t]\ndialect = \"postgres\"\ndsn = \"postgresql://h/db\"\ndatabase = \"x\"\n"
                 "[sources.s]\nadapter = \"postgresql\"\ndsn = \"postgresql://h/src\"\n");
  REQUIRE(pg.diagnostics.size() == 1);
  CHECK(pg.diagnostics[0].key == "targets.t.database");
  CHECK(pg.model->sources[0].adapter == adapter_kind::postgres);
}

TEST_CASE("database and catalog together are FLT-C015") {
  auto r = load("[targets.t]\ndialect = \"trino\"\ndatabase = \"a\"\ncatalog = \"b\"\n");
  expect(r, errc::conflicting_keys, "targets.t.catalog");
}

TEST_CASE("an unknown grant is FLT-C016 with a suggestion") {
  auto r = load("[policy]\ngrants = [\"schema_change.additive\", \"schema_change.additve\"]\n");
  const auto& d = expect(r, errc::unknown_grant, "policy.grants[1]");
  CHECK(d.message.find("did you mean 'schema_change.additive'?") != std::string::npos);
  CHECK(r.model->governance.grants == std::vector<std::string>{"schema_change.additive"});
}

TEST_CASE("an enforced contract without columns is FLT-C017, also when inherited") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
contract = "enforced"

[sources.shop.tables.orders]
cursor_column = "updated_at"
)toml");
  const auto& d = expect(r, errc::contract_without_columns, "sources.shop.tables.orders.columns");
  CHECK(d.message.find("from the source") != std::string::npos);

  // A column declared with a bad type is reported as that (FLT-C008), not as none declared.
  auto typo = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
contract = "enforced"

[sources.shop.tables.orders]
columns = { total = "decimall(18,2)" }
)toml");
  expect(typo, errc::invalid_column_type, "sources.shop.tables.orders.columns.total");
  CHECK(find_code(typo, errc::contract_without_columns) == nullptr);
}

TEST_CASE("an enforced table's cursor and key columns must be declared: FLT-C018") {
  const std::string text = std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"

[sources.shop.tables.orders]
contract = "enforced"
cursor_column = "updated_at"
unique_key = ["ID", "tenant"]
columns = { id = "bigint", total = "decimal(18,2)" }
)toml";
  auto r = load(text);
  INFO(all_messages(r));
  CHECK(count_code(r, errc::undeclared_column) == 2);
  const auto& d = expect(r, errc::undeclared_column, "sources.shop.tables.orders.cursor_column");
  // The line of the key, not the section header.
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  REQUIRE(d.line >= 1);
  REQUIRE(d.line <= lines.size());
  CHECK(lines[d.line - 1].starts_with("cursor_column"));
}

TEST_CASE("duplicate columns and duplicate sections are FLT-C019") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"

[sources.shop.tables.orders]
columns = { id = "int", ID = "bigint" }
unique_key = ["id", "id"]

[sources.shop.tables.Orders]

[sources.shop.tables.lines]
unique_key = ["id", "ID"]
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::duplicate_name) == 4);
  CHECK(all_messages(r).find("column 'ID' is listed twice (also as 'id'") != std::string::npos);
}

TEST_CASE("a column declared with an empty name is FLT-C012; a name twice is FLT-C019 even "
          "beside a type refused") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"

[sources.shop.tables.orders]
columns = { amt = "decimal(10,2)", "" = "int" }

[sources.shop.tables.lines]
columns = { id = "integr", ID = "int" }
)toml");
  INFO(all_messages(r));
  const auto& empty = expect(r, errc::out_of_range, "sources.shop.tables.orders.columns.\"\"");
  CHECK(empty.message.find("empty name") != std::string::npos);
  CHECK(count_code(r, errc::invalid_column_type) == 1);
  CHECK(count_code(r, errc::duplicate_name) == 1);
  CHECK(all_messages(r).find("column 'ID' is declared twice (also as 'id')") != std::string::npos);
}

TEST_CASE("an exclude pattern that removes a sectioned table is a FLT-C022 warning") {
  const std::string text = std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"
exclude = ["tmp_*"]

[sources.shop.tables.tmp_orders]
)toml";
  auto line_of = [&](std::string_view what) {
    const auto at = text.find(what);
    REQUIRE(at != std::string::npos);
    return static_cast<std::uint32_t>(std::count(text.begin(), text.begin() + at, '\n') + 1);
  };
  auto r = load(text);
  const auto& d = expect(r, errc::excluded_section, "sources.shop.exclude");
  CHECK(d.level == severity::warning);
  CHECK(r.ok());
  // Where the key it names is (not the section header), and the section's line is said.
  CHECK(d.line == line_of("exclude = "));
  CHECK(d.message.find("(line " + std::to_string(line_of("[sources.shop.tables")) + ")") !=
        std::string::npos);
}

TEST_CASE("on_source_drift on a table section that declares columns under an enforced contract "
          "is a FLT-C026 warning; on one without, under contract none, or ignore, nothing") {
  const std::string text = std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"

[sources.shop.tables.orders]
on_source_drift = "warn"
contract = "enforced"
columns = { amt = "decimal(12,2)" }

[sources.shop.tables.items]
on_source_drift = "fail"

[sources.shop.tables.pinned]
on_source_drift = "fail"
columns = { amt = "decimal(12,2)" }

[sources.shop.tables.lines]
on_source_drift = "ignore"
columns = { id = "int" }
)toml";
  auto r = load(text);
  const auto& d =
      expect(r, errc::gate_on_declared_table, "sources.shop.tables.orders.on_source_drift");
  CHECK(d.level == severity::warning);
  CHECK(r.ok());
  CHECK_THAT(d.message, Catch::Contains("has no effect on table 'orders'") &&
                            Catch::Contains("declares its columns"));
  // At the key itself, one line below the section header.
  std::size_t header = 0, key = 0, line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 28, "[sources.shop.tables.orders]") == 0)
      header = line;
    if (header != 0 && key == 0 && text.compare(i, 15, "on_source_drift") == 0)
      key = line;
    line += text[i] == '\n' ? 1 : 0;
  }
  REQUIRE(key == header + 1);
  CHECK(d.line == key);
  std::size_t warned = 0;
  for (const auto& x : r.diagnostics)
    warned += x.code == errc::gate_on_declared_table ? 1 : 0;
  CHECK(warned == 1);
}

TEST_CASE("on_schema_change on a table section under an enforced contract is a FLT-C027 "
          "warning; under contract none, nothing") {
  auto r = load(std::string{one_target} + R"toml(
[sources.shop]
adapter = "sqlite"
path = "s.db"

[sources.shop.tables.orders]
contract = "enforced"
on_schema_change = "fail"
columns = { amt = "decimal(12,2)" }

[sources.shop.tables.pinned]
on_schema_change = "fail"
columns = { amt = "decimal(12,2)" }
)toml");
  const auto& d =
      expect(r, errc::new_columns_under_contract, "sources.shop.tables.orders.on_schema_change");
  CHECK(d.level == severity::warning);
  CHECK(r.ok());
  CHECK_THAT(d.message, Catch::Contains("has no effect on table 'orders'"));
  std::size_t warned = 0;
  for (const auto& x : r.diagnostics)
    warned += x.code == errc::new_columns_under_contract ? 1 : 0;
  CHECK(warned == 1);
}

TEST_CASE("several errors in one file are all reported, in file order") {
  auto r = load(R"toml(
[project]
nmae = "x"

[targets.wh]
dialect = "duckdb"
path = "w.duckdb"

[sources.a]
adapter = "oracle"
path = "a"
batch_rows = "many"

[sources.a.tables.orders]
columns = { total = "money" }

[io]
max_connections_per_endpoint = 0
)toml");
  INFO(all_messages(r));
  REQUIRE(r.diagnostics.size() == 5);
  CHECK(r.diagnostics[0].code == errc::unknown_key);
  CHECK(r.diagnostics[0].key == "project.nmae");
  CHECK(r.diagnostics[1].code == errc::invalid_value);
  CHECK(r.diagnostics[1].key == "sources.a.adapter");
  CHECK(r.diagnostics[2].code == errc::wrong_type);
  CHECK(r.diagnostics[2].key == "sources.a.batch_rows");
  CHECK(r.diagnostics[3].code == errc::invalid_column_type);
  CHECK(r.diagnostics[3].key == "sources.a.tables.orders.columns.total");
  CHECK(r.diagnostics[4].code == errc::out_of_range);
  CHECK(r.diagnostics[4].key == "io.max_connections_per_endpoint");
  for (std::size_t i = 1; i < r.diagnostics.size(); ++i)
    CHECK(r.diagnostics[i - 1].line < r.diagnostics[i].line);
}

TEST_CASE("a bad on_source_drift is FLT-C011 and the model loads with ignore") {
  auto r = load(std::string{one_target} + R"toml(
[project]
on_source_drift = "banana"

[sources.shop]
adapter = "sqlite"
path = "s.db"
on_source_drift = true
batch_rows = -5
)toml");
  INFO(all_messages(r));
  REQUIRE(count_code(r, errc::invalid_source_drift) == 2);
  const auto& d = expect(r, errc::invalid_source_drift, "project.on_source_drift");
  CHECK(d.value == "banana");
  CHECK(d.message.find("banana") != std::string::npos);
  CHECK(d.message.find(file) != std::string::npos);
  CHECK(d.allowed == "ignore, warn, fail");
  // The rest of the file is still validated.
  CHECK(find_code(r, errc::out_of_range) != nullptr);
  // The policy is treated as ignore, and everything else loaded.
  CHECK(r.model->policy.on_source_drift == drift_policy::ignore);
  REQUIRE(r.model->sources.size() == 1);
  CHECK(r.model->sources[0].policy.on_source_drift == drift_policy::ignore);
  CHECK(r.model->sources[0].path == "/w/s.db");
  CHECK_FALSE(r.ok());
  // A shortened value names the one it begins.
  auto shortened = load(std::string{one_target} + "[project]\non_schema_change = \"append\"\n");
  INFO(all_messages(shortened));
  CHECK(all_messages(shortened).find("did you mean 'append_new_columns'?") != std::string::npos);
  // ... with a typo in it too.
  auto misspelt = load(std::string{one_target} + "[project]\non_schema_change = \"apend\"\n");
  INFO(all_messages(misspelt));
  CHECK(all_messages(misspelt).find("did you mean 'append_new_columns'?") != std::string::npos);
  // A near miss is named, as other values' are.
  auto near = load(std::string{one_target} + "[project]\non_source_drift = \"Warn\"\n");
  INFO(all_messages(near));
  CHECK(expect(near, errc::invalid_source_drift, "project.on_source_drift")
            .message.find("did you mean 'warn'?") != std::string::npos);
}

TEST_CASE("a diagnostic prints as file:line:column, code, key, message and allowed values") {
  auto r = load(std::string{one_target} + "[sources.s]\nadapter = \"sqllite\"\npath = \"x\"\n");
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(format(r.diagnostics[0]) ==
        "/w/flotilla.toml:6:11: error FLT-C005: sources.s.adapter: unknown adapter 'sqllite'; did "
        "you mean 'sqlite'? (allowed: sqlite, duckdb, postgres, csv, json)");
}

TEST_CASE("a duckdb target whose path names a CSV Parquet or JSON file is refused") {
  for (const std::string path : {"wh.csv", "out/WH.Parquet", "events.ndjson.gz", "t.json"}) {
    auto r = load(fmt::format(R"toml(
[targets.wh]
dialect = "duckdb"
path = "{}"
)toml", path));
    INFO(path);
    const auto& d = expect(r, errc::invalid_value, "targets.wh.path");
    CHECK(d.value == path);
    CHECK(d.message.find("in-memory") != std::string::npos);
    CHECK(d.message.find("warehouse.duckdb") != std::string::npos);
  }
  for (const std::string path : {"wh.duckdb", "wh.db", "csv", "data.csv.duckdb"}) {
    auto r = load(fmt::format(R"toml(
[targets.wh]
dialect = "duckdb"
path = "{}"
)toml", path));
    INFO(all_messages(r));
    CHECK(find_code(r, errc::invalid_value) == nullptr);
  }
  // A SQLite target's file is opened as a database whatever its name.
  auto r = load("[targets.wh]\ndialect = \"sqlite\"\npath = \"wh.csv\"\n");
  CHECK(find_code(r, errc::invalid_value) == nullptr);
}

TEST_CASE("a dsn with an '@' not percent-encoded in its password is FLT-C005, never echoed") {
  auto r = load(R"toml(
[targets.wh]
dialect = "postgres"
dsn = "postgresql://u:pa@ss@127.0.0.1:5432/wh"

[sources.pg]
adapter = "postgres"
dsn = "postgresql://postgres:Hunter2@Secret@127.0.0.1:5432/src"
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::invalid_value) == 2);
  CHECK(all_messages(r).find("FLT-C005: targets.wh.dsn: the dsn holds '@' more than once") !=
        std::string::npos);
  CHECK(all_messages(r).find("FLT-C005: sources.pg.dsn: the dsn holds '@' more than once") !=
        std::string::npos);
  CHECK(all_messages(r).find("%40") != std::string::npos);
  CHECK(all_messages(r).find("Secret") == std::string::npos);
  CHECK(all_messages(r).find("ss@127") == std::string::npos);
  // Encoded, and '@' in the path or query part, it loads.
  auto ok = load(R"toml(
[targets.wh]
dialect = "postgres"
dsn = "postgresql://u:pa%40ss@127.0.0.1:5432/wh?application_name=a@b"

[sources.pg]
adapter = "postgres"
dsn = "host=127.0.0.1 password=p@ss@x dbname=src"
)toml");
  INFO(all_messages(ok));
  CHECK(count_code(ok, errc::invalid_value) == 0);
}

TEST_CASE("a Pub/Sub topic id the service refuses is FLT-C005 when the file is read") {
  for (const std::string& topic :
       std::vector<std::string>{"ab", "1abc", "goog-events", "GOOGle", "has space", "a\u00e9bc",
                                std::string(256, 't')}) {
    INFO(topic);
    auto r = load(std::string{one_target} + "[events.pubsub]\nproject = \"demo\"\n"
                                            "topic = \"" + topic + "\"\n");
    INFO(all_messages(r));
    expect(r, errc::invalid_value, "events.pubsub.topic");
    CHECK(all_messages(r).find("does not start with 'goog'") != std::string::npos);
  }
  auto ok = load(std::string{one_target} + "[events.pubsub]\nproject = \"demo\"\n"
                                           "topic = \"acme.events_v-2~x+y%z\"\n");
  INFO(all_messages(ok));
  CHECK(ok.diagnostics.empty());
}

TEST_CASE("a Pub/Sub emulator_host that is not host:port is FLT-C005 when the file is read") {
  for (const std::string host : {"127.0.0.1:18773/", "127.0.0.1:18773/v1", "127.0.0.1:99999",
                                 "127.0.0.1", "127.0.0.1:8085 ", "http://127.0.0.1:8085"}) {
    INFO(host);
    auto r = load(std::string{one_target} + "[events.pubsub]\nproject = \"demo\"\n"
                                            "topic = \"events\"\nemulator_host = \"" + host + "\"\n");
    INFO(all_messages(r));
    expect(r, errc::invalid_value, "events.pubsub.emulator_host");
    CHECK(all_messages(r).find("host:port") != std::string::npos);
  }
  for (const std::string host : {"127.0.0.1:8085", "localhost:18001", "[::1]:8085"}) {
    auto ok = load(std::string{one_target} + "[events.pubsub]\nproject = \"demo\"\n"
                                             "topic = \"events\"\nemulator_host = \"" + host + "\"\n");
    INFO(host << ": " << all_messages(ok));
    CHECK(ok.diagnostics.empty());
  }
}

TEST_CASE("a Pub/Sub project id with characters no id has is FLT-C005 when the file is read") {
  for (const std::string project : {"bad project!", "My-Project"}) {
    INFO(project);
    auto r = load(std::string{one_target} + "[events.pubsub]\nproject = \"" + project +
                  "\"\ntopic = \"events\"\n");
    expect(r, errc::invalid_value, "events.pubsub.project");
  }
  auto ok = load(std::string{one_target} +
                 "[events.pubsub]\nproject = \"example.com:acme-prod-1\"\ntopic = \"events\"\n");
  INFO(all_messages(ok));
  CHECK(ok.diagnostics.empty());
}

TEST_CASE("a Kafka topic name Kafka refuses is FLT-C005 when the file is read") {
  for (const std::string& topic : std::vector<std::string>{"has space", "a/b", std::string(250, 't'), ".."}) {
    INFO(topic);
    auto r = load(std::string{one_target} + "[events.kafka]\nbrokers = \"127.0.0.1:9092\"\n"
                                            "topic = \"" + topic + "\"\n");
    INFO(all_messages(r));
    CHECK(all_messages(r).find("FLT-C005: events.kafka.topic") != std::string::npos);
  }
  auto ok = load(std::string{one_target} +
                 "[events.kafka]\nbrokers = \"127.0.0.1:9092\"\ntopic = \"acme.events_v-2\"\n");
  INFO(all_messages(ok));
  CHECK(ok.diagnostics.empty());
}

TEST_CASE("a Kafka broker address librdkafka cannot parse is FLT-C005 when the file is read") {
  for (const std::string& brokers :
       std::vector<std::string>{"kafka://127.0.0.1:9092", "h:99999", "a,,b", "h:", "h:x"}) {
    INFO(brokers);
    auto r = load(std::string{one_target} + "[events.kafka]\nbrokers = \"" + brokers +
                  "\"\ntopic = \"t\"\n");
    INFO(all_messages(r));
    CHECK(all_messages(r).find("FLT-C005: events.kafka.brokers") != std::string::npos);
  }
  for (const std::string& brokers : std::vector<std::string>{
           "127.0.0.1:9092", "PLAINTEXT://h1:9092,h2", "[::1]:9092", "sasl_ssl://k.example:9093"}) {
    INFO(brokers);
    auto ok = load(std::string{one_target} + "[events.kafka]\nbrokers = \"" + brokers +
                   "\"\ntopic = \"t\"\n");
    INFO(all_messages(ok));
    CHECK(ok.diagnostics.empty());
  }
}

TEST_CASE("a DSN's password is not repeated in a diagnostic") {
  const auto r = load(R"(
[targets.wh]
dialect = "duckdb"
path = "w.duckdb"
dsn = "postgresql://u:TopSecret1@h/db?sslpassword=KeySecret4&sslmode=require"

[targets.pg]
dialect = "postgres"
dsn = ["postgresql://u:ArrSecret@h/db"]

[sources.a]
adapter = "sqlite"
path = "a.db"
dsn = "host=h password='Top Secret3' dbname=x"
target = "wh"
)");
  const std::string all = all_messages(r);
  INFO(all);
  std::string values;
  for (const auto& d : r.diagnostics)
    values += d.value + "\n" + format(d) + "\n";
  INFO(values);
  CHECK(values.find("Secret") == std::string::npos);
  CHECK(all.find("Secret") == std::string::npos);
  CHECK(values.find("postgresql://u:***@h/db") != std::string::npos);
  CHECK(values.find("password=*** dbname=x") != std::string::npos);
  CHECK(values.find("sslpassword=***&sslmode=require") != std::string::npos);
}

TEST_CASE("an empty unique_key is refused, not read as no key") {
  auto r = load(std::string{one_target} + R"toml(
[sources.a]
adapter = "sqlite"
path = "a.db"
[sources.a.tables.t1]
cursor_column = "id"
unique_key = []
)toml");
  INFO(all_messages(r));
  CHECK(count_code(r, errc::out_of_range) == 1);
  CHECK(all_messages(r).find("sources.a.tables.t1.unique_key: 'unique_key' must name at least "
                             "one column") != std::string::npos);
}

TEST_CASE("two targets of different engines on one database file are refused, naming both") {
  auto r = load(R"toml(
[targets.duck]
dialect = "duckdb"
path = "wh.db"
[targets.again]
dialect = "duckdb"
path = "wh.db"
[targets.lite]
dialect = "sqlite"
path = "./sub/../wh.db"
)toml");
  const auto& d = expect(r, errc::invalid_value, "targets.lite.path");
  CHECK_THAT(d.message, Catch::Contains("target 'lite' (sqlite) and target 'duck' (duckdb) name "
                                        "the same file"));
  // Of one engine, the same file is one target (docs/configuration.md): not refused.
  CHECK(count_code(r, errc::invalid_value) == 1);
}
