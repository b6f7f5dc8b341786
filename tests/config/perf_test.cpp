// Load time of a large fleet configuration. Hidden from the default run (tag [.perf]):
// `test_config "[.perf]"` prints the figure; nothing here asserts a time.
#include <chrono>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "config/load.hpp"
#include "config/policy.hpp"
#include "config/selection.hpp"

using namespace flotilla::config;

namespace {

std::string fleet_config(int sources, int tables) {
  std::string out = R"toml([project]
name = "big-fleet"
on_source_drift = "warn"

[targets.warehouse]
dialect = "duckdb"
path = "warehouse.duckdb"
schema = "staging__{region}__{source}"
)toml";
  out.reserve(static_cast<std::size_t>(sources) * tables * 200);
  for (int s = 0; s < sources; ++s) {
    out += fmt::format(
        "\n[sources.shop_{0}]\nadapter = \"sqlite\"\npath = \"data/shop_{0}.db\"\n"
        "tags = {{ client = \"client_{0}\", region = \"{1}\" }}\nprune_unchanged = true\n"
        "exclude = [\"tmp_*\"]\n",
        s, s % 2 ? "us_west" : "eu");
    for (int t = 0; t < tables; ++t)
      out += fmt::format(
          "\n[sources.shop_{0}.tables.\"public.table_{1}\"]\ncursor_column = \"updated_at\"\n"
          "unique_key = [\"id\"]\ncolumns = {{ id = \"bigint\", total = \"decimal(18,2)\", "
          "note = \"varchar(200)\", updated_at = \"timestamp_tz\" }}\n",
          s, t);
  }
  return out;
}

}  // namespace

TEST_CASE("a fleet of 500 sources with 20 table sections each loads quickly", "[.perf]") {
  const std::string text = fleet_config(500, 20);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto r = load_project_text(text, "/srv/fleet/flotilla.toml");
  const auto t1 = clock::now();
  REQUIRE(r.ok());
  REQUIRE(r.model->sources.size() == 500);
  REQUIRE(r.model->sources[0].tables.size() == 20);
  // Selection and policy for every table, as a run would do them.
  std::vector<std::string> catalog;
  for (int t = 0; t < 20; ++t)
    catalog.push_back(fmt::format("public.table_{}", t));
  std::size_t selected = 0;
  for (const auto& s : r.model->sources)
    for (const auto& name : select_tables(s, catalog, {})) {
      selected += effective_policy(*r.model, s, name).prune_unchanged ? 1 : 0;
      (void)target_table(*r.model->target_of(s), s, name);
    }
  const auto t2 = clock::now();
  REQUIRE(selected == 10'000);
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("config of %zu bytes, 500 sources x 20 table sections: load+validate %.1f ms, "
              "select+policy+target of 10000 tables %.1f ms\n",
              text.size(), ms(t1 - t0), ms(t2 - t1));
}

TEST_CASE("one source with 5000 table sections selects and resolves quickly", "[.perf]") {
  std::string text = "[targets.wh]\ndialect = \"postgres\"\ndsn = \"postgresql://x\"\n\n"
                     "[sources.big]\nadapter = \"postgres\"\ndsn = \"postgresql://y\"\ninclude = []\n";
  std::vector<std::string> catalog;
  for (int t = 0; t < 5000; ++t) {
    text += fmt::format("\n[sources.big.tables.t{}]\nunique_key = \"id\"\n", t);
    catalog.push_back(fmt::format("public.t{}", t));
  }
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto r = load_project_text(text, "/srv/fleet/flotilla.toml");
  const auto t1 = clock::now();
  REQUIRE(r.ok());
  const auto& s = r.model->sources[0];
  const auto selected = select_tables(s, catalog, {});
  std::size_t with_key = 0;
  for (const auto& name : selected)
    with_key += find_table(s, name)->unique_key.size();
  const auto t2 = clock::now();
  REQUIRE(selected.size() == 5000);
  REQUIRE(with_key == 5000);
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("one source, 5000 sections: load %.1f ms, select+find 5000 tables %.1f ms\n",
              ms(t1 - t0), ms(t2 - t1));
}
