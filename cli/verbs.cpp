#include "cli/verbs.hpp"

#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

namespace flotilla::cli {
namespace {

/// A verb whose issue has not landed: listed in --help, says so and exits 2.
verb pending(std::string name, std::string help) {
  auto sub = std::make_shared<CLI::App*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options&) {
        *sub = app.add_subcommand(name, help);
        (*sub)->allow_extras();
      },
      [=] { return *sub && (*sub)->parsed(); },
      [=] {
        fmt::print(stderr, "flotilla {}: not implemented yet\n", name);
        return 2;
      }};
}

}  // namespace

std::vector<verb> all_verbs() {
  return {
      plan_verb(),
      run_verb(),
      pending("stream", "change-data capture; runs until stopped"),
      contract_verb(),
      schema_verb(),
      pending("retry", "re-run the failed tables of the latest run"),
      pending("review", "review list | show | apply | edit | resync | remove (held changes)"),
      pending("bench", "run the benchmark harness"),
  };
}

}  // namespace flotilla::cli
