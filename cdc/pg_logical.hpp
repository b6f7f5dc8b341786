#pragma once
/// PostgreSQL logical replication through libpq: a plain connection for setup and the
/// snapshot copy, a replication connection (`replication=database`) for the slot and the
/// change stream, and a decoder of pgoutput's messages (protocol version 1).
/// https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html
///
/// Ownership and threads: each object belongs to the source stream that opened it and is
/// used by that stream's thread only. Destroying it closes the connection; a replication
/// connection closed mid-stream leaves the slot where the last status update put it.
/// libpq stays inside pg_logical.cpp.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace flotilla::cdc {

/// A WAL position (LSN).
using lsn_t = std::uint64_t;

/// "16/B374D848", PostgreSQL's text form.
[[nodiscard]] std::string format_lsn(lsn_t lsn);
[[nodiscard]] std::optional<lsn_t> parse_lsn(std::string_view text);

struct pg_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Rows of a query, each value in the server's text form (NULL as nullopt).
using text_rows = std::vector<std::vector<std::optional<std::string>>>;

/// A plain (non-replication) connection, set to UTC, ISO dates, exact floats and hex
/// bytea, so values print as schema/rows.hpp represents them.
class pg_connection {
 public:
  /// Throws pg_error naming `who` (the source) when the server cannot be reached.
  pg_connection(const std::string& dsn, std::string who);
  ~pg_connection();
  pg_connection(const pg_connection&) = delete;
  pg_connection& operator=(const pg_connection&) = delete;

  void exec(const std::string& sql);
  [[nodiscard]] text_rows query(const std::string& sql);
  /// Runs `COPY (...) TO STDOUT` and hands each data row (without its newline) to `row`.
  void copy_out(const std::string& sql, const std::function<void(std::string_view)>& row);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// What CREATE_REPLICATION_SLOT returned.
struct created_slot {
  lsn_t consistent_point = 0;  ///< the stream starts right after the exported snapshot
  std::string snapshot;        ///< snapshot name for SET TRANSACTION SNAPSHOT
};

/// One message of the replication stream's CopyBoth data.
struct stream_message {
  enum class kind : std::uint8_t { xlog_data, keepalive };
  kind type = kind::keepalive;
  lsn_t wal_start = 0;  ///< xlog_data: where the data starts; keepalive: server's WAL end
  lsn_t wal_end = 0;
  bool reply_requested = false;  ///< keepalive only
  std::string body;              ///< xlog_data: one pgoutput message
};

class replication_connection {
 public:
  replication_connection(const std::string& dsn, std::string who);
  ~replication_connection();
  replication_connection(const replication_connection&) = delete;
  replication_connection& operator=(const replication_connection&) = delete;

  /// CREATE_REPLICATION_SLOT ... LOGICAL pgoutput EXPORT_SNAPSHOT. The snapshot stays
  /// valid until this connection runs its next command. A temporary slot goes away with
  /// the connection.
  /// Creates the slot; `cancelled` (when set) is asked while the server waits for open
  /// transactions to end, and true gives up with pg_error.
  [[nodiscard]] created_slot create_slot(const std::string& slot, bool temporary = false,
                                         const std::function<bool()>& cancelled = {});
  /// The same, without waiting: sends the command; `created` then answers whether the
  /// server has made the slot, waiting at most `timeout_ms` (0: only looks).
  void begin_create_slot(const std::string& slot, bool temporary);
  [[nodiscard]] std::optional<created_slot> created(int timeout_ms);
  /// On stderr: the slot waits for the transactions open on the server, and where to look.
  void say_slot_waits() const;
  /// START_REPLICATION SLOT ... LOGICAL <from> (proto_version '1', publication_names ...).
  void start(const std::string& slot, lsn_t from, const std::string& publication);
  /// The next message, waiting at most `timeout_ms`; nullopt on timeout. Throws pg_error
  /// when the stream ends or breaks.
  [[nodiscard]] std::optional<stream_message> next(int timeout_ms);
  /// Standby status update: written = flushed = applied = `flushed`.
  void send_status(lsn_t received, lsn_t flushed, bool reply = false);
  /// The last positions reported, sent again: tells the server this client lives while a
  /// long target batch or copy runs (past its wal_sender_timeout it would end the
  /// connection). Callable from another thread than send_status's.
  void resend_status();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// ---- pgoutput messages -------------------------------------------------------------

struct relation_column {
  std::string name;
  std::uint32_t type_oid = 0;
  std::int32_t type_modifier = -1;
  bool key = false;  ///< part of the replica identity
};

struct relation_message {
  std::uint32_t oid = 0;
  std::string schema;
  std::string name;
  char replica_identity = 'd';
  std::vector<relation_column> columns;
};

/// One column value of a tuple: null, an unchanged TOASTed value (not sent), or text.
struct tuple_value {
  enum class kind : std::uint8_t { null, unchanged, text };
  kind type = kind::null;
  std::string text;
};
using tuple = std::vector<tuple_value>;

struct begin_message {
  lsn_t final_lsn = 0;
  std::int64_t commit_time = 0;  ///< microseconds since 2000-01-01
  std::uint32_t xid = 0;
};

struct commit_message {
  lsn_t commit_lsn = 0;
  lsn_t end_lsn = 0;
  std::int64_t commit_time = 0;
};

struct insert_message {
  std::uint32_t relation = 0;
  tuple row;
};

struct update_message {
  std::uint32_t relation = 0;
  std::optional<tuple> old_row;  ///< 'K' (key columns) or 'O' (whole old row) when sent
  bool old_is_key = false;
  tuple row;
};

struct delete_message {
  std::uint32_t relation = 0;
  tuple old_row;
  bool old_is_key = false;
};

struct truncate_message {
  std::vector<std::uint32_t> relations;
  bool cascade = false;
  bool restart_identity = false;
};

/// Origin, Type and logical decoding messages: nothing to apply.
struct ignored_message {
  char tag = 0;
};

using pgoutput_message = std::variant<begin_message, commit_message, relation_message,
                                      insert_message, update_message, delete_message,
                                      truncate_message, ignored_message>;

/// Decodes one pgoutput message (protocol version 1). Throws pg_error on a malformed or
/// unknown message.
[[nodiscard]] pgoutput_message decode_pgoutput(std::string_view body);

/// Microseconds since the Unix epoch of a PostgreSQL timestamp (since 2000-01-01).
[[nodiscard]] std::int64_t unix_micros(std::int64_t pg_micros);

/// 'quoted' identifier / literal for the SQL flotilla sends to a source.
[[nodiscard]] std::string pg_ident(std::string_view name);
[[nodiscard]] std::string pg_literal(std::string_view text);

}  // namespace flotilla::cdc
