// Writing declared columns into flotilla.toml: every byte outside the declarations stays.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "config/load.hpp"
#include "config/selection.hpp"
#include "config/toml_edit.hpp"

using namespace flotilla::config;
namespace fs = std::filesystem;

namespace {

table_declaration decl(std::string source, std::string section, std::string table,
                       std::vector<column_declaration> columns) {
  return table_declaration{std::move(source), std::move(section), std::move(table),
                           std::move(columns)};
}

const std::vector<column_declaration> id_total{{"id", "int"}, {"total", "decimal(12,2)"}};

std::string edited(std::string_view text, const std::vector<table_declaration>& decls) {
  auto r = write_declarations(text, decls);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.has_value());
  return r->text;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("keys are bare when TOML allows it and quoted with escapes otherwise") {
  CHECK(toml_key("total") == "total");
  CHECK(toml_key("order-id_2") == "order-id_2");
  CHECK(toml_key("unit price") == "\"unit price\"");
  CHECK(toml_key("a.b") == "\"a.b\"");
  CHECK(toml_key("say \"hi\"") == "\"say \\\"hi\\\"\"");
  CHECK(toml_key("back\\slash") == "\"back\\\\slash\"");
  CHECK(toml_key("prix €") == "\"prix €\"");
  CHECK(toml_key("é") == "\"é\"");
  CHECK(toml_key("") == "\"\"");
  CHECK(toml_key("tab\there\x01") == "\"tab\\there\\u0001\"");
  CHECK(toml_string("decimal(12,2)") == "\"decimal(12,2)\"");
}

TEST_CASE("a table's section header as messages suggest it parses back to that table") {
  // Names with quotes, dots and spaces: the header pasted as printed finds the table.
  const std::string source = "eu-shop";
  const std::string table = "Sch.ema \"q\".T \u00e4.b\"le";
  const std::string header = table_header(source, table);
  CHECK(header == "[sources.eu-shop.tables.\"Sch.ema \\\"q\\\".T \u00e4.b\\\"le\"]");
  const std::string text = "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n"
                           "[sources.eu-shop]\nadapter = \"sqlite\"\npath = \"s.db\"\n" +
                           header + "\ncolumns = { v = \"text\" }\n";
  auto loaded = load_project_text(text, "/tmp/flotilla.toml");
  std::string said;
  for (const auto& d : loaded.diagnostics)
    said += d.message + "\n";
  INFO(said);
  REQUIRE(loaded.ok());
  const auto& src = loaded.model->sources.at(0);
  const table_config* t = find_table(src, table);
  REQUIRE(t != nullptr);
  CHECK(t->columns.size() == 1);
}

TEST_CASE("a proposed section names the table quoted and lists columns inline in order") {
  auto d = decl("shop", "", "public.orders", {{"id", "int"}, {"unit price", "decimal(12,2)"}});
  CHECK(declaration_section(d) ==
        "[sources.shop.tables.\"public.orders\"]\n"
        "columns = { id = \"int\", \"unit price\" = \"decimal(12,2)\" }\n");
  CHECK(columns_inline_table({}) == "{}");
}

TEST_CASE("inline columns are replaced in place, keeping indentation and a trailing comment") {
  const std::string text =
      "[sources.shop]\nadapter = \"sqlite\"\n\n"
      "  [ sources.shop.tables.\"orders\" ]   # the orders\n"
      "  cursor_column = \"id\"\n"
      "  columns = {total=\"decimal(18,2)\"}   # pinned\n"
      "  description = \"x\"\n";
  auto r = write_declarations(text, {decl("shop", "orders", "main.orders", id_total)});
  REQUIRE(r);
  CHECK(r->edits == std::vector{declaration_edit::replaced_columns});
  CHECK(r->text ==
        "[sources.shop]\nadapter = \"sqlite\"\n\n"
        "  [ sources.shop.tables.\"orders\" ]   # the orders\n"
        "  cursor_column = \"id\"\n"
        "  columns = { id = \"int\", total = \"decimal(12,2)\" }   # pinned\n"
        "  description = \"x\"\n");
}

TEST_CASE("a section without columns gets them right after its header, indented like its keys") {
  const std::string text =
      "[sources.shop]\nadapter = \"sqlite\"\n"
      "[sources.shop.tables.orders]\n"
      "    # incremental\n"
      "    cursor_column = \"id\"\n";
  CHECK(edited(text, {decl("shop", "orders", "orders", id_total)}) ==
        "[sources.shop]\nadapter = \"sqlite\"\n"
        "[sources.shop.tables.orders]\n"
        "    columns = { id = \"int\", total = \"decimal(12,2)\" }\n"
        "    # incremental\n"
        "    cursor_column = \"id\"\n");
}

TEST_CASE("an empty section at the end of a file without a final newline gets its columns") {
  CHECK(edited("[sources.shop]\nadapter = \"sqlite\"\n[sources.shop.tables.orders]",
               {decl("shop", "orders", "orders", {{"id", "int"}})}) ==
        "[sources.shop]\nadapter = \"sqlite\"\n[sources.shop.tables.orders]\n"
        "columns = { id = \"int\" }\n");
}

TEST_CASE("new sections follow the last line of their source, in order, with blank lines") {
  const std::string text =
      "# fleet\n"
      "[sources.shop]\n"
      "adapter = \"sqlite\"\n"
      "include = [\n  \"orders\",\n  \"items\",\n]   # long\n"
      "# the next source\n"
      "[sources.crm]\n"
      "adapter = \"sqlite\"\n";
  CHECK(edited(text, {decl("shop", "", "orders", {{"id", "int"}}),
                      decl("shop", "", "main.items", {{"sku", "text"}}),
                      decl("crm", "", "people", {{"name", "varchar(20)"}})}) ==
        "# fleet\n"
        "[sources.shop]\n"
        "adapter = \"sqlite\"\n"
        "include = [\n  \"orders\",\n  \"items\",\n]   # long\n"
        "\n"
        "[sources.shop.tables.\"orders\"]\n"
        "columns = { id = \"int\" }\n"
        "\n"
        "[sources.shop.tables.\"main.items\"]\n"
        "columns = { sku = \"text\" }\n"
        "\n"
        "# the next source\n"
        "[sources.crm]\n"
        "adapter = \"sqlite\"\n"
        "\n"
        "[sources.crm.tables.\"people\"]\n"
        "columns = { name = \"varchar(20)\" }\n");
}

TEST_CASE("a source's sections spread over the file: the new section follows the last one") {
  const std::string text =
      "[sources.shop]\nadapter = \"sqlite\"\n\n"
      "[targets.wh]\ndialect = \"duckdb\"\n\n"
      "[sources.shop.tables.a]\ncursor_column = \"id\"\n\n"
      "[io]\nmax_connections_per_endpoint = 2\n";
  CHECK(edited(text, {decl("shop", "", "b", {{"x", "bool"}})}) ==
        "[sources.shop]\nadapter = \"sqlite\"\n\n"
        "[targets.wh]\ndialect = \"duckdb\"\n\n"
        "[sources.shop.tables.a]\ncursor_column = \"id\"\n\n"
        "[sources.shop.tables.\"b\"]\ncolumns = { x = \"bool\" }\n\n"
        "[io]\nmax_connections_per_endpoint = 2\n");
}

TEST_CASE("a columns sub-table keeps its header and gets one line per column") {
  const std::string text =
      "[sources.shop]\nadapter = \"sqlite\"\n"
      "[sources.shop.tables.orders.columns]\n"
      "  total = \"decimal(18,2)\"  # pinned\n"
      "  note = \"text\"\n"
      "\n"
      "[io]\n";
  CHECK(edited(text, {decl("shop", "orders", "orders", id_total)}) ==
        "[sources.shop]\nadapter = \"sqlite\"\n"
        "[sources.shop.tables.orders.columns]\n"
        "  id = \"int\"\n"
        "  total = \"decimal(12,2)\"\n"
        "  # pinned\n"
        "\n"
        "[io]\n");
}

TEST_CASE("dotted column keys become one inline table") {
  const std::string text =
      "[sources.shop]\nadapter = \"sqlite\"\n"
      "[sources.shop.tables.orders]\n"
      "columns.total = \"decimal(18,2)\" # pinned\n"
      "cursor_column = \"id\"\n"
      "columns.note = \"text\"\n";
  CHECK(edited(text, {decl("shop", "orders", "orders", id_total)}) ==
        "[sources.shop]\nadapter = \"sqlite\"\n"
        "[sources.shop.tables.orders]\n"
        "columns = { id = \"int\", total = \"decimal(12,2)\" } # pinned\n"
        "cursor_column = \"id\"\n");
}

TEST_CASE("inline and dotted table sections are edited in their own form") {
  const std::string text =
      "[sources.shop]\nadapter = \"sqlite\"\n"
      "tables.a = { cursor_column = \"id\" }\n"
      "tables.b = {}\n"
      "tables.c.cursor_column = \"id\"\n"
      "tables.c.unique_key = [\"id\"]\n"
      "tables.d = { columns = { id = \"bigint\" } }\n"
      "[targets.wh]\ndialect = \"duckdb\"\n";
  auto cols = std::vector<column_declaration>{{"id", "int"}};
  CHECK(edited(text, {decl("shop", "a", "a", cols), decl("shop", "b", "b", cols),
                      decl("shop", "c", "c", cols), decl("shop", "d", "d", cols)}) ==
        "[sources.shop]\nadapter = \"sqlite\"\n"
        "tables.a = { columns = { id = \"int\" }, cursor_column = \"id\" }\n"
        "tables.b = { columns = { id = \"int\" } }\n"
        "tables.c.cursor_column = \"id\"\n"
        "tables.c.unique_key = [\"id\"]\n"
        "tables.c.columns = { id = \"int\" }\n"
        "tables.d = { columns = { id = \"int\" } }\n"
        "[targets.wh]\ndialect = \"duckdb\"\n");
}

TEST_CASE("CRLF files stay CRLF and odd column names are quoted") {
  const std::string text = "[sources.shop]\r\nadapter = \"sqlite\"\r\n";
  CHECK(edited(text, {decl("shop", "", "orders",
                           {{"unit price", "decimal(12,2)"}, {"a.b", "int"}, {"q\"", "text"}})}) ==
        "[sources.shop]\r\nadapter = \"sqlite\"\r\n\r\n"
        "[sources.shop.tables.\"orders\"]\r\n"
        "columns = { \"unit price\" = \"decimal(12,2)\", \"a.b\" = \"int\", \"q\\\"\" = \"text\" }\r\n");
}

TEST_CASE("positions count code points, after a byte order mark and non-ASCII text") {
  CHECK(edited("\xEF\xBB\xBFsources.shop.tables.o.columns = { a = \"int\" } # x\n"
               "sources.shop.adapter = \"sqlite\"\n",
               {decl("shop", "o", "o", {{"b", "text"}})}) ==
        "\xEF\xBB\xBFsources.shop.tables.o.columns = { b = \"text\" } # x\n"
        "sources.shop.adapter = \"sqlite\"\n");
  CHECK(edited("[sources.shop]\nadapter = \"sqlite\"\n"
               "tables.\"é€😀\".columns = { \"ü\" = \"int\" }   # ünï\n",
               {decl("shop", "é€😀", "é€😀", {{"ü", "bigint"}})}) ==
        "[sources.shop]\nadapter = \"sqlite\"\n"
        "tables.\"é€😀\".columns = { \"ü\" = \"bigint\" }   # ünï\n");
}

TEST_CASE("a source written as an inline table is refused, nothing is returned") {
  auto r = write_declarations("sources = { shop = { adapter = \"sqlite\" } }\n",
                              {decl("shop", "", "orders", {{"id", "int"}})});
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("inline") != std::string::npos);
  auto missing = write_declarations("[sources.crm]\nadapter = \"sqlite\"\n",
                                    {decl("shop", "", "orders", {{"id", "int"}})});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("[sources.shop]") != std::string::npos);
}

TEST_CASE("a table added to a source whose tables are an inline table says to add it inside") {
  // A [sources.shop.tables."cust"] section would not parse after tables = { ... }.
  auto r = write_declarations(
      "[sources.shop]\nadapter = \"sqlite\"\ntables = { orders = { description = \"x\" } }\n",
      {decl("shop", "", "cust", {{"id", "bigint"}})});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message,
             Catch::Contains("the tables of source 'shop' are written as an inline table") &&
                 Catch::Contains("add cust = { columns = { id = \"bigint\" } } inside its braces"));
}

TEST_CASE("a section written with dotted keys inside an inline table is refused") {
  auto r = write_declarations(
      "[sources.shop]\nadapter = \"sqlite\"\ntables = { o.cursor_column = \"id\" }\n",
      {decl("shop", "o", "o", {{"id", "int"}})});
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("inline") != std::string::npos);
}

TEST_CASE("the edited file loads and declares the written columns in order") {
  const std::string text =
      "[targets.wh]\ndialect = \"duckdb\"\npath = \"wh.duckdb\"\n\n"
      "[sources.shop]\nadapter = \"sqlite\"\npath = \"shop.db\"\n\n"
      "[sources.shop.tables.orders]\ncontract = \"enforced\"\ncursor_column = \"id\"\n"
      "columns = { id = \"int\" }\n";
  const std::vector<column_declaration> cols{
      {"id", "int"}, {"zeta", "text"}, {"Prix €", "decimal(12,2)"}, {"a.b", "bool"}};
  auto out = edited(text, {decl("shop", "orders", "orders", cols),
                           decl("shop", "", "customers", {{"email", "varchar(80)"}})});
  auto loaded = load_project_text(out, "/tmp/flotilla.toml");
  REQUIRE(loaded.ok());
  const auto* src = loaded.model->find_source("shop");
  REQUIRE(src != nullptr);
  const auto* orders = find_table(*src, "orders");
  REQUIRE(orders != nullptr);
  REQUIRE(orders->columns.size() == cols.size());
  for (std::size_t i = 0; i < cols.size(); ++i) {
    CHECK(orders->columns[i].name == cols[i].name);
    CHECK(orders->columns[i].type_text == cols[i].type);
  }
  const auto* customers = find_table(*src, "customers");
  REQUIRE(customers != nullptr);
  CHECK(customers->columns.at(0).type_text == "varchar(80)");
}

TEST_CASE("files are replaced atomically, keeping their permission bits") {
  const fs::path dir = fs::temp_directory_path() / ("flotilla_toml_edit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "flotilla.toml";
  std::ofstream(file) << "old\n";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  auto r = write_file_atomically(file.string(), "new\ntext\n");
  REQUIRE(r);
  CHECK(read(file) == "new\ntext\n");
  CHECK((fs::status(file).permissions() & fs::perms::mask) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
    ++entries;
  CHECK(entries == 1);  // no temporary file left behind

  SECTION("a symbolic link is followed and stays a link") {
    const fs::path link = dir / "link.toml";
    fs::create_symlink(file, link);
    REQUIRE(write_file_atomically(link.string(), "via link\n"));
    CHECK(fs::is_symlink(link));
    CHECK(read(file) == "via link\n");
  }
  fs::remove_all(dir);
}

TEST_CASE("a section already declaring exactly the proposal is left as it is and said unchanged") {
  const std::string text =
      "[sources.shop]\nadapter = \"sqlite\"\n\n"
      "[sources.shop.tables.orders]\n"
      "columns = {id = \"int\",   total=\"decimal(12,2)\"}   # as written by hand\n"
      "[sources.shop.tables.items]\n"
      "columns = { id = \"int\" }\n";
  auto r = write_declarations(text, {decl("shop", "orders", "orders", id_total),
                                     decl("shop", "items", "items", id_total)});
  REQUIRE(r);
  CHECK(r->edits ==
        std::vector{declaration_edit::unchanged, declaration_edit::replaced_columns});
  CHECK(r->text.find("{id = \"int\",   total=\"decimal(12,2)\"}   # as written by hand") !=
        std::string::npos);
  // Another order is another declaration (the order is the CREATE's).
  r = write_declarations(text, {decl("shop", "orders", "orders", {{"total", "decimal(12,2)"}, {"id", "int"}})});
  REQUIRE(r);
  CHECK(r->edits == std::vector{declaration_edit::replaced_columns});
}
