#include "bench/measure.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

extern char** environ;

namespace flotilla::bench {

std::optional<nlohmann::json> child_result::result_line() const {
  std::size_t end = out.size();
  while (end > 0) {
    while (end > 0 && (out[end - 1] == '\n' || out[end - 1] == '\r'))
      --end;
    if (end == 0)
      break;
    std::size_t begin = out.rfind('\n', end - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    auto line = out.substr(begin, end - begin);
    if (!line.empty() && line.front() == '{') {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded())
        return j;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::string child_result::describe_failure() const {
  std::string tail = err.size() > 2000 ? "..." + err.substr(err.size() - 2000) : err;
  if (tail.empty())
    tail = out.size() > 1000 ? "..." + out.substr(out.size() - 1000) : out;
  return fmt::format("exit code {}: {}", exit_code, tail);
}

namespace {

void drain(int fd, std::string& into, bool& open) {
  char buf[65536];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0)
    into.append(buf, static_cast<std::size_t>(n));
  else if (n == 0 || (errno != EINTR && errno != EAGAIN))
    open = false;
}

}  // namespace

child_result run_child(const std::vector<std::string>& argv, const child_options& options) {
  if (argv.empty())
    throw std::runtime_error("run_child: empty command");
  // Everything the child needs is built before fork: after fork only async-signal-safe
  // calls may run (the parent may have threads, e.g. a Kafka mock cluster).
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string_view::npos && options.env.contains(std::string(kv.substr(0, eq))))
      continue;
    env_store.emplace_back(kv);
  }
  for (const auto& [k, v] : options.env)
    env_store.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_store)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const bool search = argv[0].find('/') == std::string::npos;

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0)
      ::_exit(126);
    if (search)
      ::execvpe(args[0], args.data(), envp.data());
    else
      ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  child_result r;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
      drain(out_pipe[0], r.out, out_open);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
      drain(err_pipe[0], r.err, err_open);
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  rusage ru{};
  while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  r.peak_rss_kb = ru.ru_maxrss;
  if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    r.exit_code = 128 + WTERMSIG(status);
  if (r.exit_code == 127 && r.out.empty() && r.err.empty())
    r.err = "cannot execute " + argv[0];
  return r;
}

child_result run_shell(const std::string& script, const child_options& options) {
  return run_child({"/bin/sh", "-c", script}, options);
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

spread spread_of(std::vector<double> values) {
  spread s;
  s.n = values.size();
  if (values.empty())
    return s;
  std::sort(values.begin(), values.end());
  s.min = values.front();
  s.max = values.back();
  const std::size_t mid = values.size() / 2;
  s.median = values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  return s;
}

}  // namespace flotilla::bench
