#pragma once
/// Stable codes of the event stream (FLT-E…) and of the source-drift gate (FLT-D…).
/// docs/events.md lists every code with its meaning and what to do. Never renumber:
/// scripts and alerting match them.

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "events/fwd.hpp"

namespace flotilla::events {

enum class errc : std::uint16_t {
  // ---- source drift (seed 004), FLT-D0xx -------------------------------------------
  source_drift = 1,        ///< FLT-D001 the landed schema drifted under on_source_drift = fail
  no_observed_schema = 2,  ///< FLT-D002 `schema accept` named a dataset no run observed
  // ---- event delivery, FLT-E0xx (value - 100) --------------------------------------
  broker_unreachable = 101,  ///< FLT-E001 no broker answered in time; events kept in the outbox
  broker_refused = 102,      ///< FLT-E002 a broker refused the events; events kept in the outbox
  sink_config = 103,         ///< FLT-E003 the event sink's settings were rejected
  event_log = 104,           ///< FLT-E004 the run's events.ndjson could not be written
  outbox = 105,              ///< FLT-E005 the outbox in the state store failed
};

/// "FLT-D001", "FLT-E002".
[[nodiscard]] std::string code_name(errc code);

/// True for failures that may go away by themselves (a broker that is down).
[[nodiscard]] bool is_transient(errc code);

struct error {
  errc code = errc::outbox;
  std::string message;  ///< one or more sentences, without the code

  [[nodiscard]] bool transient() const { return is_transient(code); }
  /// "FLT-E001: events not delivered to Kafka ..."
  [[nodiscard]] std::string text() const;
};

template <class T>
using result = std::expected<T, error>;
using status = std::expected<void, error>;

}  // namespace flotilla::events
