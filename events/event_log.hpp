#pragma once
/// The run's NDJSON event file, `.flotilla/runs/<run_id>/events.ndjson`: one JSON
/// object per line (event.hpp's to_json), in the order the events were emitted.
///
/// Ownership and threads: one event_log per run, owned by run_events (or a test);
/// append() may be called from any thread. Each append (one line, or several joined by
/// newlines) goes to the file in one write(2) on an O_APPEND descriptor, so its lines
/// are on disk (in the page cache) when append returns and a crash never leaves a half
/// line followed by a whole one.
/// Shutdown: the destructor closes the file.

#include <filesystem>
#include <memory>
#include <string_view>

#include "events/errc.hpp"

namespace flotilla::events {

class event_log {
 public:
  /// `<state_dir>/runs/<run_id>/events.ndjson`.
  [[nodiscard]] static std::filesystem::path path_for(const std::filesystem::path& state_dir,
                                                      std::string_view run_id);

  /// Opens (creating the file and its directories) for appending. FLT-E004 on failure,
  /// naming the path and the system's reason.
  [[nodiscard]] static result<event_log> open(const std::filesystem::path& file);
  /// A log whose file could not be opened (`why`, from open()): every append returns
  /// `why`, so a run that cannot write its file still hands its events to the outbox.
  [[nodiscard]] static event_log unopened(const std::filesystem::path& file, error why);

  event_log(event_log&&) noexcept;
  event_log& operator=(event_log&&) noexcept;
  ~event_log();

  /// Writes `line` and a newline. The line must not contain a newline itself.
  [[nodiscard]] status append(std::string_view line);

  [[nodiscard]] const std::filesystem::path& path() const;

 private:
  struct impl;
  explicit event_log(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace flotilla::events
