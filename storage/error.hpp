#pragma once
/// Errors of the state store. Every failure carries a stable code and a message that
/// names the store's path or the record involved, RocksDB's own reason, and what to do.
/// Transient failures (the lock is held, RocksDB is busy) are kept apart from permanent
/// ones so callers know whether retrying can help.

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "storage/fwd.hpp"

namespace flotilla::storage {

enum class errc : std::uint8_t {
  locked,            ///< another process (or another open in this one) holds the store
  busy,              ///< RocksDB is busy or timed out: retry
  io_error,          ///< reading or writing the files failed (disk full, permissions)
  corruption,        ///< the files are damaged
  not_found,         ///< the store does not exist and may not be created
  version_mismatch,  ///< written by a newer flotilla with an incompatible layout
  invalid_key,       ///< an empty key, or one holding a NUL byte
  invalid_record,    ///< a stored value does not parse as its record kind
  read_only,         ///< a write to a store opened read-only
  internal,          ///< anything else RocksDB reports
};

[[nodiscard]] std::string_view to_string(errc code);

/// True for failures that may go away by themselves, so retrying later can help.
[[nodiscard]] bool is_transient(errc code);

struct error {
  errc code = errc::internal;
  std::string message;

  [[nodiscard]] bool transient() const { return is_transient(code); }

  // Named factories, so every message of a kind reads the same.
  [[nodiscard]] static error locked(std::string_view path, std::string_view reason);
  [[nodiscard]] static error cannot_open(errc code, std::string_view path, std::string_view reason);
  /// What to do about a store that failed so (a damaged one: restore it or move it aside).
  [[nodiscard]] static std::string_view remedy(errc code);
  [[nodiscard]] static error newer_layout(std::string_view path, std::string_view found,
                                          std::string_view supported);
  [[nodiscard]] static error invalid_key(std::string_view what, std::string_view key);
  [[nodiscard]] static error invalid_record(family f, std::string_view key);
  [[nodiscard]] static error operation_failed(errc code, std::string_view operation, family f,
                                              std::string_view key, std::string_view reason);
};

template <class T>
using result = std::expected<T, error>;
using status = std::expected<void, error>;

}  // namespace flotilla::storage
