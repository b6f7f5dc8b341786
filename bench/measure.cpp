#include "bench/measure.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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
  // A long log cut to its end loses its first error, the cause; the rest is often what
  // followed from it.
  if (err.size() > 2000) {
    std::size_t at = std::string::npos;
    for (const char* word : {"ERROR", "FATAL", "error:", "Error"})
      at = std::min(at, err.find(word));
    if (at != std::string::npos && at < err.size() - 2000) {
      const auto from = err.rfind('\n', at);
      const auto begin = from == std::string::npos ? 0 : from + 1;
      const auto end = err.find('\n', at);
      tail = "first error: " + err.substr(begin, std::min<std::size_t>(end, begin + 500) - begin) +
             "\n" + tail;
    }
  }
  if (tail.find_first_not_of(" \n\t") == std::string::npos)
    tail = "(no output)";
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return fmt::format("killed by signal {} ({}{}): {}", signal, name ? "SIG" : "",
                       name ? name : "unknown", tail);
  }
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

// Forks argv[0] with exactly this environment and waits for it. In the child only
// async-signal-safe calls run. Signals this process ignores are set back to their default
// first: the launcher ignores Ctrl-C, the program it starts must not.
/// The process group of the child the launcher waits for, when it has one of its own
/// (child_options::own_group): a Ctrl-C or SIGTERM the launcher gets goes on to it.
volatile sig_atomic_t forward_group = 0;

extern "C" void forward_signal(int sig) {
  const pid_t group = forward_group;
  if (group > 0)
    ::kill(-group, sig);
}

volatile sig_atomic_t guard_orphaned = 0;
pid_t guard_parent = 0;

extern "C" void guard_signal(int) {
  // Only the launcher's end counts (PR_SET_PDEATHSIG): a SIGTERM the program sends its
  // own group, or a Ctrl-C the launcher passes on, is the program's to act on.
  if (::getppid() != guard_parent)
    guard_orphaned = 1;
}

/// The processes whose parent is this one (the program, and its workers once orphaned).
std::vector<pid_t> children_of_self() {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so after the last ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos)
      continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self)
      out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

/// Runs `args` as a child of a guard (this process, forked for it): the guard is a
/// subreaper, so workers the program forks that outlive it become the guard's children,
/// and when the launcher ends (the harness killed with -9) the guard ends them all, where
/// they would go on as orphans (pgcopydb's workers did, holding source sessions). It exits
/// as the program did, once no descendant is left.
[[noreturn]] void exec_guarded(char* const* args, char* const* envp, bool search) {
  guard_parent = ::getppid();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct sigaction on_term {};
  on_term.sa_handler = guard_signal;
  sigemptyset(&on_term.sa_mask);  // no SA_RESTART: the wait below returns to look
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    ::sigaction(sig, &on_term, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != guard_parent)
    ::_exit(1);
  const pid_t prog = ::fork();
  if (prog < 0)
    ::_exit(126);
  if (prog == 0) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
      ::signal(sig, SIG_DFL);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (search)
      ::execvpe(args[0], args, envp);
    else
      ::execve(args[0], args, envp);
    ::_exit(127);
  }
  int prog_status = 0;
  bool prog_done = false;
  for (;;) {
    if (guard_orphaned || prog_done)
      for (pid_t c : children_of_self())
        ::kill(c, SIGKILL);
    int st = 0;
    const pid_t w = ::waitpid(-1, &st, 0);
    if (w == prog) {
      prog_status = st;
      prog_done = true;
    } else if (w < 0 && errno == ECHILD) {
      break;
    }
  }
  if (WIFSIGNALED(prog_status)) {
    ::signal(WTERMSIG(prog_status), SIG_DFL);
    ::prctl(PR_SET_PDEATHSIG, 0);
    ::raise(WTERMSIG(prog_status));
  }
  ::_exit(WIFEXITED(prog_status) ? WEXITSTATUS(prog_status) : 1);
}

child_result spawn_and_wait(const std::vector<std::string>& argv, std::vector<std::string> env_store,
                            const std::string& cwd, bool own_group = false) {
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
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
    for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP})
      ::signal(sig, SIG_DFL);
    if (own_group)
      ::setpgid(0, 0);
    // Ended with the launcher, which ends with the harness: a path of a killed harness
    // would go on measuring nothing and take a core from the next run's paths.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0)
      ::_exit(126);
    if (own_group)  // a program that forks workers of its own (pgcopydb)
      exec_guarded(args.data(), envp.data(), search);
    if (search)
      ::execvpe(args[0], args.data(), envp.data());
    else
      ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  if (own_group) {
    (void)::setpgid(pid, pid);  // whichever of the two runs first
    forward_group = pid;
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
  forward_group = 0;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  r.peak_rss_kb = ru.ru_maxrss;
  if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
    r.signal = WTERMSIG(status);
  }
  if (r.exit_code == 127 && r.out.empty() && r.err.empty())
    r.err = "cannot execute " + argv[0];
  return r;
}

// The launcher's wire: a request is argv, the environment and the working directory; a
// reply is a flag (0 ran, 1 could not start: the text says why) and the child's result.
bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

template <typename T>
void put(std::string& buf, T v) {
  buf.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put(std::string& buf, const std::string& s) {
  put<std::uint64_t>(buf, s.size());
  buf += s;
}
void put(std::string& buf, const std::vector<std::string>& v) {
  put<std::uint64_t>(buf, v.size());
  for (const auto& s : v)
    put(buf, s);
}

template <typename T>
bool get(int fd, T& v) {
  return read_all(fd, &v, sizeof v);
}
bool get(int fd, std::string& s) {
  std::uint64_t n = 0;
  if (!get(fd, n))
    return false;
  s.resize(n);
  return n == 0 || read_all(fd, s.data(), n);
}
bool get(int fd, std::vector<std::string>& v) {
  std::uint64_t n = 0;
  if (!get(fd, n))
    return false;
  v.resize(n);
  for (auto& s : v)
    if (!get(fd, s))
      return false;
  return true;
}

int launcher_fd = -1;
std::mutex launcher_mutex;

[[noreturn]] void serve_launches(int fd) {
  // Ignored, but passed on to a child in a group of its own (which the terminal's Ctrl-C
  // does not reach).
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction forward {};
  forward.sa_handler = forward_signal;
  forward.sa_flags = SA_RESTART;
  sigemptyset(&forward.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(sig, &forward, nullptr);
  for (;;) {
    std::vector<std::string> argv, env;
    std::string cwd;
    std::uint8_t own_group = 0;
    if (!get(fd, argv) || !get(fd, env) || !get(fd, cwd) || !get(fd, own_group))
      ::_exit(0);  // the bench has gone
    std::string reply;
    try {
      const auto r = spawn_and_wait(argv, std::move(env), cwd, own_group != 0);
      put<std::uint8_t>(reply, 0);
      put<std::int32_t>(reply, r.exit_code);
      put<std::int32_t>(reply, r.signal);
      put<double>(reply, r.wall_s);
      put<double>(reply, r.cpu_s);
      put<std::int64_t>(reply, r.peak_rss_kb);
      put(reply, r.out);
      put(reply, r.err);
    } catch (const std::exception& e) {
      reply.clear();
      put<std::uint8_t>(reply, 1);
      put(reply, std::string(e.what()));
    }
    if (!write_all(fd, reply.data(), reply.size()))
      ::_exit(0);
  }
}

}  // namespace

void start_launcher() {
  // A process forked from the harness has a launcher of its own: sharing the harness's
  // socket would interleave their requests.
  static pid_t owner = 0;
  if (launcher_fd >= 0 && owner == ::getpid())
    return;
  if (launcher_fd >= 0)
    ::close(launcher_fd);
  launcher_fd = -1;
  owner = ::getpid();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error(fmt::format("socketpair: {}", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::close(sv[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // ends with the harness, even a killed one
    if (::getppid() == 1)
      ::_exit(0);
    serve_launches(sv[1]);
  }
  ::close(sv[1]);
  launcher_fd = sv[0];
}

child_result run_child(const std::vector<std::string>& argv, const child_options& options) {
  if (argv.empty())
    throw std::runtime_error("run_child: empty command");
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
  if (launcher_fd < 0)
    return spawn_and_wait(argv, std::move(env_store), options.cwd);

  std::lock_guard lock(launcher_mutex);
  std::string request;
  put(request, argv);
  put(request, env_store);
  put(request, options.cwd);
  put<std::uint8_t>(request, options.own_group ? 1 : 0);
  if (!write_all(launcher_fd, request.data(), request.size()))
    throw std::runtime_error(fmt::format("cannot start {}: the launcher process has gone ({})",
                                         argv[0], std::strerror(errno)));
  std::uint8_t failed = 0;
  if (!get(launcher_fd, failed))
    throw std::runtime_error(fmt::format("{}: the launcher process has gone", argv[0]));
  if (failed) {
    std::string why;
    (void)get(launcher_fd, why);
    throw std::runtime_error(why);
  }
  child_result r;
  std::int32_t code = 0, signal = 0;
  if (!get(launcher_fd, code) || !get(launcher_fd, signal) || !get(launcher_fd, r.wall_s) || !get(launcher_fd, r.cpu_s) ||
      !get(launcher_fd, r.peak_rss_kb) || !get(launcher_fd, r.out) || !get(launcher_fd, r.err))
    throw std::runtime_error(fmt::format("{}: the launcher process has gone", argv[0]));
  r.exit_code = code;
  r.signal = signal;
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
