// DDL from the dialects executed against the engines, hostile identifiers, and the
// registry of warehouse writers.

#include <fstream>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>

#include "tests/sinks/sink_fixture.hpp"

using namespace flotilla;
using namespace flotilla::sinks;
using namespace flotilla::sinks::testing;

TEST_CASE("statements from the dialect add a column and widen a type, keeping the rows") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("orders");
  const auto s = cols({col("id", "int"), col("amount", "decimal(10,2)")});
  load(*wh, t, s, load_mode::replace, {{I(1), T("10.25")}, {I(2), T("-3.75")}});

  wh->execute({d.add_column(t, col("note", "text"))});
  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  REQUIRE(live->columns.size() == 3);
  CHECK(live->columns[2].name == "note");
  CHECK(live->columns[2].nullable);

  if (d.supports_in_place_type_change()) {
    wh->execute(d.alter_column_type(t, "id", *schema::parse_type("bigint")));
    wh->execute(d.alter_column_type(t, "amount", *schema::parse_type("decimal(12,2)")));
    live = wh->describe(t);
    REQUIRE(live.has_value());
    CHECK(live->columns[0].type == d.canonical(*schema::parse_type("bigint")));
    CHECK(live->columns[1].type == d.canonical(*schema::parse_type("decimal(12,2)")));
  }
  CHECK(column_of(wh->query("SELECT " + d.quote("amount") + " FROM " + d.qualified(t) +
                            " ORDER BY " + d.quote("id"))) ==
        std::vector<std::string>{"10.25", "-3.75"});
}

TEST_CASE("drop_not_null lets a column take NULL; SQLite's rebuild does the same") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("kept");
  auto req = col("req", "text");
  req.nullable = false;
  if (const auto sql = d.create_schema(t.schema); !sql.empty())
    wh->execute({sql});
  wh->execute({d.create_table(t, cols({col("id", "int", true), req}))});
  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  REQUIRE_FALSE(live->columns.at(1).nullable);
  load(*wh, t, *live, load_mode::append, {{I(1), T("a")}});
  if (d.supports_in_place_type_change()) {
    wh->execute({d.drop_not_null(t, "req")});
  } else {
    auto next = *live;
    next.columns[1].nullable = true;
    wh->execute(d.rebuild_and_swap(t, *live, next));
  }
  live = wh->describe(t);
  REQUIRE(live.has_value());
  CHECK(live->columns.at(1).nullable);
  load(*wh, t, *live, load_mode::append, {{I(2), N()}});
  CHECK(column_of(wh->query("SELECT " + d.quote("req") + " FROM " + d.qualified(t) +
                            " ORDER BY " + d.quote("id"))) ==
        std::vector<std::string>{"a", "NULL"});
}

TEST_CASE("a rebuild from the dialect changes a type and keeps the rows") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("events");
  const auto before = cols({col("id", "int"), col("status", "text")});
  const auto after = cols({col("id", "int"), col("status", "int")});
  load(*wh, t, before, load_mode::replace, {{I(1), T("7")}, {I(2), T("8")}});

  wh->execute(d.rebuild_and_swap(t, before, after));
  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  CHECK(live->columns.at(1).type == d.canonical(*schema::parse_type("int")));
  CHECK(column_of(wh->query("SELECT " + d.quote("status") + " FROM " + d.qualified(t) +
                            " ORDER BY " + d.quote("id"))) ==
        std::vector<std::string>{"7", "8"});
}

TEST_CASE("a rebuild turns a boolean into a number on every engine (auto_widen's bool -> int)") {
  test_target target(GENERATE(from_range(engines())));
  const std::string to = GENERATE("smallint", "int", "bigint", "decimal(12,2)", "double");
  CAPTURE(target.engine(), to);
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("flags");
  const auto before = cols({col("id", "int"), col("flag", "bool")});
  const auto after = cols({col("id", "int"), col("flag", to)});
  load(*wh, t, before, load_mode::replace, {{I(1), B(true)}, {I(2), B(false)}, {I(3), N()}});

  wh->execute(d.rebuild_and_swap(t, before, after));
  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  CHECK(live->columns.at(1).type == d.canonical(*schema::parse_type(to)));
  CHECK(column_of(wh->query("SELECT CAST(" + d.quote("flag") + " AS INTEGER) FROM " +
                            d.qualified(t) + " ORDER BY " + d.quote("id"))) ==
        std::vector<std::string>{"1", "0", "NULL"});
}

TEST_CASE("statements run in one transaction: a failing one undoes the others") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto& d = wh->dialect();
  const auto t = target.table("orders");
  load(*wh, t, cols({col("id", "int")}), load_mode::replace, {{I(1)}});
  CHECK_THROWS_AS(wh->execute({d.add_column(t, col("note", "text")),
                               "SELECT * FROM " + d.qualified(target.table("missing"))}),
                  sink_error);
  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  CHECK(live->columns.size() == 1);
}

TEST_CASE("hostile schema, table and column names never break out of their quotes") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto& d = wh->dialect();
  const std::string schema_name = "we\"ird; 'sch ema\xc3\xbc " + unique_suffix();
  const auto t = target.table_in(schema_name, "t\"; DROP TABLE canary; --'\xc3\xbc");
  const auto canary = target.table_in(schema_name, "canary");
  const auto s = cols({col("it's", "int"), col("\"quoted\"", "text"), col("semi;colon", "text"),
                       col("sp ace", "text"), col("\xc3\xbc" "n" "\xc3\xaf" "c" "\xc3\xb8" "de", "text")});

  load(*wh, canary, cols({col("id", "int")}), load_mode::replace, {{I(1)}});
  load(*wh, t, s, load_mode::replace, {{I(1), T("a\"b"), T("c;d"), T("e'f"), T("g")}});
  load(*wh, t, s, load_mode::append, {{I(2), T("x"), T("y"), T("z"), T("w")}});
  load(*wh, t, s, load_mode::merge, {{I(2), T("x2"), T("y2"), T("z2"), T("w2")}}, {"it's"},
       "token'\"; --");
  load(*wh, t, s, load_mode::replace, {{I(3), T("p"), T("q"), T("r"), T("s")}},{}, "token 2");

  CHECK(count(*wh, t) == 1);
  CHECK(count(*wh, canary) == 1);
  CHECK(wh->committed_token(t) == "token 2");
  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  REQUIRE(live->columns.size() == s.columns.size());
  for (std::size_t c = 0; c < s.columns.size(); ++c)
    CHECK(live->columns[c].name == s.columns[c].name);
  CHECK(column_of(wh->query("SELECT " + d.quote("\"quoted\"") + " FROM " + d.qualified(t))) ==
        std::vector<std::string>{"p"});
}

TEST_CASE("long table names keep staging tables apart from the live table") {
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto s = cols({col("id", "int", true), col("v", "text")});
  // 60 bytes: the staging name exceeds PostgreSQL's 63-byte identifiers.
  const auto t = target.table(std::string(57, 'x') + "\xc3\xa9" + "y");
  for (int run = 0; run < 3; ++run) {
    load(*wh, t, s, load_mode::replace, {{I(1), T("r" + std::to_string(run))}});
    load(*wh, t, s, load_mode::merge, {{I(2), T("m" + std::to_string(run))}}, {"id"});
  }
  CHECK(count(*wh, t) == 2);
  auto live = wh->describe(t);
  REQUIRE(live.has_value());
  CHECK(live->columns.size() == 2);
  // The key, added after each swap under the long name, is the live table's.
  CHECK(live->columns[0].key);
  if (target.engine() == "postgres")
    CHECK(column_of(wh->query("SELECT count(*) FROM pg_indexes WHERE schemaname = " +
                              wh->dialect().literal(t.schema))) ==
          std::vector<std::string>{"1"});
}

TEST_CASE("a plan-only dialect is refused with a pointer to flotilla plan") {
  for (const char* name : {"snowflake", "bigquery", "databricks", "trino"}) {
    warehouse_options o;
    o.name = "wh";
    o.dialect = name;
    CHECK_THROWS_WITH(open_warehouse(o),
                      "target 'wh' uses dialect '" + std::string(name) +
                          "', which Flotilla plans for but does not execute; use `flotilla "
                          "plan` to see its SQL");
  }
}

TEST_CASE("an unknown dialect is refused naming the target") {
  warehouse_options o;
  o.name = "wh";
  o.dialect = "oracle";
  CHECK_THROWS_WITH(open_warehouse(o), Catch::Contains("target 'wh'") && Catch::Contains("oracle"));
}

TEST_CASE("a SQLite target whose directory cannot take its -wal file says so") {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_ro_" + unique_suffix());
  std::filesystem::create_directories(dir);
  warehouse_options o;
  o.name = "wh";
  o.dialect = "sqlite";
  o.path = (dir / "wh.db").string();
  (void)open_warehouse(o);  // the file made
  // An immutable directory refuses even root its new files; a file system without the
  // attribute (or a user who may not set it) leaves nothing to check here.
  const std::string chattr = "chattr +i '" + dir.string() + "' 2>/dev/null";
  if (std::system(chattr.c_str()) != 0) {
    WARN("chattr +i is not available here; nothing checked");
    std::filesystem::remove_all(dir);
    return;
  }
  try {
    (void)open_warehouse(o);
    FAIL("the database opened");
  } catch (const std::exception& e) {
    CHECK_THAT(e.what(), Catch::Contains("its directory " + dir.string() + " is not writable") &&
                             Catch::Contains("-wal") && !Catch::Contains("check path"));
  }
  (void)std::system(("chattr -i '" + dir.string() + "'").c_str());
  std::filesystem::remove_all(dir);
}

TEST_CASE("an unreachable postgres target is refused with the server's reason") {
  warehouse_options o;
  o.name = "wh";
  o.dialect = "postgres";
  o.dsn = "postgresql://nobody:s3cret@127.0.0.1:1/none?connect_timeout=2";
  // One line, naming where it tried and what to check, never the password.
  CHECK_THROWS_WITH(open_warehouse(o),
                    Catch::StartsWith("target 'wh': cannot connect to PostgreSQL (host 127.0.0.1, "
                                      "port 1, database none): ") &&
                        Catch::EndsWith("; check dsn in [targets.wh]") &&
                        !Catch::Contains("\n") && !Catch::Contains("s3cret"));
}

TEST_CASE("a postgres target that takes the connection and never answers is given up after 10 s") {
  // A socket that listens and never accepts: the kernel completes the handshake, and
  // nothing ever answers the startup message.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 8) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  warehouse_options o;
  o.name = "wh";
  o.dialect = "postgres";
  o.dsn = "postgresql://postgres@127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/x";
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(open_warehouse(o), Catch::Contains("timeout expired") &&
                                           Catch::EndsWith("; check dsn in [targets.wh]"));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < std::chrono::seconds(20));
  ::close(fd);
}

TEST_CASE("a file target that is not its engine's database is refused naming the file") {
  const std::string engine = GENERATE(std::string("duckdb"), std::string("sqlite"));
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_sinks_" + unique_suffix());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "wh.db").string();
  std::ofstream(path) << std::string(4096, 'x');
  warehouse_options o;
  o.name = "wh";
  o.dialect = engine;
  o.path = path;
  CHECK_THROWS_WITH(open_warehouse(o), Catch::Contains("cannot open") && Catch::Contains(path) &&
                                           Catch::EndsWith("; check path in [targets.wh]"));
  CHECK(std::filesystem::file_size(path) == 4096);  // left as it was
  std::filesystem::remove_all(dir);
}

TEST_CASE("a failing statement is quoted in its error by its beginning and its length") {
  // A multi-row INSERT quoted whole made a message of megabytes, with every row's values.
  test_target target(GENERATE(from_range(engines())));
  CAPTURE(target.engine());
  auto wh = target.open();
  const auto& d = wh->dialect();
  std::string sql = "SELECT * FROM " + d.qualified(target.table("missing")) + " WHERE 1 IN (";
  for (int i = 0; i < 20000; ++i)
    sql += (i ? ", " : "") + std::to_string(i);
  sql += ")";
  std::string message;
  try {
    wh->execute({sql});
  } catch (const sink_error& e) {
    message = e.what();
  }
  CAPTURE(message.substr(0, 2000));
  REQUIRE(!message.empty());
  CHECK(message.size() < 3000);
  CHECK_THAT(message, Catch::Contains("(in: SELECT * FROM ") &&
                          Catch::Contains(" bytes in all)"));
}
