#pragma once
/// Text encoding checks shared by the sinks (pure).

#include <string_view>

namespace flotilla::schema {

/// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF), as DuckDB's VARCHAR and PostgreSQL's UTF8 text require. ASCII runs are
/// skipped eight bytes at a time.
[[nodiscard]] bool valid_utf8(std::string_view s);

}  // namespace flotilla::schema
