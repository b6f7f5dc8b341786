#pragma once
/// A change event of the stream (proto/changes.proto) and its two encodings: a JSON
/// object with the proto's field names, or the serialized protobuf message.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/model.hpp"

namespace flotilla::cdc {

struct change_value {
  std::string column;
  std::optional<std::string> text;  ///< nullopt: NULL
  bool unchanged = false;           ///< an unchanged TOAST value, not sent by the source
};

struct change_event {
  std::string type;  ///< row_change | truncate | schema_change
  std::string op;    ///< insert | update | delete | read
  std::string project;
  std::string source;
  std::string table;
  std::string target;
  std::string position;
  /// The change's place in its source transaction, from 1 (0: none, a snapshot row): with
  /// `position`, the transaction's commit, it names one change.
  std::uint32_t change = 0;
  std::vector<change_value> key;
  std::vector<change_value> row;
  std::vector<change_value> old_key;
  std::string ddl;
  std::string outcome;
  std::vector<std::string> columns;
};

[[nodiscard]] std::string encode(const change_event& e, config::event_format format);

}  // namespace flotilla::cdc
