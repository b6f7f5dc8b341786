// SQLite warehouse: one database file in WAL mode (readers keep reading the last
// committed state while a load runs); rows go through one prepared INSERT inside the
// load's transaction, values bound as int64 / double / text / blob.
//
// SQLite has no schemas: Flotilla folds the target schema into the table name for it
// (config::target_table). A table_ref schema here names an attached database ("main").

#include <cerrno>
#include <cstring>
#include <unistd.h>
#include <chrono>
#include <thread>
#include <sqlite3.h>

#include <cmath>
#include <cstdint>

#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sinks/warehouse_internal.hpp"
#include "schema/toml_text.hpp"

namespace flotilla::sinks::detail {
namespace {

using dialects::table_ref;
using text_rows = std::vector<std::vector<std::optional<std::string>>>;

/// How long a statement waits for another connection's write lock. Default: 60 s.
constexpr int busy_timeout_ms = 60'000;

struct statement {
  sqlite3_stmt* s = nullptr;
  statement() = default;
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;
  ~statement() { sqlite3_finalize(s); }
};

text_rows collect(sqlite3* db, sqlite3_stmt* s, const std::string& sql) {
  text_rows out;
  const int cols = sqlite3_column_count(s);
  for (;;) {
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
      break;
    if (rc != SQLITE_ROW)
      throw sink_error(fmt::format("{} (in: {})", sqlite3_errmsg(db), statement_excerpt(sql)));
    auto& row = out.emplace_back();
    for (int c = 0; c < cols; ++c) {
      switch (sqlite3_column_type(s, c)) {
        case SQLITE_NULL:
          row.emplace_back(std::nullopt);
          break;
        case SQLITE_BLOB: {
          const void* p = sqlite3_column_blob(s, c);
          const int n = sqlite3_column_bytes(s, c);
          row.emplace_back(std::string(static_cast<const char*>(p), static_cast<std::size_t>(n)));
          break;
        }
        default: {
          const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
          const int n = sqlite3_column_bytes(s, c);
          row.emplace_back(std::string(p, static_cast<std::size_t>(n)));
          break;
        }
      }
    }
  }
  return out;
}

/// How much of a decimal's text to bind so that a NUMERIC-affinity column keeps it
/// exactly; 0: no way. SQLite stores a whole-number literal within 64 bits as an INTEGER,
/// and anything else, "123456789012345678.00" included, as a REAL: 15 significant digits.
/// So a whole number's zero fraction is left out, and other values need at most 15
/// significant digits.
std::size_t exact_length(std::string_view v) {
  if (v.size() <= 16)
    return v.size();  // at most 15 digits with a point, or a whole number of at most 16
  const std::size_t sign = (v[0] == '-' || v[0] == '+') ? 1 : 0;
  const std::size_t point = std::min(v.find('.'), v.size());
  const std::string_view whole = v.substr(sign, point - sign);
  const std::string_view fraction = point < v.size() ? v.substr(point + 1) : std::string_view();
  const std::size_t lead = std::min(whole.find_first_not_of('0'), whole.size());
  const auto fraction_end = fraction.find_last_not_of('0');
  if (fraction_end == std::string_view::npos) {  // a whole number
    const std::string_view digits = whole.substr(lead);
    if (digits.size() <= 18)  // 18 digits always fit in 64 bits
      return point;
    // 19 digits fit up to 2^63 - 1 (2^63 when negative).
    const std::string_view limit = sign == 1 && v[0] == '-' ? "9223372036854775808"
                                                             : "9223372036854775807";
    if (digits.size() == 19 && digits <= limit)
      return point;
    // Past 64 bits SQLite keeps it as a REAL: exact with 15 significant digits (1e20).
    const auto last = digits.find_last_not_of('0');
    return last != std::string_view::npos && last + 1 <= 15 ? point : 0;
  }
  // Significant digits from the first nonzero one to the fraction's last nonzero one.
  std::size_t digits = whole.size() - lead + fraction_end + 1;
  if (lead == whole.size())  // 0.000123: the fraction's leading zeros do not count
    digits -= std::min(fraction.find_first_not_of('0'), fraction.size());
  return digits <= 15 ? v.size() : 0;
}

class sqlite_inserter final : public row_inserter {
 public:
  sqlite_inserter(sqlite3* db, const dialects::dialect& d, const table_ref& t,
                  const schema::table_schema& columns, bool with_seq)
      : db_(db), dialect_(d), table_(t), with_seq_(with_seq) {
    std::string cols;
    std::string marks;
    for (const auto& c : columns.columns) {
      if (!cols.empty()) {
        cols += ", ";
        marks += ", ";
      }
      cols += d.quote(c.name);
      marks += '?';
      text_kind_.push_back(c.type.kind == schema::type_kind::bytes          ? text_kind::bytes
                           : c.type.kind == schema::type_kind::decimal      ? text_kind::decimal
                           : c.type.kind == schema::type_kind::timestamp_tz ? text_kind::utc
                                                                            : text_kind::text);
      names_.push_back(c.name);
      // SQLite keeps any 64-bit integer in any integer column; a value the column's type
      // cannot hold fails, naming the pin, as in the other targets (a SQLite source's
      // INT column holding 5000000000 loaded silently into an INT it then drifted as).
      using k = schema::type_kind;
      narrow_.push_back(c.type.kind == k::smallint ? narrow_int{-32768, 32767, "SMALLINT"}
                        : c.type.kind == k::int32
                            ? narrow_int{INT32_MIN, INT32_MAX, "INTEGER"}
                            : narrow_int{INT64_MIN, INT64_MAX, nullptr});
      // Likewise a decimal(p,s) column takes no value with more than p - s digits before
      // the point (DuckDB and PostgreSQL refuse it; SQLite would keep 1000 in a
      // decimal(5,2)). 0: no limit.
      decimal_.push_back(c.type.kind == k::decimal && c.type.precision > 0
                             ? decimal_limit{c.type.precision, c.type.scale}
                             : decimal_limit{});
    }
    if (with_seq_) {
      cols += ", " + d.quote(seq_column);
      marks += ", ?";
    }
    sql_ = fmt::format("INSERT INTO {} ({}) VALUES ({})", d.qualified(t), cols, marks);
    if (sqlite3_prepare_v3(db_, sql_.c_str(), static_cast<int>(sql_.size()),
                           SQLITE_PREPARE_PERSISTENT, &stmt_.s, nullptr) != SQLITE_OK)
      throw sink_error(fmt::format("{} (in: {})", sqlite3_errmsg(db_), statement_excerpt(sql_)));
  }

  void append(const schema::row_batch& batch, std::uint64_t first_seq) override {
    sqlite3_stmt* s = stmt_.s;
    const std::size_t width = batch.width;
    const std::size_t n = batch.rows();
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t c = 0; c < width; ++c) {
        const schema::value& v = batch.at(r, c);
        const int at = static_cast<int>(c) + 1;
        switch (v.kind) {
          case schema::value::tag::null:
            sqlite3_bind_null(s, at);
            break;
          case schema::value::tag::boolean:
            sqlite3_bind_int64(s, at, v.b ? 1 : 0);
            break;
          case schema::value::tag::integer:
            if (decimal_[c].precision != 0)
              check_decimal(c, first_seq + r, v, std::to_string(v.i));
            if (narrow_[c].type != nullptr && (v.i < narrow_[c].lo || v.i > narrow_[c].hi))
              // SQLite changes no column's type in place: a loaded table is rebuilt.
              throw sink_error(std::string(
                  bad_value(dialect_, table_, names_[c], first_seq + r, v, narrow_[c].type).what()) +
                  " (a table already loaded is then rebuilt: run with "
                  "--allow-type-change-rebuild)");
            sqlite3_bind_int64(s, at, v.i);
            break;
          case schema::value::tag::real:
            if (std::isnan(v.d))  // SQLite stores a NaN as NULL
              throw sink_error(fmt::format(
                  "{}: row {}: column {} holds NaN, which SQLite cannot store (it would keep "
                  "NULL); declare the column as text to keep it (columns = {{ {} = \"text\" "
                  "}}), or load into a duckdb or postgres target",
                  dialect_.qualified(table_), first_seq + r + 1, dialect_.quote(names_[c]),
                  schema::toml_key(names_[c])));
            sqlite3_bind_double(s, at, v.d);
            break;
          case schema::value::tag::text:
            // The batch outlives the step, so SQLite need not copy the bytes.
            if (text_kind_[c] == text_kind::bytes) {
              sqlite3_bind_blob64(s, at, v.s.data(), v.s.size(), SQLITE_STATIC);
              break;
            }
            if (text_kind_[c] == text_kind::decimal) {
              if (decimal_[c].precision != 0)
                check_decimal(c, first_seq + r, v, v.s);
              const std::size_t keep = exact_length(v.s);
              if (keep != 0) {
                sqlite3_bind_text64(s, at, v.s.data(), keep, SQLITE_STATIC, SQLITE_UTF8);
                break;
              }
              throw sink_error(fmt::format(
                  "{}: row {}: column {} holds {}, which SQLite cannot store exactly (its "
                  "numbers keep 15 significant digits, or a whole number within 64 bits); "
                  "declare the column as text to keep every digit (columns = {{ {} = "
                  "\"text\" }}), or load into a duckdb or postgres target",
                  dialect_.qualified(table_), first_seq + r + 1, dialect_.quote(names_[c]), v.s,
                  schema::toml_key(names_[c])));
            }
            // A UTC instant as SQLite's date and time functions read one: with the
            // offset's minutes (+00:00); with "+00" alone they give NULL.
            if (text_kind_[c] == text_kind::utc && v.s.ends_with("+00")) {
              utc_.assign(v.s).append(":00");
              sqlite3_bind_text64(s, at, utc_.data(), utc_.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
              break;
            }
            sqlite3_bind_text64(s, at, v.s.data(), v.s.size(), SQLITE_STATIC, SQLITE_UTF8);
            break;
        }
      }
      if (with_seq_)
        sqlite3_bind_int64(s, static_cast<int>(width) + 1,
                           static_cast<sqlite3_int64>(first_seq + r));
      const int rc = sqlite3_step(s);
      sqlite3_reset(s);
      if (rc != SQLITE_DONE) {
        // A refusal of the database, not of this row's values (a read-only file, a full
        // disk, a lock): said without the row, which would send the user to their data.
        const int primary = rc & 0xff;
        if (primary == SQLITE_READONLY || primary == SQLITE_FULL || primary == SQLITE_BUSY ||
            primary == SQLITE_LOCKED || primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN)
          throw sink_error(fmt::format("{}: {}", dialect_.qualified(table_), sqlite3_errmsg(db_)));
        throw sink_error(fmt::format("{}: row {}: {}", dialect_.qualified(table_),
                                     first_seq + r + 1,
                                     sqlite3_errmsg(db_)));
      }
    }
    sqlite3_clear_bindings(s);
  }

  void finish() override {
    // nop: every row is already in the transaction
  }

 private:
  sqlite3* db_;
  const dialects::dialect& dialect_;
  table_ref table_;
  bool with_seq_;
  struct narrow_int {
    std::int64_t lo, hi;
    const char* type;  ///< the engine type named in the error; null: any 64-bit value
  };
  std::vector<narrow_int> narrow_;
  struct decimal_limit {
    int precision = 0;  ///< 0: not a decimal(p,s) column
    int scale = 0;
  };
  std::vector<decimal_limit> decimal_;

  /// Refuses a decimal value (`text`, its digits) with more digits before the point than
  /// column `c`'s decimal(p,s) holds, naming the row, the column and the pin that holds it.
  void check_decimal(std::size_t c, std::uint64_t row, const schema::value& v,
                     std::string_view text) const {
    std::size_t at = text.find_first_not_of("+-");
    at = at == std::string_view::npos ? text.size() : at;
    const std::size_t point = std::min(text.find('.', at), text.size());
    std::size_t lead = at;
    while (lead < point && text[lead] == '0')
      ++lead;
    const int whole = static_cast<int>(point - lead);
    const auto [precision, scale] = decimal_[c];
    if (whole <= precision - scale)
      return;
    // Past what any decimal holds (38 digits): only text keeps it as written.
    if (whole + scale > 38)
      throw sink_error(fmt::format(
          "{}: row {}, column '{}': value '{}' does not fit type DECIMAL({},{}), which holds {} "
          "digit(s) before the point, nor any decimal (38 digits at most); declare the column "
          "as text in flotilla.toml (the table's columns = {{ {} = \"text\" }}) and run again "
          "(a table already loaded is then rebuilt: run with --allow-type-change-rebuild), or "
          "fix the value at the source",
          dialect_.qualified(table_), row + 1, names_[c], value_text(v), precision, scale,
          precision - scale, schema::toml_key(names_[c])));
    throw sink_error(fmt::format(
        "{}: row {}, column '{}': value '{}' does not fit type DECIMAL({},{}), which holds {} "
        "digit(s) before the point; declare a type that holds it in flotilla.toml (the table's "
        "columns = {{ {} = \"decimal({},{})\" }}) and run again (a table already loaded is then "
        "rebuilt: run with --allow-type-change-rebuild)",
        dialect_.qualified(table_), row + 1, names_[c], value_text(v), precision, scale,
        precision - scale, schema::toml_key(names_[c]), std::min(38, whole + scale), scale));
  }
  enum class text_kind : std::uint8_t { text, bytes, decimal, utc };
  std::vector<text_kind> text_kind_;
  std::string utc_;  ///< a timestamp_tz value with its offset's minutes
  std::vector<std::string> names_;
  std::string sql_;
  statement stmt_;
};

class sqlite_warehouse final : public warehouse_base {
 public:
  sqlite_warehouse(const warehouse_options& options, std::unique_ptr<dialects::dialect> d)
      : warehouse_base(options.name, std::move(d)), path_(options.path) {
    if (options.path.empty())
      throw error("a sqlite target needs a path (the database file)");
    // As a DuckDB target does: the file's directory is made when missing.
    std::error_code ec;
    const auto parent = std::filesystem::path(options.path).parent_path();
    if (!parent.empty())
      std::filesystem::create_directories(parent, ec);
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(options.path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw error(fmt::format("cannot open SQLite database '{}': {}; {}", options.path, msg,
                              open_advice(options)));
    }
    name_ = options.name;
    sqlite3_busy_handler(db_, &sqlite_warehouse::on_busy, this);
    try {
      // WAL: readers see the last committed state while a load writes, and a crash
      // leaves the last committed state intact.
      run("PRAGMA journal_mode = WAL");
      run("PRAGMA synchronous = NORMAL");
      // A rebuild renames its new table over the old one; without legacy mode SQLite
      // also checks every view and trigger on each RENAME. Flotilla's tables have no
      // references. (A full refresh renames nothing: dialect::replaces_in_place.)
      run("PRAGMA legacy_alter_table = ON");
      run("PRAGMA cache_size = -65536");  // 64 MiB: bulk loads touch many index pages
    } catch (const std::exception&) {
      // The first statement is where a file that is not SQLite's shows: name the file.
      const std::string msg = sqlite3_errmsg(db_);
      sqlite3_close(db_);
      throw error(fmt::format("cannot open SQLite database '{}': {}; {}", options.path, msg,
                              open_advice(options)));
    }
  }

  ~sqlite_warehouse() override { sqlite3_close(db_); }

  /// What to do about a database file that did not open: its directory or the file not
  /// writable (SQLite writes its -wal and -shm files beside the database), else the path.
  static std::string open_advice(const warehouse_options& options) {
    namespace fs = std::filesystem;
    const fs::path file(options.path);
    const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
    std::error_code ec;
    if (fs::is_directory(file, ec))
      return fmt::format("it is a directory: point path in [targets.{}] at a database file",
                         options.name);
    if (fs::exists(file, ec) && ::access(file.c_str(), W_OK) != 0)
      return fmt::format("the file is not writable for the user Flotilla runs as ({}): make it "
                         "writable",
                         std::strerror(errno));
    if (fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK) != 0)
      return fmt::format("its directory {} is not writable for the user Flotilla runs as ({}), "
                         "and SQLite writes its -wal and -shm files beside the database: make "
                         "the directory writable",
                         dir.string(), std::strerror(errno));
    return fmt::format("check path in [targets.{}]", options.name);
  }

  std::optional<schema::table_schema> describe(const table_ref& table) override {
    const std::string sql = table.schema.empty()
                                ? "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1)"
                                : "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1, ?2)";
    statement st;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
      throw error(fmt::format("cannot read the columns of {}: {}", dialect().qualified(table),
                              sqlite3_errmsg(db_)));
    sqlite3_bind_text(st.s, 1, table.name.c_str(), static_cast<int>(table.name.size()),
                      SQLITE_TRANSIENT);
    if (!table.schema.empty())
      sqlite3_bind_text(st.s, 2, table.schema.c_str(), static_cast<int>(table.schema.size()),
                        SQLITE_TRANSIENT);
    text_rows rows;
    try {
      rows = collect(db_, st.s, sql);
    } catch (const sink_error& e) {
      throw error(fmt::format("cannot read the columns of {}: {}", dialect().qualified(table),
                              e.what()));
    }
    // A view answers pragma_table_info too, and an index holds a name no table may take.
    // A name with columns is checked by one lookup in SQLite's schema hash (it refuses a
    // view); only a name without any scans the catalog for an index (a load creates the
    // table next, which costs far more).
    if (!rows.empty()) {
      if (sqlite3_table_column_metadata(db_, table.schema.empty() ? nullptr : table.schema.c_str(),
                                        table.name.c_str(), nullptr, nullptr, nullptr, nullptr,
                                        nullptr, nullptr) != SQLITE_OK)
        throw not_a_table(table, "a view");
    } else if (auto held = held_by(table.schema, {table.name}); !held.empty()) {
      throw not_a_table(table, held.begin()->second);
    }
    if (rows.empty())
      return std::nullopt;
    schema::table_schema out;
    for (const auto& r : rows) {
      const std::string type = r[1].value_or("");
      auto t = dialect().parse_physical(type);
      if (!t)
        throw unmappable(table, r[0].value_or(""), type, t.error());
      out.columns.push_back(
          schema::column{r[0].value_or(""), *t, r[2] == "0", r[3].value_or("0") != "0"});
    }
    return out;
  }

  /// The names of `names` (in `schema`, an attached database, or main) that a view or an
  /// index holds, each with what holds it ("a view", "an index on \"t\""). SQLite's
  /// tables, views and indexes share one namespace, names matched ignoring ASCII case.
  /// One pass over the schema's catalog, whatever the number of names.
  std::map<std::string, std::string> held_by(const std::string& schema,
                                             const std::vector<std::string>& names) {
    std::map<std::string, std::string> out;
    const auto& d = dialect();
    const auto fold = [&](const std::string& n) { return schema::fold_name(n, d.names()); };
    const std::string sql = fmt::format(
        "SELECT name, type, tbl_name FROM {}sqlite_master WHERE type IN ('view', 'index') AND "
        "substr(name, 1, 7) <> 'sqlite_'",
        schema.empty() ? std::string() : d.quote(schema) + ".");
    statement st;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
      return out;  // the load's own statements say what is wrong
    const auto text = [&](int c) {
      const auto* v = reinterpret_cast<const char*>(sqlite3_column_text(st.s, c));
      return std::string(v ? v : "", static_cast<std::size_t>(sqlite3_column_bytes(st.s, c)));
    };
    std::map<std::string, std::string> held;  // folded name -> what holds it
    while (sqlite3_step(st.s) == SQLITE_ROW) {
      table_ref on{"", schema, text(2)};
      held.emplace(fold(text(0)), text(1) == "view"
                                      ? std::string("a view")
                                      : fmt::format("an index on {}", d.qualified(on)));
    }
    if (held.empty())
      return out;
    for (const auto& n : names)
      if (const auto it = held.find(fold(n)); it != held.end())
        out.emplace(n, it->second);
    return out;
  }

  /// The tables a fleet's run or plan loads into, described by one statement: the names
  /// go in as one JSON array and each meets `pragma_table_info`, so only the tables asked
  /// for are read, with none of the per-table statement preparation that describe()
  /// pays (~40 us each in a file of 10,000 tables, where each name lookup walks SQLite's
  /// schema hash).
  std::optional<described_tables> describe_tables(const std::string&, const std::string& schema,
                                                  const std::vector<std::string>& names) override {
    const std::string sql =
        schema.empty()
            ? "SELECT n.key, p.name, p.type, p.\"notnull\", p.pk FROM json_each(?1) AS n "
              "JOIN pragma_table_info(n.value) AS p ORDER BY n.key, p.cid"
            : "SELECT n.key, p.name, p.type, p.\"notnull\", p.pk FROM json_each(?1) AS n "
              "JOIN pragma_table_info(n.value, ?2) AS p ORDER BY n.key, p.cid";
    std::string asked;
    try {
      asked = nlohmann::json(names).dump();
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;  // a name that is not UTF-8: describe each table instead
    }
    statement st;
    const auto fail = [&](const std::string& why) {
      return error(fmt::format("cannot read the columns of the tables of schema {}: {}",
                               schema.empty() ? std::string("(main)") : schema, why));
    };
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
      throw fail(sqlite3_errmsg(db_));
    sqlite3_bind_text(st.s, 1, asked.c_str(), static_cast<int>(asked.size()), SQLITE_TRANSIENT);
    if (!schema.empty())
      sqlite3_bind_text(st.s, 2, schema.c_str(), static_cast<int>(schema.size()),
                        SQLITE_TRANSIENT);
    described_tables out;
    type_cache parsed(dialect());
    const auto text = [&](int c) {
      const auto* v = reinterpret_cast<const char*>(sqlite3_column_text(st.s, c));
      return std::string(v ? v : "", static_cast<std::size_t>(sqlite3_column_bytes(st.s, c)));
    };
    std::size_t reading = names.size();  // the index whose rows are being read
    described_tables::mapped_type* table = nullptr;  // its entry, or null: skip its rows
    for (;;) {  // index into names, column, type, notnull, pk; a table's rows in column order
      const int rc = sqlite3_step(st.s);
      if (rc == SQLITE_DONE)
        break;
      if (rc != SQLITE_ROW)
        throw fail(sqlite3_errmsg(db_));
      const auto at = static_cast<std::size_t>(sqlite3_column_int64(st.s, 0));
      if (at >= names.size())
        throw fail("the catalog answered for a table not asked for");
      if (at != reading) {  // a name's first row
        reading = at;
        const auto [it, first_time] = out.try_emplace(names[at], schema::table_schema{});
        table = first_time ? &it->second : nullptr;  // a name asked twice is read once
      }
      if (table == nullptr)
        continue;
      if (!*table)
        continue;  // an unmappable column came first: the table reads as describe() would
      const std::string column = text(1), type = text(2);
      const auto& t = parsed(type);
      if (!t) {
        *table = std::unexpected(unmappable({"", schema, names[at]}, column, type, t.error())
                                     .what());
        continue;
      }
      (*table)->columns.push_back(schema::column{column, *t, sqlite3_column_int64(st.s, 3) == 0,
                                                 sqlite3_column_int64(st.s, 4) != 0});
    }
    for (auto& [name, what] : held_by(schema, names))
      out.insert_or_assign(name,
                           std::unexpected(not_a_table({"", schema, name}, what).what()));
    return out;
  }

  bool keeps_hand_made_on_replace() const override { return true; }

  std::vector<hand_made_index> hand_made_indexes(const table_ref& table) override {
    const auto& d = dialect();
    // sql is NULL for the automatic index of a PRIMARY KEY or UNIQUE constraint, which
    // the table's own definition makes. A trigger on the table goes with it in a rebuild
    // too (the old table is dropped): it is made again alike, named as a trigger.
    const std::string prefix =
        table.schema.empty() ? std::string() : d.quote(table.schema) + ".";
    const auto rows = query(fmt::format(
        "SELECT name, sql, type FROM {}sqlite_master WHERE type IN ('index', 'trigger') AND "
        "tbl_name = {} AND sql IS NOT NULL ORDER BY type, name",
        prefix, d.literal(table.name)));
    std::vector<hand_made_index> out;
    for (const auto& r : rows) {
      if (r.size() < 3 || !r[0] || !r[1] || !r[2])
        continue;
      table_ref object = table;
      object.name = *r[0];
      const bool trigger = *r[2] == "trigger";
      out.push_back({trigger ? "trigger " + *r[0] : *r[0], *r[1],
                     fmt::format("DROP {} {}", trigger ? "TRIGGER" : "INDEX",
                                 d.qualified(object))});
    }
    return out;
  }

  text_rows query(const std::string& sql) override {
    statement st;
    if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &st.s, nullptr) !=
        SQLITE_OK)
      throw error(fmt::format("{} (in: {})", sqlite3_errmsg(db_), statement_excerpt(sql)));
    try {
      return collect(db_, st.s, sql);
    } catch (const sink_error& e) {
      throw error(e.what());
    }
  }

  void run(const std::string& sql) override {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
      std::string m = msg ? msg : sqlite3_errmsg(db_);
      sqlite3_free(msg);
      const auto* stop = stop_request();
      if ((sqlite3_extended_errcode(db_) & 0xff) == SQLITE_BUSY && stop != nullptr &&
          stop->load(std::memory_order_relaxed))
        throw error(fmt::format("stopped while waiting for the write lock another process "
                                "holds on '{}' (in: {})",
                                path_, statement_excerpt(sql)));
      if ((sqlite3_extended_errcode(db_) & 0xff) == SQLITE_BUSY)
        throw error(fmt::format("{} (in: {}): another process holds a write lock on '{}' (waited "
                                "{} s for it); let it finish or stop it, then run again",
                                m, sql, path_, busy_timeout_ms / 1000));
      throw error(fmt::format("{} (in: {})", m, statement_excerpt(sql)));
    }
  }

  // IMMEDIATE takes the write lock up front: a deferred transaction that later needs it
  // can fail with SQLITE_BUSY without waiting for the busy timeout.
  void begin() override { run("BEGIN IMMEDIATE"); }
  /// The load holds the write lock from its BEGIN IMMEDIATE: the token read before its
  /// commit is the one the commit overwrites (two runs of one table at the same time).
  bool checks_token_in_transaction() const override { return true; }
  void commit_transaction() override { run("COMMIT"); }
  void rollback() noexcept override {
    if (!sqlite3_get_autocommit(db_))
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  std::unique_ptr<row_inserter> open_inserter(const table_ref& table,
                                              const schema::table_schema& columns,
                                              bool with_seq) override {
    try {
      return std::make_unique<sqlite_inserter>(db_, dialect(), table, columns, with_seq);
    } catch (const sink_error& e) {
      throw error(e.what());
    }
  }

  void ensure_schema(const std::string& schema) override {
    // SQLite cannot create a schema; an attached database is the only kind there is.
    statement st;
    sqlite3_prepare_v2(db_, "SELECT 1 FROM pragma_database_list WHERE name = ?1", -1, &st.s,
                       nullptr);
    sqlite3_bind_text(st.s, 1, schema.c_str(), static_cast<int>(schema.size()), SQLITE_TRANSIENT);
    if (collect(db_, st.s, "pragma_database_list").empty())
      throw error(fmt::format(
          "SQLite has no schema '{}': SQLite targets keep the schema in the table name", schema));
  }

  void ensure_bookkeeping() override {
    const auto& d = dialect();
    run(fmt::format("CREATE TABLE IF NOT EXISTS {} ({} TEXT PRIMARY KEY, {} TEXT, {} TEXT)",
                    d.qualified(bookkeeping_table()), d.quote("table_name"), d.quote("token"),
                    d.quote("committed_at")));
  }

  table_ref bookkeeping_table() const override {
    return table_ref{"", "", std::string(commits_table)};
  }

 private:
  std::string path_;
  std::string name_;  ///< the target's name in flotilla.toml
  std::chrono::steady_clock::time_point busy_since_;
  bool busy_said_ = false;

  /// Another connection holds the file's write lock: wait for it, up to busy_timeout_ms
  /// for each statement, saying so on stderr once a second has gone (a run would
  /// otherwise sit silent for a minute a statement), and give up at once when the run
  /// is asked to stop (Ctrl-C, SIGTERM).
  static int on_busy(void* self, int count) {
    auto& wh = *static_cast<sqlite_warehouse*>(self);
    const auto now = std::chrono::steady_clock::now();
    if (count == 0)
      wh.busy_since_ = now;
    if (const auto* stop = stop_request(); stop != nullptr && stop->load(std::memory_order_relaxed))
      return 0;
    const auto waited = now - wh.busy_since_;
    if (waited >= std::chrono::milliseconds(busy_timeout_ms))
      return 0;
    if (waited >= std::chrono::seconds(1) && !wh.busy_said_) {
      wh.busy_said_ = true;
      fmt::print(stderr,
                 "flotilla: target '{}': another process holds a write lock on SQLite database "
                 "'{}'; waiting up to {} s for it (each statement)\n",
                 wh.name_, wh.path_, busy_timeout_ms / 1000);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(count < 10 ? 5 : 50));
    return 1;
  }
  sqlite3* db_ = nullptr;
};

}  // namespace

std::unique_ptr<warehouse> open_sqlite(const warehouse_options& options,
                                       std::unique_ptr<dialects::dialect> d) {
  return std::make_unique<sqlite_warehouse>(options, std::move(d));
}

}  // namespace flotilla::sinks::detail
