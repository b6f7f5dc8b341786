#include "cli/catalog_cache.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "schema/packed.hpp"

namespace flotilla::cli {
namespace {

/// The record's `reader`: the adapter's catalog version and this record layout's, so a
/// record of another layout (columns as ObservedColumn messages) is never read as this.
std::string reader_of(std::string_view catalog_version) {
  return std::string(catalog_version) + ";record/2";
}

}  // namespace

std::optional<storage::pb::SourceCatalog> catalog_record(const sources::catalog& catalog,
                                                        const sources::source_options& source,
                                                        std::string_view reader,
                                                        const std::string& run_id,
                                                        std::int64_t now_us) {
  storage::pb::SourceCatalog r;
  r.set_file_marker(catalog.file_marker.value_or(""));
  r.set_adapter(source.adapter);
  r.set_location(source.path);
  r.set_reader(reader_of(reader));
  r.set_run_id(run_id);
  r.set_recorded_at_us(now_us);
  r.mutable_tables()->Reserve(static_cast<int>(catalog.tables.size()));
  for (const auto& t : catalog.tables) {
    auto* ct = r.add_tables();
    ct->set_schema(t.schema);
    ct->set_name(t.name);
    ct->set_has_marker(t.marker.has_value());
    if (t.marker)
      ct->set_marker(*t.marker);
    ct->set_inferred(t.inferred);
    ct->set_reader(t.reader);
    ct->set_no_rows(t.no_rows);
    if (!t.packed_columns.empty()) {
      ct->set_columns(t.packed_columns);
      continue;
    }
    auto packed = schema::pack_columns(t.columns.columns);
    if (!packed)
      return std::nullopt;  // not packable: such a catalog is simply not kept
    ct->set_columns(std::move(*packed));
  }
  return r;
}

std::optional<sources::catalog> kept_catalog(storage::pb::SourceCatalog& record,
                                             const sources::source_options& source,
                                             std::string_view reader,
                                             const std::string& file_marker) {
  if (reader.empty() || record.file_marker() != file_marker ||
      record.adapter() != source.adapter || record.location() != source.path ||
      record.reader() != reader_of(reader))
    return std::nullopt;
  // The columns stay packed (sources::source_table::packed_columns), unpacked by the fleet
  // only for the tables it copies or plans. They are not checked here: the record is of
  // this build's layout (its reader says so) and RocksDB checksums what it stores; a
  // table whose columns still do not unpack fails with what to do (actors/fleet.cpp).
  sources::catalog out;
  if (!file_marker.empty())
    out.file_marker = file_marker;
  out.tables.reserve(static_cast<std::size_t>(record.tables_size()));
  // The record's strings are moved out, not copied: a fleet's record holds a packed
  // column list and a marker per table.
  for (auto& ct : *record.mutable_tables()) {
    sources::source_table& t = out.tables.emplace_back();
    t.schema = std::move(*ct.mutable_schema());
    t.name = std::move(*ct.mutable_name());
    if (ct.has_marker()) {
      // Table markers begin with the file marker they were read at.
      if (ct.marker().compare(0, file_marker.size(), file_marker) != 0)
        return std::nullopt;
      t.marker = std::move(*ct.mutable_marker());
    }
    t.inferred = ct.inferred();
    t.reader = std::move(*ct.mutable_reader());
    t.no_rows = ct.no_rows();
    t.packed_columns = std::move(*ct.mutable_columns());
  }
  return out;
}

}  // namespace flotilla::cli
