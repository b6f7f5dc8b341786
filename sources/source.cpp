#include "sources/source.hpp"

#include <array>

#include "schema/packed.hpp"
#include "schema/table.hpp"
#include "sources/adapters.hpp"
#include "sources/errors.hpp"

namespace flotilla::sources {

bool source_table::unpack_columns() {
  if (packed_columns.empty())
    return true;
  schema::packed_reader reader;
  auto unpacked = reader.unpack(packed_columns);
  if (!unpacked)
    return false;
  columns.columns = std::move(*unpacked);
  packed_columns.clear();
  packed_columns.shrink_to_fit();
  return true;
}

const source_table* catalog::find(std::string_view name) const {
  for (const auto& t : tables)
    if (t.name == name || t.qualified() == name)
      return &t;
  for (const auto& t : tables)
    if (schema::same_name(t.name, name, schema::name_rule::case_insensitive) ||
        schema::same_name(t.qualified(), name, schema::name_rule::case_insensitive))
      return &t;
  return nullptr;
}

std::unique_ptr<source> open_source(const source_options& options) {
  using factory = std::unique_ptr<source> (*)(const source_options&);
  struct entry {
    std::string_view name;
    factory make;
  };
  static constexpr std::array<entry, 6> registry{{
      {"sqlite", &make_sqlite_source},
      {"duckdb", &make_duckdb_source},
      {"postgres", &make_postgres_source},
      {"postgresql", &make_postgres_source},
      {"csv", &make_file_source},
      {"json", &make_file_source},
  }};
  for (const auto& e : registry)
    if (e.name == options.adapter)
      return e.make(options);
  throw error::unknown_adapter(options.name, options.adapter);
}

}  // namespace flotilla::sources
