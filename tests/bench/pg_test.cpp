// The DSNs of the harness's own databases: the database FLOTILLA_PG_DSN names, in any
// form libpq accepts, is replaced, and every other setting kept.
#include <catch2/catch.hpp>

#include <map>
#include <stdexcept>
#include <string>

#include <libpq-fe.h>

#include "bench/pg.hpp"

using namespace flotilla::bench;

namespace {

/// The options libpq reads from `dsn` (only those it sets).
std::map<std::string, std::string> parsed(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (opts == nullptr) {
    std::string msg = err ? err : "?";
    PQfreemem(err);
    throw std::runtime_error("libpq cannot parse '" + dsn + "': " + msg);
  }
  std::map<std::string, std::string> out;
  for (auto* o = opts; o->keyword != nullptr; ++o)
    if (o->val != nullptr)
      out[o->keyword] = o->val;
  PQconninfoFree(opts);
  return out;
}

}  // namespace

TEST_CASE("the scratch database replaces the one a DSN names, in every form libpq reads") {
  const std::map<std::string, std::string> server{
      {"host", "127.0.0.1"}, {"port", "54329"}, {"user", "postgres"}};
  for (const std::string dsn : {
           "postgresql://postgres@127.0.0.1:54329/userdb",
           "postgresql://postgres@127.0.0.1:54329?dbname=userdb",
           "postgresql://postgres@127.0.0.1:54329/other?dbname=userdb",
           "postgres://postgres@127.0.0.1:54329/?dbname=userdb",
           "postgresql://postgres@127.0.0.1:54329",
           "host=127.0.0.1 port=54329 user=postgres dbname=userdb",
           "dbname=userdb host=127.0.0.1 port=54329 user=postgres",
           "host=127.0.0.1 port=54329 user=postgres",
       }) {
    INFO(dsn);
    auto got = parsed(dsn_with_database(dsn, "flotilla_bench_1_copy"));
    CHECK(got["dbname"] == "flotilla_bench_1_copy");
    got.erase("dbname");
    CHECK(got == server);
  }
}

TEST_CASE("a setting with spaces, quotes or backslashes keeps its value in the scratch DSN") {
  const auto got = parsed(dsn_with_database(
      "postgresql://po%27s%20t:pa%5Css%27@127.0.0.1:54329/db?application_name=a%20b&options=-c%20x%3Dy",
      "it's a db"));
  CHECK(got.at("user") == "po's t");
  CHECK(got.at("password") == "pa\\ss'");
  CHECK(got.at("application_name") == "a b");
  CHECK(got.at("options") == "-c x=y");
  CHECK(got.at("dbname") == "it's a db");
  CHECK(parsed(dsn_with_database("host=/run/postgresql dbname=''", "d")).at("host") ==
        "/run/postgresql");
}

TEST_CASE("a DSN libpq cannot parse is refused naming FLOTILLA_PG_DSN") {
  CHECK_THROWS_WITH(dsn_with_database("host=127.0.0.1 dbname='unclosed", "d"),
                    Catch::Contains("FLOTILLA_PG_DSN") && Catch::Contains("cannot parse"));
  CHECK_THROWS_WITH(dsn_with_database("postgresql://h/db?nosuchoption=1", "d"),
                    Catch::Contains("FLOTILLA_PG_DSN"));
  CHECK_THROWS_WITH(require_local("nosuchkey=1"), Catch::Contains("FLOTILLA_PG_DSN"));
}

TEST_CASE("only a server on this machine is accepted, whatever form names its host") {
  CHECK_NOTHROW(require_local("postgresql://postgres@127.0.0.1:54329?dbname=x"));
  CHECK_NOTHROW(require_local("host=/run/postgresql dbname=x"));
  CHECK_THROWS_WITH(require_local("postgresql://postgres@db.example.com/x"),
                    Catch::Contains("db.example.com"));
  CHECK_THROWS_WITH(require_local("postgresql:///x?host=db.example.com"),
                    Catch::Contains("db.example.com"));
}
