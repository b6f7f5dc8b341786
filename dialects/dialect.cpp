#include "dialects/dialect.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "dialects/ddl.hpp"
#include "dialects/widening.hpp"

namespace flotilla::dialects {

// Default behaviour: seed 001's allowlist, double-quoted identifiers, ANSI DDL and a
// rename-based swap. Each dialect overrides only what its engine does differently.

schema::portable_type dialect::canonical(const schema::portable_type& t) const {
  {
    std::lock_guard lock(canonical_mu_);
    for (const auto& [from, to] : canonical_memo_)
      if (from == t)
        return to;
  }
  const std::string spelled = physical_type(t);
  auto parsed = parse_physical(spelled);
  if (!parsed)  // a dialect that cannot read its own DDL spelling is a bug
    throw std::logic_error(fmt::format("{} cannot read back its own type '{}' (for {}): {}",
                                       name(), spelled, schema::to_string(t),
                                       parsed.error().message));
  std::lock_guard lock(canonical_mu_);
  if (canonical_memo_.size() < canonical_memo_size)
    canonical_memo_.emplace_back(t, *parsed);
  return *parsed;
}

bool dialect::is_safe_widening(const schema::portable_type& from,
                               const schema::portable_type& to) const {
  return default_allowlist(from, to);
}

std::string dialect::quote(std::string_view identifier) const {
  return detail::quote_by_doubling(identifier, '"');
}

std::string dialect::qualified(const table_ref& t) const {
  std::string out;
  if (!t.catalog.empty())
    out += quote(t.catalog) + ".";
  if (!t.schema.empty())
    out += quote(t.schema) + ".";
  return out + quote(t.name);  // an empty name throws
}

std::string dialect::literal(std::string_view value) const {
  detail::check_literal(value);
  std::string out = "'";
  for (char c : value) {
    if (c == '\'')
      out.push_back('\'');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

std::string dialect::cast(std::string_view expr, const schema::portable_type& /*from*/,
                          const schema::portable_type& to) const {
  return fmt::format("CAST({} AS {})", expr, physical_type(to));
}

std::string dialect::create_schema(std::string_view schema, std::string_view catalog) const {
  if (catalog.empty())
    return fmt::format("CREATE SCHEMA IF NOT EXISTS {}", quote(schema));
  return fmt::format("CREATE SCHEMA IF NOT EXISTS {}.{}", quote(catalog), quote(schema));
}

std::string dialect::create_table(const table_ref& t, const schema::table_schema& s) const {
  return detail::create_table(*this, t, s, detail::key_clause::enforced);
}

std::string dialect::add_column(const table_ref& t, const schema::column& c) const {
  // Always nullable, whatever the source says: historical rows keep NULL.
  return fmt::format("ALTER TABLE {} ADD COLUMN {} {}", qualified(t), quote(c.name),
                     physical_type(c.type));
}

std::vector<std::string> dialect::alter_column_type(const table_ref& t, std::string_view column,
                                                    const schema::portable_type& to) const {
  return {fmt::format("ALTER TABLE {} ALTER COLUMN {} TYPE {}", qualified(t), quote(column),
                      physical_type(to))};
}

std::string dialect::drop_not_null(const table_ref& t, std::string_view column) const {
  return fmt::format("ALTER TABLE {} ALTER COLUMN {} DROP NOT NULL", qualified(t), quote(column));
}

std::vector<std::string> dialect::rebuild_and_swap(const table_ref& t,
                                                   const schema::table_schema& old_schema,
                                                   const schema::table_schema& new_schema) const {
  return detail::rebuild_by_copy(*this, t, detail::sibling(t, detail::rebuild_suffix, 0),
                                 old_schema, new_schema, {});
}

std::vector<std::string> dialect::refresh_in_place(const table_ref& t,
                                                   const std::optional<schema::table_schema>& live,
                                                   const schema::table_schema& columns) const {
  if (live)
    if (const auto r = schema::relaxation_for(*live, columns))
      if (auto relax = relax_in_place(t, *r)) {
        std::vector<std::string> out;
        if (auto lock = lock_for_refresh(t); !lock.empty())
          out.push_back(std::move(lock));
        out.push_back("DELETE FROM " + qualified(t));
        for (auto& sql : *relax)
          out.push_back(std::move(sql));
        return out;
      }
  return {drop_table(t), create_table(t, columns)};
}

bool dialect::keeps_live_table(const schema::table_schema& live,
                               const schema::table_schema& columns) const {
  const auto r = schema::relaxation_for(live, columns);
  return r && (r->empty() || relax_in_place(table_ref{"", "", "t"}, *r).has_value());
}

std::optional<std::vector<std::string>> dialect::relax_in_place(
    const table_ref& t, const schema::in_place_relaxation& r) const {
  if (r.drop_key || !r.add_key.empty())
    return std::nullopt;
  std::vector<std::string> out;
  for (const auto& c : r.drop_not_null)
    out.push_back(drop_not_null(t, c));
  return out;
}

std::vector<std::string> dialect::swap_in(const table_ref& staging,
                                          const table_ref& target) const {
  return detail::swap_by_rename(*this, staging, target, {});
}

// A semi-join the engines run as a hash join.
std::string dialect::delete_matching(const table_ref& live, const table_ref& incoming,
                                     const std::vector<std::string>& key) const {
  const std::string l = quote("__flotilla_live");
  const std::string n = quote("__flotilla_new");
  std::string match;
  for (const auto& k : key)
    match += fmt::format("{}{}.{} = {}.{}", match.empty() ? "" : " AND ", n, quote(k), l, quote(k));
  return fmt::format("DELETE FROM {} AS {} WHERE EXISTS (SELECT 1 FROM {} AS {} WHERE {})",
                     qualified(live), l, qualified(incoming), n, match);
}

std::string dialect::drop_table(const table_ref& t) const {
  return fmt::format("DROP TABLE IF EXISTS {}", qualified(t));
}

std::vector<std::string> in_transaction(const dialect& d, std::vector<std::string> statements) {
  if (!d.supports_transactional_ddl() || statements.empty())
    return statements;
  statements.insert(statements.begin(), "BEGIN");
  statements.emplace_back("COMMIT");
  return statements;
}

}  // namespace flotilla::dialects
