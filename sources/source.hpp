#pragma once
/// A source adapter: reads a source's catalog (once per run, one query for all its
/// tables), offers change markers for prune_unchanged, and reads rows in batches.
///
/// Adapters are blocking; they run only inside detached I/O actors (never on the
/// scheduler's threads). Errors are thrown as source_error and caught at the actor
/// boundary, which turns them into that table's failure.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "schema/rows.hpp"
#include "schema/table.hpp"

namespace flotilla::sources {

struct source_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One table of a source, with the schema read from the source's catalog.
struct source_table {
  std::string schema;  ///< "public", "main"; empty for files
  std::string name;    ///< table name (file stem for csv/json)
  schema::table_schema columns;
  /// Not empty: the columns are still packed (schema/packed.hpp), as a kept catalog holds
  /// them, and `columns` is empty until unpack_columns(). The fleet unpacks a table's
  /// before it is copied or planned; a pruned table never needs them.
  std::string packed_columns;
  /// Change marker, when the adapter offers one: any change to the table's data or
  /// shape changes it. nullopt: the adapter cannot tell, so the table is copied.
  std::optional<std::string> marker;
  /// The source's own identity of the table, when the adapter has one (PostgreSQL: its
  /// oid): a table dropped and created again under the same name gets a new one, so an
  /// incremental table's watermark, which belongs to the old table's rows, is not applied
  /// to the new table's. Empty: the adapter cannot tell.
  std::string identity;
  /// The generation of the table's storage, when the adapter has one (PostgreSQL: its
  /// relfilenode, new after TRUNCATE, VACUUM FULL, CLUSTER or a rewriting ALTER TABLE):
  /// rows read since may sort below an incremental table's watermark. Empty: cannot tell.
  std::string generation;
  /// True for csv/json: the types are inferred from the data.
  bool inferred = false;
  /// csv: a header and no rows, so no value inferred the columns' types (DuckDB says text).
  bool no_rows = false;
  /// csv: the dialect the catalog found in the file from every row (delimiter, quote,
  /// header, date formats), as DuckDB read_csv arguments: the read and its checks parse
  /// the file with it and the catalog's column types, without inferring them again.
  /// Empty (a table not from this run's catalog): the read infers them.
  std::string reader;
  /// Not empty: this table's columns could not be read (a malformed csv/json file), and
  /// this says why, naming the file, the line and the fix. The table fails when planned
  /// or copied; the source's other tables go on. It has no columns and no marker.
  std::string unreadable;
  /// A stand-in for a table flotilla.toml names and the source does not have
  /// (`unreadable` says so): it fails as FLT-R005 rather than FLT-R002.
  bool absent = false;

  /// Moves packed columns into `columns`; false (and nothing changed) when they are
  /// malformed. True at once when there is nothing to unpack.
  bool unpack_columns();

  /// "schema.name", or "name" when schema is empty.
  [[nodiscard]] std::string qualified() const { return schema.empty() ? name : schema + "." + name; }
};

/// A value a declared column's type cannot hold exactly (source::unfit_values), and where
/// it is: the file and its data row ("/x/orders.csv, data row 2 (after the header)").
struct unfit_value {
  std::string value;
  std::string where;
};

struct catalog {
  std::vector<source_table> tables;
  /// The whole-source marker the catalog was read at (source::file_marker), when the
  /// adapter offers one; every table marker then begins with it.
  std::optional<std::string> file_marker;
  /// Matches "name" or "schema.name" (exactly, then case-insensitively).
  [[nodiscard]] const source_table* find(std::string_view name) const;
};

struct read_request {
  const source_table* table = nullptr;
  schema::table_schema columns;  ///< the columns to read, in this order
  /// Incremental reads: rows with cursor_column > after (when set), ordered by it; with
  /// inclusive_key, also the rows with cursor_column = after whose key columns (source
  /// names) hold no NULL: a merge takes them again, where a NULL-keyed row would be
  /// inserted twice.
  std::string cursor_column;
  std::optional<std::string> after;
  std::vector<std::string> inclusive_key;
  std::size_t batch_rows = 8192;
  /// A PostgreSQL source passes rows through as COPY text batches
  /// (schema::row_batch::copy_text) when the read has no cursor; other sources ignore
  /// it. Set only when a PostgreSQL sink takes the rows as they are. Default: false
  bool copy_text = false;
  /// With copy_text: the batches hold binary COPY tuples instead (no text to format on
  /// the source server or parse on the target's). Set only when every column's requested
  /// type is, in PostgreSQL, the type of the target column it loads into. Default: false
  bool copy_binary = false;
  /// Where a reader may take a batch its consumer is done with, to fill again instead of
  /// a new one: the cells and their strings keep their memory, so a long read stops
  /// allocating. Returns an empty batch when there is none. Unset: every batch is new.
  std::function<schema::row_batch()> spent_batch;
};

struct read_result {
  std::uint64_t rows = 0;
  /// Largest cursor value read (text form), for the watermark: not one no later value
  /// can pass (unbounded_cursor), which would hide every row added after it.
  std::optional<std::string> max_cursor;
  /// Rows whose cursor value is such a one (NaN, +infinity), and one of those values.
  std::uint64_t unbounded_cursor_rows = 0;
  std::optional<std::string> unbounded_cursor;
};

/// Receives each batch, on the thread that called read() (the copy takes a shared target
/// connection's lock in it and releases it on that thread); return false to stop reading
/// early.
/// The digits a column of decimal numbers needs: before and after the point.
struct decimal_digits {
  int integer = 0;
  int scale = 0;
  /// The most significant digits one value has (leading zeros left out): past 15 a
  /// double may not hold the value as written.
  int significant = 0;
  /// Every value is a whole number, written with a point or not ("7", "7.", "7.00").
  bool whole = false;
};

using batch_consumer = std::function<bool(schema::row_batch&&)>;

class source {
 public:
  virtual ~source() = default;
  /// sqlite, duckdb, postgres, csv, json
  [[nodiscard]] virtual std::string_view adapter() const = 0;
  /// Reads the catalog of every table with one query (tables the source has; the
  /// caller selects). Throws source_error when the source is unreachable.
  [[nodiscard]] virtual catalog read_catalog() = 0;
  /// A marker of the whole source, taken without reading its catalog, that changes
  /// whenever anything in it may have changed, schema or data (SQLite: the file's
  /// identity and state, its change counter, the -wal and -shm headers; the schema lives
  /// in the file). When offered, read_catalog() at an equal marker returns the same
  /// catalog, table markers included, so a caller may keep a catalog and reuse it for as
  /// long as the marker stays equal (and catalog_version() too). nullopt: not offered.
  [[nodiscard]] virtual std::optional<std::string> file_marker() const { return std::nullopt; }
  /// Version of the adapter's catalog read (type mapping, marker format): a kept catalog
  /// is reused only by a build whose adapter reports the same version.
  [[nodiscard]] virtual std::string_view catalog_version() const { return {}; }
  /// True for an adapter whose table markers each cover one file (csv, json): it offers
  /// no whole-source marker, but takes an earlier run's kept catalog (known_tables) and
  /// reuses each table whose file's marker is unchanged instead of inferring its columns
  /// from the whole file again.
  [[nodiscard]] virtual bool reuses_known_tables() const { return false; }
  /// The tables an earlier run's catalog read, by this adapter version (their columns may
  /// still be packed), for read_catalog() to reuse where reuses_known_tables() says so.
  virtual void known_tables(catalog earlier) { (void)earlier; }
  /// For inferred sources (csv, json), whose readers infer a double for any number with
  /// a point: for each named column, the digits its values need, when every value is a
  /// plain decimal number (no exponent, no inf or nan); an empty answer otherwise (and for
  /// json also when a value has more digits than the double it was read as keeps). The
  /// caller checks the digits fit its decimal. Reads the whole table. Other adapters
  /// answer none.
  [[nodiscard]] virtual std::vector<std::optional<decimal_digits>> decimal_fit(
      const source_table& table, const std::vector<std::string>& columns) {
    (void)table;
    return std::vector<std::optional<decimal_digits>>(columns.size());
  }
  /// For inferred sources (csv, json), whose declared columns are parsed as declared: for
  /// each named column, a value in the file that its declared type cannot hold exactly
  /// (a fraction in an integer, more decimals than the scale, out of range, a boolean
  /// other than true/false/t/f/1/0); nullopt when every value fits, or when the type is
  /// not one checked (integers, decimals, booleans are). Reads the whole table. Other
  /// adapters answer none.
  [[nodiscard]] virtual std::vector<std::optional<unfit_value>> unfit_values(
      const source_table& table, const std::vector<schema::column>& declared) {
    (void)table;
    return std::vector<std::optional<unfit_value>>(declared.size());
  }
  /// For inferred sources (csv, json): for each named column, whether no row of the file
  /// holds a value in it (every one empty or null), so its inferred type (text, json) says
  /// nothing. Reads the whole table. Other adapters answer false.
  [[nodiscard]] virtual std::vector<bool> valueless(const source_table& table,
                                                    const std::vector<std::string>& columns) {
    (void)table;
    return std::vector<bool>(columns.size(), false);
  }
  /// Reads rows; values follow schema/rows.hpp for each column's portable type.
  virtual read_result read(const read_request& request, const batch_consumer& consume) = 0;
};

struct source_options {
  std::string name;     ///< the source's name in flotilla.toml, for messages
  std::string adapter;  ///< sqlite, duckdb, postgres, csv, json
  std::string path;     ///< file or directory (sqlite, duckdb, csv, json)
  std::string dsn;      ///< postgres connection string
  /// csv/json: the files that form tables (a directory is scanned for *.csv / *.json).
};

/// Opens an adapter. Throws source_error naming the source and what to fix.
[[nodiscard]] std::unique_ptr<source> open_source(const source_options& options);

/// The server and database a PostgreSQL DSN names, in one spelling ("host:port/dbname"),
/// as libpq reads it (a URI or key=value pairs): `localhost` and ::1 are 127.0.0.1, the
/// port defaults to 5432 and the database to the user. Empty when libpq cannot read it.
[[nodiscard]] std::string postgres_database(const std::string& dsn);
/// The schema an unqualified table name lands in under a PostgreSQL DSN: the first
/// schema of a `search_path` its `options` set (`options=-csearch_path=stage,public`),
/// else `public`. A search_path set on the database or role is not seen.
[[nodiscard]] std::string postgres_default_schema(const std::string& dsn);

}  // namespace flotilla::sources
