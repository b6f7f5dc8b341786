#include "dialects/ddl.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

namespace flotilla::dialects::detail {

void check_identifier(std::string_view identifier) {
  if (identifier.empty())
    throw std::invalid_argument("an identifier cannot be empty");
  if (identifier.find('\0') != std::string_view::npos)
    throw std::invalid_argument("an identifier cannot contain a NUL byte");
}

void check_literal(std::string_view value) {
  if (value.find('\0') != std::string_view::npos)
    throw std::invalid_argument("a string literal cannot contain a NUL byte");
}

std::string quote_by_doubling(std::string_view identifier, char q) {
  check_identifier(identifier);
  std::string out;
  out.reserve(identifier.size() + 2);
  out.push_back(q);
  for (char c : identifier) {
    if (c == q)
      out.push_back(q);
    out.push_back(c);
  }
  out.push_back(q);
  return out;
}

std::string column_definitions(const dialect& d, const schema::table_schema& s) {
  std::string out;
  for (const auto& c : s.columns) {
    if (!out.empty())
      out += ", ";
    out += fmt::format("{} {}", d.quote(c.name), d.physical_type(c.type));
    if (!c.nullable || c.key)
      out += " NOT NULL";
  }
  return out;
}

std::string create_table(const dialect& d, const table_ref& t, const schema::table_schema& s,
                         key_clause keys, std::string_view trailer) {
  if (s.columns.empty())
    throw std::invalid_argument(
        fmt::format("cannot create {}: a table needs at least one column", d.qualified(t)));
  std::string body = column_definitions(d, s);
  const auto key = s.key();
  if (keys != key_clause::none && !key.empty()) {
    std::string cols;
    for (const auto& k : key)
      cols += (cols.empty() ? "" : ", ") + d.quote(k);
    body += fmt::format(", PRIMARY KEY ({})", cols);
    if (keys == key_clause::not_enforced)
      body += " NOT ENFORCED";
  }
  return fmt::format("CREATE TABLE {} ({}){}", d.qualified(t), body, trailer);
}

namespace {

/// FNV-1a, 64 bits: the low 32 name a shortened table (as loads have named their
/// staging tables from the start).
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

table_ref sibling(const table_ref& t, std::string_view suffix, std::size_t max_bytes) {
  table_ref out = t;
  out.name = t.name + std::string(suffix);
  if (max_bytes == 0 || out.name.size() <= max_bytes)
    return out;
  const std::string hash = fmt::format("_{:08x}", fnv1a(t.name) & 0xffffffffu);
  const std::size_t fixed = suffix.size() + hash.size();
  std::size_t keep = max_bytes > fixed ? max_bytes - fixed : 0;
  keep = std::min(keep, t.name.size());
  // Never cut inside a UTF-8 sequence: back up over continuation bytes.
  while (keep > 0 && keep < t.name.size() &&
         (static_cast<unsigned char>(t.name[keep]) & 0xC0) == 0x80)
    --keep;
  out.name = t.name.substr(0, keep) + hash + std::string(suffix);
  return out;
}

std::string cast_select(const dialect& d, const table_ref& from,
                        const schema::table_schema& old_schema,
                        const schema::table_schema& new_schema, bool with_new_columns) {
  std::string items;
  for (const auto& c : new_schema.columns) {
    const schema::column* old = old_schema.find(c.name, d.names());
    if (old == nullptr && !with_new_columns)
      continue;
    const std::string cast = old != nullptr ? d.cast(d.quote(old->name), old->type, c.type)
                                            : d.cast("NULL", c.type, c.type);
    items += fmt::format("{}{} AS {}", items.empty() ? "" : ", ", cast, d.quote(c.name));
  }
  return fmt::format("SELECT {} FROM {}", items, d.qualified(from));
}

std::string insert_select(const dialect& d, const table_ref& into, const table_ref& from,
                          const schema::table_schema& old_schema,
                          const schema::table_schema& new_schema) {
  std::string cols;
  std::string items;
  for (const auto& c : new_schema.columns) {
    const schema::column* old = old_schema.find(c.name, d.names());
    if (old == nullptr)
      continue;  // a new column: its rows start NULL
    const char* sep = cols.empty() ? "" : ", ";
    cols += sep + d.quote(c.name);
    items += sep + d.cast(d.quote(old->name), old->type, c.type);
  }
  if (cols.empty())
    return {};
  return fmt::format("INSERT INTO {} ({}) SELECT {} FROM {}", d.qualified(into), cols, items,
                     d.qualified(from));
}

std::string rename_table(const dialect& d, const table_ref& from, const table_ref& to,
                         bool qualify_new_name) {
  return fmt::format("ALTER TABLE {} RENAME TO {}", d.qualified(from),
                     qualify_new_name ? d.qualified(to) : d.quote(to.name));
}

void require_same_schema(const dialect& d, const table_ref& a, const table_ref& b) {
  if (a.catalog != b.catalog || a.schema != b.schema)
    throw std::invalid_argument(
        fmt::format("{}: cannot swap {} in for {}: a rename cannot move a table to another "
                    "schema, so both must be in the same one",
                    d.name(), d.qualified(a), d.qualified(b)));
}

std::vector<std::string> rebuild_by_copy(const dialect& d, const table_ref& t,
                                         const table_ref& tmp,
                                         const schema::table_schema& old_schema,
                                         const schema::table_schema& new_schema,
                                         const swap_steps& steps) {
  std::vector<std::string> out;
  out.push_back(d.drop_table(tmp));  // a leftover of an interrupted rebuild
  out.push_back(d.create_table(tmp, new_schema));
  if (auto insert = insert_select(d, tmp, t, old_schema, new_schema); !insert.empty())
    out.push_back(std::move(insert));
  out.insert(out.end(), steps.before_drop.begin(), steps.before_drop.end());
  out.push_back(fmt::format("DROP TABLE {}", d.qualified(t)));
  out.push_back(rename_table(d, tmp, t, steps.qualify_new_name));
  out.insert(out.end(), steps.after_rename.begin(), steps.after_rename.end());
  return out;
}

std::vector<std::string> swap_by_rename(const dialect& d, const table_ref& staging,
                                        const table_ref& target, const swap_steps& steps) {
  require_same_schema(d, staging, target);
  std::vector<std::string> out = steps.before_drop;
  out.push_back(d.drop_table(target));
  out.push_back(rename_table(d, staging, target, steps.qualify_new_name));
  out.insert(out.end(), steps.after_rename.begin(), steps.after_rename.end());
  return out;
}

}  // namespace flotilla::dialects::detail
