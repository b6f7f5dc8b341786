#include "cdc/ddl_capture.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cdc/pg_logical.hpp"

namespace flotilla::cdc {
namespace {

// The column list the trigger and the catalog query both produce, for the relation `rel`.
constexpr const char* columns_expr = R"sql(
  (SELECT jsonb_agg(jsonb_build_object(
            'name', a.attname, 'attnum', a.attnum,
            'type', pg_catalog.format_type(a.atttypid, a.atttypmod),
            'not_null', a.attnotnull,
            'key', coalesce(a.attnum = ANY (i.indkey), false),
            -- A column without a default of its own takes its domain's.
            'default', coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid),
                                (SELECT pg_catalog.pg_get_expr(ty.typdefaultbin, 0)
                                   FROM pg_catalog.pg_type ty
                                  WHERE ty.oid = a.atttypid AND ty.typtype = 'd')),
            -- A partitioned table has no storage: a constant default added to it is
            -- kept by each leaf partition (none: no row takes it).
            'has_missing', a.atthasmissing OR (c.relkind = 'p' AND NOT EXISTS (
                SELECT 1 FROM pg_catalog.pg_partition_tree(c.oid) t
                  JOIN pg_catalog.pg_attribute pa ON pa.attrelid = t.relid
                                                 AND pa.attname = a.attname
                 WHERE t.isleaf AND NOT pa.atthasmissing)),
            'missing', CASE WHEN a.atthasmissing THEN a.attmissingval::text
                            WHEN c.relkind = 'p' THEN (
                SELECT pa.attmissingval::text FROM pg_catalog.pg_partition_tree(c.oid) t
                  JOIN pg_catalog.pg_attribute pa ON pa.attrelid = t.relid
                                                 AND pa.attname = a.attname
                 WHERE t.isleaf AND pa.atthasmissing LIMIT 1) END,
            'collation', CASE WHEN a.attcollation IN (0, 100) THEN ''
                         ELSE (SELECT co.collname FROM pg_catalog.pg_collation co
                                WHERE co.oid = a.attcollation) END,
            'identity', a.attidentity <> '',
            'generated', a.attgenerated <> '')
          ORDER BY a.attnum)
     FROM pg_catalog.pg_attribute a
     -- A DEFERRABLE key is no row key here: PostgreSQL cannot use it as the replica
     -- identity, and a statement may swap its values between rows before the commit.
     LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
                                      AND i.indimmediate
     LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))sql";

}  // namespace

std::vector<std::string> install_ddl_capture_sql() {
  std::vector<std::string> out;
  out.push_back("CREATE SCHEMA IF NOT EXISTS _flotilla");
  out.push_back(R"sql(CREATE TABLE IF NOT EXISTS _flotilla.ddl_log (
    id bigserial PRIMARY KEY,
    logged_at timestamptz NOT NULL DEFAULT now(),
    command_tag text NOT NULL,
    object_type text,
    object_identity text,
    relid oid,
    schema_name text,
    table_name text,
    ddl text,
    dropped boolean NOT NULL DEFAULT false,
    columns jsonb))sql");
  out.push_back(fmt::format(R"sql(CREATE OR REPLACE FUNCTION _flotilla.capture_ddl()
RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  SET datestyle = 'ISO, YMD' SET intervalstyle = 'postgres' SET extra_float_digits = 3
AS $fn$
DECLARE
  r record;
  rel oid;
BEGIN
  IF TG_EVENT = 'sql_drop' THEN
    FOR r IN SELECT * FROM pg_catalog.pg_event_trigger_dropped_objects()
              WHERE object_type = 'table' AND original AND schema_name <> '_flotilla' LOOP
      INSERT INTO _flotilla.ddl_log (command_tag, object_type, object_identity, relid,
                                     schema_name, table_name, ddl, dropped)
      VALUES (TG_TAG, r.object_type, r.object_identity, r.objid, r.schema_name,
              r.object_name, current_query(), true);
    END LOOP;
    RETURN;
  END IF;
  -- A value of an enum renamed: every stored value of it reads as the new name, in no
  -- change event. Logged for each table with a column of it (or of an array or a domain
  -- over it), for the stream to stop there.
  IF TG_TAG = 'ALTER TYPE' AND current_query() ~* 'RENAME[[:space:]]+VALUE' THEN
    FOR r IN SELECT * FROM pg_catalog.pg_event_trigger_ddl_commands()
              WHERE object_type = 'type' LOOP
      INSERT INTO _flotilla.ddl_log (command_tag, object_type, object_identity, relid,
                                     schema_name, table_name, ddl, dropped, columns)
      SELECT TG_TAG, 'type', r.object_identity, c.oid, n.nspname, c.relname,
             current_query(), false, {}
        FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relkind IN ('r', 'p') AND n.nspname <> '_flotilla'
         AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                       JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
                      WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                        AND (a.atttypid = r.objid OR t.typelem = r.objid
                             OR t.typbasetype = r.objid));
    END LOOP;
  END IF;
  FOR r IN SELECT * FROM pg_catalog.pg_event_trigger_ddl_commands()
            WHERE object_type IN ('table', 'table column', 'index') LOOP
    IF r.object_type = 'index' THEN
      SELECT indrelid INTO rel FROM pg_catalog.pg_index WHERE indexrelid = r.objid;
    ELSE
      rel := r.objid;
    END IF;
    IF rel IS NULL OR r.schema_name = '_flotilla' THEN
      CONTINUE;
    END IF;
    INSERT INTO _flotilla.ddl_log (command_tag, object_type, object_identity, relid,
                                   schema_name, table_name, ddl, dropped, columns)
    SELECT TG_TAG, r.object_type, r.object_identity, c.oid, n.nspname, c.relname,
           current_query(), false, {}
      FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = rel AND c.relkind IN ('r', 'p');
  END LOOP;
END
$fn$)sql",
                            columns_expr, columns_expr));
  // The version stamp tells a current capture from an older one (ddl_capture_state_sql).
  out.push_back(fmt::format("COMMENT ON FUNCTION _flotilla.capture_ddl() IS '{}'",
                            capture_version));
  out.push_back(R"sql(DO $do$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger WHERE evtname = 'flotilla_ddl_end') THEN
    CREATE EVENT TRIGGER flotilla_ddl_end ON ddl_command_end
      EXECUTE FUNCTION _flotilla.capture_ddl();
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger WHERE evtname = 'flotilla_ddl_drop') THEN
    CREATE EVENT TRIGGER flotilla_ddl_drop ON sql_drop
      EXECUTE FUNCTION _flotilla.capture_ddl();
  END IF;
END
$do$)sql");
  return out;
}

std::string ddl_capture_state_sql() {
  return fmt::format(
      "SELECT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = "
      "current_user), false), "
      "coalesce((SELECT pg_catalog.obj_description(p.oid, 'pg_proc') = '{}' FROM "
      "pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE "
      "n.nspname = '_flotilla' AND p.proname = 'capture_ddl'), false) AND (SELECT count(*) "
      "FROM pg_catalog.pg_event_trigger e WHERE e.evtname IN ('flotilla_ddl_end', "
      "'flotilla_ddl_drop') AND e.evtenabled <> 'D' AND e.evtfoid = "
      "pg_catalog.to_regprocedure('_flotilla.capture_ddl()')) = 2, "
      "current_user, current_database()",
      capture_version);
}

std::vector<std::string> ddl_capture_setup_sql(std::string_view role, std::string_view database) {
  auto out = install_ddl_capture_sql();
  const std::string r = pg_ident(role);
  // The stream's user owns the log table (a publication lists only tables its creator
  // owns) and needs the REPLICATION attribute and CREATE on the database (publication).
  out.push_back(fmt::format("GRANT USAGE ON SCHEMA _flotilla TO {}", r));
  out.push_back(fmt::format("ALTER TABLE _flotilla.ddl_log OWNER TO {}", r));
  out.push_back(fmt::format("ALTER ROLE {} WITH REPLICATION", r));
  out.push_back(fmt::format("GRANT CREATE ON DATABASE {} TO {}", pg_ident(database), r));
  return out;
}

std::string catalog_columns_sql(const std::vector<std::string>& qualified_names) {
  std::string list;
  for (const auto& q : qualified_names) {
    if (!list.empty())
      list += ", ";
    std::string lit = "'";
    for (char ch : q) {
      if (ch == '\'')
        lit += '\'';
      lit += ch;
    }
    list += lit + "'";
  }
  return fmt::format(
      "SELECT c.oid::text, n.nspname, c.relname, {}::text FROM pg_catalog.pg_class c "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
      "WHERE c.relkind IN ('r', 'p') AND (n.nspname || '.' || c.relname) IN ({})",
      columns_expr, list.empty() ? "NULL" : list);
}

std::vector<source_column> parse_columns_json(std::string_view json) {
  std::vector<source_column> out;
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_array())
    return out;
  for (const auto& c : j) {
    source_column s;
    s.name = c.value("name", "");
    s.attnum = c.value("attnum", 0);
    s.type = c.value("type", "");
    s.not_null = c.value("not_null", false);
    s.key = c.value("key", false);
    if (c.contains("default") && c["default"].is_string())
      s.default_expr = c["default"].get<std::string>();
    s.has_missing = c.value("has_missing", false);
    if (c.contains("missing") && c["missing"].is_string()) {
      // attmissingval is a one-element array: "{5}" or "{\"a b\"}".
      std::string m = c["missing"].get<std::string>();
      if (m.size() >= 2 && m.front() == '{' && m.back() == '}')
        m = m.substr(1, m.size() - 2);
      if (m == "NULL") {
        s.missing_value.reset();
      } else {
        if (m.size() >= 2 && m.front() == '"' && m.back() == '"') {
          std::string u;
          for (std::size_t i = 1; i + 1 < m.size(); ++i) {
            if (m[i] == '\\' && i + 2 < m.size())
              ++i;
            u += m[i];
          }
          m = u;
        }
        s.missing_value = m;
      }
    }
    // Absent from log rows a capture before version 3 wrote: unknown, not changed.
    if (c.contains("collation") && c["collation"].is_string())
      s.collation = c["collation"].get<std::string>();
    if (c.contains("identity") && c["identity"].is_boolean())
      s.identity = c["identity"].get<bool>();
    if (c.contains("generated") && c["generated"].is_boolean())
      s.generated = c["generated"].get<bool>();
    out.push_back(std::move(s));
  }
  return out;
}

std::string columns_json(const std::vector<source_column>& columns) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : columns) {
    nlohmann::json o{{"name", c.name},       {"attnum", c.attnum},
                     {"type", c.type},       {"not_null", c.not_null},
                     {"key", c.key},         {"has_missing", c.has_missing}};
    o["default"] = c.default_expr ? nlohmann::json(*c.default_expr) : nlohmann::json(nullptr);
    o["missing"] = c.missing_value ? nlohmann::json("{" + *c.missing_value + "}")
                                   : nlohmann::json(nullptr);
    if (c.collation)
      o["collation"] = *c.collation;
    if (c.identity)
      o["identity"] = *c.identity;
    if (c.generated)
      o["generated"] = *c.generated;
    j.push_back(std::move(o));
  }
  return j.dump();
}

std::string ddl_statements(std::string_view query) {
  std::vector<std::string_view> statements;
  std::size_t start = 0;
  for (std::size_t i = 0; i < query.size(); ++i) {
    const char c = query[i];
    if (c == '\'' || c == '"') {  // quoted: a doubled quote stays inside
      for (++i; i < query.size(); ++i)
        if (query[i] == c) {
          if (i + 1 < query.size() && query[i + 1] == c)
            ++i;
          else
            break;
        }
    } else if (c == '-' && i + 1 < query.size() && query[i + 1] == '-') {
      i = std::min(query.find('\n', i), query.size());
    } else if (c == '/' && i + 1 < query.size() && query[i + 1] == '*') {
      const auto end = query.find("*/", i + 2);
      i = end == std::string_view::npos ? query.size() : end + 1;
    } else if (c == '$') {  // $tag$ ... $tag$
      const auto close = query.find('$', i + 1);
      const auto tag = close == std::string_view::npos ? std::string_view()
                                                       : query.substr(i, close - i + 1);
      if (!tag.empty() && std::all_of(tag.begin() + 1, tag.end() - 1, [](char t) {
            return std::isalnum(static_cast<unsigned char>(t)) || t == '_';
          })) {
        const auto end = query.find(tag, close + 1);
        i = end == std::string_view::npos ? query.size() : end + tag.size() - 1;
      }
    } else if (c == ';') {
      statements.push_back(query.substr(start, i - start));
      start = i + 1;
    }
  }
  statements.push_back(query.substr(std::min(start, query.size())));
  std::string out;
  for (auto st : statements) {
    // Its first word, after blanks and comments (kept in the statement published).
    std::string_view head = st;
    for (;;) {
      const auto first = head.find_first_not_of(" \t\r\n");
      head = first == std::string_view::npos ? std::string_view() : head.substr(first);
      if (head.starts_with("--"))
        head = head.substr(std::min(head.find('\n'), head.size()));
      else if (head.starts_with("/*"))
        head = head.substr(std::min(head.find("*/"), head.size() - 2) + 2);
      else
        break;
    }
    const auto first = st.find_first_not_of(" \t\r\n");
    if (head.empty() || first == std::string_view::npos)
      continue;
    st = st.substr(first, st.find_last_not_of(" \t\r\n") - first + 1);
    std::string word;
    for (char ch : head.substr(0, std::min<std::size_t>(head.size(), 8))) {
      if (!std::isalpha(static_cast<unsigned char>(ch)))
        break;
      word += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
    if (word == "ALTER" || word == "CREATE" || word == "DROP" || word == "COMMENT")
      out += (out.empty() ? "" : "; ") + std::string(st);
  }
  // None at the top level: the DDL ran inside another statement (a DO block, a function),
  // whose text may hold other statements and their values. Not published.
  return out.empty() ? std::string(ddl_not_shown) : out;
}

ddl_event parse_ddl_event(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& fields) {
  ddl_event e;
  for (const auto& [name, v] : fields) {
    if (!v)
      continue;
    if (name == "id")
      e.id = std::stoll(*v);
    else if (name == "command_tag")
      e.command_tag = *v;
    else if (name == "object_type")
      e.object_type = *v;
    else if (name == "object_identity")
      e.object_identity = *v;
    else if (name == "relid")
      e.relid = static_cast<std::uint32_t>(std::stoul(*v));
    else if (name == "schema_name")
      e.schema = *v;
    else if (name == "table_name")
      e.table = *v;
    else if (name == "ddl")
      e.ddl = *v;
    else if (name == "dropped")
      e.dropped = *v == "t";
    else if (name == "columns")
      e.columns = parse_columns_json(*v);
  }
  return e;
}

namespace {
std::string collation_name(const std::string& c) {
  return c.empty() ? std::string("default") : "\"" + c + "\"";
}
}  // namespace

std::vector<column_diff> diff_columns(const std::vector<source_column>& before,
                                      const std::vector<source_column>& after) {
  std::vector<column_diff> out;
  auto by_attnum = [](const std::vector<source_column>& cols, int attnum) -> const source_column* {
    for (const auto& c : cols)
      if (c.attnum == attnum)
        return &c;
    return nullptr;
  };
  bool key_dropped = false;
  for (const auto& b : before)
    if (!by_attnum(after, b.attnum)) {
      out.push_back({column_diff::kind::dropped, b.name, "", &b, nullptr});
      key_dropped = key_dropped || b.key;
    }
  for (const auto& b : before) {
    const source_column* a = by_attnum(after, b.attnum);
    if (!a)
      continue;
    if (a->name != b.name)
      out.push_back({column_diff::kind::renamed, b.name, a->name, &b, a});
    if (a->type != b.type)
      out.push_back({column_diff::kind::retyped, a->name, a->type, &b, a});
    if (a->not_null != b.not_null && !(a->key && !b.key))
      out.push_back({column_diff::kind::nullability, a->name, "", &b, a});
    // A generated column's expression is its pg_attrdef entry too: a change of it is a
    // change of the generated property, not of a default.
    const auto known_changed = [](const auto& x, const auto& y) { return x && y && *x != *y; };
    if (known_changed(b.collation, a->collation))
      out.push_back({column_diff::kind::collation, a->name,
                     fmt::format("collation {} -> {}", collation_name(*b.collation),
                                 collation_name(*a->collation)),
                     &b, a});
    if (known_changed(b.identity, a->identity))
      out.push_back({column_diff::kind::identity, a->name,
                     *a->identity ? "identity added" : "identity dropped", &b, a});
    const bool generated = a->generated.value_or(false) || b.generated.value_or(false);
    if (known_changed(b.generated, a->generated) ||
        (generated && a->default_expr != b.default_expr))
      out.push_back({column_diff::kind::generated, a->name,
                     a->generated == b.generated ? "generation expression changed"
                     : a->generated.value_or(false) ? "now generated"
                                                    : "no longer generated",
                     &b, a});
    else if (a->default_expr != b.default_expr)
      out.push_back({column_diff::kind::default_changed, a->name, "", &b, a});
  }
  for (const auto& a : after)
    if (!by_attnum(before, a.attnum))
      out.push_back({column_diff::kind::added, a.name, "", nullptr, &a});
  // A key change: the key columns differ for another reason than a dropped key column.
  std::vector<int> kb, ka;
  for (const auto& b : before)
    if (b.key && by_attnum(after, b.attnum))
      kb.push_back(b.attnum);
  for (const auto& a : after)
    if (a.key)
      ka.push_back(a.attnum);
  // Dropping a key column drops the key with it: that is the drop, not a second change.
  if (!key_dropped && kb != ka)
    out.push_back({column_diff::kind::key_changed, "", "", nullptr, nullptr});
  return out;
}

}  // namespace flotilla::cdc
