#include "tests/stream/support.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <duckdb.h>
#include <libpq-fe.h>

namespace flotilla::stream_test {
namespace {

std::string base_dsn() {
  const char* dsn = std::getenv("FLOTILLA_PG_DSN");
  if (dsn == nullptr)
    FAIL("FLOTILLA_PG_DSN is not set: run scripts/services start && . build/services.env");
  return dsn;
}

std::string read_file(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string unique() {
  static std::atomic<int> n{0};
  return std::to_string(getpid()) + "_" + std::to_string(n++);
}

}  // namespace

std::string dsn_for(const std::string& db) {
  std::string dsn = base_dsn();
  auto slash = dsn.rfind('/');
  auto q = dsn.find('?', slash);
  return dsn.substr(0, slash + 1) + db + (q == std::string::npos ? "" : dsn.substr(q));
}

std::string pg_try(const std::string& dsn, const std::string& sql) {
  PGconn* c = PQconnectdb(dsn.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::string e = PQerrorMessage(c);
    PQfinish(c);
    return e;
  }
  PQclear(PQexec(c, "SET client_min_messages = warning"));
  PGresult* r = PQexec(c, sql.c_str());
  auto st = PQresultStatus(r);
  std::string e = (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) ? "" : PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
  return e;
}

std::optional<rows> pg_try_rows(const std::string& dsn, const std::string& sql) {
  PGconn* c = PQconnectdb(dsn.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    PQfinish(c);
    return std::nullopt;
  }
  PGresult* r = PQexec(c, sql.c_str());
  std::optional<rows> out;
  if (PQresultStatus(r) == PGRES_TUPLES_OK) {
    out.emplace();
    for (int i = 0; i < PQntuples(r); ++i) {
      std::vector<std::string> row;
      for (int k = 0; k < PQnfields(r); ++k)
        row.push_back(PQgetisnull(r, i, k) ? "NULL" : PQgetvalue(r, i, k));
      out->push_back(std::move(row));
    }
  }
  PQclear(r);
  PQfinish(c);
  return out;
}

rows pg_query(const std::string& dsn, const std::string& sql) {
  PGconn* c = PQconnectdb(dsn.c_str());
  INFO(PQerrorMessage(c));
  REQUIRE(PQstatus(c) == CONNECTION_OK);
  PQclear(PQexec(c, "SET client_min_messages = warning"));
  PGresult* r = PQexec(c, sql.c_str());
  auto st = PQresultStatus(r);
  std::string e = PQresultErrorMessage(r);
  rows out;
  if (st == PGRES_TUPLES_OK)
    for (int i = 0; i < PQntuples(r); ++i) {
      std::vector<std::string> row;
      for (int k = 0; k < PQnfields(r); ++k)
        row.push_back(PQgetisnull(r, i, k) ? "NULL" : PQgetvalue(r, i, k));
      out.push_back(std::move(row));
    }
  PQclear(r);
  PQfinish(c);
  INFO(sql << "\n" << e);
  REQUIRE((st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK));
  return out;
}

void pg_exec(const std::string& dsn, const std::string& sql) { (void)pg_query(dsn, sql); }

rows duckdb_query(const std::string& file, const std::string& sql) {
  duckdb_database db;
  duckdb_connection con;
  REQUIRE(duckdb_open(file.c_str(), &db) == DuckDBSuccess);
  REQUIRE(duckdb_connect(db, &con) == DuckDBSuccess);
  duckdb_result res;
  auto state = duckdb_query(con, sql.c_str(), &res);
  std::string e = state == DuckDBSuccess ? "" : duckdb_result_error(&res);
  rows out;
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
      out.push_back(std::move(row));
    }
  }
  duckdb_destroy_result(&res);
  duckdb_disconnect(&con);
  duckdb_close(&db);
  INFO(sql << "\n" << e);
  REQUIRE(e.empty());
  return out;
}

fixture::fixture(bool duckdb_target, const std::string& extra_toml,
                 const std::string& source_target) {
  const std::string u = unique();
  project_ = "st" + u;
  std::replace(project_.begin(), project_.end(), '_', 'x');  // a slot name with no hash
  source_db_ = "flt_stream_src_" + u;
  target_db_ = "flt_stream_tgt_" + u;
  dir_ = (std::filesystem::temp_directory_path() / ("flotilla_stream_" + u)).string();
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  const std::string admin = base_dsn();
  pg_exec(admin, "DROP DATABASE IF EXISTS " + source_db_ + " WITH (FORCE)");
  pg_exec(admin, "DROP DATABASE IF EXISTS " + target_db_ + " WITH (FORCE)");
  pg_exec(admin, "CREATE DATABASE " + source_db_);
  source_dsn_ = dsn_for(source_db_);
  std::string target;
  if (duckdb_target) {
    target = "dialect = \"duckdb\"\npath = \"wh.duckdb\"\n";
  } else {
    pg_exec(admin, "CREATE DATABASE " + target_db_);
    target_dsn_ = dsn_for(target_db_);
    target = "dialect = \"postgres\"\ndsn = \"" + target_dsn_ + "\"\n";
  }
  std::ofstream(dir_ + "/flotilla.toml")
      << "[project]\nname = \"" << project_ << "\"\n\n[targets.wh]\n"
      << target << "schema = \"st_{source}\"\n\n[sources.shop]\nadapter = \"postgres\"\ndsn = \""
      << source_dsn_ << "\"\ncapture = \"logical\"\ntarget = \""
      << source_target << "\"\n"
      << extra_toml;
}

fixture::~fixture() {
  const std::string admin = base_dsn();
  // A killed stream's walsender lets go of the slot a moment later: retry for a while.
  for (int i = 0; i < 50; ++i) {
    auto left = pg_try_rows(admin, "SELECT active FROM pg_replication_slots WHERE slot_name "
                                   "LIKE '" + slot() + "%'");
    if (left && left->empty())
      break;
    (void)pg_try(admin, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                        "WHERE slot_name LIKE '" + slot() + "%' AND NOT active");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  (void)pg_try(admin, "DROP DATABASE IF EXISTS " + source_db_ + " WITH (FORCE)");
  (void)pg_try(admin, "DROP DATABASE IF EXISTS " + target_db_ + " WITH (FORCE)");
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

stream_process::stream_process(const fixture& f, std::vector<std::string> args) : dir_(f.dir()) {
  const char* bin = std::getenv("FLOTILLA_BIN");
  REQUIRE(bin != nullptr);
  pid_ = fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    if (chdir(dir_.c_str()) != 0)
      _exit(127);
    int out = open((dir_ + "/.stream.out").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = open((dir_ + "/.stream.err").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<std::string> all{bin, "stream"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin, argv.data());
    _exit(127);
  }
}

stream_process::~stream_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int stream_process::wait(std::chrono::seconds timeout) {
  if (pid_ <= 0)
    return status_;
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

int stream_process::stop() {
  if (pid_ > 0)
    ::kill(pid_, SIGTERM);
  int rc = wait(std::chrono::seconds(30));
  if (rc == -1) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  return rc;
}

void stream_process::kill9() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    status_ = 128 + SIGKILL;
  }
}

std::string stream_process::out() const { return read_file(dir_ + "/.stream.out"); }
std::string stream_process::err() const { return read_file(dir_ + "/.stream.err"); }

bool eventually(const std::function<bool()>& done, std::chrono::seconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done())
      return true;
    if (std::chrono::steady_clock::now() >= end)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

flotilla::storage::pb::HoldState hold_state_in(const fixture& f, const std::string& target,
                                               const std::string& table) {
  auto store = flotilla::storage::state_store::open(f.dir() + "/.flotilla/state",
                                                    {.read_only = true});
  if (!store)
    return flotilla::storage::pb::HOLD_STATE_UNSPECIFIED;
  auto h = store->get_hold(target, table);
  return h && *h ? (*h)->state() : flotilla::storage::pb::HOLD_STATE_UNSPECIFIED;
}

bool confirmed(const fixture& f, std::chrono::seconds timeout) {
  auto lsn = pg_query(f.source(), "SELECT pg_current_wal_insert_lsn()::text")[0][0];
  return eventually([&] {
    auto r = pg_try_rows(f.source(), "SELECT confirmed_flush_lsn >= '" + lsn +
                                         "'::pg_lsn FROM pg_replication_slots WHERE slot_name = '" +
                                         f.slot() + "'");
    return r && !r->empty() && (*r)[0][0] == "t";
  }, timeout);
}

bool slot_consistent(const fixture& f, std::chrono::seconds timeout) {
  return eventually([&] {
    auto r = pg_try_rows(f.source(), "SELECT 1 FROM pg_replication_slots WHERE slot_name = '" +
                                         f.slot() + "' AND confirmed_flush_lsn IS NOT NULL");
    return r && !r->empty();
  }, timeout);
}

bool set_up(const fixture& f, std::chrono::seconds timeout) {
  return eventually([&] {
    auto store = flotilla::storage::state_store::open(f.dir() + "/.flotilla/state",
                                                      {.read_only = true});
    if (!store)
      return false;
    auto at = store->get<flotilla::storage::pb::CdcPosition>("shop");
    return at && *at;
  }, timeout);
}

}  // namespace flotilla::stream_test
