// PostgreSQL adapter: libpq. The catalog is one query over pg_catalog for every user
// table of every non-system schema; rows are read with COPY (SELECT ...) TO STDOUT in
// text format, which is several times faster than row-by-row results.
//
// Connections come from a small pool owned by the source object: each catalog read or
// table read takes one (connecting when none is idle) and gives it back, so one source
// may serve several reader threads at once. The pool's connections close when the source
// is destroyed. Each connection is set to UTC, ISO dates, shortest-exact floats and hex
// bytea, so the server's text output already is the representation of schema/rows.hpp.

#include <libpq-fe.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "schema/calendar.hpp"
#include "sources/adapters.hpp"
#include "sources/batch_builder.hpp"
#include "sources/big_endian.hpp"
#include "sources/copy_text.hpp"
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

// row_security off, as pg_dump sets it: a table whose row-level security policies would
// hide rows from the source's role fails its read instead of copying only the rows the
// policies let through (see read_fix).
// A read waits at most a minute for a lock another session holds on its table (an ALTER,
// a VACUUM FULL, an idle transaction that altered it), then fails, naming the wait: it
// held the whole run before, for ever behind an idle session. A lock_timeout the role,
// the database or the DSN (options=-c lock_timeout=...) sets is kept.
constexpr const char* session_settings =
    "SELECT pg_catalog.set_config('lock_timeout', '60s', false) WHERE "
    "pg_catalog.current_setting('lock_timeout') IN ('0', '0ms'); "
    "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres'; "
    "SET extra_float_digits = 3; SET bytea_output = 'hex'; "
    "SET standard_conforming_strings = on; SET client_encoding = 'UTF8'; "
    "SET row_security = off";

// One query for every table: columns (domains resolved to their base types), primary key
// membership, and the change marker's ingredients from the statistics collector.
// In pg_attribute's own order (table oid, column number), which the server reads from its
// index without sorting: ordered by schema and table name, the sort of every column row
// spilled to disk and took 40% of the query at 10,000 tables (365 against 220 ms).
// read_catalog() orders the tables by name.
constexpr const char* catalog_sql = R"sql(
WITH rels AS MATERIALIZED (
  SELECT c.oid, n.nspname, c.relname, c.relkind,
         -- No marker for a parent of inheritance children (its copy reads their rows,
         -- its counters do not count them) or while statistics are off in the database.
         CASE WHEN c.relkind IN ('r', 'm') AND NOT c.relhassubclass
                   AND pg_catalog.current_setting('track_counts') = 'on' THEN
           concat_ws(':', c.relfilenode,
                     pg_catalog.pg_stat_get_tuples_inserted(c.oid),
                     pg_catalog.pg_stat_get_tuples_updated(c.oid),
                     pg_catalog.pg_stat_get_tuples_deleted(c.oid),
                     pg_catalog.pg_stat_get_live_tuples(c.oid))
         END AS stats,
         -- What the role may not read, so that plan shows a table run would fail: NULL
         -- when it may read every column, '' when it may not use the schema or read the
         -- table at all, otherwise a column it may not read (grants of some columns).
         CASE WHEN NOT pg_catalog.has_schema_privilege(n.oid, 'USAGE') THEN ''
              WHEN pg_catalog.has_table_privilege(c.oid, 'SELECT') THEN NULL
              WHEN NOT pg_catalog.has_any_column_privilege(c.oid, 'SELECT') THEN ''
              ELSE (SELECT a.attname FROM pg_catalog.pg_attribute a
                     WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                       AND NOT pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT')
                     ORDER BY a.attnum LIMIT 1)
         END AS unreadable
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
    AND NOT c.relispartition
    AND n.nspname <> 'information_schema'
    AND n.nspname NOT LIKE 'pg\_%'
    AND n.nspname <> '_flotilla'  -- Flotilla's own: the DDL capture's log, target bookkeeping
),
-- Each domain's base type, through domains over domains: the innermost type modifier
-- given (a varchar(10) domain under a plain one), NOT NULL if any level has it.
doms AS MATERIALIZED (
  WITH RECURSIVE d(oid, base, typmod, nn) AS (
    SELECT t.oid, t.typbasetype, t.typtypmod, t.typnotnull
    FROM pg_catalog.pg_type t WHERE t.typtype = 'd'
    UNION ALL
    SELECT d.oid, b.typbasetype, CASE WHEN d.typmod >= 0 THEN d.typmod ELSE b.typtypmod END,
           d.nn OR b.typnotnull
    FROM d JOIN pg_catalog.pg_type b ON b.oid = d.base AND b.typtype = 'd'
  )
  SELECT d.oid, d.base, d.typmod, d.nn
  FROM d JOIN pg_catalog.pg_type b ON b.oid = d.base AND b.typtype <> 'd'
)
SELECT r.nspname, r.relname, a.attname,
       pg_catalog.format_type(coalesce(dm.base, a.atttypid),
                              CASE WHEN dm.oid IS NULL THEN a.atttypmod ELSE dm.typmod END),
       (a.attnotnull OR coalesce(dm.nn, false)),
       coalesce(a.attnum = ANY (i.indkey), false),
       r.stats,
       -- The database's oid: a database created anew (from a template, a restore) or
       -- another one under the source's DSN starts its tables' counters afresh.
       -- A standby (hot standby, a read replica) counts none of the changes it replays
       -- from its primary: there, the position replayed up to stands in for them, so
       -- every table counts as changed whenever the standby replayed anything (NULL, left
       -- out, on a primary).
       (SELECT concat_ws(':', d.oid, pg_catalog.pg_stat_get_db_stat_reset_time(d.oid),
                         pg_catalog.pg_postmaster_start_time(),
                         CASE WHEN pg_catalog.pg_is_in_recovery()
                              THEN 'replay' || pg_catalog.pg_last_wal_replay_lsn()::text END)
          FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()),
       r.unreadable,
       r.oid,
       a.attnum
FROM rels r
JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN doms dm ON dm.oid = a.atttypid
LEFT JOIN pg_catalog.pg_index i ON i.indrelid = r.oid AND i.indisprimary
ORDER BY r.oid, a.attnum
)sql";

std::string last_error(PGconn* conn) { return PQerrorMessage(conn); }

struct result_guard {
  PGresult* r = nullptr;
  ~result_guard() { PQclear(r); }
};

// Connections this source has open and idle.
class pool {
 public:
  pool() = default;
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;
  ~pool() {
    for (PGconn* c : idle_)
      PQfinish(c);
  }

  PGconn* take() {
    std::lock_guard lock(mutex_);
    if (idle_.empty())
      return nullptr;
    PGconn* c = idle_.back();
    idle_.pop_back();
    return c;
  }

  void give_back(PGconn* c) {
    std::lock_guard lock(mutex_);
    idle_.push_back(c);
  }

 private:
  std::mutex mutex_;
  std::vector<PGconn*> idle_;
};

// A connection borrowed from the pool; returned on destruction unless it broke or a COPY
// was abandoned half-way (then it is closed).
class lease {
 public:
  lease(pool& p, PGconn* c) : pool_(p), conn_(c) {}
  lease(lease&& other) noexcept : pool_(other.pool_), conn_(other.conn_), keep_(other.keep_) {
    other.conn_ = nullptr;
  }
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  lease& operator=(lease&&) = delete;
  ~lease() {
    if (!conn_)
      return;
    if (keep_ && PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_IDLE)
      pool_.give_back(conn_);
    else
      PQfinish(conn_);
  }
  [[nodiscard]] PGconn* get() const { return conn_; }
  void discard() { keep_ = false; }

 private:
  pool& pool_;
  PGconn* conn_;
  bool keep_ = true;
};

// The expression that makes the server print the requested representation.
std::string select_expr(const std::string& q, const portable_type& want, type_kind stored) {
  switch (want.kind) {
    case type_kind::boolean: return q + "::boolean";
    case type_kind::smallint: return q + "::smallint";
    case type_kind::int32: return q + "::integer";
    case type_kind::bigint: return q + "::bigint";
    case type_kind::float32: return q + "::real";
    case type_kind::float64: return q + "::double precision";
    case type_kind::decimal: return fmt::format("{}::numeric({},{})", q, want.precision, want.scale);
    case type_kind::date: return q + "::date";
    case type_kind::time: return q + "::time";
    case type_kind::timestamp_ntz: return q + "::timestamp";
    case type_kind::timestamp_tz: return q + "::timestamptz";
    case type_kind::uuid: return q + "::uuid";
    // text::bytea would parse escapes in the text; convert_to keeps its bytes.
    case type_kind::bytes: return stored == type_kind::bytes ? q : "convert_to(" + q + "::text, 'UTF8')";
    case type_kind::varchar:
    case type_kind::text:
    case type_kind::json: return q + "::text";
  }
  return q + "::text";
}

// What to do when a table's COPY fails.
constexpr std::string_view fix =
    "check that the table and its columns still exist and that the user may read them";

/// What to do when a table's COPY fails with `reason`: for row-level security, which
/// would have hidden rows from the role (the session runs with row_security off), how to
/// let the role read every row.
std::string read_fix(std::string_view reason) {
  if (reason.find("lock timeout") != std::string_view::npos)
    return "another session held a lock on the table for longer than the read waits "
           "(lock_timeout, 60 s unless the role, the database or the DSN sets it: "
           "options=-c lock_timeout=5min): an ALTER, a VACUUM FULL, or a transaction left "
           "open after changing the table (pg_locks and pg_stat_activity name it); let it "
           "finish, then `flotilla retry`";
  if (reason.find("row-level security") != std::string_view::npos)
    return "the role Flotilla connects as would see only the rows the table's row-level "
           "security policies allow it, and a copy is all rows or none: give that role "
           "BYPASSRLS (ALTER ROLE ... BYPASSRLS), or connect as the table's owner (when the "
           "table has FORCE ROW LEVEL SECURITY, the owner too needs BYPASSRLS, or ALTER TABLE "
           "... NO FORCE ROW LEVEL SECURITY)";
  // The connection went away mid-read (a server restart, an administrator's
  // pg_terminate_backend, a network cut): nothing about the table is wrong.
  if (reason.find("server closed the connection") != std::string_view::npos ||
      reason.find("terminating connection") != std::string_view::npos ||
      reason.find("connection to server") != std::string_view::npos ||
      reason.find("no connection to the server") != std::string_view::npos ||
      reason.find("could not receive data from server") != std::string_view::npos)
    return "the connection to the source server was lost during the read (the server "
           "restarted or ended the session, or the network dropped it); nothing of the table "
           "was loaded: once the server is reachable, run `flotilla retry`";
  return std::string(fix);
}

/// True for the types whose COPY text may hold a backslash escape: texts and bytea.
bool may_be_escaped(type_kind k) {
  return k == type_kind::varchar || k == type_kind::text || k == type_kind::json ||
         k == type_kind::bytes;
}

bool special_number(std::string_view s) {
  return !s.empty() && (s[0] == 'N' || s[0] == 'I' || s[0] == 'i' || (s[0] == '-' && s.size() > 1 && s[1] == 'I'));
}

class postgres_source final : public source {
 public:
  explicit postgres_source(source_options options) : options_(std::move(options)) {}

  [[nodiscard]] std::string_view adapter() const override { return "postgres"; }

  [[nodiscard]] catalog read_catalog() override {
    lease conn = connect();
    result_guard res;
    res.r = PQexecParams(conn.get(), catalog_sql, 0, nullptr, nullptr, nullptr, nullptr, 0);
    if (PQresultStatus(res.r) != PGRES_TUPLES_OK)
      throw error::catalog_failed(options_.name, error::redact_dsn(options_.dsn),
                                  last_error(conn.get()),
                                  "check that the user may read pg_catalog");
    catalog out;
    shape_hash shape;
    std::string stats;
    // A fleet's columns have a handful of types: each is mapped once.
    std::map<std::string, schema::portable_type, std::less<>> types;
    const int rows = PQntuples(res.r);
    const std::string reset = rows > 0 ? PQgetvalue(res.r, 0, 7) : "";
    auto finish = [&] {
      if (!out.tables.empty() && !stats.empty())
        out.tables.back().marker = fmt::format("pg:{}:r{};s:{}", stats, reset, shape.hex());
    };
    for (int r = 0; r < rows; ++r) {
      const char* nsp = PQgetvalue(res.r, r, 0);
      const char* rel = PQgetvalue(res.r, r, 1);
      if (out.tables.empty() || out.tables.back().name != rel || out.tables.back().schema != nsp) {
        finish();
        shape = shape_hash{};
        stats = PQgetisnull(res.r, r, 6) ? "" : PQgetvalue(res.r, r, 6);
        source_table t;
        t.schema = nsp;
        t.name = rel;
        t.identity = fmt::format("pg-oid:{}", PQgetvalue(res.r, r, 9));
        if (!stats.empty())
          t.generation = "pg-rfn:" + stats.substr(0, stats.find(':'));
        if (!PQgetisnull(res.r, r, 8)) {
          const std::string column = PQgetvalue(res.r, r, 8);
          t.unreadable =
              error::read_failed(
                  options_.name, t.qualified(), "",
                  column.empty()
                      ? std::string("permission denied: the role Flotilla connects as may not "
                                    "read it")
                      : fmt::format("permission denied: the role Flotilla connects as may not "
                                    "read its column '{}' (it was granted only some columns)",
                                    column),
                  fmt::format("grant it SELECT (GRANT SELECT ON {}.{} TO {}, and USAGE on "
                              "the schema), or exclude the table",
                              quote_ident(t.schema), quote_ident(t.name),
                              quote_ident(PQuser(conn.get()))))
                  .what();
        }
        out.tables.push_back(std::move(t));
      }
      schema::column c;
      c.name = PQgetvalue(res.r, r, 2);
      const std::string_view formatted(PQgetvalue(res.r, r, 3),
                                       static_cast<std::size_t>(PQgetlength(res.r, r, 3)));
      auto type = types.find(formatted);
      if (type == types.end())
        type = types.emplace(std::string(formatted), map_postgres_type(formatted)).first;
      c.type = type->second;
      c.nullable = std::strcmp(PQgetvalue(res.r, r, 4), "t") != 0;
      c.key = std::strcmp(PQgetvalue(res.r, r, 5), "t") == 0;
      shape.add(c.name);
      shape.add(formatted);
      shape.add(c.nullable ? "null" : "not null");
      shape.add(c.key ? "key" : "");
      // A column dropped and added again under its name and type is another column
      // (emptied, or filled with its default) without a counted row change.
      shape.add(PQgetvalue(res.r, r, 10));
      out.tables.back().columns.columns.push_back(std::move(c));
    }
    finish();
    std::ranges::sort(out.tables, [](const source_table& a, const source_table& b) {
      return std::tie(a.schema, a.name) < std::tie(b.schema, b.name);
    });
    return out;
  }

  read_result read(const read_request& request, const batch_consumer& consume) override {
    if (request.table == nullptr)
      throw error::bad_request(options_.name, "read request names no table");
    const source_table& table = *request.table;
    const std::string qualified = table.qualified();
    const auto& requested = request.columns.columns;
    const std::size_t width = requested.size();

    auto stored_kind = [&](const std::string& name) {
      const auto* c = table.columns.find(name, schema::name_rule::case_sensitive);
      return c ? c->type.kind : type_kind::text;
    };

    // Requested columns, then the cursor column when it is not among them.
    std::vector<portable_type> types;
    std::vector<std::string> names;
    for (const auto& c : requested) {
      names.push_back(c.name);
      types.push_back(c.type);
    }
    // The cursor column as the catalog spells it (settings may differ in case).
    std::string cursor = request.cursor_column;
    if (!cursor.empty() && !table.columns.find(cursor, schema::name_rule::case_sensitive))
      if (const auto* c = table.columns.find(cursor, schema::name_rule::case_insensitive))
        cursor = c->name;
    std::size_t cursor_index = static_cast<std::size_t>(-1);
    if (!cursor.empty()) {
      for (std::size_t i = 0; i < width; ++i)
        if (requested[i].name == cursor)
          cursor_index = i;
      if (cursor_index == static_cast<std::size_t>(-1)) {
        const auto* c = table.columns.find(cursor, schema::name_rule::case_sensitive);
        cursor_index = names.size();
        names.push_back(cursor);
        types.push_back(c ? c->type : portable_type::of(type_kind::text));
      }
    }
    if (names.empty())
      throw error::bad_request(options_.name,
                               fmt::format("read of table '{}' requests no columns", qualified));

    // Each value under a name no column has: ORDER BY the cursor then means the table's
    // column, not its text in the select list (a bare numeric or an enum reads as text,
    // where "10" sorts before "9").
    std::string select = "SELECT ";
    for (std::size_t i = 0; i < names.size(); ++i)
      select += fmt::format("{}{} AS \"__flotilla_c{}\"", i ? ", " : "",
                            select_expr(quote_ident(names[i]), types[i], stored_kind(names[i])),
                            i);
    select += " FROM ";
    if (!table.schema.empty())
      select += quote_ident(table.schema) + ".";
    select += quote_ident(table.name);
    if (!cursor.empty()) {
      const std::string q = quote_ident(cursor);
      if (request.after) {
        // A date or timestamp watermark before the year 1 is kept in ISO form ("-0043-03-15",
        // as the values are read): PostgreSQL reads only its own "0044-03-15 BC".
        const auto kind = types[cursor_index].kind;
        const bool dated = kind == type_kind::date || kind == type_kind::timestamp_ntz ||
                           kind == type_kind::timestamp_tz;
        const std::string after =
            dated ? schema::pg_era_from_iso(*request.after).value_or(*request.after)
                  : *request.after;
        select += past_watermark(q, quote_literal(after), request.inclusive_key);
      }
      select += " ORDER BY " + q + " ASC NULLS LAST";
    }
    const bool binary = request.copy_text && request.copy_binary && cursor.empty();
    const std::string sql = "COPY (" + select + ") TO STDOUT" + (binary ? " (FORMAT binary)" : "");

    lease conn = connect();
    // An unconstrained numeric reads as text, but the server compares it as the number
    // it is: its 'NaN' and 'Infinity' sort after every other value, as a double's do.
    bool numeric_cursor = false;
    if (cursor_index != static_cast<std::size_t>(-1) &&
        (types[cursor_index].kind == type_kind::text ||
         types[cursor_index].kind == type_kind::varchar)) {
      const std::string rel = (table.schema.empty() ? "" : quote_ident(table.schema) + ".") +
                              quote_ident(table.name);
      const char* params[] = {rel.c_str(), cursor.c_str()};
      result_guard res;
      res.r = PQexecParams(conn.get(),
                           "SELECT a.atttypid = 'pg_catalog.numeric'::pg_catalog.regtype FROM "
                           "pg_catalog.pg_attribute a WHERE a.attrelid = "
                           "pg_catalog.to_regclass($1) AND a.attname = $2",
                           2, nullptr, params, nullptr, nullptr, 0);
      numeric_cursor = PQresultStatus(res.r) == PGRES_TUPLES_OK && PQntuples(res.r) == 1 &&
                       std::string_view(PQgetvalue(res.r, 0, 0)) == "t";
    }
    const portable_type unbounded_as =
        numeric_cursor ? portable_type::decimal(38, 0)
        : cursor_index != static_cast<std::size_t>(-1) ? types[cursor_index]
                                                       : portable_type::of(type_kind::text);
    {
      result_guard res;
      res.r = PQexec(conn.get(), sql.c_str());
      if (PQresultStatus(res.r) != PGRES_COPY_OUT) {
        const std::string reason = last_error(conn.get());
        throw error::read_failed(options_.name, qualified, "", reason, read_fix(reason));
      }
    }

    const std::size_t batch_rows = request.batch_rows ? request.batch_rows : 8192;
    if (binary)
      return pass_through_binary(conn, qualified, names, types, batch_rows, consume);
    if (request.copy_text && cursor.empty())
      return pass_through(conn, qualified, names, types, batch_rows, consume);
    read_result out;
    batch_builder batch(request, width, batch_rows);
    // Only the server's text of these types can hold a COPY escape; the others (numbers,
    // booleans, dates and times, uuids) are never escaped, so their fields skip the search.
    std::vector<char> escapable(names.size());
    for (std::size_t i = 0; i < names.size(); ++i)
      escapable[i] = may_be_escaped(types[i].kind);
    std::string scratch;
    value cursor_cell;
    bool stopped = false;  // the consumer asked for no more rows
    out.rows = copy_rows(
        conn, qualified, names.size(),
        [&](std::size_t i, std::string_view text, bool is_null, std::uint64_t at) {
          if (i >= names.size())
            return;  // copy_rows fails the row
          if (i >= width)
            cursor_cell.clear();
          value& cell = i < width ? batch.next_cell() : cursor_cell;
          if (!is_null) {
            if (escapable[i] && text.find('\\') != std::string_view::npos) {
              unescape_copy(text, scratch);
              text = scratch;
            }
            if (!convert(text, types[i], cell))
              throw error::bad_value(options_.name, qualified, names[i], text, types[i], at);
          }
          if (i == cursor_index && !cell.is_null()) {
            if (unbounded_cursor(cell, unbounded_as)) {
              ++out.unbounded_cursor_rows;
              out.unbounded_cursor = cursor_text(cell);
            } else {
              out.max_cursor = cursor_text(cell);
            }
          }
        },
        [&](std::string_view) {
          if (!batch.full())
            return true;
          if (!consume(batch.take())) {
            stopped = true;
            return false;
          }
          return true;
        });
    if (!stopped && batch.rows() > 0)
      consume(batch.take());
    return out;
  }

 private:
  /// Reads the rows of the COPY started on `conn`: splits each one, handing every field
  /// to `field(index, text, is_null, row_number)` (text still COPY-escaped), checks that
  /// it had `expected` fields, then calls `row_done(row)` (the line without its newline);
  /// false from it abandons the COPY. Returns the rows read.
  template <class Field, class RowDone>
  std::uint64_t copy_rows(lease& conn, const std::string& qualified, std::size_t expected,
                          Field&& field, RowDone&& row_done) {
    std::uint64_t rows = 0;
    char* buf = nullptr;
    int len = 0;
    while ((len = PQgetCopyData(conn.get(), &buf, 0)) > 0) {
      const std::unique_ptr<char, void (*)(void*)> held(buf, PQfreemem);
      std::string_view row(buf, static_cast<std::size_t>(len));
      if (!row.empty() && row.back() == '\n')
        row.remove_suffix(1);
      ++rows;
      std::size_t fields = 0;
      try {
        split_copy_row(row, [&](std::size_t i, std::string_view text, bool is_null) {
          ++fields;
          field(i, text, is_null, rows);
        });
      } catch (...) {
        conn.discard();
        throw;
      }
      if (fields != expected) {
        conn.discard();
        throw error::read_failed(options_.name, qualified, "",
                                 fmt::format("COPY row {} has {} fields, expected {}", rows,
                                             fields, expected),
                                 fix);
      }
      if (!row_done(row)) {
        conn.discard();  // abandoning the COPY: closing the connection stops it
        return rows;
      }
    }
    end_copy(conn, len, qualified);
    return rows;
  }

  /// After the last PQgetCopyData (`len`, -1 at the end, -2 on a lost connection): the
  /// COPY's own result; throws read_failed when the COPY failed.
  void end_copy(lease& conn, int len, const std::string& qualified) {
    if (len == -2) {
      conn.discard();
      // The connection went away: the server it was to is named.
      const std::string reason = last_error(conn.get());
      throw error::read_failed(options_.name, qualified, error::redact_dsn(options_.dsn),
                               reason, read_fix(reason));
    }
    std::string reason;
    bool failed = false;
    while (PGresult* r = PQgetResult(conn.get())) {
      if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        failed = true;
        reason = PQresultErrorMessage(r);
      }
      PQclear(r);
    }
    if (failed)
      throw error::read_failed(options_.name, qualified, "", reason, read_fix(reason));
  }

  /// The COPY text as the server sent it, in batches of whole lines: what a PostgreSQL
  /// target's COPY FROM takes. Each row is still split to check its field count and
  /// that every decimal has a decimal representation (as the value path does).
  read_result pass_through(lease& conn, const std::string& qualified,
                           const std::vector<std::string>& names,
                           const std::vector<portable_type>& types, std::size_t batch_rows,
                           const batch_consumer& consume) {
    read_result out;
    schema::row_batch batch;
    batch.width = names.size();
    std::vector<bool> decimal(names.size());
    bool any_decimal = false;
    for (std::size_t i = 0; i < names.size(); ++i) {
      decimal[i] = types[i].kind == type_kind::decimal;
      any_decimal = any_decimal || decimal[i];
    }
    bool stopped = false;  // the consumer asked for no more rows
    out.rows = copy_rows(
        conn, qualified, names.size(),
        [&](std::size_t i, std::string_view text, bool is_null, std::uint64_t at) {
          if (any_decimal && i < names.size() && decimal[i] && !is_null && special_number(text))
            throw error::bad_value(options_.name, qualified, names[i], text, types[i], at);
        },
        [&](std::string_view row) {
          batch.copy_text.append(row);
          batch.copy_text.push_back('\n');
          if (++batch.text_rows < batch_rows)
            return true;
          if (!consume(std::move(batch))) {
            stopped = true;
            return false;
          }
          batch = schema::row_batch{};
          batch.width = names.size();
          return true;
        });
    if (!stopped && batch.is_copy_text())
      consume(std::move(batch));
    return out;
  }

  /// The binary COPY as the server sent it, in batches of whole tuples without the
  /// stream's header and trailer (the sink writes its own): what a PostgreSQL target's
  /// binary COPY FROM takes when every column has the same type on both sides. Each tuple
  /// is walked to check its field count and field lengths, and that every decimal has a
  /// decimal representation (as the text path does).
  read_result pass_through_binary(lease& conn, const std::string& qualified,
                                  const std::vector<std::string>& names,
                                  const std::vector<portable_type>& types,
                                  std::size_t batch_rows, const batch_consumer& consume) {
    static constexpr std::string_view signature("PGCOPY\n\377\r\n\0", 11);
    const std::size_t width = names.size();
    std::vector<char> decimal(width);
    for (std::size_t i = 0; i < width; ++i)
      decimal[i] = types[i].kind == type_kind::decimal;
    const auto cut = [&](std::uint64_t row, std::string_view what) {
      conn.discard();
      return error::read_failed(options_.name, qualified, "",
                                fmt::format("binary COPY row {}: {}", row, what), fix);
    };
    const auto u16 = [](const char* p) { return static_cast<std::uint16_t>(big_endian(p, 2)); };
    const auto i32 = [](const char* p) { return static_cast<std::int32_t>(big_endian(p, 4)); };

    read_result out;
    schema::row_batch batch;
    batch.width = width;
    batch.copy_binary = true;
    bool header = false, ended = false, stopped = false;
    std::uint64_t rows = 0;
    char* buf = nullptr;
    int len = 0;
    while ((len = PQgetCopyData(conn.get(), &buf, 0)) > 0) {
      const std::unique_ptr<char, void (*)(void*)> held(buf, PQfreemem);
      std::string_view msg(buf, static_cast<std::size_t>(len));
      if (!header) {
        // Signature, flags (no OIDs), then a header extension to skip.
        const std::int32_t extension = msg.size() < 19 ? -1 : i32(msg.data() + 15);
        if (extension < 0 || msg.substr(0, 11) != signature || i32(msg.data() + 11) != 0 ||
            msg.size() < 19 + static_cast<std::size_t>(extension))
          throw cut(0, "the stream does not start with a binary COPY header");
        msg.remove_prefix(19 + static_cast<std::size_t>(extension));
        header = true;
      }
      while (!msg.empty()) {
        if (ended || msg.size() < 2)
          throw cut(rows + 1, "data after the end of the stream, or a cut tuple");
        const std::uint16_t fields = u16(msg.data());
        if (fields == 0xFFFF) {  // the trailer
          ended = true;
          msg.remove_prefix(2);
          continue;
        }
        ++rows;
        if (fields != width)
          throw cut(rows, fmt::format("{} fields, expected {}", fields, width));
        std::size_t at = 2;
        for (std::size_t i = 0; i < width; ++i) {
          if (msg.size() < at + 4)
            throw cut(rows, "cut short");
          const std::int32_t n = i32(msg.data() + at);
          at += 4;
          if (n < 0)
            continue;  // NULL
          if (msg.size() < at + static_cast<std::size_t>(n))
            throw cut(rows, "cut short");
          // numeric: ndigits, weight, sign, dscale; NaN and the infinities by their sign.
          if (decimal[i] && n >= 8) {
            const std::uint16_t sign = u16(msg.data() + at + 4);
            if (sign == 0xC000 || sign == 0xD000 || sign == 0xF000) {
              conn.discard();
              throw error::bad_value(options_.name, qualified, names[i],
                                     sign == 0xC000   ? "NaN"
                                     : sign == 0xD000 ? "Infinity"
                                                      : "-Infinity",
                                     types[i], rows);
            }
          }
          at += static_cast<std::size_t>(n);
        }
        batch.copy_text.append(msg.data(), at);
        msg.remove_prefix(at);
        if (++batch.text_rows < batch_rows)
          continue;
        if (!consume(std::move(batch))) {
          stopped = true;
          break;
        }
        batch = schema::row_batch{};
        batch.width = width;
        batch.copy_binary = true;
      }
      if (stopped) {
        conn.discard();  // abandoning the COPY: closing the connection stops it
        out.rows = rows;
        return out;
      }
    }
    end_copy(conn, len, qualified);
    if (!ended)
      throw error::read_failed(options_.name, qualified, "",
                               "the binary COPY ended without its trailer", fix);
    if (batch.is_copy_text())
      consume(std::move(batch));
    out.rows = rows;
    return out;
  }

  // Converts the server's text for one field; false when it has no such representation.
  static bool convert(std::string_view text, const portable_type& type, value& cell) {
    switch (type.kind) {
      case type_kind::boolean:
        if (text != "t" && text != "f")
          return false;
        cell.kind = value::tag::boolean;
        cell.b = text == "t";
        return true;
      case type_kind::smallint:
      case type_kind::int32:
      case type_kind::bigint: {
        auto v = parse_int64(text);
        if (!v)
          return false;
        cell.kind = value::tag::integer;
        cell.i = *v;
        return true;
      }
      case type_kind::float32:
      case type_kind::float64: {
        auto v = parse_double(text);
        if (!v)
          return false;
        cell.kind = value::tag::real;
        // float4 prints its shortest float text; reading it as a double would not give
        // the float's own value.
        cell.d = type.kind == type_kind::float32 ? static_cast<double>(static_cast<float>(*v)) : *v;
        return true;
      }
      case type_kind::decimal:
        if (special_number(text))  // NaN, Infinity: no decimal representation
          return false;
        cell.kind = value::tag::text;
        cell.s.assign(text.data(), text.size());
        return true;
      case type_kind::bytes: {
        auto raw = decode_bytea_hex(text);
        if (!raw)
          return false;
        cell.kind = value::tag::text;
        cell.s = std::move(*raw);
        return true;
      }
      case type_kind::date:
      case type_kind::timestamp_ntz:
      case type_kind::timestamp_tz:
        cell.kind = value::tag::text;
        // "0044-03-15 BC": the ISO year (-0043) that every target reads as such.
        if (auto iso = text.ends_with(" BC") ? schema::iso_from_pg_era(text) : std::nullopt)
          cell.s = std::move(*iso);
        else
          cell.s.assign(text.data(), text.size());
        return true;
      default:
        cell.kind = value::tag::text;
        cell.s.assign(text.data(), text.size());
        return true;
    }
  }

  lease connect() {
    if (PGconn* idle = pool_.take())
      return lease(pool_, idle);
    // Defaults first: the DSN's own settings, expanded from dbname, override them.
    const char* keywords[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {"10", "flotilla", options_.dsn.c_str(), nullptr};
    PGconn* conn = PQconnectdbParams(keywords, values, 1);
    if (conn == nullptr)
      throw error::cannot_connect(options_.name, options_.dsn, "out of memory");
    if (PQstatus(conn) != CONNECTION_OK) {
      std::string reason = last_error(conn);
      PQfinish(conn);
      throw error::cannot_connect(options_.name, options_.dsn, reason);
    }
    // Server notices are not the run's output.
    PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
    lease l(pool_, conn);
    result_guard res;
    res.r = PQexec(conn, session_settings);
    if (PQresultStatus(res.r) != PGRES_COMMAND_OK) {
      l.discard();
      throw error::cannot_connect(options_.name, options_.dsn, last_error(conn));
    }
    return l;
  }

  source_options options_;
  pool pool_;
};

}  // namespace

std::string postgres_database(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (err != nullptr)
    PQfreemem(err);
  if (opts == nullptr)
    return {};
  std::map<std::string, std::string> kv;
  for (const PQconninfoOption* o = opts; o->keyword != nullptr; ++o)
    if (o->val != nullptr)
      kv[o->keyword] = o->val;
  PQconninfoFree(opts);
  std::string host = !kv["hostaddr"].empty() ? kv["hostaddr"] : kv["host"];
  if (host.find(',') != std::string::npos)
    return {};  // several hosts: compared as written
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (host == "localhost" || host == "::1")
    host = "127.0.0.1";
  const std::string port = kv["port"].empty() ? "5432" : kv["port"];
  const std::string db = kv["dbname"].empty() ? kv["user"] : kv["dbname"];
  return fmt::format("{}:{}/{}", host, port, db);
}

std::string postgres_default_schema(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (err != nullptr)
    PQfreemem(err);
  std::string options;
  if (opts != nullptr) {
    for (const PQconninfoOption* o = opts; o->keyword != nullptr; ++o)
      if (o->val != nullptr && std::string_view(o->keyword) == "options")
        options = o->val;
    PQconninfoFree(opts);
  }
  // "-c search_path=a,b", "-csearch_path=a", "--search_path=a", "--search-path=a".
  static const std::regex set(R"re((?:-c\s*|--)search[_-]path\s*=\s*("[^"]*"|[^,\s]+))re");
  std::smatch m;
  if (!std::regex_search(options, m, set))
    return "public";
  std::string first = m[1].str();
  if (first.size() >= 2 && first.front() == '"')
    return first.substr(1, first.size() - 2);  // quoted: as written
  std::transform(first.begin(), first.end(), first.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return first == "$user" ? std::string("public") : first;
}

std::unique_ptr<source> make_postgres_source(const source_options& options) {
  if (options.dsn.empty())
    throw error::missing_option(options.name, "postgres", "dsn");
  return std::make_unique<postgres_source>(options);
}

}  // namespace flotilla::sources
