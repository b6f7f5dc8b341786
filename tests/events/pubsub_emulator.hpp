#pragma once
/// Test fixture: Google's Pub/Sub emulator (the real one the machine image ships) on a
/// free loopback port, plus a small REST subscriber to read messages back.
///
///   flotilla::test::pubsub_emulator emu;              // started and ready, or throws
///   emu.create_subscription("flotilla-test", "events-1", "sub-1");
///   auto got = emu.pull("flotilla-test", "sub-1", 20, std::chrono::seconds(20));
///
/// - The emulator runs in its own process group (fork/exec), its output goes to a log
///   file; readiness is polled over HTTP with a deadline (60 s by default). A missing
///   binary, an early exit or a missed deadline throws std::runtime_error with the
///   reason and the log's tail, so the test fails (it never skips silently).
/// - The destructor kills the whole process group (the launcher script and its JVM) and
///   reaps it. The JVM also dies with the test process (PR_SET_PDEATHSIG: strictly, with
///   the thread that constructed the fixture, so construct it on a thread that lives as
///   long as it, e.g. the test's main thread).
/// - HTTP through libcurl (link CURL::libcurl), JSON through nlohmann_json. Header-only
///   and self-contained: no Catch2, no flotilla headers.
/// - Override the binary with FLOTILLA_PUBSUB_EMULATOR (a path).
///
/// Ownership and threads: one owner; calls from one thread at a time.

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <nlohmann/json.hpp>

namespace flotilla::test {

/// One message as a subscriber receives it, data decoded.
struct pubsub_received {
  std::string data;
  std::string ordering_key;
  std::map<std::string, std::string> attributes;
  std::string message_id;
};

/// An HTTP answer; status 0 means no answer (transport_error says why).
struct pubsub_http_answer {
  long status = 0;
  std::string body;
  std::string transport_error;
};

namespace pubsub_detail {

inline std::string base64_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+' || c == '-')
      return 62;
    if (c == '/' || c == '_')
      return 63;
    return -1;
  };
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=')
      break;
    const int v = value(c);
    if (v < 0)
      throw std::runtime_error("pubsub_emulator: invalid base64 in a pulled message");
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xffu);
    }
  }
  return out;
}

inline std::size_t collect(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

/// A loopback port that was free a moment ago.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw std::runtime_error("pubsub_emulator: socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("pubsub_emulator: no free loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

inline std::string tail_of(const std::filesystem::path& file, std::size_t max_chars = 3000) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > max_chars)
    s = "..." + s.substr(s.size() - max_chars);
  return s;
}

}  // namespace pubsub_detail

class pubsub_emulator {
 public:
  static constexpr const char* default_binary =
      "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator";

  /// `extra_args` go to the emulator as they are (e.g. "--projects=a-project,another").
  explicit pubsub_emulator(std::vector<std::string> extra_args = {},
                           std::chrono::milliseconds ready_within = std::chrono::seconds(60)) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    curl_ = curl_easy_init();
    if (curl_ == nullptr)
      throw std::runtime_error("pubsub_emulator: curl_easy_init failed");
    std::string binary = default_binary;
    if (const char* b = std::getenv("FLOTILLA_PUBSUB_EMULATOR"); b && *b)
      binary = b;
    if (::access(binary.c_str(), X_OK) != 0) {
      cleanup_curl();
      throw std::runtime_error(
          "the Pub/Sub emulator is not installed at " + binary +
          " (Google Cloud SDK component pubsub-emulator, needs Java 17); install it or point "
          "FLOTILLA_PUBSUB_EMULATOR at it");
    }
    port_ = pubsub_detail::free_port();
    host_ = "127.0.0.1:" + std::to_string(port_);
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() /
           ("flotilla-pubsub-" + std::to_string(::getpid()) + "-" + std::to_string(port_) + "-" +
            std::to_string(rd()));
    std::filesystem::create_directories(dir_);
    log_ = dir_ / "emulator.log";
    start(binary, extra_args);
    try {
      wait_ready(ready_within);
    } catch (...) {
      stop();
      cleanup_curl();
      throw;
    }
  }

  ~pubsub_emulator() {
    stop();
    cleanup_curl();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  pubsub_emulator(const pubsub_emulator&) = delete;
  pubsub_emulator& operator=(const pubsub_emulator&) = delete;

  /// "127.0.0.1:port": what emulator_host / PUBSUB_EMULATOR_HOST take.
  [[nodiscard]] const std::string& host() const { return host_; }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] const std::filesystem::path& log_file() const { return log_; }
  /// The last part of the emulator's output, for failure messages.
  [[nodiscard]] std::string log_tail() const { return pubsub_detail::tail_of(log_); }

  /// Any request to the emulator: `path` starts with "/v1/...".
  pubsub_http_answer http(const std::string& method, const std::string& path,
                          const std::string& body = "",
                          std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    pubsub_http_answer a;
    CURL* c = curl_;
    curl_easy_reset(c);
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    const std::string url = "http://" + host_ + path;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (method != "GET") {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, pubsub_detail::collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a.body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    const CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
      a.transport_error = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    else
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
    curl_slist_free_all(headers);
    return a;
  }

  /// Creates a topic (an existing one is fine).
  void create_topic(const std::string& project, const std::string& topic) {
    auto a = http("PUT", "/v1/projects/" + project + "/topics/" + topic, "{}");
    if (a.status != 200 && a.status != 409)
      fail("create topic " + project + "/" + topic, a);
  }

  /// Creates a subscription with message ordering (and the topic, when missing). A
  /// subscription receives only what is published after it exists.
  void create_subscription(const std::string& project, const std::string& topic,
                           const std::string& subscription, bool ordering = true) {
    create_topic(project, topic);
    nlohmann::json body{{"topic", "projects/" + project + "/topics/" + topic},
                        {"enableMessageOrdering", ordering},
                        {"ackDeadlineSeconds", 60}};
    auto a = http("PUT", "/v1/projects/" + project + "/subscriptions/" + subscription, body.dump());
    if (a.status != 200)
      fail("create subscription " + project + "/" + subscription, a);
  }

  /// Pulls (and acknowledges) messages until `max` arrived or `deadline` passed, in the
  /// order the emulator hands them out. Returns what arrived: fewer than `max` means the
  /// deadline passed. Polls with returnImmediately (a plain pull long-polls for ~90 s).
  std::vector<pubsub_received> pull(const std::string& project, const std::string& subscription,
                                    std::size_t max,
                                    std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
    using clock = std::chrono::steady_clock;
    const auto until = clock::now() + deadline;
    const std::string base = "/v1/projects/" + project + "/subscriptions/" + subscription;
    std::vector<pubsub_received> out;
    while (out.size() < max) {
      nlohmann::json req{{"maxMessages", static_cast<std::int64_t>(max - out.size())},
                         {"returnImmediately", true}};
      auto a = http("POST", base + ":pull", req.dump());
      if (a.status != 200)
        fail("pull " + project + "/" + subscription, a);
      auto j = nlohmann::json::parse(a.body);
      nlohmann::json acks = nlohmann::json::array();
      if (j.contains("receivedMessages"))
        for (const auto& rm : j["receivedMessages"]) {
          const auto& m = rm["message"];
          pubsub_received r;
          r.data = pubsub_detail::base64_decode(m.value("data", ""));
          r.ordering_key = m.value("orderingKey", "");
          r.message_id = m.value("messageId", "");
          if (m.contains("attributes"))
            for (const auto& [k, v] : m["attributes"].items())
              r.attributes[k] = v.get<std::string>();
          out.push_back(std::move(r));
          acks.push_back(rm["ackId"]);
        }
      if (!acks.empty()) {
        auto ack = http("POST", base + ":acknowledge", nlohmann::json{{"ackIds", acks}}.dump());
        if (ack.status != 200)
          fail("acknowledge on " + project + "/" + subscription, ack);
        continue;  // more may be waiting right now
      }
      if (clock::now() >= until)
        break;
      // Nothing there yet: look again shortly (a poll interval, not a synchronisation).
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return out;
  }

  /// Stops the emulator now (the destructor does it otherwise). Idempotent.
  void stop() {
    if (pid_ <= 0)
      return;
    ::kill(-pid_, SIGTERM);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= until) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(-pid_, SIGKILL);  // anything left in the group
    pid_ = -1;
  }

 private:
  void start(const std::string& binary, const std::vector<std::string>& extra_args) {
    const int log_fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0)
      throw std::runtime_error("pubsub_emulator: cannot create " + log_.string());
    std::vector<std::string> args{binary, "--host=127.0.0.1", "--port=" + std::to_string(port_)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(log_fd);
      throw std::runtime_error("pubsub_emulator: fork failed");
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        ::_exit(127);
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
      const int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0)
        ::dup2(null_fd, STDIN_FILENO);
      ::execv(binary.c_str(), argv.data());
      const char msg[] = "exec of the Pub/Sub emulator failed\n";
      (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also from here: no race with kill(-pid)
    ::close(log_fd);
    pid_ = pid;
  }

  void wait_ready(std::chrono::milliseconds within) {
    using clock = std::chrono::steady_clock;
    const auto until = clock::now() + within;
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("the Pub/Sub emulator exited before it was ready (" +
                                 describe(status) + "); its output (" + log_.string() + "):\n" +
                                 log_tail());
      }
      auto a = http("GET", "/", "", std::chrono::seconds(2));
      if (a.status == 200)
        return;
      if (clock::now() >= until)
        throw std::runtime_error("the Pub/Sub emulator did not answer on " + host_ + " within " +
                                 std::to_string(within.count()) + " ms; its output (" +
                                 log_.string() + "):\n" + log_tail());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  static std::string describe(int status) {
    if (WIFEXITED(status))
      return "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
      return "signal " + std::to_string(WTERMSIG(status));
    return "status " + std::to_string(status);
  }

  [[noreturn]] void fail(const std::string& what, const pubsub_http_answer& a) const {
    throw std::runtime_error(
        "pubsub_emulator: " + what + " failed: " +
        (a.status == 0 ? a.transport_error : "HTTP " + std::to_string(a.status) + ": " + a.body));
  }

  void cleanup_curl() {
    if (curl_ != nullptr)
      curl_easy_cleanup(curl_);
    curl_ = nullptr;
  }

  CURL* curl_ = nullptr;
  int port_ = 0;
  std::string host_;
  std::filesystem::path dir_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
};

}  // namespace flotilla::test
