#pragma once
/// A fresh directory under the system temp dir, removed when the test ends.

#include <atomic>
#include <filesystem>
#include <random>
#include <string>

#include <unistd.h>

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

}  // namespace flotilla::storage::test
