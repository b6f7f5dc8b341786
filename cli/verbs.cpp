#include "cli/verbs.hpp"

#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

namespace flotilla::cli {

verb pending_verb(std::string name, std::string help) {
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

std::vector<verb> all_verbs() {
  return {
      plan_verb(),
      run_verb(),
      stream_verb(),
      contract_verb(),
      schema_verb(),
      retry_verb(),
      review_verb(),
      bench_verb(),
  };
}

}  // namespace flotilla::cli
