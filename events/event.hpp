#pragma once
/// The run's events: builders for every kind, and their two encodings. An event is a
/// `flotilla::events::v1::Event` (proto/events.proto); the builders fill its payload
/// and its source/table, and run_events (run_events.hpp) stamps run id, project,
/// sequence and timestamp when the event is emitted. docs/events.md describes every field.
///
/// JSON and Protobuf carry the same fields: the JSON form is derived from the message
/// by reflection, so a field appended to events.proto appears in both at once.

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <variant>
#include <utility>
#include <vector>

#include "proto/events.pb.h"

namespace flotilla::events {

namespace pb = flotilla::events::v1;

// ---- builders: one per event kind ------------------------------------------------------

struct run_started_info {
  std::string command = "run";         ///< run | retry | stream | ...
  std::vector<std::string> filters{};  ///< the --filter arguments, "key=value"
  std::uint64_t tables_selected = 0;
  std::string retry_of{};  ///< retry: the run it retries
};

struct run_totals {
  std::string status{};  ///< success | partial | failed
  std::uint64_t tables_copied = 0;
  std::uint64_t tables_pruned = 0;
  std::uint64_t tables_failed = 0;
  std::uint64_t tables_skipped = 0;
  std::uint64_t tables_held = 0;
  std::uint64_t tables_checked = 0;
  std::uint64_t tables_drifted = 0;
  std::int64_t duration_us = 0;
  /// Sources the run could not read at all: (source, error), in config order.
  std::vector<std::pair<std::string, std::string>> source_errors{};
};

struct table_outcome {
  std::string status{};  ///< copied | pruned | failed | skipped | held
  std::uint64_t rows = 0;
  std::string error{};
  std::string error_code{};
  std::int64_t duration_us = 0;
  std::string target_table{};  ///< "staging__us_west__shop.orders"
  std::uint64_t recovered_rows = 0;  ///< an earlier run's commit state did not record
  std::string recovered_run_id{};    ///< that run; empty: none
};

struct schema_action_info {
  std::string action{};  ///< add_columns | alter_column_types | drop_and_recreate | widen | rebuild
  std::string column{};
  std::string from{};    ///< type before, empty for an added column
  std::string to{};      ///< type after
  std::string reason{};  ///< "column 'status' changed STRING -> INT"
  std::string sql{};     ///< the DDL that ran
  std::vector<std::string> also{};  ///< drop_and_recreate: the table's other changes
};

struct contract_violation_info {
  std::string column{};
  std::string expected{};  ///< declared type, empty for an undeclared column
  std::string actual{};    ///< source type, empty for a missing column
  std::string reason{};
  std::string error_code{};
};

struct review_info {
  std::string target{};
  std::string kind{};  ///< rename_column | alter_type | drop_column | key_change | ...
  std::string source_change{};
  std::string reason{};
  std::string proposed_ddl{};
  std::string data_consequence{};
  bool requires_resync = false;
  std::string position{};
};

struct undelivered_info {
  std::string sink{};         ///< "kafka"
  std::string destination{};  ///< "brokers 127.0.0.1:9092, topic flotilla.events"
  std::string error{};
  std::string error_code{};
  std::uint64_t pending = 0;
};

/// Run-level events (no source or table; keyed by the run id).
[[nodiscard]] pb::Event run_started(const run_started_info& info);
[[nodiscard]] pb::Event run_finished(const run_totals& totals);
[[nodiscard]] pb::Event events_undelivered(const undelivered_info& info);

/// Table events. `source` is the [sources.<name>] key, `table` the table's name on the
/// source ("public.orders"); together they are the event's Kafka key.
[[nodiscard]] pb::Event table_started(std::string_view source, std::string_view table,
                                      std::string_view target_table, std::string_view mode);
[[nodiscard]] pb::Event table_finished(std::string_view source, std::string_view table,
                                       const table_outcome& outcome);
[[nodiscard]] pb::Event schema_action(std::string_view source, std::string_view table,
                                      const schema_action_info& info);

/// A table_started or table_finished event by its fields, viewed rather than owned: a
/// run's two events per table, whose line is written straight from them when no outbox
/// keeps the events (run_events::emit_all). Its strings must outlive that call.
struct table_event_line {
  bool finished = false;             ///< table_finished; else table_started
  std::string_view source{};
  std::string_view table{};
  std::string_view target_table{};
  std::string_view mode{};           ///< table_started
  std::string_view status{};         ///< table_finished, and the fields below
  std::uint64_t rows = 0;
  std::string_view error{};
  std::string_view error_code{};
  std::int64_t duration_us = 0;
  std::uint64_t recovered_rows = 0;     ///< table_finished: see TableFinished
  std::string_view recovered_run_id{};
  /// When it happened, µs since the epoch; 0: when it is emitted.
  std::int64_t timestamp_us = 0;

  /// The event table_started() or table_finished() builds from the same fields.
  [[nodiscard]] pb::Event to_event() const;
};
[[nodiscard]] pb::Event contract_violation(std::string_view source, std::string_view table,
                                           const contract_violation_info& info);
[[nodiscard]] pb::Event review_required(std::string_view source, std::string_view table,
                                        const review_info& info);
/// A warning of the table (its plan's) or of the source (`table` and `target_table` empty
/// when it names no table), in the run JSON's words.
[[nodiscard]] pb::Event warning(std::string_view source, std::string_view table,
                                std::string_view target_table, std::string_view message);
// source_drift_detected: see source_drift.hpp (built from the gate's verdict).

// ---- keys and encodings --------------------------------------------------------------

/// The partition key: "<source>.<table>" for table events, the run id for run-level ones.
[[nodiscard]] std::string event_key(const pb::Event& e);

/// The payload's field name, as `type` holds it ("table_finished"); empty when unset.
[[nodiscard]] std::string_view payload_name(const pb::Event& e);

/// One NDJSON line (no newline): every envelope field and the set payload under its
/// field name, with proto field names; numbers as JSON numbers; fields always present.
[[nodiscard]] std::string to_json(const pb::Event& e);
/// to_json(e) appended to `out`.
void append_json(std::string& out, const pb::Event& e);
/// For table_started and table_finished only: the line `e` would have with this run id
/// and project, written without setting them on `e` (a run's batch of table events when
/// no outbox keeps them). Returns false, writing nothing, for any other event.
[[nodiscard]] bool append_json(std::string& out, const pb::Event& e, std::string_view run_id,
                               std::string_view project);
/// The line of `t` as to_json writes it once stamped with these values.
void append_json(std::string& out, const table_event_line& t, std::string_view run_id,
                 std::uint64_t sequence, std::int64_t timestamp_us, std::string_view project);
/// Appends `s` as a JSON string, quoted and escaped as nlohmann's dump escapes it
/// (invalid UTF-8 replaced by U+FFFD): for other JSON written without a tree.
void append_json_string(std::string& out, std::string_view s);
/// The same line built as a JSON tree and dumped by nlohmann: slower, kept as the
/// reference to_json's output is checked against.
[[nodiscard]] std::string to_json_tree(const pb::Event& e);
/// Reads a line written by to_json (unknown fields are ignored, so newer lines parse).
[[nodiscard]] std::expected<pb::Event, std::string> from_json(std::string_view line);

/// The serialized `flotilla.events.v1.Event`. Protobuf string fields hold UTF-8: a value
/// that is not (a column name from a SQLite file can hold any byte) is sent with its bad
/// bytes replaced by U+FFFD, as the JSON form writes it, so every consumer parses it and
/// both forms carry the same text.
[[nodiscard]] std::string to_protobuf(const pb::Event& e);
/// Replaces what is not UTF-8 in every string field of `m` (nested messages too) with
/// U+FFFD, exactly as the JSON forms do; false when every one was UTF-8 already (nothing
/// changed).
bool replace_invalid_utf8(google::protobuf::Message& m);
[[nodiscard]] bool all_utf8(const google::protobuf::Message& m);
[[nodiscard]] std::expected<pb::Event, std::string> from_protobuf(std::string_view bytes);

}  // namespace flotilla::events
