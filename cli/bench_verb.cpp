// `flotilla bench ...`: runs the benchmark harness, the `flotilla-bench` executable that is
// built and installed beside `flotilla` (docs/performance.md). Every argument after
// `bench` goes to it unchanged, `--help` included.
#include "cli/verbs.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

namespace flotilla::cli {

namespace {

/// Where the harness should be: beside the running executable.
std::filesystem::path bench_path() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    self = std::filesystem::current_path() / "flotilla";
  return self.parent_path() / "flotilla-bench";
}

int exec_bench(const std::vector<std::string>& args) {
  const auto path = bench_path();
  if (::access(path.c_str(), X_OK) != 0) {
    fmt::print(stderr,
               "flotilla bench: the benchmark harness was not found at {} ({}); build it with "
               "`ninja -C build flotilla-bench` (scripts/setup builds it)\n",
               path.string(), std::strerror(errno));
    return 2;
  }
  std::vector<char*> argv;
  const auto exe = path.string();
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(exe.c_str(), argv.data());
  fmt::print(stderr, "flotilla bench: cannot run {}: {}\n", exe, std::strerror(errno));
  return 2;
}

}  // namespace

verb bench_verb() {
  auto sub = std::make_shared<CLI::App*>(nullptr);
  return verb{
      [=](CLI::App& app, global_options&) {
        *sub = app.add_subcommand(
            "bench", "run the benchmark harness (flotilla-bench beside this executable; "
                     "`flotilla bench --help` lists its scenarios and flags)");
        // Everything after `bench` belongs to the harness, its --help too.
        (*sub)->set_help_flag();
        (*sub)->prefix_command();
        (*sub)->fallthrough(false);  // not even -c: the harness takes every flag itself
      },
      [=] { return *sub && (*sub)->parsed(); },
      [=] {
        // `-c FILE` may follow any command (README): the harness reads no flotilla.toml,
        // so it is taken out here, as `flotilla -c FILE bench` takes it before.
        std::vector<std::string> args;
        const auto rest = (*sub)->remaining();
        for (std::size_t i = 0; i < rest.size(); ++i) {
          if ((rest[i] == "-c" || rest[i] == "--config") && i + 1 < rest.size()) {
            ++i;
            continue;
          }
          if (rest[i].starts_with("--config=") || (rest[i].starts_with("-c") && rest[i].size() > 2))
            continue;
          args.push_back(rest[i]);
        }
        return exec_bench(args);
      }};
}

}  // namespace flotilla::cli
