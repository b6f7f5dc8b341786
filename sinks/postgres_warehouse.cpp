// PostgreSQL warehouse through libpq: rows go through COPY ... FROM STDIN in text format
// (tabs, newlines, carriage returns and backslashes escaped, NULL as \N, bytea as \\x
// hex); the catalog is read from pg_catalog (one query per table, no information_schema).

#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <expected>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <poll.h>

#include "schema/calendar.hpp"
#include "schema/toml_text.hpp"
#include "schema/utf8.hpp"
#include "sinks/warehouse_internal.hpp"

namespace flotilla::sinks::detail {
namespace {

using dialects::table_ref;
using text_rows = std::vector<std::vector<std::optional<std::string>>>;

/// Serialises Flotilla's own catalog changes (schemas, the bookkeeping table) across
/// connections: concurrent CREATE ... IF NOT EXISTS can otherwise fail on PostgreSQL.
constexpr std::int64_t ddl_lock_key = 0x666c6f74696c6c61;  // "flotilla"

/// PostgreSQL keeps identifiers up to NAMEDATALEN - 1 bytes and truncates longer ones.
constexpr std::size_t max_identifier = 63;

/// Flush COPY data to the server in pieces of about this size.
constexpr std::size_t copy_chunk = 1 << 20;

struct result_holder {
  PGresult* r = nullptr;
  explicit result_holder(PGresult* p) : r(p) {}
  ~result_holder() { PQclear(r); }
  result_holder(const result_holder&) = delete;
  result_holder& operator=(const result_holder&) = delete;
};

std::string trimmed(const char* msg) {
  std::string s = msg ? msg : "unknown error";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

/// Why a statement failed: the result's message, else the connection's (a connection the
/// server ended leaves the result without one).
/// The words a load's commit fails with when another commit of its table came first.
constexpr std::string_view changed_token_words = "the table's commit token changed";

std::string result_error(const PGresult* r, const PGconn* conn) {
  std::string s = r ? trimmed(PQresultErrorMessage(r)) : std::string();
  if (s.empty())
    s = trimmed(PQerrorMessage(conn));
  // The guarded commit token (token_statement): its own words, not the cast's.
  if (const auto at = s.find(changed_token_words); at != std::string::npos) {
    const auto eol = s.find('\n', at);
    const auto end = s.rfind('"', eol == std::string::npos ? std::string::npos : eol);
    return s.substr(at, end == std::string::npos || end < at ? std::string::npos : end - at);
  }
  if (s.empty())
    s = "the server gave no reason (the connection may have been closed)";
  // A column type change a view over the table blocks (feature_not_supported, "cannot
  // alter type of a column used by a view or rule"): the same fix as a blocked swap.
  if (const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
      state && std::string_view(state) == "0A000" &&
      s.find("used by a view or rule") != std::string::npos)
    s += "\nFlotilla changes the column's type here and never drops what depends on it: drop "
         "the views DETAIL names before the run and create them again after it";
  // dependent_objects_still_exist: a swap or rebuild dropping a table that a view, a foreign
  // key or a function of the user's depends on.
  if (const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
      state && std::string_view(state) == "2BP01") {
    // In place of the server's own HINT, which is to cascade.
    if (const auto hint = s.find("\nHINT:"); hint != std::string::npos)
      s.erase(hint);
    s += "\nFlotilla replaces the table here and never drops what depends on it (no CASCADE): "
         "drop the objects DETAIL names before the run and create them again after it";
  }
  return s;
}

/// One field of a result: nullopt for NULL.
std::optional<std::string> field(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col))
    return std::nullopt;
  return std::string(PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col)));
}

text_rows collect(PGresult* r) {
  text_rows out;
  const int rows = PQntuples(r);
  const int cols = PQnfields(r);
  out.reserve(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i) {
    auto& row = out.emplace_back();
    for (int c = 0; c < cols; ++c)
      row.emplace_back(field(r, i, c));
  }
  return out;
}

/// Appends `s` escaped for COPY's text format; false when `s` holds a NUL byte, which no
/// PostgreSQL text value can (appended all the same: the caller reports it).
bool append_copy_text(std::string& out, std::string_view s) {
  std::size_t start = 0;
  bool clean = true;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const char* esc = nullptr;
    switch (c) {
      case '\\': esc = "\\\\"; break;
      case '\t': esc = "\\t"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\0': clean = false; continue;
      default: continue;
    }
    out.append(s.data() + start, i - start);
    out += esc;
    start = i + 1;
  }
  out.append(s.data() + start, s.size() - start);
  return clean;
}

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

class pg_inserter final : public row_inserter {
 public:
  pg_inserter(PGconn* conn, const dialects::dialect& d, const table_ref& t,
              const schema::table_schema& columns, bool with_seq)
      : conn_(conn), dialect_(d), table_(t), with_seq_(with_seq) {
    std::string cols;
    for (const auto& c : columns.columns) {
      if (!cols.empty())
        cols += ", ";
      cols += d.quote(c.name);
      names_.push_back(c.name);
      bytes_.push_back(c.type.kind == schema::type_kind::bytes);
      dated_.push_back(c.type.kind == schema::type_kind::date ||
                       c.type.kind == schema::type_kind::timestamp_ntz ||
                       c.type.kind == schema::type_kind::timestamp_tz);
    }
    if (with_seq_)
      cols += ", " + d.quote(seq_column);
    copy_sql_ = fmt::format("COPY {} ({}) FROM STDIN", d.qualified(t), cols);
    buf_.reserve(copy_chunk + (copy_chunk >> 2));
  }

  ~pg_inserter() override {
    if (copying_) {
      // Abandoned: end COPY with an error so the server discards it; the transaction
      // is rolled back right after.
      PQputCopyEnd(conn_, "load abandoned");
      while (PGresult* r = PQgetResult(conn_))
        PQclear(r);
    }
  }

  void append(const schema::row_batch& batch, std::uint64_t first_seq) override {
    if (!copying_)
      start(batch.copy_binary);
    if (batch.copy_binary != binary_)
      throw sink_error(fmt::format("{}: a load got both binary and text COPY batches",
                                   dialect_.qualified(table_)));
    if (binary_) {
      if (with_seq_)
        throw sink_error(fmt::format("{}: a merge load cannot take binary COPY batches",
                                     dialect_.qualified(table_)));
      buf_ += batch.copy_text;
      if (buf_.size() >= copy_chunk)
        send();
      return;
    }
    if (batch.is_copy_text()) {
      append_copy_lines(batch, first_seq);
      return;
    }
    const std::size_t width = batch.width;
    const std::size_t n = batch.rows();
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t c = 0; c < width; ++c) {
        if (c > 0)
          buf_ += '\t';
        const schema::value& v = batch.at(r, c);
        switch (v.kind) {
          case schema::value::tag::null:
            buf_ += "\\N";
            break;
          case schema::value::tag::boolean:
            buf_ += v.b ? 't' : 'f';
            break;
          case schema::value::tag::integer:
            append_int(buf_, v.i);
            break;
          case schema::value::tag::real:
            append_real(buf_, v.d);
            break;
          case schema::value::tag::text:
            if (bytes_[c]) {
              buf_ += "\\\\x";  // bytea's hex input form, its backslash escaped for COPY
              append_hex(buf_, v.s);
            } else if (dated_[c] && (v.s.starts_with('-') || v.s.starts_with("0000-"))) {
              // ISO year 0 or before (-0043 is 44 BC): PostgreSQL's text says "BC".
              append_copy_text(buf_, schema::pg_era_from_iso(v.s).value_or(v.s));
            } else if (!schema::valid_utf8(v.s)) {
              // PostgreSQL would refuse it naming only the COPY line.
              throw sink_error(fmt::format(
                  "{}: row {} of the load, column {}: the value is not UTF-8 text (bytes such "
                  "as a BLOB's in a text column), which PostgreSQL's text types cannot hold; "
                  "declare the column bytes to load it as bytea (columns = {{ {} = \"bytes\" "
                  "}}), or fix the value at the source",
                  dialect_.qualified(table_), rows_seen_ + r + 1,
                  dialect_.quote(c < names_.size() ? names_[c] : "?"),
                  schema::toml_key(c < names_.size() ? names_[c] : "?")));
            } else if (!append_copy_text(buf_, v.s)) {
              throw sink_error(fmt::format(
                  "{}: column {} holds a text value with a NUL byte (0x00), which PostgreSQL's "
                  "text types cannot store (row {} of the load); declare the column bytes "
                  "(columns = {{ {} = \"bytes\" }}: it loads as bytea), remove it at the "
                  "source, or load the table into a duckdb or sqlite target",
                  dialect_.qualified(table_), dialect_.quote(c < names_.size() ? names_[c] : "?"),
                  rows_seen_ + r + 1, schema::toml_key(c < names_.size() ? names_[c] : "?")));
            }
            break;
        }
      }
      if (with_seq_) {
        buf_ += '\t';
        append_int(buf_, static_cast<std::int64_t>(first_seq + r));
      }
      buf_ += '\n';
      if (buf_.size() >= copy_chunk)
        send();
    }
    rows_seen_ += n;
  }

  void finish() override {
    if (!copying_)
      return;
    if (binary_)
      buf_.append("\xff\xff", 2);  // the stream's trailer
    send();
    copying_ = false;
    if (PQputCopyEnd(conn_, nullptr) != 1)
      throw sink_error(fmt::format("{}: COPY failed: {}", dialect_.qualified(table_),
                                   trimmed(PQerrorMessage(conn_))));
    std::string failure, state, context;
    while (PGresult* r = PQgetResult(conn_)) {
      if (PQresultStatus(r) != PGRES_COMMAND_OK && failure.empty()) {
        failure = result_error(r, conn_);
        const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        const char* where = PQresultErrorField(r, PG_DIAG_CONTEXT);
        state = code ? code : "";
        context = where ? where : "";
      }
      PQclear(r);
    }
    // A value its column's type cannot hold (out of range, too long, too precise): name
    // the column from PostgreSQL's context ("COPY t, line 3, column n: ...") and the fix.
    if (state == "22003" || state == "22001") {
      static constexpr std::string_view at = ", column ";
      if (const auto from = context.find(at); from != std::string::npos) {
        const auto name_from = from + at.size();
        const auto to = context.find(": ", name_from);
        const std::string column = context.substr(
            name_from, to == std::string::npos ? std::string::npos : to - name_from);
        const bool integer = failure.find("out of range for type integer") != std::string::npos ||
                             failure.find("out of range for type smallint") != std::string::npos;
        throw sink_error(fmt::format(
            "{}: column {} holds a value its type cannot hold; declare the column's type in "
            "the table's section of flotilla.toml (columns = {{ {} = \"{}\" }}), or fix the "
            "value at the source (PostgreSQL: {})",
            dialect_.qualified(table_), dialect_.quote(column), schema::toml_key(column),
            integer ? "bigint" : "text", failure));
      }
    }
    if (!failure.empty()) {
      // PostgreSQL's text types cannot hold a NUL byte; its message names only the line.
      if (failure.find("0x00") != std::string::npos)
        failure += ". A text value holds a NUL byte (0x00), which PostgreSQL's text types "
                   "cannot store: remove it at the source (a BLOB column of a SQLite source "
                   "loads as bytea), or load the table into a duckdb or sqlite target";
      throw sink_error(fmt::format("{}: COPY failed: {}", dialect_.qualified(table_), failure));
    }
  }

 private:
  /// A PostgreSQL source's COPY text, as it is: the same types' text in the same order.
  void append_copy_lines(const schema::row_batch& batch, std::uint64_t first_seq) {
    if (!with_seq_) {
      buf_ += batch.copy_text;
    } else {
      std::string_view text = batch.copy_text;
      std::uint64_t seq = first_seq;
      while (!text.empty()) {
        const auto end = text.find('\n');
        const auto line = text.substr(0, end);
        buf_.append(line);
        buf_ += '\t';
        append_int(buf_, static_cast<std::int64_t>(seq++));
        buf_ += '\n';
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
      }
    }
    if (buf_.size() >= copy_chunk)
      send();
  }

  /// Starts the COPY, in the binary format when the first batch holds binary tuples.
  void start(bool binary) {
    const std::string sql = binary ? copy_sql_ + " (FORMAT binary)" : copy_sql_;
    result_holder h(PQexec(conn_, sql.c_str()));
    if (PQresultStatus(h.r) != PGRES_COPY_IN)
      throw sink_error(fmt::format("{} (in: {})", result_error(h.r, conn_), statement_excerpt(sql)));
    copying_ = true;
    binary_ = binary;
    if (binary)  // signature, flags (no OIDs), no header extension
      buf_.append("PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);
  }

  void send() {
    if (buf_.empty())
      return;
    if (PQputCopyData(conn_, buf_.data(), static_cast<int>(buf_.size())) != 1) {
      const std::string msg = trimmed(PQerrorMessage(conn_));
      throw sink_error(fmt::format("{}: COPY failed: {}", dialect_.qualified(table_), msg));
    }
    buf_.clear();
  }

  PGconn* conn_;
  const dialects::dialect& dialect_;
  table_ref table_;
  bool with_seq_;
  std::vector<bool> bytes_;
  std::vector<bool> dated_;  ///< date and timestamp columns
  std::vector<std::string> names_;  ///< the columns, for messages
  std::uint64_t rows_seen_ = 0;     ///< rows of earlier batches, for messages
  std::string copy_sql_;
  std::string buf_;
  bool copying_ = false;
  bool binary_ = false;  ///< the COPY takes binary tuples (schema::row_batch::copy_binary)
};

/// describe_tables() reads up to this many tables in one query, more through a cursor,
/// describe_fetch_rows column rows (~1,000 tables of 16 columns) at a time.
constexpr std::size_t describe_in_one_query = 1000;
constexpr std::size_t describe_fetch_rows = 16384;

/// `names` as a PostgreSQL array literal ({"a","b\"c"}), for a text[] or name[] parameter.
std::string text_array(const std::vector<std::string>& names) {
  std::string out = "{";
  for (const auto& name : names) {
    out += out.size() > 1 ? ",\"" : "\"";
    for (char ch : name) {
      if (ch == '"' || ch == '\\')
        out += '\\';
      out += ch;
    }
    out += '"';
  }
  out += '}';
  return out;
}

/// Whether a full refresh may empty the table of pg_class row `c` and load it in place
/// (postgres_warehouse::empties_in_place), as a SQL expression: `has_key` says whether `c`
/// has a primary key, `limit` is in_place_max_bytes, and row `g` (emptiable_globals) holds
/// the block size and whether any publication publishes deletes.
/// A table a view or materialized view is built on is emptied in place whatever its size:
/// its swap's DROP TABLE would fail on the view (never cascaded), so the in-place refresh
/// is the one that can succeed. The view's rewrite rule depends on the table (pg_depend,
/// deptype 'n'); the EXISTS comes last, so a table within the size limit never asks it.
std::string emptiable_expression(std::string_view has_key, std::string_view limit) {
  return fmt::format(
      // relhastriggers stays true after the last trigger is dropped, until a VACUUM:
      // asked only then, pg_trigger says whether any is left (a foreign key's own included).
      "(c.relkind = 'r' AND NOT (c.relhastriggers AND EXISTS (SELECT 1 FROM "
      "pg_catalog.pg_trigger tg WHERE tg.tgrelid = c.oid)) AND NOT c.relhasrules "
      "AND NOT c.relrowsecurity "
      "AND (c.relreplident = 'f' OR (c.relreplident = 'd' AND {}) OR NOT g.deletes) "
      "AND ((c.reltuples >= 0 AND c.relpages::bigint * g.bs <= {}::bigint) "
      "OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend v "
      "WHERE v.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND v.refobjid = c.oid "
      "AND v.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND v.deptype = 'n')))",
      has_key, limit);
}
constexpr std::string_view emptiable_globals =
    "(SELECT pg_catalog.current_setting('block_size')::bigint AS bs, "
    "EXISTS (SELECT 1 FROM pg_catalog.pg_publication p WHERE p.pubdelete) AS deletes) g";

/// empties_in_place() answers read along with a describe() or describe_tables(), until
/// asked once or until describe() reads the table again. Shared by the process's
/// connections to a database: a plan reads a schema ahead on one connection and plans its
/// tables on several (kept per connection, 47% of a 10,000-table plan's tables asked it
/// again live, one round trip each).
class emptiable_answers {
 public:
  void put(const std::string& key, bool yes) {
    std::lock_guard lock(mu_);
    answers_[key] = yes;
  }
  void forget(const std::string& key) {
    std::lock_guard lock(mu_);
    answers_.erase(key);
  }
  std::optional<bool> take(const std::string& key) {
    std::lock_guard lock(mu_);
    const auto it = answers_.find(key);
    if (it == answers_.end())
      return std::nullopt;
    const bool yes = it->second;
    answers_.erase(it);
    return yes;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, bool> answers_;
};

emptiable_answers& shared_emptiable() {
  static emptiable_answers answers;
  return answers;
}

void ignore_notice(void*, const char*) {
  // nop: NOTICEs such as "table does not exist, skipping" are expected here
}

/// What holds a described name, for the describe queries (`c` the relation): '' for a
/// table, else what the name is ("a view", "an index on s.t"), a '~' in front for an
/// index that backs a constraint (free_table_name may move it aside).
constexpr std::string_view relation_kind =
    "CASE WHEN c.relkind IN ('r', 'p', 'f') THEN '' WHEN c.relkind = 'v' THEN 'a view' "
    "WHEN c.relkind = 'm' THEN 'a materialized view' WHEN c.relkind = 'S' THEN 'a sequence' "
    "WHEN c.relkind = 'c' THEN 'a composite type' ELSE coalesce((SELECT CASE WHEN EXISTS "
    "(SELECT 1 FROM pg_catalog.pg_constraint o WHERE o.conindid = c.oid) THEN '~' ELSE '' "
    "END || 'an index on ' || x.indrelid::pg_catalog.regclass::text FROM pg_catalog.pg_index x "
    "WHERE x.indexrelid = c.oid), 'a relation of kind ' || c.relkind::text) END";

class postgres_warehouse final : public warehouse_base {
 public:
  postgres_warehouse(const warehouse_options& options, std::unique_ptr<dialects::dialect> d)
      : warehouse_base(options.name, std::move(d)),
        in_place_max_bytes_(options.in_place_max_bytes),
        in_place_limit_(in_place_max_bytes_ == 0 ? "-1" : std::to_string(in_place_max_bytes_)),
        emptiable_prefix_(options.dsn + '\0' + in_place_limit_ + '\0') {
    if (options.dsn.empty())
      throw error("a postgres target needs a dsn (postgresql://user@host:port/database)");
    // Defaults first, as a source connects: a server that takes the connection and never
    // answers is given up after 10 s (the DSN's own connect_timeout overrides it).
    const char* keywords[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {"10", "flotilla", options.dsn.c_str(), nullptr};
    conn_ = PQconnectdbParams(keywords, values, 1);
    if (PQstatus(conn_) != CONNECTION_OK) {
      // libpq's message spans lines ("...refused\n\tIs the server running...?"): one
      // line, and where it tried (never the password), and what to check.
      std::string msg = trimmed(PQerrorMessage(conn_));
      for (std::size_t nl; (nl = msg.find('\n')) != std::string::npos;)
        msg.replace(nl, msg.find_first_not_of(" \t", nl + 1) - nl, "; ");
      // A DSN libpq cannot parse is quoted whole in its message: its password is not.
      static const std::regex uri_password(R"((://[^/:@\s"']*:)[^@\s"']*@)");
      static const std::regex keyword_password(R"(((?:^|[\s?&"'])(?:ssl)?password\s*=\s*)('[^']*'|[^\s&"']+))",
                                               std::regex::icase);
      msg = std::regex_replace(std::regex_replace(msg, uri_password, "$1***@"), keyword_password,
                               "$1***");
      auto part = [](const char* p) { return p && *p ? std::string_view{p} : "?"; };
      const std::string where = fmt::format("host {}, port {}, database {}", part(PQhost(conn_)),
                                            part(PQport(conn_)), part(PQdb(conn_)));
      PQfinish(conn_);
      conn_ = nullptr;
      throw error(fmt::format("cannot connect to PostgreSQL ({}): {}; check dsn in [targets.{}]",
                              where, msg, options.name));
    }
    PQsetNoticeProcessor(conn_, ignore_notice, nullptr);
    // Timestamps with time zone read back as UTC instants (+00), like Flotilla writes them.
    // Notices are dropped unread, so the server need not send them: every load's
    // `DROP TABLE IF EXISTS` of a staging table that is not there makes one.
    // A statement waits at most a minute for a lock another session holds on its table
    // (a reporting session's long transaction on a table the load swaps): the table fails,
    // naming the wait, rather than the run waiting for ever. A lock_timeout the role, the
    // database or the DSN (options=-c lock_timeout=...) sets is kept.
    run("SELECT pg_catalog.set_config('lock_timeout', '60s', false) WHERE "
        "pg_catalog.current_setting('lock_timeout') IN ('0', '0ms'); "
        "SET client_encoding = 'UTF8'; SET TimeZone = 'UTC'; SET client_min_messages = warning");
  }

  ~postgres_warehouse() override {
    if (conn_)
      PQfinish(conn_);
  }

  std::optional<schema::table_schema> describe(const table_ref& table) override {
    // The table's in-place check comes along: a load describes its table right before it
    // begins, and then asks empties_in_place() (one round trip fewer per table).
    emptiable_.forget(emptiable_key(table));
    static const std::string sql = fmt::format(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), "
        "CASE WHEN a.attnotnull THEN 'false' ELSE 'true' END, "
        "CASE WHEN EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND "
        "i.indisprimary AND a.attnum = ANY(i.indkey)) THEN 'true' ELSE 'false' END, {}, {} "
        "FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid CROSS JOIN {} "
        "WHERE c.relnamespace = (SELECT n.oid FROM pg_namespace n "
        "WHERE n.nspname = coalesce($1::name, current_schema())) AND c.relname = $2::name "
        "AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        emptiable_expression("EXISTS (SELECT 1 FROM pg_catalog.pg_index k "
                             "WHERE k.indrelid = c.oid AND k.indisprimary)",
                             "$3"),
        relation_kind, emptiable_globals);
    // Prepared once per connection: parsing and planning this catalog join cost ~3x its
    // execution (measured: ~340 us per unprepared call, ~90 us prepared), and a drift
    // check describes every table of a fleet.
    // The schema is looked up on its own, so that the generic plan PostgreSQL switches to
    // after five executions finds the table by schema and name in pg_class's index. Joined
    // to pg_namespace instead, that plan found every table of the name in any schema and
    // matched each to its schema: with 100 clients' schemas holding the same table names,
    // 1.4 ms per describe instead of 0.14.
    static constexpr const char* statement = "flotilla_describe";
    if (!describe_prepared_) {
      result_holder p(PQprepare(conn_, statement, sql.c_str(), 3, nullptr));
      if (PQresultStatus(p.r) != PGRES_COMMAND_OK)
        throw error(fmt::format("cannot read the columns of {}: {}", dialect().qualified(table),
                                result_error(p.r, conn_)));
      describe_prepared_ = true;
    }
    const char* params[3] = {table.schema.empty() ? nullptr : table.schema.c_str(),
                             table.name.c_str(), in_place_limit_.c_str()};
    result_holder h(PQexecPrepared(conn_, statement, 3, params, nullptr, nullptr, 0));
    if (PQresultStatus(h.r) != PGRES_TUPLES_OK)
      throw error(fmt::format("cannot read the columns of {}: {}", dialect().qualified(table),
                              result_error(h.r, conn_)));
    const text_rows rows = collect(h.r);
    if (rows.empty())
      return std::nullopt;
    if (const std::string what = rows.front()[5].value_or(""); !what.empty()) {
      if (held_aside(table, what))
        return std::nullopt;  // the load moves the index aside (free_table_name)
      throw not_a_table(table, what);
    }
    if (in_place_max_bytes_ != 0)
      emptiable_.put(emptiable_key(table), rows.front()[4] == "t");
    schema::table_schema out;
    for (const auto& r : rows)
      if (auto problem = add_column(out, table, r[0], r[1], r[2], r[3]))
        throw *problem;
    return out;
  }

  std::optional<described_tables> describe_tables(const std::string&, const std::string& schema,
                                                  const std::vector<std::string>& names) override {
    // The same catalog join as describe(), for the named tables of the schema together:
    // one execution for them all instead of one per table (a drift check or a plan of a
    // fleet describes thousands of tables of a few schemas).
    // Each table's in-place check comes along (a plan asks it for every table), kept for
    // empties_in_place().
    // Unordered: sorting every column row by table and column number took half of the
    // server's time at 10,000 tables (400 against 195 ms); table_reader puts each table's
    // columns in their order.
    static const std::string sql = fmt::format(
        "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), "
        "CASE WHEN a.attnotnull THEN 'false' ELSE 'true' END, "
        "CASE WHEN a.attnum = ANY(coalesce(i.indkey::int2[], '{{}}')) THEN 'true' ELSE 'false' "
        "END, {}, a.attnum, {} "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = c.oid "
        "LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary CROSS JOIN {} "
        "WHERE n.nspname = coalesce($1::name, current_schema()) AND c.relname = ANY($2::name[]) "
        "AND a.attnum > 0 AND NOT a.attisdropped",
        emptiable_expression("i.indrelid IS NOT NULL", "$3"), relation_kind, emptiable_globals);
    const std::string array = text_array(names);
    const char* params[3] = {schema.empty() ? nullptr : schema.c_str(), array.c_str(),
                             in_place_limit_.c_str()};
    auto failed = [&](PGresult* r) {
      return error(fmt::format("cannot read the columns of the tables of schema {}: {}",
                               schema.empty() ? std::string("(current)") : schema,
                               result_error(r, conn_)));
    };
    table_reader reader(*this, schema);
    // Read from the result as it is: a copy of every row first doubled the memory.
    auto take = [&](PGresult* r) {
      const int rows = PQntuples(r);
      for (int i = 0; i < rows; ++i)
        reader.add(r, i);
    };
    if (names.size() <= describe_in_one_query) {
      result_holder h(PQexecParams(conn_, sql.c_str(), 3, nullptr, params, nullptr, nullptr, 0));
      if (PQresultStatus(h.r) != PGRES_TUPLES_OK)
        throw failed(h.r);
      take(h.r);
      return std::move(reader).finish();
    }
    // More tables: still one execution, read through a cursor describe_fetch_rows rows at
    // a time, since libpq holds a query's whole result until it is parsed. A query per
    // 1,000 tables scanned pg_class again each time: 10,000 tables took 500-580 ms, against
    // 270-290 ms in one execution.
    const bool own = PQtransactionStatus(conn_) == PQTRANS_IDLE;
    if (own)
      run("BEGIN READ ONLY");
    try {
      static const std::string declare =
          "DECLARE flotilla_describe_tables NO SCROLL CURSOR FOR " + sql;
      result_holder d(
          PQexecParams(conn_, declare.c_str(), 3, nullptr, params, nullptr, nullptr, 0));
      if (PQresultStatus(d.r) != PGRES_COMMAND_OK)
        throw failed(d.r);
      static const std::string fetch =
          fmt::format("FETCH {} FROM flotilla_describe_tables", describe_fetch_rows);
      for (;;) {
        result_holder f(PQexec(conn_, fetch.c_str()));
        if (PQresultStatus(f.r) != PGRES_TUPLES_OK)
          throw failed(f.r);
        take(f.r);
        if (static_cast<std::size_t>(PQntuples(f.r)) < describe_fetch_rows)
          break;
      }
      run(own ? "COMMIT" : "CLOSE flotilla_describe_tables");
    } catch (...) {
      if (own)
        rollback();
      throw;
    }
    return std::move(reader).finish();
  }

  /// Appends one catalog row (name, format_type, nullable, primary key) to `out`; the
  /// error describe() throws when the type cannot be mapped, else nullopt.
  std::optional<sink_error> add_column(schema::table_schema& out, const table_ref& table,
                         const std::optional<std::string>& name,
                         const std::optional<std::string>& type_text,
                         const std::optional<std::string>& nullable,
                         const std::optional<std::string>& key) const {
    const std::string type = type_text.value_or("");
    auto t = dialect().parse_physical(type);
    if (!t)
      return unmappable(table, name.value_or(""), type, t.error());
    out.columns.push_back(schema::column{name.value_or(""), *t, nullable == "true", key == "true"});
    return std::nullopt;
  }

  text_rows query(const std::string& sql) override {
    result_holder h(PQexec(conn_, sql.c_str()));
    const auto status = PQresultStatus(h.r);
    if (status == PGRES_COMMAND_OK)
      return {};
    if (status != PGRES_TUPLES_OK)
      throw error(fmt::format("{} (in: {})", result_error(h.r, conn_), statement_excerpt(sql)));
    return collect(h.r);
  }

  void run(const std::string& sql) override {
    result_holder h(PQexec(conn_, sql.c_str()));
    const auto status = PQresultStatus(h.r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      throw error(fmt::format("{} (in: {})", result_error(h.r, conn_), statement_excerpt(sql)));
  }

  void begin() override { run("BEGIN"); }
  void commit_transaction() override { run("COMMIT"); }
  void rollback() noexcept override { PQclear(PQexec(conn_, "ROLLBACK")); }

  std::unique_ptr<row_inserter> open_inserter(const table_ref& table,
                                              const schema::table_schema& columns,
                                              bool with_seq) override {
    return std::make_unique<pg_inserter>(conn_, dialect(), table, columns, with_seq);
  }

  /// CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema is
  /// there: a role granted only what its loads need on an existing schema would be
  /// refused. So the catalog is asked first (no privilege needed), and the statement runs
  /// only for a schema that is missing.
  void ensure_schema(const std::string& schema) override {
    if (!query("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = " +
               dialect().literal(schema))
             .empty())
      return;
    locked_ddl({dialect().create_schema(schema)});
  }

  /// Likewise CREATE TABLE IF NOT EXISTS needs CREATE on its schema: each is made only
  /// when missing (the schema may be there, made by hand, without the table).
  void ensure_bookkeeping() override {
    const auto& d = dialect();
    const auto rows = query(fmt::format(
        "SELECT n.oid IS NOT NULL, c.oid IS NOT NULL FROM (SELECT 1) one "
        "LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = {0} "
        "LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = {1}",
        d.literal(bookkeeping_schema), d.literal(commits_table)));
    const bool has_schema = !rows.empty() && rows[0][0] == "t";
    const bool has_table = !rows.empty() && rows[0][1] == "t";
    if (has_table)
      return;
    std::vector<std::string> statements;
    if (!has_schema)
      statements.push_back(d.create_schema(bookkeeping_schema));
    statements.push_back(fmt::format("CREATE TABLE IF NOT EXISTS {} ({} text PRIMARY KEY, {} text, {} "
                                     "timestamptz)",
                                     d.qualified(bookkeeping_table()), d.quote("table_name"),
                                     d.quote("token"), d.quote("committed_at")));
    locked_ddl(statements);
  }

  /// A killed run's server session can still commit its load (the COMMIT goes with the
  /// last statements) after a rerun read the table's token: both loads' rows would be
  /// there. The token is written only over the one this load read; any other, and the
  /// transaction fails, committing nothing (the next run resumes from that commit).
  std::string token_statement(const load_request& request) const override {
    if (!request.guard_token)
      return warehouse_base::token_statement(request);
    const auto& d = dialect();
    const std::string bk = d.qualified(bookkeeping_table());
    const std::string table = d.qualified(request.target);
    const std::string why = changed_token_message(d, request.target);
    // The upsert, its update only over the expected token; no row written fails the cast.
    return fmt::format(
        "WITH w AS ({} WHERE {}.token IS NOT DISTINCT FROM {} RETURNING 1) "
        "SELECT CAST(CASE WHEN count(*) = 1 THEN '1' ELSE {} END AS integer) FROM w",
        warehouse_base::token_statement(request), bk,
        request.expected_token ? d.literal(*request.expected_token) : std::string("NULL"),
        d.literal(why));
  }

  table_ref bookkeeping_table() const override {
    return table_ref{"", std::string(bookkeeping_schema), std::string(commits_table)};
  }

  std::size_t max_identifier_bytes() const override { return max_identifier; }
  bool key_after_load() const override { return true; }

  bool keeps_hand_made_on_replace() const override { return true; }

  /// What was made by hand on the table, each as the statement that makes it again once
  /// the table of that name is another (after a swap or a rebuild): indexes other than
  /// a constraint's, triggers, CHECK, UNIQUE and EXCLUDE constraints, column DEFAULTs
  /// (but a serial column's, whose sequence goes with the old table), row-level security
  /// and its policies, comments. Flotilla itself makes none of them
  /// (its tables have columns, NOT NULLs and a primary key). The statements name the
  /// table by its qualified name, which the new table has by then.
  std::vector<hand_made_index> hand_made_indexes(const table_ref& table) override {
    const auto& d = dialect();
    const std::string q = d.literal(d.qualified(table));
    const auto rows = query(fmt::format(
        "WITH t AS (SELECT pg_catalog.to_regclass({0}) AS oid) "
        "SELECT 'index ' || i.relname, pg_catalog.pg_get_indexdef(x.indexrelid) "
        "FROM pg_catalog.pg_index x JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid, t "
        "WHERE x.indrelid = t.oid AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c "
        "WHERE c.conindid = x.indexrelid AND c.conrelid = t.oid) "
        "UNION ALL SELECT 'constraint ' || c.conname, pg_catalog.format("
        "'ALTER TABLE %s ADD CONSTRAINT %I %s', {0}, c.conname, "
        "pg_catalog.pg_get_constraintdef(c.oid)) "
        "FROM pg_catalog.pg_constraint c, t WHERE c.conrelid = t.oid AND c.contype IN "
        "('c', 'u', 'x') "
        "UNION ALL SELECT 'default of ' || a.attname, pg_catalog.format("
        "'ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', {0}, a.attname, "
        "pg_catalog.pg_get_expr(e.adbin, e.adrelid)) "
        "FROM pg_catalog.pg_attrdef e JOIN pg_catalog.pg_attribute a ON a.attrelid = "
        "e.adrelid AND a.attnum = e.adnum, t WHERE e.adrelid = t.oid AND a.attgenerated = '' "
        // A serial column's sequence belongs to the old table and goes with it.
        "AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend s JOIN pg_catalog.pg_class q "
        "ON q.oid = s.objid AND q.relkind = 'S' WHERE s.refobjid = t.oid AND "
        "s.refobjsubid = a.attnum AND s.classid = 'pg_catalog.pg_class'::pg_catalog.regclass "
        "AND s.deptype IN ('a', 'i')) "
        // Grants on columns (the table's own go over with the swap's copy_grants).
        "UNION ALL SELECT 'grant on ' || a.attname, pg_catalog.format("
        "'GRANT %s (%I) ON TABLE %s TO %s%s', x.privilege_type, a.attname, {0}, "
        "CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END, "
        "CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END) "
        "FROM pg_catalog.pg_attribute a CROSS JOIN LATERAL pg_catalog.aclexplode(a.attacl) x "
        "LEFT JOIN pg_catalog.pg_roles r ON r.oid = x.grantee, t WHERE a.attrelid = t.oid AND "
        "a.attnum > 0 AND NOT a.attisdropped AND a.attacl IS NOT NULL "
        // Foreign keys from the table: made again NOT VALID, so the rows loaded are not
        // checked (a source row the key refuses would fail every load) but later ones are;
        // VALIDATE CONSTRAINT checks the rest.
        "UNION ALL SELECT 'foreign key ' || c.conname, pg_catalog.format("
        "'ALTER TABLE %s ADD CONSTRAINT %I %s%s', {0}, c.conname, "
        "pg_catalog.pg_get_constraintdef(c.oid), CASE WHEN c.convalidated THEN ' NOT VALID' "
        "ELSE '' END) "
        "FROM pg_catalog.pg_constraint c, t WHERE c.conrelid = t.oid AND c.contype = 'f' "
        "UNION ALL SELECT 'trigger ' || g.tgname, pg_catalog.pg_get_triggerdef(g.oid) "
        "FROM pg_catalog.pg_trigger g, t WHERE g.tgrelid = t.oid AND NOT g.tgisinternal "
        "UNION ALL SELECT 'row level security', pg_catalog.format("
        "'ALTER TABLE %s ENABLE ROW LEVEL SECURITY', {0}) "
        "FROM pg_catalog.pg_class c, t WHERE c.oid = t.oid AND c.relrowsecurity "
        "UNION ALL SELECT 'forced row level security', pg_catalog.format("
        "'ALTER TABLE %s FORCE ROW LEVEL SECURITY', {0}) "
        "FROM pg_catalog.pg_class c, t WHERE c.oid = t.oid AND c.relforcerowsecurity "
        "UNION ALL SELECT 'policy ' || p.polname, pg_catalog.format("
        "'CREATE POLICY %I ON %s AS %s FOR %s TO %s%s%s', p.polname, {0}, "
        "CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END, "
        "CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' "
        "WHEN 'd' THEN 'DELETE' ELSE 'ALL' END, "
        "(SELECT pg_catalog.string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE "
        "pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r)) END, ', ') "
        "FROM pg_catalog.unnest(p.polroles) AS r), "
        "CASE WHEN p.polqual IS NULL THEN '' ELSE ' USING (' || "
        "pg_catalog.pg_get_expr(p.polqual, p.polrelid) || ')' END, "
        "CASE WHEN p.polwithcheck IS NULL THEN '' ELSE ' WITH CHECK (' || "
        "pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) || ')' END) "
        "FROM pg_catalog.pg_policy p, t WHERE p.polrelid = t.oid "
        "UNION ALL SELECT 'comment', pg_catalog.format('COMMENT ON TABLE %s IS %L', {0}, "
        "e.description) FROM pg_catalog.pg_description e, t WHERE e.objoid = t.oid AND "
        "e.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND e.objsubid = 0 "
        "UNION ALL SELECT 'comment on ' || a.attname, pg_catalog.format("
        "'COMMENT ON COLUMN %s.%I IS %L', {0}, a.attname, e.description) "
        "FROM pg_catalog.pg_description e JOIN pg_catalog.pg_attribute a ON a.attrelid = "
        "e.objoid AND a.attnum = e.objsubid, t WHERE e.objoid = t.oid AND "
        "e.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND e.objsubid > 0",
        q));
    std::vector<hand_made_index> out;
    for (const auto& r : rows)
      if (r.size() >= 2 && r[0] && r[1])
        out.push_back({*r[0], *r[1], ""});
    return out;
  }

  /// A plain table of at most in_place_max_bytes is emptied with DELETE and reloaded in
  /// place. DELETE leaves the old rows to vacuum, so a large table still takes the staging
  /// table and its swap (and its key is built once, after the rows). The size is the
  /// catalog's (pg_class.relpages, kept by VACUUM, ANALYZE and CREATE INDEX): reading it
  /// opens nothing, where pg_relation_size() made a plan open every table (+0.2 ms per
  /// table); a table never vacuumed or analyzed (reltuples -1, e.g. a keyless table just
  /// loaded) has no known size and is swapped.
  /// One that a DELETE would act beyond is swapped as before: triggers (its own, or those
  /// of foreign keys to or from it), rules, row-level security. So is one without a
  /// primary key (or REPLICA IDENTITY FULL) while the database has a publication of
  /// deletes: PostgreSQL refuses a DELETE on a published table without a replica identity.
  bool empties_in_place(const table_ref& t) override {
    if (in_place_max_bytes_ == 0)
      return false;
    // Answered by the describe() (a load) or describe_tables() (a plan's read-ahead) that
    // read the table last, once; otherwise asked live.
    if (const auto yes = emptiable_.take(emptiable_key(t)))
      return *yes;
    static const std::string sql = fmt::format(
        "SELECT {} FROM pg_catalog.pg_class c CROSS JOIN {} "
        "WHERE c.oid = pg_catalog.to_regclass($1)",
        emptiable_expression("EXISTS (SELECT 1 FROM pg_catalog.pg_index i "
                             "WHERE i.indrelid = c.oid AND i.indisprimary)",
                             "$2"),
        emptiable_globals);
    // Prepared once per connection, as describe() is.
    static constexpr const char* statement = "flotilla_empties_in_place";
    const std::string name = dialect().qualified(t);
    if (!in_place_prepared_) {
      result_holder p(PQprepare(conn_, statement, sql.c_str(), 2, nullptr));
      if (PQresultStatus(p.r) != PGRES_COMMAND_OK)
        throw error(fmt::format("cannot read the size of {}: {}", name,
                                result_error(p.r, conn_)));
      in_place_prepared_ = true;
    }
    const char* params[2] = {name.c_str(), in_place_limit_.c_str()};
    result_holder h(PQexecPrepared(conn_, statement, 2, params, nullptr, nullptr, 0));
    if (PQresultStatus(h.r) != PGRES_TUPLES_OK)
      throw error(fmt::format("cannot read the size of {}: {}", name,
                              result_error(h.r, conn_)));
    return PQntuples(h.r) == 1 && field(h.r, 0, 0) == "t";
  }

  /// BEGIN and the load's first statements in one round trip (a simple query runs them
  /// in order and stops at the first error).
  void begin_with(const std::vector<std::string>& statements) override {
    std::vector<std::string> all{"BEGIN"};
    all.insert(all.end(), statements.begin(), statements.end());
    run_together(all);
  }

  /// The load's last statements and COMMIT in one round trip.
  void run_and_commit(const std::vector<std::string>& statements) override {
    std::vector<std::string> all = statements;
    all.emplace_back("COMMIT");
    run_together(all);
  }

 private:
  /// Runs `statements` (one statement each) as one simple query, one round trip: the
  /// server answers each in turn and stops at the first error, which names the
  /// statement that failed, not the whole batch.
  void run_together(const std::vector<std::string>& statements) {
    std::string sql;
    for (const auto& st : statements)
      sql += (sql.empty() ? "" : ";\n") + st;
    if (PQsendQuery(conn_, sql.c_str()) != 1)
      throw error(fmt::format("{} (in: {})", result_error(nullptr, conn_), statement_excerpt(sql)));
    const bool cancelled = wait_or_cancel();
    std::size_t answered = 0;
    std::optional<std::string> failure;
    std::size_t failed_at = 0;
    while (PGresult* r = PQgetResult(conn_)) {
      result_holder h(r);
      const auto status = PQresultStatus(r);
      if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
        ++answered;
      } else if (!failure) {
        failure = result_error(r, conn_);
        failed_at = answered;
      }
    }
    if (failure && cancelled)
      throw error("stopped by the user before commit; the target is unchanged");
    if (failure)
      throw error(fmt::format("{} (in: {})", *failure,
                              statement_excerpt(failed_at < statements.size() ? statements[failed_at]
                                                                               : sql)));
  }

  /// Waits for the batch's answer. When the run is asked to stop meanwhile, asks the
  /// server to cancel the statement running: the rest of the batch (its COMMIT) is then
  /// skipped and the transaction rolls back. True when the cancel was sent; a batch that
  /// finished first stands as it is (its results say so).
  bool wait_or_cancel() {
    const std::atomic<bool>* stop = stop_request();
    if (!stop)
      return false;
    bool sent = false;
    const int fd = PQsocket(conn_);
    while (PQisBusy(conn_)) {
      if (!sent && stop->load(std::memory_order_relaxed)) {
        if (PGcancel* c = PQgetCancel(conn_)) {
          char why[256];
          sent = PQcancel(c, why, sizeof why) == 1;
          PQfreeCancel(c);
        }
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) < 0 && errno != EINTR)
        break;  // PQgetResult then blocks as it would have
      if (PQconsumeInput(conn_) != 1)
        break;  // the connection failed: PQgetResult says how
    }
    return sent;
  }

  void locked_ddl(const std::vector<std::string>& statements) {
    begin();
    try {
      run(fmt::format("SELECT pg_advisory_xact_lock({})", ddl_lock_key));
      for (const auto& s : statements)
        run(s);
      commit_transaction();
    } catch (...) {
      rollback();
      throw;
    }
  }

  /// describe_tables()'s answer, built from its rows in the order they come: each table's
  /// columns are put in their order (pg_attribute.attnum) at the end, and a table with a
  /// type Flotilla cannot map reports its first such column, as describe() does.
  class table_reader {
   public:
    table_reader(const postgres_warehouse& wh, const std::string& schema)
        : wh_(wh), schema_(schema), parsed_(wh.dialect()) {}

    /// Row `i` of `r`: relname, attname, format_type, nullable, key, emptiable, attnum,
    /// what holds the name ('' for a table).
    void add(const PGresult* r, int i) {
      const char* name = PQgetvalue(r, i, 0);
      if (last_name_ == name && last_ == nullptr && !last_name_.empty())
        return;  // another row of a name another kind of object holds
      if (last_ == nullptr || last_name_ != name) {  // a table's rows come together
        last_name_ = name;
        if (const char* what = PQgetvalue(r, i, 7); *what != '\0') {
          last_ = nullptr;
          if (!wh_.held_aside({"", schema_, name}, what))
            not_tables_.insert_or_assign(name, wh_.not_a_table({"", schema_, name}, what).what());
          return;
        }
        auto [it, fresh] = tables_.try_emplace(name);
        if (fresh && wh_.in_place_max_bytes_ != 0)
          wh_.emptiable_.put(wh_.emptiable_key({"", schema_, name}),
                             std::string_view(PQgetvalue(r, i, 5)) == "t");
        last_ = &it->second;
      }
      table& t = *last_;
      const int number = std::atoi(PQgetvalue(r, i, 6));
      if (!t.columns && number > t.error_at)
        return;  // after the column the error names
      const std::string_view type_text(PQgetvalue(r, i, 2),
                                       static_cast<std::size_t>(PQgetlength(r, i, 2)));
      const auto& type = parsed_(type_text);
      const char* column = PQgetvalue(r, i, 1);
      if (!type) {
        t.columns = std::unexpected(
            wh_.unmappable({"", schema_, name}, column, type_text, type.error()).what());
        t.error_at = number;
        return;
      }
      if (!t.columns)
        return;  // a good column before the one the error names
      t.columns->emplace_back(
          number, schema::column{column, *type, std::string_view(PQgetvalue(r, i, 3)) == "true",
                                 std::string_view(PQgetvalue(r, i, 4)) == "true"});
    }

    described_tables finish() && {
      described_tables out;
      for (auto& [name, why] : not_tables_)
        out.insert_or_assign(name, std::unexpected(std::move(why)));
      for (auto& [name, t] : tables_) {
        if (!t.columns) {
          out.emplace_hint(out.end(), name, std::unexpected(std::move(t.columns.error())));
          continue;
        }
        std::ranges::sort(*t.columns, {}, &numbered_column::first);
        schema::table_schema columns;
        columns.columns.reserve(t.columns->size());
        for (auto& [number, c] : *t.columns)
          columns.columns.push_back(std::move(c));
        out.emplace_hint(out.end(), name, std::move(columns));
      }
      return out;
    }

   private:
    using numbered_column = std::pair<int, schema::column>;  ///< attnum, column
    struct table {
      std::expected<std::vector<numbered_column>, std::string> columns;
      int error_at = 0;  ///< the attnum of the column the error names
    };

    const postgres_warehouse& wh_;
    const std::string& schema_;
    type_cache parsed_;
    std::map<std::string, table, std::less<>> tables_;
    table* last_ = nullptr;
    std::string last_name_;
    std::map<std::string, std::string, std::less<>> not_tables_;  ///< name -> the error
  };

  /// Whether the object `what` (relation_kind's text) holding `table`'s name is an index
  /// the load moves aside to the next free name (free_table_name): the table is absent.
  [[nodiscard]] bool held_aside(const table_ref& table, std::string_view what) const {
    return what.starts_with('~') && !dialect().free_table_name(table).empty();
  }
  /// The error for `table`'s name held by `what` (relation_kind's text).
  [[nodiscard]] sink_error not_a_table(const table_ref& table, std::string_view what) const {
    if (what.starts_with('~'))
      what.remove_prefix(1);
    return warehouse_base::not_a_table(table, what);
  }

  PGconn* conn_ = nullptr;
  std::uint64_t in_place_max_bytes_;
  std::string in_place_limit_;  ///< in_place_max_bytes_ as the queries' parameter; 0: -1
  bool describe_prepared_ = false;  ///< "flotilla_describe" exists on conn_
  bool in_place_prepared_ = false;  ///< "flotilla_empties_in_place" exists on conn_
  /// This database's answers, by emptiable_key: the dsn and the limit, so a connection
  /// to another database or with another limit never takes them.
  std::string emptiable_prefix_;
  emptiable_answers& emptiable_ = shared_emptiable();

  [[nodiscard]] std::string emptiable_key(const table_ref& t) const {
    return emptiable_prefix_ + t.schema + '\0' + t.name;
  }
};

}  // namespace

std::unique_ptr<warehouse> open_postgres(const warehouse_options& options,
                                         std::unique_ptr<dialects::dialect> d) {
  return std::make_unique<postgres_warehouse>(options, std::move(d));
}

}  // namespace flotilla::sinks::detail
