#include "tests/cli/harness.hpp"

#include <array>
#include <csignal>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <stdexcept>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <duckdb.h>
#include <libpq-fe.h>
#include <sqlite3.h>

namespace flotilla::test {

std::string unique_suffix() {
  static std::atomic<int> counter{0};
  return std::to_string(getpid()) + "_" + std::to_string(counter++);
}

workdir::workdir() {
  path_ = std::filesystem::temp_directory_path() / ("flotilla_test_" + unique_suffix());
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

workdir::~workdir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void workdir::write(const std::string& name, const std::string& text) const {
  std::ofstream(path_ / name) << text;
}

namespace {
std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
std::string quote_arg(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}
}  // namespace

command_result run_flotilla(const workdir& dir, const std::vector<std::string>& args) {
  const char* bin = std::getenv("FLOTILLA_BIN");
  REQUIRE(bin != nullptr);
  std::string cmd = "cd " + quote_arg(dir.path().string()) + " && " + quote_arg(bin);
  for (const auto& a : args)
    cmd += " " + quote_arg(a);
  auto out = dir.path() / ".stdout";
  auto err = dir.path() / ".stderr";
  cmd += " >" + quote_arg(out.string()) + " 2>" + quote_arg(err.string());
  int status = std::system(cmd.c_str());
  command_result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

nlohmann::json flotilla_json(const workdir& dir, std::vector<std::string> args, int* exit_code) {
  args.push_back("--output");
  args.push_back("json");
  auto r = run_flotilla(dir, args);
  if (exit_code)
    *exit_code = r.exit_code;
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE_NOTHROW(nlohmann::json::parse(r.out));
  auto j = nlohmann::json::parse(r.out);
  // A run's JSON is written without a JSON tree (cli/run_output.hpp): it must be exactly
  // what nlohmann's dump(2) prints for the same document.
  if (j.is_object() && j.contains("run_id") && j.contains("tables"))
    CHECK(j.dump(2) + "\n" == r.out);
  return j;
}

std::string flotilla_dynamic_section(const workdir& dir) {
  const char* bin = std::getenv("FLOTILLA_BIN");
  REQUIRE(bin != nullptr);
  const std::string out = dir.file("dynamic.txt");
  const std::string cmd = std::string("readelf -d '") + bin + "' > '" + out + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void sqlite_exec(const std::string& file, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  INFO(sql << "\n" << msg);
  REQUIRE(rc == SQLITE_OK);
}

std::vector<std::vector<std::string>> sqlite_query(const std::string& file, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  INFO(sql << "\n" << sqlite3_errmsg(db));
  REQUIRE(rc == SQLITE_OK);
  std::vector<std::vector<std::string>> rows;
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      auto* t = sqlite3_column_text(st, i);
      row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

namespace {
std::vector<std::vector<std::string>> duck(const std::string& file, const std::string& sql) {
  duckdb_database db;
  duckdb_connection con;
  duckdb_config cfg;
  duckdb_create_config(&cfg);
  char* err = nullptr;
  if (duckdb_open_ext(file.c_str(), &db, cfg, &err) != DuckDBSuccess) {
    std::string m = err ? err : "";
    duckdb_free(err);
    duckdb_destroy_config(&cfg);
    FAIL("cannot open " << file << ": " << m);
  }
  duckdb_destroy_config(&cfg);
  REQUIRE(duckdb_connect(db, &con) == DuckDBSuccess);
  duckdb_result res;
  auto state = duckdb_query(con, sql.c_str(), &res);
  std::string e = state == DuckDBSuccess ? "" : duckdb_result_error(&res);
  std::vector<std::vector<std::string>> rows;
  if (state == DuckDBSuccess) {
    idx_t n = duckdb_row_count(&res), c = duckdb_column_count(&res);
    for (idx_t r = 0; r < n; ++r) {
      std::vector<std::string> row;
      for (idx_t k = 0; k < c; ++k) {
        if (duckdb_value_is_null(&res, k, r)) {
          row.push_back("NULL");
          continue;
        }
        char* v = duckdb_value_varchar(&res, k, r);
        row.push_back(v ? v : "NULL");
        duckdb_free(v);
      }
      rows.push_back(std::move(row));
    }
  }
  duckdb_destroy_result(&res);
  duckdb_disconnect(&con);
  duckdb_close(&db);
  INFO(sql << "\n" << e);
  REQUIRE(e.empty());
  return rows;
}
}  // namespace

std::vector<std::vector<std::string>> duckdb_query(const std::string& file, const std::string& sql) {
  return duck(file, sql);
}
void duckdb_exec(const std::string& file, const std::string& sql) { (void)duck(file, sql); }

duckdb_file_holder::duckdb_file_holder(const std::string& file) {
  duckdb_database db = nullptr;
  REQUIRE(duckdb_open(file.c_str(), &db) == DuckDBSuccess);
  db_ = db;
}
duckdb_file_holder::~duckdb_file_holder() {
  auto db = static_cast<duckdb_database>(db_);
  duckdb_close(&db);
}

std::string pg_dsn() {
  const char* dsn = std::getenv("FLOTILLA_PG_DSN");
  if (dsn == nullptr)
    FAIL("FLOTILLA_PG_DSN is not set: run scripts/test, or scripts/services start && . build/services.env");
  return dsn;
}

std::vector<std::vector<std::string>> pg_query(const std::string& dsn, const std::string& sql) {
  PGconn* c = PQconnectdb(dsn.c_str());
  INFO(PQerrorMessage(c));
  REQUIRE(PQstatus(c) == CONNECTION_OK);
  PQclear(PQexec(c, "SET client_min_messages = warning"));
  PGresult* r = PQexec(c, sql.c_str());
  auto st = PQresultStatus(r);
  std::string e = PQresultErrorMessage(r);
  std::vector<std::vector<std::string>> rows;
  if (st == PGRES_TUPLES_OK)
    for (int i = 0; i < PQntuples(r); ++i) {
      std::vector<std::string> row;
      for (int k = 0; k < PQnfields(r); ++k)
        row.push_back(PQgetisnull(r, i, k) ? "NULL" : PQgetvalue(r, i, k));
      rows.push_back(std::move(row));
    }
  PQclear(r);
  PQfinish(c);
  INFO(sql << "\n" << e);
  REQUIRE((st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK));
  return rows;
}
void pg_exec(const std::string& dsn, const std::string& sql) { (void)pg_query(dsn, sql); }

const nlohmann::json* find_table(const nlohmann::json& run, const std::string& table) {
  for (const auto& t : run["tables"])
    if (t["table"] == table)
      return &t;
  return nullptr;
}

background_flotilla::background_flotilla(const workdir& w, const std::vector<std::string>& args)
    : w_(w) {
  const char* bin = std::getenv("FLOTILLA_BIN");
  REQUIRE(bin != nullptr);
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    if (::chdir(w.path().c_str()) != 0)
      ::_exit(127);
    std::FILE* out = std::freopen(w.file(".bg.stdout").c_str(), "w", stdout);
    std::FILE* err = std::freopen(w.file(".bg.stderr").c_str(), "w", stderr);
    if (!out || !err)
      ::_exit(127);
    std::vector<char*> argv{const_cast<char*>(bin)};
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin, argv.data());
    ::_exit(127);
  }
}

background_flotilla::~background_flotilla() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void background_flotilla::signal(int sig) const { ::kill(pid_, sig); }

int background_flotilla::wait(int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ::usleep(50'000);
  }
  return -1;
}

std::string background_flotilla::read(const std::string& name) const {
  std::ifstream in(w_.file(name));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace flotilla::test
