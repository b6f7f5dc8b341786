#include "sources/duckdb_common.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "sources/errors.hpp"
#include "sources/sql_text.hpp"
#include "sources/values.hpp"

namespace flotilla::sources::duck {
namespace {

using schema::portable_type;
using schema::type_kind;
using schema::value;

// One process-wide cache, so every source on one file shares one instance: one catalog
// load, one buffer pool (each instance would size its own to most of the memory).
duckdb_instance_cache instance_cache() {
  static duckdb_instance_cache cache = duckdb_create_instance_cache();
  return cache;
}

class config {
 public:
  config() { duckdb_create_config(&cfg_); }
  config(const config&) = delete;
  config& operator=(const config&) = delete;
  ~config() { duckdb_destroy_config(&cfg_); }
  void set(const char* name, const char* option) { duckdb_set_config(cfg_, name, option); }
  [[nodiscard]] duckdb_config get() const { return cfg_; }

 private:
  duckdb_config cfg_ = nullptr;
};

std::string take_error(char* err) {
  std::string out = err ? err : "unknown DuckDB error";
  duckdb_free(err);
  return out;
}

std::string_view view(const duckdb_string_t& s) {
  const std::uint32_t len = s.value.inlined.length;
  if (len <= 12)
    return {s.value.inlined.inlined, len};
  return {s.value.pointer.ptr, len};
}

bool valid(const std::uint64_t* validity, idx_t row) {
  return validity == nullptr || ((validity[row >> 6] >> (row & 63)) & 1) != 0;
}

void set_text(value& cell, std::string_view s) {
  cell.kind = value::tag::text;
  cell.s.assign(s.data(), s.size());
}

void set_text(value& cell, std::string&& s) {
  cell.kind = value::tag::text;
  cell.s = std::move(s);
}

void set_int(value& cell, std::int64_t v) {
  cell.kind = value::tag::integer;
  cell.i = v;
}

void set_real(value& cell, double v) {
  cell.kind = value::tag::real;
  cell.d = v;
}

// DuckDB's sentinels for infinite dates and timestamps.
constexpr std::int32_t date_infinity = 2147483647;
constexpr std::int64_t timestamp_infinity = 9223372036854775807LL;

// ---- choosing the SQL expression per column ---------------------------------------

int integer_width(duckdb_type t) {
  switch (t) {
    case DUCKDB_TYPE_TINYINT:
    case DUCKDB_TYPE_UTINYINT:
    case DUCKDB_TYPE_SMALLINT: return 1;
    case DUCKDB_TYPE_USMALLINT:
    case DUCKDB_TYPE_INTEGER: return 2;
    case DUCKDB_TYPE_UINTEGER:
    case DUCKDB_TYPE_BIGINT: return 3;
    default: return 0;
  }
}

std::string cast(const std::string& q, std::string_view to) {
  return fmt::format("CAST({} AS {})", q, to);
}

// The expression that yields a vector the conversion below reads directly: the column
// itself when its stored type already fits, a cast otherwise.
std::string select_expr(const std::string& q, duckdb_type physical, const portable_type& want) {
  switch (want.kind) {
    case type_kind::boolean:
      return physical == DUCKDB_TYPE_BOOLEAN ? q : cast(q, "BOOLEAN");
    case type_kind::smallint:
    case type_kind::int32:
    case type_kind::bigint: {
      const int w = integer_width(physical);
      if (w > 0 && w <= schema::integer_rank(want.kind))
        return q;
      return cast(q, want.kind == type_kind::smallint ? "SMALLINT"
                     : want.kind == type_kind::int32  ? "INTEGER"
                                                      : "BIGINT");
    }
    case type_kind::float32:
      return physical == DUCKDB_TYPE_FLOAT ? q : cast(q, "FLOAT");
    case type_kind::float64:
      return physical == DUCKDB_TYPE_DOUBLE || physical == DUCKDB_TYPE_FLOAT ? q
                                                                             : cast(q, "DOUBLE");
    case type_kind::decimal:
      // Doubles become the decimal their shortest text spells (0.1 -> 0.10, never
      // 0.1000000000000000055); text is parsed exactly; the rest is cast exactly.
      if (physical == DUCKDB_TYPE_DOUBLE || physical == DUCKDB_TYPE_FLOAT ||
          physical == DUCKDB_TYPE_VARCHAR)
        return q;
      if (want.precision <= 38)
        return cast(q, fmt::format("DECIMAL({},{})", want.precision, want.scale));
      return cast(q, "VARCHAR");
    case type_kind::varchar:
    case type_kind::text:
      return physical == DUCKDB_TYPE_VARCHAR || physical == DUCKDB_TYPE_BLOB ? q
                                                                             : cast(q, "VARCHAR");
    case type_kind::json:
      // to_json, not a cast: CAST(list AS JSON) writes a NULL element of a JSON[] as NULL,
      // which is no JSON ([{"a":1}, NULL]); to_json writes null.
      if (physical == DUCKDB_TYPE_LIST || physical == DUCKDB_TYPE_STRUCT ||
          physical == DUCKDB_TYPE_MAP || physical == DUCKDB_TYPE_UNION ||
          physical == DUCKDB_TYPE_ARRAY)
        return fmt::format("to_json({})", q);
      return physical == DUCKDB_TYPE_VARCHAR ? q : cast(q, "JSON");
    case type_kind::uuid:
      return physical == DUCKDB_TYPE_VARCHAR || physical == DUCKDB_TYPE_BLOB ? q
                                                                             : cast(q, "VARCHAR");
    case type_kind::bytes:
      return physical == DUCKDB_TYPE_VARCHAR || physical == DUCKDB_TYPE_BLOB ? q
                                                                             : cast(q, "VARCHAR");
    case type_kind::date:
      return physical == DUCKDB_TYPE_DATE ? q : cast(q, "DATE");
    case type_kind::time:
      return physical == DUCKDB_TYPE_TIME ? q : cast(q, "TIME");
    case type_kind::timestamp_ntz:
      // Nanoseconds truncate to the microsecond below, before 1970 too (DuckDB's own cast
      // rounds those toward 1970: 1969-12-31 23:59:59.999999999 would become 1970).
      // ±infinity are kept as such: their epoch_ns is INT64's limit, which would make a
      // date of 2262 (or overflow).
      if (physical == DUCKDB_TYPE_TIMESTAMP_NS)
        return fmt::format("CASE WHEN isinf({0}) THEN CAST({0} AS TIMESTAMP) ELSE "
                           "make_timestamp((epoch_ns({0}) - ((epoch_ns({0}) % 1000 + 1000) % "
                           "1000)) // 1000) END",
                           q);
      return physical == DUCKDB_TYPE_TIMESTAMP ? q : cast(q, "TIMESTAMP");
    case type_kind::timestamp_tz:
      return physical == DUCKDB_TYPE_TIMESTAMP_TZ ? q : cast(q, "TIMESTAMPTZ");
  }
  return cast(q, "VARCHAR");
}

// ---- converting vectors ----------------------------------------------------------

enum class how : std::uint8_t {
  boolean, i8, i16, i32, i64, u8, u16, u32, f32, f64, f32_decimal, f64_decimal,
  dec16, dec32, dec64, dec128, text, text_decimal, text_uuid, text_json, blob_uuid,
  date, time, timestamp, timestamp_tz,
};

/// JSON text with DuckDB's non-finite doubles (NaN, Infinity, -Infinity, which to_json
/// writes bare inside a STRUCT or LIST) as strings, the way PostgreSQL's to_json writes
/// them: bare, they are no JSON, and a target's JSON column fails every query on them (or
/// refuses the load). Nothing else changes; nullopt when there is nothing to change.
std::optional<std::string> quote_non_finite(std::string_view json) {
  if (json.find_first_of("NI") == std::string_view::npos)
    return std::nullopt;
  std::string out;
  bool in_string = false, changed = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char ch = json[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < json.size())
        out += json[++i];
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
      continue;
    }
    bool quoted = false;
    for (const std::string_view token : {"NaN", "Infinity", "-Infinity"}) {
      if (json.substr(i, token.size()) == token) {
        out += '"';
        out += token;
        out += '"';
        i += token.size() - 1;
        quoted = changed = true;
        break;
      }
    }
    if (!quoted)
      out += ch;
  }
  if (!changed)
    return std::nullopt;
  return out;
}

struct column_reader {
  how kind = how::text;
  int scale = 0;  // decimals
  portable_type type;
  std::string name;
};

// Where a conversion fails: the raw value and the row within the slice.
struct bad_cell {
  std::string raw;
  idx_t row;
};

column_reader make_reader(duckdb_logical_type logical, const portable_type& want,
                          std::string name) {
  column_reader r;
  r.type = want;
  r.name = std::move(name);
  const duckdb_type t = duckdb_get_type_id(logical);
  switch (t) {
    case DUCKDB_TYPE_BOOLEAN: r.kind = how::boolean; break;
    case DUCKDB_TYPE_TINYINT: r.kind = how::i8; break;
    case DUCKDB_TYPE_SMALLINT: r.kind = how::i16; break;
    case DUCKDB_TYPE_INTEGER: r.kind = how::i32; break;
    case DUCKDB_TYPE_BIGINT: r.kind = how::i64; break;
    case DUCKDB_TYPE_UTINYINT: r.kind = how::u8; break;
    case DUCKDB_TYPE_USMALLINT: r.kind = how::u16; break;
    case DUCKDB_TYPE_UINTEGER: r.kind = how::u32; break;
    case DUCKDB_TYPE_FLOAT:
      r.kind = want.kind == type_kind::decimal ? how::f32_decimal : how::f32;
      r.scale = want.scale;
      break;
    case DUCKDB_TYPE_DOUBLE:
      r.kind = want.kind == type_kind::decimal ? how::f64_decimal : how::f64;
      r.scale = want.scale;
      break;
    case DUCKDB_TYPE_DECIMAL: {
      r.scale = duckdb_decimal_scale(logical);
      switch (duckdb_decimal_internal_type(logical)) {
        case DUCKDB_TYPE_SMALLINT: r.kind = how::dec16; break;
        case DUCKDB_TYPE_INTEGER: r.kind = how::dec32; break;
        case DUCKDB_TYPE_BIGINT: r.kind = how::dec64; break;
        default: r.kind = how::dec128; break;
      }
      break;
    }
    case DUCKDB_TYPE_VARCHAR:
      r.kind = want.kind == type_kind::decimal ? how::text_decimal
               : want.kind == type_kind::uuid  ? how::text_uuid
               : want.kind == type_kind::json  ? how::text_json
                                               : how::text;
      r.scale = want.scale;
      break;
    case DUCKDB_TYPE_BLOB:
      r.kind = want.kind == type_kind::uuid ? how::blob_uuid : how::text;
      break;
    case DUCKDB_TYPE_DATE: r.kind = how::date; break;
    case DUCKDB_TYPE_TIME: r.kind = how::time; break;
    case DUCKDB_TYPE_TIMESTAMP: r.kind = how::timestamp; break;
    case DUCKDB_TYPE_TIMESTAMP_TZ: r.kind = how::timestamp_tz; break;
    default:
      throw failure(fmt::format("column '{}' has a DuckDB type (id {}) that cannot be read as {}",
                                r.name, static_cast<int>(t), schema::to_string(want)));
  }
  return r;
}

template <class T, class F>
void fill(duckdb_vector vec, idx_t from, idx_t count, value* out, std::size_t stride, F&& f) {
  const T* data = static_cast<const T*>(duckdb_vector_get_data(vec));
  const std::uint64_t* validity = duckdb_vector_get_validity(vec);
  for (idx_t r = 0; r < count; ++r) {
    value& cell = out[r * stride];
    const idx_t row = from + r;
    if (!valid(validity, row)) {
      cell = value::null();
      continue;
    }
    f(data[row], cell, r);
  }
}

std::string timestamp_text(std::int64_t micros, bool tz) {
  if (micros == timestamp_infinity)
    return "infinity";
  if (micros == -timestamp_infinity)
    return "-infinity";
  return format_timestamp(micros, tz);
}

void read_slice(const column_reader& c, duckdb_vector vec, idx_t from, idx_t count, value* out,
                std::size_t stride) {
  auto as_int = [](auto v, value& cell, idx_t) { set_int(cell, static_cast<std::int64_t>(v)); };
  switch (c.kind) {
    case how::boolean:
      fill<bool>(vec, from, count, out, stride, [](bool v, value& cell, idx_t) {
        cell.kind = value::tag::boolean;
        cell.b = v;
      });
      break;
    case how::i8: fill<std::int8_t>(vec, from, count, out, stride, as_int); break;
    case how::i16: fill<std::int16_t>(vec, from, count, out, stride, as_int); break;
    case how::i32: fill<std::int32_t>(vec, from, count, out, stride, as_int); break;
    case how::i64: fill<std::int64_t>(vec, from, count, out, stride, as_int); break;
    case how::u8: fill<std::uint8_t>(vec, from, count, out, stride, as_int); break;
    case how::u16: fill<std::uint16_t>(vec, from, count, out, stride, as_int); break;
    case how::u32: fill<std::uint32_t>(vec, from, count, out, stride, as_int); break;
    case how::f32:
      fill<float>(vec, from, count, out, stride,
                  [](float v, value& cell, idx_t) { set_real(cell, static_cast<double>(v)); });
      break;
    case how::f64:
      fill<double>(vec, from, count, out, stride,
                   [](double v, value& cell, idx_t) { set_real(cell, v); });
      break;
    case how::f32_decimal:
    case how::f64_decimal: {
      auto conv = [&](double v, value& cell, idx_t r) {
        auto text = decimal_from_double(v, c.scale);
        if (!text)
          throw bad_cell{shortest_double(v), r};
        set_text(cell, std::move(*text));
      };
      if (c.kind == how::f32_decimal)
        fill<float>(vec, from, count, out, stride,
                    [&](float v, value& cell, idx_t r) { conv(static_cast<double>(v), cell, r); });
      else
        fill<double>(vec, from, count, out, stride, conv);
      break;
    }
    case how::dec16:
      fill<std::int16_t>(vec, from, count, out, stride, [&](std::int16_t v, value& cell, idx_t) {
        set_text(cell, format_scaled(v, c.scale));
      });
      break;
    case how::dec32:
      fill<std::int32_t>(vec, from, count, out, stride, [&](std::int32_t v, value& cell, idx_t) {
        set_text(cell, format_scaled(v, c.scale));
      });
      break;
    case how::dec64:
      fill<std::int64_t>(vec, from, count, out, stride, [&](std::int64_t v, value& cell, idx_t) {
        set_text(cell, format_scaled(v, c.scale));
      });
      break;
    case how::dec128:
      fill<duckdb_hugeint>(vec, from, count, out, stride,
                           [&](const duckdb_hugeint& v, value& cell, idx_t) {
                             const __int128 x = static_cast<__int128>(
                                 (static_cast<unsigned __int128>(static_cast<std::uint64_t>(v.upper))
                                  << 64) |
                                 v.lower);
                             set_text(cell, format_scaled(x, c.scale));
                           });
      break;
    case how::text:
      fill<duckdb_string_t>(vec, from, count, out, stride,
                            [](const duckdb_string_t& v, value& cell, idx_t) {
                              set_text(cell, view(v));
                            });
      break;
    case how::text_json:
      fill<duckdb_string_t>(vec, from, count, out, stride,
                            [](const duckdb_string_t& v, value& cell, idx_t) {
                              if (auto quoted = quote_non_finite(view(v)))
                                set_text(cell, std::move(*quoted));
                              else
                                set_text(cell, view(v));
                            });
      break;
    case how::text_decimal:
      fill<duckdb_string_t>(vec, from, count, out, stride,
                            [&](const duckdb_string_t& v, value& cell, idx_t r) {
                              auto text = normalize_decimal(view(v), c.scale);
                              if (!text)
                                throw bad_cell{std::string(view(v)), r};
                              set_text(cell, std::move(*text));
                            });
      break;
    case how::text_uuid:
      fill<duckdb_string_t>(vec, from, count, out, stride,
                            [&](const duckdb_string_t& v, value& cell, idx_t r) {
                              auto text = normalize_uuid(view(v));
                              if (!text)
                                throw bad_cell{std::string(view(v)), r};
                              set_text(cell, std::move(*text));
                            });
      break;
    case how::blob_uuid:
      fill<duckdb_string_t>(vec, from, count, out, stride,
                            [&](const duckdb_string_t& v, value& cell, idx_t r) {
                              std::string_view b = view(v);
                              if (b.size() != 16)
                                throw bad_cell{std::string(b), r};
                              set_text(cell,
                                       format_uuid(reinterpret_cast<const unsigned char*>(b.data())));
                            });
      break;
    case how::date:
      fill<std::int32_t>(vec, from, count, out, stride, [](std::int32_t v, value& cell, idx_t) {
        if (v == date_infinity)
          set_text(cell, std::string_view("infinity"));
        else if (v == -date_infinity)
          set_text(cell, std::string_view("-infinity"));
        else
          set_text(cell, format_date(v));
      });
      break;
    case how::time:
      fill<std::int64_t>(vec, from, count, out, stride, [](std::int64_t v, value& cell, idx_t) {
        set_text(cell, format_time(v));
      });
      break;
    case how::timestamp:
      fill<std::int64_t>(vec, from, count, out, stride, [](std::int64_t v, value& cell, idx_t) {
        set_text(cell, timestamp_text(v, false));
      });
      break;
    case how::timestamp_tz:
      fill<std::int64_t>(vec, from, count, out, stride, [](std::int64_t v, value& cell, idx_t) {
        set_text(cell, timestamp_text(v, true));
      });
      break;
  }
}

// RAII for the C API's handles.
struct prepared {
  duckdb_prepared_statement p = nullptr;
  ~prepared() { duckdb_destroy_prepare(&p); }
};
struct pending {
  duckdb_pending_result p = nullptr;
  ~pending() { duckdb_destroy_pending(&p); }
};
struct result {
  duckdb_result r{};
  bool live = false;
  ~result() {
    if (live)
      duckdb_destroy_result(&r);
  }
};
struct chunk {
  duckdb_data_chunk c = nullptr;
  ~chunk() {
    if (c)
      duckdb_destroy_data_chunk(&c);
  }
};
struct logical {
  duckdb_logical_type t = nullptr;
  ~logical() {
    if (t)
      duckdb_destroy_logical_type(&t);
  }
};

}  // namespace

// ---- database and connection -----------------------------------------------------

database database::open_read_only(const std::string& path) {
  // DuckDB would take a SQLite file for one its sqlite extension reads (and try to fetch it).
  char head[16] = {};
  if (std::ifstream in(path, std::ios::binary); in.read(head, sizeof head) &&
      std::string_view(head, sizeof head) == std::string_view("SQLite format 3\0", 16))
    throw failure("the file is a SQLite database, not a DuckDB one: read it with "
                  "adapter = \"sqlite\"");
  // Any other file that is not a DuckDB database (a CSV file, say): DuckDB's read-only
  // open of it says only "Cannot launch in-memory database in read-only mode!". A DuckDB
  // file has "DUCK" at byte 8; an empty or missing one is left to DuckDB's own error.
  if (std::ifstream in(path, std::ios::binary); in.read(head, sizeof head) || in.gcount() > 0)
    if (in.gcount() < 12 || std::string_view(head + 8, 4) != "DUCK")
      throw failure("the file is not a DuckDB database (a DuckDB file has \"DUCK\" at byte 8): "
                    "point path at a DuckDB database file, or read a CSV or JSON file with "
                    "adapter = \"csv\" or \"json\", a SQLite database with adapter = "
                    "\"sqlite\"");
  config cfg;
  cfg.set("access_mode", "READ_ONLY");
  cfg.set("autoinstall_known_extensions", "false");
  duckdb_database db = nullptr;
  char* err = nullptr;
  if (duckdb_get_or_create_from_cache(instance_cache(), path.c_str(), &db, cfg.get(), &err) !=
      DuckDBSuccess)
    throw failure(take_error(err));
  return database(db);
}

database database::open_memory() {
  config cfg;
  cfg.set("autoinstall_known_extensions", "false");
  duckdb_database db = nullptr;
  char* err = nullptr;
  if (duckdb_open_ext(nullptr, &db, cfg.get(), &err) != DuckDBSuccess)
    throw failure(take_error(err));
  return database(db);
}

database::~database() {
  if (db_)
    duckdb_close(&db_);
}

connection::connection(const database& db) {
  if (duckdb_connect(db.get(), &con_) != DuckDBSuccess)
    throw failure("cannot connect to the DuckDB database");
  exec("SET SESSION TimeZone = 'UTC'");
}

connection::~connection() {
  if (con_)
    duckdb_disconnect(&con_);
}

void connection::exec(const std::string& sql) {
  result res;
  const bool ok = duckdb_query(con_, sql.c_str(), &res.r) == DuckDBSuccess;
  res.live = true;
  if (!ok)
    throw failure(duckdb_result_error(&res.r));
}

std::vector<std::vector<std::optional<std::string>>> connection::strings(const std::string& sql) {
  result res;
  const bool ok = duckdb_query(con_, sql.c_str(), &res.r) == DuckDBSuccess;
  res.live = true;
  if (!ok)
    throw failure(duckdb_result_error(&res.r));
  const idx_t width = duckdb_column_count(&res.r);
  std::vector<std::vector<std::optional<std::string>>> rows;
  while (true) {
    chunk ch;
    ch.c = duckdb_fetch_chunk(res.r);
    if (!ch.c)
      break;
    const idx_t n = duckdb_data_chunk_get_size(ch.c);
    const std::size_t base = rows.size();
    rows.resize(base + n, std::vector<std::optional<std::string>>(width));
    for (idx_t col = 0; col < width; ++col) {
      duckdb_vector vec = duckdb_data_chunk_get_vector(ch.c, col);
      const auto* data = static_cast<const duckdb_string_t*>(duckdb_vector_get_data(vec));
      const std::uint64_t* validity = duckdb_vector_get_validity(vec);
      for (idx_t r = 0; r < n; ++r)
        if (valid(validity, r))
          rows[base + r][col] = std::string(view(data[r]));
    }
  }
  if (const char* e = duckdb_result_error(&res.r))
    throw failure(e);
  return rows;
}

// ---- scanning --------------------------------------------------------------------

read_result scan(connection& con, const scan_spec& spec, const batch_consumer& consume) {
  const read_request& req = *spec.request;
  const auto& requested = req.columns.columns;
  const std::size_t width = requested.size();

  auto fail = [&](std::string_view reason) {
    return error::read_failed(spec.source, spec.table, spec.where,
                              spec.explain ? spec.explain(std::string(reason)) : std::string(reason),
                              spec.fix);
  };

  // Requested columns, then the cursor column when it is not among them.
  std::vector<std::string> names;
  std::vector<portable_type> types;
  for (const auto& c : requested) {
    names.push_back(c.name);
    types.push_back(c.type);
  }
  std::size_t cursor_index = static_cast<std::size_t>(-1);
  if (!req.cursor_column.empty()) {
    for (std::size_t i = 0; i < width; ++i)
      if (schema::same_name(requested[i].name, req.cursor_column,
                            schema::name_rule::case_insensitive))
        cursor_index = i;
    if (cursor_index == static_cast<std::size_t>(-1)) {
      portable_type t = portable_type::of(type_kind::text);
      if (req.table)
        if (const auto* c = req.table->columns.find(req.cursor_column,
                                                    schema::name_rule::case_insensitive))
          t = c->type;
      cursor_index = names.size();
      names.push_back(req.cursor_column);
      types.push_back(t);
    }
  }
  if (names.empty())
    throw error::bad_request(spec.source,
                             fmt::format("read of table '{}' requests no columns", spec.table));

  // The stored types, from binding the plain column list.
  std::string probe = "SELECT ";
  for (std::size_t i = 0; i < names.size(); ++i)
    probe += (i ? ", " : "") + quote_ident(names[i]);
  probe += " FROM " + spec.relation;
  std::vector<duckdb_type> physical;
  {
    prepared ps;
    if (duckdb_prepare(con.get(), probe.c_str(), &ps.p) != DuckDBSuccess)
      throw fail(duckdb_prepare_error(ps.p));
    for (std::size_t i = 0; i < names.size(); ++i)
      physical.push_back(duckdb_prepared_statement_column_type(ps.p, i));
  }

  // A TIMESTAMP_NS cursor loads truncated to the microsecond, but its watermark keeps the
  // nanoseconds: read as text beside it (or instead of it, when not loaded). Cut to the
  // microsecond, the watermark would sit below the last row read, and `cursor > watermark`
  // would read that row again on every run (an append-only table would insert it again).
  if (cursor_index != static_cast<std::size_t>(-1) &&
      physical[cursor_index] == DUCKDB_TYPE_TIMESTAMP_NS) {
    if (cursor_index < width) {
      names.push_back(names[cursor_index]);
      physical.push_back(DUCKDB_TYPE_TIMESTAMP_NS);
      types.push_back(portable_type::of(type_kind::text));
      cursor_index = names.size() - 1;
    } else {
      types[cursor_index] = portable_type::of(type_kind::text);
    }
  }

  // Each value under a name no column has, so ORDER BY the cursor means the column, not
  // its cast in the select list.
  std::string sql = "SELECT ";
  for (std::size_t i = 0; i < names.size(); ++i)
    sql += fmt::format("{}{} AS \"__flotilla_c{}\"", i ? ", " : "",
                       select_expr(quote_ident(names[i]), physical[i], types[i]), i);
  sql += " FROM " + spec.relation;
  if (!req.cursor_column.empty()) {
    const std::string q = quote_ident(req.cursor_column);
    if (req.after)
      sql += past_watermark(q, quote_literal(*req.after), req.inclusive_key);
    sql += " ORDER BY " + q + " ASC NULLS LAST";
  }

  prepared ps;
  if (duckdb_prepare(con.get(), sql.c_str(), &ps.p) != DuckDBSuccess)
    throw fail(duckdb_prepare_error(ps.p));
  pending pend;
  if (duckdb_pending_prepared_streaming(ps.p, &pend.p) != DuckDBSuccess)
    throw fail(duckdb_pending_error(pend.p));
  result res;
  const bool ok = duckdb_execute_pending(pend.p, &res.r) == DuckDBSuccess;
  res.live = true;
  if (!ok)
    throw fail(duckdb_result_error(&res.r));

  std::vector<column_reader> readers;
  try {
    for (std::size_t i = 0; i < names.size(); ++i) {
      logical lt;
      lt.t = duckdb_column_logical_type(&res.r, i);
      readers.push_back(make_reader(lt.t, types[i], names[i]));
    }
  } catch (const failure& e) {
    throw fail(e.what());
  }

  const std::size_t batch_rows = req.batch_rows ? req.batch_rows : 8192;
  read_result out;
  schema::row_batch batch;
  batch.width = width;
  batch.cells.reserve(batch_rows * width);
  value cursor_cell;
  while (true) {
    chunk ch;
    ch.c = duckdb_fetch_chunk(res.r);
    if (!ch.c)
      break;
    const idx_t n = duckdb_data_chunk_get_size(ch.c);
    idx_t off = 0;
    while (off < n) {
      const idx_t take = std::min<idx_t>(n - off, batch_rows - batch.rows());
      const std::size_t base = batch.cells.size();
      batch.cells.resize(base + take * width);
      std::size_t col = 0;
      try {
        for (; col < width; ++col)
          read_slice(readers[col], duckdb_data_chunk_get_vector(ch.c, col), off, take,
                     batch.cells.data() + base + col, width);
      } catch (const bad_cell& bad) {
        throw error::bad_value(spec.source, spec.table, readers[col].name, bad.raw,
                               readers[col].type, out.rows + bad.row + 1);
      }
      if (cursor_index != static_cast<std::size_t>(-1)) {
        // Rows arrive ordered by the cursor, NULLs last: the last non-null is the largest.
        duckdb_vector vec = duckdb_data_chunk_get_vector(ch.c, cursor_index);
        const std::uint64_t* validity = duckdb_vector_get_validity(vec);
        // NaN and +infinity sort after every other value: counted, not the watermark.
        for (idx_t r = off + take; r-- > off;) {
          if (!valid(validity, r))
            continue;
          const schema::value* cell = nullptr;
          if (cursor_index < width) {
            cell = &batch.cells[base + (r - off) * width + cursor_index];
          } else {
            try {
              read_slice(readers[cursor_index], vec, r, 1, &cursor_cell, 1);
            } catch (const bad_cell& bad) {
              throw error::bad_value(spec.source, spec.table, readers[cursor_index].name,
                                     bad.raw, readers[cursor_index].type, out.rows + r - off + 1);
            }
            cell = &cursor_cell;
          }
          if (unbounded_cursor(*cell, readers[cursor_index].type)) {
            ++out.unbounded_cursor_rows;
            out.unbounded_cursor = cursor_text(*cell);
            continue;
          }
          out.max_cursor = cursor_text(*cell);
          break;
        }
      }
      out.rows += take;
      off += take;
      if (batch.rows() >= batch_rows) {
        if (!consume(std::move(batch)))
          return out;
        batch = schema::row_batch{};
        batch.width = width;
        batch.cells.reserve(batch_rows * width);
      }
    }
  }
  if (const char* e = duckdb_result_error(&res.r))
    throw fail(e);
  if (!batch.cells.empty())
    consume(std::move(batch));
  return out;
}

}  // namespace flotilla::sources::duck
