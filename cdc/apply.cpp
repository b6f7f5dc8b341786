#include "cdc/apply.hpp"

#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "schema/calendar.hpp"
#include "sources/copy_text.hpp"
#include "sources/values.hpp"

namespace flotilla::cdc {
namespace {

using schema::type_kind;

std::string key_text(const row_layout& l, const tuple& row) {
  std::string k;
  for (std::size_t i : l.key) {
    const auto& v = i < row.size() ? row[i] : tuple_value{};
    if (v.type == tuple_value::kind::text) {
      k += fmt::format("{}:", v.text.size());
      k += v.text;
    } else {
      k += "N";
    }
    k += '\x1f';
  }
  return k;
}

bool has_unchanged(const tuple& row) {
  for (const auto& v : row)
    if (v.type == tuple_value::kind::unchanged)
      return true;
  return false;
}

// Fills `row`'s unchanged values from `base`; true when none is left unchanged.
bool fill_unchanged(tuple& row, const tuple& base) {
  bool complete = true;
  for (std::size_t i = 0; i < row.size(); ++i)
    if (row[i].type == tuple_value::kind::unchanged) {
      if (i < base.size() && base[i].type != tuple_value::kind::unchanged)
        row[i] = base[i];
      else
        complete = false;
    }
  return complete;
}

std::string hex_of(std::string_view raw) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string key_condition(const dialects::dialect& d, const row_layout& l,
                          const std::vector<const tuple*>& rows) {
  if (l.key.size() == 1) {
    std::string in;
    for (const tuple* r : rows) {
      if (!in.empty())
        in += ", ";
      in += value_sql(d, l.types[l.key[0]], (*r)[l.key[0]]);
    }
    return fmt::format("{} IN ({})", d.quote(l.names[l.key[0]]), in);
  }
  std::string out;
  for (const tuple* r : rows) {
    if (!out.empty())
      out += " OR ";
    out += "(";
    for (std::size_t j = 0; j < l.key.size(); ++j) {
      std::size_t i = l.key[j];
      out += fmt::format("{}{} = {}", j ? " AND " : "", d.quote(l.names[i]),
                         value_sql(d, l.types[i], (*r)[i]));
    }
    out += ")";
  }
  return out;
}

constexpr std::size_t rows_per_statement = 500;

/// One row of a keyless table removed: the first row equal in every column sent (NULLs
/// equal), by its physical row id (PostgreSQL ctid, DuckDB rowid).
std::string remove_one_sql(const dialects::dialect& d, const std::string& qt, const row_layout& l,
                           const tuple& old_row) {
  std::string cond;
  for (std::size_t c = 0; c < l.names.size() && c < old_row.size(); ++c) {
    if (old_row[c].type == tuple_value::kind::unchanged)
      continue;
    cond += fmt::format("{}{} IS NOT DISTINCT FROM {}", cond.empty() ? "" : " AND ",
                        d.quote(l.names[c]), value_sql(d, l.types[c], old_row[c]));
  }
  const char* id = d.name() == "postgres" ? "ctid" : "rowid";
  return fmt::format("DELETE FROM {0} WHERE {1} IN (SELECT {1} FROM {0} WHERE {2} LIMIT 1)", qt,
                     id, cond.empty() ? "TRUE" : cond);
}

/// Every column of a row, as text telling values, NULLs and unsent values apart.
std::string row_text(const tuple& row) {
  std::string k;
  for (const auto& v : row) {
    if (v.type == tuple_value::kind::text)
      k += fmt::format("{}:{}", v.text.size(), v.text);
    else
      k += v.type == tuple_value::kind::null ? "N" : "U";
    k += '\x1f';
  }
  return k;
}

/// DuckDB: rows of a keyless table removed in one statement, each distinct old row
/// (`images`: the row and how many times it was sent) taking that many of the rows equal
/// to it in every column (NULLs equal), as that many remove_one_sql statements would.
/// One scan of the table per statement instead of one per row.
std::string remove_many_sql(const dialects::dialect& d, const std::string& qt, const row_layout& l,
                            const std::vector<std::pair<const tuple*, std::size_t>>& images) {
  std::string names, on, values;
  for (std::size_t c = 0; c < l.names.size(); ++c) {
    names += fmt::format(", c{}", c);
    on += fmt::format("{}t.{} IS NOT DISTINCT FROM v.c{}", c ? " AND " : "", d.quote(l.names[c]), c);
  }
  for (std::size_t i = 0; i < images.size(); ++i) {
    values += fmt::format("{}({}, {}", i ? ", " : "", i, images[i].second);
    for (std::size_t c = 0; c < l.names.size(); ++c)
      values += ", " + value_sql(d, l.types[c], (*images[i].first)[c]);
    values += ")";
  }
  return fmt::format(
      "DELETE FROM {0} WHERE rowid IN (SELECT r FROM (SELECT t.rowid AS r, v.k AS k, "
      "row_number() OVER (PARTITION BY v.i ORDER BY t.rowid) AS n FROM {0} AS t JOIN (VALUES "
      "{1}) AS v(i, k{2}) ON {3}) WHERE n <= k)",
      qt, values, names, on);
}

/// DuckDB: a keyless table's changes, removes gathered into remove_many_sql statements.
/// Within a group every remove runs before every insert: equivalent to their order when
/// no remove is of a row the group inserts (such a remove starts the next group), as no
/// insert then changes what a remove finds. An old row with unsent values, or fewer
/// values than the table has columns, is removed alone (remove_one_sql), in order.
std::vector<std::string> keyless_sql_grouped(const dialects::dialect& d, const std::string& qt,
                                             const keyless_changes& k, const std::string& cols) {
  constexpr std::size_t images_per_statement = 2000;
  const row_layout& l = k.layout;
  std::vector<std::string> out;
  std::vector<std::pair<const tuple*, std::size_t>> images;
  std::unordered_map<std::string, std::size_t> image_of;  // row_text -> index in images
  std::unordered_set<std::string> added;                   // row_text of the group's inserts
  std::vector<const tuple*> adds;
  const auto flush = [&] {
    if (!images.empty())
      out.push_back(remove_many_sql(d, qt, l, images));
    for (std::size_t i = 0; i < adds.size(); i += rows_per_statement) {
      std::string values;
      for (std::size_t j = i; j < adds.size() && j < i + rows_per_statement; ++j) {
        values += j == i ? "(" : ", (";
        for (std::size_t c = 0; c < l.names.size(); ++c)
          values += (c ? ", " : "") +
                    value_sql(d, l.types[c], c < adds[j]->size() ? (*adds[j])[c] : tuple_value{});
        values += ")";
      }
      out.push_back(fmt::format("INSERT INTO {} ({}) VALUES {}", qt, cols, values));
    }
    images.clear();
    image_of.clear();
    added.clear();
    adds.clear();
  };
  for (const auto& op : k.ops) {
    if (op.remove) {
      const tuple& old_row = *op.remove;
      if (has_unchanged(old_row) || old_row.size() < l.names.size()) {
        flush();
        out.push_back(remove_one_sql(d, qt, l, old_row));
      } else {
        std::string text = row_text(old_row);
        if (added.contains(text) || images.size() == images_per_statement)
          flush();
        auto [at, fresh] = image_of.try_emplace(std::move(text), images.size());
        if (fresh)
          images.emplace_back(&old_row, 1);
        else
          ++images[at->second].second;
      }
    }
    if (op.add) {
      added.insert(row_text(*op.add));
      adds.push_back(&*op.add);
    }
  }
  flush();
  return out;
}

std::vector<std::string> keyless_sql(const dialects::dialect& d, const std::string& qt,
                                     const keyless_changes& k) {
  std::vector<std::string> out;
  const row_layout& l = k.layout;
  std::string cols;
  for (std::size_t c = 0; c < l.names.size(); ++c)
    cols += (c ? ", " : "") + d.quote(l.names[c]);
  if (d.name() == "duckdb")
    return keyless_sql_grouped(d, qt, k, cols);
  std::string values;
  std::size_t pending = 0;
  auto flush = [&] {
    if (pending == 0)
      return;
    out.push_back(fmt::format("INSERT INTO {} ({}) VALUES {}", qt, cols, values));
    values.clear();
    pending = 0;
  };
  for (const auto& op : k.ops) {
    if (op.remove) {
      flush();
      out.push_back(remove_one_sql(d, qt, l, *op.remove));
    }
    if (op.add) {
      values += pending == 0 ? "(" : ", (";
      for (std::size_t c = 0; c < l.names.size(); ++c)
        values += (c ? ", " : "") + value_sql(d, l.types[c], c < op.add->size() ? (*op.add)[c]
                                                                               : tuple_value{});
      values += ")";
      if (++pending == rows_per_statement)
        flush();
    }
  }
  flush();
  return out;
}

}  // namespace

// ---- net changes -------------------------------------------------------------------------

void net_changes::insert(const tuple& row) {
  ++changes;
  rows[key_text(layout, row)] = entry{state::upsert, row, std::nullopt, false};
}

void net_changes::update(const std::optional<tuple>& old_row, const tuple& row) {
  ++changes;
  const std::string key = key_text(layout, row);
  if (old_row && has_unchanged(row)) {
    const std::string old_key = key_text(layout, *old_row);
    if (old_key != key) {
      // The key changed and some values were not sent: they are where the row was.
      tuple merged = row;
      const auto prev = rows.find(old_key);
      const auto here = rows.find(key);
      const bool clears = here != rows.end() && (here->second.what == state::removed ||
                                                 here->second.clears_key);
      if (prev != rows.end() && prev->second.what != state::removed) {
        const bool complete = fill_unchanged(merged, prev->second.row);
        if (prev->second.what == state::upsert && complete) {
          // The whole row is known (inserted in this batch, or sent whole).
          prev->second = entry{state::removed, *old_row, std::nullopt, false};
          rows[key] = entry{state::upsert, std::move(merged), std::nullopt, false};
          return;
        }
        entry moved{state::moved, std::move(merged),
                    prev->second.what == state::moved ? prev->second.from : old_row, clears};
        const bool kept_clear = prev->second.clears_key;
        if (kept_clear)
          // What the target held under the old key before the row moved in goes.
          prev->second = entry{state::removed, *old_row, std::nullopt, false};
        else
          rows.erase(prev);
        rows[key] = std::move(moved);
        return;
      }
      rows[key] = entry{state::moved, std::move(merged), *old_row, clears};
      return;
    }
  }
  if (old_row) {
    const std::string old_key = key_text(layout, *old_row);
    if (old_key != key)
      rows[old_key] = entry{state::removed, *old_row, std::nullopt, false};
  }
  auto it = rows.find(key);
  if (!has_unchanged(row)) {
    if (it != rows.end() && it->second.what == state::moved) {
      // Whole now: the row the target holds under the earlier key goes, and it is
      // written under its new one (over any row the target still has there).
      const std::string from_key = key_text(layout, *it->second.from);
      if (!rows.contains(from_key))
        rows[from_key] = entry{state::removed, *it->second.from, std::nullopt, false};
    }
    rows[key] = entry{state::upsert, row, std::nullopt, false};
    return;
  }
  tuple merged = row;
  if (it != rows.end() && it->second.what == state::moved) {
    (void)fill_unchanged(merged, it->second.row);
    it->second.row = std::move(merged);
    return;
  }
  if (it != rows.end() && it->second.what != state::removed) {
    const bool complete = fill_unchanged(merged, it->second.row);
    it->second = entry{it->second.what == state::upsert && complete ? state::upsert : state::partial,
                       std::move(merged), std::nullopt, false};
    return;
  }
  if (old_row && fill_unchanged(merged, *old_row)) {
    rows[key] = entry{state::upsert, std::move(merged), std::nullopt, false};
    return;
  }
  rows[key] = entry{state::partial, std::move(merged), std::nullopt, false};
}

void net_changes::remove(const tuple& old_row) {
  ++changes;
  const std::string key = key_text(layout, old_row);
  const auto it = rows.find(key);
  if (it != rows.end() && it->second.what == state::moved) {
    // The target still holds the row under its earlier key: that row goes (unless this
    // batch wrote another row there, which replaces it anyway).
    const std::string from_key = key_text(layout, *it->second.from);
    if (!rows.contains(from_key))
      rows[from_key] = entry{state::removed, *it->second.from, std::nullopt, false};
    if (!it->second.clears_key) {
      rows.erase(it);
      return;
    }
  }
  rows[key] = entry{state::removed, old_row, std::nullopt, false};
}

void keyless_changes::update(const std::optional<tuple>& old_row, const tuple& row) {
  tuple next = row;
  if (old_row)
    (void)fill_unchanged(next, *old_row);
  ops.push_back({old_row, std::move(next)});
}

// ---- SQL ---------------------------------------------------------------------------------

std::optional<schema::value> text_value(std::string_view text, const schema::portable_type& t) {
  using schema::value;
  switch (t.kind) {
    case type_kind::boolean:
      if (text == "t" || text == "f")
        return value::of_bool(text == "t");
      return std::nullopt;
    case type_kind::smallint:
    case type_kind::int32:
    case type_kind::bigint:
      if (auto v = sources::parse_int64(text))
        return value::of_int(*v);
      return std::nullopt;
    case type_kind::float32:
    case type_kind::float64:
      if (auto v = sources::parse_double(text))
        return value::of_real(t.kind == type_kind::float32
                                  ? static_cast<double>(static_cast<float>(*v))
                                  : *v);
      return std::nullopt;
    case type_kind::decimal:
      if (text.empty() || text[0] == 'N' || text[0] == 'I' || text.starts_with("-I"))
        return std::nullopt;
      return value::of_text(std::string(text));
    case type_kind::bytes:
      if (auto raw = sources::decode_bytea_hex(text))
        return value::of_text(std::move(*raw));
      return std::nullopt;
    case type_kind::date:
    case type_kind::timestamp_ntz:
    case type_kind::timestamp_tz:
      // "0044-03-15 BC": the ISO year (-0043) every target reads as such, as a batch copy
      // reads it (sources/postgres_source.cpp). Left as PostgreSQL prints it, DuckDB read
      // a BC date as the AD one and refused a BC timestamp.
      if (text.ends_with(" BC"))
        if (auto iso = schema::iso_from_pg_era(text))
          return value::of_text(std::move(*iso));
      return value::of_text(std::string(text));
    default: return value::of_text(std::string(text));
  }
}

std::string value_sql(const dialects::dialect& d, const schema::portable_type& t,
                      const tuple_value& v) {
  if (v.type != tuple_value::kind::text)
    return "NULL";
  switch (t.kind) {
    case type_kind::boolean: return v.text == "t" ? "TRUE" : "FALSE";
    case type_kind::smallint:
    case type_kind::int32:
    case type_kind::bigint:
      if (sources::parse_int64(v.text))
        return v.text;
      break;
    case type_kind::bytes:
      if (d.name() == "duckdb") {
        if (auto raw = sources::decode_bytea_hex(v.text))
          return fmt::format("from_hex({})", d.literal(hex_of(*raw)));
      }
      break;
    case type_kind::date:
    case type_kind::timestamp_ntz:
    case type_kind::timestamp_tz:
      // DuckDB reads PostgreSQL's "0044-03-15 BC" as the year 44 AD: give it the ISO year.
      if (d.name() != "postgres" && v.text.ends_with(" BC"))
        if (auto iso = schema::iso_from_pg_era(v.text))
          return d.literal(*iso);
      return d.literal(v.text);
    case type_kind::decimal:
    case type_kind::varchar:
    case type_kind::text:
    case type_kind::time:
      // A string literal takes the column's type on both engines: no cast to parse.
      return d.literal(v.text);
    default: break;
  }
  return fmt::format("CAST({} AS {})", d.literal(v.text), d.physical_type(t));
}

std::vector<std::string> step_sql(const dialects::dialect& d, const dialects::table_ref& table,
                                  const table_step& step) {
  std::vector<std::string> out;
  const std::string qt = d.qualified(table);
  if (std::holds_alternative<truncate_step>(step)) {
    out.push_back("DELETE FROM " + qt);
    return out;
  }
  if (const auto* ddl = std::get_if<ddl_step>(&step))
    return ddl->statements;
  if (const auto* keyless = std::get_if<keyless_changes>(&step))
    return keyless_sql(d, qt, *keyless);
  const auto& net = std::get<net_changes>(step);
  const row_layout& l = net.layout;
  std::vector<const tuple*> removed, upserts, partials;
  std::vector<const net_changes::entry*> moves;
  for (const auto& [k, e] : net.rows) {
    switch (e.what) {
      case net_changes::state::removed: removed.push_back(&e.row); break;
      case net_changes::state::upsert: upserts.push_back(&e.row); break;
      case net_changes::state::partial: partials.push_back(&e.row); break;
      case net_changes::state::moved:
        moves.push_back(&e);
        if (e.clears_key)
          removed.push_back(&e.row);
        break;
    }
  }
  for (std::size_t i = 0; i < removed.size(); i += rows_per_statement) {
    std::vector<const tuple*> chunk(removed.begin() + static_cast<std::ptrdiff_t>(i),
                                    removed.begin() + static_cast<std::ptrdiff_t>(
                                        std::min(removed.size(), i + rows_per_statement)));
    out.push_back(fmt::format("DELETE FROM {} WHERE {}", qt, key_condition(d, l, chunk)));
  }
  // Rows whose key changed, updated where the target holds them (after the deletes, which
  // may free their new keys; before the inserts, which may reuse their old ones).
  for (const auto* m : moves) {
    std::string sets;
    for (std::size_t c = 0; c < l.names.size(); ++c) {
      if (m->row[c].type == tuple_value::kind::unchanged)
        continue;
      sets += fmt::format("{}{} = {}", sets.empty() ? "" : ", ", d.quote(l.names[c]),
                          value_sql(d, l.types[c], m->row[c]));
    }
    out.push_back(fmt::format("UPDATE {} SET {} WHERE {}", qt, sets, key_condition(d, l, {&*m->from})));
  }
  if (!upserts.empty()) {
    std::string cols, keys, sets;
    for (std::size_t c = 0; c < l.names.size(); ++c)
      cols += (c ? ", " : "") + d.quote(l.names[c]);
    for (std::size_t j = 0; j < l.key.size(); ++j)
      keys += (j ? ", " : "") + d.quote(l.names[l.key[j]]);
    for (std::size_t c = 0; c < l.names.size(); ++c) {
      if (std::find(l.key.begin(), l.key.end(), c) != l.key.end())
        continue;
      sets += fmt::format("{}{} = excluded.{}", sets.empty() ? "" : ", ", d.quote(l.names[c]),
                          d.quote(l.names[c]));
    }
    const std::string conflict = sets.empty() ? fmt::format("ON CONFLICT ({}) DO NOTHING", keys)
                                              : fmt::format("ON CONFLICT ({}) DO UPDATE SET {}",
                                                            keys, sets);
    for (std::size_t i = 0; i < upserts.size(); i += rows_per_statement) {
      std::string values;
      for (std::size_t r = i; r < std::min(upserts.size(), i + rows_per_statement); ++r) {
        values += r == i ? "(" : ", (";
        for (std::size_t c = 0; c < l.names.size(); ++c)
          values += (c ? ", " : "") + value_sql(d, l.types[c], (*upserts[r])[c]);
        values += ")";
      }
      out.push_back(fmt::format("INSERT INTO {} ({}) VALUES {} {}", qt, cols, values, conflict));
    }
  }
  for (const tuple* r : partials) {
    std::string sets;
    for (std::size_t c = 0; c < l.names.size(); ++c) {
      if ((*r)[c].type == tuple_value::kind::unchanged ||
          std::find(l.key.begin(), l.key.end(), c) != l.key.end())
        continue;
      sets += fmt::format("{}{} = {}", sets.empty() ? "" : ", ", d.quote(l.names[c]),
                          value_sql(d, l.types[c], (*r)[c]));
    }
    if (!sets.empty())
      out.push_back(
          fmt::format("UPDATE {} SET {} WHERE {}", qt, sets, key_condition(d, l, {r})));
  }
  return out;
}

bool rows_then_ddl(const std::vector<table_step>& steps) {
  bool rows = false;
  for (const auto& s : steps) {
    if (const auto* ddl = std::get_if<ddl_step>(&s)) {
      if (rows && !ddl->statements.empty())
        return true;
    } else {
      rows = true;
    }
  }
  return false;
}

std::string definition_query(const dialects::dialect& d, const dialects::table_ref& table) {
  const std::string where = fmt::format(
      "database_name = {} AND schema_name = {} AND table_name = {}",
      table.catalog.empty() ? "current_database()" : d.literal(table.catalog),
      d.literal(table.schema.empty() ? "main" : table.schema), d.literal(table.name));
  return fmt::format("SELECT sql FROM (SELECT 0 AS k, sql FROM duckdb_tables() WHERE {} "
                     "UNION ALL SELECT 1, sql FROM duckdb_indexes() WHERE {} AND sql IS NOT "
                     "NULL) ORDER BY k",
                     where, where);
}

std::vector<std::string> rebuild_sql(const dialects::dialect& d, const dialects::table_ref& table,
                                     const std::vector<std::string>& definition) {
  if (definition.empty())
    return {};
  dialects::table_ref aside = table;
  aside.name += "__flotilla_rebuild";
  const std::string qt = d.qualified(table);
  const std::string qa = d.qualified(aside);
  std::vector<std::string> out{fmt::format("CREATE TABLE {} AS SELECT * FROM {}", qa, qt),
                               d.drop_table(table), definition.front(),
                               fmt::format("INSERT INTO {} SELECT * FROM {}", qt, qa),
                               d.drop_table(aside)};
  out.insert(out.end(), definition.begin() + 1, definition.end());
  return out;
}

// ---- positions ---------------------------------------------------------------------------

dialects::table_ref positions_table() { return {"", "_flotilla", "cdc_positions"}; }

std::vector<std::string> positions_table_ddl(const dialects::dialect& d) {
  return {d.create_schema("_flotilla"),
          fmt::format("CREATE TABLE IF NOT EXISTS {} ({} VARCHAR NOT NULL, {} VARCHAR NOT NULL, "
                      "{} VARCHAR NOT NULL, {} VARCHAR NOT NULL, {} VARCHAR)",
                      d.qualified(positions_table()), d.quote("slot"), d.quote("source_table"),
                      d.quote("lsn"), d.quote("lsn_text"), d.quote("columns"))};
}

std::vector<std::string> positions_sql(const dialects::dialect& d, const std::string& slot,
                                       const std::map<std::string, applied_position>& tables) {
  if (tables.empty())
    return {};
  std::string names, values;
  for (const auto& [t, at] : tables) {
    names += (names.empty() ? "" : ", ") + d.literal(t);
    values += fmt::format("{}({}, {}, {}, {}, {})", values.empty() ? "" : ", ", d.literal(slot),
                          d.literal(t), d.literal(std::to_string(at.lsn)),
                          d.literal(format_lsn(at.lsn)), d.literal(at.columns));
  }
  const std::string qt = d.qualified(positions_table());
  return {fmt::format("DELETE FROM {} WHERE {} = {} AND {} IN ({})", qt, d.quote("slot"),
                      d.literal(slot), d.quote("source_table"), names),
          fmt::format("INSERT INTO {} VALUES {}", qt, values)};
}

std::string positions_query(const dialects::dialect& d, const std::string& slot) {
  return fmt::format("SELECT {}, {}, {} FROM {} WHERE {} = {}", d.quote("source_table"),
                     d.quote("lsn"), d.quote("columns"), d.qualified(positions_table()), d.quote("slot"),
                     d.literal(slot));
}

}  // namespace flotilla::cdc
