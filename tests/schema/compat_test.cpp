#include <catch2/catch.hpp>

#include "schema/compat.hpp"

using namespace flotilla::schema;

namespace {
portable_type T(const char* s) { return *parse_type(s); }
}  // namespace

TEST_CASE("a type can be read as another only when every value fits exactly") {
  struct row {
    const char* from;
    const char* to;
    bool readable;
  };
  const row rows[] = {
      {"decimal(12,2)", "decimal(18,2)", true},  {"decimal(18,2)", "decimal(12,2)", false},
      {"decimal(12,2)", "int", false},           {"decimal(12,2)", "decimal(12,3)", false},
      {"decimal(12,2)", "decimal(13,3)", true},  {"int", "bigint", true},
      {"bigint", "int", false},                  {"int", "decimal(10,0)", true},
      {"bigint", "decimal(18,0)", false},        {"bool", "int", true},
      {"int", "double", true},                   {"bigint", "double", false},
      {"float", "double", true},                 {"double", "float", false},
      {"varchar(10)", "varchar(20)", true},      {"varchar(20)", "varchar(10)", false},
      {"date", "timestamp_ntz", true},           {"timestamp_ntz", "timestamp_tz", true},
      {"timestamp_tz", "timestamp_ntz", false},  {"json", "text", true},
      {"text", "int", false},                    {"uuid", "varchar(36)", true},
  };
  for (const auto& r : rows) {
    INFO(r.from << " -> " << r.to);
    CHECK(can_read_as(T(r.from), T(r.to)) == r.readable);
  }
}

TEST_CASE("auto_widen follows bool -> int -> decimal and timestamp_ntz -> timestamp_tz only") {
  CHECK(auto_widen_step(T("bool"), T("int")));
  CHECK(auto_widen_step(T("int"), T("bigint")));
  CHECK(auto_widen_step(T("bigint"), T("decimal(38,0)")));
  CHECK(auto_widen_step(T("decimal(10,2)"), T("decimal(12,2)")));
  CHECK(auto_widen_step(T("timestamp_ntz"), T("timestamp_tz")));
  CHECK_FALSE(auto_widen_step(T("int"), T("double")));
  CHECK_FALSE(auto_widen_step(T("int"), T("text")));
  CHECK_FALSE(auto_widen_step(T("text"), T("json")));
  CHECK_FALSE(auto_widen_step(T("bigint"), T("int")));
}
