#pragma once
// Ctrl-C and SIGTERM for the long verbs (run, retry, stream): the first asks the work to
// stop cleanly; a second one ends the process at once, after a line saying what that
// leaves. The same signal repeated within a second counts once: `timeout` sends SIGTERM
// to its child and then to the child's process group, and a scheduler's stop should not
// turn into a kill.
#include <atomic>

namespace flotilla::cli {

/// Sets `stop` on SIGINT or SIGTERM, writing `first_message` (a static string, ending
/// with a newline; none when empty) to stderr, so the user knows the stop was taken; on a
/// later one (a second or more after the first), writes `second_message` (likewise) and
/// ends the process by that signal.
void on_stop_signals(std::atomic<bool>& stop, const char* second_message,
                     const char* first_message = "");

/// What the next signals say from now on, as the work moves to another stage (a run
/// that has committed its tables and delivers its events). Static strings, as above.
void set_stop_messages(const char* second_message, const char* first_message);

}  // namespace flotilla::cli
