#include "cli/catalog_cache.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "schema/types.hpp"

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
  std::string packed;
  for (const auto& t : catalog.tables) {
    auto* ct = r.add_tables();
    ct->set_schema(t.schema);
    ct->set_name(t.name);
    ct->set_has_marker(t.marker.has_value());
    if (t.marker)
      ct->set_marker(*t.marker);
    ct->set_inferred(t.inferred);
    packed.clear();
    for (const auto& c : t.columns.columns) {
      if (c.name.find('\0') != std::string::npos)
        return std::nullopt;  // not packable: such a catalog is simply not kept
      packed += c.name;
      packed += '\0';
      packed += schema::to_string(c.type);
      packed += '\0';
      packed += static_cast<char>('0' + (c.nullable ? 1 : 0) + (c.key ? 2 : 0));
    }
    ct->set_columns(packed);
  }
  return r;
}

std::optional<sources::catalog> kept_catalog(const storage::pb::SourceCatalog& record,
                                             const sources::source_options& source,
                                             std::string_view reader,
                                             const std::string& file_marker) {
  if (file_marker.empty() || reader.empty() || record.file_marker() != file_marker ||
      record.adapter() != source.adapter || record.location() != source.path ||
      record.reader() != reader_of(reader))
    return std::nullopt;
  // A fleet's tables share a handful of types: parse each spelling once.
  std::vector<std::pair<std::string, schema::portable_type>> types;
  auto type_of = [&](std::string_view text) -> std::optional<schema::portable_type> {
    for (const auto& [spelling, type] : types)
      if (spelling == text)
        return type;
    auto parsed = schema::parse_type(text);
    if (!parsed)
      return std::nullopt;
    types.emplace_back(std::string(text), *parsed);
    return *parsed;
  };
  sources::catalog out;
  out.file_marker = file_marker;
  out.tables.reserve(static_cast<std::size_t>(record.tables_size()));
  for (const auto& ct : record.tables()) {
    sources::source_table t;
    t.schema = ct.schema();
    t.name = ct.name();
    if (ct.has_marker()) {
      // Table markers begin with the file marker they were read at.
      if (ct.marker().compare(0, file_marker.size(), file_marker) != 0)
        return std::nullopt;
      t.marker = ct.marker();
    }
    t.inferred = ct.inferred();
    std::string_view packed = ct.columns();
    // Two NULs per column: one allocation for the table's columns.
    t.columns.columns.reserve(
        static_cast<std::size_t>(std::count(packed.begin(), packed.end(), '\0')) / 2);
    while (!packed.empty()) {
      const auto name_end = packed.find('\0');
      if (name_end == std::string_view::npos)
        return std::nullopt;
      const auto type_end = packed.find('\0', name_end + 1);
      if (type_end == std::string_view::npos || type_end + 1 >= packed.size())
        return std::nullopt;
      const char flags = packed[type_end + 1];
      if (flags < '0' || flags > '3')
        return std::nullopt;
      auto type = type_of(packed.substr(name_end + 1, type_end - name_end - 1));
      if (!type)
        return std::nullopt;
      const int bits = flags - '0';
      t.columns.columns.push_back(schema::column{std::string(packed.substr(0, name_end)), *type,
                                                 (bits & 1) != 0, (bits & 2) != 0});
      packed.remove_prefix(type_end + 2);
    }
    out.tables.push_back(std::move(t));
  }
  return out;
}

}  // namespace flotilla::cli
