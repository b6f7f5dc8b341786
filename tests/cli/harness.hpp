#pragma once
// Helpers for end-to-end tests: run the real flotilla binary on a config in a fresh
// directory, build SQLite sources, and query DuckDB / SQLite / PostgreSQL targets.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::test {

struct command_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// A fresh directory under the temp dir, removed at the end of the test.
class workdir {
 public:
  workdir();
  ~workdir();
  workdir(const workdir&) = delete;
  workdir& operator=(const workdir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
  void write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

/// Sets an environment variable for the flotilla processes started within its scope
/// (they inherit this process's environment); unsets it at the end of the scope.
class scoped_env {
 public:
  scoped_env(const std::string& name, const std::string& value) : name_(name) {
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~scoped_env() { ::unsetenv(name_.c_str()); }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::string name_;
};

/// Runs build/flotilla (FLOTILLA_BIN) with `args` in `dir`.
command_result run_flotilla(const workdir& dir, const std::vector<std::string>& args);
/// Runs it with --output json and parses stdout.
nlohmann::json flotilla_json(const workdir& dir, std::vector<std::string> args,
                             int* exit_code = nullptr);

/// flotilla (FLOTILLA_BIN) started in the background in `dir` (run_flotilla waits for it):
/// stdout and stderr to files in the work directory. Killed at the end of its scope.
class background_flotilla {
 public:
  background_flotilla(const workdir& w, const std::vector<std::string>& args);
  ~background_flotilla();
  background_flotilla(const background_flotilla&) = delete;
  background_flotilla& operator=(const background_flotilla&) = delete;
  void signal(int sig) const;
  /// Its exit code, or -1 when it is still running after `seconds` (then killed).
  int wait(int seconds);
  [[nodiscard]] std::string out() const { return read(".bg.stdout"); }
  [[nodiscard]] std::string err() const { return read(".bg.stderr"); }

 private:
  [[nodiscard]] std::string read(const std::string& name) const;
  const workdir& w_;
  int pid_ = -1;
};

/// `readelf -d` of build/flotilla (FLOTILLA_BIN): its dynamic section, with the shared
/// libraries it needs at start-up (written to a file in `dir` and read back).
std::string flotilla_dynamic_section(const workdir& dir);

/// Runs SQL statements against a SQLite file (created when missing).
void sqlite_exec(const std::string& file, const std::string& sql);
/// Rows of a query as text cells ("NULL" for NULL).
std::vector<std::vector<std::string>> sqlite_query(const std::string& file, const std::string& sql);
std::vector<std::vector<std::string>> duckdb_query(const std::string& file, const std::string& sql);
void duckdb_exec(const std::string& file, const std::string& sql);

/// Keeps a DuckDB file open in this process (and so locked against others) while it lives.
class duckdb_file_holder {
 public:
  explicit duckdb_file_holder(const std::string& file);
  ~duckdb_file_holder();
  duckdb_file_holder(const duckdb_file_holder&) = delete;
  duckdb_file_holder& operator=(const duckdb_file_holder&) = delete;

 private:
  void* db_ = nullptr;  ///< a duckdb_database; duckdb.h stays out of this header
};
std::vector<std::vector<std::string>> pg_query(const std::string& dsn, const std::string& sql);
void pg_exec(const std::string& dsn, const std::string& sql);
/// FLOTILLA_PG_DSN, or a test failure telling how to start the server.
std::string pg_dsn();
/// A schema/database-unique suffix for this process and test.
std::string unique_suffix();

/// The table entry of a run JSON by target table name ("s.orders"); null when absent.
const nlohmann::json* find_table(const nlohmann::json& run, const std::string& table);

}  // namespace flotilla::test
