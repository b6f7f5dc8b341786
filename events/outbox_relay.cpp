#include "events/outbox_relay.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace flotilla::events {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Each deliver() gets at least this long, so a drain that started late still gives a
/// reachable broker the time of one round trip.
constexpr milliseconds min_round{100};

std::atomic<const std::atomic<bool>*> g_stop{nullptr};

/// The key of a sink's progress: its kind and destination, so a sink configured anew
/// (another topic, other brokers) is sent the kept entries.
std::string sink_identity(const event_sink& s) {
  return fmt::format("{} {}", s.kind(), s.destination());
}

}  // namespace

void set_stop_request(const std::atomic<bool>* stop) noexcept { g_stop = stop; }

bool stop_requested() noexcept {
  const auto* stop = g_stop.load();
  return stop != nullptr && stop->load(std::memory_order_relaxed);
}

outbox_relay::outbox_relay(storage::state_store& store,
                           std::vector<std::unique_ptr<event_sink>> sinks, relay_options options)
    : store_(store), sinks_(std::move(sinks)), options_(options), sent_through_(sinks_.size(), 0) {
  // With one sink an acknowledged entry is removed at once; with several, a sink ahead
  // of the others resumes where it stopped instead of receiving the kept entries again.
  // So does a sink left alone (the one behind it taken out of flotilla.toml): the entries
  // it acknowledged while the other held them are not sent to it again.
  for (std::size_t i = 0; i < sinks_.size(); ++i)
    if (sinks_[i]->holds_only())
      holding_ = true;
    else if (auto through = store_.outbox_sent_through(sink_identity(*sinks_[i])))
      sent_through_[i] = *through;
}

outbox_relay::~outbox_relay() {
  {
    std::lock_guard lock(wake_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void outbox_relay::start() {
  if (sinks_.empty() || thread_.joinable())
    return;
  thread_ = std::thread([this] { run_background(); });
}

void outbox_relay::notify() {
  {
    std::lock_guard lock(wake_mu_);
    notified_ = true;
  }
  wake_.notify_one();
}

void outbox_relay::run_background() {
  milliseconds timeout{0};
  for (const auto& s : sinks_)
    timeout = std::max(timeout, s->delivery_timeout());
  for (;;) {
    {
      std::unique_lock lock(wake_mu_);
      wake_.wait_for(lock, options_.poll_interval, [this] { return stop_ || notified_; });
      if (stop_)
        return;
      notified_ = false;
    }
    std::lock_guard lock(drain_mu_);
    if (!failure_)
      (void)drain_locked(timeout);
  }
}

drain_report outbox_relay::drain(std::optional<milliseconds> timeout) {
  milliseconds t{0};
  if (timeout)
    t = *timeout;
  else
    for (const auto& s : sinks_)
      t = std::max(t, s->delivery_timeout());
  std::lock_guard lock(drain_mu_);
  return drain_locked(t);
}

drain_report outbox_relay::finish(std::optional<milliseconds> timeout) {
  {
    std::lock_guard lock(wake_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
  return drain(timeout);
}

std::uint64_t outbox_relay::pending_count() {
  auto n = store_.outbox_size();
  return n ? *n : 0;
}

drain_report outbox_relay::drain_locked(milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  while (!failure_ && !sinks_.empty()) {
    // From the earliest entry a sink that is sent entries still lacks.
    std::optional<std::uint64_t> after;
    for (std::size_t i = 0; i < sinks_.size(); ++i)
      if (!sinks_[i]->holds_only())
        after = std::min(after.value_or(sent_through_[i]), sent_through_[i]);
    if (!after)
      break;
    auto batch = store_.scan_outbox(*after, options_.batch_size);
    if (!batch) {
      failure_ = error{errc::outbox,
                       fmt::format("the outbox could not be read: {}", batch.error().message)};
      break;
    }
    if (batch->empty())
      break;
    bool sent = false;
    for (std::size_t i = 0; i < sinks_.size() && !failure_; ++i) {
      if (sinks_[i]->holds_only())
        continue;
      auto first = std::find_if(batch->begin(), batch->end(),
                                [&](const auto& e) { return e.sequence() > sent_through_[i]; });
      if (first == batch->end())
        continue;
      const auto left =
          std::max(min_round, std::chrono::ceil<milliseconds>(deadline - clock::now()));
      delivery d = sinks_[i]->deliver(std::span<const storage::pb::OutboxEntry>(
                                          &*first, static_cast<std::size_t>(batch->end() - first)),
                                      left);
      if (d.delivered > 0) {
        sent = true;
        sent_through_[i] = d.delivered_through;
        // With other sinks the entries may stay in the outbox for them: recorded at once,
        // so a crash while another sink is still being waited for sends them to this one
        // again only if it came in between. Not recorded, it costs a second delivery.
        if (sinks_.size() > 1)
          (void)store_.set_outbox_sent_through(sink_identity(*sinks_[i]), sent_through_[i]);
      }
      if (d.failure) {
        failure_ = std::move(d.failure);
        // Given up because the run was asked to stop: said so, not as a broker fault.
        if (stop_requested())
          failure_->message = fmt::format(
              "the run was stopped (Ctrl-C or SIGTERM) while {} ({}) had not acknowledged "
              "every event; the rest stay in the outbox and the next run or retry delivers "
              "them first (the sink said: {})",
              sinks_[i]->kind(), sinks_[i]->destination(), failure_->message);
      }
    }
    if (!sent && !failure_)
      break;  // every sink that is sent entries has them all: the rest waits for one that holds
    const std::uint64_t through =
        holding_ ? 0 : *std::min_element(sent_through_.begin(), sent_through_.end());
    if (through > removed_through_) {
      if (auto st = store_.remove_outbox_through(through); !st) {
        failure_ = error{errc::outbox, fmt::format("delivered events could not be removed from the "
                                                   "outbox (they will be sent again): {}",
                                                   st.error().message)};
        break;
      }
      for (const auto& e : *batch)
        if (e.sequence() > removed_through_ && e.sequence() <= through)
          ++delivered_;
      removed_through_ = through;
    }
  }
  drain_report r;
  r.delivered = delivered_;
  r.pending = pending_count();
  r.failure = failure_;
  if (r.failure && r.failure->code != errc::outbox)
    r.failure->message += fmt::format(
        ". {} event(s) are kept in the outbox (state store) and go out first, in order, on the "
        "next run",
        r.pending);
  return r;
}

}  // namespace flotilla::events
