#pragma once
/// Forward declarations of the events module.

#include <cstdint>

namespace flotilla::events {

enum class errc : std::uint16_t;
struct error;
class event_log;
class event_sink;
class kafka_sink;
class outbox_relay;
class run_events;
struct drift_input;
struct drift_verdict;
struct column_change;

}  // namespace flotilla::events
