// flotilla: the command line. One file per verb; main only wires them.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "cli/verbs.hpp"
#include "config/errc.hpp"
#include "engine/heap.hpp"

namespace {

/// The deepest subcommand the command line selected (the app itself when none).
CLI::App* selected_command(CLI::App& app) {
  CLI::App* at = &app;
  while (!at->get_subcommands().empty())
    at = at->get_subcommands().front();
  return at;
}

std::string command_path(const CLI::App* at, const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = at; a != nullptr && a != &app; a = a->get_parent())
    path = a->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

/// "did you mean" for words the command line did not expect: an unknown flag gets the
/// selected command's nearest flag, an unknown command the nearest command.
std::string hints_for_extras(CLI::App& app, const std::vector<std::string>& extras) {
  CLI::App* at = selected_command(app);
  std::vector<std::string> flags;
  for (const CLI::App* a = at; a != nullptr; a = a->get_parent())
    for (const CLI::Option* o : a->get_options()) {
      for (const auto& l : o->get_lnames())
        flags.push_back("--" + l);
      for (const auto& s : o->get_snames())
        flags.push_back("-" + s);
    }
  std::vector<std::string_view> candidates(flags.begin(), flags.end());
  std::string out;
  bool value_of_flag = false;  // the word after an unknown flag: that flag's value
  for (const auto& x : extras) {
    const bool after_flag = std::exchange(value_of_flag, false);
    if (!x.starts_with("-")) {
      if (after_flag)
        continue;
      // A word where the command takes none: a source or table to select, most likely.
      const std::string cmd = command_path(at, app);
      const bool selects = cmd == "run" || cmd == "plan" || cmd == "stream";
      out += fmt::format("flotilla {} takes no argument '{}'{}\n", cmd, x,
                         selects ? fmt::format("; to select a source or table, use --filter "
                                               "source={} or --filter table={}",
                                               x, x)
                                 : std::string());
      continue;
    }
    const std::string word = x.substr(0, x.find('='));
    value_of_flag = x.find('=') == std::string::npos;
    std::string near;
    if (word.size() == 2 && word[1] != '-') {
      // A one-letter flag the command lacks: a long flag of that letter, if just one (`-o`
      // for --output); spelling distance between one-letter names means nothing.
      std::vector<std::string_view> of_letter;
      for (const auto& f : flags)
        if (f.size() > 3 && f.starts_with("--") && f[2] == word[1] &&
            std::find(of_letter.begin(), of_letter.end(), f) == of_letter.end())
          of_letter.push_back(f);
      if (of_letter.size() == 1)
        near = of_letter.front();
    } else {
      near = flotilla::config::nearest(word, candidates);
    }
    const std::string where =
        at == &app ? std::string("flotilla") : "flotilla " + command_path(at, app);
    if (near == word)  // the command's own flag, given before the command
      out += fmt::format("flag '{}' goes after the command: {} {} ...\n", word, where, word);
    else if (!near.empty())
      out += fmt::format("unknown flag '{}' for '{}'; did you mean '{}'?\n", word, where, near);
    else
      out += fmt::format("unknown flag '{}' for '{}'; see flotilla {} --help for its flags\n",
                         word, where, command_path(at, app));
  }
  return out;
}

}  // namespace

namespace {

/// Raises the soft limit of open files to the hard one (at most 65,536): a fleet run opens
/// a file or connection per source it reads at once, a database file, state and run
/// records, and the usual soft limit of 1,024 is a default, not a policy.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return;
  const rlim_t wanted = std::min<rlim_t>(limit.rlim_max, 65536);
  if (limit.rlim_cur < wanted) {
    limit.rlim_cur = wanted;
    setrlimit(RLIMIT_NOFILE, &limit);  // best effort: the old limit stays otherwise
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that closed the pipe (`flotilla run | head -1`): the write fails with EPIPE,
  // which the report's check below says (exit 1), rather than a silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  flotilla::engine::prepare_process_heap();
  raise_open_file_limit();
  using namespace flotilla::cli;
  CLI::App app{"flotilla: replicate tables from fleets of sources into warehouses and event "
               "streams, handling schema drift"};
  app.require_subcommand(1);
  app.set_version_flag("--version,-V", "flotilla " FLOTILLA_VERSION);
  // -c may also follow the command (`flotilla plan -c f.toml`): subcommands hand the
  // options they do not know to the top level.
  app.fallthrough();
  global_options g;
  app.add_option("-c,--config", g.config_path, "path of flotilla.toml")
      ->capture_default_str();
  std::vector<verb> verbs = all_verbs();
  for (auto& v : verbs)
    v.add(app, g);
  // `flotilla help [command ...]`, as git and cargo take it: the command's --help.
  std::vector<char*> args(argv, argv + argc);
  static char help_flag[] = "--help";
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "-c" || a == "--config") {
      ++i;  // its value
      continue;
    }
    if (a.starts_with("-"))
      continue;
    if (a == "help") {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      args.push_back(help_flag);
      argc = static_cast<int>(args.size());
      argv = args.data();
    }
    break;
  }
  // `--output json` (or --output=json) on the command line: a refusal before the command
  // ran still prints a JSON document on stdout (cli/verbs.hpp, note_refusal).
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    json |= a == "--output=json" || (a == "--output" && i + 1 < argc &&
                                     std::string_view(argv[i + 1]) == "json");
  }
  // A usage error (a misspelled flag or command) with --output json: the JSON document
  // too, its message the one stderr has.
  const auto usage_error = [&](const std::string& message) {
    fmt::print(stderr, "{}", message);
    if (json) {
      // One line for a machine: the terminal's closing "Run with --help ..." left out,
      // several hints joined with "; ".
      std::string text;
      std::size_t from = 0;
      while (from < message.size()) {
        const auto nl = message.find('\n', from);
        const auto line = message.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
        from = nl == std::string::npos ? message.size() : nl + 1;
        if (line.empty() || line.starts_with("Run with --help"))
          continue;
        text += (text.empty() ? "" : "; ") + line;
      }
      note_refusal("", text);
      (void)print_refusals_json();
    }
    return 2;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A word that is no command: name it, the nearest command and the commands there
    // are, rather than CLI11's "A subcommand is required" (or, with --help after it, the
    // help of the command above it, exit 0).
    const bool help_of_unknown = [&] {
      if (dynamic_cast<const CLI::CallForHelp*>(&e) == nullptr)
        return false;
      const CLI::App* at = selected_command(app);
      const auto extra = app.remaining(true);
      return !extra.empty() && !extra.front().starts_with("-") &&
             !at->get_subcommands({}).empty();
    }();
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr || help_of_unknown) {
      CLI::App* at = selected_command(app);
      const auto extra = app.remaining(true);  // with fallthrough the top level holds them
      if (!extra.empty() && !extra.front().starts_with("-")) {
        std::vector<std::string> names;
        for (const auto* sub : at->get_subcommands({}))
          names.push_back(sub->get_name());
        std::vector<std::string_view> candidates(names.begin(), names.end());
        const std::string near = flotilla::config::nearest(extra.front(), candidates);
        std::string list;
        for (const auto& n : names)
          list += (list.empty() ? "" : ", ") + n;
        return usage_error(fmt::format(
            "unknown command '{}'{}; {}use one of: {}\nRun with --help for more information.\n",
            extra.front(), at == &app ? "" : fmt::format(" for '{}'", at->get_name()),
            near.empty() ? "" : fmt::format("did you mean '{}'? ", near), list));
      }
      if (extra.empty()) {
        std::string list;
        for (const auto* sub : at->get_subcommands({}))
          list += (list.empty() ? "" : ", ") + sub->get_name();
        return usage_error(fmt::format(
            "{} needs a command: {}\nRun with --help for more information.\n",
            at == &app ? std::string("flotilla") : "flotilla " + command_path(at, app), list));
      }
    }
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      const std::string hints = hints_for_extras(app, app.remaining(true));
      if (!hints.empty())
        return usage_error(fmt::format("{}Run with --help for more information.\n", hints));
    }
    if (e.get_exit_code() != 0 && json)
      return usage_error(fmt::format("{}\nRun with --help for more information.\n", e.what()));
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2, as the contract says
  }
  for (auto& v : verbs)
    if (v.selected()) {
      int rc = 1;
      try {
        rc = v.run();
      } catch (const std::system_error&) {
        // fmt's print throws when stdout refuses a write (a closed pipe): said below.
        if (std::ferror(stdout) == 0)
          throw;
      }
      if (rc == 2 && json)
        (void)print_refusals_json();
      // The report is the command's result: one that could not be written (a full disk,
      // a closed stdout) is not a success, whatever the command did.
      if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
        fmt::print(stderr, "error: the command's output could not be written to standard "
                           "output ({}); what it did is in its run record (.flotilla/runs) "
                           "where it keeps one\n",
                   std::strerror(errno != 0 ? errno : EIO));
        rc = rc == 0 ? 1 : rc;
      }
      return rc;
    }
  return 2;
}
