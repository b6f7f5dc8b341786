#include "events/event_log.hpp"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>

namespace flotilla::events {

struct event_log::impl {
  std::filesystem::path path;
  int fd = -1;
  std::mutex mu;
  std::optional<error> unopened;  ///< why the file could not be opened

  ~impl() {
    if (fd >= 0)
      ::close(fd);
  }
};

std::filesystem::path event_log::path_for(const std::filesystem::path& state_dir,
                                          std::string_view run_id) {
  return state_dir / "runs" / std::string(run_id) / "events.ndjson";
}

result<event_log> event_log::open(const std::filesystem::path& file) {
  auto fail = [&](std::string_view what, std::string_view reason) {
    return std::unexpected(
        error{errc::event_log,
              fmt::format("cannot {} the event file '{}': {}; check that the state directory is "
                          "writable and the disk is not full",
                          what, file.string(), reason)});
  };
  std::error_code ec;
  if (file.has_parent_path())
    std::filesystem::create_directories(file.parent_path(), ec);
  if (ec)
    return fail("create the directory of", ec.message());
  auto p = std::make_unique<impl>();
  p->path = file;
  p->fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (p->fd < 0)
    return fail("open", std::strerror(errno));
  return event_log(std::move(p));
}

event_log event_log::unopened(const std::filesystem::path& file, error why) {
  auto p = std::make_unique<impl>();
  p->path = file;
  p->unopened = std::move(why);
  return event_log(std::move(p));
}

event_log::event_log(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
event_log::event_log(event_log&&) noexcept = default;
event_log& event_log::operator=(event_log&&) noexcept = default;
event_log::~event_log() = default;

const std::filesystem::path& event_log::path() const { return impl_->path; }

status event_log::append(std::string_view line) {
  std::lock_guard lock(impl_->mu);
  if (impl_->unopened)
    return std::unexpected(*impl_->unopened);
  // The line and its newline in one writev: a whole run's table events are several
  // megabytes, which are not copied just to add one byte.
  static const char newline = '\n';
  const std::size_t total = line.size() + 1;
  std::size_t done = 0;
  while (done < total) {
    iovec parts[2];
    int count = 0;
    if (done < line.size())
      parts[count++] = {const_cast<char*>(line.data() + done), line.size() - done};
    parts[count++] = {const_cast<char*>(&newline), 1};
    ssize_t n = ::writev(impl_->fd, parts, count);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return std::unexpected(
          error{errc::event_log, fmt::format("cannot write the event file '{}': {}; check that "
                                             "the disk is not full",
                                             impl_->path.string(), std::strerror(errno))});
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace flotilla::events
