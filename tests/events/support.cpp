#include "tests/events/support.hpp"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <random>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace flotilla::events::test {

temp_dir::temp_dir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          ("flotilla-events-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
           std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

storage::state_store open_store(const std::filesystem::path& dir) {
  storage::store_options o;
  o.sync_writes = false;
  auto s = storage::state_store::open(dir, o);
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.has_value());
  return std::move(*s);
}

std::vector<std::string> read_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

namespace {
void quiet(const rd_kafka_t*, int, const char*, const char*) {}
}  // namespace

mock_kafka::mock_kafka(std::string topic, int partitions, int brokers)
    : topic_(std::move(topic)), partitions_(partitions) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set_log_cb(conf, quiet);
  owner_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  REQUIRE(owner_ != nullptr);
  cluster_ = rd_kafka_mock_cluster_new(owner_, brokers);
  REQUIRE(cluster_ != nullptr);
  REQUIRE(rd_kafka_mock_topic_create(cluster_, topic_.c_str(), partitions, 1) ==
          RD_KAFKA_RESP_ERR_NO_ERROR);
}

mock_kafka::~mock_kafka() {
  rd_kafka_mock_cluster_destroy(cluster_);
  rd_kafka_destroy(owner_);
}

std::string mock_kafka::bootstraps() const { return rd_kafka_mock_cluster_bootstraps(cluster_); }

std::vector<consumed> consume(const std::string& bootstraps, const std::string& topic,
                              int partitions, std::size_t expect, std::chrono::milliseconds timeout,
                              std::chrono::milliseconds settle) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  auto set = [&](const char* k, const char* v) {
    REQUIRE(rd_kafka_conf_set(conf, k, v, err, sizeof err) == RD_KAFKA_CONF_OK);
  };
  set("bootstrap.servers", bootstraps.c_str());
  set("group.id", "flotilla-events-test");
  set("enable.auto.commit", "false");
  set("enable.partition.eof", "false");
  rd_kafka_conf_set_log_cb(conf, quiet);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE(rk != nullptr);
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p)
    rd_kafka_topic_partition_list_add(parts, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  REQUIRE(rd_kafka_assign(rk, parts) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(parts);

  std::vector<consumed> out;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point got_all{};
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now - start > timeout)
      break;
    if (out.size() >= expect) {
      if (got_all == std::chrono::steady_clock::time_point{})
        got_all = now;
      if (now - got_all > settle)
        break;
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      consumed c;
      c.key.assign(static_cast<const char*>(m->key), m->key_len);
      c.value.assign(static_cast<const char*>(m->payload), m->len);
      c.partition = m->partition;
      c.offset = m->offset;
      rd_kafka_timestamp_type_t tt;
      c.timestamp_ms = rd_kafka_message_timestamp(m, &tt);
      rd_kafka_headers_t* hdrs = nullptr;
      if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* value;
        size_t size;
        for (size_t i = 0;
             rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
             ++i)
          c.headers[name] = std::string(static_cast<const char*>(value), size);
      }
      out.push_back(std::move(c));
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  std::stable_sort(out.begin(), out.end(), [](const consumed& a, const consumed& b) {
    return a.partition != b.partition ? a.partition < b.partition : a.offset < b.offset;
  });
  return out;
}

int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);  // bound, never listened: connecting is refused
  return ntohs(addr.sin_port);
}

}  // namespace flotilla::events::test
