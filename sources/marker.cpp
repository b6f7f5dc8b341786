#include "sources/marker.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <fmt/format.h>

namespace flotilla::sources {
namespace {

// Up to `length` bytes at `offset`; empty when the file is missing or shorter.
std::string read_bytes(const std::string& path, std::uint64_t offset, std::size_t length) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {};
  std::string out(length, '\0');
  ssize_t n = ::pread(fd, out.data(), length, static_cast<off_t>(offset));
  ::close(fd);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

std::string state_text(const file_state& f) {
  return fmt::format("{}:{}:{}:{}:{}", f.device, f.inode, f.size, f.mtime_ns, f.ctime_ns);
}

// ";<suffix>:<dev>:<ino>:<size>:<mtime>" when the companion exists. Not its ctime: a
// reader opening a WAL database sets the -wal file's owner and mode again (SQLite's
// open), which moves its ctime without a write.
std::string companion(const std::string& path, std::string_view suffix) {
  if (auto c = stat_file(path + std::string(suffix)))
    return fmt::format(";{}:{}:{}:{}:{}", suffix, c->device, c->inode, c->size, c->mtime_ns);
  return {};
}

}  // namespace

std::optional<file_state> stat_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return std::nullopt;
  file_state out;
  out.device = static_cast<std::uint64_t>(st.st_dev);
  out.inode = static_cast<std::uint64_t>(st.st_ino);
  out.size = static_cast<std::uint64_t>(st.st_size);
  out.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  out.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  return out;
}

std::optional<std::string> sqlite_file_marker(const std::string& path) {
  auto main = stat_file(path);
  if (!main)
    return std::nullopt;
  shape_hash counters;
  counters.add(read_bytes(path, 24, 4));  // file change counter
  // An empty or absent -wal holds no commit: the database file is the whole state. A
  // reader opening a WAL database creates an empty -wal and a -shm (and the last one to
  // close removes them), which must not count as a change.
  const auto wal = stat_file(path + "-wal");
  if (!wal || wal->size == 0)
    return fmt::format("sqlite:{};c:{}", state_text(*main), counters.hex());
  counters.add(read_bytes(path + "-shm", 0, 48));  // wal-index header (iChange, mxFrame, salts)
  counters.add(read_bytes(path + "-wal", 0, 32));  // WAL header (checkpoint seq, salts)
  return fmt::format("sqlite:{}{};c:{}", state_text(*main), companion(path, "-wal"),
                     counters.hex());
}

std::optional<std::string> duckdb_file_marker(const std::string& path) {
  auto main = stat_file(path);
  if (!main)
    return std::nullopt;
  shape_hash headers;
  headers.add(read_bytes(path, 4096, 64));  // database header 1 (checksum, iteration, ...)
  headers.add(read_bytes(path, 8192, 64));  // database header 2
  return fmt::format("duckdb:{}{};h:{}", state_text(*main), companion(path, ".wal"),
                     headers.hex());
}

std::optional<std::string> data_file_marker(const std::string& path) {
  auto main = stat_file(path);
  if (!main)
    return std::nullopt;
  constexpr std::size_t edge = 64 * 1024;
  shape_hash content;
  content.add(read_bytes(path, 0, edge));
  if (main->size > edge)
    content.add(read_bytes(path, main->size - edge, edge));
  return fmt::format("file:{};d:{}", state_text(*main), content.hex());
}

void shape_hash::add(std::string_view part) {
  for (unsigned char c : part) {
    h_ ^= c;
    h_ *= 1099511628211ull;
  }
  h_ ^= 0x1f;  // field separator, so ("ab","c") and ("a","bc") differ
  h_ *= 1099511628211ull;
}

std::string shape_hash::hex() const {
  // As "{:016x}" prints it, without a format per table.
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  std::uint64_t v = h_;
  for (int i = 15; i >= 0; --i, v >>= 4)
    out[static_cast<std::size_t>(i)] = digits[v & 0xf];
  return out;
}

}  // namespace flotilla::sources
