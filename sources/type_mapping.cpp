#include "sources/type_mapping.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <vector>

namespace flotilla::sources {
namespace {

using schema::portable_type;
using schema::type_kind;

// Upper-cased, with runs of white space collapsed to one space and none around
// parentheses and commas: "decimal( 12 , 2 )" -> "DECIMAL(12,2)".
std::string canonical(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty() && out.back() != '(' && out.back() != ',' && c != '(' &&
        c != ')' && c != ',')
      out.push_back(' ');
    space = false;
    out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return out;
}

struct split_type {
  std::string base;               // "DECIMAL"
  std::vector<int> args;          // {12, 2}
  bool has_args = false;
  bool args_ok = true;            // every argument was an integer
  std::string suffix;             // text after ")" ("WITH TIME ZONE")
};

split_type split(const std::string& t) {
  split_type out;
  auto open = t.find('(');
  if (open == std::string::npos) {
    out.base = t;
    return out;
  }
  auto close = t.find(')', open);
  out.base = t.substr(0, open);
  while (!out.base.empty() && out.base.back() == ' ')
    out.base.pop_back();
  out.has_args = true;
  std::string_view inner(t.data() + open + 1,
                         (close == std::string::npos ? t.size() : close) - open - 1);
  while (!inner.empty()) {
    auto comma = inner.find(',');
    std::string_view part = inner.substr(0, comma);
    int v = 0;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc{} || p != part.data() + part.size())
      out.args_ok = false;
    out.args.push_back(v);
    if (comma == std::string_view::npos)
      break;
    inner.remove_prefix(comma + 1);
  }
  if (close != std::string::npos && close + 1 < t.size()) {
    out.suffix = t.substr(close + 1);
    while (!out.suffix.empty() && out.suffix.front() == ' ')
      out.suffix.erase(0, 1);
  }
  return out;
}

bool one_of(const std::string& s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// decimal(p,s) from arguments, or nullopt-equivalent `fallback` when out of range.
portable_type decimal_of(const split_type& t, portable_type fallback) {
  if (!t.args_ok || t.args.empty() || t.args.size() > 2)
    return fallback;
  const int p = t.args[0];
  const int s = t.args.size() == 2 ? t.args[1] : 0;
  if (p < 1 || p > schema::max_decimal_precision || s < 0 || s > p)
    return fallback;
  return portable_type::decimal(p, s);
}

portable_type varchar_of(const split_type& t) {
  if (t.args_ok && t.args.size() == 1 && t.args[0] >= 1)
    return portable_type::varchar(t.args[0]);
  return portable_type::of(type_kind::text);
}

}  // namespace

portable_type map_sqlite_type(std::string_view declared) {
  const std::string t = canonical(declared);
  const split_type st = split(t);
  const std::string& b = st.base;
  auto of = [](type_kind k) { return portable_type::of(k); };

  if (t.empty())
    return of(type_kind::text);
  if (one_of(b, {"BOOLEAN", "BOOL"}))
    return of(type_kind::boolean);
  if (one_of(b, {"TINYINT", "SMALLINT", "INT2"}))
    return of(type_kind::smallint);
  if (one_of(b, {"INT", "INTEGER", "MEDIUMINT", "INT4"}))
    return of(type_kind::int32);
  if (one_of(b, {"BIGINT", "INT8", "UNSIGNED BIG INT"}))
    return of(type_kind::bigint);
  if (one_of(b, {"REAL", "DOUBLE", "DOUBLE PRECISION", "FLOAT", "FLOAT8", "FLOAT4"}))
    return of(type_kind::float64);
  if (one_of(b, {"DECIMAL", "NUMERIC"}))
    return st.has_args ? decimal_of(st, portable_type::decimal(38, 9))
                       : portable_type::decimal(38, 9);
  if (one_of(b, {"VARCHAR", "CHARACTER VARYING", "VARYING CHARACTER", "NVARCHAR", "CHAR",
                 "CHARACTER", "NCHAR", "NATIVE CHARACTER"}))
    return varchar_of(st);
  if (one_of(b, {"TEXT", "CLOB", "STRING"}))
    return of(type_kind::text);
  if (b == "DATE")
    return of(type_kind::date);
  if (b == "TIME" || t == "TIME WITHOUT TIME ZONE")
    return of(type_kind::time);
  if (one_of(b, {"DATETIME", "TIMESTAMP", "TIMESTAMP WITHOUT TIME ZONE"}) &&
      st.suffix != "WITH TIME ZONE")
    return of(type_kind::timestamp_ntz);
  if (one_of(t, {"TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE", "DATETIMEOFFSET"}) ||
      (b == "TIMESTAMP" && st.suffix == "WITH TIME ZONE"))
    return of(type_kind::timestamp_tz);
  if (one_of(b, {"JSON", "JSONB"}))
    return of(type_kind::json);
  if (one_of(b, {"UUID", "GUID", "UNIQUEIDENTIFIER"}))
    return of(type_kind::uuid);
  if (one_of(b, {"BLOB", "BYTEA", "BINARY", "VARBINARY"}))
    return of(type_kind::bytes);

  // SQLite's affinity rules, in SQLite's order.
  if (contains(t, "INT"))
    return of(type_kind::bigint);
  if (contains(t, "CHAR") || contains(t, "CLOB") || contains(t, "TEXT"))
    return of(type_kind::text);
  if (contains(t, "BLOB"))
    return of(type_kind::bytes);
  if (contains(t, "REAL") || contains(t, "FLOA") || contains(t, "DOUB"))
    return of(type_kind::float64);
  return of(type_kind::text);
}

portable_type map_duckdb_type(std::string_view data_type) {
  const std::string t = canonical(data_type);
  const split_type st = split(t);
  const std::string& b = st.base;
  auto of = [](type_kind k) { return portable_type::of(k); };

  if (!t.empty() && t.back() == ']')  // LIST "INTEGER[]" and ARRAY "INTEGER[3]"
    return of(type_kind::json);
  if (one_of(b, {"STRUCT", "MAP", "UNION"}))
    return of(type_kind::json);
  if (one_of(b, {"BOOLEAN", "BOOL"}))
    return of(type_kind::boolean);
  if (one_of(b, {"TINYINT", "SMALLINT", "UTINYINT"}))
    return of(type_kind::smallint);
  if (one_of(b, {"INTEGER", "USMALLINT"}))
    return of(type_kind::int32);
  if (one_of(b, {"BIGINT", "UINTEGER"}))
    return of(type_kind::bigint);
  if (b == "UBIGINT")
    return portable_type::decimal(20, 0);
  if (one_of(b, {"HUGEINT", "UHUGEINT"}))
    return portable_type::decimal(39, 0);
  if (b == "FLOAT")
    return of(type_kind::float32);
  if (b == "DOUBLE")
    return of(type_kind::float64);
  if (b == "DECIMAL")
    return decimal_of(st, portable_type::decimal(18, 3));
  if (b == "VARCHAR")
    return st.has_args ? varchar_of(st) : of(type_kind::text);
  if (b == "DATE")
    return of(type_kind::date);
  if (t == "TIME")
    return of(type_kind::time);
  if (one_of(t, {"TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"}))
    return of(type_kind::timestamp_ntz);
  if (one_of(t, {"TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"}))
    return of(type_kind::timestamp_tz);
  if (b == "JSON")
    return of(type_kind::json);
  if (b == "UUID")
    return of(type_kind::uuid);
  if (b == "BLOB")
    return of(type_kind::bytes);
  // INTERVAL, TIME WITH TIME ZONE, ENUM(...), BIT, BIGNUM/VARINT: their text form.
  return of(type_kind::text);
}

portable_type map_postgres_type(std::string_view formatted) {
  const std::string t = canonical(formatted);
  const split_type st = split(t);
  const std::string& b = st.base;
  auto of = [](type_kind k) { return portable_type::of(k); };

  if (!t.empty() && t.back() == ']')  // arrays keep PostgreSQL's text form "{1,2}"
    return of(type_kind::text);
  if (b == "BOOLEAN")
    return of(type_kind::boolean);
  if (b == "SMALLINT")
    return of(type_kind::smallint);
  if (b == "INTEGER")
    return of(type_kind::int32);
  if (b == "BIGINT")
    return of(type_kind::bigint);
  if (b == "REAL")
    return of(type_kind::float32);
  if (b == "DOUBLE PRECISION")
    return of(type_kind::float64);
  // Unconstrained numeric has no fixed scale: any fixed decimal would round some values,
  // so it is read as text; declare a decimal(p,s) in flotilla.toml to get a decimal.
  if (b == "NUMERIC")
    return st.has_args ? decimal_of(st, of(type_kind::text)) : of(type_kind::text);
  if (b == "CHARACTER VARYING" || b == "CHARACTER")
    return st.has_args ? varchar_of(st) : (b == "CHARACTER" ? portable_type::varchar(1)
                                                            : of(type_kind::text));
  if (one_of(b, {"TEXT", "NAME", "CITEXT", "BPCHAR", "\"CHAR\""}))
    return of(type_kind::text);
  if (b == "DATE")
    return of(type_kind::date);
  if (b == "TIME" && (st.suffix.empty() || st.suffix == "WITHOUT TIME ZONE"))
    return of(type_kind::time);
  if (t == "TIME WITHOUT TIME ZONE")
    return of(type_kind::time);
  if (t == "TIMESTAMP WITHOUT TIME ZONE" || t == "TIMESTAMP" ||
      (b == "TIMESTAMP" && (st.suffix.empty() || st.suffix == "WITHOUT TIME ZONE")))
    return of(type_kind::timestamp_ntz);
  if (t == "TIMESTAMP WITH TIME ZONE" || (b == "TIMESTAMP" && st.suffix == "WITH TIME ZONE"))
    return of(type_kind::timestamp_tz);
  if (b == "JSON" || b == "JSONB")
    return of(type_kind::json);
  if (b == "UUID")
    return of(type_kind::uuid);
  if (b == "BYTEA")
    return of(type_kind::bytes);
  // interval, money, inet, enums, ranges, composites, time with time zone: text form.
  return of(type_kind::text);
}

}  // namespace flotilla::sources
