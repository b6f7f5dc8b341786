#include "bench/pg.hpp"

#include <algorithm>
#include <map>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include <signal.h>
#include <sys/types.h>

#include <fmt/format.h>
#include <libpq-fe.h>

namespace flotilla::bench {

std::optional<std::string> pg_dsn_from_env() {
  const char* v = std::getenv("FLOTILLA_PG_DSN");
  if (v == nullptr || *v == '\0')
    return std::nullopt;
  return std::string(v);
}

namespace {

/// The options a DSN sets itself (libpq's defaults and environment left out), in libpq's
/// order; throws naming FLOTILLA_PG_DSN when libpq cannot parse it.
std::vector<std::pair<std::string, std::string>> dsn_options(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (opts == nullptr) {
    std::string msg = err ? err : "out of memory";
    PQfreemem(err);
    while (!msg.empty() && msg.back() == '\n')
      msg.pop_back();
    throw std::runtime_error("FLOTILLA_PG_DSN: libpq cannot parse it (" + msg +
                             "); set it to a URI (postgresql://user@127.0.0.1:5432/db) or "
                             "keyword/value pairs (host=127.0.0.1 port=5432 dbname=db)");
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto* o = opts; o->keyword != nullptr; ++o)
    if (o->val != nullptr)
      out.emplace_back(o->keyword, o->val);
  PQconninfoFree(opts);
  return out;
}

/// A keyword/value value: as is when plain, else single-quoted with ' and \ escaped.
std::string conninfo_value(const std::string& v) {
  const bool plain = !v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("_.,:/@+-").find(static_cast<char>(c)) !=
                                  std::string_view::npos;
  });
  if (plain)
    return v;
  std::string out = "'";
  for (const char c : v) {
    if (c == '\'' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

std::string without_password(const std::string& dsn) {
  std::string out;
  for (const auto& [key, value] : dsn_options(dsn))
    if (key != "password")
      out += (out.empty() ? "" : " ") + key + "=" + conninfo_value(value);
  return out;
}

std::map<std::string, std::string> password_env(const std::string& dsn) {
  for (const auto& [key, value] : dsn_options(dsn))
    if (key == "password")
      return {{"PGPASSWORD", value}};
  return {};
}

std::string dsn_with_database(const std::string& dsn, const std::string& database) {
  // Rewriting the text would miss a form (a URI's `?dbname=` wins over its path): every
  // option libpq read is written out again, and the database once, as this one.
  std::string out;
  for (const auto& [key, value] : dsn_options(dsn))
    if (key != "dbname")
      out += key + "=" + conninfo_value(value) + " ";
  return out + "dbname=" + conninfo_value(database);
}

void require_local(const std::string& dsn) {
  std::string host, hostaddr;
  for (const auto& [key, value] : dsn_options(dsn)) {
    if (key == "host")
      host = value;
    if (key == "hostaddr")
      hostaddr = value;
  }
  auto local = [](const std::string& h) {
    return h.empty() || h.front() == '/' || h == "localhost" || h == "::1" || h.starts_with("127.");
  };
  if (!local(host) || !local(hostaddr))
    throw std::runtime_error(
        "the benchmark creates and drops databases, so it only connects to a PostgreSQL server "
        "on this machine; FLOTILLA_PG_DSN names host '" + (hostaddr.empty() ? host : hostaddr) + "'");
}

pg_connection::pg_connection(const std::string& dsn) {
  require_local(dsn);
  // A server that takes the connection and never answers would hold the harness for
  // ever, saying nothing: without a timeout of the user's own (in the DSN or
  // PGCONNECT_TIMEOUT), the harness waits 10 s.
  bool timeout_set = std::getenv("PGCONNECT_TIMEOUT") != nullptr;
  for (const auto& [key, value] : dsn_options(dsn))
    timeout_set = timeout_set || key == "connect_timeout";
  const char* keys[] = {"dbname", "connect_timeout", nullptr};
  const char* values[] = {dsn.c_str(), "10", nullptr};
  if (timeout_set)
    keys[1] = nullptr;
  conn_ = PQconnectdbParams(keys, values, 1);
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn_);
    PQfinish(conn_);
    conn_ = nullptr;
    throw std::runtime_error("cannot connect to PostgreSQL: " + msg);
  }
  exec("SET client_min_messages = error");  // no VACUUM warnings about catalogs not its own
}

pg_connection::~pg_connection() {
  if (conn_)
    PQfinish(conn_);
}

void pg_connection::exec(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  const auto st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    std::string msg = PQresultErrorMessage(r);
    PQclear(r);
    throw std::runtime_error(fmt::format("PostgreSQL: {} (in: {:.200})", msg, sql));
  }
  PQclear(r);
}

std::vector<std::vector<std::optional<std::string>>> pg_connection::query(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    std::string msg = PQresultErrorMessage(r);
    PQclear(r);
    throw std::runtime_error(fmt::format("PostgreSQL: {} (in: {:.200})", msg, sql));
  }
  std::vector<std::vector<std::optional<std::string>>> rows(static_cast<std::size_t>(PQntuples(r)));
  const int cols = PQnfields(r);
  for (int i = 0; i < PQntuples(r); ++i)
    for (int c = 0; c < cols; ++c)
      rows[static_cast<std::size_t>(i)].push_back(
          PQgetisnull(r, i, c) ? std::nullopt : std::optional<std::string>(PQgetvalue(r, i, c)));
  PQclear(r);
  return rows;
}

void pg_connection::copy_in(const std::string& copy_sql, const std::vector<std::string>& chunks) {
  PGresult* r = PQexec(conn_, copy_sql.c_str());
  if (PQresultStatus(r) != PGRES_COPY_IN) {
    std::string msg = PQresultErrorMessage(r);
    PQclear(r);
    throw std::runtime_error("PostgreSQL COPY: " + msg);
  }
  PQclear(r);
  for (const auto& c : chunks)
    if (PQputCopyData(conn_, c.data(), static_cast<int>(c.size())) != 1)
      throw std::runtime_error(std::string("PostgreSQL COPY: ") + PQerrorMessage(conn_));
  if (PQputCopyEnd(conn_, nullptr) != 1)
    throw std::runtime_error(std::string("PostgreSQL COPY: ") + PQerrorMessage(conn_));
  std::string error;
  while ((r = PQgetResult(conn_)) != nullptr) {
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
      error = PQresultErrorMessage(r);
    PQclear(r);
  }
  if (!error.empty())
    throw std::runtime_error("PostgreSQL COPY: " + error);
}

std::vector<std::string> drop_abandoned_databases(const std::string& admin_dsn,
                                                  const std::string& bench_prefix) {
  require_local(admin_dsn);
  pg_connection admin(admin_dsn);
  std::vector<std::string> dropped;
  // Only databases the harness made, marked by their comment: one a user named alike
  // (and never one of a running bench) is left alone; and only this role's (every one,
  // for a superuser).
  const auto rows = admin.query(
      "SELECT datname FROM pg_database WHERE datname LIKE '" + bench_prefix +
      "\\_%' AND shobj_description(oid, 'pg_database') = '" + database_marker +
      "' AND (pg_catalog.pg_has_role(datdba, 'MEMBER') OR (SELECT rolsuper FROM "
      "pg_catalog.pg_roles WHERE rolname = current_user))");
  for (const auto& row : rows) {
    if (row.empty() || !row[0])
      continue;
    const std::string& name = *row[0];
    // <prefix>_<pid>_<suffix>
    const auto rest = std::string_view(name).substr(bench_prefix.size() + 1);
    ::pid_t pid = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec != std::errc{} || pid <= 0 || end == rest.data() + rest.size() || *end != '_')
      continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH)
      continue;
    // Those of another role's bench are left out above (theirs to drop); a drop that fails
    // anyway does not refuse this run.
    try {
      admin.exec("DROP DATABASE IF EXISTS \"" + name + "\" WITH (FORCE)");
    } catch (const std::exception&) {
      continue;
    }
    dropped.push_back(name);
  }
  return dropped;
}

std::optional<std::string> role_without_createdb(const std::string& admin_dsn) {
  pg_connection admin(admin_dsn);
  const auto rows = admin.query(
      "SELECT current_user, rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user");
  if (rows.empty() || rows[0].size() < 2 || !rows[0][0] || rows[0][1] == "t")
    return std::nullopt;
  return *rows[0][0];
}

pg_databases::pg_databases(std::string admin_dsn, std::string prefix)
    : admin_dsn_(std::move(admin_dsn)), prefix_(std::move(prefix)) {
  require_local(admin_dsn_);
}

pg_databases::~pg_databases() {
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    try {
      drop(*it);
    } catch (const std::exception&) {
      // nop: a database left behind is named after the bench run and harmless
    }
  }
}

std::string pg_databases::dsn(const std::string& suffix) const {
  return dsn_with_database(admin_dsn_, prefix_ + "_" + suffix);
}

std::string pg_databases::create(const std::string& suffix) {
  pg_connection admin(admin_dsn_);
  const std::string name = prefix_ + "_" + suffix;
  // A database of this name is one a killed run of the same pid left (marked), or a
  // user's (not marked): only the first is replaced.
  const auto found = admin.query(
      "SELECT coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database "
      "WHERE datname = '" + name + "'");
  if (!found.empty() && (found[0].empty() || !found[0][0] || *found[0][0] != database_marker))
    throw std::runtime_error(fmt::format(
        "database {} exists and was not made by flotilla-bench (its comment is not '{}'): "
        "left alone; rename or drop it, then run again", name, database_marker));
  admin.exec("DROP DATABASE IF EXISTS \"" + name + "\" WITH (FORCE)");
  admin.exec("CREATE DATABASE \"" + name + "\" TEMPLATE template0");
  admin.exec("COMMENT ON DATABASE \"" + name + "\" IS '" + database_marker + "'");
  if (std::find(created_.begin(), created_.end(), suffix) == created_.end())
    created_.push_back(suffix);
  return dsn(suffix);
}

void pg_databases::drop(const std::string& suffix) {
  pg_connection admin(admin_dsn_);
  admin.exec("DROP DATABASE IF EXISTS \"" + prefix_ + "_" + suffix + "\" WITH (FORCE)");
}

}  // namespace flotilla::bench
