#include "cdc/pg_logical.hpp"

#include <libpq-fe.h>
#include <sys/select.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "sources/big_endian.hpp"

namespace flotilla::cdc {
namespace {

// Server settings that make values print in the representation of schema/rows.hpp.
constexpr const char* session_options =
    "-c TimeZone=UTC -c DateStyle=ISO,YMD -c IntervalStyle=postgres -c extra_float_digits=3 "
    "-c bytea_output=hex -c client_encoding=UTF8";

constexpr std::int64_t pg_epoch_offset_us = 946684800LL * 1000000LL;

struct result_guard {
  PGresult* r = nullptr;
  explicit result_guard(PGresult* res) : r(res) {}
  ~result_guard() { PQclear(r); }
  result_guard(const result_guard&) = delete;
  result_guard& operator=(const result_guard&) = delete;
};

std::string trim_message(const char* m) {
  std::string s = m ? m : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

PGconn* connect(const std::string& dsn, const std::string& who, bool replication) {
  const char* keywords[] = {"dbname", "connect_timeout", "application_name", "options",
                            replication ? "replication" : nullptr, nullptr};
  const char* values[] = {dsn.c_str(), "10", "flotilla", session_options,
                          replication ? "database" : nullptr, nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, 1);
  if (conn == nullptr)
    throw pg_error(fmt::format("source '{}': cannot connect: out of memory", who));
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string reason = trim_message(PQerrorMessage(conn));
    PQfinish(conn);
    throw pg_error(fmt::format(
        "source '{}': cannot open a {}connection: {}{}", who, replication ? "replication " : "",
        reason,
        replication ? "; the user needs the REPLICATION attribute and pg_hba.conf must allow "
                      "replication connections"
                    : ""));
  }
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  return conn;
}

// Big-endian readers over a message body.
class reader {
 public:
  explicit reader(std::string_view b) : b_(b) {}
  std::uint8_t u8() {
    need(1);
    return static_cast<std::uint8_t>(b_[pos_++]);
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(uint(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(uint(4)); }
  std::uint64_t u64() { return uint(8); }
  std::string cstr() {
    auto end = b_.find('\0', pos_);
    if (end == std::string_view::npos)
      throw pg_error("pgoutput: unterminated string in message");
    std::string s(b_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  std::string bytes(std::size_t n) {
    need(n);
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  [[nodiscard]] bool done() const { return pos_ >= b_.size(); }

 private:
  void need(std::size_t n) const {
    if (pos_ + n > b_.size())
      throw pg_error("pgoutput: message shorter than its fields");
  }
  std::uint64_t uint(std::size_t n) {
    need(n);
    const std::uint64_t v = sources::big_endian(b_.data() + pos_, n);
    pos_ += n;
    return v;
  }
  std::string_view b_;
  std::size_t pos_ = 0;
};

tuple read_tuple(reader& r) {
  const std::uint16_t n = r.u16();
  tuple t(n);
  for (std::uint16_t i = 0; i < n; ++i) {
    const char k = static_cast<char>(r.u8());
    switch (k) {
      case 'n': t[i].type = tuple_value::kind::null; break;
      case 'u': t[i].type = tuple_value::kind::unchanged; break;
      case 't':
      case 'b': {
        const std::uint32_t len = r.u32();
        t[i].type = tuple_value::kind::text;
        t[i].text = r.bytes(len);
        break;
      }
      default: throw pg_error(fmt::format("pgoutput: unknown tuple value kind '{}'", k));
    }
  }
  return t;
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 7; i >= 0; --i)
    out.push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}

std::uint64_t get_u64(const char* p) { return sources::big_endian(p, 8); }

}  // namespace

std::string format_lsn(lsn_t lsn) {
  return fmt::format("{:X}/{:X}", static_cast<std::uint32_t>(lsn >> 32),
                     static_cast<std::uint32_t>(lsn & 0xffffffffu));
}

std::optional<lsn_t> parse_lsn(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 >= text.size())
    return std::nullopt;
  auto hex = [](std::string_view s) -> std::optional<std::uint64_t> {
    if (s.size() > 8)
      return std::nullopt;
    std::uint64_t v = 0;
    for (char c : s) {
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        return std::nullopt;
      v = (v << 4) | static_cast<std::uint64_t>(d);
    }
    return v;
  };
  auto hi = hex(text.substr(0, slash));
  auto lo = hex(text.substr(slash + 1));
  if (!hi || !lo)
    return std::nullopt;
  return (*hi << 32) | *lo;
}

std::int64_t unix_micros(std::int64_t pg_micros) { return pg_micros + pg_epoch_offset_us; }

std::string pg_ident(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
}

std::string pg_literal(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += '\'';
    out += c;
  }
  return out + "'";
}

// ---- plain connection ------------------------------------------------------------------

struct pg_connection::impl {
  PGconn* conn = nullptr;
  std::string who;
  ~impl() {
    if (conn)
      PQfinish(conn);
  }
  [[noreturn]] void fail(const std::string& sql, const char* reason) const {
    std::string shown = sql.size() > 200 ? sql.substr(0, 200) + "..." : sql;
    throw pg_error(fmt::format("source '{}': {} (while running: {})", who, trim_message(reason),
                               shown));
  }
};

pg_connection::pg_connection(const std::string& dsn, std::string who)
    : impl_(std::make_unique<impl>()) {
  impl_->who = std::move(who);
  impl_->conn = connect(dsn, impl_->who, false);
}

pg_connection::~pg_connection() = default;

void pg_connection::exec(const std::string& sql) {
  result_guard r(PQexec(impl_->conn, sql.c_str()));
  auto st = PQresultStatus(r.r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    impl_->fail(sql, PQerrorMessage(impl_->conn));
}

text_rows pg_connection::query(const std::string& sql) {
  result_guard r(PQexec(impl_->conn, sql.c_str()));
  auto st = PQresultStatus(r.r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    impl_->fail(sql, PQerrorMessage(impl_->conn));
  text_rows out;
  const int rows = PQntuples(r.r), cols = PQnfields(r.r);
  out.reserve(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i) {
    auto& row = out.emplace_back();
    for (int c = 0; c < cols; ++c)
      if (PQgetisnull(r.r, i, c))
        row.emplace_back(std::nullopt);
      else
        row.emplace_back(std::string(PQgetvalue(r.r, i, c), PQgetlength(r.r, i, c)));
  }
  return out;
}

void pg_connection::copy_out(const std::string& sql,
                             const std::function<void(std::string_view)>& row) {
  {
    result_guard r(PQexec(impl_->conn, sql.c_str()));
    if (PQresultStatus(r.r) != PGRES_COPY_OUT)
      impl_->fail(sql, PQerrorMessage(impl_->conn));
  }
  char* buf = nullptr;
  int len = 0;
  while ((len = PQgetCopyData(impl_->conn, &buf, 0)) > 0) {
    std::string_view line(buf, static_cast<std::size_t>(len));
    if (!line.empty() && line.back() == '\n')
      line.remove_suffix(1);
    try {
      row(line);
    } catch (...) {
      PQfreemem(buf);
      throw;
    }
    PQfreemem(buf);
  }
  std::string reason;
  while (PGresult* r = PQgetResult(impl_->conn)) {
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
      reason = PQresultErrorMessage(r);
    PQclear(r);
  }
  if (len == -2 || !reason.empty())
    impl_->fail(sql, reason.empty() ? PQerrorMessage(impl_->conn) : reason.c_str());
}

// ---- replication connection ------------------------------------------------------------

struct replication_connection::impl {
  PGconn* conn = nullptr;
  std::string who;
  std::mutex status_mu;  ///< send_status and resend_status may come from two threads
  lsn_t sent_received = 0, sent_flushed = 0;  ///< the highest positions reported
  std::string creating;  ///< the slot begin_create_slot asked for
  ~impl() {
    if (conn)
      PQfinish(conn);
  }
};

replication_connection::replication_connection(const std::string& dsn, std::string who)
    : impl_(std::make_unique<impl>()) {
  impl_->who = std::move(who);
  impl_->conn = connect(dsn, impl_->who, true);
}

replication_connection::~replication_connection() = default;

void replication_connection::begin_create_slot(const std::string& slot, bool temporary) {
  const std::string sql = fmt::format("CREATE_REPLICATION_SLOT {}{} LOGICAL pgoutput EXPORT_SNAPSHOT",
                                      pg_ident(slot), temporary ? " TEMPORARY" : "");
  if (PQsendQuery(impl_->conn, sql.c_str()) != 1)
    throw pg_error(fmt::format("source '{}': cannot create replication slot '{}': {}",
                               impl_->who, slot, trim_message(PQerrorMessage(impl_->conn))));
  impl_->creating = slot;
}

std::optional<created_slot> replication_connection::created(int timeout_ms) {
  PGconn* c = impl_->conn;
  const std::string& slot = impl_->creating;
  if (PQisBusy(c)) {
    const int fd = PQsocket(c);
    fd_set in;
    FD_ZERO(&in);
    FD_SET(fd, &in);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    const int ready = select(fd + 1, &in, nullptr, nullptr, &tv);
    if (ready < 0 && errno != EINTR)
      throw pg_error(fmt::format("source '{}': waiting for replication slot '{}' failed: {}",
                                 impl_->who, slot, std::strerror(errno)));
    // A broken connection ends the wait: the result below says why.
    if (ready > 0 && PQconsumeInput(c) && PQisBusy(c))
      return std::nullopt;
    if (ready <= 0)
      return std::nullopt;
  }
  result_guard r(PQgetResult(c));
  while (PGresult* rest = PQgetResult(c))
    PQclear(rest);
  if (PQresultStatus(r.r) != PGRES_TUPLES_OK || PQntuples(r.r) != 1)
    throw pg_error(fmt::format(
        "source '{}': cannot create replication slot '{}': {}; check max_replication_slots "
        "and wal_level = logical on the server",
        impl_->who, slot, trim_message(PQerrorMessage(impl_->conn))));
  created_slot out;
  auto lsn = parse_lsn(PQgetvalue(r.r, 0, 1));
  if (!lsn)
    throw pg_error(fmt::format("source '{}': slot '{}' reported an unreadable position '{}'",
                               impl_->who, slot, PQgetvalue(r.r, 0, 1)));
  out.consistent_point = *lsn;
  out.snapshot = PQgetvalue(r.r, 0, 2);
  return out;
}

void replication_connection::say_slot_waits() const {
  fmt::print(stderr,
             "source '{}': creating replication slot '{}' waits for the transactions open on "
             "the server to end (pg_stat_activity lists them: state 'idle in transaction' or "
             "long queries)\n",
             impl_->who, impl_->creating);
}

created_slot replication_connection::create_slot(const std::string& slot, bool temporary,
                                                 const std::function<bool()>& cancelled) {
  // The server makes the slot once every transaction open on it has ended (in any
  // database): that may take long, so wait in slices, say why, and give way to a stop.
  begin_create_slot(slot, temporary);
  const auto started = std::chrono::steady_clock::now();
  bool said = false;
  for (;;) {
    if (auto made = created(250))
      return *made;
    if (cancelled && cancelled())
      throw pg_error(fmt::format("source '{}': stopped while creating replication slot '{}'",
                                 impl_->who, slot));
    if (!said && std::chrono::steady_clock::now() - started > std::chrono::seconds(3)) {
      said = true;
      say_slot_waits();
    }
  }
}

void replication_connection::start(const std::string& slot, lsn_t from,
                                   const std::string& publication) {
  const std::string sql = fmt::format(
      "START_REPLICATION SLOT {} LOGICAL {} (proto_version '1', publication_names {})",
      pg_ident(slot), format_lsn(from), pg_literal(pg_ident(publication)));
  result_guard r(PQexec(impl_->conn, sql.c_str()));
  if (PQresultStatus(r.r) != PGRES_COPY_BOTH)
    throw pg_error(fmt::format("source '{}': cannot start replication from slot '{}': {}",
                               impl_->who, slot, trim_message(PQerrorMessage(impl_->conn))));
}

std::optional<stream_message> replication_connection::next(int timeout_ms) {
  PGconn* c = impl_->conn;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    char* buf = nullptr;
    int len = PQgetCopyData(c, &buf, 1);
    if (len > 0) {
      stream_message m;
      std::string_view data(buf, static_cast<std::size_t>(len));
      try {
        if (data[0] == 'w' && data.size() >= 25) {
          m.type = stream_message::kind::xlog_data;
          m.wal_start = get_u64(data.data() + 1);
          m.wal_end = get_u64(data.data() + 9);
          m.body.assign(data.substr(25));
        } else if (data[0] == 'k' && data.size() >= 18) {
          m.type = stream_message::kind::keepalive;
          m.wal_end = get_u64(data.data() + 1);
          m.reply_requested = data[17] != 0;
        } else {
          PQfreemem(buf);
          continue;  // a message this client does not use
        }
      } catch (...) {
        PQfreemem(buf);
        throw;
      }
      PQfreemem(buf);
      return m;
    }
    if (len == -1 || len == -2) {
      std::string reason = trim_message(PQerrorMessage(c));
      if (PGresult* r = PQgetResult(c)) {
        if (reason.empty())
          reason = trim_message(PQresultErrorMessage(r));
        PQclear(r);
      }
      throw pg_error(fmt::format("source '{}': the replication stream ended: {}", impl_->who,
                                 reason.empty() ? "server closed the stream" : reason));
    }
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return std::nullopt;
    int fd = PQsocket(c);
    fd_set in;
    FD_ZERO(&in);
    FD_SET(fd, &in);
    timeval tv{static_cast<time_t>(left.count() / 1000000),
               static_cast<suseconds_t>(left.count() % 1000000)};
    int ready = select(fd + 1, &in, nullptr, nullptr, &tv);
    if (ready < 0 && errno != EINTR)
      throw pg_error(fmt::format("source '{}': waiting for the replication stream failed: {}",
                                 impl_->who, std::strerror(errno)));
    if (ready > 0 && !PQconsumeInput(c))
      throw pg_error(fmt::format("source '{}': the replication stream broke: {}", impl_->who,
                                 trim_message(PQerrorMessage(c))));
    if (ready <= 0)
      return std::nullopt;
  }
}

void replication_connection::resend_status() {
  lsn_t received = 0, flushed = 0;
  {
    std::lock_guard lock(impl_->status_mu);
    received = impl_->sent_received;
    flushed = impl_->sent_flushed;
  }
  send_status(received, flushed);
}

void replication_connection::send_status(lsn_t received, lsn_t flushed, bool reply) {
  // Never older than what was reported (a keepalive's resend racing a newer report).
  std::lock_guard lock(impl_->status_mu);
  received = impl_->sent_received = std::max(impl_->sent_received, received);
  flushed = impl_->sent_flushed = std::max(impl_->sent_flushed, flushed);
  std::string msg = "r";
  put_u64(msg, received);
  put_u64(msg, flushed);
  put_u64(msg, flushed);
  auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count() -
             pg_epoch_offset_us;
  put_u64(msg, static_cast<std::uint64_t>(now));
  msg.push_back(reply ? 1 : 0);
  if (PQputCopyData(impl_->conn, msg.data(), static_cast<int>(msg.size())) != 1 ||
      PQflush(impl_->conn) != 0)
    throw pg_error(fmt::format("source '{}': cannot send the replication status: {}",
                               impl_->who, trim_message(PQerrorMessage(impl_->conn))));
}

// ---- decoder ---------------------------------------------------------------------------

pgoutput_message decode_pgoutput(std::string_view body) {
  if (body.empty())
    throw pg_error("pgoutput: empty message");
  reader r(body.substr(1));
  switch (body[0]) {
    case 'B': {
      begin_message m;
      m.final_lsn = r.u64();
      m.commit_time = static_cast<std::int64_t>(r.u64());
      m.xid = r.u32();
      return m;
    }
    case 'C': {
      commit_message m;
      (void)r.u8();
      m.commit_lsn = r.u64();
      m.end_lsn = r.u64();
      m.commit_time = static_cast<std::int64_t>(r.u64());
      return m;
    }
    case 'R': {
      relation_message m;
      m.oid = r.u32();
      m.schema = r.cstr();
      m.name = r.cstr();
      m.replica_identity = static_cast<char>(r.u8());
      const std::uint16_t n = r.u16();
      m.columns.reserve(n);
      for (std::uint16_t i = 0; i < n; ++i) {
        relation_column c;
        c.key = (r.u8() & 1) != 0;
        c.name = r.cstr();
        c.type_oid = r.u32();
        c.type_modifier = static_cast<std::int32_t>(r.u32());
        m.columns.push_back(std::move(c));
      }
      return m;
    }
    case 'I': {
      insert_message m;
      m.relation = r.u32();
      if (r.u8() != 'N')
        throw pg_error("pgoutput: insert without a new tuple");
      m.row = read_tuple(r);
      return m;
    }
    case 'U': {
      update_message m;
      m.relation = r.u32();
      char k = static_cast<char>(r.u8());
      if (k == 'K' || k == 'O') {
        m.old_is_key = k == 'K';
        m.old_row = read_tuple(r);
        k = static_cast<char>(r.u8());
      }
      if (k != 'N')
        throw pg_error("pgoutput: update without a new tuple");
      m.row = read_tuple(r);
      return m;
    }
    case 'D': {
      delete_message m;
      m.relation = r.u32();
      const char k = static_cast<char>(r.u8());
      if (k != 'K' && k != 'O')
        throw pg_error("pgoutput: delete without an old tuple");
      m.old_is_key = k == 'K';
      m.old_row = read_tuple(r);
      return m;
    }
    case 'T': {
      truncate_message m;
      const std::uint32_t n = r.u32();
      const std::uint8_t opts = r.u8();
      m.cascade = (opts & 1) != 0;
      m.restart_identity = (opts & 2) != 0;
      for (std::uint32_t i = 0; i < n; ++i)
        m.relations.push_back(r.u32());
      return m;
    }
    case 'O':
    case 'Y':
    case 'M': return ignored_message{body[0]};
    default: throw pg_error(fmt::format("pgoutput: unknown message '{}'", body[0]));
  }
}

}  // namespace flotilla::cdc
