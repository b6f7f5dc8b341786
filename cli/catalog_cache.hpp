#pragma once
/// Kept source catalogs (state family `catalogs`, one SourceCatalog per source): a
/// source whose change marker covers the whole source (sources::source::file_marker,
/// SQLite) has its catalog read once per change of that marker instead of once per run;
/// a csv/json source, whose tables are one file each, infers only its changed files.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sources/source.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {

/// The record of a catalog just read at `catalog.file_marker` (or, for a source that
/// reuses known tables, without one);
/// nullopt when a column name holds a NUL byte (such a catalog is not kept).
[[nodiscard]] std::optional<storage::pb::SourceCatalog> catalog_record(
    const sources::catalog& catalog, const sources::source_options& source,
    std::string_view reader, const std::string& run_id, std::int64_t now_us);

/// The kept catalog, when `record` was read from this source (adapter and location), by
/// this adapter version (`reader`), at `file_marker`; nullopt otherwise, or when the
/// record does not read back whole (then the caller reads the source). The record's
/// table strings are moved into the catalog. An empty `file_marker` asks for the catalog
/// of a source without one (csv, json: sources::source::known_tables), whose tables each
/// carry a marker of their own.
[[nodiscard]] std::optional<sources::catalog> kept_catalog(storage::pb::SourceCatalog& record,
                                                          const sources::source_options& source,
                                                          std::string_view reader,
                                                          const std::string& file_marker);

}  // namespace flotilla::cli
