#pragma once
/// PostgreSQL COPY ... TO STDOUT text format, the parts the postgres adapter needs:
/// splitting a data row into fields and undoing the format's escapes. Pure.
/// https://www.postgresql.org/docs/15/sql-copy.html#id-1.9.3.55.9.2

#include <optional>
#include <string>
#include <string_view>

namespace flotilla::sources {

/// Calls `field(index, text, is_null)` for each tab-separated field of one row (without
/// its trailing newline). `text` is still escaped; a field is null when it is exactly \N.
/// A raw tab never occurs inside a field (COPY writes it as \t), so splitting is exact.
template <class F>
void split_copy_row(std::string_view row, F&& field) {
  std::size_t index = 0;
  std::size_t start = 0;
  while (true) {
    std::size_t tab = row.find('\t', start);
    std::string_view text = row.substr(start, tab == std::string_view::npos ? tab : tab - start);
    field(index++, text, text == "\\N");
    if (tab == std::string_view::npos)
      break;
    start = tab + 1;
  }
}

/// Undoes COPY's backslash escapes: \b \f \n \r \t \v \\, octal \ooo and hex \xhh; any
/// other escaped character stands for itself.
void unescape_copy(std::string_view text, std::string& out);

/// Raw bytes from bytea's hex output ("\x00ff"), after unescape_copy; nullopt when the
/// text is not in that form.
[[nodiscard]] std::optional<std::string> decode_bytea_hex(std::string_view text);

}  // namespace flotilla::sources
