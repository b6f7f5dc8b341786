#pragma once
/// A table's change queue: row batches between the source reader and the sink writer.
/// Bounded, so a slow target slows its reader instead of filling memory. Owned by the
/// table's copy; the reader thread pushes, the writer pops. close() ends the stream;
/// fail() ends it with an error that both sides see. The writer hands each batch it has
/// written back with release(), and the reader takes it with reuse() to fill again: its
/// cells and their strings keep their memory, so a long copy stops allocating.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "schema/rows.hpp"

namespace flotilla::engine {

class change_queue {
 public:
  /// capacity: batches held at most. Default: 4.
  explicit change_queue(std::size_t capacity = 4) : capacity_(capacity) {}

  /// Blocks while full. Returns false when the queue was failed (stop producing).
  bool push(schema::row_batch&& batch) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return items_.size() < capacity_ || failed_; });
    if (failed_)
      return false;
    items_.push_back(std::move(batch));
    not_empty_.notify_one();
    return true;
  }

  /// Blocks while empty and open. nullopt: closed and drained, or failed.
  std::optional<schema::row_batch> pop() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return !items_.empty() || closed_ || failed_; });
    if (failed_ || items_.empty())
      return std::nullopt;
    auto b = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return b;
  }

  /// Keeps a batch the writer is done with for reuse(). A reader that reuses takes one
  /// per batch it pushes, so only a couple wait at a time; more are freed, as are all of
  /// them for a reader that never reuses, and after close() or fail().
  void release(schema::row_batch&& batch) {
    std::lock_guard lock(mu_);
    if (!closed_ && !failed_ && spent_.size() < max_spent)
      spent_.push_back(std::move(batch));
  }

  /// A released batch, or an empty one when there is none.
  schema::row_batch reuse() {
    std::lock_guard lock(mu_);
    if (spent_.empty())
      return {};
    auto b = std::move(spent_.back());
    spent_.pop_back();
    return b;
  }

  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    not_empty_.notify_all();
  }

  void fail(std::string error) {
    std::lock_guard lock(mu_);
    if (!failed_)
      error_ = std::move(error);
    failed_ = true;
    items_.clear();
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  [[nodiscard]] std::optional<std::string> error() const {
    std::lock_guard lock(mu_);
    return failed_ ? std::optional(error_) : std::nullopt;
  }

 private:
  static constexpr std::size_t max_spent = 2;
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<schema::row_batch> items_;
  std::vector<schema::row_batch> spent_;  ///< written batches, for reuse()
  bool closed_ = false;
  bool failed_ = false;
  std::string error_;
};

}  // namespace flotilla::engine
