// Pure parts of the stream: pgoutput decoding, LSN text, net changes per key and the SQL
// they become.
#include <catch2/catch.hpp>

#include "cdc/apply.hpp"
#include "cdc/ddl_capture.hpp"
#include "cdc/pg_logical.hpp"
#include "dialects/dialect.hpp"

using namespace flotilla::cdc;

namespace {

void be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out.push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}

tuple_value text(std::string s) { return {tuple_value::kind::text, std::move(s)}; }

row_layout orders_layout() {
  using flotilla::schema::portable_type;
  using flotilla::schema::type_kind;
  return {{"id", "note"}, {portable_type::of(type_kind::bigint), portable_type::of(type_kind::text)}, {0}};
}

}  // namespace

TEST_CASE("LSNs read and print in PostgreSQL's form") {
  CHECK(format_lsn(0x16B374D848ULL) == "16/B374D848");
  CHECK(parse_lsn("16/B374D848") == 0x16B374D848ULL);
  CHECK(parse_lsn("0/0") == 0u);
  CHECK(!parse_lsn("16B374D848"));
  CHECK(!parse_lsn("x/1"));
}

TEST_CASE("pgoutput relation and row messages decode into their fields") {
  std::string rel = "R";
  be(rel, 16384, 4);
  rel += std::string("public") + '\0' + "orders" + '\0';
  rel += 'd';
  be(rel, 2, 2);
  rel += '\1';
  rel += std::string("id") + '\0';
  be(rel, 20, 4);
  be(rel, 0xffffffff, 4);
  rel += '\0';
  rel += std::string("note") + '\0';
  be(rel, 25, 4);
  be(rel, 0xffffffff, 4);
  auto r = std::get<relation_message>(decode_pgoutput(rel));
  CHECK(r.oid == 16384);
  CHECK(r.schema == "public");
  CHECK(r.name == "orders");
  REQUIRE(r.columns.size() == 2);
  CHECK(r.columns[0].key);
  CHECK(!r.columns[1].key);
  CHECK(r.columns[1].type_modifier == -1);

  std::string upd = "U";
  be(upd, 16384, 4);
  upd += 'K';
  be(upd, 2, 2);
  upd += 't';
  be(upd, 1, 4);
  upd += "7";
  upd += 'n';
  upd += 'N';
  be(upd, 2, 2);
  upd += 't';
  be(upd, 1, 4);
  upd += "8";
  upd += 'u';
  auto u = std::get<update_message>(decode_pgoutput(upd));
  REQUIRE(u.old_row);
  CHECK(u.old_is_key);
  CHECK((*u.old_row)[0].text == "7");
  CHECK(u.row[0].text == "8");
  CHECK(u.row[1].type == tuple_value::kind::unchanged);

  CHECK_THROWS_AS(decode_pgoutput("I"), pg_error);
  CHECK(std::holds_alternative<ignored_message>(decode_pgoutput("Yxx")));
}

TEST_CASE("a batch keeps the last image of each key, and a key change deletes the old key") {
  net_changes n;
  n.layout = orders_layout();
  n.insert({text("1"), text("a")});
  n.update(std::nullopt, {text("1"), text("b")});
  n.insert({text("2"), text("x")});
  n.remove({text("2"), {}});
  n.update(tuple{text("3"), {}}, {text("4"), text("moved")});
  auto d = flotilla::dialects::make_dialect("postgres");
  REQUIRE(d);
  auto sql = step_sql(**d, {"", "s", "orders"}, n);
  REQUIRE(sql.size() == 2);
  CHECK(sql[0] == "DELETE FROM \"s\".\"orders\" WHERE \"id\" IN (2, 3)");
  CHECK(sql[1] == "INSERT INTO \"s\".\"orders\" (\"id\", \"note\") VALUES (1, 'b'), (4, 'moved') "
                  "ON CONFLICT (\"id\") DO UPDATE SET \"note\" = excluded.\"note\"");
}

TEST_CASE("an update without its unchanged TOAST value updates only the columns sent") {
  net_changes n;
  n.layout = orders_layout();
  n.update(std::nullopt, {text("9"), {tuple_value::kind::unchanged, ""}});
  auto d = flotilla::dialects::make_dialect("duckdb");
  REQUIRE(d);
  auto sql = step_sql(**d, {"", "s", "orders"}, n);
  CHECK(sql.empty());  // only the key was sent: nothing to change
  n.layout.names.push_back("n");
  n.layout.types.push_back(flotilla::schema::portable_type::of(flotilla::schema::type_kind::int32));
  n.update(std::nullopt, {text("9"), {tuple_value::kind::unchanged, ""}, text("5")});
  sql = step_sql(**d, {"", "s", "orders"}, n);
  REQUIRE(sql.size() == 1);
  CHECK(sql[0] == "UPDATE \"s\".\"orders\" SET \"n\" = 5 WHERE \"id\" IN (9)");
}

TEST_CASE("a key change without its unchanged TOAST value moves the row where the target holds it") {
  net_changes n;
  n.layout = orders_layout();
  n.layout.names.push_back("n");
  n.layout.types.push_back(flotilla::schema::portable_type::of(flotilla::schema::type_kind::int32));
  const tuple_value unknown{tuple_value::kind::unchanged, ""};
  // Old image of the key alone: its other columns are unknown, not NULL.
  n.update(tuple{text("1"), unknown, unknown}, {text("100"), unknown, text("5")});
  auto d = flotilla::dialects::make_dialect("postgres");
  REQUIRE(d);
  auto sql = step_sql(**d, {"", "s", "orders"}, n);
  REQUIRE(sql.size() == 1);
  CHECK(sql[0] == "UPDATE \"s\".\"orders\" SET \"id\" = 100, \"n\" = 5 WHERE \"id\" IN (1)");

  // Moved on again, then sent whole: the row under the first key goes, the whole row lands.
  n.update(tuple{text("100"), unknown, unknown}, {text("200"), unknown, text("6")});
  sql = step_sql(**d, {"", "s", "orders"}, n);
  REQUIRE(sql.size() == 1);
  CHECK(sql[0] == "UPDATE \"s\".\"orders\" SET \"id\" = 200, \"n\" = 6 WHERE \"id\" IN (1)");
  n.update(std::nullopt, {text("200"), text("whole"), text("7")});
  sql = step_sql(**d, {"", "s", "orders"}, n);
  REQUIRE(sql.size() == 2);
  CHECK(sql[0] == "DELETE FROM \"s\".\"orders\" WHERE \"id\" IN (1)");
  CHECK(sql[1].starts_with("INSERT INTO \"s\".\"orders\" (\"id\", \"note\", \"n\") VALUES (200, "
                           "'whole', 7)"));

  // A moved row deleted: the target's row under the old key goes.
  net_changes m;
  m.layout = n.layout;
  m.update(tuple{text("1"), unknown, unknown}, {text("100"), unknown, text("5")});
  m.remove(tuple{text("100"), unknown, unknown});
  sql = step_sql(**d, {"", "s", "orders"}, m);
  REQUIRE(sql.size() == 1);
  CHECK(sql[0] == "DELETE FROM \"s\".\"orders\" WHERE \"id\" IN (1)");

  // Moved into a key whose row was deleted earlier in the batch: that row goes first.
  net_changes c;
  c.layout = n.layout;
  c.remove(tuple{text("100"), unknown, unknown});
  c.update(tuple{text("1"), unknown, unknown}, {text("100"), unknown, text("5")});
  sql = step_sql(**d, {"", "s", "orders"}, c);
  REQUIRE(sql.size() == 2);
  CHECK(sql[0] == "DELETE FROM \"s\".\"orders\" WHERE \"id\" IN (100)");
  CHECK(sql[1] == "UPDATE \"s\".\"orders\" SET \"id\" = 100, \"n\" = 5 WHERE \"id\" IN (1)");
}

TEST_CASE("columns are matched by attnum, so a rename is one change") {
  std::vector<source_column> before{{"id", 1, "integer", true, true, {}, false, {}},
                                    {"note", 2, "text", false, false, {}, false, {}}};
  auto after = before;
  after[1].name = "notes";
  after.push_back({"qty", 3, "integer", false, false, std::string("7"), true, std::string("7")});
  auto diff = diff_columns(before, after);
  REQUIRE(diff.size() == 2);
  CHECK(diff[0].what == column_diff::kind::renamed);
  CHECK(diff[0].to == "notes");
  CHECK(diff[1].what == column_diff::kind::added);
  auto cols = parse_columns_json(columns_json(after));
  CHECK(cols == after);
}

TEST_CASE("collation, identity and generated changes are column changes; unrecorded ones are not") {
  std::vector<source_column> before{{"id", 1, "integer", true, true, {}, false, {}},
                                    {"note", 2, "text", false, false, {}, false, {}}};
  // Logged by an older capture: the properties are unknown, so nothing changed.
  auto after = before;
  after[1].collation = "de_DE";
  after[0].identity = true;
  CHECK(diff_columns(before, after).empty());

  before[0].identity = false;
  before[1].collation = "";
  before[1].generated = false;
  after[1].generated = true;
  after[1].default_expr = "upper(id::text)";
  const auto diff = diff_columns(before, after);
  REQUIRE(diff.size() == 3);
  CHECK(diff[0].what == column_diff::kind::identity);
  CHECK(diff[0].to == "identity added");
  CHECK(diff[1].what == column_diff::kind::collation);
  CHECK(diff[1].to == "collation default -> \"de_DE\"");
  CHECK(diff[2].what == column_diff::kind::generated);  // not a default change
  CHECK(diff[2].to == "now generated");
  CHECK(parse_columns_json(columns_json(after)) == after);
}

TEST_CASE("an initial copy reads PostgreSQL's BC dates and timestamps as ISO years, as a batch "
          "copy does") {
  using flotilla::schema::portable_type;
  using flotilla::schema::type_kind;
  const auto date = text_value("0001-06-01 BC", portable_type::of(type_kind::date));
  REQUIRE(date);
  CHECK(date->s == "0000-06-01");
  const auto ts = text_value("0044-03-15 12:00:00 BC", portable_type::of(type_kind::timestamp_ntz));
  REQUIRE(ts);
  CHECK(ts->s == "-0043-03-15 12:00:00");
  const auto tz = text_value("0044-03-15 12:00:00+00 BC", portable_type::of(type_kind::timestamp_tz));
  REQUIRE(tz);
  CHECK(tz->s == "-0043-03-15 12:00:00+00");
  // AD values stay as PostgreSQL prints them.
  CHECK(text_value("2020-01-01", portable_type::of(type_kind::date))->s == "2020-01-01");
}
