#include "cdc/stream.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cdc/apply.hpp"
#include "cdc/change_event.hpp"
#include "cdc/change_publisher.hpp"
#include "cdc/ddl_capture.hpp"
#include "cdc/ddl_changes.hpp"
#include "cdc/decide.hpp"
#include "cdc/review.hpp"
#include "cdc/review_store.hpp"
#include "cdc/target_link.hpp"
#include "cdc/pg_logical.hpp"
#include "config/selection.hpp"
#include "config/toml_edit.hpp"
#include "dialects/dialect.hpp"
#include "sinks/warehouse.hpp"
#include "sources/copy_text.hpp"
#include "sources/type_mapping.hpp"
#include "storage/state_store.hpp"

namespace flotilla::cdc {
namespace {

namespace pb = storage::pb;
using clock_type = std::chrono::steady_clock;

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The stream stops before a change it cannot carry (seed 002 "stop").
struct stop_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string sanitize(std::string_view s) {
  std::string out;
  for (char c : s) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += (std::isalnum(static_cast<unsigned char>(l)) ? l : '_');
  }
  return out;
}

std::uint32_t fnv1a(std::string_view s) {
  std::uint32_t h = 2166136261u;
  for (char c : s)
    h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

/// Slot and publication name: "flotilla_<project>_<source>" (a source's second and later
/// targets: "..._<target>"), at most 63 bytes. Where the names as written cannot be told
/// back from that, a hash of them follows: a name that lost characters to the server's
/// rules (upper case, '-', '.', non-ASCII), so that `acme-eu` and `acme_eu` differ, and a
/// name holding '_', which the join uses too, so that project `acme` with source
/// `eu_shop` and project `acme_eu` with source `shop` differ. Two projects that share a
/// slot consume each other's changes.
std::string slot_name(const config::project& p, const config::source_config& s,
                      const std::string& target) {
  std::string n = "flotilla_" + sanitize(p.name) + "_" + sanitize(s.name);
  if (!target.empty())
    n += "_" + sanitize(target);
  const auto ambiguous = [](const std::string& name) {
    return sanitize(name) != name || name.find('_') != std::string::npos;
  };
  if (ambiguous(p.name) || ambiguous(s.name) || ambiguous(target))
    n += fmt::format("_{:08x}", fnv1a(p.name + '\x1f' + s.name + '\x1f' + target));
  if (n.size() > 63)
    n = n.substr(0, 54) + fmt::format("_{:08x}", fnv1a(n));
  return n;
}

row_layout layout_of(const std::vector<source_column>& cols) {
  row_layout l;
  for (std::size_t i = 0; i < cols.size(); ++i) {
    l.names.push_back(cols[i].name);
    l.types.push_back(sources::map_postgres_type(cols[i].type));
    if (cols[i].key)
      l.key.push_back(i);
  }
  return l;
}

schema::table_schema portable_of(const std::vector<source_column>& cols) {
  schema::table_schema s;
  for (const auto& c : cols)
    s.columns.push_back(
        schema::column{c.name, sources::map_postgres_type(c.type), !c.not_null, c.key});
  return s;
}

/// A DDL log row kept for a held table: (column, text or null) pairs.
nlohmann::json fields_json(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& fields) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& [name, value] : fields)
    a.push_back({name, value ? nlohmann::json(*value) : nlohmann::json(nullptr)});
  return a;
}

std::vector<std::pair<std::string, std::optional<std::string>>> json_fields(
    const nlohmann::json& a) {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  if (!a.is_array())
    return out;
  for (const auto& f : a)
    if (f.is_array() && f.size() == 2 && f[0].is_string())
      out.emplace_back(f[0].get<std::string>(), f[1].is_string()
                                                    ? std::optional<std::string>(f[1].get<std::string>())
                                                    : std::nullopt);
  return out;
}

nlohmann::json tuple_json(const tuple& t) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& v : t) {
    if (v.type == tuple_value::kind::text)
      a.push_back(v.text);
    else if (v.type == tuple_value::kind::unchanged)
      a.push_back(nlohmann::json{{"u", true}});
    else
      a.push_back(nullptr);
  }
  return a;
}

tuple json_tuple(const nlohmann::json& a) {
  tuple t;
  for (const auto& v : a) {
    tuple_value x;
    if (v.is_string()) {
      x.type = tuple_value::kind::text;
      x.text = v.get<std::string>();
    } else if (v.is_object()) {
      x.type = tuple_value::kind::unchanged;
    }
    t.push_back(std::move(x));
  }
  return t;
}

/// One captured table: its shape, where its target rows are, and whether it is held.
/// Owned by its source's thread.
struct table_state {
  std::string name;  ///< "public.orders"
  std::string key;   ///< "<source>.public.orders": store key
  std::uint32_t relid = 0;
  dialects::table_ref target;
  std::vector<source_column> columns;  ///< shape as of the last change handled
  row_layout layout;
  lsn_t applied = 0;  ///< last source transaction applied on the target
  enum class mode : std::uint8_t { streaming, held, removed } state = mode::streaming;
  lsn_t hold_position = 0;  ///< held: changes at or after it are kept
  lsn_t kept_through = 0;   ///< held: position of the last kept change
  std::vector<std::size_t> map;  ///< relation column i -> layout index
  std::uint64_t changes = 0;
  std::uint64_t copied = 0;          ///< rows of the table's last copy
  std::uint64_t copied_in_run = 0;   ///< rows of every copy this stream made (the summary's)
};

/// Changes of one batch, per table, in order; committed in one target transaction. Each
/// table actor fills its own part; the stream merges the parts of the tables a batch
/// touched.
/// A held source change as its review keeps it: the DDL and its place in its transaction.
struct held_change_ref {
  std::string ddl;
  std::uint32_t change = 0;
};

/// The catalog's columns of `names` (catalog_columns_sql), spelled as the DDL capture
/// spells them: its function runs with search_path = pg_catalog, so a type or a default's
/// sequence of another schema is schema-qualified there ("public.mood"). Read under
/// another search_path, a shape would differ from the capture's at the next DDL by
/// spelling alone (a type "changed" from mood to public.mood). `in_transaction`: `c` is in
/// one already (a copy's snapshot), whose search_path is set back after.
text_rows catalog_shapes(pg_connection& c, const std::vector<std::string>& names,
                         bool in_transaction) {
  if (!in_transaction)
    c.exec("BEGIN");
  c.exec("SET LOCAL search_path = pg_catalog, pg_temp");
  auto rows = c.query(catalog_columns_sql(names));
  if (in_transaction)
    c.exec("SET LOCAL search_path TO DEFAULT");
  else
    c.exec("COMMIT");
  return rows;
}

struct batch {
  std::map<std::string, std::vector<table_step>> steps;  ///< by table key
  std::map<std::string, applied_position> positions;
  /// Change events (event targets, or [events.kafka] beside a relational target), in
  /// source order, delivered before the target commit.
  std::vector<change_message> events;
  /// The source order of each event (its change's place in the stream), parallel to
  /// `events`: the parts of several tables merge back into one order.
  std::vector<std::uint64_t> event_order;
  std::uint64_t order = 0;  ///< the change being handled
  std::uint32_t change_index = 0;  ///< and its place in its transaction (ordered_change::index)
  /// Changes of held tables, kept in RocksDB before the batch commits (by table key).
  std::map<std::string, std::vector<pb::HeldChange>> kept;
  /// Holds opened by this batch's DDL: their reviews are written before it commits.
  std::vector<pb::HoldRecord> holds;
  /// A change the stream cannot carry (seed 002 "stop"): the batch does not commit.
  std::string stop;
  std::uint64_t stop_order = 0;
  lsn_t end_lsn = 0;
  std::uint64_t changes = 0;
  /// `changes` by table name: counted in a table's summary once the batch commits.
  std::map<std::string, std::uint64_t> table_changes;
  std::uint64_t transactions = 0;
  /// Schema changes carried out in this batch, said on stderr once it committed.
  std::vector<std::string> schema_changes;
  [[nodiscard]] bool empty() const { return transactions == 0 && steps.empty() && positions.empty(); }

  /// Adds another table's part; the events are put back in source order by sort_events().
  void merge(batch&& part) {
    for (auto& [key, s] : part.steps)
      steps[key] = std::move(s);
    for (auto& [name, p] : part.positions)
      positions[name] = std::move(p);
    for (std::size_t i = 0; i < part.events.size(); ++i) {
      events.push_back(std::move(part.events[i]));
      event_order.push_back(part.event_order[i]);
    }
    for (auto& [key, k] : part.kept)
      kept[key] = std::move(k);
    for (auto& h : part.holds)
      holds.push_back(std::move(h));
    if (!part.stop.empty() && (stop.empty() || part.stop_order < stop_order)) {
      stop = std::move(part.stop);
      stop_order = part.stop_order;
    }
    changes += part.changes;
    for (const auto& [name, n] : part.table_changes)
      table_changes[name] += n;
    for (auto& said : part.schema_changes)
      schema_changes.push_back(std::move(said));
  }

  void sort_events() {
    std::vector<std::size_t> idx(events.size());
    for (std::size_t i = 0; i < idx.size(); ++i)
      idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t a, std::size_t b) { return event_order[a] < event_order[b]; });
    std::vector<change_message> sorted;
    sorted.reserve(events.size());
    for (std::size_t i : idx)
      sorted.push_back(std::move(events[i]));
    events = std::move(sorted);
    std::sort(event_order.begin(), event_order.end());
  }
};

/// A DDL log row about a captured table, routed to that table with the target's live
/// shape of it (read by the stream, which owns the target connection) when the batch
/// has no earlier DDL of the table.
struct ddl_change {
  ddl_event event;
  nlohmann::json fields;  ///< the log row, kept as it is while the table is held
  std::optional<schema::table_schema> live;
  std::string edited_ddl = {};  ///< target_info::edited_ddl
};

/// One change of a table's transaction, as the table actor receives it.
using table_change = std::variant<relation_message, insert_message, update_message,
                                  delete_message, truncate_message, ddl_change>;
struct ordered_change {
  std::uint64_t order;  ///< place in the stream: events merge back in this order
  table_change change;
  std::uint32_t index = 0;  ///< its place in its transaction, from 1 (ChangeEvent.change)
};

/// What every table of one (source, target) stream shares: set once the target and the
/// publisher are open, then only read (by every table actor at once).
struct stream_context {
  std::string project;
  std::string source;
  std::string target;          ///< the target's name
  bool event_target = false;   ///< the target is a Kafka or Pub/Sub target
  bool relational = false;     ///< rows are applied to a DuckDB or PostgreSQL target
  bool events = false;  ///< change events are published (event target, [events.kafka|pubsub])
  config::event_format format = config::event_format::json;
  target_kind kind = target_kind::postgres;
};

std::string display(const dialects::table_ref& t) {
  return t.schema.empty() ? t.name : t.schema + "." + t.name;
}

/// Seed 002 and 003 for one table: what each source change does to its target rows, its
/// events, its shape and its hold. Pure: no connection and no store; what must be written
/// (kept changes, new holds) goes into the batch for the stream to write before commit.
class table_logic {
 public:
  explicit table_logic(stream_context cx) : cx_(std::move(cx)) {}
  [[nodiscard]] const stream_context& context() const { return cx_; }

  /// DDL of one transaction that the transaction itself undoes before its commit: a
  /// captured table renamed and renamed back, a primary key dropped and made again over
  /// the same columns by separate statements. Decided statement by statement, the first
  /// would stop or hold the table for a change gone at commit; the statements in between
  /// are given the name and key the table keeps. Nothing else of them changes (a column
  /// changed meanwhile leaves them as they are).
  static std::optional<std::vector<ordered_change>> settle_passing_ddl(
      const table_state& t, const std::vector<ordered_change>& changes) {
    std::vector<std::size_t> ddl;
    for (std::size_t i = 0; i < changes.size(); ++i)
      if (std::holds_alternative<ddl_change>(changes[i].change))
        ddl.push_back(i);
    if (ddl.size() < 2)
      return std::nullopt;
    const auto event_at = [&](std::vector<ordered_change>& v, std::size_t k) -> ddl_event& {
      return std::get<ddl_change>(v[ddl[k]].change).event;
    };
    const auto name_of = [](const ddl_event& e) { return e.schema + "." + e.table; };
    const auto key_of = [](const std::vector<source_column>& cols) {
      std::vector<std::string> key;
      for (const auto& c : cols)
        if (c.key)
          key.push_back(c.name);
      return key;
    };
    const auto without_key = [](std::vector<source_column> cols) {
      for (auto& c : cols)
        c.key = false;
      return cols;
    };
    std::optional<std::vector<ordered_change>> out;
    std::vector<ordered_change> work = changes;
    std::string name = t.name;
    std::vector<source_column> cols = t.columns;
    for (std::size_t k = 0; k < ddl.size(); ++k) {
      ddl_event& e = event_at(work, k);
      if (e.dropped)
        break;
      if (name_of(e) != name && e.columns == cols) {
        // Renamed: back to `name` by a later statement, only renames in between?
        for (std::size_t m = k + 1; m < ddl.size(); ++m) {
          const ddl_event& later = event_at(work, m);
          if (later.dropped || later.columns != cols)
            break;
          if (name_of(later) == name) {
            // The name's schema and table as the statement back to it gives them (a
            // schema may hold a dot).
            const std::string schema = later.schema, table = later.table;
            for (std::size_t j = k; j < m; ++j) {
              event_at(work, j).schema = schema;
              event_at(work, j).table = table;
            }
            out = work;
            break;
          }
        }
      } else if (name_of(e) == name && !key_of(cols).empty() && key_of(e.columns) != key_of(cols) &&
                 without_key(e.columns) == without_key(cols)) {
        // The key dropped or changed: the same key again by a later statement, nothing
        // else of the table changed in between?
        for (std::size_t m = k + 1; m < ddl.size(); ++m) {
          const ddl_event& later = event_at(work, m);
          if (later.dropped || name_of(later) != name ||
              without_key(later.columns) != without_key(cols))
            break;
          if (key_of(later.columns) == key_of(cols)) {
            for (std::size_t j = k; j < m; ++j)
              event_at(work, j).columns = cols;
            out = work;
            break;
          }
        }
      }
      const ddl_event& now = event_at(work, k);
      name = name_of(now);
      cols = now.columns;
    }
    return out;
  }

  /// The table's changes of the transaction ending at `at`, in order. A hold's position
  /// is a transaction: a DDL that opens a hold holds the table from the start of its
  /// transaction, so the rows written before it in that transaction are kept too (under
  /// the new column names, followed across renames by attnum) and the review's replay
  /// carries the whole transaction once.
  void handle_transaction(table_state& t, batch& b, lsn_t at,
                          const std::vector<ordered_change>& given) const {
    const auto settled = settle_passing_ddl(t, given);
    const std::vector<ordered_change>& changes = settled ? *settled : given;
    const bool has_ddl = std::any_of(changes.begin(), changes.end(), [](const auto& c) {
      return std::holds_alternative<ddl_change>(c.change);
    });
    std::optional<table_state> t0;
    std::optional<batch> b0;
    if (has_ddl && t.state == table_state::mode::streaming) {
      // A DDL transaction commits on its own: the batch before it is empty, so cheap to copy.
      t0 = t;
      b0 = b;
    }
    bool kept_any = false;
    std::size_t hold_at = changes.size();  // the change that opened a hold
    for (std::size_t i = 0; i < changes.size(); ++i) {
      b.order = changes[i].order;
      b.change_index = changes[i].index;
      const std::size_t holds = b.holds.size();
      handle(t, b, at, changes[i].change, kept_any);
      if (hold_at == changes.size() && b.holds.size() > holds)
        hold_at = i;
    }
    if (kept_any)
      t.kept_through = at;
    if (!t0 || hold_at == changes.size() || hold_at == 0)
      return;
    // Again from the start of the transaction, held at it.
    pb::HoldRecord hold = b.holds.back();
    const ddl_event& e = std::get<ddl_change>(changes[hold_at].change).event;
    // The transaction's DDL before the held one was applied in the pass above: on a
    // relational target its statements lead the review's proposal, rather than being kept
    // for the replay to decide again against the shape after the held change (which
    // would misread it, a rename as its reverse).
    const bool fold_earlier = cx_.relational;
    if (fold_earlier) {
      std::vector<std::string> statements, said;
      if (auto it = b.steps.find(t.key); it != b.steps.end()) {
        const auto had = b0->steps.find(t.key);
        const std::size_t from = had == b0->steps.end() ? 0 : had->second.size();
        for (std::size_t k = from; k < it->second.size(); ++k)
          if (const auto* d = std::get_if<ddl_step>(&it->second[k]))
            statements.insert(statements.end(), d->statements.begin(), d->statements.end());
      }
      // Each earlier change as the card words changes ("column v renamed to v2"): the
      // statement text may be the whole query, the held statement in it.
      std::vector<source_column> shape = t0->columns;
      for (std::size_t i = 0; i < hold_at; ++i)
        if (const auto* d = std::get_if<ddl_change>(&changes[i].change)) {
          captured_table was = to_captured(cx_.source, t.name, shape);
          for (const auto& c : to_source_changes(t.name, shape, d->event, "")) {
            said.push_back(source_change_text(was, c));
            was = apply_change(was, c.change);
          }
          if (!d->event.dropped)
            shape = d->event.columns;
        }
      with_other_changes(hold, statements, {}, said, "before it in the same transaction");
    }
    t = std::move(*t0);
    b = std::move(*b0);
    const std::vector<source_column> before = t.columns;
    t.state = table_state::mode::held;
    t.hold_position = at;
    kept_any = false;
    std::size_t kept_before = b.kept[t.key].size();
    for (std::size_t i = 0; i < changes.size(); ++i) {
      b.order = changes[i].order;
      b.change_index = changes[i].index;
      if (i == hold_at) {
        // The hold's own change lives in its review.
        // A relational target replays them under the new shape, after the review's DDL;
        // an event target publishes them before the change, as they happened.
        if (cx_.relational)
          renamed_kept(b.kept[t.key], kept_before, before, e.columns);
        b.holds.push_back(hold);
        t.columns = e.columns;
        t.layout = layout_of(t.columns);
        continue;
      }
      if (const auto* d = std::get_if<ddl_change>(&changes[i].change);
          d != nullptr && fold_earlier && i < hold_at) {
        // In the review's proposal: the rows after it arrive in its shape.
        if (!d->event.dropped) {
          t.columns = d->event.columns;
          t.layout = layout_of(t.columns);
        }
        continue;
      }
      handle(t, b, at, changes[i].change, kept_any);
    }
    t.kept_through = at;
  }

  /// One change of the transaction ending at `at`. `kept_any` becomes true when the
  /// change was kept for the table's review.
  void handle(table_state& t, batch& b, lsn_t at, const table_change& c, bool& kept_any) const {
    if (auto* rel = std::get_if<relation_message>(&c)) {
      on_relation(t, *rel);
      return;
    }
    if (auto* d = std::get_if<ddl_change>(&c)) {
      on_ddl(t, b, *d, at, kept_any);
      return;
    }
    if (at <= t.applied || t.state == table_state::mode::removed)
      return;
    const bool held = t.state == table_state::mode::held && at >= t.hold_position;
    if (held && at <= t.kept_through)
      return;  // kept before a restart
    if (std::holds_alternative<truncate_message>(c)) {
      if (held) {
        keep(t, b, "truncate", at, std::nullopt, std::nullopt);
        kept_any = true;
        return;
      }
      if (cx_.relational)
        b.steps[t.key].emplace_back(std::in_place_type<truncate_step>);
      else if (!t.layout.key.empty())
        truncate_stop(t);
      add_table_event(b, t, "truncate", at);
    } else if (auto* i = std::get_if<insert_message>(&c)) {
      tuple row = to_layout(t, i->row);
      if (held) {
        keep(t, b, "insert", at, std::nullopt, row);
      } else {
        apply_insert(b, t, row);
        add_row_event(b, t, "insert", at, &row, &row, nullptr);
      }
    } else if (auto* u = std::get_if<update_message>(&c)) {
      tuple row = to_layout(t, u->row);
      std::optional<tuple> old;
      if (u->old_row)
        old = to_layout(t, *u->old_row);
      // An old image of the key alone (the key changed, default replica identity): its
      // other columns are not values but unknown, so none fills the new row's unchanged
      // (TOAST) values, which the target still holds under the old key.
      std::optional<tuple> old_image = old;
      if (old_image && u->old_is_key)
        for (std::size_t i = 0; i < old_image->size(); ++i)
          if (std::find(t.layout.key.begin(), t.layout.key.end(), i) == t.layout.key.end())
            (*old_image)[i].type = tuple_value::kind::unchanged;
      if (held) {
        keep(t, b, "update", at, old_image, row);
      } else {
        apply_update(b, t, old_image, row);
        add_row_event(b, t, "update", at, &row, &row, old ? &*old : nullptr);
      }
    } else if (auto* d = std::get_if<delete_message>(&c)) {
      tuple old = to_layout(t, d->old_row);
      if (held) {
        keep(t, b, "delete", at, old, std::nullopt);
      } else {
        apply_remove(b, t, old);
        add_row_event(b, t, "delete", at, &old, nullptr, nullptr);
      }
    }
    if (held) {
      kept_any = true;
    } else {
      note_position(b, t, at);
      ++b.changes;
      ++b.table_changes[t.name];
    }
  }

  /// Seed 002's decision on the DDL `e` of `t` at `at`, against the target's live shape
  /// `live` when `read_live`. A stop throws; an applied change adds its statements and
  /// schema change event to `b` and gives `t` the new shape; a held one is returned as
  /// it is.
  outcome decide_into(batch& b, table_state& t, const ddl_event& e, lsn_t at,
                      const std::optional<schema::table_schema>& live, bool read_live,
                      const std::string& edited_ddl = {}) const {
    target_info info;
    info.name = cx_.target;
    info.kind = cx_.kind;
    info.table = t.target;
    if (read_live && cx_.relational) {
      info.actual = live;
      info.edited_ddl = edited_ddl;
    }
    outcome o = decide_ddl(cx_.source, t.name, t.columns, e, format_lsn(at), info);
    if (auto* st = std::get_if<stopped>(&o))
      throw stop_error(fmt::format("{} [{}] {}", st->message, st->code, st->remedy));
    if (auto* a = std::get_if<applied>(&o)) {
      if (!a->statements.empty() && cx_.relational)
        b.steps[t.key].emplace_back(std::in_place_type<ddl_step>, ddl_step{a->statements});
      t.columns = e.columns;
      t.layout = layout_of(t.columns);
      add_table_event(b, t, "schema_change", at, ddl_statements(e.ddl), "applied");
      for (const auto& said : a->said)
        b.schema_changes.push_back(fmt::format("schema change on target '{}': {}", cx_.target, said));
    }
    return o;
  }

  /// The `schema_change` event (when the table publishes events) of the held change `ddl`
  /// at `at` once a review decided it (applied, or copied afresh by a resync), under `t`'s
  /// new shape: consumers learn of the change before the events that follow it.
  void add_decided_change(batch& b, const table_state& t, const held_change_ref& held,
                          lsn_t at) const {
    if (held.ddl.empty())
      return;
    b.change_index = held.change;
    add_table_event(b, t, "schema_change", at, ddl_statements(held.ddl), "applied");
  }

  /// Holds the table at the change `e` (seed 003): a review awaiting a decision, added
  /// to `b.holds` for the stream to write.
  void open_hold(batch& b, table_state& t, pb::HoldRecord h, const ddl_event& e, lsn_t at) const {
    h.set_target(cx_.target);
    h.set_table(t.key);
    h.set_position(format_lsn(at));
    nlohmann::json detail{{"columns_before", columns_json(t.columns)},
                          {"columns_after", columns_json(e.columns)},
                          {"ddl", e.ddl},
                          {"change", b.change_index},
                          // Where the table lands: a decision checks the target can take
                          // its rows after the DDL (decide.cpp, resume_probe).
                          {"target_catalog", t.target.catalog},
                          {"target_schema", t.target.schema},
                          {"target_name", t.target.name}};
    h.set_detail(detail.dump());
    b.holds.push_back(std::move(h));
    t.state = table_state::mode::held;
    t.hold_position = at;
    t.columns = e.columns;
    t.layout = layout_of(t.columns);
  }

  /// A kept change, whose tuples name their columns, under the table's current shape.
  void replay_change(batch& b, table_state& t, const nlohmann::json& j) const {
    const std::string op = j.value("op", "");
    const lsn_t at = parse_lsn(j.value("position", std::string{})).value_or(t.kept_through);
    b.change_index = j.value("change", std::uint32_t{0});
    if (op == "truncate") {
      if (cx_.relational)
        b.steps[t.key].emplace_back(std::in_place_type<truncate_step>);
      else if (!t.layout.key.empty())
        truncate_stop(t);
      add_table_event(b, t, "truncate", at);
      return;
    }
    std::vector<std::string> names = j.value("columns", std::vector<std::string>{});
    auto remap = [&](const nlohmann::json& a) {
      tuple in = json_tuple(a);
      tuple out(t.layout.names.size());
      for (std::size_t i = 0; i < names.size() && i < in.size(); ++i)
        for (std::size_t k = 0; k < t.layout.names.size(); ++k)
          if (t.layout.names[k] == names[i])
            out[k] = in[i];
      return out;
    };
    std::optional<tuple> row;
    std::optional<tuple> old;
    if (j.contains("row"))
      row = remap(j["row"]);
    if (j.contains("old"))
      old = remap(j["old"]);
    if (op == "insert" && row) {
      apply_insert(b, t, *row);
      add_row_event(b, t, op, at, &*row, &*row, nullptr);
    } else if (op == "update" && row) {
      apply_update(b, t, old, *row);
      add_row_event(b, t, op, at, &*row, &*row, old ? &*old : nullptr);
    } else if (op == "delete" && old) {
      apply_remove(b, t, *old);
      add_row_event(b, t, op, at, &*old, nullptr, nullptr);
    }
    ++b.changes;
    ++b.table_changes[t.name];
  }

  /// Before a snapshot that replaces what consumers hold of the table (`--reload`, a
  /// review's resync): a truncate event, so that rows gone from the source since (a
  /// TRUNCATE the stream stopped at, rows deleted while the table was held) go from
  /// their copies too, and a keyless table's rows are not kept twice.
  void add_snapshot_truncate(batch& b, const table_state& t, lsn_t at) const {
    add_table_event(b, t, "truncate", at);
  }

  /// A row change event, keyed by the table and the row key (the table alone for a
  /// keyless table) so one row's changes stay in order.
  void add_row_event(batch& b, const table_state& t, std::string op, lsn_t at,
                     const tuple* key_row, const tuple* row, const tuple* old_row) const {
    if (!cx_.events)
      return;
    change_event e = event_base(t, "row_change", at, b.change_index);
    e.op = std::move(op);
    std::string key = t.key;
    if (key_row && !t.layout.key.empty()) {
      e.key = values_of(t, *key_row, true);
      nlohmann::json k = nlohmann::json::object();
      for (const auto& v : e.key)
        k[v.column] = v.text ? nlohmann::json(*v.text) : nlohmann::json(nullptr);
      key += ":" + k.dump();
    }
    if (row)
      e.row = values_of(t, *row, false);
    if (old_row && !t.layout.key.empty())
      e.old_key = values_of(t, *old_row, true);
    // A keyless table's rows are known by every column (REPLICA IDENTITY FULL sends the
    // old row whole), as the warehouse targets match them: an update's old_key and a
    // delete's key are the old row, or a consumer could not tell which row changed.
    if (t.layout.key.empty() && e.op == "delete" && key_row)
      e.key = values_of(t, *key_row, false);
    if (t.layout.key.empty() && old_row)
      e.old_key = values_of(t, *old_row, false);
    push_event(b, t, e, std::move(key));
  }

 private:
  /// Kept changes from `from` on, written under the columns `before`, renamed to the
  /// names the same columns (by attnum) have in `after`.
  static void renamed_kept(std::vector<pb::HeldChange>& kept, std::size_t from,
                           const std::vector<source_column>& before,
                           const std::vector<source_column>& after) {
    for (std::size_t i = from; i < kept.size(); ++i) {
      auto j = nlohmann::json::parse(kept[i].payload(), nullptr, false);
      if (!j.is_object() || !j.contains("columns"))
        continue;
      for (auto& name : j["columns"]) {
        for (const auto& old : before)
          if (name.is_string() && old.name == name.get<std::string>()) {
            for (const auto& now : after)
              if (now.attnum == old.attnum && old.attnum != 0)
                name = now.name;
            break;
          }
      }
      kept[i].set_payload(j.dump());
    }
  }

  void on_relation(table_state& t, const relation_message& rel) const {
    t.map.assign(rel.columns.size(), static_cast<std::size_t>(-1));
    for (std::size_t i = 0; i < rel.columns.size(); ++i) {
      for (std::size_t k = 0; k < t.layout.names.size(); ++k)
        if (t.layout.names[k] == rel.columns[i].name)
          t.map[i] = k;
      if (t.map[i] == static_cast<std::size_t>(-1) && t.state == table_state::mode::streaming)
        throw stop_error(fmt::format(
            "source '{}': table '{}' has column '{}' in the change stream that no captured "
            "DDL added (was the event trigger flotilla_ddl_end disabled?); run `flotilla "
            "stream --reload` to copy every table again",
            cx_.source, t.name, rel.columns[i].name));
    }
  }

  void on_ddl(table_state& t, batch& b, const ddl_change& d, lsn_t at, bool& kept_any) const {
    const ddl_event& e = d.event;
    if (at <= t.applied || t.state == table_state::mode::removed)
      return;
    if (t.state == table_state::mode::held) {
      if (at > t.kept_through) {
        // A later change of a held table is kept in order with its rows and decided when
        // the replay reaches it (earliest first); the rows after it are kept under the
        // shape they arrive in.
        nlohmann::json j{{"op", "ddl"},
                         {"position", format_lsn(at)},
                         {"change", b.change_index},
                         {"columns", t.layout.names},
                         {"event", d.fields}};
        pb::HeldChange c;
        c.set_position(format_lsn(at));
        c.set_payload(j.dump());
        b.kept[t.key].push_back(std::move(c));
        kept_any = true;
        if (!e.dropped) {
          t.columns = e.columns;
          t.layout = layout_of(t.columns);
        }
      }
      return;
    }
    // The live target shape: a table altered by hand stops at the change (seed 002). The
    // batch before this DDL is committed already, so the live shape is the stream's.
    // An earlier DDL of the same transaction is in the batch, not yet on the target: the
    // live shape would differ by that change alone, so it is not checked then.
    bool pending_ddl = false;
    if (auto it = b.steps.find(t.key); it != b.steps.end())
      for (const auto& step : it->second)
        pending_ddl = pending_ddl || std::holds_alternative<ddl_step>(step);
    outcome o = decide_into(b, t, e, at, d.live, !pending_ddl, d.edited_ddl);
    if (std::holds_alternative<applied>(o)) {
      b.positions[t.name] = {at, columns_json(t.columns)};
      return;
    }
    open_hold(b, t, std::get<held>(o).hold, e, at);
    kept_any = true;  // the rest of the transaction is kept (handle_transaction)
  }

  /// The table's position in this batch; its shape is serialized once per batch.
  static void note_position(batch& b, const table_state& t, lsn_t at) {
    auto [it, inserted] = b.positions.try_emplace(t.name);
    it->second.lsn = at;
    if (inserted || it->second.columns.empty())
      it->second.columns = columns_json(t.columns);
  }

  /// The table's last step of the batch when it is a `Changes` (net_changes by key,
  /// keyless_changes in order) under the table's current shape; else a new one.
  template <class Changes>
  static Changes& current(batch& b, const table_state& t) {
    auto& steps = b.steps[t.key];
    if (steps.empty() || !std::holds_alternative<Changes>(steps.back()) ||
        std::get<Changes>(steps.back()).layout != t.layout) {
      Changes c;
      c.layout = t.layout;
      steps.emplace_back(std::move(c));
    }
    return std::get<Changes>(steps.back());
  }

  // Row changes onto a relational target: by key, or in order for a keyless table.
  void apply_insert(batch& b, const table_state& t, const tuple& row) const {
    if (!cx_.relational)
      return;
    if (t.layout.key.empty())
      current<keyless_changes>(b, t).insert(row);
    else
      current<net_changes>(b, t).insert(row);
  }
  void apply_update(batch& b, const table_state& t, const std::optional<tuple>& old,
                    const tuple& row) const {
    if (!cx_.relational)
      return;
    if (t.layout.key.empty())
      current<keyless_changes>(b, t).update(old, row);
    else
      current<net_changes>(b, t).update(old, row);
  }
  void apply_remove(batch& b, const table_state& t, const tuple& old) const {
    if (!cx_.relational)
      return;
    if (t.layout.key.empty())
      current<keyless_changes>(b, t).remove(old);
    else
      current<net_changes>(b, t).remove(old);
  }

  static tuple to_layout(const table_state& t, const tuple& in) {
    tuple out(t.layout.names.size());
    for (std::size_t i = 0; i < in.size() && i < t.map.size(); ++i)
      if (t.map[i] < out.size())
        out[t.map[i]] = in[i];
    return out;
  }

  static void keep(const table_state& t, batch& b, const char* op, lsn_t at,
                   const std::optional<tuple>& old_row, const std::optional<tuple>& row) {
    nlohmann::json j{{"op", op}, {"columns", t.layout.names}, {"position", format_lsn(at)},
                     {"change", b.change_index}};
    if (old_row)
      j["old"] = tuple_json(*old_row);
    if (row)
      j["row"] = tuple_json(*row);
    pb::HeldChange c;
    c.set_position(format_lsn(at));
    c.set_payload(j.dump());
    b.kept[t.key].push_back(std::move(c));
  }

  static std::vector<change_value> values_of(const table_state& t, const tuple& row,
                                             bool key_only) {
    std::vector<change_value> out;
    auto one = [&](std::size_t i) {
      if (i >= row.size() || i >= t.layout.names.size())
        return;
      change_value v;
      v.column = t.layout.names[i];
      v.unchanged = row[i].type == tuple_value::kind::unchanged;
      if (row[i].type == tuple_value::kind::text)
        v.text = row[i].text;
      out.push_back(std::move(v));
    };
    if (key_only)
      for (std::size_t i : t.layout.key)
        one(i);
    else
      for (std::size_t i = 0; i < t.layout.names.size(); ++i)
        one(i);
    return out;
  }

  change_event event_base(const table_state& t, std::string type, lsn_t at,
                          std::uint32_t change = 0) const {
    change_event e;
    e.type = std::move(type);
    e.change = change;
    e.project = cx_.project;
    e.source = cx_.source;
    e.table = t.name;
    e.target = cx_.event_target ? cx_.target : display(t.target);
    e.position = format_lsn(at);
    return e;
  }

  void push_event(batch& b, const table_state& t, const change_event& e, std::string key) const {
    b.events.push_back({std::move(key), t.key, e.type, encode(e, cx_.format)});
    b.event_order.push_back(b.order);
  }

  /// A truncate or schema change event, keyed by the table name.
  void add_table_event(batch& b, const table_state& t, std::string type, lsn_t at,
                       std::string ddl = {}, std::string outcome = {}) const {
    if (!cx_.events)
      return;
    change_event e = event_base(t, std::move(type), at, b.change_index);
    e.ddl = std::move(ddl);
    e.outcome = std::move(outcome);
    if (e.type == "schema_change")
      e.columns = t.layout.names;
    push_event(b, t, e, t.key);
  }

  /// Seed 002: an event target cannot express a truncate of a keyed table as keyed events.
  [[noreturn]] void truncate_stop(const table_state& t) const {
    throw stop_error(fmt::format(
        "{} [{}] Reload the stream (flotilla stream --reload), which publishes every row "
        "again",
        stop_message(t.name, fmt::format("TRUNCATE of {}, which has a row key, cannot be "
                                         "published as keyed events on {} target '{}'",
                                         t.name, to_string(cx_.kind), cx_.target)),
        code_truncate_keyed_event));
  }

  stream_context cx_;
};

// ---- table actors ------------------------------------------------------------------
// Each captured table is an actor owning its state: shape, applied position, hold, and
// the queue of its changes not yet committed. The source's stream thread reads the
// replication connection, routes each transaction's changes to the tables they touch,
// and at a batch boundary takes every touched table's part, writes what the parts keep
// and hold, and commits them in one target transaction. The table actors never block:
// every connection and the state store belong to the stream thread.

/// A transaction's changes of one table, in source order.
struct table_changes {
  lsn_t at = 0;
  std::shared_ptr<std::vector<ordered_change>> changes;
};
/// A table's part of the batch, taken by the stream at a batch boundary.
struct table_part {
  std::size_t index = 0;
  std::shared_ptr<batch> part;
};
/// The table's whole state: lent to the stream thread for a review decision (a replay,
/// a resync) at a batch boundary, and given back after it.
struct table_lent {
  std::size_t index = 0;
  std::shared_ptr<table_state> state;
};
/// The batch holding the table's changes up to `at` committed.
struct table_committed {
  lsn_t at = 0;
  std::uint64_t changes = 0;  ///< the table's changes the batch committed
};

}  // namespace
}  // namespace flotilla::cdc

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::cdc::table_changes)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::cdc::table_part)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::cdc::table_lent)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::cdc::table_committed)

namespace flotilla::cdc {
namespace {

using take_atom = caf::atom_constant<caf::atom("take")>;
using lend_atom = caf::atom_constant<caf::atom("lend")>;

struct table_actor_state {
  table_state table;
  batch pending;  ///< the table's changes since the last batch boundary
  bool stopped = false;
};

caf::behavior table_actor(caf::stateful_actor<table_actor_state>* self, std::size_t index,
                          std::shared_ptr<table_state> initial, const table_logic* logic) {
  self->state.table = std::move(*initial);
  return {
      [=](table_changes& m) {
        auto& st = self->state;
        if (st.stopped)
          return;  // the batch will not commit: the stream stops at the first stop
        try {
          // What it keeps is written to RocksDB before the batch commits.
          logic->handle_transaction(st.table, st.pending, m.at, *m.changes);
        } catch (const std::exception& e) {
          st.stopped = true;
          st.pending.stop = e.what();
          st.pending.stop_order = st.pending.order;
        }
      },
      [=](take_atom, const caf::actor& reply_to) {
        auto part = std::make_shared<batch>(std::move(self->state.pending));
        self->state.pending = batch{};
        self->send(reply_to, table_part{index, std::move(part)});
      },
      [=](table_committed& m) {
        self->state.table.applied = std::max(self->state.table.applied, m.at);
        self->state.table.changes += m.changes;
      },
      [=](lend_atom, const caf::actor& reply_to) {
        self->send(reply_to,
                   table_lent{index, std::make_shared<table_state>(self->state.table)});
      },
      [=](table_lent& m) { self->state.table = std::move(*m.state); },
  };
}

/// A table as the stream thread knows it once its actor owns its state: what never
/// changes, and the actor.
struct table_slot {
  std::string name;
  std::string key;
  dialects::table_ref target;
  caf::actor actor;
};

class source_stream {
 public:
  /// `target` is the source's `index`-th stream target (config::stream_targets_of): the
  /// first keeps the source's own slot and position keys, the others get their own.
  source_stream(const stream_options& o, const config::source_config& s, std::string target,
                std::size_t index, caf::actor_system& system)
      : o_(o), src_(s), tgt_name_(std::move(target)), system_(system) {
    wh_ = o.project->find_target(tgt_name_);
    ev_ = o.project->find_event_target(tgt_name_);
    slot_ = slot_name(*o.project, s, index == 0 ? "" : tgt_name_);
    publication_ = slot_;
    if (index > 0)
      pos_prefix_ = tgt_name_ + "|";
    side_events_ = index == 0;
    summary_.source = s.name;
    summary_.target = tgt_name_;
    summary_.slot = slot_;
  }

  ~source_stream() { stop_tables(); }

  source_summary run() {
    self_ = std::make_unique<caf::scoped_actor>(system_);
    try {
      start();
      spawn_tables();
      loop();
      interrupt_waiting_resyncs();
      summary_.status = "stopped";
    } catch (const stop_error& e) {
      summary_.status = "failed";
      summary_.error = e.what();
    } catch (const std::exception& e) {
      summary_.status = "failed";
      summary_.error = e.what();
    }
    summary_.position = confirmed_ ? format_lsn(confirmed_) : saved_position();
    try {
      take_back_tables();
    } catch (const std::exception& e) {
      if (!summary_.error)
        summary_.error = e.what();
      summary_.status = "failed";
    }
    stop_tables();
    for (const auto& t : tables_) {
      summary_.tables.push_back(
          {src_.name, t.name, display(t.target),
           t.state == table_state::mode::held      ? "held"
           : t.state == table_state::mode::removed ? "removed"
           : summary_.status == "failed"           ? "stopped"  // the pair failed: not streaming
                                                   : "streaming",
           t.changes, t.copied_in_run});
    }
    // A table held by an open review whose source table is gone (dropped while held) is
    // not streamed, so not among the tables above; its review still waits: listed held.
    if (o_.store != nullptr)
      if (auto reviews = list_reviews(*o_.store, tgt_name_)) {
        const std::string prefix = src_.name + ".";
        for (const auto& r : *reviews) {
          const std::string& key = r.hold.table();
          if (!key.starts_with(prefix) || by_key_.contains(key) || !holds_table(r))
            continue;
          const std::string name = key.substr(prefix.size());
          dialects::table_ref target;
          const auto [schema, table] = split(name);
          if (wh_) {
            auto where = config::target_table_named(*wh_, src_, table);
            target = dialects::table_ref{where.catalog, where.schema, where.name};
          } else {
            target = dialects::table_ref{"", schema, table};
          }
          summary_.tables.push_back({src_.name, name, display(target), "held", 0, 0});
        }
      }
    return std::move(summary_);
  }

 private:
  [[nodiscard]] bool cancelled() const { return o_.cancel && o_.cancel->load(); }

  /// The position a pair that stopped before streaming still resumes from: the saved one,
  /// or none ("") when it never had one. 0/0 would claim a position no slot has.
  [[nodiscard]] std::string saved_position() const {
    if (o_.store == nullptr)
      return {};
    try {
      auto saved = o_.store->get<pb::CdcPosition>(pos_prefix_ + src_.name);
      if (saved && *saved && (*saved)->slot() == slot_)
        return (*saved)->position();
    } catch (const std::exception&) {
    }
    return {};
  }

  // ---- setup ------------------------------------------------------------------------

  void start() {
    source_ = std::make_unique<pg_connection>(src_.dsn, src_.name);
    const std::string what = fmt::format("target '{}'", tgt_name_);
    if (ev_) {
      events_ = ev_->kind == "kafka" ? kafka_publisher(*ev_->kafka, what)
                                     : pubsub_publisher(*ev_->pubsub, what);
    } else if (wh_) {
      if (wh_->dialect != "duckdb" && wh_->dialect != "postgres")
        throw std::runtime_error(fmt::format(
            "source '{}': target '{}' is {}; flotilla stream applies changes to duckdb and "
            "postgres targets and publishes them to kafka and pubsub targets",
            src_.name, tgt_name_, wh_->dialect));
      sinks::warehouse_options wo{wh_->name, wh_->dialect, wh_->path, wh_->dsn, wh_->block_size};
      target_ = sinks::open_warehouse(wo);
      {
        // Pairs start side by side: two creating the bookkeeping schema of one DuckDB file
        // at once conflict ("Catalog write-write conflict"), failing the stream's start.
        static std::mutex bookkeeping;
        std::lock_guard lock(bookkeeping);
        target_->execute(positions_table_ddl(target_->dialect()));
      }
      if (side_events_)
        events_ = side_publisher(*o_.project);
    } else {
      throw std::runtime_error(fmt::format("source '{}': target '{}' is not defined",
                                           src_.name, tgt_name_));
    }
    make_logic();
    auto saved = o_.store->get<pb::CdcPosition>(pos_prefix_ + src_.name);
    if (!saved)
      throw std::runtime_error(saved.error().message);
    bool fresh = o_.reload || !*saved || (*saved)->slot() != slot_;
    if (*saved && (*saved)->slot() != slot_)
      warn_of_old_slot((*saved)->slot());
    select_tables(!fresh);
    if (!fresh) {
      auto rows = source_->query(fmt::format(
          "SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = {} "
          "AND database = pg_catalog.current_database()",
          pg_literal(slot_)));
      if (rows.empty())
        throw std::runtime_error(fmt::format(
            "source '{}': replication slot '{}' no longer exists on the source (dropped, or "
            "invalidated by max_slot_wal_keep_size), so changes since {} are lost [{}]; run "
            "`flotilla stream --reload` to copy every table again",
            src_.name, slot_, (*saved)->position(), code_slot_lost));
      note_gone_tables();
      forget_left_out_tables();
    }
    lsn_t start_at = 0;
    replication_ = std::make_unique<replication_connection>(src_.dsn, src_.name);
    if (fresh) {
      start_at = setup();
    } else {
      start_at = parse_lsn((*saved)->position()).value_or(0);
      confirmed_ = start_at;  // the summary's position, should a held table's replay stop
      publish_via_root();
      load_positions();
      load_holds();
    }
    confirmed_ = start_at;
    received_ = start_at;
    if (o_.progress)
      o_.progress->tables += tables_.size();
    replication_->start(slot_, start_at, publication_);
  }

  /// A restart gets no further than a stop at a DROP TABLE (seed 002). Once its table is
  /// gone the stream would not capture it, so the DROP's own log entry would pass
  /// unnoticed: the tables this slot captured that the source no longer has are noted,
  /// and their DROP stops the stream again when it is read. So is a table created again
  /// under the same name (a new oid): the DROP of the one captured, under the old oid,
  /// would otherwise pass as a table not captured, and the new table, which is in no
  /// publication, would stream nothing. --reload forgets them.
  void note_gone_tables() {
    const std::string prefix = pos_prefix_ + src_.name + ".";
    auto captured = o_.store->list<pb::CdcPosition>(prefix);
    if (!captured)
      throw std::runtime_error(captured.error().message);
    for (const auto& c : *captured) {
      std::string name = c.key.substr(prefix.size());
      bool recreated = false;
      if (auto now = by_name_.find(name); now != by_name_.end() && c.record.relid() != 0) {
        const std::uint32_t relid = tables_[now->second].relid;
        recreated = relid != 0 && relid != c.record.relid();
      }
      if (c.record.slot() == slot_ && (!on_source_.contains(name) || recreated)) {
        if (c.record.relid() != 0)
          gone_relids_[c.record.relid()] = name;
        gone_.insert(std::move(name));
      }
    }
  }

  /// A table the stream captured before that the source still has and flotilla.toml (or
  /// --filter) no longer selects: its changes from now on pass by uncaptured while the
  /// slot moves on, so its position is forgotten. Taken back in, it is then a table the
  /// stream did not capture (a notice, and `--reload` copies it), not one resumed from a
  /// position whose later changes are gone.
  void forget_left_out_tables() {
    const std::string prefix = pos_prefix_ + src_.name + ".";
    auto captured = o_.store->list<pb::CdcPosition>(prefix);
    if (!captured)
      throw std::runtime_error(captured.error().message);
    for (const auto& c : *captured) {
      const std::string name = c.key.substr(prefix.size());
      if (c.record.slot() != slot_ || !on_source_.contains(name) || by_name_.contains(name))
        continue;
      check(o_.store->remove<pb::CdcPosition>(c.key));
      static std::mutex said_mu;
      static std::set<std::string> said;
      std::lock_guard lock(said_mu);
      if (said.insert(src_.name + "." + name).second)
        std::fprintf(stderr,
                     "notice: source '%s': table '%s' is no longer selected (include, exclude "
                     "or --filter): it is not captured, and its target table stays as last "
                     "copied; taking it back in needs `flotilla stream --reload`, which copies "
                     "every table again\n",
                     src_.name.c_str(), name.c_str());
    }
  }

  /// The DROP of a table noted by note_gone_tables: the same stop as when it was captured.
  void stop_at_gone_table(const ddl_event& e) const {
    const std::string name = e.schema + "." + e.table;
    // A captured table renamed: its DDL names it by its new name, its oid stays.
    if (auto renamed = gone_relids_.find(e.relid);
        !e.dropped && e.relid != 0 && renamed != gone_relids_.end() && renamed->second != name)
      throw stop_error(fmt::format(
          "PostgreSQL logical schema history gap for '{}': captured table {} was renamed to {}, "
          "while the target table keeps the old name [{}] Where flotilla.toml names {} (in "
          "include or a table section), name {} there instead (a pattern such as \"*\" takes "
          "it as it is); then start the stream with --reload, which copies every table again "
          "(the target table of the old name is left as it is: drop it, or rename it to the "
          "new name before the reload to keep what depends on it)",
          renamed->second, renamed->second, name, code_table_renamed, renamed->second, name));
    if (!e.dropped || !gone_.contains(name))
      return;
    throw stop_error(fmt::format(
        "PostgreSQL logical schema history gap for '{}': captured table {} was dropped [{}] To "
        "retire a table, leave it out of the stream before dropping it on the source. Where "
        "flotilla.toml names it (in include or a table section), remove that now (a pattern "
        "such as \"*\" needs nothing); then start the stream with --reload, which copies "
        "every table again",
        name, name, code_table_dropped));
  }

  /// Refuses a target table name the warehouse target would cut (PostgreSQL keeps 63
  /// bytes) or one another of the source's tables lands on, as the target compares names
  /// (DuckDB and SQLite ignore case): streamed, the two tables' rows would overwrite each
  /// other's in one target table. `plan` and `run` refuse the same (FLT-S011, FLT-R006).
  void claim_target(const std::string& name, const dialects::table_ref& where,
                    std::map<std::string, std::string>& claims) const {
    const auto dialect = dialects::make_dialect(wh_->dialect);
    if (!dialect)
      return;
    if (const std::size_t limit = (*dialect)->max_identifier_bytes(); limit != 0)
      for (const auto& [what, part, fix] :
           {std::tuple{"target schema", where.schema,
                       "shorten the target's schema template or the tags it uses"},
            std::tuple{"target table", where.name,
                       "rename the table at the source, or leave it out of the stream"}})
        if (part.size() > limit)
          throw std::runtime_error(fmt::format(
              "FLT-S011: source '{}': table '{}': {} '{}' is {} bytes long, and {} keeps only "
              "the first {} of a name (two names alike in those would be one); {}",
              src_.name, name, what, part, part.size(), (*dialect)->name(), limit, fix));
    std::string claim = fmt::format("{}\n{}\n{}", where.catalog, where.schema, where.name);
    if ((*dialect)->names() != schema::name_rule::case_sensitive)
      for (auto& c : claim)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // Another source's table of this stream command landing there: one process-wide
    // record per target table (the pairs start side by side).
    {
      static std::mutex mu;
      static std::map<std::string, std::string> streamed;  // target NUL claim -> source.table
      std::lock_guard lock(mu);
      const std::string mine = src_.name + "." + name;
      const auto [other, fresh] = streamed.try_emplace(wh_->name + '\0' + claim, mine);
      if (!fresh && other->second != mine && !other->second.starts_with(src_.name + "."))
        throw std::runtime_error(fmt::format(
            "FLT-R006: source '{}': table '{}' lands on target table {} of target '{}', which "
            "{} also streams into: streamed, each would overwrite the other's rows. Give the "
            "two sources distinct target schemas (a schema template with {{source}}), or leave "
            "the table out of one of them (exclude), then start the stream again",
            src_.name, name, display(where), wh_->name, other->second));
    }
    const auto [it, fresh] = claims.try_emplace(std::move(claim), name);
    if (!fresh) {
      const auto folded = [](std::string v) {
        for (auto& c : v)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return v;
      };
      // Names that differ only by case: patterns ignore case, so an exclude would leave
      // out both.
      const bool case_only = folded(it->second) == folded(name);
      throw std::runtime_error(fmt::format(
          "FLT-R006: source '{}': tables '{}' and '{}' both land on target table {} of target "
          "'{}'{}: streamed, each would overwrite the other's rows. {}, then start the stream "
          "again",
          src_.name, it->second, name, display(where), wh_->name,
          case_only ? fmt::format(" ({} compares names ignoring case)", (*dialect)->name())
                    : std::string(),
          case_only ? std::string("Rename one of them at the source: the two names differ only "
                                  "by case, which include and exclude patterns ignore, so "
                                  "excluding one would leave out both")
                    : fmt::format("Leave one out of the stream (exclude = [\"{}\"] in "
                                  "[sources.{}]), give the source a schema template that parts "
                                  "them, or rename one at the source",
                                  name, src_.name)));
    }
  }

  /// The tables the stream captures. A restart (`resuming`) captures the ones it captured
  /// before: a table selected now that it did not capture (created on the source since,
  /// or newly included) is not captured until a reload copies it (seed 002: a new table
  /// is not captured until it is added to the pipeline), and a notice says so.
  void select_tables(bool resuming) {
    auto names_rows = source_->query(
        "SELECT n.nspname || '.' || c.relname, n.nspname, c.relname FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') "
        "AND NOT c.relispartition AND n.nspname NOT IN ('information_schema', '_flotilla') "
        "AND n.nspname NOT LIKE 'pg\\_%' ORDER BY 1");
    std::vector<std::string> names;
    for (auto& r : names_rows) {
      names.push_back(*r[0]);
      parts_[*r[0]] = {*r[1], *r[2]};
    }
    on_source_.clear();
    on_source_.insert(names.begin(), names.end());
    auto selected = config::select_tables(src_, names, o_.filters);
    // A name flotilla.toml gives that the source lacks (misspelled, or dropped there: the
    // stop FLT-H004 says to remove it) is said, as `run` fails it (FLT-R005): the stream
    // goes on with the tables that exist, and that name's target table stays as it is.
    for (const auto& m : config::unmatched_table_names(src_, names, o_.filters)) {
      static std::mutex said_mu;
      static std::set<std::string> said;
      std::lock_guard lock(said_mu);
      if (!said.insert(src_.name + "." + m.name).second)
        continue;
      const std::string where =
          m.where == "section" ? "in " + config::table_header(src_.name, m.name)
                               : fmt::format("in include of [sources.{}]", src_.name);
      std::fprintf(stderr,
                   "warning FLT-R005: source '%s' has no table '%s', which flotilla.toml names "
                   "%s%s; it is not captured, and its target table, if any, stays as last "
                   "copied: fix the name, or remove it from flotilla.toml\n",
                   src_.name.c_str(), m.name.c_str(), where.c_str(),
                   m.nearest.empty() ? "" : fmt::format(" (did you mean '{}'?)", m.nearest).c_str());
    }
    if (selected.empty())
      throw std::runtime_error(fmt::format(
          "source '{}': no table is selected (check include/exclude and --filter)", src_.name));
    std::map<std::string, std::string> claims;  // target table (as the target compares) -> source table
    for (const auto& name : selected) {
      table_state t;
      t.name = name;
      t.key = src_.name + "." + name;
      if (resuming) {
        auto p = o_.store->get<pb::CdcPosition>(pos_prefix_ + t.key);
        if (!p)
          throw std::runtime_error(p.error().message);
        if (!*p) {
          // Once per table, not once per target the source streams to.
          static std::mutex said_mu;
          static std::set<std::string> said;
          std::lock_guard lock(said_mu);
          if (said.insert(t.key).second)
            std::fprintf(stderr,
                         "notice: source '%s': table '%s' was not captured when the stream "
                         "started (created or included since); it is not captured until "
                         "`flotilla stream --reload` copies every table again\n",
                         src_.name.c_str(), name.c_str());
          continue;
        }
      }
      const auto [schema, table] = split(name);
      if (wh_) {
        auto where = config::target_table_named(*wh_, src_, table);
        t.target = dialects::table_ref{where.catalog, where.schema, where.name};
        claim_target(t.name, t.target, claims);
      } else {
        t.target = dialects::table_ref{"", schema, table};
      }
      by_name_[t.name] = tables_.size();
      by_key_[t.key] = tables_.size();
      slots_.push_back({t.name, t.key, t.target, nullptr});
      tables_.push_back(std::move(t));
    }
    read_catalog_shapes();
  }

  void read_catalog_shapes() {
    std::vector<std::string> names;
    for (const auto& t : tables_)
      names.push_back(t.name);
    for (auto& row : catalog_shapes(*source_, names, false)) {
      const std::string q = *row[1] + "." + *row[2];
      for (auto& t : tables_)
        if (t.name == q) {
          t.relid = static_cast<std::uint32_t>(std::stoul(*row[0]));
          t.columns = parse_columns_json(row[3].value_or("[]"));
          t.layout = layout_of(t.columns);
        }
    }
    for (std::size_t i = 0; i < tables_.size(); ++i)
      if (tables_[i].relid != 0)
        by_relid_[tables_[i].relid] = i;
    refuse_generated_columns();
    refuse_unusable_identity();
    refuse_hidden_row_id();
  }

  /// A DuckDB target matches a keyless table's rows by its `rowid`, which a column of that
  /// name hides: an update or delete would then find no row, or the wrong ones. Refused
  /// rather than streamed into lost and doubled rows.
  void refuse_hidden_row_id() const {
    if (!wh_ || wh_->dialect != "duckdb")
      return;
    for (const auto& t : tables_) {
      if (!t.layout.key.empty())
        continue;
      for (const auto& c : t.columns)
        if (hides_duckdb_row_id(c.name))
          throw std::runtime_error(fmt::format(
              "source '{}': table '{}' has no primary key and a column named '{}', which "
              "hides the row id a DuckDB target matches a keyless table's rows by: its "
              "updates and deletes would miss rows or take the wrong ones. Give the table a "
              "primary key at the source, rename the column, or leave the table out of the "
              "stream (exclude = [\"{}\"] in [sources.{}])",
              src_.name, t.name, c.name, t.name, src_.name));
    }
  }

  /// A keyed table whose replica identity is not its primary key: with USING INDEX of
  /// other columns, PostgreSQL sends only those as an updated or deleted row's old key,
  /// and the stream finds the target's row by the primary key, so a key change kept the
  /// old row and a delete removed nothing, silently; with NOTHING, the source refuses the
  /// application's own UPDATE and DELETE once the table is in the publication. The stream
  /// refuses to start, naming the table and the statement that fixes it (checked at every
  /// start: the identity may change between two).
  void refuse_unusable_identity() const {
    const std::string relids = captured_relids(true);
    if (relids.empty())
      return;
    // A partitioned table's changes happen in its partitions, and each partition's own
    // replica identity decides what PostgreSQL sends: they are checked too.
    auto rows = source_->query(fmt::format(
        "WITH roots AS (SELECT unnest(ARRAY[{}]::oid[]) AS oid), rels AS (SELECT oid, oid AS "
        "root FROM roots UNION SELECT pt.relid, roots.oid FROM roots, LATERAL "
        "pg_catalog.pg_partition_tree(roots.oid) pt) "
        "SELECT n.nspname || '.' || c.relname, quote_ident(n.nspname) || '.' || "
        "quote_ident(c.relname), c.relreplident::text, ri.indexrelid::regclass::text, "
        "(SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM "
        "pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = ANY(ri.indkey)), "
        "(SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM "
        "pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = ANY(pk.indkey)), "
        "(SELECT rn.nspname || '.' || r.relname FROM pg_catalog.pg_class r JOIN "
        "pg_catalog.pg_namespace rn ON rn.oid = r.relnamespace WHERE r.oid = rels.root) "
        "FROM rels JOIN pg_catalog.pg_class c ON c.oid = rels.oid "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_catalog.pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary "
        "LEFT JOIN pg_catalog.pg_index ri ON ri.indrelid = c.oid AND ri.indisreplident "
        "WHERE c.relreplident = 'n' OR (c.relreplident = 'i' AND (ri.indexrelid IS NULL OR "
        "NOT (ri.indkey::int2[] @> pk.indkey::int2[] AND pk.indkey::int2[] @> "
        "ri.indkey::int2[]))) ORDER BY 1",
        relids));
    if (rows.empty())
      return;
    std::vector<std::string> found;
    std::string statements, names;
    std::set<std::string> excluded;
    for (const auto& r : rows) {
      // A partition is read through its partitioned table, the one captured: that is the
      // one to leave out, and the one named beside the partition.
      const std::string captured = r[6].value_or(*r[0]);
      const std::string part_of =
          captured == *r[0] ? std::string() : fmt::format(" (a partition of '{}')", captured);
      if (r[2] && *r[2] == "n")
        found.push_back(fmt::format("table '{}'{} has REPLICA IDENTITY NOTHING: once it is in "
                                    "the stream's publication, PostgreSQL refuses every UPDATE "
                                    "and DELETE on it, the application's own included",
                                    *r[0], part_of));
      else
        found.push_back(fmt::format(
            "table '{}'{} has REPLICA IDENTITY USING INDEX {} ({}), not its primary key "
            "({}): PostgreSQL then sends only those columns as an updated or deleted row's "
            "old key, and the stream finds the target's row by the primary key, so the "
            "target would keep rows the source changed the key of or deleted",
            *r[0], part_of, r[3].value_or("?"), r[4].value_or("?"), r[5].value_or("?")));
      statements += fmt::format("{}ALTER TABLE {} REPLICA IDENTITY DEFAULT;",
                                statements.empty() ? "" : " ", *r[1]);
      if (excluded.insert(captured).second)
        names += (names.empty() ? "" : ", ") + config::toml_string(captured);
    }
    throw std::runtime_error(fmt::format(
        "source '{}': {}. Run {} on the source (or FULL instead of DEFAULT), or leave the "
        "table{} out of the stream (exclude = [{}] in [sources.{}])",
        src_.name, fmt::join(found, "; "), statements, excluded.size() == 1 ? "" : "s", names,
        src_.name));
  }


  /// PostgreSQL 15's logical replication leaves generated columns out of every row it
  /// sends: streamed, such a column would turn NULL on the target at each insert and
  /// update. The stream refuses to start rather than lose their values.
  /// The captured tables' oids (of the keyed ones only, with `keyed`), as an SQL list.
  [[nodiscard]] std::string captured_relids(bool keyed) const {
    std::string relids;
    for (const auto& t : tables_)
      if (t.relid != 0 && (!keyed || !t.layout.key.empty()))
        relids += (relids.empty() ? "" : ", ") + std::to_string(t.relid);
    return relids;
  }

  void refuse_generated_columns() const {
    const std::string relids = captured_relids(false);
    if (relids.empty())
      return;
    auto rows = source_->query(fmt::format(
        "SELECT n.nspname || '.' || c.relname, a.attname FROM pg_catalog.pg_attribute a "
        "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON "
        "n.oid = c.relnamespace WHERE a.attrelid IN ({}) AND a.attnum > 0 AND NOT "
        "a.attisdropped AND a.attgenerated <> '' ORDER BY 1, a.attnum LIMIT 1",
        relids));
    if (rows.empty())
      return;
    throw std::runtime_error(fmt::format(
        "source '{}': table '{}' has the generated column '{}', which PostgreSQL's logical "
        "replication does not send (before PostgreSQL 18): streamed, it would turn NULL on "
        "the target. Leave the table out of the stream (exclude = [\"{}\"] in "
        "[sources.{}]), or make the column a plain one",
        src_.name, *rows[0][0], *rows[0][1], *rows[0][0], src_.name));
  }


  /// A table without a primary key streams with its whole old row in updates and deletes:
  /// it gets REPLICA IDENTITY FULL (else the source would refuse them once the table is in
  /// a publication, or send only a unique index's columns).
  void identify_keyless_rows() {
    for (const auto& t : tables_)
      if (t.layout.key.empty())
        identify_rows(t.name);
  }

  /// REPLICA IDENTITY FULL for the table `name` ("schema.table"), unless it has it. A
  /// table no longer there under that name (a DDL read after it was renamed or dropped)
  /// is left alone: its new name is another table's business.
  void identify_rows(const std::string& name) {
    const std::string qualified = quoted(name);
    auto r = source_->query(fmt::format(
        "SELECT relreplident FROM pg_catalog.pg_class WHERE oid = to_regclass({})",
        pg_literal(qualified)));
    if (!r.empty() && r[0][0] && *r[0][0] != "f")
      source_->exec(fmt::format("ALTER TABLE {} REPLICA IDENTITY FULL", qualified));
  }

  /// A captured table that lost its primary key on the source (PostgreSQL drops it with a
  /// key column) would refuse every UPDATE and DELETE there while it is published: it gets
  /// REPLICA IDENTITY FULL at once, as a keyless table does at setup.
  void identify_rows_after(const ddl_event& e) {
    if (e.dropped || e.columns.empty() ||
        std::any_of(e.columns.begin(), e.columns.end(), [](const auto& c) { return c.key; }))
      return;
    try {
      identify_rows(e.schema + "." + e.table);
    } catch (const std::exception& x) {
      fmt::print(stderr,
                 "warning: source '{}': table {}.{} has no row key now, and REPLICA IDENTITY "
                 "FULL could not be set ({}); UPDATE and DELETE on it fail until it is: run "
                 "ALTER TABLE ... REPLICA IDENTITY FULL on the source\n",
                 src_.name, e.schema, e.table, x.what());
    }
  }

  /// The slot this source streamed from under another name (the project renamed, its
  /// directory moved: the name is "flotilla_<project>_<source>"), which the new start
  /// does not use: still on the source, it keeps WAL forever. Said, with how to drop it;
  /// not dropped, since another copy of the project may stream from it.
  void warn_of_old_slot(const std::string& old) {
    try {
      const auto rows = source_->query(fmt::format(
          "SELECT active FROM pg_catalog.pg_replication_slots WHERE slot_name = {} AND "
          "database = pg_catalog.current_database()",
          pg_literal(old)));
      if (rows.empty())
        return;
      fmt::print(stderr,
                 "warning: source '{}': this source streamed from replication slot '{}' "
                 "before (the project's name or directory changed since: its slot is now "
                 "'{}', set up anew with a full copy). The old slot is still on the source{} "
                 "and keeps WAL until dropped: unless another copy of this project streams "
                 "from it, drop it and its publication, connected to the source's database: "
                 "SELECT "
                 "pg_drop_replication_slot('{}'); DROP PUBLICATION IF EXISTS \"{}\";\n",
                 src_.name, old, slot_,
                 rows[0][0].value_or("") == "t" ? " (in use by another process now)" : "",
                 old, old);
    } catch (const std::exception&) {
      // Only a notice: the start goes on.
    }
  }

  /// The DDL capture: a superuser installs (or refreshes) it; a user that is not one
  /// needs it installed already (`flotilla stream --setup-sql`).
  void ensure_ddl_capture() {
    // A source's targets set up concurrently: one at a time installs the capture.
    static std::mutex setup_mutex;
    std::lock_guard lock(setup_mutex);
    auto r = source_->query(ddl_capture_state_sql());
    auto is_true = [&](std::size_t i) { return !r.empty() && r[0][i] && *r[0][i] == "t"; };
    if (is_true(0)) {
      for (const auto& sql : install_ddl_capture_sql())
        source_->exec(sql);
      return;
    }
    if (is_true(1))
      return;
    const auto text = [&](std::size_t i) { return r.empty() ? "" : r[0][i].value_or(""); };
    throw std::runtime_error(fmt::format(
        "source '{}': the DDL capture (function _flotilla.capture_ddl, event triggers "
        "flotilla_ddl_end and flotilla_ddl_drop) is not installed in database '{}', or is "
        "disabled or from another version, and user '{}' cannot install it: event triggers "
        "need a superuser. Have a superuser run the SQL that `flotilla stream --setup-sql` "
        "prints for this source, then start the stream again",
        src_.name, text(3), text(2)));
  }

  /// A partitioned table's changes happen in its partitions: published under the
  /// partitioned table they match the table captured (and the target's); under their own
  /// names they would be dropped as another table's. A publication of an earlier version
  /// gets the setting on its first restart.
  void publish_via_root() const {
    if (source_
            ->query(fmt::format("SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = {} "
                                "AND NOT pubviaroot",
                                pg_literal(publication_)))
            .empty())
      return;
    source_->exec(fmt::format("ALTER PUBLICATION {} SET (publish_via_partition_root = true)",
                              pg_ident(publication_)));
  }

  /// A new slot, its snapshot copied into every table's target, and the positions saved.
  lsn_t setup() {
    ensure_ddl_capture();
    identify_keyless_rows();
    std::string captured;  // the captured tables, qualified and quoted
    for (const auto& t : tables_)
      captured += (captured.empty() ? "" : ", ") + quoted(t.name);
    const std::string list = captured.empty() ? "_flotilla.ddl_log" : captured + ", _flotilla.ddl_log";
    auto pub = source_->query(fmt::format(
        "SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = {}", pg_literal(publication_)));
    source_->exec(fmt::format(fmt::runtime(pub.empty() ? "CREATE PUBLICATION {} FOR TABLE {}"
                                                       : "ALTER PUBLICATION {} SET TABLE {}"),
                              pg_ident(publication_), list));
    publish_via_root();
    // Slot names are the server's, not the database's: one of this name in another
    // database is another stream's (a second project of the same name and source name
    // on this server), never dropped.
    auto elsewhere = source_->query(fmt::format(
        "SELECT database FROM pg_catalog.pg_replication_slots WHERE slot_name = {} "
        "AND database IS DISTINCT FROM pg_catalog.current_database()",
        pg_literal(slot_)));
    if (!elsewhere.empty())
      throw std::runtime_error(fmt::format(
          "source '{}': replication slot '{}' already exists on this server for database "
          "'{}', another stream's (the slot is named after [project] name and the source's "
          "name): Flotilla does not drop it; give this project another name in flotilla.toml "
          "([project] name), or stop and remove the other stream",
          src_.name, slot_, elsewhere[0][0].value_or("?")));
    // The saved position marks a finished setup. It goes before the slot does: a reload
    // that fails or is stopped from here on leaves no position, so the next start sets
    // up again; left in place, it would resume from it on the new slot, which starts
    // later, and the changes in between would be lost.
    check(o_.store->remove<pb::CdcPosition>(pos_prefix_ + src_.name));
    source_->exec(fmt::format(
        "SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM "
        "pg_catalog.pg_replication_slots WHERE slot_name = {} "
        "AND database = pg_catalog.current_database()",
        pg_literal(slot_)));
    if (o_.reload)
      clear_holds();
    created_slot slot = replication_->create_slot(slot_, false, [this] { return cancelled(); });
    // Copy every table from the snapshot the slot starts at: no gap, no duplicate.
    pg_connection copy(src_.dsn, src_.name);
    copy.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    copy.exec(fmt::format("SET TRANSACTION SNAPSHOT {}", pg_literal(slot.snapshot)));
    // Every table locked against DDL until the copy commits, as pg_dump does: a later
    // ALTER waits and then arrives in the stream, instead of breaking the copy of a
    // table not copied yet (its columns are read from the current catalog).
    if (!captured.empty()) {
      try {
        copy.exec(fmt::format("LOCK TABLE {} IN ACCESS SHARE MODE", captured));
      } catch (const std::exception& e) {
        // A table renamed, moved or dropped between the catalog's reading and the lock:
        // nothing is saved yet, and the next start reads the catalog afresh.
        if (std::string_view(e.what()).find("does not exist") == std::string_view::npos)
          throw;
        throw std::runtime_error(fmt::format(
            "source '{}': a table was renamed, moved to another schema or dropped while the "
            "stream set up its copy ({}); nothing was saved: start the stream again, which "
            "reads the source's tables afresh",
            src_.name, e.what()));
      }
    }
    // A table rewritten (ALTER ... TYPE, VACUUM FULL, CLUSTER) between the slot's
    // snapshot and the lock shows the snapshot none of its rows: PostgreSQL's rewrites
    // are not MVCC-safe. Its catalog row as of the snapshot then names another file than
    // the table has now. Nothing is saved yet: the next start copies from a new slot.
    {
      std::string relids;
      for (const auto& t : tables_)
        if (t.relid != 0)
          relids += fmt::format("{}{}", relids.empty() ? "" : ", ", t.relid);
      if (!relids.empty()) {
        auto rewritten = copy.query(fmt::format(
            "SELECT c.oid::pg_catalog.regclass::text FROM pg_catalog.pg_class c "
            "WHERE c.oid IN ({}) AND c.relfilenode <> 0 "
            "AND c.relfilenode IS DISTINCT FROM pg_catalog.pg_relation_filenode(c.oid)",
            relids));
        if (!rewritten.empty())
          throw std::runtime_error(fmt::format(
              "source '{}': table {} was rewritten (ALTER TABLE ... TYPE, VACUUM FULL or "
              "CLUSTER) while the stream took its starting snapshot, which would copy none "
              "of its rows; nothing was copied or saved: start the stream again",
              src_.name, rewritten[0][0].value_or("?")));
      }
    }
    // The shapes as of the snapshot (a DDL between the catalog read and now counts).
    {
      std::vector<std::string> names;
      for (const auto& t : tables_)
        names.push_back(t.name);
      for (auto& row : catalog_shapes(copy, names, true))
        for (auto& t : tables_)
          if (t.name == *row[1] + "." + *row[2]) {
            t.columns = parse_columns_json(row[3].value_or("[]"));
            t.layout = layout_of(t.columns);
          }
    }
    // A copy under way is marked first: one stopped (a kill -9 of a first start or of a
    // --reload) may have published some of its rows, so the copy of the next start
    // replaces what consumers hold, starting with a truncate event of each table, as a
    // reload does; without it a keyless table's rows would reach them twice.
    const std::string copying = pos_prefix_ + src_.name + "#copying";
    auto interrupted = o_.store->get<pb::CdcPosition>(copying);
    if (!interrupted)
      throw std::runtime_error(interrupted.error().message);
    const bool replaces = o_.reload || interrupted->has_value();
    if (events_ && !interrupted->has_value()) {
      pb::CdcPosition mark;
      mark.set_slot(slot_);
      mark.set_run_id(o_.run_id);
      mark.set_updated_at_us(now_us());
      check(o_.store->put(copying, mark));
    }
    for (auto& t : tables_) {
      if (cancelled())
        throw std::runtime_error(
            fmt::format("source '{}': stopped during the initial copy; the next start copies "
                        "every table again",
                        src_.name));
      copy_table(copy, t, slot.consistent_point, replaces);
      // Fault injection for the crash tests: killed once a table's copy is published.
      if (const char* c = std::getenv("FLOTILLA_CRASH_AT");
          c != nullptr && std::string_view(c) == "after_table_copy")
        std::raise(SIGKILL);
    }
    copy.exec("COMMIT");
    // Positions of tables this copy did not take (dropped, or left out) are forgotten.
    const std::string prefix = pos_prefix_ + src_.name + ".";
    auto earlier = o_.store->list<pb::CdcPosition>(prefix);
    if (!earlier)
      throw std::runtime_error(earlier.error().message);
    for (const auto& c : *earlier)
      if (!by_key_.contains(src_.name + "." + c.key.substr(prefix.size())))
        check(o_.store->remove<pb::CdcPosition>(c.key));
    for (const auto& t : tables_) {
      pb::CdcPosition p;
      p.set_position(format_lsn(slot.consistent_point));
      p.set_slot(slot_);
      p.set_run_id(o_.run_id);
      p.set_updated_at_us(now_us());
      p.set_columns(columns_json(t.columns));
      p.set_relid(t.relid);
      check(o_.store->put(pos_prefix_ + t.key, p));
    }
    save_position(slot.consistent_point);
    if (interrupted->has_value() || events_)
      check(o_.store->remove<pb::CdcPosition>(copying));
    return slot.consistent_point;
  }

  /// Publishes a batch of a copy's events (its `read` rows), then empties it. Throws,
  /// naming the table, when they are not acknowledged: the next start copies it again.
  void publish_copied(batch& b, const table_state& t) {
    // Coded as a change's events are: FLT-E002 refused, FLT-E001 not answered.
    const auto failed = [&](std::string_view code, std::string_view why) {
      const bool coded = why.starts_with("FLT-E");
      return std::runtime_error(fmt::format(
          "{}source '{}': the initial copy of '{}' to target '{}' failed: {}; the next start "
          "copies it again",
          coded ? std::string() : std::string(code) + ": ", src_.name, t.name, tgt_name_, why));
    };
    try {
      events_->publish(b.events);
    } catch (const change_refused& e) {
      throw failed("FLT-E002", e.what());
    } catch (const std::exception& e) {
      throw failed("FLT-E001", e.what());
    }
    b.events.clear();
  }

  /// Event targets: the snapshot's rows published as "read" row change events, in
  /// batches, then the table's position.
  void publish_snapshot(pg_connection& copy, table_state& t, lsn_t at, bool replaces) {
    std::string select;
    for (const auto& c : t.columns)
      select += (select.empty() ? "" : ", ") + pg_ident(c.name);
    const std::string qualified = quoted(t.name);
    batch b;
    if (replaces)
      logic_->add_snapshot_truncate(b, t, at);
    std::string scratch;
    std::uint64_t n = 0;
    tuple row;
    auto send = [&] { publish_copied(b, t); };
    copy.copy_out(
        fmt::format("COPY (SELECT {} FROM {}) TO STDOUT", select, qualified),
        [&](std::string_view line) {
          row.assign(t.layout.names.size(), tuple_value{});
          sources::split_copy_row(line, [&](std::size_t i, std::string_view text, bool is_null) {
            if (i >= row.size() || is_null)
              return;
            if (text.find('\\') != std::string_view::npos) {
              sources::unescape_copy(text, scratch);
              text = scratch;
            }
            row[i].type = tuple_value::kind::text;
            row[i].text = std::string(text);
          });
          logic_->add_row_event(b, t, "read", at, &row, &row, nullptr);
          ++n;
          if (b.events.size() >= 5000)
            send();
        });
    if (!b.events.empty())
      send();
    t.applied = at;
    t.copied = n;
    t.copied_in_run += n;
    if (o_.progress)
      o_.progress->copied_rows += n;
    batch pos;
    pos.positions[t.name] = {at, columns_json(t.columns)};
    save_event_positions(pos);
  }

  /// `replaces`: the copy replaces one consumers may hold (a reload, a resync).
  void copy_table(pg_connection& copy, table_state& t, lsn_t at, bool replaces) {
    if (!target_) {
      publish_snapshot(copy, t, at, replaces);
      return;
    }
    const auto& d = target_->dialect();
    sinks::load_request req;
    req.target = t.target;
    req.columns = portable_of(t.columns);
    const auto& cols = req.columns.columns;
    for (std::size_t i = 0; i < cols.size(); ++i)
      for (std::size_t j = i + 1; j < cols.size(); ++j)
        if (schema::same_name(cols[i].name, cols[j].name, d.names()))
          throw std::runtime_error(fmt::format(
              "source '{}': table '{}' has the columns '{}' and '{}', which are one column on "
              "{}, whose names ignore case; rename one of them at the source, or take the "
              "table out of the source's include list, then start the stream with --reload",
              src_.name, t.name, cols[i].name, cols[j].name, d.name()));
    // A full refresh keeps live columns the load lacks; a copy of another shape (reload
    // or resync after a rename or a key change) starts from a new table instead. The old
    // one is moved aside until the copy commits, and put back if it fails.
    std::optional<dialects::table_ref> aside;
    if (auto live = target_->describe(t.target)) {
      bool same = live->columns.size() == cols.size();
      for (std::size_t i = 0; same && i < live->columns.size(); ++i)
        same = live->columns[i].name == cols[i].name && live->columns[i].key == cols[i].key;
      if (!same) {
        aside = t.target;
        aside->name += "__flotilla_previous";
        target_->execute(d.swap_in(t.target, *aside));
      }
    }
    try {
      load_snapshot(copy, t, req, at, replaces);
    } catch (...) {
      if (aside)
        target_->execute(d.swap_in(*aside, t.target));
      throw;
    }
    if (aside)
      target_->execute({d.drop_table(*aside)});
    t.applied = at;
    t.copied_in_run += t.copied;
    if (o_.progress)
      o_.progress->copied_rows += t.copied;
    target_->execute(positions_sql(d, slot_, {{t.name, {at, columns_json(t.columns)}}}));
  }

  /// The snapshot's rows of `t` into a relational target, committed; sets t.copied.
  /// With [events.kafka|pubsub] beside the target, each row is also published as a
  /// "read" event (after a `truncate` one when the copy replaces one consumers may hold),
  /// before the target commits, as the changes are: consumers build their copy from it.
  void load_snapshot(pg_connection& copy, table_state& t, sinks::load_request& req, lsn_t at,
                     bool replaces) {
    req.mode = sinks::load_mode::replace;
    auto writer = target_->begin_load(req);
    batch side;
    tuple side_row;
    const bool publish = events_ != nullptr;
    if (publish && replaces)
      logic_->add_snapshot_truncate(side, t, at);
    auto send = [&] { publish_copied(side, t); };
    std::string select;
    for (const auto& c : t.columns)
      select += (select.empty() ? "" : ", ") + pg_ident(c.name);
    const std::string qualified = quoted(t.name);
    schema::row_batch rows;
    rows.width = t.columns.size();
    std::string scratch;
    std::uint64_t n = 0;
    // A numeric NaN or infinity: a PostgreSQL target's numeric holds it, as the stream's
    // own changes load it; the other targets' decimals do not.
    const bool numeric_specials = target_->dialect().name() == "postgres";
    copy.copy_out(
        fmt::format("COPY (SELECT {} FROM {}) TO STDOUT", select, qualified),
        [&](std::string_view line) {
          if (publish)
            side_row.assign(t.layout.names.size(), tuple_value{});
          sources::split_copy_row(line, [&](std::size_t i, std::string_view text, bool is_null) {
            if (i >= t.layout.types.size())
              return;
            if (is_null) {
              rows.cells.push_back(schema::value::null());
              return;
            }
            if (text.find('\\') != std::string_view::npos) {
              sources::unescape_copy(text, scratch);
              text = scratch;
            }
            if (publish && i < side_row.size()) {
              side_row[i].type = tuple_value::kind::text;
              side_row[i].text = std::string(text);
            }
            auto v = text_value(text, t.layout.types[i]);
            if (!v && numeric_specials && t.layout.types[i].kind == schema::type_kind::decimal &&
                (text == "NaN" || text == "Infinity" || text == "-Infinity"))
              v = schema::value::of_text(std::string(text));
            if (!v)
              throw std::runtime_error(fmt::format(
                  "source '{}': table '{}' column '{}': value '{}' has no {} representation",
                  src_.name, t.name, t.layout.names[i], text,
                  schema::to_string(t.layout.types[i])));
            rows.cells.push_back(std::move(*v));
          });
          ++n;
          if (publish) {
            logic_->add_row_event(side, t, "read", at, &side_row, &side_row, nullptr);
            if (side.events.size() >= 5000)
              send();
          }
          if (rows.rows() >= 8192) {
            writer->write(rows);
            rows.cells.clear();
          }
        });
    if (!rows.cells.empty())
      writer->write(rows);
    if (publish && !side.events.empty())
      send();
    writer->commit();
    t.copied = n;
  }

  /// A reload copies every table again: every open review closes, every kept change goes.
  void clear_holds() {
    auto reviews = list_reviews(*o_.store, tgt_name_);
    if (!reviews)
      throw std::runtime_error(reviews.error().message);
    for (const auto& r : *reviews) {
      if (!find_key(r.hold.table()))
        continue;
      if (is_open(r.hold.state()))
        check(save_review(*o_.store, closed_by_reload(r, now_us())));
      // A table removed from the pipeline is copied again too (seed 003: the reload copies
      // every table), so it rejoins the stream: its review stays closed as removed, marked
      // as superseded by this reload.
      if (r.hold.state() == pb::HOLD_STATE_REMOVED && r.note.phase != "reloaded") {
        review superseded = r;
        superseded.note.phase = "reloaded";
        superseded.hold.set_updated_at_us(now_us());
        check(save_review(*o_.store, superseded));
      }
      check(o_.store->clear_held_changes(tgt_name_, r.hold.table()));
    }
  }

  void load_positions() {
    if (!target_) {
      for (auto& t : tables_) {
        auto p = o_.store->get<pb::CdcPosition>(pos_prefix_ + t.key);
        if (!p)
          throw std::runtime_error(p.error().message);
        if (!*p)
          continue;
        t.applied = parse_lsn((*p)->position()).value_or(0);
        if (!(*p)->columns().empty()) {
          t.columns = parse_columns_json((*p)->columns());
          t.layout = layout_of(t.columns);
        }
      }
      return;
    }
    auto rows = target_->query(positions_query(target_->dialect(), slot_));
    for (auto& r : rows) {
      if (!r[0] || !r[1])
        continue;
      for (auto& t : tables_)
        if (t.name == *r[0]) {
          t.applied = std::stoull(*r[1]);
          if (r[2]) {
            t.columns = parse_columns_json(*r[2]);
            t.layout = layout_of(t.columns);
          }
        }
    }
  }

  /// Decisions may name any target: this stream's own connection for its target, a
  /// new connection for another (DuckDB files share one instance per process).
  target_opener opener() {
    sinks::warehouse* w = target_.get();
    const std::string name = tgt_name_;
    std::vector<sinks::warehouse_options> all;
    for (const auto& t : o_.project->targets)
      all.push_back({t.name, t.dialect, t.path, t.dsn, t.block_size});
    for (const auto& t : o_.project->event_targets)
      all.push_back({t.name, t.kind, "", "", 0});
    target_opener others = opener_for(all);
    return [w, name, others](const std::string& target) -> std::unique_ptr<sinks::warehouse> {
      if (target == name && w)
        return borrow(*w);
      return others(target);
    };
  }

  /// Holds at start: interrupted decisions resolved from the target first, then each
  /// review of a captured table acted on.
  void load_holds() {
    (void)recover_interrupted(*o_.store, opener(), now_us(), [this](const review& r) {
      return r.hold.target() == tgt_name_ && r.hold.table().starts_with(src_.name + ".");
    });
    act_on_reviews();
  }

  /// Brings every table in line with its review: held while the review holds it,
  /// replayed once its DDL ran, copied again when a resync was asked for, left alone
  /// once removed from the pipeline.
  void act_on_reviews() {
    auto reviews = list_reviews(*o_.store, tgt_name_);
    if (!reviews)
      throw std::runtime_error(reviews.error().message);
    for (const auto& r : *reviews) {
      auto it = by_key_.find(r.hold.table());
      if (it == by_key_.end()) {
        fail_resync_of_absent(r);
        continue;
      }
      // A closed review (resumed, closed by a reload) asks nothing of its table; a removed
      // table stays removed. Neither needs the table's state again.
      const bool removed =
          r.hold.state() == pb::HOLD_STATE_REMOVED && r.note.phase != "reloaded";
      if ((!holds_table(r) && !removed) || (removed && removed_.contains(it->second)))
        continue;
      if (removed)
        removed_.insert(it->second);
      // The table's actor lends its state for the decision, at this batch boundary.
      with_table(it->second, [&](table_state& t) {
        const bool was_held = t.state == table_state::mode::held;
        if (removed) {
          t.state = table_state::mode::removed;
        } else if (ready_to_replay(r)) {
          try {
            replay(t, r);
          } catch (const stop_error&) {
            throw;  // a kept DDL the replay reached stops the stream, as a live one would
          } catch (const std::exception& e) {
            // This table's replay alone failed: its review says so, it stays held, and the
            // stream goes on with the others.
            check(save_review(*o_.store, replay_failed(r, e.what(), now_us())));
            if (o_.progress && was_held)
              --o_.progress->tables_held;
            hold_from_record(t, r.hold);
            return;
          }
        } else if (resync_requested(r)) {
          resync(it->second, t, r);
          return;  // held until its copy, at a later batch boundary
        } else if (holds_table(r)) {
          if (!was_held)
            hold_from_record(t, r.hold);
          return;
        }
        if (was_held && o_.progress)
          --o_.progress->tables_held;
      });
    }
  }

  /// A resync asked of a held table the source no longer has (dropped, or renamed, since
  /// the hold: this start does not capture it) has nothing to copy. It fails, and the review
  /// says so and how to recover, rather than reading "requested" for ever.
  void fail_resync_of_absent(const review& r) {
    const std::string prefix = src_.name + ".";
    const std::string& key = r.hold.table();
    if (!resync_requested(r) || !key.starts_with(prefix) ||
        on_source_.contains(key.substr(prefix.size())))
      return;
    check(save_review(*o_.store, resync_started(r, fmt::format("resync-{}", now_us()), now_us())));
    auto current = load_review(*o_.store, tgt_name_, key);
    if (!current || !*current)
      return;
    check(finish_resync(*o_.store, **current, false, nothing_to_copy(key.substr(prefix.size())),
                        now_us()));
  }

  /// Why a resync of `table` (the source's name) fails when the source has no such table.
  [[nodiscard]] std::string nothing_to_copy(std::string_view table) const {
    return fmt::format("source '{}' has no table '{}' now (dropped or renamed since the change "
                       "was held), so there is nothing to copy",
                       src_.name, table);
  }

  /// The source DDL a review held and its place in its transaction, from its record.
  static held_change_ref held_ddl(const review& r) {
    auto detail = nlohmann::json::parse(r.hold.detail(), nullptr, false);
    if (!detail.is_object() || !detail.contains("ddl") || !detail["ddl"].is_string())
      return {};
    return {detail["ddl"].get<std::string>(), detail.value("change", std::uint32_t{0})};
  }

  void hold_from_record(table_state& t, const pb::HoldRecord& rec) {
    t.state = table_state::mode::held;
    t.hold_position = parse_lsn(rec.position()).value_or(0);
    t.kept_through = t.hold_position;
    auto kept = o_.store->scan_held_changes(tgt_name_, t.key);
    if (!kept)
      throw std::runtime_error(kept.error().message);
    for (const auto& c : *kept)
      t.kept_through = std::max(t.kept_through, parse_lsn(c.position()).value_or(0));
    auto detail = nlohmann::json::parse(rec.detail(), nullptr, false);
    if (detail.is_object() && detail.contains("columns_after")) {
      t.columns = parse_columns_json(detail["columns_after"].get<std::string>());
      t.layout = layout_of(t.columns);
    }
    // Later kept DDL: the stream resumes under the newest shape.
    for (const auto& c : *kept) {
      auto j = nlohmann::json::parse(c.payload(), nullptr, false);
      if (!j.is_object() || j.value("op", "") != "ddl")
        continue;
      ddl_event e = parse_ddl_event(json_fields(j["event"]));
      if (!e.dropped) {
        t.columns = e.columns;
        t.layout = layout_of(t.columns);
      }
    }
    if (o_.progress)
      ++o_.progress->tables_held;
  }

  /// The review's DDL ran: replay the kept changes under the new shape, in one target
  /// transaction with the table's position, then close the review (resumed). A change
  /// at or before the table's applied position ran before a crash and is skipped.
  void replay(table_state& t, const review& r) { replay(t, r, std::nullopt); }

  /// The kept change that stops a replay: the replay is done again up to its source
  /// transaction, so that none of that transaction applies (seed 002: the stream stops
  /// before the change), as at a live change.
  struct replay_stop {
    lsn_t at = 0;
    std::string reason;
  };

  void replay(table_state& t, const review& r, const std::optional<replay_stop>& stop_at) {
    const table_state before = t;
    if (t.state != table_state::mode::held)
      hold_from_record(t, r.hold);
    auto kept = o_.store->scan_held_changes(tgt_name_, t.key);
    if (!kept)
      throw std::runtime_error(kept.error().message);
    // The kept changes run under the shape the review's DDL gave; a later kept DDL is
    // decided when the replay reaches it, earliest first.
    auto detail = nlohmann::json::parse(r.hold.detail(), nullptr, false);
    if (detail.is_object() && detail.contains("columns_after")) {
      t.columns = parse_columns_json(detail["columns_after"].get<std::string>());
      t.layout = layout_of(t.columns);
    }
    batch b;
    // The held change's event goes where it happened: on an event target after the
    // changes its transaction made before it (kept under the shape before it), on a
    // relational one first (those changes were kept under the new shape).
    const held_change_ref decided = held_ddl(r);
    const std::vector<source_column> after = t.columns;
    bool announced = false;
    // The held change's event goes out once: not again from the replay that follows one
    // that stopped past it (its batch committed the event with the changes before the
    // stop).
    const bool decided_published = t.hold_position != 0 && t.applied >= t.hold_position;
    const auto announce = [&] {
      if (announced)
        return;
      announced = true;
      t.columns = after;
      t.layout = layout_of(t.columns);
      if (!decided_published)
        logic_->add_decided_change(b, t, decided, t.hold_position);
    };
    if (target_ || decided.change == 0 || !detail.is_object() || !detail.contains("columns_before")) {
      announce();
    } else {
      t.columns = parse_columns_json(detail["columns_before"].get<std::string>());
      t.layout = layout_of(t.columns);
    }
    std::uint64_t last_seq = 0;
    lsn_t last = std::max(t.applied, t.hold_position);
    lsn_t txn_at = 0;         // the source transaction of the change at hand
    lsn_t before_txn = last;  // `last` before that transaction's first change
    for (const auto& c : *kept) {
      const lsn_t at = parse_lsn(c.position()).value_or(0);
      if (at != txn_at) {
        txn_at = at;
        before_txn = last;
      }
      if (stop_at && at >= stop_at->at) {
        // The stopping change's transaction: what came before it commits, and the review
        // says so and takes a decision again, instead of staying applying for good.
        // Not the held change's own transaction either, when the stop is in it.
        const lsn_t through = last < stop_at->at ? last : t.applied;
        b.positions[t.name] = {through, columns_json(t.columns)};
        commit_batch(b);
        t.changes += b.changes;  // a replay's batch is this table's alone
        t.applied = through;
        if (o_.progress)
          o_.progress->changes += b.changes;
        // The kept changes the target has now leave the queue, so that the review counts
        // the ones still kept (a later replay skips them anyway: at or before `through`).
        std::uint64_t applied_through = 0;
        for (const auto& k : *kept) {
          if (parse_lsn(k.position()).value_or(0) > through)
            break;
          applied_through = k.sequence();
        }
        if (applied_through > 0)
          check(o_.store->remove_held_changes_through(tgt_name_, t.key, applied_through));
        check(save_review(*o_.store, replay_stopped(r, stop_at->reason, now_us())));
        throw stop_error(stop_at->reason);
      }
      auto j = nlohmann::json::parse(c.payload(), nullptr, false);
      if (!announced && (at != t.hold_position || !j.is_object() ||
                         j.value("change", std::uint32_t{0}) > decided.change))
        announce();
      if (j.is_object() && j.value("op", "") == "ddl" && at > t.applied) {
        ddl_event e = parse_ddl_event(json_fields(j["event"]));
        b.change_index = j.value("change", std::uint32_t{0});
        outcome o;
        try {
          o = logic_->decide_into(b, t, e, at, std::nullopt, false);
        } catch (const stop_error& stop) {
          // A kept change that stops the stream: the changes before its transaction
          // commit, none of it (this batch holds its earlier changes: done again).
          t = before;
          replay(t, r, replay_stop{at, stop.what()});
          throw;  // not reached: the replay above throws the stop
        }
        if (std::holds_alternative<applied>(o)) {
          last_seq = c.sequence();
          last = std::max(last, at);
          continue;
        }
        // Held again: what came before commits and this review closes; the table stays
        // held at the later change under a new review, with the rest still kept. The
        // position stays before this change's transaction: its changes before the DDL
        // commit now (they leave the kept queue with it), the ones after it are the new
        // review's to replay, which skips what is at or before the position.
        const lsn_t through = before_txn < at ? before_txn : t.applied;
        b.positions[t.name] = {through, columns_json(t.columns)};
        commit_batch(b);
        t.changes += b.changes;  // a replay's batch is this table's alone
        t.applied = through;
        // The change itself lives on in the new review, not in the kept queue.
        check(finish_replay(*o_.store, r, c.sequence(), now_us()));
        batch hold;
        hold.change_index = b.change_index;  // the held change's place in its transaction
        logic_->open_hold(hold, t, std::get<held>(o).hold, e, at);
        write_holds(hold, false);
        for (const auto& later : *kept) {
          auto lj = nlohmann::json::parse(later.payload(), nullptr, false);
          if (later.sequence() > c.sequence() && lj.is_object() && lj.value("op", "") == "ddl") {
            ddl_event le = parse_ddl_event(json_fields(lj["event"]));
            if (!le.dropped) {
              t.columns = le.columns;
              t.layout = layout_of(t.columns);
            }
          }
        }
        if (o_.progress)
          o_.progress->changes += b.changes;
        return;
      }
      last_seq = c.sequence();
      if (at <= t.applied)
        continue;
      last = std::max(last, at);
      if (j.is_object()) {
        try {
          logic_->replay_change(b, t, j);
        } catch (const stop_error& stop) {
          // A kept row change that stops the stream (a TRUNCATE of a keyed table on an
          // event target): as a kept DDL that stops it, the changes before its
          // transaction commit, and the review takes a decision again, instead of
          // staying applying with the source stopped at every start.
          t = before;
          replay(t, r, replay_stop{at, stop.what()});
          throw;  // not reached: the replay above throws the stop
        }
      }
    }
    announce();
    last = std::max(last, t.kept_through);
    b.positions[t.name] = {last, columns_json(t.columns)};
    commit_batch(b);
    t.changes += b.changes;  // a replay's batch is this table's alone
    t.applied = last;
    t.state = table_state::mode::streaming;
    check(finish_replay(*o_.store, r, last_seq, now_us()));
    if (o_.progress)
      o_.progress->changes += b.changes;
  }

  /// Puts the table back in the publication when it is not there: dropping a table takes
  /// it out, so a table dropped and created again while it was held (the drop kept in its
  /// queue) would be copied by its resync and then never streamed. Committed before the
  /// resync's snapshot, so every change after that snapshot is published.
  void ensure_published(const table_state& t) {
    const auto [schema, table] = split(t.name);
    if (!source_
             ->query(fmt::format("SELECT 1 FROM pg_catalog.pg_publication_tables WHERE pubname "
                                 "= {} AND schemaname = {} AND tablename = {}",
                                 pg_literal(publication_), pg_literal(schema), pg_literal(table)))
             .empty())
      return;
    const std::string qualified = pg_ident(schema) + "." + pg_ident(table);
    source_->exec(
        fmt::format("ALTER PUBLICATION {} ADD TABLE {}", pg_ident(publication_), qualified));
    // Created again without a primary key: its updates and deletes need the whole row.
    if (source_
            ->query(fmt::format("SELECT 1 FROM pg_catalog.pg_index WHERE indrelid = {}::regclass "
                                "AND indisprimary",
                                pg_literal(qualified)))
            .empty())
      identify_rows(t.name);
  }

  /// The table's changes arrive under its oid: a table dropped and created again has a
  /// new one, whose changes (and DDL) the stream routes to it from now on.
  void follow_relid(table_state& t, std::uint32_t relid) {
    const auto index = by_name_.find(t.name);
    if (relid == 0 || relid == t.relid || index == by_name_.end())
      return;
    if (auto old = by_relid_.find(t.relid); old != by_relid_.end() && old->second == index->second)
      by_relid_.erase(old);
    t.relid = relid;
    tables_[index->second].relid = relid;
    by_relid_[relid] = index->second;
  }

  /// A resync waiting for its temporary slot, which the server makes once every
  /// transaction open on it has ended: every other table keeps streaming meanwhile, and
  /// this one stays held, its changes kept (seed 003).
  struct waiting_resync {
    std::size_t index = 0;  ///< the table's
    review decided;         ///< the review, as its resync started
    std::unique_ptr<replication_connection> temp;
    clock_type::time_point asked = clock_type::now();
    bool said = false;  ///< the wait was explained on stderr
  };

  /// Starts copying the table again: its review reads the resync running, and a temporary
  /// slot is asked for, whose snapshot gives the copy and the position the table rejoins
  /// at. The copy runs at the batch boundary after the server made the slot.
  void resync(std::size_t index, table_state& t, const review& r) {
    const std::string operation = fmt::format("resync-{}", now_us());
    check(save_review(*o_.store, resync_started(r, operation, now_us())));
    auto current = load_review(*o_.store, tgt_name_, t.key);
    if (!current || !*current)
      throw std::runtime_error(fmt::format("source '{}': the review of '{}' vanished during its "
                                           "resync", src_.name, t.name));
    if (t.state != table_state::mode::held)
      hold_from_record(t, r.hold);
    try {
      // Dropped or renamed at the source while the stream ran: nothing to copy, said so
      // (as at a start, fail_resync_of_absent), not as the publication's refusal.
      if (source_->query(fmt::format(
                             "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                             "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND "
                             "n.nspname || '.' || c.relname = {}",
                             pg_literal(t.name)))
              .empty()) {
        on_source_.erase(t.name);
        throw std::runtime_error(nothing_to_copy(t.name));
      }
      // Before the snapshot: the table's changes after it must reach the stream.
      ensure_published(t);
      waiting_.push_back({index, **current, ask_resync_slot(operation)});
    } catch (const std::exception& e) {
      check(finish_resync(*o_.store, **current, false, e.what(), now_us()));
    }
  }

  /// A temporary slot for a resync, asked for without waiting. Named for the operation and
  /// the ask: a resync interrupted while its slot waited leaves the server's wait (and its
  /// half-made slot) behind until that wait ends.
  std::unique_ptr<replication_connection> ask_resync_slot(const std::string& operation) {
    const std::string ask = std::to_string(now_us());
    const std::string name = slot_.substr(0, 40) + "_rs" +
                             operation.substr(operation.size() > 9 ? operation.size() - 9 : 0) +
                             "_" + ask.substr(ask.size() - 4);
    auto temp = std::make_unique<replication_connection>(src_.dsn, src_.name);
    temp->begin_create_slot(name, true);
    return temp;
  }

  /// The resyncs whose slot the server made are copied now, at this batch boundary; the
  /// others go on waiting, said once on stderr after 3 s.
  void copy_waiting_resyncs() {
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& w : waiting) {
      std::optional<created_slot> snap;
      try {
        snap = w.temp->created(0);
      } catch (const std::exception& e) {
        if (const auto still = still_running(w))
          check(finish_resync(*o_.store, *still, false, e.what(), now_us()));
        continue;
      }
      if (!snap) {
        if (!w.said && clock_type::now() - w.asked > std::chrono::seconds(3)) {
          w.said = true;
          w.temp->say_slot_waits();
        }
        waiting_.push_back(std::move(w));
        continue;
      }
      with_table(w.index, [&](table_state& t) { copy_resynced(t, w, *snap); });
    }
  }

  /// A stop ends the resyncs still waiting for their slot: each review says so and takes a
  /// decision again, as after a kill; the target table is as it was.
  void interrupt_waiting_resyncs() {
    for (const auto& w : waiting_)
      if (const auto still = still_running(w))
        (void)save_review(*o_.store, resync_interrupted(*still, now_us()));
    waiting_.clear();
  }

  /// The review of a waiting resync as it stands now, while it is still open with that
  /// resync: nothing when a decision taken meanwhile (a removal) closed it, which stands.
  std::optional<review> still_running(const waiting_resync& w) const {
    auto latest = load_review(*o_.store, tgt_name_, w.decided.hold.table());
    if (!latest || !*latest || !is_open((**latest).hold.state()) ||
        (**latest).note.resync_operation != w.decided.note.resync_operation)
      return std::nullopt;
    return std::move(**latest);
  }

  /// The table copied again from the snapshot of the slot `w` waited for, committed with
  /// its position; its kept changes go, and it streams from the slot's point on.
  void copy_resynced(table_state& t, waiting_resync& w, const created_slot& snap) {
    // A decision taken while the slot waited (a removal) stands: nothing is copied.
    if (!still_running(w))
      return;
    // The stream already kept a change of the table made after the snapshot: the copy
    // would lose it with the kept queue. Another slot, from a later point.
    if (t.kept_through > snap.consistent_point) {
      w.temp = ask_resync_slot(w.decided.note.resync_operation);
      w.asked = clock_type::now();
      waiting_.push_back(std::move(w));
      return;
    }
    const review& r = w.decided;
    try {
      pg_connection copy(src_.dsn, src_.name);
      copy.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      copy.exec(fmt::format("SET TRANSACTION SNAPSHOT {}", pg_literal(snap.snapshot)));
      for (auto& row : catalog_shapes(copy, {t.name}, true)) {
        t.columns = parse_columns_json(row[3].value_or("[]"));
        t.layout = layout_of(t.columns);
        follow_relid(t, static_cast<std::uint32_t>(std::stoul(row[0].value_or("0"))));
      }
      // The held change's event, unless a replay that stopped later (at a change the
      // stream cannot carry) committed it already: published once.
      const lsn_t held_at = parse_lsn(r.hold.position()).value_or(0);
      if (events_ && !(held_at != 0 && t.applied >= held_at)) {
        // an event target, or [events.kafka|pubsub] beside a warehouse
        batch b;
        logic_->add_decided_change(b, t, held_ddl(r),
                                   held_at != 0 ? held_at : snap.consistent_point);
        if (!b.events.empty())
          events_->publish(b.events);
      }
      copy_table(copy, t, snap.consistent_point, true);
      copy.exec("COMMIT");
      check(o_.store->clear_held_changes(tgt_name_, t.key));
      // A decision taken while the copy ran (a removal the inbox carried out as the copy
      // started) stands: the review is not reopened as resumed over it; acting on the
      // reviews next takes the table out.
      if (auto latest = load_review(*o_.store, tgt_name_, t.key);
          latest && *latest && !is_open((**latest).hold.state()))
        return;
      check(finish_resync(*o_.store, r, true, "", now_us()));
      t.state = table_state::mode::streaming;
      if (o_.progress)
        --o_.progress->tables_held;
    } catch (const std::exception& e) {
      // Stopped (Ctrl-C, SIGTERM) before the copy committed: not a failure of the copy.
      // The review says it was interrupted and takes a decision again, as after a kill.
      if (cancelled())
        check(save_review(*o_.store, resync_interrupted(r, now_us())));
      else
        check(finish_resync(*o_.store, r, false, e.what(), now_us()));
      if (t.state != table_state::mode::held)
        hold_from_record(t, r.hold);
    }
  }

  /// `body` with the server told every second that this client lives: a target batch, a
  /// decision's replay or a resync's copy that takes longer than the server's
  /// wal_sender_timeout (60 s by default) would otherwise end the replication connection,
  /// and the stream with it. Nested calls run `body` alone.
  template <class Body>
  void keeping_alive(Body&& body) {
    if (keeping_alive_ || !replication_) {
      body();
      return;
    }
    keeping_alive_ = true;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread beat([&] {
      std::unique_lock lock(mu);
      while (!cv.wait_for(lock, std::chrono::seconds(1), [&] { return done; }))
        try {
          replication_->resend_status();
        } catch (const std::exception&) {
          return;  // the connection is gone: the stream finds out when it reads next
        }
    });
    const auto stop = [&] {
      {
        std::lock_guard lock(mu);
        done = true;
      }
      cv.notify_all();
      beat.join();
      keeping_alive_ = false;
    };
    try {
      body();
    } catch (...) {
      stop();
      throw;
    }
    stop();
  }

  /// Decisions `flotilla review` left in the inbox, carried out, then acted on.
  void between_batches() {
    keeping_alive([this] { between_batches_now(); });
  }

  void between_batches_now() {
    if (o_.between_batches)
      o_.between_batches();
    if (!waiting_.empty())
      copy_waiting_resyncs();
    // Another source's stream may have carried out a decision about one of our tables.
    if (clock_type::now() - last_review_check_ > std::chrono::seconds(1)) {
      last_review_check_ = clock_type::now();
      act_on_reviews();
    }
    const std::filesystem::path state_dir = o_.project->state_dir;
    std::error_code ec;
    if (std::filesystem::is_empty(inbox_dir(state_dir), ec) || ec)
      return;
    {
      // One inbox for every source's thread: one of them carries each request out.
      static std::mutex inbox_mutex;
      std::lock_guard lock(inbox_mutex);
      // A table of a source this process does not stream is refused at once.
      const auto streams_source = [this](const std::string& source) {
        const auto* s = o_.project->find_source(source);
        return s != nullptr && config::source_may_match(*s, o_.filters);
      };
      (void)process_inbox(*o_.store, opener(), state_dir, [] { return now_us(); },
                          streams_source);
    }
    act_on_reviews();
  }

  const table_slot* find_key(const std::string& key) const {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? nullptr : &slots_[it->second];
  }

  void save_position(lsn_t at) {
    pb::CdcPosition p;
    p.set_position(format_lsn(at));
    p.set_slot(slot_);
    p.set_run_id(o_.run_id);
    p.set_updated_at_us(now_us());
    check(o_.store->put(pos_prefix_ + src_.name, p));
  }

  static void check(const storage::status& st) {
    if (!st)
      throw std::runtime_error(st.error().message);
  }

  // ---- streaming --------------------------------------------------------------------

  void loop() {
    auto last_status = clock_type::now();
    auto batch_started = clock_type::now();
    std::vector<pgoutput_message> txn;
    bool in_txn = false;
    bool txn_has_ddl = false;
    while (!cancelled()) {
      const bool has_pending = pending();
      int wait = has_pending ? 0 : 100;
      if (has_pending) {
        auto age = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() -
                                                                         batch_started);
        wait = static_cast<int>(std::max<long>(0, o_.batch_ms - age.count()));
      }
      auto msg = replication_->next(in_txn ? 1000 : wait);
      if (!msg) {
        if (!in_txn && pending())
          flush();
        if (!in_txn && !pending())
          between_batches();
      } else if (msg->type == stream_message::kind::keepalive) {
        received_ = std::max(received_, msg->wal_end);
        // Nothing in flight: everything up to the server's end is accounted for.
        if (!in_txn && !pending() && msg->wal_end > confirmed_) {
          confirmed_ = msg->wal_end;
        }
        if (msg->reply_requested)
          send_status();
      } else {
        received_ = std::max(received_, msg->wal_end);
        auto m = decode_pgoutput(msg->body);
        if (std::holds_alternative<begin_message>(m)) {
          in_txn = true;
          txn_has_ddl = false;
          txn.clear();
        } else if (auto* c = std::get_if<commit_message>(&m)) {
          in_txn = false;
          if (!pending())
            batch_started = clock_type::now();
          if (txn_has_ddl && pending())
            flush();  // a DDL transaction is decided and committed on its own
          handle_transaction(txn, *c);
          if (txn_has_ddl || pending_changes_ >= o_.batch_changes)
            flush();
          txn.clear();
        } else {
          if (auto* ins = std::get_if<insert_message>(&m))
            if (ins->relation == ddl_log_relid_ && ddl_log_relid_ != 0)
              txn_has_ddl = true;
          // A truncate may stop an event target: what came before it is committed first.
          if (std::holds_alternative<truncate_message>(m))
            txn_has_ddl = true;
          if (auto* rel = std::get_if<relation_message>(&m))
            if (rel->schema == capture_schema && rel->name == ddl_log_table) {
              ddl_log_relid_ = rel->oid;
              ddl_log_columns_.clear();
              for (const auto& c : rel->columns)
                ddl_log_columns_.push_back(c.name);
            }
          txn.push_back(std::move(m));
        }
      }
      if (clock_type::now() - last_status > std::chrono::seconds(5)) {
        send_status();
        last_status = clock_type::now();
      }
    }
    if (pending())
      flush();
    send_status();
  }

  void send_status() { replication_->send_status(std::max(received_, confirmed_), confirmed_); }

  /// Routes a committed transaction's changes to the tables they touch, in order; a
  /// DDL log row goes to the table it altered, with the target's live shape of it.
  void handle_transaction(const std::vector<pgoutput_message>& txn, const commit_message& commit) {
    const lsn_t at = commit.end_lsn;
    std::map<std::size_t, std::shared_ptr<std::vector<ordered_change>>> parts;
    std::uint32_t in_txn = 0;  // the message's place in the transaction
    auto route = [&](std::size_t index, table_change c) {
      auto& p = parts[index];
      if (!p)
        p = std::make_shared<std::vector<ordered_change>>();
      p->push_back({++order_, std::move(c), in_txn});
    };
    for (const auto& m : txn) {
      if (auto* rel = std::get_if<relation_message>(&m)) {
        // Not a change, and sent once per session: counted, it would number a
        // transaction's changes otherwise after a restart.
        if (auto it = by_relid_.find(rel->oid); it != by_relid_.end())
          route(it->second, *rel);
        continue;
      }
      if (std::holds_alternative<ignored_message>(m))
        continue;  // a type or origin message: no change either, and per session too
      ++in_txn;
      if (auto* tr = std::get_if<truncate_message>(&m)) {
        for (auto r : tr->relations)
          if (auto it = by_relid_.find(r); it != by_relid_.end()) {
            truncate_message one = *tr;
            one.relations = {r};
            route(it->second, std::move(one));
            ++pending_changes_;
          }
        continue;
      }
      std::uint32_t relid = 0;
      if (auto* i = std::get_if<insert_message>(&m))
        relid = i->relation;
      else if (auto* u = std::get_if<update_message>(&m))
        relid = u->relation;
      else if (auto* d = std::get_if<delete_message>(&m))
        relid = d->relation;
      if (relid == 0)
        continue;
      if (relid == ddl_log_relid_) {
        auto* ins = std::get_if<insert_message>(&m);
        if (!ins)
          continue;
        std::vector<std::pair<std::string, std::optional<std::string>>> fields;
        for (std::size_t i = 0; i < ins->row.size() && i < ddl_log_columns_.size(); ++i)
          fields.emplace_back(ddl_log_columns_[i],
                              ins->row[i].type == tuple_value::kind::text
                                  ? std::optional<std::string>(ins->row[i].text)
                                  : std::nullopt);
        ddl_change d{parse_ddl_event(fields), fields_json(fields), std::nullopt};
        auto it = by_relid_.find(d.event.relid);
        if (it == by_relid_.end()) {
          stop_at_gone_table(d.event);
          continue;  // a table the stream does not capture (seed 002: not captured until added)
        }
        d.live = live_shape(it->second);
        d.edited_ddl = edited_ddl(it->second);
        identify_rows_after(d.event);
        route(it->second, std::move(d));
        continue;
      }
      if (auto it = by_relid_.find(relid); it != by_relid_.end()) {
        if (auto* i = std::get_if<insert_message>(&m))
          route(it->second, *i);
        else if (auto* u = std::get_if<update_message>(&m))
          route(it->second, *u);
        else
          route(it->second, std::get<delete_message>(m));
        ++pending_changes_;
      }
    }
    for (auto& [index, changes] : parts) {
      (*self_)->send(slots_[index].actor, table_changes{at, std::move(changes)});
      touched_.insert(index);
    }
    ++pending_transactions_;
    pending_end_ = at;
  }

  /// The target's shape of a table about to decide a DDL, read once per batch: a DDL
  /// transaction commits on its own, so the batches before it are on the target, and a
  /// later DDL of the same transaction is decided without it (table_logic::on_ddl).
  std::optional<schema::table_schema> live_shape(std::size_t index) {
    if (!target_)
      return std::nullopt;
    auto it = live_shapes_.find(index);
    if (it == live_shapes_.end())
      it = live_shapes_.emplace(index, target_->describe(slots_[index].target)).first;
    return it->second;
  }

  /// The DDL the table's reviews ran on this target where edited from their proposals
  /// (the last one's, and the earlier ones' it carries); empty otherwise.
  std::string edited_ddl(std::size_t index) const {
    if (!target_ || !o_.store)
      return {};
    auto r = load_review(*o_.store, tgt_name_, tables_[index].key);
    if (!r || !*r || (*r)->hold.state() != pb::HOLD_STATE_RESUMED)
      return {};
    return edited_ddl_of((*r)->hold);
  }

  // ---- the table actors ---------------------------------------------------------------

  [[nodiscard]] target_kind kind() const {
    if (ev_)
      return ev_->kind == "kafka" ? target_kind::kafka : target_kind::pubsub;
    return wh_ && wh_->dialect == "duckdb" ? target_kind::duckdb : target_kind::postgres;
  }

  /// The rules every table follows, once the target and the publisher are open.
  void make_logic() {
    stream_context cx;
    cx.project = o_.project->name;
    cx.source = src_.name;
    cx.target = tgt_name_;
    cx.event_target = ev_ != nullptr;
    cx.relational = target_ != nullptr;
    cx.events = events_ != nullptr;
    if (events_)
      cx.format = events_->format();
    cx.kind = kind();
    logic_ = std::make_unique<table_logic>(std::move(cx));
  }

  void spawn_tables() {
    for (std::size_t i = 0; i < tables_.size(); ++i)
      slots_[i].actor = system_.spawn(table_actor, i, std::make_shared<table_state>(tables_[i]),
                                      logic_.get());
    spawned_ = true;
  }

  void stop_tables() {
    if (!spawned_)
      return;
    for (auto& s : slots_)
      if (s.actor)
        caf::anon_send_exit(s.actor, caf::exit_reason::user_shutdown);
    for (auto& s : slots_)
      s.actor = nullptr;
    spawned_ = false;
  }

  /// Waits for `count` messages of type T sent to the stream by its tables.
  template <class T, class F>
  void receive_from_tables(std::size_t count, F&& each) {
    for (std::size_t n = 0; n < count; ++n) {
      bool timed_out = false;
      (*self_)->receive([&](T& m) { each(m); },
                        caf::after(std::chrono::minutes(5)) >> [&] { timed_out = true; });
      if (timed_out)
        throw std::runtime_error(fmt::format(
            "source '{}': a table of target '{}' did not answer for 5 minutes; the stream "
            "stops, and the next start resumes from the last committed position",
            src_.name, tgt_name_));
    }
  }

  /// The table's state, lent by its actor (or the stream's own before the actors start),
  /// changed by `fn`, then given back.
  template <class F>
  void with_table(std::size_t index, F&& fn) {
    if (!spawned_) {
      fn(tables_[index]);
      return;
    }
    (*self_)->send(slots_[index].actor, lend_atom::value, caf::actor_cast<caf::actor>(*self_));
    std::shared_ptr<table_state> lent;
    receive_from_tables<table_lent>(1, [&](table_lent& m) { lent = std::move(m.state); });
    struct give_back {
      source_stream* s;
      std::size_t i;
      std::shared_ptr<table_state>& t;
      ~give_back() { (*s->self_)->send(s->slots_[i].actor, table_lent{i, t}); }
    } back{this, index, lent};
    fn(*lent);
  }

  /// Every table's state back from its actor, for the summary.
  void take_back_tables() {
    if (!spawned_)
      return;
    for (auto& s : slots_)
      (*self_)->send(s.actor, lend_atom::value, caf::actor_cast<caf::actor>(*self_));
    receive_from_tables<table_lent>(slots_.size(), [&](table_lent& m) {
      tables_[m.index] = std::move(*m.state);
    });
  }

  /// The parts of every table the batch touched, merged in source order.
  batch take_batch() {
    batch b;
    for (std::size_t index : touched_)
      (*self_)->send(slots_[index].actor, take_atom::value, caf::actor_cast<caf::actor>(*self_));
    receive_from_tables<table_part>(touched_.size(),
                                    [&](table_part& m) { b.merge(std::move(*m.part)); });
    b.sort_events();
    b.transactions = pending_transactions_;
    b.end_lsn = pending_end_;
    return b;
  }

  /// What the batch keeps for held tables and the reviews of the holds it opened,
  /// written before it commits.
  void write_holds(const batch& b, bool count_held) {
    // A new hold and the changes its transaction kept go in one RocksDB batch: a crash
    // leaves both or neither, so the source sending the transaction again neither loses
    // nor doubles them.
    std::set<std::string> opened;
    for (const auto& h : b.holds) {
      std::span<const pb::HeldChange> kept;
      if (auto it = b.kept.find(h.table()); it != b.kept.end())
        kept = it->second;
      auto r = create_review(*o_.store, h, kept, now_us());
      if (!r)
        throw std::runtime_error(r.error().message);
      opened.insert(h.table());
      if (count_held && o_.progress)
        ++o_.progress->tables_held;
    }
    for (const auto& [key, changes] : b.kept) {
      if (changes.empty() || opened.contains(key))
        continue;
      auto r = o_.store->append_held_changes(tgt_name_, key, changes);
      if (!r)
        throw std::runtime_error(r.error().message);
    }
  }

  // ---- commit -----------------------------------------------------------------------

  /// Event targets: each table's position (and shape) in RocksDB, after its events were
  /// acknowledged.
  void save_event_positions(const batch& b) {
    for (const auto& [name, at] : b.positions) {
      pb::CdcPosition p;
      p.set_position(format_lsn(at.lsn));
      p.set_slot(slot_);
      p.set_run_id(o_.run_id);
      p.set_updated_at_us(now_us());
      p.set_columns(at.columns);
      check(o_.store->put(pos_prefix_ + src_.name + "." + name, p));
    }
  }

  /// Commits `b`, then says the schema changes it carried out (a replay's kept ones too).
  void commit_batch(batch& b) {
    commit_batch_now(b);
    for (const auto& said : b.schema_changes)
      std::fprintf(stderr, "%s\n", said.c_str());
    b.schema_changes.clear();
  }

  void commit_batch_now(batch& b) {
    if (!target_) {
      if (!b.events.empty()) {
        try {
          events_->publish(b.events);
        } catch (const change_refused& e) {
          throw std::runtime_error(fmt::format(
              "FLT-E002: source '{}': change events up to source position {} were not "
              "published to target '{}': {}",
              src_.name, format_lsn(b.end_lsn), tgt_name_, e.what()));
        } catch (const std::exception& e) {
          throw std::runtime_error(fmt::format(
              "FLT-E001: source '{}': change events up to source position {} were not "
              "published to target '{}': {}; the next start sends them again",
              src_.name, format_lsn(b.end_lsn), tgt_name_, e.what()));
        }
      }
      save_event_positions(b);
      return;
    }
    const auto& d = target_->dialect();
    std::vector<std::string> sql;
    std::vector<std::pair<std::string, std::string>> ddl;  // (statement, source table)
    for (const auto& [key, steps] : b.steps) {
      const table_slot* t = find_key(key);
      if (!t)
        continue;
      if (d.name() == "duckdb" && rows_then_ddl(steps)) {
        std::vector<std::string> definition;
        for (auto& row : target_->query(definition_query(d, t->target)))
          if (!row.empty() && row[0])
            definition.push_back(std::move(*row[0]));
        auto rebuild = rebuild_sql(d, t->target, definition);
        sql.insert(sql.end(), std::make_move_iterator(rebuild.begin()),
                   std::make_move_iterator(rebuild.end()));
      }
      for (const auto& s : steps) {
        auto part = step_sql(d, t->target, s);
        if (std::holds_alternative<ddl_step>(s))
          for (const auto& statement : part)
            ddl.emplace_back(statement, t->name);
        sql.insert(sql.end(), std::make_move_iterator(part.begin()),
                   std::make_move_iterator(part.end()));
      }
    }
    if (events_ && !b.events.empty()) {
      // Before the target commit: a crash in between delivers them again (at least once),
      // never loses them.
      try {
        events_->publish(b.events);
      } catch (const change_refused& e) {
        throw std::runtime_error(fmt::format(
            "FLT-E002: source '{}': change events up to source position {} were not "
            "published: {}; nothing of them was applied",
            src_.name, format_lsn(b.end_lsn), e.what()));
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format(
            "FLT-E001: source '{}': change events up to source position {} were not "
            "published: {}; nothing of them was applied, and the next start sends them again",
            src_.name, format_lsn(b.end_lsn), e.what()));
      }
    }
    auto pos = positions_sql(d, slot_, b.positions);
    sql.insert(sql.end(), pos.begin(), pos.end());
    if (sql.empty())
      return;
    try {
      target_->execute(sql);
    } catch (const std::exception& e) {
      // A schema change the target refused (a value that no longer fits a narrower type):
      // named with its table, and what to do.
      const std::string why = e.what();
      for (const auto& [statement, table] : ddl)
        if (why.find(statement.substr(0, 60)) != std::string::npos) {
          // DuckDB keeps at least one column: a table whose only column is dropped and
          // added again cannot take the drop; a copy in its new shape is the way.
          const bool last_column = why.find("only has one column remaining") != std::string::npos;
          throw std::runtime_error(fmt::format(
              "source '{}': target '{}' refused the schema change of {} at source position "
              "{} [{}]: {}; nothing of the changes from there was applied. {}",
              src_.name, tgt_name_, table, format_lsn(b.end_lsn), code_target_refused, why,
              last_column
                  ? "The target cannot drop a table's only column: run `flotilla stream "
                    "--reload` to copy the tables again in their new shape"
                  : "Make the target table able to take the change as the error says (a "
                    "value that no longer fits a narrower type: change it on the target to "
                    "what the source holds now, e.g. a decimal rounded to the new scale, "
                    "UPDATE ... SET col = round(col, scale); do not delete the row, which "
                    "the stream would not send again), then start the stream again; or run "
                    "`flotilla stream --reload` to copy every table again"));
        }
      // A review's replay of kept changes has no stream position: its review says what
      // follows (the table stays held), not a restart.
      if (b.end_lsn == 0)
        throw std::runtime_error(fmt::format("target '{}' refused them: {}", tgt_name_, why));
      // A target table gone (dropped by hand): every start would fail the same way.
      for (const auto& [key, steps] : b.steps) {
        const table_slot* t = find_key(key);
        if (t == nullptr)
          continue;
        bool gone = false;
        try {
          gone = !target_->describe(t->target).has_value();
        } catch (const std::exception&) {
          // Not known: the refusal is said as it is.
        }
        if (gone)
          throw std::runtime_error(fmt::format(
              "source '{}': target table {} of {} on target '{}' does not exist (dropped by "
              "hand?) [{}]; nothing of the changes up to source position {} was applied. Run "
              "`flotilla stream --reload` to copy every table again, or create the table "
              "again as it was and start the stream",
              src_.name, d.qualified(t->target), t->name, tgt_name_, code_target_shape,
              format_lsn(b.end_lsn)));
      }
      // A value the target's column cannot hold (a numeric NaN in a DuckDB DECIMAL, a
      // NUL escape in a jsonb): retried as it is, it fails again.
      const bool value_refused = why.find("Conversion Error") != std::string::npos ||
                                 why.find("out of range") != std::string::npos ||
                                 why.find("invalid input syntax") != std::string::npos ||
                                 why.find("unsupported Unicode escape") != std::string::npos;
      throw std::runtime_error(fmt::format(
          "source '{}': target '{}' refused the changes up to source position {}: {}; nothing "
          "of them was applied, and the next start retries them{}",
          src_.name, tgt_name_, format_lsn(b.end_lsn), why,
          value_refused ? ". A value the target's column cannot hold fails them again on "
                          "every start (docs/cdc.md, Limits): change that row at the source "
                          "(a later change of it replaces the value in the same batch), or "
                          "leave its table out with exclude and start the stream with "
                          "--reload"
                        : ""));
    }
  }

  /// A batch boundary: the touched tables' parts taken, what they keep and hold written,
  /// then their changes and positions committed in one target transaction.
  void flush() {
    if (pending())
      keeping_alive([this] { flush_now(); });
  }

  void flush_now() {
    batch b = take_batch();
    if (!b.stop.empty())
      throw stop_error(b.stop);
    write_holds(b, true);
    commit_batch(b);
    for (const auto& [name, p] : b.positions)
      if (auto it = by_name_.find(name); it != by_name_.end()) {
        const auto counted = b.table_changes.find(name);
        (*self_)->send(slots_[it->second].actor,
                       table_committed{p.lsn, counted != b.table_changes.end() ? counted->second : 0});
      }
    if (b.end_lsn > confirmed_)
      confirmed_ = b.end_lsn;
    save_position(confirmed_);
    if (o_.progress) {
      o_.progress->changes += b.changes;
      o_.progress->transactions += b.transactions;
    }
    touched_.clear();
    live_shapes_.clear();
    pending_transactions_ = 0;
    pending_changes_ = 0;
    send_status();
    between_batches();
  }

  /// Transactions routed to the tables since the last batch boundary.
  [[nodiscard]] bool pending() const { return pending_transactions_ > 0; }

  bool keeping_alive_ = false;  ///< keeping_alive's beat runs

  const stream_options& o_;
  const config::source_config& src_;
  const std::string tgt_name_;
  const config::target_config* wh_ = nullptr;        ///< a warehouse target, or
  const config::event_target_config* ev_ = nullptr;  ///< an event stream target
  std::string pos_prefix_;    ///< position keys: "" for the source's first target
  bool side_events_ = false;  ///< [events.kafka|pubsub] beside the first (relational) target
  std::string slot_;
  std::string publication_;
  source_summary summary_;
  std::unique_ptr<pg_connection> source_;
  std::unique_ptr<replication_connection> replication_;
  std::unique_ptr<sinks::warehouse> target_;
  /// The event target itself, or [events.kafka|pubsub] beside a relational target.
  std::unique_ptr<change_publisher> events_;
  caf::actor_system& system_;
  std::unique_ptr<caf::scoped_actor> self_;  ///< the stream thread's side of its table actors
  std::vector<waiting_resync> waiting_;       ///< resyncs whose slot the server has not made
  std::unique_ptr<table_logic> logic_;
  /// The tables' states: the stream's own until the table actors start (setup, initial
  /// copy, holds at start), then theirs; back here for the summary.
  std::vector<table_state> tables_;
  std::vector<table_slot> slots_;  ///< parallel to tables_
  bool spawned_ = false;
  std::set<std::size_t> removed_;  ///< tables whose review removed them from the stream
  std::unordered_map<std::uint32_t, std::size_t> by_relid_;
  std::unordered_map<std::string, std::size_t> by_name_;
  /// Each source table's schema and name by its qualified name (a schema may hold a
  /// dot: "crm.eu.contacts" is "crm.eu" and "contacts").
  std::map<std::string, std::pair<std::string, std::string>> parts_;

  /// The schema and name of the source table `name` ("schema.table").
  [[nodiscard]] std::pair<std::string, std::string> split(const std::string& name) const {
    if (auto it = parts_.find(name); it != parts_.end())
      return it->second;
    const auto dot = name.find('.');
    return {name.substr(0, dot), dot == std::string::npos ? std::string() : name.substr(dot + 1)};
  }
  /// `name` quoted for PostgreSQL: "schema"."table".
  [[nodiscard]] std::string quoted(const std::string& name) const {
    const auto [schema, table] = split(name);
    return pg_ident(schema) + "." + pg_ident(table);
  }
  std::unordered_set<std::string> on_source_;  ///< every table the source has, by name
  std::unordered_set<std::string> gone_;       ///< captured by this slot, gone from the source
  std::unordered_map<std::uint32_t, std::string> gone_relids_;  ///< their oids, where recorded
  std::unordered_map<std::string, std::size_t> by_key_;
  std::uint32_t ddl_log_relid_ = 0;
  std::vector<std::string> ddl_log_columns_;
  // The batch being gathered in the table actors:
  std::set<std::size_t> touched_;  ///< tables that received changes
  std::map<std::size_t, std::optional<schema::table_schema>> live_shapes_;
  std::uint64_t order_ = 0;  ///< source order of the changes routed so far
  std::uint64_t pending_transactions_ = 0;
  std::uint64_t pending_changes_ = 0;
  lsn_t pending_end_ = 0;
  lsn_t confirmed_ = 0;
  lsn_t received_ = 0;
  clock_type::time_point last_review_check_ = clock_type::now();
};

}  // namespace

std::string capture_setup_sql(const config::project& p,
                              const std::vector<config::filter>& filters) {
  std::string out;
  for (const auto& s : p.sources) {
    if (s.capture != "logical" || !config::source_may_match(s, filters))
      continue;
    pg_connection c(s.dsn, s.name);
    auto r = c.query("SELECT current_user, current_database()");
    const std::string user = r.empty() ? "" : r[0][0].value_or("");
    const std::string database = r.empty() ? "" : r[0][1].value_or("");
    out += fmt::format(
        "-- source '{}': run once as a superuser in database {}, so that user {} streams it "
        "without being a superuser\n",
        s.name, pg_ident(database), pg_ident(user));
    for (const auto& sql : ddl_capture_setup_sql(user, database))
      out += sql + ";\n";
    out += "\n";
  }
  return out;
}

stream_summary run_stream(const stream_options& o) {
  stream_summary out;
  std::vector<const config::source_config*> sources;
  for (const auto& s : o.project->sources)
    if (s.capture == "logical" && config::source_may_match(s, o.filters))
      sources.push_back(&s);
  if (sources.empty()) {
    out.exit_code = 2;
    out.sources.push_back({"", "", "", "failed",
                           "no selected source has capture = \"logical\"; set it on a postgres "
                           "source in flotilla.toml",
                           {},
                           ""});
    return out;
  }
  // A source that fails or stops at a change stops the whole stream, so every other
  // source saves its position and the command ends with the failure.
  std::atomic<bool> stop_all{false};
  stream_options local = o;
  std::atomic<bool> combined{false};
  local.cancel = &combined;
  // One stream per (source, target): each with its own slot, positions and holds.
  struct pair {
    const config::source_config* source;
    std::string target;
    std::size_t index;
  };
  std::vector<pair> pairs;
  for (const auto* s : sources) {
    auto names = o.project->stream_targets_of(*s);
    for (std::size_t k = 0; k < names.size(); ++k)
      pairs.push_back({s, names[k], k});
  }
  // A warehouse the stream cannot apply changes to is a configuration error: said before
  // anything starts, with the fix (exit 2).
  for (const auto& p : pairs)
    if (const auto* wh = o.project->find_target(p.target);
        wh && !o.project->find_event_target(p.target) && wh->dialect != "duckdb" &&
        wh->dialect != "postgres") {
      out.exit_code = 2;
      out.sources.push_back(
          {p.source->name, "", "", "failed",
           fmt::format("source '{}' streams into target '{}', a {} warehouse: flotilla stream "
                       "applies changes to duckdb and postgres targets and publishes them to "
                       "kafka and pubsub targets. Point the source's target (or stream_to) at "
                       "one of those, or leave the source out of the stream with --filter; "
                       "`flotilla run` copies it into {} in batches",
                       p.source->name, p.target, wh->dialect, p.target),
           {},
           p.target});
      return out;
    }
  std::vector<source_summary> results(pairs.size());
  // The table actors of every stream; each stream thread talks to its own through a
  // scoped actor. Idle scheduler threads block instead of polling.
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads",
          static_cast<int64_t>(std::max<unsigned>(2, std::thread::hardware_concurrency())));
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{cfg};
  std::vector<std::thread> threads;
  std::atomic<std::size_t> finished{0};
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    threads.emplace_back([&, i] {
      source_stream s(local, *pairs[i].source, pairs[i].target, pairs[i].index, system);
      results[i] = s.run();
      if (results[i].status == "failed")
        stop_all = true;
      ++finished;
    });
  }
  while (finished.load() < pairs.size()) {
    if (o.cancel->load() || stop_all.load())
      combined = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& th : threads)
    th.join();
  out.sources = std::move(results);
  for (const auto& s : out.sources)
    if (s.status == "failed")
      out.exit_code = 1;
  return out;
}

}  // namespace flotilla::cdc
