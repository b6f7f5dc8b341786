#pragma once
/// The adapter registry's entries: one factory per backend, each in its own file.
/// Internal to sources/; callers use open_source().

#include <memory>

#include "sources/source.hpp"

namespace flotilla::sources {

[[nodiscard]] std::unique_ptr<source> make_sqlite_source(const source_options& options);
[[nodiscard]] std::unique_ptr<source> make_duckdb_source(const source_options& options);
[[nodiscard]] std::unique_ptr<source> make_postgres_source(const source_options& options);
/// csv and json: `options.adapter` says which files form tables.
[[nodiscard]] std::unique_ptr<source> make_file_source(const source_options& options);

}  // namespace flotilla::sources
