// DuckDB adapter: a database file opened read-only through the C API.
//
// The database instance is opened on first use and shared by every thread using this
// source (and by other sources on the same file, through DuckDB's instance cache); each
// catalog read or table read uses its own connection. While the instance is open it holds
// DuckDB's file lock, so a writer in another process cannot open the file read-write
// until the source is destroyed at the end of the run.

#include <mutex>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "sources/adapters.hpp"
#include "sources/duckdb_common.hpp"
#include "sources/errors.hpp"
#include "sources/marker.hpp"
#include "sources/sql_text.hpp"
#include "sources/type_mapping.hpp"

namespace flotilla::sources {
namespace {

class duckdb_source final : public source {
 public:
  explicit duckdb_source(source_options options) : options_(std::move(options)) {}

  [[nodiscard]] std::string_view adapter() const override { return "duckdb"; }

  [[nodiscard]] catalog read_catalog() override {
    // The marker first: a write that lands after this point changes the next marker.
    const std::optional<std::string> file = duckdb_file_marker(options_.path);
    // One query for every table and view, with primary keys from duckdb_constraints().
    static constexpr const char* sql =
        "SELECT c.schema_name, c.table_name, c.column_name, c.data_type, "
        "       CAST(c.is_nullable AS VARCHAR), "
        "       CAST(coalesce(list_contains(k.constraint_column_names, c.column_name), false) "
        "            AS VARCHAR), "
        "       CAST(v.view_name IS NOT NULL AS VARCHAR) "
        "FROM duckdb_columns() AS c "
        "LEFT JOIN duckdb_views() AS v ON v.database_name = c.database_name "
        " AND v.schema_name = c.schema_name AND v.view_name = c.table_name "
        "LEFT JOIN (SELECT database_name, schema_name, table_name, constraint_column_names "
        "           FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY') AS k "
        "  ON k.database_name = c.database_name AND k.schema_name = c.schema_name "
        " AND k.table_name = c.table_name "
        "WHERE c.database_name = current_database() AND NOT c.internal "
        "ORDER BY c.schema_name, c.table_name, c.column_index";
    std::vector<std::vector<std::optional<std::string>>> rows;
    try {
      duck::connection con(db());
      rows = con.strings(sql);
    } catch (const duck::failure& e) {
      throw error::catalog_failed(options_.name, where(), e.what(),
                                  "check that the file is a DuckDB database");
    }
    catalog out;
    shape_hash shape;
    // A view has no marker: what it reads may change while the file does not (a CSV it
    // reads with read_csv, now(), another attached file), so it is copied on every run.
    bool view = false;
    auto finish = [&] {
      if (!out.tables.empty() && file && !view)
        out.tables.back().marker = *file + ";s:" + shape.hex();
    };
    for (auto& row : rows) {
      std::string schema_name = row[0].value_or("");
      std::string table = row[1].value_or("");
      if (out.tables.empty() || out.tables.back().name != table ||
          out.tables.back().schema != schema_name) {
        finish();
        shape = shape_hash{};
        source_table t;
        t.schema = std::move(schema_name);
        t.name = std::move(table);
        out.tables.push_back(std::move(t));
        view = row[6].value_or("false") == "true";
      }
      schema::column c;
      c.name = row[2].value_or("");
      const std::string declared = row[3].value_or("");
      c.type = map_duckdb_type(declared);
      c.nullable = row[4].value_or("true") == "true";
      c.key = row[5].value_or("false") == "true";
      shape.add(c.name);
      shape.add(declared);
      shape.add(c.nullable ? "null" : "not null");
      shape.add(c.key ? "key" : "");
      out.tables.back().columns.columns.push_back(std::move(c));
    }
    finish();
    return out;
  }

  read_result read(const read_request& request, const batch_consumer& consume) override {
    if (request.table == nullptr)
      throw error::bad_request(options_.name, "read request names no table");
    const source_table& t = *request.table;
    const std::string qualified = t.qualified();
    duck::scan_spec spec;
    spec.relation = (t.schema.empty() ? "" : quote_ident(t.schema) + ".") + quote_ident(t.name);
    spec.request = &request;
    spec.source = options_.name;
    spec.table = qualified;
    spec.where = options_.path;
    spec.fix = "check that the table and its columns still exist";
    try {
      duck::connection con(db());
      return duck::scan(con, spec, consume);
    } catch (const duck::failure& e) {
      throw error::read_failed(options_.name, qualified, options_.path, e.what(), spec.fix);
    }
  }

 private:
  [[nodiscard]] std::string where() const { return "duckdb file " + options_.path; }

  const duck::database& db() {
    std::lock_guard lock(mutex_);
    if (!db_) {
      try {
        db_.emplace(duck::database::open_read_only(options_.path));
      } catch (const duck::failure& e) {
        // DuckDB's message may carry a stack trace (an internal error replaying a WAL):
        // the reason is its first paragraph.
        std::string reason = e.what();
        if (const auto trace = reason.find("\n\nStack Trace"); trace != std::string::npos)
          reason.erase(trace);
        if (const auto trace = reason.find("Stack Trace:"); trace != std::string::npos)
          reason.erase(trace);
        if (reason.size() > 600)
          reason = reason.substr(0, 600) + "...";
        const bool locked = reason.find("Could not set lock") != std::string::npos ||
                            reason.find("Conflicting lock") != std::string::npos;
        const bool damaged = reason.find("Corrupt") != std::string::npos ||
                             reason.find("checksum") != std::string::npos ||
                             reason.find("WAL") != std::string::npos ||
                             reason.find("INTERNAL") != std::string::npos ||
                             reason.find("version") != std::string::npos;
        throw error::cannot_open(
            options_.name, where(), reason,
            locked ? "another process has the file open for writing; it can be read once that "
                     "process closes it"
            : damaged ? "DuckDB cannot read the file (or its .wal) as it is: check it with the "
                        "DuckDB version that wrote it, and restore it from a copy if it is damaged"
                      : "check path and that the file is a DuckDB database");
      }
    }
    return *db_;
  }

  source_options options_;
  std::mutex mutex_;
  std::optional<duck::database> db_;
};

}  // namespace

std::unique_ptr<source> make_duckdb_source(const source_options& options) {
  if (options.path.empty())
    throw error::missing_option(options.name, "duckdb", "path");
  if (!stat_file(options.path))
    throw error::cannot_open(options.name, "duckdb file " + options.path, "no such file",
                             "check path");
  return std::make_unique<duckdb_source>(options);
}

}  // namespace flotilla::sources
