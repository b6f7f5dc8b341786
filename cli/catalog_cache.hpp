#pragma once
/// Kept source catalogs (state family `catalogs`, one SourceCatalog per source): a
/// source whose change marker covers the whole source (sources::source::file_marker,
/// SQLite) has its catalog read once per change of that marker instead of once per run.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sources/source.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cli {

/// The record of a catalog just read at `catalog.file_marker` (which must be set);
/// nullopt when a column name holds a NUL byte (such a catalog is not kept).
[[nodiscard]] std::optional<storage::pb::SourceCatalog> catalog_record(
    const sources::catalog& catalog, const sources::source_options& source,
    std::string_view reader, const std::string& run_id, std::int64_t now_us);

/// The kept catalog, when `record` was read from this source (adapter and location), by
/// this adapter version (`reader`), at `file_marker`; nullopt otherwise, or when the
/// record does not read back whole (then the caller reads the source). The record's
/// table strings are moved into the catalog.
[[nodiscard]] std::optional<sources::catalog> kept_catalog(storage::pb::SourceCatalog& record,
                                                          const sources::source_options& source,
                                                          std::string_view reader,
                                                          const std::string& file_marker);

}  // namespace flotilla::cli
