// DuckDB warehouse through the C API: rows go through the appender in data chunks, in
// typed slots for booleans, integers, floats, text, blobs, decimals, dates and
// timestamps; every other type goes in as text that the appender casts exactly (times,
// uuids, intervals).

#include <duckdb.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "schema/calendar.hpp"
#include "schema/toml_text.hpp"
#include "schema/utf8.hpp"
#include "sinks/warehouse_internal.hpp"

namespace flotilla::sinks::detail {
namespace {

using dialects::table_ref;
using text_rows = std::vector<std::vector<std::optional<std::string>>>;

/// One process-wide cache, so every warehouse (and reader) opening the same file shares
/// one database instance instead of fighting over the file lock.
duckdb_instance_cache instance_cache() {
  static duckdb_instance_cache cache = duckdb_create_instance_cache();
  return cache;
}

/// How long opening a file another process has open waits for it:
/// FLOTILLA_DUCKDB_LOCK_WAIT seconds (default 30; 0 fails at once); nullopt when the
/// variable holds no such number.
std::optional<std::chrono::milliseconds> lock_wait() {
  static const std::optional<std::chrono::milliseconds> wait =
      []() -> std::optional<std::chrono::milliseconds> {
    const char* env = std::getenv("FLOTILLA_DUCKDB_LOCK_WAIT");
    if (env == nullptr || *env == '\0')
      return std::chrono::milliseconds(30'000);
    char* end = nullptr;
    const double s = std::strtod(env, &end);
    if (*end != '\0' || !(s >= 0 && s < 1e6))
      return std::nullopt;
    return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
  }();
  return wait;
}

/// "/usr/bin/flotilla (PID 42)" out of DuckDB's "... Conflicting lock is held in
/// /usr/bin/flotilla (PID 42) by user ...", `at` being where that phrase begins.
std::string lock_holder(const std::string& msg, std::size_t at) {
  std::string holder = msg.substr(at + 28);
  if (const auto end = holder.find(')'); end != std::string::npos)
    holder.resize(end + 1);
  return holder;
}

struct result_holder {
  duckdb_result r{};
  ~result_holder() { duckdb_destroy_result(&r); }
};

text_rows collect(duckdb_result& r) {
  text_rows out;
  const idx_t cols = duckdb_column_count(&r);
  const idx_t rows = duckdb_row_count(&r);
  out.reserve(rows);
  for (idx_t i = 0; i < rows; ++i) {
    auto& row = out.emplace_back();
    row.reserve(cols);
    for (idx_t c = 0; c < cols; ++c) {
      if (duckdb_value_is_null(&r, c, i)) {
        row.emplace_back(std::nullopt);
        continue;
      }
      char* v = duckdb_value_varchar(&r, c, i);
      row.emplace_back(v ? std::string(v) : std::string());
      duckdb_free(v);
    }
  }
  return out;
}

/// The slot type a chunk column gets for a table column of type `id`: the same type
/// where we fill it natively, VARCHAR (cast by the appender) otherwise.
duckdb_type chunk_type(duckdb_type id) {
  switch (id) {
    case DUCKDB_TYPE_BOOLEAN:
    case DUCKDB_TYPE_TINYINT:
    case DUCKDB_TYPE_SMALLINT:
    case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_BIGINT:
    case DUCKDB_TYPE_FLOAT:
    case DUCKDB_TYPE_DOUBLE:
    case DUCKDB_TYPE_VARCHAR:
    case DUCKDB_TYPE_BLOB:
    case DUCKDB_TYPE_DECIMAL:
    case DUCKDB_TYPE_DATE:
    case DUCKDB_TYPE_TIMESTAMP:
    case DUCKDB_TYPE_TIMESTAMP_TZ:
      return id;
    default:
      return DUCKDB_TYPE_VARCHAR;
  }
}

// ---- canonical texts to DuckDB's binary forms ----------------------------------------
// Decimals, dates and timestamps travel as text in their canonical form (schema/rows.hpp).
// These parse exactly that form and refuse anything else; the inserter then hands the
// column over as text for DuckDB's own cast, so every text DuckDB accepted before still
// loads the same.

constexpr std::int64_t micros_per_day = 86'400'000'000;

bool digits_at(std::string_view s, std::size_t pos, std::size_t n, unsigned& out) {
  if (pos + n > s.size())
    return false;
  unsigned v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    const char c = s[i];
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  out = v;
  return true;
}

/// "YYYY-MM-DD" with a year 0001..9999, at the start of `s`: days since the epoch.
bool parse_canonical_date(std::string_view s, std::int64_t& days) {
  unsigned y = 0, m = 0, d = 0;
  if (s.size() < 10 || !digits_at(s, 0, 4, y) || s[4] != '-' || !digits_at(s, 5, 2, m) ||
      s[7] != '-' || !digits_at(s, 8, 2, d))
    return false;
  static constexpr unsigned month_days[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y == 0 || m < 1 || m > 12 || d < 1 || d > month_days[m - 1])
    return false;
  if (m == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
    return false;
  days = schema::days_from_civil(y, m, d);
  return true;
}

/// "YYYY-MM-DD HH:MM:SS[.f{1,6}]", then "+00" when `utc_suffix` (timestamp_tz):
/// microseconds since the epoch.
bool parse_canonical_timestamp(std::string_view s, bool utc_suffix, std::int64_t& micros) {
  std::int64_t days = 0;
  unsigned h = 0, mi = 0, sec = 0;
  if (s.size() < 19 || !parse_canonical_date(s, days) || s[10] != ' ' ||
      !digits_at(s, 11, 2, h) || s[13] != ':' || !digits_at(s, 14, 2, mi) || s[16] != ':' ||
      !digits_at(s, 17, 2, sec) || h > 23 || mi > 59 || sec > 59)
    return false;
  std::size_t pos = 19;
  std::int64_t frac = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t n = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9' && n < 6) {
      frac = frac * 10 + (s[pos++] - '0');
      ++n;
    }
    if (n == 0)
      return false;
    for (; n < 6; ++n)
      frac *= 10;
  }
  if (utc_suffix) {
    if (s.substr(pos) != "+00")
      return false;
    pos += 3;
  }
  if (pos != s.size())
    return false;
  micros = days * micros_per_day + ((h * 60 + mi) * 60 + sec) * std::int64_t{1'000'000} + frac;
  return true;
}

enum class decimal_parse { ok, not_canonical, inexact };

/// "[-]digits[.digits]" with at most `scale` fractional digits (more are taken when they
/// are zeros) and at most `width` digits in all once scaled: the unscaled integer (-12.5
/// at scale 2 -> -1250). `inexact`: canonical, but with nonzero digits past `scale`, which
/// DuckDB's own cast from text would round away. `not_canonical`: anything else, including
/// a value too wide, which that cast refuses.
decimal_parse parse_canonical_decimal(std::string_view s, int width, int scale, __int128& out) {
  std::size_t pos = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative)
    ++pos;
  __int128 v = 0;
  int digits = 0;
  const std::size_t int_start = pos;
  for (; pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; ++pos) {
    v = v * 10 + (s[pos] - '0');
    if (v != 0 && ++digits > width)
      return decimal_parse::not_canonical;
  }
  if (pos == int_start)
    return decimal_parse::not_canonical;
  int frac = 0;
  bool dropped = false;  // nonzero digits past the scale
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const std::size_t frac_start = pos;
    for (; pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; ++pos) {
      if (++frac > scale) {
        dropped = dropped || s[pos] != '0';
        continue;
      }
      v = v * 10 + (s[pos] - '0');
      if (v != 0 && ++digits > width)
        return decimal_parse::not_canonical;
    }
    if (pos == frac_start)
      return decimal_parse::not_canonical;
  }
  if (pos != s.size())
    return decimal_parse::not_canonical;
  if (dropped)
    return decimal_parse::inexact;
  for (; frac < scale; ++frac) {
    v *= 10;
    if (v != 0 && ++digits > width)
      return decimal_parse::not_canonical;
  }
  out = negative ? -v : v;
  return decimal_parse::ok;
}

std::string_view type_label(duckdb_type id) {
  switch (id) {
    case DUCKDB_TYPE_BOOLEAN: return "BOOLEAN";
    case DUCKDB_TYPE_TINYINT: return "TINYINT";
    case DUCKDB_TYPE_SMALLINT: return "SMALLINT";
    case DUCKDB_TYPE_INTEGER: return "INTEGER";
    case DUCKDB_TYPE_BIGINT: return "BIGINT";
    case DUCKDB_TYPE_FLOAT: return "FLOAT";
    case DUCKDB_TYPE_DOUBLE: return "DOUBLE";
    case DUCKDB_TYPE_BLOB: return "BLOB";
    default: return "VARCHAR";
  }
}

/// Rows of a DuckDB row group (its default row_group_size).
constexpr idx_t row_group_rows = 122'880;
/// Rows from which a load counts as a bulk load for DuckDB's threads (duckdb_threads).
/// Switching at the first full row group instead cost a 1M-row PostgreSQL -> DuckDB copy
/// 3-11% more CPU (three A/B rounds); fleets' small tables stay below either.
constexpr idx_t bulk_rows = 8192;

class duckdb_inserter final : public row_inserter {
 public:
  duckdb_inserter(duckdb_database db, duckdb_connection con, const dialects::dialect& d,
                  const table_ref& t, const schema::table_schema& columns, bool with_seq)
      : dialect_(d), table_(t), width_(columns.columns.size()), with_seq_(with_seq), db_(db) {
    try {
      open(con, columns);
    } catch (...) {
      if (app_)
        duckdb_appender_destroy(&app_);
      throw;
    }
  }

  ~duckdb_inserter() override {
    if (chunk_)
      duckdb_destroy_data_chunk(&chunk_);
    if (app_)
      duckdb_appender_destroy(&app_);  // an abandoned load: the transaction rolls back
    done_appending();
  }

  /// Called with true once this load has bulk_rows rows, right before it hands them to the
  /// appender (a smaller load never is), then with false once its appends end (finish, or
  /// an abandoned load).
  void on_bulk_appending(std::function<void(bool)> f) { on_bulk_ = std::move(f); }

  void append(const schema::row_batch& batch, std::uint64_t first_seq) override {
    const std::size_t n = batch.rows();
    std::size_t r = 0;
    while (r < n) {
      const std::size_t take = std::min<std::size_t>(capacity_ - fill_, n - r);
      if (fill_ == 0)
        chunk_first_row_ = first_seq + r;
      for (std::size_t c = 0; c < width_; ++c) {
        vectors_[c] = duckdb_data_chunk_get_vector(chunk_, c);
        data_[c] = duckdb_vector_get_data(vectors_[c]);
      }
      // Row by row, so the batch (row-major, 56 bytes a cell) is read in order.
      std::size_t c = width_;
      std::size_t at = 0;  // the row whose value the slot refused
      for (std::size_t k = 0; k < take && c == width_; ++k) {
        const schema::value* row = &batch.cells[(r + k) * width_];
        for (c = 0; c < width_; ++c)
          if (!fill_cell(c, row[c], fill_ + k, first_seq + r + k)) {
            at = k;
            break;
          }
      }
      if (c < width_) {
        // A value the column's binary slot does not take (not in canonical form): the
        // rows before this slice go in as they are, and from here on the column goes in
        // as text for DuckDB to cast; then the slice is filled again. The value is kept
        // to name, should DuckDB's cast refuse it.
        const schema::value& v = batch.cells[(r + at) * width_ + c];
        if (v.kind == schema::value::tag::text)
          refused_.emplace(c, fmt::format("row {}: value '{}'", first_seq + r + at + 1,
                                          v.s.substr(0, 80)));
        if (fill_ > 0)
          flush_chunk();
        slots_[c].kind = DUCKDB_TYPE_VARCHAR;
        make_chunk();
        continue;
      }
      if (with_seq_) {
        auto* seq = static_cast<std::int64_t*>(
            duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk_, width_)));
        for (std::size_t k = 0; k < take; ++k)
          seq[fill_ + k] = static_cast<std::int64_t>(first_seq + r + k);
      }
      fill_ += take;
      r += take;
      if (fill_ == capacity_)
        flush_chunk();
    }
  }

  void finish() override {
    if (fill_ > 0)
      flush_chunk();
    if (duckdb_appender_close(app_) == DuckDBError)
      fail("cannot flush the appender");
    done_appending();
  }

 private:
  /// What one chunk column holds.
  struct slot {
    duckdb_type kind = DUCKDB_TYPE_VARCHAR;
    duckdb_type declared = DUCKDB_TYPE_VARCHAR;  ///< the table column's type
    duckdb_type storage = DUCKDB_TYPE_INVALID;  ///< DECIMAL: its physical integer type
    std::uint8_t width = 0;                     ///< DECIMAL: precision
    std::uint8_t scale = 0;                     ///< DECIMAL: scale
  };

  void done_appending() noexcept {
    if (auto f = std::exchange(on_bulk_, nullptr); f && bulk_)
      f(false);
    bulk_ = false;
  }

  void open(duckdb_connection con, const schema::table_schema& columns) {
    const table_ref& t = table_;
    if (duckdb_appender_create_ext(con, t.catalog.empty() ? nullptr : t.catalog.c_str(),
                                   t.schema.empty() ? nullptr : t.schema.c_str(),
                                   t.name.c_str(), &app_) == DuckDBError)
      fail("cannot open an appender");
    for (const auto& c : columns.columns) {
      names_.push_back(c.name);
      if (duckdb_appender_add_column(app_, c.name.c_str()) == DuckDBError)
        fail(fmt::format("cannot append to column '{}'", c.name));
    }
    if (with_seq_ && duckdb_appender_add_column(app_, std::string(seq_column).c_str()) ==
                         DuckDBError)
      fail("cannot append to the sequence column");

    const idx_t n = duckdb_appender_column_count(app_);
    for (idx_t i = 0; i < n; ++i) {
      duckdb_logical_type lt = duckdb_appender_column_type(app_, i);
      slot s;
      s.declared = duckdb_get_type_id(lt);
      s.kind = chunk_type(s.declared);
      if (s.kind == DUCKDB_TYPE_DECIMAL) {
        s.storage = duckdb_decimal_internal_type(lt);
        s.width = duckdb_decimal_width(lt);
        s.scale = duckdb_decimal_scale(lt);
      }
      duckdb_destroy_logical_type(&lt);
      slots_.push_back(s);
    }
    make_chunk();
    vectors_.resize(width_);
    data_.resize(width_);
    capacity_ = duckdb_vector_size();
  }

  /// (Re)creates the chunk with the slots' current types; it must hold no rows.
  void make_chunk() {
    if (chunk_)
      duckdb_destroy_data_chunk(&chunk_);
    std::vector<duckdb_logical_type> types;
    for (const slot& s : slots_)
      types.push_back(s.kind == DUCKDB_TYPE_DECIMAL ? duckdb_create_decimal_type(s.width, s.scale)
                                                    : duckdb_create_logical_type(s.kind));
    chunk_ = duckdb_create_data_chunk(types.data(), types.size());
    for (auto& lt : types)
      duckdb_destroy_logical_type(&lt);
  }

  [[noreturn]] void fail(std::string_view what) {
    std::string msg = app_ ? duckdb_appender_error(app_) : "unknown error";
    // A value with no binary form for its column went in as text, which the appender does
    // not cast: the value does not fit the column's type. Named, with what to do.
    static constexpr std::string_view mismatch = "type mismatch in AppendDataChunk";
    static constexpr std::string_view for_column = "for column ";
    if (const auto at = msg.find(for_column);
        msg.find(mismatch) != std::string::npos && at != std::string::npos) {
      const std::size_t c = std::strtoul(msg.c_str() + at + for_column.size(), nullptr, 10);
      if (c < names_.size()) {
        const auto first = refused_.find(c);
        std::string which;
        if (auto found = refused_in_chunk(c))
          which = "; " + *found;
        else if (first != refused_.end())
          which = "; from " + first->second.substr(0, first->second.find(':')) +
                  " on, the column's values went to DuckDB's own cast, and one of them is "
                  "the value refused";
        // DuckDB's own words ("expected DECIMAL(38,0), got VARCHAR for column 1") speak of
        // the text the value went in as and of a column number: the column is named, with
        // its type.
        std::string type;
        if (const auto e = msg.find("expected "); e != std::string::npos) {
          type = msg.substr(e + 9);
          type.resize(std::min(type.find(", got"), type.size()));
          type += ": ";
        }
        throw sink_error(fmt::format(
            "{}: column {} holds a value its type cannot hold ({}out of the type's range or "
            "precision){}; declare the column as text to load it as it is (columns = {{ {} = "
            "\"text\" }}), or fix the value at the source",
            dialect_.qualified(table_), dialect_.quote(names_[c]), type, which,
            schema::toml_key(names_[c])));
      }
    }
    throw sink_error(fmt::format("{}: {}: {}", dialect_.qualified(table_), what, msg));
  }

  /// The SQL type of a column whose values may go in as text (decimal, date, timestamp).
  [[nodiscard]] std::optional<std::string> sql_type(const slot& s) const {
    switch (s.declared) {
      case DUCKDB_TYPE_DECIMAL: return fmt::format("DECIMAL({},{})", s.width, s.scale);
      case DUCKDB_TYPE_DATE: return "DATE";
      case DUCKDB_TYPE_TIMESTAMP: return "TIMESTAMP";
      case DUCKDB_TYPE_TIMESTAMP_TZ: return "TIMESTAMPTZ";
      default: return std::nullopt;
    }
  }

  /// The first value of column `c` in the chunk the appender refused that DuckDB's cast
  /// refuses, as "row N: value '...'"; nullopt when none is found (another chunk, say).
  /// Tried one by one on a connection of its own: only a failed load pays for it.
  [[nodiscard]] std::optional<std::string> refused_in_chunk(std::size_t c) const {
    const auto type = sql_type(slots_[c]);
    if (!type || slots_[c].kind != DUCKDB_TYPE_VARCHAR || fill_ == 0 || db_ == nullptr)
      return std::nullopt;
    duckdb_connection probe = nullptr;
    if (duckdb_connect(db_, &probe) == DuckDBError)
      return std::nullopt;
    std::optional<std::string> out;
    duckdb_prepared_statement stmt = nullptr;
    const std::string sql = fmt::format("SELECT TRY_CAST($1 AS {}) IS NULL", *type);
    if (duckdb_prepare(probe, sql.c_str(), &stmt) == DuckDBSuccess) {
      duckdb_vector vec = duckdb_data_chunk_get_vector(chunk_, c);
      auto* strings = static_cast<duckdb_string_t*>(duckdb_vector_get_data(vec));
      std::uint64_t* validity = duckdb_vector_get_validity(vec);
      for (idx_t i = 0; i < fill_ && !out; ++i) {
        if (validity && ((validity[i / 64] >> (i % 64)) & 1) == 0)
          continue;
        const duckdb_string_t& v = strings[i];
        const std::uint32_t len = v.value.inlined.length;
        const char* text = len <= 12 ? v.value.inlined.inlined : v.value.pointer.ptr;
        duckdb_bind_varchar_length(stmt, 1, text, len);
        duckdb_result r;
        if (duckdb_execute_prepared(stmt, &r) == DuckDBSuccess && duckdb_row_count(&r) == 1 &&
            duckdb_value_int64(&r, 0, 0) == 1)
          out = fmt::format("row {}: value '{}'", chunk_first_row_ + i + 1,
                            std::string_view(text, len).substr(0, 80));
        duckdb_destroy_result(&r);
      }
    }
    duckdb_destroy_prepare(&stmt);
    duckdb_disconnect(&probe);
    return out;
  }

  void flush_chunk() {
    if (on_bulk_ && !bulk_ && buffered_ + fill_ >= bulk_rows) {
      bulk_ = true;
      on_bulk_(true);
    }
    duckdb_data_chunk_set_size(chunk_, fill_);
    if (duckdb_append_data_chunk(app_, chunk_) == DuckDBError)
      fail("cannot append rows");
    duckdb_data_chunk_reset(chunk_);
    buffered_ += fill_;
    fill_ = 0;
    // The appender keeps chunks until it holds ~200k rows; handing them to the table a
    // row group at a time spreads that work over the load instead of leaving most of it
    // to finish(), when the source has nothing left to read in parallel.
    if (buffered_ >= row_group_rows) {
      if (duckdb_appender_flush(app_) == DuckDBError)
        fail("cannot append rows");
      buffered_ = 0;
    }
  }

  /// Writes `v` into column `c` at chunk row `at`. Returns false when the value is not in
  /// the canonical text its binary slot reads (decimal, date, timestamp); throws on a value
  /// the column cannot hold (`row` names it).
  [[nodiscard]] bool fill_cell(std::size_t c, const schema::value& v, idx_t at, std::uint64_t row) {
    duckdb_vector vec = vectors_[c];
    void* data = data_[c];
    const slot& sl = slots_[c];
    const duckdb_type kind = sl.kind;
    auto bad = [&] { return bad_value(dialect_, table_, names_[c], row, v, type_label(kind)); };
    if (v.is_null()) {
      duckdb_vector_ensure_validity_writable(vec);
      duckdb_validity_set_row_invalid(duckdb_vector_get_validity(vec), at);
      return true;
    }
    switch (kind) {
      case DUCKDB_TYPE_BOOLEAN: {
        auto b = as_bool(v);
        if (!b)
          throw bad();
        static_cast<bool*>(data)[at] = *b;
        break;
      }
      case DUCKDB_TYPE_TINYINT:
        put_int<std::int8_t>(data, at, v, bad);
        break;
      case DUCKDB_TYPE_SMALLINT:
        put_int<std::int16_t>(data, at, v, bad);
        break;
      case DUCKDB_TYPE_INTEGER:
        put_int<std::int32_t>(data, at, v, bad);
        break;
      case DUCKDB_TYPE_BIGINT:
        put_int<std::int64_t>(data, at, v, bad);
        break;
      case DUCKDB_TYPE_FLOAT: {
        auto d = as_real(v);
        if (!d)
          throw bad();
        static_cast<float*>(data)[at] = static_cast<float>(*d);
        break;
      }
      case DUCKDB_TYPE_DOUBLE: {
        auto d = as_real(v);
        if (!d)
          throw bad();
        static_cast<double*>(data)[at] = *d;
        break;
      }
      case DUCKDB_TYPE_DECIMAL: {
        __int128 unscaled = 0;
        if (v.kind != schema::value::tag::text)
          return false;
        switch (parse_canonical_decimal(v.s, sl.width, sl.scale, unscaled)) {
          case decimal_parse::ok:
            put_decimal(data, at, sl.storage, unscaled);
            break;
          case decimal_parse::not_canonical:
            return false;
          case decimal_parse::inexact:
            // More fractional digits than the column keeps (a source scale over DuckDB's
            // 38, a declared type narrower than the data): refused, never rounded.
            throw sink_error(fmt::format(
                "{}: row {}: column {} holds {}, which DECIMAL({},{}) cannot store exactly "
                "(it keeps {} digits after the point; DuckDB would round the rest away); "
                "declare the column as text to keep every digit (columns = {{ {} = \"text\" "
                "}})",
                dialect_.qualified(table_), row + 1, dialect_.quote(names_[c]), v.s, sl.width,
                static_cast<int>(sl.scale), static_cast<int>(sl.scale), schema::toml_key(names_[c])));
        }
        break;
      }
      case DUCKDB_TYPE_DATE: {
        std::int64_t days = 0;
        if (v.kind != schema::value::tag::text || v.s.size() != 10 ||
            !parse_canonical_date(v.s, days))
          return false;
        static_cast<std::int32_t*>(data)[at] = static_cast<std::int32_t>(days);
        break;
      }
      case DUCKDB_TYPE_TIMESTAMP:
      case DUCKDB_TYPE_TIMESTAMP_TZ: {
        std::int64_t micros = 0;
        if (v.kind != schema::value::tag::text ||
            !parse_canonical_timestamp(v.s, kind == DUCKDB_TYPE_TIMESTAMP_TZ, micros))
          return false;
        static_cast<std::int64_t*>(data)[at] = micros;
        break;
      }
      default:  // VARCHAR and BLOB slots: text as is (raw bytes for BLOB)
        if (v.kind == schema::value::tag::text) {
          // DuckDB refuses a VARCHAR that is not UTF-8 only when the appender flushes,
          // with no row or column; caught here, the error names both.
          if (kind == DUCKDB_TYPE_VARCHAR && !schema::valid_utf8(v.s))
            throw sink_error(fmt::format(
                "{}: row {} of the load, column '{}': the value is not UTF-8 text (bytes such as a BLOB's "
                "in a text column), which a DuckDB VARCHAR cannot hold; declare the column "
                "bytes to load it as a BLOB (columns = {{ {} = \"bytes\" }}), or fix the "
                "value at the source",
                dialect_.qualified(table_), row + 1, names_[c], schema::toml_key(names_[c])));
          duckdb_vector_assign_string_element_len(vec, at, v.s.data(), v.s.size());
        } else {
          const std::string text = value_text(v);
          duckdb_vector_assign_string_element_len(vec, at, text.data(), text.size());
        }
        break;
    }
    return true;
  }

  template <class Int, class Bad>
  static void put_int(void* data, idx_t at, const schema::value& v, Bad& bad) {
    if constexpr (std::is_same_v<Int, std::int64_t>) {
      if (v.kind == schema::value::tag::integer) {
        static_cast<Int*>(data)[at] = v.i;
        return;
      }
    }
    auto i = as_int(v);
    if (!i || *i < std::numeric_limits<Int>::min() || *i > std::numeric_limits<Int>::max())
      throw bad();
    static_cast<Int*>(data)[at] = static_cast<Int>(*i);
  }

  /// An unscaled decimal that fits the column's precision, in its physical type.
  static void put_decimal(void* data, idx_t at, duckdb_type storage, __int128 v) {
    switch (storage) {
      case DUCKDB_TYPE_SMALLINT:
        static_cast<std::int16_t*>(data)[at] = static_cast<std::int16_t>(v);
        break;
      case DUCKDB_TYPE_INTEGER:
        static_cast<std::int32_t*>(data)[at] = static_cast<std::int32_t>(v);
        break;
      case DUCKDB_TYPE_BIGINT:
        static_cast<std::int64_t*>(data)[at] = static_cast<std::int64_t>(v);
        break;
      default: {  // HUGEINT
        const auto u = static_cast<unsigned __int128>(v);
        static_cast<duckdb_hugeint*>(data)[at] =
            duckdb_hugeint{static_cast<std::uint64_t>(u), static_cast<std::int64_t>(u >> 64)};
        break;
      }
    }
  }

  const dialects::dialect& dialect_;
  table_ref table_;
  std::size_t width_;
  bool with_seq_;
  std::vector<std::string> names_;
  /// Per column that went in as text: the first value its binary slot refused, with its row.
  std::map<std::size_t, std::string> refused_;
  std::vector<slot> slots_;
  std::vector<duckdb_vector> vectors_;  ///< the chunk's vectors for the slice being filled
  std::vector<void*> data_;             ///< and their data
  duckdb_database db_ = nullptr;  ///< for refused_in_chunk's connection
  std::uint64_t chunk_first_row_ = 0;  ///< the row (from 0) of the chunk's first row
  duckdb_appender app_ = nullptr;
  duckdb_data_chunk chunk_ = nullptr;
  idx_t capacity_ = 0;
  idx_t fill_ = 0;
  idx_t buffered_ = 0;  ///< rows appended since the appender last flushed
  std::function<void(bool)> on_bulk_;
  bool bulk_ = false;  ///< on_bulk_(true) was called
};

/// Per database file: DuckDB keeps every table's data committed since the last
/// checkpoint in memory, at least one block per column, so a fleet of thousands of small
/// tables would hold gigabytes. Every `checkpoint_every` commits, one connection waits
/// for the loads in flight to commit (they hold the gate shared) and checkpoints, which
/// writes those blocks to the file and lets DuckDB release them.
struct checkpoint_gate {
  std::shared_mutex mu;
  std::atomic<std::uint64_t> commits{0};
  /// Loads of the file between their first append and the end of their appends (see
  /// duckdb_threads), and DuckDB's thread count as last set.
  std::mutex threads_mu;
  std::size_t appending = 0;
  std::uint64_t threads = 0;
};
constexpr std::uint64_t checkpoint_every = 512;
/// describe_tables() reads DuckDB's catalog functions from this many names on.
constexpr std::size_t describe_scan_min = 1000;
/// Between those, every `memory_check_every` commits the committing connection reads
/// how much memory DuckDB holds for tables not yet checkpointed (one query, ~0.3 ms) and
/// checkpoints early once that passes half the memory limit. What a table holds until
/// the checkpoint depends on its shape — measured with 16 columns and a primary key:
/// ~1.25 MB of ART index buffers plus ~0.3 MB of column data, even for 100 rows — so a
/// count alone lets a fleet of such tables reach the limit, where DuckDB fails loads and
/// even their rollback. Checkpoints are not cheap either: each one costs ~1 ms per table
/// already in the file, so checkpointing more often than memory requires makes a fleet
/// load quadratic. (Blocks already checkpointed stay cached but can be evicted; they do
/// not count.)
constexpr std::uint64_t memory_check_every = 32;

/// Storage format of warehouse files Flotilla creates: readable by DuckDB 1.2 and later.
constexpr std::string_view storage_version = "v1.2.0";

/// "953.6 MiB", "1GB", "512 KB" -> bytes; 0 when unreadable.
std::uint64_t parse_bytes(std::string_view text) {
  double value = 0;
  std::size_t used = 0;
  try {
    value = std::stod(std::string(text), &used);
  } catch (const std::exception&) {
    return 0;
  }
  std::string unit;
  for (char c : text.substr(used))
    if (!std::isspace(static_cast<unsigned char>(c)))
      unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::map<std::string, double> units = {
      {"", 1},          {"B", 1},          {"BYTES", 1},      {"KB", 1e3},      {"KIB", 1024.0},
      {"MB", 1e6},      {"MIB", 1048576.0}, {"GB", 1e9},      {"GIB", 1073741824.0},
      {"TB", 1e12},     {"TIB", 1099511627776.0}};
  auto it = units.find(unit);
  return it == units.end() || value <= 0 ? 0 : static_cast<std::uint64_t>(value * it->second);
}

/// DuckDB's threads (the one that calls into it included), set for the whole database
/// instance: `appending` while some bulk load of the file (bulk_rows rows or more) appends
/// rows, which a source reader on another thread feeds, `other` otherwise. A smaller load
/// never switches: each `SET threads` stops and starts DuckDB's workers, and switching
/// twice per table took a third of a 10,000-table fleet's load. While appending, one fewer
/// than the machine's cores (at least one), so the reader keeps a core: with as many
/// threads as cores, a writer waits for the row groups its appends hand to DuckDB's
/// workers by polling DuckDB's task queue, a core's worth of spinning that the reader and a
/// local source server then lack (docs/performance.md, copy-wide: SQLite -> DuckDB 13%
/// faster). Otherwise every core, for the set-based statements that finish a load (a
/// merge's delete and insert, the key's index), which DuckDB runs in parallel (a merge
/// takes 25% longer on one thread than on two). FLOTILLA_DUCKDB_THREADS fixes both (a
/// whole number from 1 to 4096).
struct duckdb_thread_counts {
  std::uint64_t appending = 0;
  std::uint64_t other = 0;
};

/// Zeros when FLOTILLA_DUCKDB_THREADS holds anything but a thread count.
duckdb_thread_counts duckdb_threads() {
  const char* env = std::getenv("FLOTILLA_DUCKDB_THREADS");
  if (env == nullptr || *env == '\0') {
    const std::uint64_t cores = std::max(1U, std::thread::hardware_concurrency());
    return {std::max<std::uint64_t>(cores, 2) - 1, cores};
  }
  const std::string_view text(env);
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n > 4096)
    n = 0;
  return {n, n};
}

std::shared_ptr<checkpoint_gate> gate_for(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<checkpoint_gate>> gates;
  std::lock_guard lock(mu);
  auto& weak = gates[path];
  auto gate = weak.lock();
  if (!gate) {
    gate = std::make_shared<checkpoint_gate>();
    weak = gate;
  }
  return gate;
}

class duckdb_warehouse final : public warehouse_base {
 public:
  duckdb_warehouse(const warehouse_options& options, std::unique_ptr<dialects::dialect> d)
      : warehouse_base(options.name, std::move(d)) {
    if (options.path.empty())
      throw error("a duckdb target needs a path (the database file)");
    std::error_code ec;
    const auto parent = std::filesystem::path(options.path).parent_path();
    if (!parent.empty())
      std::filesystem::create_directories(parent, ec);
    char* err = nullptr;
    gate_ = gate_for(options.path);
    threads_ = duckdb_threads();
    if (threads_.appending == 0)
      throw error(fmt::format("cannot open DuckDB database '{}': FLOTILLA_DUCKDB_THREADS='{}' is "
                              "not a thread count; set a whole number from 1 to 4096, or unset "
                              "it for one fewer than this machine's cores",
                              options.path, std::getenv("FLOTILLA_DUCKDB_THREADS")));
    {
      // DuckDB would take a SQLite file for one its sqlite extension writes (and try to
      // fetch that extension from the network).
      char head[16] = {};
      if (std::ifstream in(options.path, std::ios::binary);
          in.read(head, sizeof head) &&
          std::string_view(head, sizeof head) == std::string_view("SQLite format 3\0", 16))
        throw error(fmt::format("cannot open DuckDB database '{}': the file is a SQLite "
                                "database; set dialect = \"sqlite\" in [targets.{}], or "
                                "point path at a DuckDB file",
                                options.path, options.name));
    }
    duckdb_config config = nullptr;
    if (duckdb_create_config(&config) == DuckDBError)
      throw error(fmt::format("cannot open DuckDB database '{}': cannot create a configuration",
                              options.path));
    // A new file gets a storage format newer than DuckDB's default (v0.10.2, kept for old
    // readers): with the default every checkpoint re-encodes the distinct-count sketch of
    // every column of every table into the old format, ~1.3 ms per table already in the
    // file (half of a checkpoint's cost, measured with 1,000 16-column tables), which makes
    // a fleet load quadratic. An existing file keeps the format it was created with.
    // FLOTILLA_DUCKDB_STORAGE_VERSION overrides ("v0.10.2" for files older readers open).
    {
      const char* env = std::getenv("FLOTILLA_DUCKDB_STORAGE_VERSION");
      const std::string version = env != nullptr && *env != '\0' ? env : std::string(storage_version);
      if (duckdb_set_config(config, "storage_compatibility_version", version.c_str()) ==
          DuckDBError) {
        duckdb_destroy_config(&config);
        throw error(fmt::format("cannot open DuckDB database '{}': storage version '{}' is not "
                                "one DuckDB knows",
                                options.path, version));
      }
    }
    // No extension is fetched or loaded behind the user's back.
    duckdb_set_config(config, "autoinstall_known_extensions", "false");
    duckdb_set_config(config, "autoload_known_extensions", "false");
    // The block size of a file it creates. An existing file keeps its own: checked below
    // against a block size the target sets.
    const std::uint32_t block_size =
        options.block_size != 0 ? options.block_size : duckdb_default_block_size;
    if (duckdb_set_config(config, "default_block_size", std::to_string(block_size).c_str()) ==
        DuckDBError) {
      duckdb_destroy_config(&config);
      throw error(fmt::format("cannot open DuckDB database '{}': target '{}': block_size {} is not "
                              "one DuckDB accepts; use 16384, 32768, 65536, 131072 or 262144",
                              options.path, options.name, block_size));
    }
    // Another process has the file open: DuckDB lets one process at a time use it, so
    // the path is right and waiting is the fix. A `plan` or a client reading the file
    // for a moment lets go of it soon: the open is tried again every 100 ms for up to
    // lock_wait() (once per file and process: after a wait that timed out, the next
    // opens of the file fail at once, with the same answer).
    // After such a failure, DuckDB's instance cache may refuse the next opens of the file
    // in this process with a "Unique file handle conflict": they get the same answer.
    static std::mutex locked_mu;
    static std::map<std::string, std::string> locked;  // path -> why it cannot be opened
    static std::set<std::string> waiting;  // paths whose wait was announced
    if (!lock_wait())
      throw error(fmt::format("cannot open DuckDB database '{}': FLOTILLA_DUCKDB_LOCK_WAIT='{}' "
                              "is not a number of seconds; set one from 0 (do not wait for "
                              "another process to let go of the file) up, or unset it for 30",
                              options.path, std::getenv("FLOTILLA_DUCKDB_LOCK_WAIT")));
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + *lock_wait();
    duckdb_state opened = DuckDBError;
    std::string msg;
    for (;;) {
      opened = duckdb_get_or_create_from_cache(instance_cache(), options.path.c_str(), &db_,
                                               config, &err);
      if (opened != DuckDBError)
        break;
      msg = err ? err : "unknown error";
      duckdb_free(err);
      err = nullptr;
      const auto held = msg.find("Conflicting lock is held in ");
      const auto* stop = stop_request();
      {
        std::lock_guard lock(locked_mu);
        if ((held == std::string::npos &&
             msg.find("Unique file handle conflict") == std::string::npos) ||
            locked.contains(options.path) || std::chrono::steady_clock::now() >= deadline ||
            (stop != nullptr && stop->load(std::memory_order_relaxed)))
          break;
        if (held != std::string::npos && waiting.insert(options.path).second)
          fmt::print(stderr,
                     "flotilla: target '{}': DuckDB database '{}' is open in another process "
                     "({}); waiting up to {} s for it to let go of the file\n",
                     options.name, options.path, lock_holder(msg, held),
                     std::chrono::duration_cast<std::chrono::seconds>(*lock_wait()).count());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    duckdb_destroy_config(&config);
    if (opened == DuckDBError) {
      std::lock_guard lock(locked_mu);
      if (const auto held = msg.find("Conflicting lock is held in "); held != std::string::npos) {
        const std::string holder = lock_holder(msg, held);
        locked[options.path] =
            fmt::format("cannot open DuckDB database '{}': another process has it open ({}), "
                        "and DuckDB lets one process at a time use a file (waited {} s). Wait "
                        "for that process (a flotilla run, plan or stream on target '{}', or a "
                        "client with the file open) to finish, then try again",
                        options.path, holder,
                        std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now() - started)
                            .count(),
                        options.name);
        throw error(locked[options.path]);
      }
      if (auto known = locked.find(options.path);
          known != locked.end() && msg.find("Unique file handle conflict") != std::string::npos)
        throw error(known->second);
      throw error(fmt::format("cannot open DuckDB database '{}': {}; check path in [targets.{}]",
                              options.path, msg, options.name));
    }
    if (duckdb_connect(db_, &con_) == DuckDBError) {
      duckdb_close(&db_);
      throw error(fmt::format("cannot connect to DuckDB database '{}'", options.path));
    }
    if (options.block_size != 0)
      check_block_size(options);
    // Timestamps with time zone read back as UTC instants (+00), like Flotilla writes
    // them; without the ICU extension there is no setting and they are UTC already.
    result_holder h;
    duckdb_query(con_, "SET TimeZone = 'UTC'", &h.r);
    {
      std::lock_guard lock(gate_->threads_mu);
      if (auto msg = sync_threads()) {
        duckdb_disconnect(&con_);
        duckdb_close(&db_);
        throw error(fmt::format("cannot open DuckDB database '{}': cannot set DuckDB's threads: {}",
                                options.path, *msg));
      }
    }
    // Bounded memory for fleets of many tables: with periodic checkpoints (see
    // checkpoint_gate) DuckDB can evict what it wrote instead of holding every loaded
    // table in memory. Not persisted in the file. FLOTILLA_DUCKDB_MEMORY_LIMIT overrides.
    {
      const char* env = std::getenv("FLOTILLA_DUCKDB_MEMORY_LIMIT");
      const std::string limit = env != nullptr && *env != '\0' ? env : "1GB";
      result_holder m;
      duckdb_query(con_, fmt::format("SET memory_limit = {}", dialect().literal(limit)).c_str(),
                   &m.r);
      result_holder v;
      if (duckdb_query(con_, "SELECT current_setting('memory_limit')", &v.r) == DuckDBSuccess) {
        char* text = duckdb_value_varchar(&v.r, 0, 0);
        memory_limit_bytes_ = text ? parse_bytes(text) : 0;
        duckdb_free(text);
      }
    }
  }

  /// DuckDB cannot change the block size of an existing file: a configured block_size
  /// that the file does not have is an error, not silently ignored.
  void check_block_size(const warehouse_options& options) {
    std::uint64_t actual = 0;
    {
      result_holder r;
      if (duckdb_query(con_,
                       "SELECT block_size FROM pragma_database_size() "
                       "WHERE database_name = current_database()",
                       &r.r) == DuckDBSuccess &&
          duckdb_row_count(&r.r) == 1)
        actual = static_cast<std::uint64_t>(duckdb_value_int64(&r.r, 0, 0));
    }
    if (actual == options.block_size)
      return;
    duckdb_disconnect(&con_);
    duckdb_close(&db_);
    throw error(fmt::format(
        "DuckDB database '{}' has {}-byte blocks, but target '{}' sets block_size = {}: a file "
        "keeps the block size it was created with; set block_size = {} (or remove it), or "
        "point the target at a new file",
        options.path, actual, options.name, options.block_size, actual));
  }

  ~duckdb_warehouse() override {
    duckdb_disconnect(&con_);
    duckdb_close(&db_);
  }

  std::optional<schema::table_schema> describe(const table_ref& table) override {
    // A direct catalog lookup first (microseconds, whatever the number of tables), then
    // DESCRIBE of that one table. Scanning duckdb_columns() instead costs time in
    // proportion to every column of the database, per call: quadratic over a fleet.
    {
      duckdb_table_description desc = nullptr;
      const std::string schema = table.schema.empty() ? std::string("main") : table.schema;
      const duckdb_state found =
          table.catalog.empty()
              ? duckdb_table_description_create(con_, schema.c_str(), table.name.c_str(), &desc)
              : duckdb_table_description_create_ext(con_, table.catalog.c_str(), schema.c_str(),
                                                    table.name.c_str(), &desc);
      duckdb_table_description_destroy(&desc);
      if (found == DuckDBError) {
        if (is_view(table))
          throw not_a_table(table, "a view");
        return std::nullopt;
      }
    }
    text_rows rows;
    try {
      result_holder h;
      const std::string sql = "DESCRIBE " + dialect().qualified(table);
      if (duckdb_query(con_, sql.c_str(), &h.r) == DuckDBError)
        throw error(duckdb_result_error(&h.r));
      for (auto& r : collect(h.r))  // column_name, column_type, null, key, default, extra
        rows.push_back({r[0], r[1], std::optional<std::string>(r[2] == "YES" ? "true" : "false"),
                        std::optional<std::string>(r[3] == "PRI" ? "true" : "false")});
    } catch (const sink_error& e) {
      throw error(fmt::format("cannot read the columns of {}: {}", dialect().qualified(table),
                              e.what()));
    }
    if (rows.empty())
      return std::nullopt;
    schema::table_schema out;
    for (const auto& r : rows) {
      const std::string type = r[1].value_or("");
      auto t = dialect().parse_physical(type);
      if (!t)
        throw unmappable(table, r[0].value_or(""), type, t.error());
      out.columns.push_back(schema::column{r[0].value_or(""), *t, r[2] == "true", r[3] == "true"});
    }
    return out;
  }

  /// Whether a view holds `table`'s name (DuckDB matches names ignoring case). Asked only
  /// for a name no table holds, before a load would create the table.
  bool is_view(const table_ref& table) {
    const auto& d = dialect();
    const std::string sql = fmt::format(
        "SELECT count(*) FROM duckdb_views() WHERE database_name = {} AND schema_name = {} "
        "AND lower(view_name) = lower({})",
        table.catalog.empty() ? "current_database()" : d.literal(table.catalog),
        d.literal(table.schema.empty() ? std::string("main") : table.schema),
        d.literal(table.name));
    result_holder h;
    if (duckdb_query(con_, sql.c_str(), &h.r) == DuckDBError)
      return false;  // the load's own statements say what is wrong
    return duckdb_value_int64(&h.r, 0, 0) > 0;
  }

  /// A fleet's plan or run describes thousands of tables of a schema. DESCRIBE costs
  /// ~0.28 ms per table whatever the table, while one scan of DuckDB's catalog functions
  /// costs ~25 us per table in the file (10,000 tables of 16 columns: ~250 ms for
  /// duckdb_columns() and duckdb_constraints(), against ~2.8 s of DESCRIBEs). The scan
  /// reads the whole file's catalog however few tables are asked for, so it is taken
  /// only from describe_scan_min names on; fewer are described one by one (nullopt).
  std::optional<described_tables> describe_tables(const std::string& catalog,
                                                  const std::string& schema,
                                                  const std::vector<std::string>& names) override {
    if (names.size() < describe_scan_min)
      return std::nullopt;
    const auto& d = dialect();
    const std::string database = catalog.empty() ? "current_database()" : d.literal(catalog);
    const std::string in_schema = schema.empty() ? "current_schema()" : d.literal(schema);
    // Base tables only, as describe() finds them (a view is not a table to load into).
    const std::string sql = fmt::format(
        "SELECT c.table_name, c.column_name, c.data_type, "
        "CAST(c.is_nullable AS VARCHAR), "
        "CAST(coalesce(list_contains(k.constraint_column_names, c.column_name), false) "
        "AS VARCHAR) "
        "FROM duckdb_columns() c "
        "LEFT JOIN (SELECT table_name, constraint_column_names FROM duckdb_constraints() "
        "WHERE database_name = {0} AND schema_name = {1} AND constraint_type = 'PRIMARY KEY') k "
        "ON k.table_name = c.table_name "
        "WHERE c.database_name = {0} AND c.schema_name = {1} AND c.table_name NOT IN "
        "(SELECT view_name FROM duckdb_views() WHERE database_name = {0} AND schema_name = {1}) "
        "ORDER BY c.table_name, c.column_index",
        database, in_schema);
    result_holder h;
    if (duckdb_query(con_, sql.c_str(), &h.r) == DuckDBError)
      throw error(fmt::format("cannot read the columns of the tables of schema {}: {}",
                              schema.empty() ? std::string("(current)") : schema,
                              duckdb_result_error(&h.r)));
    // DuckDB matches names case-insensitively: each stored table answers every name asked
    // for that folds to its own.
    std::unordered_map<std::string, std::vector<const std::string*>> asked;
    for (const auto& n : names)
      asked[schema::fold_name(n, d.names())].push_back(&n);
    described_tables out;
    type_cache parsed(d);
    std::string last;
    std::vector<const std::string*>* answers = nullptr;
    schema::table_schema columns;
    struct bad_column {
      std::string column, type;
      schema::type_error why;
    };
    std::optional<bad_column> problem;  // the table's first unmappable column
    auto finish = [&] {
      if (!answers)
        return;
      for (const std::string* n : *answers) {
        if (problem)  // as describe() words it, for the name asked
          out.insert_or_assign(*n, std::unexpected(unmappable({catalog, schema, *n},
                                                              problem->column, problem->type,
                                                              problem->why)
                                                       .what()));
        else
          out.insert_or_assign(*n, columns);
      }
    };
    // Read in place: a copy of every row first (collect) doubled the read's memory.
    auto cell = [&](idx_t c, idx_t i) {
      char* v = duckdb_value_varchar(&h.r, c, i);
      std::string text = v ? v : "";
      duckdb_free(v);
      return text;
    };
    const idx_t rows = duckdb_row_count(&h.r);
    for (idx_t i = 0; i < rows; ++i) {  // table, column, type, nullable, key
      std::string table = cell(0, i);
      if (table != last) {
        finish();
        last = std::move(table);
        const auto it = asked.find(schema::fold_name(last, d.names()));
        answers = it == asked.end() ? nullptr : &it->second;
        columns = {};
        problem.reset();
      }
      if (!answers || problem)
        continue;
      const std::string type = cell(2, i);
      const auto& t = parsed(type);
      if (!t) {
        problem = bad_column{cell(1, i), type, t.error()};
        continue;
      }
      columns.columns.push_back(
          schema::column{cell(1, i), *t, cell(3, i) == "true", cell(4, i) == "true"});
    }
    finish();
    // A name a view holds is no table to load into (describe() says the same).
    const auto views = query(fmt::format(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = {} AND "
        "schema_name = {}",
        database, in_schema));
    for (const auto& v : views) {
      if (v.empty() || !v[0])
        continue;
      if (const auto it = asked.find(schema::fold_name(*v[0], d.names())); it != asked.end())
        for (const std::string* n : it->second)
          out.insert_or_assign(*n, std::unexpected(not_a_table({catalog, schema, *n}, "a view")
                                                       .what()));
    }
    return out;
  }

  std::vector<hand_made_index> hand_made_indexes(const table_ref& table) override {
    const auto& d = dialect();
    // duckdb_indexes() lists the indexes of CREATE INDEX only (a PRIMARY KEY or UNIQUE
    // constraint's index is part of the table's definition).
    const auto rows = query(fmt::format(
        "SELECT index_name, sql FROM duckdb_indexes() WHERE database_name = {} AND "
        "schema_name = {} AND table_name = {} AND sql IS NOT NULL ORDER BY index_name",
        table.catalog.empty() ? "current_database()" : d.literal(table.catalog),
        table.schema.empty() ? "current_schema()" : d.literal(table.schema), d.literal(table.name)));
    return indexes_from(table, rows);
  }

  bool index_blocks_retype() const override { return true; }

  /// DuckDB binds a view when it is made and checks, when it is read, that the columns
  /// it reads kept their types ("Contents of view were altered"). Each view of the file
  /// that fails so is made again from its statement (CREATE OR REPLACE), views of views
  /// in as many rounds as they need. A view failing for another reason is left alone.
  std::vector<std::string> rebind_views(const table_ref& table) override {
    const auto& d = dialect();
    const auto views = query(fmt::format(
        "SELECT database_name, schema_name, view_name, sql FROM duckdb_views() WHERE NOT "
        "internal AND NOT temporary AND database_name = {} ORDER BY schema_name, view_name",
        table.catalog.empty() ? "current_database()" : d.literal(table.catalog)));
    std::vector<std::string> out;
    std::vector<bool> done(views.size(), false);
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t i = 0; i < views.size(); ++i) {
        const auto& v = views[i];
        if (done[i] || v.size() < 4 || !v[0] || !v[1] || !v[2] || !v[3])
          continue;
        const table_ref view{*v[0], *v[1], *v[2]};
        try {
          (void)query(fmt::format("SELECT * FROM {} LIMIT 0", d.qualified(view)));
          continue;
        } catch (const std::exception& e) {
          if (std::string_view(e.what()).find("Contents of view were altered") ==
              std::string_view::npos)
            continue;
        }
        std::string sql = *v[3];
        constexpr std::string_view create = "CREATE VIEW";
        if (!sql.starts_with(create))
          continue;
        sql.replace(0, create.size(), "CREATE OR REPLACE VIEW");
        try {
          execute({sql});
        } catch (const std::exception&) {
          continue;  // reads no better made again: left as it was
        }
        done[i] = true;
        progress = true;
        out.push_back(d.qualified(view));
      }
    }
    return out;
  }

  text_rows query(const std::string& sql) override {
    // Every column cast to VARCHAR by the engine itself, so each type shows in DuckDB's
    // own text form; statements that cannot be wrapped run as they are.
    std::string inner = sql;
    while (!inner.empty() && (inner.back() == ';' || std::isspace(static_cast<unsigned char>(inner.back()))))
      inner.pop_back();
    {
      result_holder h;
      if (duckdb_query(con_, fmt::format("SELECT CAST(COLUMNS(*) AS VARCHAR) FROM ({}) AS q", inner).c_str(),
                       &h.r) == DuckDBSuccess)
        return collect(h.r);
    }
    result_holder h;
    if (duckdb_query(con_, sql.c_str(), &h.r) == DuckDBError)
      throw error(fmt::format("{} (in: {})", duckdb_result_error(&h.r), statement_excerpt(sql)));
    return collect(h.r);
  }

  void run(const std::string& sql) override {
    result_holder h;
    if (duckdb_query(con_, sql.c_str(), &h.r) == DuckDBError)
      throw error(fmt::format("{} (in: {})", duckdb_result_error(&h.r), statement_excerpt(sql)));
  }

  void begin() override {
    load_lock_ = std::shared_lock(gate_->mu);
    try {
      run("BEGIN TRANSACTION");
    } catch (const sink_error&) {
      // A connection whose last transaction could not be rolled back refuses every
      // statement; start over on a fresh connection once.
      try {
        if (!recover())
          throw;
        run("BEGIN TRANSACTION");
      } catch (...) {
        load_lock_ = {};
        throw;
      }
    }
  }
  void commit_transaction() override {
    run("COMMIT");
    load_lock_ = {};
    maybe_checkpoint();
  }
  void rollback() noexcept override {
    result_holder h;
    if (duckdb_query(con_, "ROLLBACK", &h.r) == DuckDBError)
      recover();
    load_lock_ = {};
    std::lock_guard lock(gate_->threads_mu);
    (void)sync_threads();
  }

  std::unique_ptr<row_inserter> open_inserter(const table_ref& table,
                                              const schema::table_schema& columns,
                                              bool with_seq) override {
    std::unique_ptr<duckdb_inserter> ins;
    try {
      ins = std::make_unique<duckdb_inserter>(db_, con_, dialect(), table, columns, with_seq);
    } catch (const sink_error& e) {
      throw error(e.what());
    }
    ins->on_bulk_appending([this](bool start) { appending(start); });
    return ins;
  }

  /// DuckDB's thread count; the error's text when DuckDB refuses it.
  std::optional<std::string> set_threads(std::uint64_t n) noexcept {
    result_holder t;
    if (duckdb_query(con_, fmt::format("SET threads = {}", n).c_str(), &t.r) == DuckDBSuccess)
      return std::nullopt;
    const char* e = duckdb_result_error(&t.r);
    return std::string(e ? e : "unknown error");
  }

  /// A bulk load of this file starts (true) or ends (false) appending rows: the first to
  /// start and the last to end set DuckDB's threads (duckdb_threads). A refused setting leaves
  /// the count as it was, which costs speed only.
  void appending(bool start) noexcept {
    std::lock_guard lock(gate_->threads_mu);
    gate_->appending += start ? 1 : -1;
    (void)sync_threads();
  }

  /// Sets DuckDB's threads for the current phase when they differ. A refused setting (a
  /// failed load's transaction refuses statements until its rollback) leaves the count
  /// unknown, so the next phase change or rollback sets it again. Under threads_mu.
  /// Returns DuckDB's error when it refused.
  std::optional<std::string> sync_threads() noexcept {
    const std::uint64_t want = gate_->appending > 0 ? threads_.appending : threads_.other;
    if (gate_->threads == want)
      return std::nullopt;
    auto refused = set_threads(want);
    gate_->threads = refused ? 0 : want;
    return refused;
  }

  /// DuckDB refuses two open transactions creating the same catalog entry (a
  /// write-write conflict), so schema and bookkeeping creation are serialised across
  /// this process's connections; each runs in auto-commit, inside the lock.
  static std::recursive_mutex& catalog_mutex() {
    static std::recursive_mutex mu;
    return mu;
  }

  void ensure_schema(const std::string& schema) override {
    std::lock_guard lock(catalog_mutex());
    try {
      run(dialect().create_schema(schema));
    } catch (const sink_error&) {
      // Another connection may have created it at the same moment.
      if (!schema_exists(schema))
        throw;
    }
  }

  void ensure_bookkeeping() override {
    std::lock_guard lock(catalog_mutex());
    const auto& d = dialect();
    const std::string ddl = fmt::format(
        "CREATE TABLE IF NOT EXISTS {} ({} VARCHAR PRIMARY KEY, {} VARCHAR, {} TIMESTAMP WITH "
        "TIME ZONE)",
        d.qualified(bookkeeping_table()), d.quote("table_name"), d.quote("token"),
        d.quote("committed_at"));
    ensure_schema(std::string(bookkeeping_schema));
    try {
      run(ddl);
    } catch (const sink_error&) {
      if (!describe(bookkeeping_table()))
        throw;
    }
  }

  /// The staging table's ART index is built once from the loaded rows (ALTER TABLE ... ADD
  /// PRIMARY KEY) instead of one insert per appended row.
  bool key_after_load() const override { return true; }

  /// A row group: the appender writes each one to the file as it fills, taking ~0.2 s for
  /// 16 columns on this project's machines.
  std::size_t write_burst_rows() const override { return row_group_rows; }

  table_ref bookkeeping_table() const override {
    return table_ref{"", std::string(bookkeeping_schema), std::string(commits_table)};
  }

 private:
  static std::optional<std::string> opt(const std::string& s) {
    return s.empty() ? std::nullopt : std::optional<std::string>(s);
  }

  bool schema_exists(const std::string& schema) {
    return !query_params("SELECT 1 FROM duckdb_schemas() WHERE lower(schema_name) = lower($1)",
                         {schema})
                .empty();
  }

  text_rows query_params(const std::string& sql,
                         const std::vector<std::optional<std::string>>& params) {
    duckdb_prepared_statement stmt = nullptr;
    if (duckdb_prepare(con_, sql.c_str(), &stmt) == DuckDBError) {
      std::string msg = duckdb_prepare_error(stmt);
      duckdb_destroy_prepare(&stmt);
      throw error(msg);
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      const idx_t at = i + 1;
      if (params[i])
        duckdb_bind_varchar_length(stmt, at, params[i]->data(), params[i]->size());
      else
        duckdb_bind_null(stmt, at);
    }
    result_holder h;
    const bool ok = duckdb_execute_prepared(stmt, &h.r) == DuckDBSuccess;
    duckdb_destroy_prepare(&stmt);
    if (!ok)
      throw error(duckdb_result_error(&h.r));
    return collect(h.r);
  }

  /// After a failed ROLLBACK (DuckDB fails it when out of memory, "Failed to rollback
  /// transaction. Cannot continue operation."), the connection keeps refusing every
  /// statement with "Current transaction is aborted", so every later table of this
  /// connection would fail. Probes the connection and, when it is stuck, replaces it
  /// with a fresh one on the same database. Returns true when it reconnected.
  bool recover() noexcept {
    {
      result_holder probe;
      if (duckdb_query(con_, "SELECT 1", &probe.r) == DuckDBSuccess)
        return false;  // usable: the failure was something else
    }
    duckdb_connection fresh = nullptr;
    if (duckdb_connect(db_, &fresh) == DuckDBError)
      return false;
    duckdb_disconnect(&con_);
    con_ = fresh;
    result_holder h;
    duckdb_query(con_, "SET TimeZone = 'UTC'", &h.r);
    return true;
  }

  /// Memory DuckDB holds for table data and indexes no checkpoint has written yet (it
  /// cannot evict them), in bytes; 0 when it cannot tell.
  std::uint64_t unwritten_table_memory() noexcept {
    result_holder h;
    if (duckdb_query(con_,
                     "SELECT CAST(coalesce(sum(memory_usage_bytes), 0) AS BIGINT) FROM "
                     "duckdb_memory() WHERE tag IN ('IN_MEMORY_TABLE', 'ART_INDEX')",
                     &h.r) == DuckDBError)
      return 0;
    return static_cast<std::uint64_t>(duckdb_value_int64(&h.r, 0, 0));
  }

  void maybe_checkpoint() noexcept {
    const std::uint64_t n = ++gate_->commits;
    bool due = n % checkpoint_every == 0;
    if (!due && n % memory_check_every == 0 && memory_limit_bytes_ > 0)
      due = unwritten_table_memory() > memory_limit_bytes_ / 2;
    if (!due)
      return;
    std::unique_lock lock(gate_->mu);
    result_holder h;
    // Best effort: a statement running outside a load (DDL in auto-commit) makes DuckDB
    // refuse; the next round will checkpoint.
    duckdb_query(con_, "CHECKPOINT", &h.r);
  }

  duckdb_database db_ = nullptr;
  duckdb_connection con_ = nullptr;
  std::shared_ptr<checkpoint_gate> gate_;
  duckdb_thread_counts threads_;
  std::shared_lock<std::shared_mutex> load_lock_;
  std::uint64_t memory_limit_bytes_ = 0;  ///< DuckDB's memory_limit as set; 0: unknown
};

}  // namespace

std::unique_ptr<warehouse> open_duckdb(const warehouse_options& options,
                                       std::unique_ptr<dialects::dialect> d) {
  return std::make_unique<duckdb_warehouse>(options, std::move(d));
}

}  // namespace flotilla::sinks::detail
