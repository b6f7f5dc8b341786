#pragma once
/// Selecting tables: --filter arguments, include/exclude/table sections, and where a
/// selected table lands in its target (schema templates).
///
/// Name matching rule (include, exclude, table sections, `table=` filters): a pattern
/// matches a catalog name when both are compared whole if both are qualified
/// ("schema.table") or both are bare; when only one of them is qualified, only the
/// table parts (after the first '.') are compared, so "orders" matches "public.orders"
/// and "public.orders" matches a bare "orders" (on a source whose names are bare, SQLite,
/// csv and json, names and patterns compare whole: see bare_names). `*` matches any run of characters
/// (including none and including '.'); table names compare ASCII case-insensitively.
/// Tag and source values in filters compare exactly (with `*` globs).

#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "config/errc.hpp"
#include "config/model.hpp"

namespace flotilla::config {

/// One `--filter key=value`. Keys: a tag name, `source`, or `table`.
struct filter {
  std::string key;
  std::string value;  ///< may contain `*` globs

  friend bool operator==(const filter&, const filter&) = default;
};

/// Parses "client=acme" (spaces around key and value are trimmed; the value may contain
/// '='). A missing '=' or an empty key is FLT-C020.
[[nodiscard]] std::expected<filter, diagnostic> parse_filter(std::string_view text);

/// Parses every argument, collecting every error.
[[nodiscard]] std::expected<std::vector<filter>, std::vector<diagnostic>> parse_filters(
    const std::vector<std::string>& texts);

/// FLT-C021 for each filter key that is neither `source`, `table` nor a tag of any
/// source (a typo would otherwise select nothing, silently). The nearest key is suggested.
[[nodiscard]] std::vector<diagnostic> check_filters(const project& p,
                                                    const std::vector<filter>& filters);

/// `*` glob match, exact otherwise.
/// The same name, ASCII case aside (as names are compared throughout the config).
[[nodiscard]] bool iequals(std::string_view a, std::string_view b);
[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view text);

/// The name matching rule above: `pattern` (config name or glob) against a catalog name.
/// `bare`: the source's names are bare (bare_names), and a dot in one is part of the
/// name: pattern and name are compared whole (`sales.2024` matches the file
/// `sales.2024.csv`, never `2024.csv`).
[[nodiscard]] bool table_name_matches(std::string_view pattern, std::string_view catalog_name,
                                      bool bare = false);
/// Whether the include/exclude `pattern` surely covers `name`, a name flotilla.toml
/// gives (a table section, an include entry) rather than one of the catalog's: as
/// table_name_matches, except that a schema-qualified pattern ("audit.*") does not cover a
/// bare name ("orders", which may be public.orders as well as audit.orders).
[[nodiscard]] bool pattern_covers_name(std::string_view pattern, std::string_view name, bool bare);

/// A source whose catalog names are bare (SQLite, csv, json): a dot in a table name or a
/// file stem is part of it, never a schema's end.
[[nodiscard]] bool bare_names(const source_config& s);

/// True unless a `source=` or tag filter rules the source out. A tag filter on a key the
/// source has no tag for rules it out. `table=` filters are not checked here.
[[nodiscard]] bool source_may_match(const source_config& s, const std::vector<filter>& filters);

/// The section for a catalog name: an exact (case-insensitive) match first, then the
/// first section matching by the name rule; null when none. Section names are literal
/// names: a `*` in one is not a glob.
[[nodiscard]] const table_config* find_table(const source_config& s, std::string_view catalog_name);
/// find_table for a name of a source whose catalog names are `catalog`: a section that
/// matches `catalog_name` only ignoring case, and is spelled exactly as another name of
/// the catalog (`public.Orders` beside `public.orders` on PostgreSQL, `Sales.csv` beside
/// `sales.csv`), is that table's alone.
[[nodiscard]] const table_config* find_table(const source_config& s, std::string_view catalog_name,
                                             const std::vector<std::string>& catalog);

/// Builds s.table_lookup so find_table costs O(1) on sources with thousands of sections.
/// The loader calls it; call it again after changing s.tables in code.
void index_tables(source_config& s);

/// The catalog names selected, in catalog order: a name is selected when it has a table
/// section or matches an include pattern, and no exclude pattern matches it (exclude
/// wins, so it can switch off a table that has a section), and every `table=` filter
/// matches it. Returns nothing when source_may_match is false.
[[nodiscard]] std::vector<std::string> select_tables(const source_config& s,
                                                     const std::vector<std::string>& catalog_table_names,
                                                     const std::vector<filter>& filters);

/// A table flotilla.toml names (a table section, or an include entry without `*`) that
/// matches no table of the source's catalog: a typo, or a table gone from the source.
struct unmatched_name {
  std::string name;
  std::string where;    ///< "section" or "include"
  std::string nearest;  ///< the catalog name it most likely meant; empty when none is close
};

/// The names above for a source, in file order (sections, then include), leaving out
/// those an exclude pattern or a `table=` filter rules out; none when source_may_match
/// is false.
[[nodiscard]] std::vector<unmatched_name> unmatched_table_names(
    const source_config& s, const std::vector<std::string>& catalog_table_names,
    const std::vector<filter>& filters);

/// select_tables as positions in `catalog_table_names`, ascending.
[[nodiscard]] std::vector<std::size_t> select_table_indices(
    const source_config& s, const std::vector<std::string>& catalog_table_names,
    const std::vector<filter>& filters);

struct template_error {
  errc code = errc::unknown_placeholder;  ///< unknown_placeholder or malformed_template
  std::string placeholder;                ///< the unknown name, when unknown_placeholder
  std::string message;
};

/// The placeholder names of a template, in order; FLT-C010 when braces do not balance
/// or a placeholder is empty. Placeholders are `{source}` and `{<tag name>}`.
[[nodiscard]] std::expected<std::vector<std::string>, template_error> template_placeholders(
    std::string_view templ);

/// Expands `{source}` and `{<tag>}` placeholders of a schema template for a source.
[[nodiscard]] std::expected<std::string, template_error> expand_template(
    std::string_view templ, const source_config& s);

/// The target schema of a source: its target's schema template expanded. Throws
/// std::invalid_argument on a template the loader would have rejected.
[[nodiscard]] std::string target_schema(const target_config& t, const source_config& s);

/// Where a table lands; the fields match dialects::table_ref.
struct target_table_name {
  std::string catalog;  ///< target database/catalog; empty: none
  std::string schema;   ///< empty for sqlite
  std::string name;
};

/// True for the adapters whose catalog names are "schema.table" (postgres, duckdb); the
/// others' (sqlite, csv, json) are bare, a dot in one being part of the table's name.
[[nodiscard]] bool has_schemas(adapter_kind a);

/// The name DuckDB gives the database in the file `path`: the file name up to its first
/// '.' (leading dots skipped), with "_db" after its own names main, system and temp;
/// "memory" for ":memory:".
[[nodiscard]] std::string duckdb_database_name(std::string_view path);

/// The target table of a catalog name: the table part of the name (after the first
/// '.'), in the expanded schema; on sqlite (no schemas) "<schema>__<table>" in no schema.
/// On duckdb, a schema named like a database gets that database as its catalog.
[[nodiscard]] target_table_name target_table(const target_config& t, const source_config& s,
                                             std::string_view catalog_name);
/// The same for a table known by its own name, not its catalog name: a schema or table
/// name holding a dot ("crm.eu") splits the catalog name at the wrong dot.
[[nodiscard]] target_table_name target_table_named(const target_config& t,
                                                   const source_config& s,
                                                   std::string_view table);

/// target_table_named for every table of one source: what depends only on the target and
/// the source (the expanded schema, DuckDB's catalog rule) is worked out once.
class target_namer {
 public:
  target_namer(const target_config& t, const source_config& s);
  [[nodiscard]] target_table_name operator()(std::string_view table) const;

 private:
  std::string catalog_;
  std::string schema_;       ///< empty for sqlite
  std::string name_prefix_;  ///< sqlite: "<schema>__" (empty schema: none)
};

}  // namespace flotilla::config
