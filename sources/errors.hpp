#pragma once
/// Named factories for the errors the adapters throw, so every message has the same
/// shape: what failed, for which source and table, why (the engine's own words), and
/// what to do about it.

#include <string>
#include <string_view>

#include "sources/source.hpp"

namespace flotilla::sources::error {

/// `options.adapter` is none of the known adapters.
[[nodiscard]] source_error unknown_adapter(std::string_view source, std::string_view adapter);
/// A required option (path, dsn) is empty.
[[nodiscard]] source_error missing_option(std::string_view source, std::string_view adapter,
                                          std::string_view option);
/// A file or database could not be opened. `what`: "sqlite file /data/a.db".
[[nodiscard]] source_error cannot_open(std::string_view source, std::string_view what,
                                       std::string_view reason, std::string_view fix);
/// A PostgreSQL server could not be reached; the DSN is shown without its password.
[[nodiscard]] source_error cannot_connect(std::string_view source, std::string_view dsn,
                                          std::string_view reason);
/// The catalog query failed.
[[nodiscard]] source_error catalog_failed(std::string_view source, std::string_view where,
                                          std::string_view reason, std::string_view fix);
/// Reading a table's rows failed. `where`: the table's file or "" for databases.
[[nodiscard]] source_error read_failed(std::string_view source, std::string_view table,
                                       std::string_view where, std::string_view reason,
                                       std::string_view fix);
/// A stored value cannot be represented as the column's portable type.
[[nodiscard]] source_error bad_value(std::string_view source, std::string_view table,
                                     std::string_view column, std::string_view value,
                                     const schema::portable_type& type, std::uint64_t row);
/// The request names no table, or a column the table lacks.
[[nodiscard]] source_error bad_request(std::string_view source, std::string_view what);

/// The DSN with any password replaced by "***" (URI user info, `password=` keys and
/// query parameters).
[[nodiscard]] std::string redact_dsn(std::string_view dsn);

}  // namespace flotilla::sources::error
