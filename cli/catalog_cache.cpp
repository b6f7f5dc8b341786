#include "cli/catalog_cache.hpp"

#include <unordered_map>

#include "schema/types.hpp"

namespace flotilla::cli {

storage::pb::SourceCatalog catalog_record(const sources::catalog& catalog,
                                          const sources::source_options& source,
                                          std::string_view reader, const std::string& run_id,
                                          std::int64_t now_us) {
  storage::pb::SourceCatalog r;
  r.set_file_marker(catalog.file_marker.value_or(""));
  r.set_adapter(source.adapter);
  r.set_location(source.path);
  r.set_reader(std::string(reader));
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
    ct->mutable_columns()->Reserve(static_cast<int>(t.columns.columns.size()));
    for (const auto& c : t.columns.columns) {
      auto* oc = ct->add_columns();
      oc->set_name(c.name);
      oc->set_type(schema::to_string(c.type));
      oc->set_nullable(c.nullable);
      oc->set_key(c.key);
    }
  }
  return r;
}

std::optional<sources::catalog> kept_catalog(const storage::pb::SourceCatalog& record,
                                             const sources::source_options& source,
                                             std::string_view reader,
                                             const std::string& file_marker) {
  if (file_marker.empty() || reader.empty() || record.file_marker() != file_marker ||
      record.adapter() != source.adapter || record.location() != source.path ||
      record.reader() != reader)
    return std::nullopt;
  // A fleet's tables share a handful of types: parse each spelling once.
  std::unordered_map<std::string, schema::portable_type> types;
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
    t.columns.columns.reserve(static_cast<std::size_t>(ct.columns_size()));
    for (const auto& oc : ct.columns()) {
      auto found = types.find(oc.type());
      if (found == types.end()) {
        auto parsed = schema::parse_type(oc.type());
        if (!parsed)
          return std::nullopt;
        found = types.emplace(oc.type(), *parsed).first;
      }
      t.columns.columns.push_back(schema::column{oc.name(), found->second, oc.nullable(), oc.key()});
    }
    out.tables.push_back(std::move(t));
  }
  return out;
}

}  // namespace flotilla::cli
