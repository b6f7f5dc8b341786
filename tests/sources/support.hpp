#pragma once
// Helpers for the source adapter tests: scratch directories, statements against real
// SQLite / DuckDB files and a real PostgreSQL server, and reading a whole table.

#include <catch2/catch.hpp>
#include <sqlite3.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <postgresql/libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "schema/rows.hpp"
#include "sources/source.hpp"
#include "third_party/duckdb/duckdb.h"

namespace flotilla::sources::testing {

namespace fs = std::filesystem;
using schema::value;

inline std::string unique_suffix() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  return std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
         std::to_string(rd() % 100000);
}

/// A directory removed with its contents at scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("flotilla_sources_" + unique_suffix());
    fs::create_directories(path);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  [[nodiscard]] std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

inline void sqlite_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string message = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  INFO(sql);
  REQUIRE(message == "");
  REQUIRE(rc == SQLITE_OK);
}

inline void duckdb_exec(const std::string& path, const std::string& sql) {
  duckdb_database db = nullptr;
  duckdb_connection con = nullptr;
  REQUIRE(duckdb_open(path.c_str(), &db) == DuckDBSuccess);
  REQUIRE(duckdb_connect(db, &con) == DuckDBSuccess);
  duckdb_result res;
  const bool ok = duckdb_query(con, sql.c_str(), &res) == DuckDBSuccess;
  const std::string message = ok ? "" : duckdb_result_error(&res);
  duckdb_destroy_result(&res);
  duckdb_disconnect(&con);
  duckdb_close(&db);
  INFO(sql);
  REQUIRE(message == "");
}

/// The DSN of the test server; the test fails, saying how to start it, when unset.
inline std::string pg_dsn() {
  const char* dsn = std::getenv("FLOTILLA_PG_DSN");
  if (dsn == nullptr || *dsn == '\0')
    FAIL("FLOTILLA_PG_DSN is not set: run the tests through scripts/test, or run "
         "`scripts/services start && . build/services.env` first");
  return dsn;
}

/// A schema of its own on the shared test server, dropped at scope exit, so concurrent
/// test runs never meet.
class pg_schema {
 public:
  pg_schema() : dsn_(pg_dsn()), name_("flotilla_src_" + unique_suffix()) {
    conn_ = PQconnectdb(dsn_.c_str());
    REQUIRE(PQstatus(conn_) == CONNECTION_OK);
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    exec("CREATE SCHEMA " + name_);
    exec("SET search_path = " + name_);
  }
  pg_schema(const pg_schema&) = delete;
  pg_schema& operator=(const pg_schema&) = delete;
  ~pg_schema() {
    PGresult* r = PQexec(conn_, ("DROP SCHEMA IF EXISTS " + name_ + " CASCADE").c_str());
    PQclear(r);
    PQfinish(conn_);
  }

  void exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const auto status = PQresultStatus(r);
    const std::string message = PQresultErrorMessage(r);
    PQclear(r);
    INFO(sql);
    REQUIRE(message == "");
    REQUIRE((status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK));
  }

  /// Makes this session's pending statistics visible to other sessions now (PostgreSQL
  /// otherwise flushes them at most once a second).
  void flush_stats() { exec("SELECT pg_stat_force_next_flush()"); }

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const std::string& dsn() const { return dsn_; }

 private:
  std::string dsn_;
  std::string name_;
  PGconn* conn_ = nullptr;
};

/// Every row of a read, with the read's result.
struct table_read {
  std::vector<std::vector<value>> rows;
  read_result result;
  std::size_t batches = 0;
};

/// Reads `columns` (all of the table's when empty) of `table`.
inline table_read read_all(source& src, const source_table& table,
                           const std::vector<std::string>& columns = {},
                           const std::string& cursor = {},
                           std::optional<std::string> after = std::nullopt,
                           std::size_t batch_rows = 8192) {
  read_request req;
  req.table = &table;
  if (columns.empty()) {
    req.columns = table.columns;
  } else {
    for (const auto& name : columns) {
      const auto* c = table.columns.find(name, schema::name_rule::case_sensitive);
      INFO("column " << name);
      REQUIRE(c != nullptr);
      req.columns.columns.push_back(*c);
    }
  }
  req.cursor_column = cursor;
  req.after = std::move(after);
  req.batch_rows = batch_rows;
  table_read out;
  out.result = src.read(req, [&](schema::row_batch&& b) {
    ++out.batches;
    for (std::size_t r = 0; r < b.rows(); ++r) {
      std::vector<value> row;
      for (std::size_t c = 0; c < b.width; ++c)
        row.push_back(b.at(r, c));
      out.rows.push_back(std::move(row));
    }
    return true;
  });
  return out;
}

inline const source_table& find_table(const catalog& cat, std::string_view name) {
  const source_table* t = cat.find(name);
  INFO("table " << name);
  REQUIRE(t != nullptr);
  return *t;
}

inline const schema::column& find_column(const source_table& t, std::string_view name) {
  const auto* c = t.columns.find(name, schema::name_rule::case_sensitive);
  INFO("column " << name << " of " << t.qualified());
  REQUIRE(c != nullptr);
  return *c;
}

inline value text(std::string s) { return value::of_text(std::move(s)); }
inline value integer(std::int64_t i) { return value::of_int(i); }
inline value real(double d) { return value::of_real(d); }
inline value boolean(bool b) { return value::of_bool(b); }
inline value null() { return value::null(); }

/// Sets a file's modification time `seconds_ago` into the past, so a test can make a
/// marker-relevant write look like it happened at a different moment.
inline void set_mtime(const std::string& path, int seconds_ago) {
  const auto now = std::chrono::system_clock::now() - std::chrono::seconds(seconds_ago);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  struct timespec times[2];
  times[0].tv_sec = ns / 1'000'000'000;
  times[0].tv_nsec = ns % 1'000'000'000;
  times[1] = times[0];
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

}  // namespace flotilla::sources::testing

namespace Catch {
template <>
struct StringMaker<flotilla::schema::value> {
  static std::string convert(const flotilla::schema::value& v) {
    using tag = flotilla::schema::value::tag;
    switch (v.kind) {
      case tag::null: return "NULL";
      case tag::boolean: return v.b ? "bool(true)" : "bool(false)";
      case tag::integer: return "int(" + std::to_string(v.i) + ")";
      case tag::real: return "real(" + StringMaker<double>::convert(v.d) + ")";
      case tag::text: return "text(\"" + v.s + "\")";
    }
    return "?";
  }
};
}  // namespace Catch
