// flotilla: the command line. One file per verb; main only wires them.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "cli/verbs.hpp"
#include "engine/heap.hpp"

int main(int argc, char** argv) {
  flotilla::engine::prepare_process_heap();
  using namespace flotilla::cli;
  CLI::App app{"flotilla: replicate tables from fleets of sources into warehouses and event "
               "streams, handling schema drift"};
  app.require_subcommand(1);
  global_options g;
  app.add_option("-c,--config", g.config_path, "path of flotilla.toml")
      ->capture_default_str();
  std::vector<verb> verbs = all_verbs();
  for (auto& v : verbs)
    v.add(app, g);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2, as the contract says
  }
  for (auto& v : verbs)
    if (v.selected())
      return v.run();
  return 2;
}
