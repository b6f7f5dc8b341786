#pragma once
/// Editing flotilla.toml in place, for `flotilla contract generate --write`: writes the
/// declared columns of table sections and keeps every other byte of the file as it was
/// (comments, order, spacing, blank lines, line endings). The edits are placed by the
/// TOML parser's source positions and applied to the original text; the document is
/// never re-serialised. docs/contracts.md states the rules.
///
/// Everything here is pure except write_file_atomically.

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::config {

/// One column of a declaration: `total = "decimal(12,2)"`.
struct column_declaration {
  std::string name;
  std::string type;  ///< portable type name, written as a TOML string
};

/// The columns to declare for one table.
struct table_declaration {
  std::string source;  ///< the [sources.NAME] the table belongs to
  /// The table's existing section, exactly as the loader named it (table_config::name);
  /// empty when the table has no section yet. Default: ""
  std::string section;
  /// The name of a new section (the catalog name, "public.orders"); used only when
  /// `section` is empty.
  std::string table;
  std::vector<column_declaration> columns;  ///< in the order to write them
};

/// What writing a declaration did to the file.
enum class declaration_edit : std::uint8_t {
  replaced_columns,  ///< the section's `columns` were replaced
  added_columns,     ///< the section had no `columns`; a `columns = ...` line was added
  added_section,     ///< a new section was appended after its source's last line
  unchanged,         ///< the section's `columns` already declare exactly these
};

[[nodiscard]] std::string_view to_string(declaration_edit e);

struct edited_text {
  std::string text;
  std::vector<declaration_edit> edits;  ///< one per declaration, in the same order
};

struct edit_error {
  std::string message;
};

/// A TOML key: bare when it is one ([A-Za-z0-9_-]+), else a quoted basic string.
[[nodiscard]] std::string toml_key(std::string_view name);

/// A TOML basic string with `"`, `\` and control characters escaped; other characters,
/// UTF-8 included, are kept as they are.
[[nodiscard]] std::string toml_string(std::string_view value);

/// `{ id = "int", total = "decimal(12,2)" }` (`{}` when there are no columns).
[[nodiscard]] std::string columns_inline_table(const std::vector<column_declaration>& columns);

/// `[sources.shop.tables."public.orders"]`: the table name is always quoted.
[[nodiscard]] std::string table_header(std::string_view source, std::string_view table);

/// The section proposing a declaration: its header line and its `columns = ...` line,
/// each ending with '\n'.
[[nodiscard]] std::string declaration_section(const table_declaration& d);

/// Writes each declaration's `columns` into `text`, a flotilla.toml that parses:
/// - a section with `columns` has them replaced where they are written (an inline table
///   in place, keeping what surrounds it on its line; dotted `columns.x = ...` lines by
///   one `columns = { ... }` line; a `[... .columns]` sub-table keeps its header and
///   gets one `name = "type"` line per column);
/// - a section without `columns` gets a `columns = { ... }` line right after its header
///   (indented like the section's first key), or the entry inside its braces when the
///   section is an inline table, or a dotted line after its last one when the section
///   is written with dotted keys;
/// - a table without a section gets a new section after the last line of its source's
///   sections, preceded by a blank line (and followed by one when the next line is not
///   blank). New sections of one source keep the order of `declarations`.
/// New lines use the file's line ending (CRLF when the file has any). Before returning,
/// the result is parsed and compared with the original: it must differ only in the
/// declared columns, else nothing is returned but an error.
[[nodiscard]] std::expected<edited_text, edit_error> write_declarations(
    std::string_view text, const std::vector<table_declaration>& declarations);

/// Replaces the file at `path` with `text` atomically: a temporary file in the same
/// directory, flushed to disk, then renamed over it (a symbolic link is followed, so
/// the link stays). The file's permission bits are kept.
[[nodiscard]] std::expected<void, edit_error> write_file_atomically(const std::string& path,
                                                                    std::string_view text);

}  // namespace flotilla::config
