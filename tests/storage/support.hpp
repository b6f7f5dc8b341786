#pragma once
/// Test helpers: a fresh directory per test, removed when it ends, and opening a store
/// there that fails the test with the store's own message.

#include <atomic>
#include <filesystem>
#include <random>
#include <string>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "storage/state_store.hpp"

namespace flotilla::storage::test {

class temp_dir {
 public:
  temp_dir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("flotilla-storage-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter++) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  /// The state directory inside it (not created: the store creates it).
  [[nodiscard]] std::filesystem::path state() const { return path_ / "state"; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline state_store open_store(const temp_dir& dir, store_options options = {}) {
  auto store = state_store::open(dir.state(), options);
  INFO((store ? std::string() : store.error().message));
  REQUIRE(store.has_value());
  return std::move(*store);
}

}  // namespace flotilla::storage::test
