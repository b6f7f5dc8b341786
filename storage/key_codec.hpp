#pragma once
/// Key codec of the state store. RocksDB orders keys bytewise, so every key is built
/// here and sorts the way its readers scan it:
///
///   family      key                                              value
///   watermarks  "<source>.<table>"                               Watermark
///   markers     "<source>.<table>"                               ChangeMarker
///   schemas     "<source>.<table>"                               SchemaBaseline
///   tables      "<source>.<table>"                               TableResult
///   staged      "<source>.<table>"                               StagedEntry
///   positions   "<source>" or "<source>.<table>"                 CdcPosition
///   catalogs    "<source>"                                       SourceCatalog
///   runs        'r' run_id                                       RunRecord
///               'l'                                              latest run id (text)
///               't' be64(started_at_us) run_id                   empty (recency index)
///   holds       'h' target NUL table                             HoldRecord
///               'c' target NUL table                             be64(last sequence)
///               'q' target NUL table NUL be64(sequence)          HeldChange
///               'v' target NUL table                             review note (bytes)
///               'f' target NUL table NUL be64(created_at_us)     FinishedReview
///   outbox      be64(sequence)                                   OutboxEntry
///   default     "format"                                         layout version (text)
///
/// be64 is an unsigned 64-bit number, big-endian, so numeric order is byte order.
/// Names never hold NUL, which makes NUL a separator that sorts before every other
/// byte: all changes of one held table are contiguous and in sequence order.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flotilla::storage::keys {

/// "<source>.<table>": the key of every per-table record. The table part may itself be
/// qualified ("shop.public.orders"); keys are never split again.
[[nodiscard]] std::string table_key(std::string_view source, std::string_view table);

/// A usable name or key part: not empty and without NUL bytes.
[[nodiscard]] bool valid_name(std::string_view name);

void append_be64(std::string& out, std::uint64_t value);
[[nodiscard]] std::string be64(std::uint64_t value);
/// The number in exactly 8 big-endian bytes; nullopt for any other length.
[[nodiscard]] std::optional<std::uint64_t> read_be64(std::string_view bytes);

// runs
inline constexpr char run_record_tag = 'r';
inline constexpr char run_index_tag = 't';
inline constexpr std::string_view latest_run = "l";
/// "<run id>\0<status>" of the run latest_run names, written with it.
inline constexpr std::string_view latest_run_status = "s";
[[nodiscard]] std::string run_record(std::string_view run_id);
[[nodiscard]] std::string run_index(std::int64_t started_at_us, std::string_view run_id);
struct run_index_parts {
  std::int64_t started_at_us = 0;
  std::string run_id;
};
[[nodiscard]] std::optional<run_index_parts> parse_run_index(std::string_view key);

// holds
inline constexpr char hold_record_tag = 'h';
inline constexpr char hold_counter_tag = 'c';
inline constexpr char hold_queue_tag = 'q';
[[nodiscard]] std::string hold_record(std::string_view target, std::string_view table);
[[nodiscard]] std::string hold_counter(std::string_view target, std::string_view table);
/// The prefix every kept change of one held table starts with.
[[nodiscard]] std::string hold_queue_prefix(std::string_view target, std::string_view table);
[[nodiscard]] std::string hold_queue(std::string_view target, std::string_view table,
                                     std::uint64_t sequence);
struct hold_parts {
  std::string target;
  std::string table;
};
/// Splits a hold record key ('h' target NUL table).
[[nodiscard]] std::optional<hold_parts> parse_hold_record(std::string_view key);

// outbox
[[nodiscard]] inline std::string outbox(std::uint64_t sequence) { return be64(sequence); }

/// The smallest key greater than every key starting with `prefix` (for upper bounds);
/// empty when no such key exists (prefix of only 0xff bytes).
[[nodiscard]] std::string prefix_successor(std::string_view prefix);

/// A key made printable for messages: bytes outside ASCII 0x20..0x7e as \xNN.
[[nodiscard]] std::string printable(std::string_view key);

}  // namespace flotilla::storage::keys
