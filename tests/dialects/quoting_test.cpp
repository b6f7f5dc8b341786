#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "dialects/dialect.hpp"

using namespace flotilla;
using namespace flotilla::dialects;
using namespace std::string_literals;

namespace {

const dialect& D(std::string_view name) {
  static std::map<std::string, std::unique_ptr<dialect>, std::less<>> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(std::string(name), std::move(*make_dialect(name))).first;
  return *it->second;
}

// Decoders that read a quoted token the way each engine's lexer does. Each returns the
// value only when the token closes at its very last character; a name that could end
// the token early (and run the rest as SQL) decodes to nullopt.

/// "..." or `...` with the quote doubled inside (ANSI identifiers, Databricks
/// backticks, standard '...' literals).
std::optional<std::string> decode_doubling(std::string_view s, char q) {
  if (s.size() < 2 || s.front() != q || s.back() != q)
    return std::nullopt;
  std::string out;
  for (std::size_t i = 1; i + 1 < s.size(); ++i) {
    if (s[i] == q) {
      if (i + 2 >= s.size() || s[i + 1] != q)
        return std::nullopt;  // a lone quote closes the token early
      ++i;
    }
    out.push_back(s[i]);
  }
  return out;
}

/// Backslash escapes (GoogleSQL, Spark SQL, Snowflake literals), and with
/// `doubling` also a doubled quote (Snowflake).
std::optional<std::string> decode_backslash(std::string_view s, char q, bool doubling = false) {
  if (s.size() < 2 || s.front() != q || s.back() != q)
    return std::nullopt;
  std::string out;
  for (std::size_t i = 1; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (c == '\\') {
      if (i + 2 >= s.size())
        return std::nullopt;  // escapes the closing quote
      c = s[++i];
      if (c == 'n') {
        c = '\n';
      } else if (c == 'r') {
        c = '\r';
      } else if (c == 't') {
        c = '\t';
      } else if (c == 'x') {
        if (i + 3 >= s.size())
          return std::nullopt;
        c = static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
        i += 2;
      }
    } else if (c == q) {
      if (!doubling || i + 2 >= s.size() || s[i + 1] != q)
        return std::nullopt;
      ++i;
    } else if (c == '\n' && q == '`') {
      return std::nullopt;  // GoogleSQL: no raw newline inside a quoted token
    }
    out.push_back(c);
  }
  return out;
}

/// PostgreSQL: '...' with '' doubled, or E'...' with backslash escapes too.
std::optional<std::string> decode_postgres_literal(std::string_view s) {
  if (s.starts_with("E'")) {
    s.remove_prefix(1);
    return decode_backslash(s, '\'', true);
  }
  return decode_doubling(s, '\'');
}

std::optional<std::string> decode_identifier(std::string_view dialect, std::string_view s) {
  if (dialect == "bigquery")
    return decode_backslash(s, '`');
  if (dialect == "databricks")
    return decode_doubling(s, '`');
  return decode_doubling(s, '"');
}

std::optional<std::string> decode_literal(std::string_view dialect, std::string_view s) {
  if (dialect == "postgres")
    return decode_postgres_literal(s);
  if (dialect == "snowflake")
    return decode_backslash(s, '\'', true);
  if (dialect == "bigquery" || dialect == "databricks")
    return decode_backslash(s, '\'');
  return decode_doubling(s, '\'');
}

const std::string hostile_names[] = {
    "plain",
    "select",  // reserved words
    "ORDER",
    "a\"b",
    "\"",
    "\"\"",
    "x\"; DROP TABLE t; --",
    "a`b",
    "`",
    "x`; DROP TABLE t; --",
    "it's",
    "'; DROP TABLE t; --",
    "semi;colon",
    "back\\slash",
    "ends with \\",
    "\\",
    "\\`",
    "\\\"",
    "new\nline",
    "tab\there",
    "\x01control",
    "$flotilla$",
    "größe",
    "表名",
    "emoji 😀",
    "with space",
    "a.b",
};

}  // namespace

TEST_CASE("double-quoting dialects double an embedded double quote and nothing else") {
  struct row {
    const char* name;
    const char* quoted;
  };
  const row rows[] = {
      {"orders", R"("orders")"},
      {"select", R"("select")"},
      {"Mixed Case", R"("Mixed Case")"},
      {R"(a"b)", R"("a""b")"},
      {R"(x"; DROP TABLE t; --)", R"("x""; DROP TABLE t; --")"},
      {"a`b", R"("a`b")"},
      {R"(back\slash)", R"("back\slash")"},
      {"it's", R"("it's")"},
      {"größe", R"("größe")"},
      {"表名", R"("表名")"},
  };
  for (const char* dialect : {"duckdb", "postgres", "sqlite", "snowflake", "trino"})
    for (const auto& r : rows) {
      INFO(dialect << ": " << r.name);
      CHECK(D(dialect).quote(r.name) == r.quoted);
    }
}

TEST_CASE("bigquery backtick-quotes with GoogleSQL escapes") {
  struct row {
    std::string name;
    std::string quoted;
  };
  const row rows[] = {
      {"orders", "`orders`"},
      {"select", "`select`"},
      {"a`b", R"(`a\`b`)"},
      {"x`; DROP TABLE t; --", R"(`x\`; DROP TABLE t; --`)"},
      {R"(back\slash)", R"(`back\\slash`)"},
      {R"(ends with \)", R"(`ends with \\`)"},
      {"new\nline", R"(`new\nline`)"},
      {"tab\there", R"(`tab\there`)"},
      {"\x01", R"(`\x01`)"},
      {R"(a"b)", R"(`a"b`)"},
      {"größe", "`größe`"},
  };
  for (const auto& r : rows) {
    INFO(r.name);
    CHECK(D("bigquery").quote(r.name) == r.quoted);
  }
}

TEST_CASE("databricks backtick-quotes with an embedded backtick doubled") {
  struct row {
    const char* name;
    const char* quoted;
  };
  const row rows[] = {
      {"orders", "`orders`"},
      {"select", "`select`"},
      {"a`b", "`a``b`"},
      {"x`; DROP TABLE t; --", "`x``; DROP TABLE t; --`"},
      {R"(back\slash)", R"(`back\slash`)"},
      {R"(a"b)", R"(`a"b`)"},
      {"größe", "`größe`"},
  };
  for (const auto& r : rows) {
    INFO(r.name);
    CHECK(D("databricks").quote(r.name) == r.quoted);
  }
}

TEST_CASE("no table, schema or column name can break out of its quotes in any dialect") {
  for (auto dialect : dialect_names())
    for (const auto& name : hostile_names) {
      INFO(dialect << ": [" << name << "]");
      const std::string quoted = D(dialect).quote(name);
      CHECK(decode_identifier(dialect, quoted) == name);
      // Qualified names are the quoted parts joined by dots, each part intact.
      if (dialect == "sqlite")
        continue;
      const std::string q = D(dialect).qualified({name, name, name});
      CHECK(q == quoted + "." + quoted + "." + quoted);
    }
}

TEST_CASE("an empty name or one holding a NUL byte is refused") {
  for (auto name : dialect_names()) {
    INFO(name);
    const dialect& d = D(name);
    CHECK_THROWS_AS(d.quote(""), std::invalid_argument);
    CHECK_THROWS_AS(d.quote("a\0b"s), std::invalid_argument);
    CHECK_THROWS_AS(d.qualified({"", "shop", ""}), std::invalid_argument);
    CHECK_THROWS_AS(d.qualified({"", "sh\0op"s, "t"}), std::invalid_argument);
    CHECK_THROWS_AS(d.drop_table({"", "", "t\0; DROP TABLE x"s}), std::invalid_argument);
    CHECK_THROWS_AS(d.create_table({"", "", "t"}, {{schema::column{"", schema::portable_type{}}}}),
                    std::invalid_argument);
    CHECK_THROWS_AS(d.add_column({"", "", "t"}, schema::column{"c\0"s, schema::portable_type{}}),
                    std::invalid_argument);
    CHECK_THROWS_AS(d.literal("a\0b"s), std::invalid_argument);
  }
}

TEST_CASE("literal escapes single quotes, and backslashes where the engine reads them") {
  struct row {
    const char* dialect;
    std::string value;
    std::string literal;
  };
  const row rows[] = {
      // Standard strings: only the quote is special.
      {"duckdb", "it's", "'it''s'"},
      {"duckdb", R"(a\b)", R"('a\b')"},
      {"sqlite", "it's", "'it''s'"},
      {"sqlite", R"(a\)", R"('a\')"},
      {"trino", "it's", "'it''s'"},
      {"trino", R"(a\b)", R"('a\b')"},
      // PostgreSQL: E'...' once a backslash is in, whatever standard_conforming_strings.
      {"postgres", "it's", "'it''s'"},
      {"postgres", R"(a\b')", R"(E'a\\b''')"},
      // Snowflake reads backslash escapes in every string literal.
      {"snowflake", "it's", "'it''s'"},
      {"snowflake", R"(a\)", R"('a\\')"},
      // GoogleSQL and Spark SQL: backslash escapes.
      {"bigquery", "it's", R"('it\'s')"},
      {"bigquery", R"(a\b)", R"('a\\b')"},
      {"bigquery", "two\nlines", R"('two\nlines')"},
      {"databricks", "it's", R"('it\'s')"},
      {"databricks", R"(a\)", R"('a\\')"},
  };
  for (const auto& r : rows) {
    INFO(r.dialect << ": [" << r.value << "]");
    CHECK(D(r.dialect).literal(r.value) == r.literal);
  }
  for (auto dialect : dialect_names()) {
    INFO(dialect);
    CHECK(D(dialect).literal("") == "''");
  }
}

TEST_CASE("no value can break out of a string literal in any dialect") {
  for (auto dialect : dialect_names())
    for (const auto& value : hostile_names) {
      INFO(dialect << ": [" << value << "]");
      CHECK(decode_literal(dialect, D(dialect).literal(value)) == value);
    }
}

TEST_CASE("hostile names stay inside their quotes in generated DDL") {
  const std::string evil = "x\"; DROP TABLE users; --";
  const table_ref t{"", evil, evil};
  const schema::table_schema s{{schema::column{evil, schema::portable_type{}}}};
  CHECK(D("postgres").create_table(t, s) ==
        R"(CREATE TABLE "x""; DROP TABLE users; --"."x""; DROP TABLE users; --" ("x""; DROP TABLE users; --" TEXT))");
  CHECK(D("bigquery").create_table({"", "a`b", "c`d"}, {{schema::column{"e`f", schema::portable_type{}}}}) ==
        R"(CREATE TABLE `a\`b`.`c\`d` (`e\`f` STRING))");
  CHECK(D("databricks").drop_table({"", "a`b", "c`d"}) == "DROP TABLE IF EXISTS `a``b`.`c``d`");
}

TEST_CASE("a postgres DO block picks a dollar-quote tag that no name inside can close") {
  const table_ref t{"", "s", "$flotilla$"};
  const auto sql = D("postgres").swap_in({"", "s", "$flotilla$__flotilla_staging"}, t);
  REQUIRE_FALSE(sql.empty());
  CHECK(sql[0].starts_with("DO $flotilla1$\n"));
  CHECK(sql[0].ends_with("\n$flotilla1$"));
}

TEST_CASE("the breakout check itself rejects naively quoted names") {
  CHECK_FALSE(decode_identifier("duckdb", R"("a"b")"));
  CHECK_FALSE(decode_identifier("bigquery", "`a`b`"));
  CHECK_FALSE(decode_identifier("bigquery", R"(`a\`)"));  // the backslash eats the close
  CHECK_FALSE(decode_identifier("databricks", R"(`a\`b`)"));
  CHECK_FALSE(decode_literal("snowflake", R"('a\')"));
  CHECK_FALSE(decode_literal("databricks", "'it''s'"));  // Spark reads two literals
  CHECK_FALSE(decode_literal("postgres", R"(E'a\')"));
}

TEST_CASE("each engine says which names it keeps for itself, case aside") {
  CHECK_FALSE(D("sqlite").engine_reserved({"", "", "SQLITE_stat9"}).empty());
  CHECK(D("sqlite").engine_reserved({"", "", "sqlitex"}).empty());
  CHECK_FALSE(D("postgres").engine_reserved({"", "PG_TEMP_5", "t"}).empty());
  CHECK_FALSE(D("postgres").engine_reserved({"", "information_schema", "t"}).empty());
  CHECK(D("postgres").engine_reserved({"", "pgx", "t"}).empty());
  CHECK_FALSE(D("duckdb").engine_reserved({"", "pg_catalog", "t"}).empty());
  CHECK(D("snowflake").engine_reserved({"", "information_schema", "t"}).empty());
}
