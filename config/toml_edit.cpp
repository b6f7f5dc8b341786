#include "config/toml_edit.hpp"
#include "schema/toml_text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace flotilla::config {
namespace {

namespace fs = std::filesystem;

using error = std::unexpected<edit_error>;

error fail(std::string message) {
  return error(edit_error{std::move(message)});
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

/// Bytes of the UTF-8 sequence a lead byte starts (1 for anything malformed).
std::size_t utf8_length(unsigned char lead) {
  if ((lead & 0xE0) == 0xC0)
    return 2;
  if ((lead & 0xF0) == 0xE0)
    return 3;
  if ((lead & 0xF8) == 0xF0)
    return 4;
  return 1;
}

std::string_view indentation(std::string_view line) {
  std::size_t n = 0;
  while (n < line.size() && is_blank(line[n]))
    ++n;
  return line.substr(0, n);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_blank(s.front()) || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (is_blank(s.back()) || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// The original text by lines. toml++ positions are 1-based lines and 1-based columns
/// counted in code points (a UTF-8 byte order mark is not counted); edits need bytes.
class text_lines {
 public:
  explicit text_lines(std::string_view text) : text_(text) {
    starts_.push_back(0);
    for (std::size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n')
        starts_.push_back(i + 1);
    bom_ = text.starts_with("\xEF\xBB\xBF");
    eol_ = text.find("\r\n") != std::string_view::npos ? "\r\n" : "\n";
  }

  /// Lines in the text; a final line ending does not start another line.
  [[nodiscard]] std::uint32_t count() const {
    const bool final_eol = !text_.empty() && text_.back() == '\n';
    return static_cast<std::uint32_t>(final_eol ? starts_.size() - 1 : starts_.size());
  }
  [[nodiscard]] std::size_t begin(std::uint32_t line) const {
    return starts_[std::clamp<std::size_t>(line, 1, starts_.size()) - 1];
  }
  /// Just past the line's line ending (the end of the text for the last line).
  [[nodiscard]] std::size_t next(std::uint32_t line) const {
    return line < starts_.size() ? starts_[line] : text_.size();
  }
  /// Where the line's line ending starts.
  [[nodiscard]] std::size_t end(std::uint32_t line) const {
    std::size_t e = next(line);
    const std::size_t b = begin(line);
    if (e > b && text_[e - 1] == '\n')
      --e;
    if (e > b && text_[e - 1] == '\r')
      --e;
    return e;
  }
  [[nodiscard]] std::string_view line(std::uint32_t n) const {
    return text_.substr(begin(n), end(n) - begin(n));
  }
  [[nodiscard]] bool has_eol(std::uint32_t line) const { return next(line) != end(line); }
  [[nodiscard]] std::size_t offset(const toml::source_position& p) const {
    std::size_t at = begin(p.line);
    if (p.line == 1 && bom_)
      at += 3;
    for (std::uint32_t c = 1; c < p.column && at < text_.size(); ++c)
      at += utf8_length(static_cast<unsigned char>(text_[at]));
    return std::min(at, text_.size());
  }
  [[nodiscard]] std::string_view slice(std::size_t from, std::size_t to) const {
    return text_.substr(from, to - from);
  }
  [[nodiscard]] char at(std::size_t offset) const {
    return offset < text_.size() ? text_[offset] : '\0';
  }
  [[nodiscard]] const std::string& eol() const { return eol_; }

 private:
  std::string_view text_;
  std::vector<std::size_t> starts_;
  bool bom_ = false;
  std::string eol_;
};

/// Replace [begin, end) with text; begin == end inserts.
struct text_edit {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::string text;
  std::size_t seq = 0;  ///< insertions at one offset keep this order
};

struct entry {
  const toml::key* key;
  const toml::node* value;
};

bool before(const toml::source_position& a, const toml::source_position& b) {
  return std::tie(a.line, a.column) < std::tie(b.line, b.column);
}

std::vector<entry> in_file_order(const toml::table& t) {
  std::vector<entry> out;
  for (auto&& [k, v] : t)
    out.push_back(entry{&k, &v});
  std::stable_sort(out.begin(), out.end(), [](const entry& a, const entry& b) {
    return before(a.key->source().begin, b.key->source().begin);
  });
  return out;
}

const std::string& section_name(const table_declaration& d) {
  return d.section.empty() ? d.table : d.section;
}

std::optional<entry> find_entry(const toml::table& t, std::string_view name) {
  for (auto&& [k, v] : t)
    if (k.str() == name)
      return entry{&k, &v};
  return std::nullopt;
}

/// The last line any part of `n` is written on.
std::uint32_t last_line(const toml::node& n) {
  std::uint32_t m = n.source().end.line;
  if (const auto* t = n.as_table()) {
    for (auto&& [k, v] : *t)
      m = std::max({m, k.source().end.line, last_line(v)});
  } else if (const auto* a = n.as_array()) {
    for (const auto& v : *a)
      m = std::max(m, last_line(v));
  }
  return m;
}

/// Builds the edits for every declaration against the original text, then applies them.
class declaration_writer {
 public:
  declaration_writer(std::string_view text, const toml::table& doc) : lines_(text), doc_(doc) {}

  [[nodiscard]] std::expected<declaration_edit, edit_error> add(const table_declaration& d) {
    const auto* sources = doc_.get_as<toml::table>("sources");
    const toml::table* src = sources ? sources->get_as<toml::table>(d.source) : nullptr;
    if (!src)
      return fail(fmt::format("the file has no [sources.{}] section", d.source));
    const toml::table* tables = src->get_as<toml::table>("tables");
    const std::string& name = section_name(d);
    std::optional<entry> section = tables ? find_entry(*tables, name) : std::nullopt;
    if (!section) {
      if (!d.section.empty())
        return fail(fmt::format("source '{}' has no table section '{}'", d.source, d.section));
      return add_section(*src, tables, d);
    }
    const toml::table* sec = section->value->as_table();
    if (!sec)
      return fail(fmt::format("tables.{} of source '{}' is not a table", toml_key(name), d.source));
    const std::string columns = columns_inline_table(d.columns);
    if (auto cols = find_entry(*sec, "columns")) {
      if (declares_already(*cols, d))
        return declaration_edit::unchanged;
      auto done = replace_columns(*cols, d, columns);
      if (!done)
        return std::unexpected(done.error());
      return declaration_edit::replaced_columns;
    }
    auto done = add_columns(*tables, *section, columns, d);
    if (!done)
      return std::unexpected(done.error());
    return declaration_edit::added_columns;
  }

  /// The new sections, one insertion per source, after the last line of its sections.
  void place_new_sections() {
    for (const auto& [line, body] : appended_) {
      std::string text;
      if (!lines_.has_eol(line))
        text += lines_.eol();
      text += body;
      if (line < lines_.count() && !trim(lines_.line(line + 1)).empty())
        text += lines_.eol();
      insert(lines_.next(line), std::move(text));
    }
  }

  [[nodiscard]] std::expected<std::string, edit_error> apply(std::string_view original) {
    // By position; at one offset, insertions go before a range replaced there.
    std::stable_sort(edits_.begin(), edits_.end(), [](const text_edit& a, const text_edit& b) {
      const bool a_replaces = a.end > a.begin;
      const bool b_replaces = b.end > b.begin;
      return std::tie(a.begin, a_replaces, a.seq) < std::tie(b.begin, b_replaces, b.seq);
    });
    for (std::size_t i = 1; i < edits_.size(); ++i)
      if (edits_[i].begin < edits_[i - 1].end)
        return fail("two declarations would edit the same part of the file");
    std::string out;
    out.reserve(original.size() + 256);
    std::size_t at = 0;
    for (const auto& e : edits_) {
      out.append(original.substr(at, e.begin - at));
      out += e.text;
      at = e.end;
    }
    out.append(original.substr(at));
    return out;
  }

 private:
  void replace(std::size_t begin, std::size_t end, std::string text) {
    edits_.push_back(text_edit{begin, end, std::move(text), edits_.size()});
  }
  void insert(std::size_t at, std::string text) { replace(at, at, std::move(text)); }

  /// Inserts whole lines after `line` (adding the line ending it may lack at the end
  /// of the file).
  void insert_after(std::uint32_t line, const std::string& text) {
    insert(lines_.next(line), lines_.has_eol(line) ? text : lines_.eol() + text);
  }

  /// True when `t` is defined by its own `[header]` line: the header starts where the
  /// table's source starts, and `key` is its last component.
  [[nodiscard]] bool has_own_header(const toml::table& t, const toml::key& key) const {
    if (t.is_inline() || lines_.at(lines_.offset(t.source().begin)) != '[')
      return false;
    if (key.source().begin.line != t.source().begin.line)
      return false;
    std::size_t after = lines_.offset(key.source().end);
    while (is_blank(lines_.at(after)))
      ++after;
    return lines_.at(after) == ']';
  }

  /// Removes the lines of one `key = value` statement. The text before the key on its
  /// line may only be blanks, or with `dotted_prefix` a dotted key path ending in '.';
  /// after the value only blanks and a comment, which is kept on a line of its own.
  [[nodiscard]] std::expected<void, edit_error> remove_statement(const entry& e, bool dotted_prefix,
                                                                 std::string_view what) {
    const auto kb = e.key->source().begin;
    const auto ve = e.value->source().end;
    const std::string_view prefix =
        trim(lines_.slice(lines_.begin(kb.line), lines_.offset(kb)));
    const std::string_view suffix = trim(lines_.slice(lines_.offset(ve), lines_.end(ve.line)));
    const bool prefix_ok = prefix.empty() || (dotted_prefix && prefix.back() == '.');
    if (!prefix_ok || (!suffix.empty() && suffix.front() != '#'))
      return fail(fmt::format("{} shares its line with other TOML; edit it by hand", what));
    std::string keep;
    if (!suffix.empty())
      keep = std::string(indentation(lines_.line(kb.line))) + std::string(suffix) +
             std::string(lines_.slice(lines_.end(ve.line), lines_.next(ve.line)));
    replace(lines_.begin(kb.line), lines_.next(ve.line), std::move(keep));
    return {};
  }

  /// The section's `columns` name exactly the declaration's columns, in its order, with
  /// its types (as written: the same text).
  static bool declares_already(const entry& cols, const table_declaration& d) {
    const auto* t = cols.value->as_table();
    if (t == nullptr || t->size() != d.columns.size())
      return false;
    const auto entries = in_file_order(*t);
    if (entries.size() != d.columns.size())
      return false;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto* v = entries[i].value->as_string();
      if (entries[i].key->str() != d.columns[i].name || v == nullptr ||
          v->get() != d.columns[i].type)
        return false;
    }
    return true;
  }

  [[nodiscard]] std::expected<void, edit_error> replace_columns(const entry& cols,
                                                                const table_declaration& d,
                                                                const std::string& columns) {
    const auto* t = cols.value->as_table();
    const std::string what = fmt::format("the columns of table '{}'", section_name(d));
    if (t == nullptr || t->is_inline()) {
      // `columns = { ... }`: the statement in place; what surrounds it stays.
      replace(lines_.offset(cols.key->source().begin), lines_.offset(cols.value->source().end),
              "columns = " + columns);
      return {};
    }
    const auto entries = in_file_order(*t);
    if (has_own_header(*t, *cols.key)) {
      // `[... .columns]` then `name = "type"` lines: keep the header, rewrite its body.
      const std::uint32_t header = t->source().begin.line;
      std::string indent(entries.empty() ? indentation(lines_.line(header))
                                         : indentation(lines_.line(entries.front().key->source().begin.line)));
      for (const auto& e : entries)
        if (auto r = remove_statement(e, false, what); !r)
          return r;
      std::string body;
      for (const auto& c : d.columns)
        body += indent + toml_key(c.name) + " = " + toml_string(c.type) + lines_.eol();
      insert_after(header, body);
      return {};
    }
    // Dotted `columns.name = "type"` lines: the first becomes `columns = { ... }`, the
    // others go.
    if (entries.empty() || entries.front().key->source().begin.line != cols.key->source().begin.line)
      return fail(fmt::format("{} are written in a form that cannot be edited; edit them by hand",
                              what));
    const auto& first = entries.front();
    const std::string_view suffix =
        trim(lines_.slice(lines_.offset(first.value->source().end),
                          lines_.end(first.value->source().end.line)));
    if (!suffix.empty() && suffix.front() != '#')
      return fail(fmt::format("{} share a line with other TOML; edit them by hand", what));
    replace(lines_.offset(cols.key->source().begin), lines_.offset(first.value->source().end),
            "columns = " + columns);
    for (std::size_t i = 1; i < entries.size(); ++i)
      if (auto r = remove_statement(entries[i], true, what); !r)
        return r;
    return {};
  }

  [[nodiscard]] std::expected<void, edit_error> add_columns(const toml::table& tables,
                                                            const entry& section,
                                                            const std::string& columns,
                                                            const table_declaration& d) {
    const auto& sec = *section.value->as_table();
    const auto entries = in_file_order(sec);
    if (sec.is_inline()) {
      // `tables.orders = { ... }`: the entry goes inside the braces.
      const std::size_t open = lines_.offset(sec.source().begin);
      if (lines_.at(open) != '{')
        return fail(fmt::format("the section of table '{}' cannot be edited; edit it by hand",
                                section_name(d)));
      if (entries.empty())
        replace(open, lines_.offset(sec.source().end), "{ columns = " + columns + " }");
      else
        insert(lines_.offset(entries.front().key->source().begin), "columns = " + columns + ", ");
      return {};
    }
    if (tables.is_inline())
      return fail(fmt::format("the section of table '{}' is inside an inline table; edit it by hand",
                              section_name(d)));
    if (has_own_header(sec, *section.key)) {
      const std::uint32_t header = sec.source().begin.line;
      std::string_view indent = indentation(lines_.line(header));
      for (const auto& e : entries)
        if (e.key->source().begin.line > header) {
          indent = indentation(lines_.line(e.key->source().begin.line));
          break;
        }
      insert_after(header, std::string(indent) + "columns = " + columns + lines_.eol());
      return {};
    }
    // Written with dotted keys (`tables.orders.cursor_column = ...`): one more dotted
    // line, with the same key path, after the section's last line.
    if (entries.empty())
      return fail(fmt::format("the section of table '{}' cannot be edited; edit it by hand",
                              section_name(d)));
    const auto kb = entries.front().key->source().begin;
    const std::string_view line = lines_.line(kb.line);
    const std::string_view indent = indentation(line);
    const std::string_view path =
        lines_.slice(lines_.begin(kb.line) + indent.size(), lines_.offset(kb));
    if (trim(path).empty() || trim(path).back() != '.')
      return fail(fmt::format("the section of table '{}' cannot be edited; edit it by hand",
                              section_name(d)));
    std::uint32_t last = 0;
    for (const auto& e : entries)
      last = std::max(last, last_line(*e.value));
    insert_after(last, std::string(indent) + std::string(path) + "columns = " + columns + lines_.eol());
    return {};
  }

  [[nodiscard]] std::expected<declaration_edit, edit_error> add_section(const toml::table& src,
                                                                        const toml::table* tables,
                                                                        const table_declaration& d) {
    if (src.is_inline())
      return fail(fmt::format(
          "source '{}' is written as an inline table; add the section of '{}' by hand", d.source,
          d.table));
    // A table defined inline takes no section headers after it: the entry goes inside.
    if (tables && tables->is_inline())
      return fail(fmt::format(
          "the tables of source '{}' are written as an inline table (tables = {{ ... }}), "
          "which no section of a table may extend; add {} = {{ columns = {} }} inside its "
          "braces by hand, or write each of its entries as a section",
          d.source, toml_key(d.table), columns_inline_table(d.columns)));
    return add_section_block(src, d);
  }

  [[nodiscard]] declaration_edit add_section_block(const toml::table& src,
                                                   const table_declaration& d) {
    const std::uint32_t line = last_line(src);
    std::string& body = appended_[line];
    body += lines_.eol() + table_header(d.source, d.table) + lines_.eol() + "columns = " +
            columns_inline_table(d.columns) + lines_.eol();
    return declaration_edit::added_section;
  }

  text_lines lines_;
  const toml::table& doc_;
  std::vector<text_edit> edits_;
  /// New sections by the line they follow: one block per source.
  std::map<std::uint32_t, std::string> appended_;
};

/// `doc` with each declaration's columns set: what the edited file must parse to.
toml::table expected_document(const toml::table& doc, const std::vector<table_declaration>& decls) {
  toml::table out = doc;
  for (const auto& d : decls) {
    auto* src = out.get_as<toml::table>("sources")->get_as<toml::table>(d.source);
    if (!src->contains("tables"))
      src->insert("tables", toml::table{});
    auto* tables = src->get_as<toml::table>("tables");
    const std::string& name = section_name(d);
    if (!tables->contains(name))
      tables->insert(name, toml::table{});
    toml::table cols;
    for (const auto& c : d.columns)
      cols.insert_or_assign(c.name, c.type);
    tables->get_as<toml::table>(name)->insert_or_assign("columns", std::move(cols));
  }
  return out;
}

/// The declared column names of a table of `doc`, in the order they are written.
std::vector<std::string> written_order(const toml::table& doc, const table_declaration& d) {
  std::vector<std::string> out;
  const std::string& name = d.section.empty() ? d.table : d.section;
  const auto* cols = doc["sources"][d.source]["tables"][name]["columns"].as_table();
  if (cols)
    for (const auto& e : in_file_order(*cols))
      out.emplace_back(e.key->str());
  return out;
}

std::string errno_text(int e) {
  return std::strerror(e);
}

}  // namespace

std::string_view to_string(declaration_edit e) {
  switch (e) {
    case declaration_edit::replaced_columns: return "replaced_columns";
    case declaration_edit::unchanged: return "unchanged";
    case declaration_edit::added_columns: return "added_columns";
    case declaration_edit::added_section: return "added_section";
  }
  return "unknown";
}

std::string toml_key(std::string_view name) {
  return schema::toml_key(name);
}

std::string toml_string(std::string_view value) {
  return schema::toml_string(value);
}

std::string columns_inline_table(const std::vector<column_declaration>& columns) {
  if (columns.empty())
    return "{}";
  std::string out = "{ ";
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += toml_key(columns[i].name) + " = " + toml_string(columns[i].type);
  }
  return out + " }";
}

std::string table_header(std::string_view source, std::string_view table) {
  return schema::table_header(source, table);
}

std::string declaration_section(const table_declaration& d) {
  return table_header(d.source, d.section.empty() ? d.table : d.section) + "\ncolumns = " +
         columns_inline_table(d.columns) + "\n";
}

std::expected<edited_text, edit_error> write_declarations(
    std::string_view text, const std::vector<table_declaration>& declarations) {
  toml::table doc;
  try {
    doc = toml::parse(text);
  } catch (const toml::parse_error& e) {
    return fail(fmt::format("the file is not valid TOML: {}", e.description()));
  }
  declaration_writer writer(text, doc);
  edited_text out;
  for (const auto& d : declarations) {
    auto done = writer.add(d);
    if (!done)
      return std::unexpected(done.error());
    out.edits.push_back(*done);
  }
  writer.place_new_sections();
  auto edited = writer.apply(text);
  if (!edited)
    return std::unexpected(edited.error());
  out.text = std::move(*edited);

  // The edit must change the declared columns and nothing else.
  toml::table after;
  try {
    after = toml::parse(out.text);
  } catch (const toml::parse_error& e) {
    return fail(fmt::format("the edited file would not be valid TOML ({}); nothing was changed",
                            e.description()));
  }
  if (after != expected_document(doc, declarations))
    return fail("the edit would change more than the declared columns; nothing was changed");
  for (const auto& d : declarations) {
    std::vector<std::string> want;
    for (const auto& c : d.columns)
      want.push_back(c.name);
    if (written_order(after, d) != want)
      return fail(fmt::format("the columns of table '{}' would not keep their order",
                              section_name(d)));
  }
  return out;
}

std::expected<void, edit_error> write_file_atomically(const std::string& path,
                                                      std::string_view text) {
  std::error_code ec;
  fs::path target(path);
  if (fs::is_symlink(target, ec)) {
    target = fs::canonical(target, ec);
    if (ec)
      return fail(fmt::format("cannot follow the link '{}': {}", path, ec.message()));
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    return fail(fmt::format("cannot create a temporary file in '{}': {}", dir.string(),
                            errno_text(errno)));
  auto abandon = [&](std::string message) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(std::move(message));
  };
  struct stat st{};
  const mode_t mode = ::stat(target.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644;
  if (::fchmod(fd, mode) != 0)
    return abandon(fmt::format("cannot set the mode of '{}': {}", tmp, errno_text(errno)));
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return abandon(fmt::format("cannot write '{}': {}", tmp, errno_text(errno)));
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0)
    return abandon(fmt::format("cannot flush '{}': {}", tmp, errno_text(errno)));
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return fail(fmt::format("cannot close '{}': {}", tmp, errno_text(errno)));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return fail(fmt::format("cannot replace '{}': {}", target.string(), errno_text(e)));
  }
  // The rename itself is durable once the directory is flushed.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace flotilla::config
