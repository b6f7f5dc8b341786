// engine::target_catalog: target table schemas read a schema at a time, each handed out
// once, against a warehouse that counts its describes.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

#include "dialects/dialect.hpp"
#include "engine/copy.hpp"
#include "engine/target_catalog.hpp"

using namespace flotilla;

namespace {

schema::table_schema one_column(const char* type) {
  return schema::table_schema{{schema::column{"id", *schema::parse_type(type)}}};
}

/// Tables by "schema.name"; a table whose value is an error cannot be described.
class counting_warehouse final : public sinks::warehouse {
 public:
  explicit counting_warehouse(bool batched) : batched_(batched) {}

  std::map<std::string, std::expected<schema::table_schema, std::string>> tables;
  int describes = 0;
  int batch_reads = 0;
  bool fail_batches = false;

  const dialects::dialect& dialect() const override { return *dialect_; }
  std::optional<schema::table_schema> describe(const dialects::table_ref& t) override {
    ++describes;
    auto it = tables.find(t.schema + "." + t.name);
    if (it == tables.end())
      return std::nullopt;
    if (!it->second)
      throw sinks::sink_error(it->second.error());
    return *it->second;
  }
  std::optional<described_tables> describe_tables(const std::string&, const std::string& schema,
                                                  const std::vector<std::string>& names) override {
    if (!batched_)
      return std::nullopt;
    if (fail_batches)
      throw sinks::sink_error("connection lost");
    ++batch_reads;
    described_tables out;
    for (const auto& n : names)
      if (auto it = tables.find(schema + "." + n); it != tables.end())
        out.emplace(n, it->second);
    return out;
  }
  void execute(const std::vector<std::string>&) override {}
  std::unique_ptr<sinks::table_writer> begin_load(const sinks::load_request&) override {
    return nullptr;
  }
  std::optional<std::string> committed_token(const dialects::table_ref&) override {
    return std::nullopt;
  }

 private:
  bool batched_;
  std::unique_ptr<dialects::dialect> dialect_ = *dialects::make_dialect("postgres");
};

dialects::table_ref ref(const std::string& schema, const std::string& name) {
  return {"", schema, name};
}

}  // namespace

TEST_CASE("the registered tables of a schema are described by one query, each handed out once") {
  counting_warehouse wh(true);
  for (int i = 0; i < 10; ++i)
    wh.tables.emplace("s.t" + std::to_string(i), one_column(i == 3 ? "bigint" : "int"));
  engine::target_catalog cat;
  for (int i = 0; i < 12; ++i)  // t10 and t11 do not exist
    cat.expect(ref("s", "t" + std::to_string(i)));

  for (int i = 0; i < 12; ++i) {
    const auto got = cat.describe(wh, ref("s", "t" + std::to_string(i)));
    if (i < 10) {
      REQUIRE(got);
      CHECK(*got == one_column(i == 3 ? "bigint" : "int"));
    } else {
      CHECK_FALSE(got);
    }
  }
  CHECK(wh.batch_reads == 1);
  CHECK(wh.describes == 0);
  CHECK(cat.schema_reads() == 1);

  // Asked again (the run changed it since): described live.
  wh.tables["s.t3"] = one_column("text");
  const auto again = cat.describe(wh, ref("s", "t3"));
  REQUIRE(again);
  CHECK(*again == one_column("text"));
  CHECK(wh.describes == 1);
  // Not registered: described live.
  CHECK_FALSE(cat.describe(wh, ref("other", "x")));
  CHECK(wh.describes == 2);
}

TEST_CASE("a table whose type cannot be mapped fails alone, as its own describe would") {
  counting_warehouse wh(true);
  for (int i = 0; i < 5; ++i)
    wh.tables.emplace("s.t" + std::to_string(i), one_column("int"));
  wh.tables["s.t2"] = std::unexpected(std::string("s.t2: column 'g' has type geometry"));
  engine::target_catalog cat;
  for (int i = 0; i < 5; ++i)
    cat.expect(ref("s", "t" + std::to_string(i)));
  CHECK(cat.describe(wh, ref("s", "t1")));
  CHECK_THROWS_WITH(cat.describe(wh, ref("s", "t2")), Catch::Contains("geometry"));
  CHECK(cat.describe(wh, ref("s", "t4")));
  CHECK(wh.batch_reads == 1);
  CHECK(wh.describes == 0);
}

TEST_CASE("tables registered after the schema was read are read with the rest still pending") {
  counting_warehouse wh(true);
  for (int i = 0; i < 10; ++i)
    wh.tables.emplace("s.t" + std::to_string(i), one_column("int"));
  engine::target_catalog cat;
  for (int i = 0; i < 5; ++i)
    cat.expect(ref("s", "t" + std::to_string(i)));
  CHECK(cat.describe(wh, ref("s", "t0")));
  for (int i = 5; i < 10; ++i)  // a second source's tables, same schema
    cat.expect(ref("s", "t" + std::to_string(i)));
  for (int i = 1; i < 10; ++i)
    CHECK(cat.describe(wh, ref("s", "t" + std::to_string(i))));
  CHECK(wh.batch_reads == 2);
  CHECK(wh.describes == 0);
}

TEST_CASE("engines without a schema query, small schemas and failed reads describe per table") {
  SECTION("no schema-wide query") {
    counting_warehouse wh(false);
    engine::target_catalog cat;
    for (int i = 0; i < 6; ++i) {
      wh.tables.emplace("s.t" + std::to_string(i), one_column("int"));
      cat.expect(ref("s", "t" + std::to_string(i)));
    }
    for (int i = 0; i < 6; ++i)
      CHECK(cat.describe(wh, ref("s", "t" + std::to_string(i))));
    CHECK(wh.describes == 6);
  }
  SECTION("fewer tables than min_batch") {
    counting_warehouse wh(true);
    engine::target_catalog cat;
    for (int i = 0; i < 3; ++i) {
      wh.tables.emplace("s.t" + std::to_string(i), one_column("int"));
      cat.expect(ref("s", "t" + std::to_string(i)));
    }
    for (int i = 0; i < 3; ++i)
      CHECK(cat.describe(wh, ref("s", "t" + std::to_string(i))));
    CHECK(wh.batch_reads == 0);
    CHECK(wh.describes == 3);
  }
  SECTION("the schema query fails") {
    counting_warehouse wh(true);
    wh.fail_batches = true;
    engine::target_catalog cat;
    for (int i = 0; i < 6; ++i) {
      wh.tables.emplace("s.t" + std::to_string(i), one_column("int"));
      cat.expect(ref("s", "t" + std::to_string(i)));
    }
    CHECK(cat.describe(wh, ref("s", "t0")));
    CHECK(wh.describes == 1);
    wh.fail_batches = false;  // the next ask tries the schema again
    for (int i = 1; i < 6; ++i)
      CHECK(cat.describe(wh, ref("s", "t" + std::to_string(i))));
    CHECK(wh.batch_reads == 1);
    CHECK(wh.describes == 1);
  }
}

TEST_CASE("a plan through the run's target catalog equals a plan against a live describe") {
  counting_warehouse wh(true);
  const schema::table_schema src{{schema::column{"id", *schema::parse_type("int")},
                                  schema::column{"note", *schema::parse_type("text")}}};
  engine::target_catalog cat;
  std::vector<engine::table_job> jobs;
  for (int i = 0; i < 8; ++i) {
    if (i % 2 == 0)
      wh.tables.emplace("s.t" + std::to_string(i), one_column("int"));
    engine::table_job job;
    job.source_name = "src";
    job.table.name = "t" + std::to_string(i);
    job.table.columns = src;
    job.target = ref("s", "t" + std::to_string(i));
    cat.expect(job.target);
    jobs.push_back(job);
  }
  for (auto& job : jobs) {
    const auto live = engine::plan_against_target(wh, job);
    job.target_tables = &cat;
    const auto read_ahead = engine::plan_against_target(wh, job);
    CHECK(read_ahead.shape_action == live.shape_action);
    CHECK(read_ahead.ddl == live.ddl);
    CHECK(read_ahead.drift.columns_to_add.size() == live.drift.columns_to_add.size());
  }
  CHECK(wh.batch_reads == 1);
  CHECK(wh.describes == 8);  // the live plans only
}
