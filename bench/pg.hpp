#pragma once
/// Small libpq helpers for the harness: connections, statements, the bench's own
/// databases. Every DSN is checked to point at this machine (loopback or a local
/// socket) before anything connects: the harness creates and drops databases.

#include <memory>
#include <optional>
#include <map>
#include <string>
#include <vector>

struct pg_conn;
typedef struct pg_conn PGconn;

namespace flotilla::bench {

/// FLOTILLA_PG_DSN, or nullopt when it is not set.
[[nodiscard]] std::optional<std::string> pg_dsn_from_env();

/// The same server and settings with another database, as a keyword/value string
/// (`host=127.0.0.1 port=54329 dbname=...`, values quoted where libpq needs it). The DSN
/// is read with libpq's own parser, so every form it accepts names the database in one
/// place: a URI's path, a URI's `?dbname=` parameter, or a `dbname=` keyword. Throws
/// std::runtime_error, naming FLOTILLA_PG_DSN, when libpq cannot parse `dsn`.
[[nodiscard]] std::string dsn_with_database(const std::string& dsn, const std::string& database);
/// The DSN without its password, for a program's command line (which `ps` shows any
/// user), and the password as PGPASSWORD for that program's environment (empty: none).
[[nodiscard]] std::string without_password(const std::string& dsn);
[[nodiscard]] std::map<std::string, std::string> password_env(const std::string& dsn);

/// Throws std::runtime_error unless the DSN's host is loopback or a local socket.
void require_local(const std::string& dsn);

/// The role FLOTILLA_PG_DSN logs in as when it may not create databases (neither CREATEDB
/// nor a superuser), else nullopt: the harness makes a database of its own for every
/// scenario, so such a role would fail each of them. Throws when it cannot connect.
[[nodiscard]] std::optional<std::string> role_without_createdb(const std::string& admin_dsn);

/// One connection; throws std::runtime_error on any failure, with the server's message.
class pg_connection {
 public:
  explicit pg_connection(const std::string& dsn);
  ~pg_connection();
  pg_connection(const pg_connection&) = delete;
  pg_connection& operator=(const pg_connection&) = delete;

  /// Runs one or more statements (simple query protocol).
  void exec(const std::string& sql);
  /// Runs a query and returns its rows as text (NULL as nullopt).
  [[nodiscard]] std::vector<std::vector<std::optional<std::string>>> query(const std::string& sql);
  /// COPY ... FROM STDIN with the given text chunks.
  void copy_in(const std::string& copy_sql, const std::vector<std::string>& chunks);
  [[nodiscard]] PGconn* raw() { return conn_; }

 private:
  PGconn* conn_ = nullptr;
};

/// The comment every database the harness creates carries: only databases with it are
/// ever dropped by a later run.
inline constexpr const char* database_marker = "flotilla-bench scratch database";

/// Drops the databases `<bench_prefix>_<pid>_*` of bench runs whose process is gone (a
/// run interrupted or killed before it dropped its own); returns their names. A database
/// of a process still running, or without the harness's comment, is left alone.
std::vector<std::string> drop_abandoned_databases(const std::string& admin_dsn,
                                                  const std::string& bench_prefix);

/// Creates (dropping first) and later drops the bench's own databases on one server.
/// Owned by one scenario on the main thread; the destructor drops what it created.
class pg_databases {
 public:
  /// `admin_dsn`: a database to connect to for CREATE/DROP DATABASE (the env DSN).
  pg_databases(std::string admin_dsn, std::string prefix);
  ~pg_databases();
  pg_databases(const pg_databases&) = delete;
  pg_databases& operator=(const pg_databases&) = delete;

  /// (Re)creates database `<prefix>_<suffix>` and returns its DSN.
  std::string create(const std::string& suffix);
  /// The DSN of `<prefix>_<suffix>`, without creating it.
  [[nodiscard]] std::string dsn(const std::string& suffix) const;
  void drop(const std::string& suffix);

 private:
  std::string admin_dsn_;
  std::string prefix_;
  std::vector<std::string> created_;
};

}  // namespace flotilla::bench
