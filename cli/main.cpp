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
    // A word that is no command: name it and the commands there are, rather than
    // CLI11's "A subcommand is required".
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      CLI::App* at = &app;
      while (!at->get_subcommands().empty())
        at = at->get_subcommands().front();
      const auto extra = at->remaining();
      if (!extra.empty() && !extra.front().starts_with("-")) {
        std::string names;
        for (const auto* sub : at->get_subcommands({}))
          names += (names.empty() ? "" : ", ") + sub->get_name();
        fmt::print(stderr, "unknown command '{}'{}; use one of: {}\nRun with --help for more "
                   "information.\n",
                   extra.front(), at == &app ? "" : fmt::format(" for '{}'", at->get_name()),
                   names);
        return 2;
      }
    }
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2, as the contract says
  }
  for (auto& v : verbs)
    if (v.selected())
      return v.run();
  return 2;
}
