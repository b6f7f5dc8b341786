// SQLite adapter: sqlite3 C API, read-only connections.
//
// Each call to read_catalog() or read() takes a read-only connection of its own from the
// source's pool of idle ones, so one source object may serve several reader threads at
// once; the connections to one file share SQLite's cache and parsed schema. Values are converted from whatever storage class SQLite holds (its typing
// is per value, not per column) to the representation of the column's portable type.

#include <sqlite3.h>

#include <cerrno>
#include <charconv>

#include <algorithm>
#include <filesystem>
#include <cctype>
#include <cstdio>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sources/adapters.hpp"
#include "schema/toml_text.hpp"
#include "sources/batch_builder.hpp"
#include "sources/errors.hpp"
#include "sources/marker.hpp"
#include "sources/sql_text.hpp"
#include "sources/type_mapping.hpp"
#include "sources/values.hpp"

namespace flotilla::sources {
namespace {

using schema::portable_type;
using schema::type_kind;
using schema::value;

/// Idle read-only connections of one source, reused across reads: a fresh connection
/// costs its open and, when no other connection to the file holds the schema, a parse of
/// the whole schema, which for a file of thousands of tables costs more than reading a
/// small table.
struct connection_pool {
  std::mutex mu;
  std::vector<sqlite3*> idle;
  ~connection_pool() {
    for (auto* db : idle)
      sqlite3_close_v2(db);
  }
};

class sqlite_handle {
 public:
  sqlite_handle() = default;
  explicit sqlite_handle(sqlite3* db, connection_pool* pool = nullptr) : db_(db), pool_(pool) {}
  sqlite_handle(sqlite_handle&& other) noexcept : db_(other.db_), pool_(other.pool_) {
    other.db_ = nullptr;
  }
  sqlite_handle(const sqlite_handle&) = delete;
  sqlite_handle& operator=(const sqlite_handle&) = delete;
  ~sqlite_handle() {
    if (db_ != nullptr && pool_ != nullptr && sqlite3_get_autocommit(db_) != 0) {
      std::lock_guard lock(pool_->mu);
      if (pool_->idle.size() < 16) {
        pool_->idle.push_back(db_);
        return;
      }
    }
    sqlite3_close_v2(db_);
  }
  [[nodiscard]] sqlite3* get() const { return db_; }
  sqlite3* release() {
    auto* db = db_;
    db_ = nullptr;
    return db;
  }

 private:
  sqlite3* db_ = nullptr;
  connection_pool* pool_ = nullptr;
};

class statement {
 public:
  statement(sqlite3* db, const std::string& sql) {
    rc_ = sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size() + 1), 0, &stmt_, nullptr);
  }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;
  ~statement() { sqlite3_finalize(stmt_); }
  [[nodiscard]] int prepare_rc() const { return rc_; }
  [[nodiscard]] sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

std::string column_text(sqlite3_stmt* s, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, col))) : std::string();
}

// The value's text without a copy; valid until the next step or column call.
std::string_view column_view(sqlite3_stmt* s, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
  return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(s, col)))
           : std::string_view();
}

std::string column_blob(sqlite3_stmt* s, int col) {
  const void* p = sqlite3_column_blob(s, col);
  return p ? std::string(static_cast<const char*>(p),
                         static_cast<std::size_t>(sqlite3_column_bytes(s, col)))
           : std::string();
}

// The value's own text, for error messages and text columns.
std::string as_text(sqlite3_stmt* s, int col) {
  switch (sqlite3_column_type(s, col)) {
    case SQLITE_INTEGER: return std::to_string(sqlite3_column_int64(s, col));
    case SQLITE_FLOAT: return shortest_double(sqlite3_column_double(s, col));
    case SQLITE_BLOB: return column_blob(s, col);
    default: return column_text(s, col);
  }
}

// Sets `out`, a null, to one stored value in the column's representation; false when it
// has none. Writes into the batch's own cell: a value is 56 bytes with a string, so
// building one elsewhere and moving it in costs more than converting it, and a reused
// cell's string keeps its memory.
/// A NUMERIC or DECIMAL column declared without precision reads as decimal(38,9)
/// (type_mapping.cpp); SQLite stores its fractions as doubles. One whose 15 significant
/// digits (what a double keeps for sure: past them is the noise of binary fractions, as in
/// 0.1 + 0.2) need more than 9 places would lose digits, silently rounded: refused.
bool bare_decimal_drops_digits(const portable_type& type, double d) {
  if (type.kind != type_kind::decimal || type.precision != 38 || type.scale != 9 ||
      !std::isfinite(d))
    return false;
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%.15g", d);
  const std::string_view text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  if (text.find_first_of("eE") != std::string_view::npos)
    return std::fabs(d) < 1e-9;  // 1.5e-12: past 9 places; 1e+20: not a fraction
  const auto point = text.find('.');
  return point != std::string_view::npos && text.size() - point - 1 > 9;
}

bool convert(sqlite3_stmt* s, int col, const portable_type& type, value& out) {
  const int storage = sqlite3_column_type(s, col);
  if (storage == SQLITE_NULL) {
    out.kind = value::tag::null;
    return true;
  }
  auto set_bool = [&](bool v) {
    out.kind = value::tag::boolean;
    out.b = v;
    return true;
  };
  auto set_int = [&](std::int64_t v) {
    out.kind = value::tag::integer;
    out.i = v;
    return true;
  };
  auto set_text = [&](std::string&& v) {
    out.kind = value::tag::text;
    out.s = std::move(v);
    return true;
  };
  switch (type.kind) {
    case type_kind::boolean: {
      if (storage == SQLITE_INTEGER)
        return set_bool(sqlite3_column_int64(s, col) != 0);
      if (storage == SQLITE_FLOAT)
        return set_bool(sqlite3_column_double(s, col) != 0);
      if (auto b = parse_bool(column_view(s, col)))
        return set_bool(*b);
      return false;
    }
    case type_kind::smallint:
    case type_kind::int32:
    case type_kind::bigint: {
      if (storage == SQLITE_INTEGER)
        return set_int(sqlite3_column_int64(s, col));
      if (storage == SQLITE_FLOAT) {
        const double d = sqlite3_column_double(s, col);
        if (std::trunc(d) == d && d >= -9.2233720368547758e18 && d < 9.2233720368547758e18)
          return set_int(static_cast<std::int64_t>(d));
        return false;
      }
      if (auto i = parse_int64(column_view(s, col)))
        return set_int(*i);
      return false;
    }
    case type_kind::float32:
    case type_kind::float64: {
      double d = 0;
      if (storage == SQLITE_INTEGER) {
        d = static_cast<double>(sqlite3_column_int64(s, col));
      } else if (storage == SQLITE_FLOAT) {
        d = sqlite3_column_double(s, col);
      } else if (auto p = parse_double(column_view(s, col))) {
        d = *p;
      } else {
        return false;
      }
      if (type.kind == type_kind::float32)
        d = static_cast<double>(static_cast<float>(d));
      out.kind = value::tag::real;
      out.d = d;
      return true;
    }
    case type_kind::decimal: {
      std::optional<std::string> text;
      if (storage == SQLITE_INTEGER)
        text = normalize_decimal(std::to_string(sqlite3_column_int64(s, col)), type.scale);
      else if (storage == SQLITE_FLOAT) {
        const double d = sqlite3_column_double(s, col);
        if (bare_decimal_drops_digits(type, d))
          return false;
        text = decimal_from_double(d, type.scale);
      }
      else
        text = normalize_decimal(column_view(s, col), type.scale);
      if (!text)
        return false;
      return set_text(std::move(*text));
    }
    case type_kind::date: {
      constexpr std::int64_t micros_per_day = 86'400'000'000;
      // Unix seconds or a julian day are a date only at midnight: a time of day would be
      // dropped (then the value needs a timestamp or text pin).
      if (storage == SQLITE_INTEGER) {
        const auto us = micros_from_unix_seconds(sqlite3_column_int64(s, col));
        if (!us || *us % micros_per_day != 0)
          return false;
        return set_text(format_timestamp(*us, false).substr(0, 10));
      }
      if (storage == SQLITE_FLOAT) {
        auto us = micros_from_julian_day(sqlite3_column_double(s, col));
        if (!us || *us % micros_per_day != 0)
          return false;
        return set_text(format_timestamp(*us, false).substr(0, 10));
      }
      if (auto d = normalize_date(column_view(s, col)))
        return set_text(std::move(*d));
      return false;
    }
    case type_kind::time: {
      if (auto t = normalize_time(column_view(s, col)))
        return set_text(std::move(*t));
      return false;
    }
    case type_kind::timestamp_ntz:
    case type_kind::timestamp_tz: {
      const bool tz = type.kind == type_kind::timestamp_tz;
      if (storage == SQLITE_INTEGER) {
        const auto us = micros_from_unix_seconds(sqlite3_column_int64(s, col));
        if (!us)
          return false;
        return set_text(format_timestamp(*us, tz));
      }
      if (storage == SQLITE_FLOAT) {
        auto us = micros_from_julian_day(sqlite3_column_double(s, col));
        if (!us)
          return false;
        return set_text(format_timestamp(*us, tz));
      }
      const std::string_view text = column_view(s, col);
      if (is_canonical_timestamp(text)) {
        out.kind = value::tag::text;
        out.s.assign(text.data(), text.size());
        if (tz)
          out.s.append("+00");
        return true;
      }
      if (auto t = normalize_timestamp(text, tz))
        return set_text(std::move(*t));
      return false;
    }
    case type_kind::uuid: {
      if (storage == SQLITE_BLOB && sqlite3_column_bytes(s, col) == 16)
        return set_text(
            format_uuid(static_cast<const unsigned char*>(sqlite3_column_blob(s, col))));
      if (auto u = normalize_uuid(column_view(s, col)))
        return set_text(std::move(*u));
      return false;
    }
    case type_kind::json:
      // A JSON column's text must be JSON: a target's JSON column would take it unchecked
      // (DuckDB) and fail every query that reads it, or refuse the load (PostgreSQL).
      if (storage == SQLITE_TEXT) {
        const std::string_view text = column_view(s, col);
        if (!nlohmann::json::accept(text))
          return false;
        out.kind = value::tag::text;
        out.s.assign(text.data(), text.size());
        return true;
      }
      return set_text(as_text(s, col));
    case type_kind::bytes:
    case type_kind::varchar:
    case type_kind::text:
      if (storage == SQLITE_TEXT) {
        // Straight from SQLite's buffer into the cell's string.
        const std::string_view text = column_view(s, col);
        out.kind = value::tag::text;
        out.s.assign(text.data(), text.size());
        return true;
      }
      return set_text(as_text(s, col));
  }
  return false;
}

/// What to do about a failure of `db`'s last call: `otherwise`, unless SQLite says why in
/// a way that has its own fix (a lock another process holds past the busy timeout, the
/// process's open-file limit).
std::string fix_for(sqlite3* db, std::string_view otherwise) {
  if (db && (sqlite3_extended_errcode(db) & 0xff) == SQLITE_BUSY)
    return "another process holds a lock on the file and kept it while Flotilla waited (10 s "
           "a try): run again once its transaction ends";
  if (db && sqlite3_system_errno(db) == EMFILE)
    return "the process has as many files open as its limit allows (ulimit -n): raise the "
           "limit";
  return std::string(otherwise);
}

class sqlite_source final : public source {
 public:
  explicit sqlite_source(source_options options) : options_(std::move(options)) {}

  [[nodiscard]] std::string_view adapter() const override { return "sqlite"; }

  // SQLite keeps its schema in the database file, so the file marker covers the
  // catalog as well as the rows.
  [[nodiscard]] std::optional<std::string> file_marker() const override {
    return sqlite_file_marker(options_.path);
  }
  // Bump whenever read_catalog's result for the same file can change: the query, the
  // type mapping (map_sqlite_type), nullability or key rules, the table marker format.
  [[nodiscard]] std::string_view catalog_version() const override { return "sqlite-catalog/3"; }

  [[nodiscard]] catalog read_catalog() override {
    // The marker first: a write that lands after this point changes the next marker.
    const std::optional<std::string> file = sqlite_file_marker(options_.path);
    auto db = open();
    // One query for every table: the table list joined with the table_xinfo pragma.
    // pragma_table_list (SQLite 3.37+) tells ordinary tables from views, virtual tables
    // (whose module may not even be loadable here) and their shadow tables. table_xinfo,
    // unlike table_info, lists generated columns too (hidden 2: virtual, 3: stored): their
    // values are the table's as much as any other column's.
    static constexpr const char* sql =
        "SELECT l.name, p.name, p.type, p.\"notnull\", p.pk "
        "FROM pragma_table_list AS l JOIN pragma_table_xinfo(l.name, 'main') AS p "
        "WHERE l.schema = 'main' AND l.type = 'table' AND p.hidden IN (0, 2, 3) "
        "  AND l.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
        "ORDER BY l.name, p.cid";
    statement stmt(db.get(), sql);
    if (stmt.prepare_rc() != SQLITE_OK)
      throw error::catalog_failed(options_.name, where(), sqlite3_errmsg(db.get()),
                                  fix_for(db.get(), "check that the file is a SQLite database"));
    catalog out;
    out.file_marker = file;
    shape_hash shape;
    const auto is_integer_name = [](std::string_view d) {
      while (!d.empty() && std::isspace(static_cast<unsigned char>(d.front())))
        d.remove_prefix(1);
      while (!d.empty() && std::isspace(static_cast<unsigned char>(d.back())))
        d.remove_suffix(1);
      return d.size() == 7 && std::equal(d.begin(), d.end(), "INTEGER", [](char a, char b) {
               return std::toupper(static_cast<unsigned char>(a)) == b;
             });
    };
    // The table's key column when it is declared exactly INTEGER: with a key of one
    // column that makes it the rowid, a 64-bit integer whatever its values look like.
    std::optional<std::size_t> integer_key;
    std::size_t key_columns = 0;
    auto finish = [&] {
      if (out.tables.empty())
        return;
      if (integer_key && key_columns == 1)
        out.tables.back().columns.columns[*integer_key].type =
            schema::portable_type::of(schema::type_kind::bigint);
      integer_key.reset();
      key_columns = 0;
      if (file)
        out.tables.back().marker = *file + ";s:" + shape.hex();
    };
    int rc = SQLITE_OK;
    while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
      std::string table = column_text(stmt.get(), 0);
      if (out.tables.empty() || out.tables.back().name != table) {
        finish();
        shape = shape_hash{};
        source_table t;
        t.schema = "";
        t.name = std::move(table);
        out.tables.push_back(std::move(t));
      }
      schema::column c;
      c.name = column_text(stmt.get(), 1);
      const std::string declared = column_text(stmt.get(), 2);
      c.type = map_sqlite_type(declared);
      c.key = sqlite3_column_int(stmt.get(), 4) > 0;
      if (c.key) {
        ++key_columns;
        if (is_integer_name(declared))
          integer_key = out.tables.back().columns.columns.size();
      }
      c.nullable = sqlite3_column_int(stmt.get(), 3) == 0 && !c.key;
      shape.add(c.name);
      shape.add(declared);
      shape.add(c.nullable ? "null" : "not null");
      shape.add(std::to_string(sqlite3_column_int(stmt.get(), 4)));
      out.tables.back().columns.columns.push_back(std::move(c));
    }
    if (rc != SQLITE_DONE)
      throw error::catalog_failed(
          options_.name, where(), sqlite3_errmsg(db.get()),
          fix_for(db.get(), "check that the file is a readable SQLite database"));
    finish();
    return out;
  }

  read_result read(const read_request& request, const batch_consumer& consume) override {
    if (request.table == nullptr)
      throw error::bad_request(options_.name, "read request names no table");
    const std::string& table = request.table->name;
    auto db = open();

    // Requested columns, then the cursor column when it is not among them.
    std::string sql = "SELECT ";
    std::vector<portable_type> types;
    for (std::size_t i = 0; i < request.columns.columns.size(); ++i) {
      const auto& c = request.columns.columns[i];
      sql += (i ? ", " : "") + quote_ident(c.name);
      types.push_back(c.type);
    }
    int cursor_index = -1;
    portable_type cursor_type = portable_type::of(type_kind::text);
    if (!request.cursor_column.empty()) {
      for (std::size_t i = 0; i < request.columns.columns.size(); ++i)
        if (schema::same_name(request.columns.columns[i].name, request.cursor_column,
                              schema::name_rule::case_insensitive))
          cursor_index = static_cast<int>(i);
      if (cursor_index >= 0) {
        cursor_type = types[static_cast<std::size_t>(cursor_index)];
      } else {
        if (const auto* c = request.table->columns.find(request.cursor_column,
                                                        schema::name_rule::case_insensitive))
          cursor_type = c->type;
        cursor_index = static_cast<int>(types.size());
        sql += (types.empty() ? "" : ", ") + quote_ident(request.cursor_column);
        types.push_back(cursor_type);
      }
    }
    if (types.empty())
      throw error::bad_request(options_.name,
                               fmt::format("read of table '{}' requests no columns", table));
    sql += " FROM " + quote_ident(table);
    if (!request.cursor_column.empty()) {
      // A TEXT (or untyped) column holding ISO timestamps compares as text just the same:
      // its watermark says so.
      const bool dated = cursor_type.kind == type_kind::date ||
                         cursor_type.kind == type_kind::timestamp_ntz ||
                         cursor_type.kind == type_kind::timestamp_tz;
      const bool reals = check_cursor_storage(
          db.get(), table, request.cursor_column,
          dated || (request.after && looks_like_iso_timestamp(*request.after)), request.after);
      // Julian days (REAL) are compared as the numbers they are stored as: a watermark
      // kept as the date's text (as runs before 2026-12-06 kept it) is turned into one,
      // since SQLite orders every number before every text and no row would pass it.
      if (request.after)
        sql += past_watermark(quote_ident(request.cursor_column),
                              reals && dated && !number_text(*request.after) ? "julianday(?1)" : "?1",
                              request.inclusive_key);
      sql += " ORDER BY " + quote_ident(request.cursor_column);
    }

    statement stmt(db.get(), sql);
    if (stmt.prepare_rc() != SQLITE_OK)
      throw error::read_failed(options_.name, table, options_.path, sqlite3_errmsg(db.get()),
                               fix_for(db.get(), "check that the table and its columns still exist"));
    if (request.after)
      bind_watermark(stmt.get(), *request.after, cursor_type);

    const std::size_t width = request.columns.columns.size();
    const std::size_t batch_rows = request.batch_rows ? request.batch_rows : 8192;
    read_result result;
    batch_builder batch(request, width, batch_rows);
    int rc = SQLITE_OK;
    value cursor_cell;  // the cursor column when it is not among the requested ones
    // SQLite lets a PRIMARY KEY other than INTEGER PRIMARY KEY hold NULL (a legacy it
    // keeps); no target's key takes it, and the target's error would name no row.
    std::vector<char> key(width);
    for (std::size_t i = 0; i < width; ++i)
      key[i] = request.columns.columns[i].key;
    while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
      ++result.rows;
      cursor_cell.clear();
      for (std::size_t i = 0; i < types.size(); ++i) {
        value& cell = i < width ? batch.next_cell() : cursor_cell;
        if (!convert(stmt.get(), static_cast<int>(i), types[i], cell)) {
          const auto column_name = [&](std::size_t c) -> const std::string& {
            return c < width ? request.columns.columns[c].name : request.cursor_column;
          };
          // The first refusal, with the other columns' first ones after it (one run names
          // every pin a messy table needs, not one per run).
          const auto refuse = [&](const source_error& first) {
            return with_other_refusals(first, stmt.get(), types, i, result.rows, table,
                                       column_name);
          };
          const std::string& name = column_name(i);
          // A date with a time of day: said as such, with the pin that keeps the time.
          if (value stamp; types[i].kind == type_kind::date &&
                           convert(stmt.get(), static_cast<int>(i),
                                   portable_type::of(type_kind::timestamp_ntz), stamp))
            throw refuse(error::read_failed(
                options_.name, table, options_.path,
                fmt::format("column '{}', row {}: value '{}' holds a time of day, which a date "
                            "would drop",
                            name, result.rows, as_text(stmt.get(), static_cast<int>(i))),
                fmt::format("declare the column as a timestamp in flotilla.toml "
                            "({} columns = {{ {} = \"timestamp_ntz\" }}), "
                            "or text",
                            schema::table_header(options_.name, table), schema::toml_key(name))));
          if (sqlite3_column_type(stmt.get(), static_cast<int>(i)) == SQLITE_FLOAT &&
              bare_decimal_drops_digits(types[i], sqlite3_column_double(stmt.get(), static_cast<int>(i))))
            throw refuse(error::read_failed(
                options_.name, table, options_.path,
                fmt::format("column '{}', row {}: value {} has more decimal places than the 9 "
                            "that decimal(38,9) keeps (a NUMERIC or DECIMAL column declared "
                            "without precision reads as decimal(38,9)): it would be rounded",
                            name, result.rows, as_text(stmt.get(), static_cast<int>(i))),
                fmt::format("declare the column's type in flotilla.toml "
                            "({} columns = {{ {} = \"double\" }} keeps "
                            "the values as SQLite stores them; or a decimal(p,s) with enough "
                            "places)",
                            schema::table_header(options_.name, table), schema::toml_key(name))));
          throw refuse(error::bad_value(options_.name, table, name,
                                        as_text(stmt.get(), static_cast<int>(i)), types[i],
                                        result.rows));
        }
        if (i < width && key[i] && cell.is_null())
          throw error::read_failed(
              options_.name, table, options_.path,
              fmt::format("row {} holds NULL in column '{}' of the table's primary key (SQLite "
                          "allows that in a key other than INTEGER PRIMARY KEY; a target's "
                          "primary key does not)",
                          result.rows, request.columns.columns[i].name),
              fmt::format("give the row a key at the source, or delete it (DELETE FROM {} WHERE "
                          "{} IS NULL)",
                          quote_ident(table), quote_ident(request.columns.columns[i].name)));
        if (static_cast<int>(i) == cursor_index && !cell.is_null()) {
          if (unbounded_cursor(cell, types[i])) {
            ++result.unbounded_cursor_rows;
            result.unbounded_cursor = cursor_text(cell);
          } else {
            result.max_cursor = stored_cursor(stmt.get(), static_cast<int>(i), types[i], cell);
          }
        }
      }
      if (batch.full() && !consume(batch.take()))
        return result;
    }
    if (rc != SQLITE_DONE)
      throw error::read_failed(options_.name, table, options_.path, sqlite3_errmsg(db.get()),
                               fix_for(db.get(), "check that the file is readable and not corrupt"));
    if (batch.rows() > 0)
      consume(batch.take());
    return result;
  }

 private:
  [[nodiscard]] std::string where() const { return "sqlite file " + options_.path; }

  /// `first` (column `failed` refused a value at `row`), and each other column's first
  /// refused value from there on, read on over at most 100,000 more rows: a table of
  /// messy columns names every pin it needs in one run.
  template <class Name>
  source_error with_other_refusals(const source_error& first, sqlite3_stmt* stmt,
                                   const std::vector<portable_type>& types, std::size_t failed,
                                   std::uint64_t row, const std::string& table,
                                   const Name& column_name) const {
    constexpr std::uint64_t more_rows = 100'000;
    std::vector<char> named(types.size(), 0);
    named[failed] = 1;
    std::vector<std::string> others;
    value scratch;
    bool first_row = true;  // the row `first` is in: its later columns are checked too
    std::uint64_t checked = 0;
    bool cut = false;
    while (first_row || sqlite3_step(stmt) == SQLITE_ROW) {
      if (!first_row && ++checked > more_rows) {
        cut = true;
        break;
      }
      const std::uint64_t at = first_row ? row : row + checked;
      for (std::size_t c = first_row ? failed + 1 : 0; c < types.size(); ++c) {
        if (named[c] || convert(stmt, static_cast<int>(c), types[c], scratch))
          continue;
        named[c] = 1;
        // A bare NUMERIC's fraction past 9 places: the double keeps it as SQLite does.
        const bool places = sqlite3_column_type(stmt, static_cast<int>(c)) == SQLITE_FLOAT &&
                            bare_decimal_drops_digits(types[c], sqlite3_column_double(stmt, static_cast<int>(c)));
        others.push_back(fmt::format("column '{}', row {}: value '{}' {} (columns = {{ {} = \"{}\" }})",
                                     column_name(c), at,
                                     as_text(stmt, static_cast<int>(c)).substr(0, 80),
                                     places ? "has more decimal places than the 9 that "
                                              "decimal(38,9) keeps"
                                            : "is not a valid " + schema::to_string(types[c]),
                                     schema::toml_key(column_name(c)), places ? "double" : "text"));
      }
      first_row = false;
    }
    if (others.empty())
      return first;
    return source_error(fmt::format(
        "{}; other columns of table '{}' refuse values too, each needing its own fix{}: {}",
        first.what(), table, cut ? " (in the 100,000 rows after it)" : "",
        fmt::join(others, "; ")));
  }

  sqlite_handle open() const {
    {
      std::lock_guard lock(pool_.mu);
      if (!pool_.idle.empty()) {
        sqlite3* db = pool_.idle.back();
        pool_.idle.pop_back();
        return sqlite_handle(db, &pool_);
      }
    }
    // Shared cache: the connections of this process to one file share one page cache and
    // one parsed schema. Each connection of its own would hold the whole schema (~1 KB
    // per table: ~9 MB for a file of 10,000 tables, once per reader thread). Readers
    // only, so no connection waits on another's table lock.
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(
        options_.path.c_str(), &db,
        SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_SHAREDCACHE, nullptr);
    sqlite_handle handle(db);
    if (rc != SQLITE_OK) {
      std::error_code ec;
      if (std::filesystem::is_directory(options_.path, ec))  // SQLite says "disk I/O error"
        throw error::cannot_open(options_.name, where(), "the path is a directory",
                                 "set path to the SQLite database file itself, not its "
                                 "directory (a csv or json source takes a directory)");
      throw error::cannot_open(options_.name, where(),
                               db ? sqlite3_errmsg(db) : sqlite3_errstr(rc),
                               fix_for(db, "check path and that the file is readable"));
    }
    sqlite3_busy_timeout(db, 10'000);
    sqlite3_extended_result_codes(db, 1);
    // A small page cache: a copy reads each page once, and a run keeps a file's cache (2 MB
    // by default) as long as it keeps the file open, so a fleet of 100 client files held
    // ~200 MB of pages it would never read again.
    sqlite3_exec(db, "PRAGMA cache_size = -256", nullptr, nullptr, nullptr);
    return sqlite_handle(handle.release(), &pool_);
  }

  /// ISO text with a 'T' between date and time beside text with a space: fails the read
  /// naming one of each (two probes: the first row of each form).
  /// The fix writes every value in the watermark's form, so that the rows past it compare
  /// as they should with it.
  void check_cursor_text_forms(sqlite3* db, const std::string& table, const std::string& column,
                               const std::optional<std::string>& after) const {
    const std::string c = quote_ident(column), t = quote_ident(table);
    if (after)
      check_cursor_offsets(db, table, column, *after);
    statement stmt(db, fmt::format("SELECT (SELECT {0} FROM {1} WHERE substr({0}, 11, 1) = 'T' "
                                   "LIMIT 1), (SELECT {0} FROM {1} WHERE substr({0}, 11, 1) = "
                                   "' ' LIMIT 1)",
                                   c, t));
    if (stmt.prepare_rc() != SQLITE_OK || sqlite3_step(stmt.get()) != SQLITE_ROW ||
        sqlite3_column_type(stmt.get(), 0) == SQLITE_NULL ||
        sqlite3_column_type(stmt.get(), 1) == SQLITE_NULL)
      return;
    const bool space = after && after->size() > 10 && (*after)[10] == ' ';
    throw error::read_failed(
        options_.name, table, options_.path,
        fmt::format("cursor column '{}' holds timestamps written with a 'T' ('{}') and with a "
                    "space ('{}'), which SQLite compares as text (a space before 'T'): a later "
                    "one written with a space can sort before the watermark and never be "
                    "copied",
                    column, as_text(stmt.get(), 0), as_text(stmt.get(), 1)),
        fmt::format("store the column in one form at the source, the watermark's (UPDATE {0} "
                    "SET {1} = substr({1}, 1, 10) || '{2}' || substr({1}, 12) WHERE substr({1}, "
                    "11, 1) = '{3}'), or use another cursor_column",
                    t, c, space ? " " : "T", space ? "T" : " "));
  }

  /// `YYYY-MM-DD` then `T` or a space and a time: ISO text SQLite compares as text.
  static bool looks_like_iso_timestamp(std::string_view v) {
    const auto digit = [&](std::size_t i) { return v[i] >= '0' && v[i] <= '9'; };
    return v.size() >= 16 && digit(0) && digit(1) && digit(2) && digit(3) && v[4] == '-' &&
           digit(5) && digit(6) && v[7] == '-' && digit(8) && digit(9) &&
           (v[10] == 'T' || v[10] == ' ') && digit(11) && digit(12) && v[13] == ':';
  }

  /// How many characters of an ISO text timestamp's end are its UTC offset: `Z` 1,
  /// ` UTC` 4, `+02:00` 6, `+0200` 5, `+02` 3, none 0. SQL over `x`.
  static std::string offset_length_sql(const std::string& x) {
    return fmt::format(
        "(CASE WHEN typeof({0}) <> 'text' OR length({0}) <= 16 THEN 0 "
        "WHEN substr({0}, -1) IN ('Z', 'z') THEN 1 "
        "WHEN upper(substr({0}, -4)) = ' UTC' THEN 4 "
        "WHEN length({0}) > 21 AND substr({0}, -6, 1) IN ('+', '-') AND substr({0}, -3, 1) = ':' "
        "THEN 6 "
        "WHEN length({0}) > 20 AND substr({0}, -5, 1) IN ('+', '-') THEN 5 "
        "WHEN length({0}) > 18 AND substr({0}, -3, 1) IN ('+', '-') THEN 3 "
        "ELSE 0 END)",
        x);
  }

  /// The UTC offset an ISO text timestamp ends with (`+02:00`, `+0200`, `+02`, `Z`,
  /// ` UTC`), as `+HH:MM` (`-00:00` as `+00:00`: the same offset); '' for none. SQL over `x`.
  static std::string offset_sql(const std::string& x) {
    return fmt::format(
        "replace(CASE {1} WHEN 0 THEN '' WHEN 1 THEN '+00:00' WHEN 4 THEN '+00:00' "
        "WHEN 6 THEN substr({0}, -6) WHEN 5 THEN substr({0}, -5, 3) || ':' || substr({0}, -2) "
        "ELSE substr({0}, -3) || ':00' END, '-00:00', '+00:00')",
        x, offset_length_sql(x));
  }

  /// The digits of an ISO text timestamp's fraction of a second ('' for none). SQL.
  static std::string fraction_sql(const std::string& x) {
    return fmt::format("(CASE WHEN substr({0}, 17, 1) = ':' AND substr({0}, 20, 1) = '.' "
                       "THEN substr({0}, 21, length({0}) - 20 - {1}) ELSE '' END)",
                       x, offset_length_sql(x));
  }

  /// The UTC second of an ISO text timestamp, `YYYY-MM-DD HH:MM:SS`, from its date, time
  /// and offset without the fraction (SQLite's date functions round a fraction to
  /// milliseconds, which can carry into the next second, and read no ` UTC`). SQL.
  static std::string utc_second_sql(const std::string& x) {
    return fmt::format("strftime('%Y-%m-%d %H:%M:%S', {})", whole_seconds_sql(x));
  }

  /// An ISO text timestamp without its fraction, its offset as `+HH:MM`: what SQLite's
  /// date functions read. SQL.
  static std::string whole_seconds_sql(const std::string& x) {
    return fmt::format("substr({0}, 1, CASE WHEN substr({0}, 17, 1) = ':' THEN 19 ELSE 16 END) "
                       "|| {1}",
                       x, offset_sql(x));
  }

  /// An ISO text timestamp as UTC text with `digits` fractional digits, which compares
  /// as text in time order for every form (the order SQLite's own comparison of the raw
  /// texts does not always keep). SQL.
  static std::string canonical_sql(const std::string& x, int digits) {
    return fmt::format("{} || '.' || substr({} || '{}', 1, {})", utc_second_sql(x),
                       fraction_sql(x), std::string(static_cast<std::size_t>(digits), '0'),
                       digits);
  }

  /// The fix for a text cursor column whose texts do not compare in time order: every
  /// value stored in one form (UTC, a space, six fractional digits, no offset), then the
  /// table loaded anew, since its watermark is in the old form and some rows past it
  /// sort before it.
  static std::string canonical_fix(const std::string& t, const std::string& c) {
    return fmt::format("store every value of the column in one form at the source, UTC with "
                       "six fractional digits (UPDATE {0} SET {1} = {2} WHERE typeof({1}) = "
                       "'text' AND length({1}) >= 16), then drop the table in its targets so "
                       "that the next run loads every row again (its watermark is in the old "
                       "form); or use another cursor_column",
                       t, c, canonical_sql(c, 6));
  }

  /// A probe with the watermark bound as ?1: true when it finds a row (the statement
  /// then stands on it). A probe SQLite cannot prepare finds nothing.
  static bool row_found(statement& stmt, const std::string& after) {
    if (stmt.prepare_rc() != SQLITE_OK)
      return false;
    sqlite3_bind_text(stmt.get(), 1, after.data(), static_cast<int>(after.size()),
                      SQLITE_TRANSIENT);
    return sqlite3_step(stmt.get()) == SQLITE_ROW;
  }

  /// ISO text timestamps compare as text in SQLite, so values with different UTC offsets
  /// order by their local times: `09:30+00:00` sorts before a watermark of `10:00+02:00`
  /// (08:00 UTC) though it is a later instant. A row whose offset differs from the
  /// watermark's could sort before it and never be copied: the read fails naming one,
  /// instead of skipping it silently.
  void check_cursor_offsets(sqlite3* db, const std::string& table, const std::string& column,
                            const std::string& after) const {
    const std::string c = quote_ident(column), t = quote_ident(table);
    statement stmt(db, fmt::format("SELECT {0}, {1}, {3}, {4} FROM {2} WHERE typeof({0}) = "
                                   "'text' AND {1} <> {3} LIMIT 1",
                                   c, offset_sql(c), t, offset_sql("?1"),
                                   offset_length_sql("?1")));
    if (!row_found(stmt, after))
      return;
    const std::string other = as_text(stmt.get(), 1);
    const std::string wm_offset = as_text(stmt.get(), 2);
    const auto wm_suffix_length = static_cast<std::size_t>(sqlite3_column_int(stmt.get(), 3));
    const std::string message = fmt::format(
        "cursor column '{}' holds timestamps with different UTC offsets ('{}', offset {}, "
        "beside the watermark '{}'), which SQLite compares as text, by their local times: a "
        "later instant can sort before the watermark and never be copied",
        column, as_text(stmt.get(), 0), other.empty() ? "none" : other, after);
    // Without a fraction anywhere, every value can be stored at the watermark's offset,
    // in its form ('T' or space, the offset spelled as it spells it), and the watermark
    // keeps comparing as it should. A fraction would be lost by that (or, beside a
    // watermark ending in `Z`, still sort wrong): one form for every value, and a reload.
    const bool fractions = after.find('.') != std::string::npos || [&] {
      statement probe(db, fmt::format("SELECT 1 FROM {1} WHERE typeof({0}) = 'text' AND "
                                      "substr({0}, 17, 1) = ':' AND substr({0}, 20, 1) = '.' "
                                      "LIMIT 1",
                                      c, t));
      return probe.prepare_rc() != SQLITE_OK || sqlite3_step(probe.get()) == SQLITE_ROW;
    }();
    if (fractions)
      throw error::read_failed(options_.name, table, options_.path, message,
                               canonical_fix(t, c));
    int minutes = 0;
    if (wm_offset.size() == 6)
      minutes = (wm_offset[0] == '-' ? -1 : 1) *
                (std::stoi(wm_offset.substr(1, 2)) * 60 + std::stoi(wm_offset.substr(4, 2)));
    const std::string wm_suffix =
        wm_suffix_length <= after.size() ? after.substr(after.size() - wm_suffix_length) : "";
    const std::string layout = fmt::format(
        "%Y-%m-%d{}%H:%M:%S", after.size() > 10 && after[10] == 'T' ? "T" : " ");
    const std::string value =
        fmt::format("strftime('{}', {}, '{:+} minutes') || {}", layout, whole_seconds_sql(c),
                    minutes, quote_literal(wm_suffix));
    throw error::read_failed(
        options_.name, table, options_.path, message,
        fmt::format("store every value of the column at the watermark's offset ({0}), in its "
                    "form, at the source (UPDATE {1} SET {2} = {3} WHERE typeof({2}) = 'text' AND "
                    "length({2}) >= 16), or use another cursor_column",
                    wm_offset.empty() ? "none: UTC" : wm_offset, t, c, value));
  }

  /// A text cursor value later than the watermark that sorts before it as text, so that
  /// `cursor > watermark` would never read its row: a fraction beside a value without one
  /// when the texts end in `Z` (`10:00:00.5Z` sorts before `10:00:00Z`, since `.` and the
  /// digits sort before `Z`), or one offset spelled two ways (`10:00:00.7+00:00` beside
  /// `10:00:00Z`). Offsets that differ fail before (check_cursor_offsets); this compares
  /// each text value that sorts below the watermark with it as an instant, over the rows
  /// of the watermark's last two days (an index range where the column has an index): a
  /// value dated earlier than that is earlier whatever its offset.
  void check_cursor_order(sqlite3* db, const std::string& table, const std::string& column,
                          const std::string& after) const {
    const std::string c = quote_ident(column), t = quote_ident(table);
    statement stmt(db, fmt::format("SELECT {0} FROM {1} WHERE {0} >= date(substr(?1, 1, 10), "
                                   "'-2 days') AND {0} < ?1 AND typeof({0}) = 'text' AND "
                                   "length({0}) >= 16 AND {2} > {3} LIMIT 1",
                                   c, t, canonical_sql(c, 9), canonical_sql("?1", 9)));
    if (!row_found(stmt, after))
      return;
    throw error::read_failed(
        options_.name, table, options_.path,
        fmt::format("cursor column '{}' holds '{}', later than the watermark '{}' but sorting "
                    "before it as text, which is how SQLite compares them (a fraction or an "
                    "offset written in another form than the watermark's): its row would never "
                    "be copied",
                    column, as_text(stmt.get(), 0), after),
        canonical_fix(t, c));
  }

  /// SQLite orders every number before every text, whatever the text says: a cursor
  /// column holding both (ISO text and unix seconds in one DATETIME column) would read a
  /// later number as older than the watermark and skip its row for good. Fails the read
  /// naming both forms. The smallest and largest values differ in storage class exactly
  /// when the column mixes them; each is one index probe where the column has an index.
  ///
  /// A date or timestamp column (`dated`) may mix forms within a class too: unix seconds
  /// (INTEGER) and julian days (REAL) compare as numbers (every julian day below every
  /// unix time of this century), and ISO text with `T` and with a space as text (' '
  /// before 'T', so `2024-01-02 23:00` sorts before `2024-01-02T10:00`). Both fail alike.
  ///
  /// Returns whether the column holds its values as REAL (julian days, for a date).
  bool check_cursor_storage(sqlite3* db, const std::string& table, const std::string& column,
                            bool dated, const std::optional<std::string>& after) const {
    const std::string c = quote_ident(column), t = quote_ident(table);
    statement stmt(db, fmt::format("SELECT lo, typeof(lo), hi, typeof(hi) FROM "
                                   "(SELECT (SELECT min({0}) FROM {1}) AS lo, "
                                   "(SELECT max({0}) FROM {1}) AS hi)",
                                   c, t));
    if (stmt.prepare_rc() != SQLITE_OK)
      throw error::read_failed(options_.name, table, options_.path, sqlite3_errmsg(db),
                               fix_for(db, "check that the table and its columns still exist"));
    if (sqlite3_step(stmt.get()) != SQLITE_ROW)
      throw error::read_failed(options_.name, table, options_.path, sqlite3_errmsg(db),
                               fix_for(db, "check that the file is readable and not corrupt"));
    const auto kind = [&](std::string t) {
      return t == "real" && !dated ? std::string("integer") : t;
    };
    const std::string lo = column_text(stmt.get(), 1), hi = column_text(stmt.get(), 3);
    if (dated && lo == "text" && hi == "text") {
      check_cursor_text_forms(db, table, column, after);
      if (after)
        check_cursor_order(db, table, column, *after);
      return false;
    }
    if (lo == "null" || kind(lo) == kind(hi))
      return lo == "real";
    if (dated && kind(lo) != "text" && kind(hi) != "text")
      throw error::read_failed(
          options_.name, table, options_.path,
          fmt::format("cursor column '{}' holds dates as julian days ({}) and as unix seconds "
                      "({}), which SQLite compares as numbers: a later julian day sorts before "
                      "an earlier unix time, so its row could sort before the watermark and "
                      "never be copied",
                      column, lo == "real" ? as_text(stmt.get(), 0) : as_text(stmt.get(), 2),
                      lo == "real" ? as_text(stmt.get(), 2) : as_text(stmt.get(), 0)),
          fmt::format("store the column in one form at the source (UPDATE {0} SET {1} = "
                      "CAST(strftime('%s', {1}) AS INTEGER) WHERE typeof({1}) = 'real'), or "
                      "use another cursor_column",
                      quote_ident(table), quote_ident(column)));
    throw error::read_failed(
        options_.name, table, options_.path,
        fmt::format("cursor column '{}' holds values of two kinds, {} ({}) and {} ({}), and "
                    "SQLite orders every {} before every {}, so a row whose cursor is later "
                    "could sort before the watermark and never be copied",
                    column, lo, as_text(stmt.get(), 0), hi, as_text(stmt.get(), 2), lo, hi),
        fmt::format("store the column in one form at the source (for unix seconds among "
                    "text: UPDATE {0} SET {1} = datetime({1}, 'unixepoch') WHERE typeof({1}) = "
                    "'integer'), or use another cursor_column",
                    t, c));
  }

  // Watermarks arrive as text. SQLite compares by storage class, so numbers are bound as
  // numbers; everything else as text, which NUMERIC-affinity columns convert themselves.
  /// The watermark of a cursor value as SQLite stores it, so that `cursor > ?1` compares
  /// as the read's ORDER BY did: an integer as one (a column without a declared type, or
  /// a timestamp kept as unix seconds, would otherwise be compared with text, which every
  /// integer sorts before), and a date or time kept as text in its own form ("T" or space,
  /// an offset), not the form it loads in.
  static std::string stored_cursor(sqlite3_stmt* s, int col, const portable_type& t,
                                   const value& cell) {
    const int storage = sqlite3_column_type(s, col);
    if (storage == SQLITE_INTEGER)
      return std::to_string(sqlite3_column_int64(s, col));
    const bool dated = t.kind == type_kind::date || t.kind == type_kind::time ||
                       t.kind == type_kind::timestamp_ntz || t.kind == type_kind::timestamp_tz;
    if (storage == SQLITE_TEXT && dated)
      return as_text(s, col);
    // A julian day as the number it is (the shortest text that reads back as it).
    if (storage == SQLITE_FLOAT && dated)
      return fmt::format("{}", sqlite3_column_double(s, col));
    return cursor_text(cell);
  }

  /// Whether `text` is a number and nothing else (a julian day's watermark).
  static bool number_text(std::string_view text) {
    double d = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
    return !text.empty() && ec == std::errc{} && p == text.data() + text.size();
  }

  static void bind_watermark(sqlite3_stmt* s, const std::string& after, const portable_type& t) {
    // An integer binds as one whatever the column's type (see stored_cursor); a TEXT
    // column converts it back to the same text before comparing.
    if (auto i = parse_int64(after); i && std::to_string(*i) == after) {
      sqlite3_bind_int64(s, 1, *i);
      return;
    }
    if (t.kind == type_kind::float32 || t.kind == type_kind::float64) {
      if (auto d = parse_double(after)) {
        sqlite3_bind_double(s, 1, *d);
        return;
      }
    }
    // A date or timestamp kept as julian days: its watermark is the number (stored_cursor).
    if ((t.kind == type_kind::date || t.kind == type_kind::timestamp_ntz ||
         t.kind == type_kind::timestamp_tz) &&
        number_text(after)) {
      sqlite3_bind_double(s, 1, *parse_double(after));
      return;
    }
    sqlite3_bind_text(s, 1, after.data(), static_cast<int>(after.size()), SQLITE_TRANSIENT);
  }

  source_options options_;
  mutable connection_pool pool_;
};

}  // namespace

std::unique_ptr<source> make_sqlite_source(const source_options& options) {
  if (options.path.empty())
    throw error::missing_option(options.name, "sqlite", "path");
  if (!stat_file(options.path))
    throw error::cannot_open(options.name, "sqlite file " + options.path, "no such file",
                             "check path");
  return std::make_unique<sqlite_source>(options);
}

}  // namespace flotilla::sources
