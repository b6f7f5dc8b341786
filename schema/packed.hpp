#pragma once
/// A table's columns packed into one string: per column its name, NUL, its portable type
/// as to_string prints it, NUL, and one flag byte ('0' + 1 if nullable + 2 if key).
/// Kept catalogs store columns so (docs/state.md, SourceCatalog), and a table taken from
/// one carries them packed until it is copied or planned: a pruned table never needs
/// them, and unpacking a fleet's columns was most of reading its kept catalogs.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schema/table.hpp"

namespace flotilla::schema {

/// The packed form of `columns`; nullopt when a name holds a NUL byte (not packable).
[[nodiscard]] std::optional<std::string> pack_columns(const std::vector<column>& columns);

/// Reads packed columns, parsing each distinct type spelling once: a fleet's tables share
/// a handful of types. One reader serves many tables.
class packed_reader {
 public:
  /// The columns, in order; nullopt when `packed` is not well formed.
  [[nodiscard]] std::optional<std::vector<column>> unpack(std::string_view packed);

 private:
  std::optional<portable_type> type_of(std::string_view spelling);
  /// Calls fn(name, type, flags) per column; false when malformed.
  template <class Fn>
  bool each(std::string_view packed, Fn&& fn);

  std::vector<std::pair<std::string, portable_type>> types_;
};

}  // namespace flotilla::schema
