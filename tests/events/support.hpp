#pragma once
/// Test helpers for the events module: fresh directories, a librdkafka mock cluster,
/// and a real consumer that reads a topic back with assign() (no group join).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "storage/state_store.hpp"

namespace flotilla::events::test {

/// A fresh directory under the temp dir, removed at the end of the test.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

storage::state_store open_store(const std::filesystem::path& dir);

/// Lines of a text file.
std::vector<std::string> read_lines(const std::filesystem::path& file);

/// librdkafka's in-process mock cluster, with one topic created.
class mock_kafka {
 public:
  explicit mock_kafka(std::string topic = "flotilla.events", int partitions = 3, int brokers = 1);
  ~mock_kafka();
  mock_kafka(const mock_kafka&) = delete;
  mock_kafka& operator=(const mock_kafka&) = delete;

  [[nodiscard]] std::string bootstraps() const;
  [[nodiscard]] rd_kafka_mock_cluster_t* cluster() const { return cluster_; }
  [[nodiscard]] const std::string& topic() const { return topic_; }
  [[nodiscard]] int partitions() const { return partitions_; }

 private:
  rd_kafka_t* owner_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  std::string topic_;
  int partitions_;
};

struct consumed {
  std::string key;
  std::string value;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::int64_t timestamp_ms = -1;
  std::map<std::string, std::string> headers;
};

/// Reads every partition of `topic` from the beginning until `expect` messages arrived
/// (then waits `settle` more for unexpected extra ones) or `timeout` passed. Messages
/// are returned per partition in offset order, partitions in ascending order.
std::vector<consumed> consume(const std::string& bootstraps, const std::string& topic,
                              int partitions, std::size_t expect,
                              std::chrono::milliseconds timeout = std::chrono::seconds(20),
                              std::chrono::milliseconds settle = std::chrono::milliseconds(300));

/// A loopback port nothing listens on.
int closed_port();

}  // namespace flotilla::events::test
