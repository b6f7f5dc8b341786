#include "cli/stop_signals.hpp"

#include <csignal>
#include <cstring>
#include <ctime>

#include <unistd.h>

namespace flotilla::cli {
namespace {

std::atomic<bool>* g_stop = nullptr;
std::atomic<const char*> g_second_message{""};
std::atomic<const char*> g_first_message{""};
/// When the first signal came, CLOCK_MONOTONIC nanoseconds; 0: none yet.
std::atomic<long long> g_first_ns{0};

long long monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

extern "C" void on_signal(int sig) {
  const long long now = monotonic_ns();
  long long first = 0;
  if (g_first_ns.compare_exchange_strong(first, now)) {
    g_stop->store(true);
    const char* said = g_first_message.load();
    (void)!::write(STDERR_FILENO, said, std::strlen(said));
    return;
  }
  if (now - first < 1'000'000'000LL)
    return;  // the same stop, delivered twice
  const char* said = g_second_message.load();
  (void)!::write(STDERR_FILENO, said, std::strlen(said));
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void on_stop_signals(std::atomic<bool>& stop, const char* second_message,
                     const char* first_message) {
  g_stop = &stop;
  g_second_message = second_message;
  g_first_message = first_message;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

void set_stop_messages(const char* second_message, const char* first_message) {
  g_second_message = second_message;
  g_first_message = first_message;
}

}  // namespace flotilla::cli
