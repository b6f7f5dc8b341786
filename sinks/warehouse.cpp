#include "sinks/warehouse.hpp"
#include "schema/toml_text.hpp"

#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "sinks/warehouse_internal.hpp"

namespace flotilla::sinks {

std::vector<std::vector<std::optional<std::string>>> warehouse::query(const std::string&) {
  throw sink_error(fmt::format("dialect '{}' offers no query path", dialect().name()));
}

std::optional<warehouse::described_tables> warehouse::describe_tables(
    const std::string&, const std::string&, const std::vector<std::string>&) {
  return std::nullopt;
}

bool warehouse::empties_in_place(const dialects::table_ref&) { return false; }

std::vector<std::string> warehouse::rebind_views(const dialects::table_ref&) { return {}; }

std::vector<warehouse::hand_made_index> warehouse::hand_made_indexes(const dialects::table_ref&) {
  return {};
}

std::unique_ptr<warehouse> open_warehouse(const warehouse_options& options) {
  const std::string& wanted = options.dialect.empty() ? std::string("duckdb") : options.dialect;
  auto d = dialects::make_dialect(wanted);
  if (!d)
    throw sink_error(fmt::format("target '{}': {}", options.name, d.error().message));
  const std::string name((*d)->name());
  if (!(*d)->executable())
    throw sink_error(fmt::format(
        "target '{}' uses dialect '{}', which Flotilla plans for but does not execute; use "
        "`flotilla plan` to see its SQL",
        options.name, name));
  if (name == "duckdb")
    return detail::open_duckdb(options, std::move(*d));
  if (name == "postgres")
    return detail::open_postgres(options, std::move(*d));
  if (name == "sqlite")
    return detail::open_sqlite(options, std::move(*d));
  throw sink_error(fmt::format("target '{}': dialect '{}' has no warehouse writer", options.name,
                               name));
}

void warehouse::ensure_schema(const std::string& schema) {
  if (auto sql = dialect().create_schema(schema); !sql.empty())
    execute({sql});
}

namespace {
std::atomic<const std::atomic<bool>*> stop_flag{nullptr};
}  // namespace

void set_stop_request(const std::atomic<bool>* stop) noexcept {
  stop_flag.store(stop, std::memory_order_release);
}

const std::atomic<bool>* detail::stop_request() noexcept {
  return stop_flag.load(std::memory_order_acquire);
}

namespace detail {
namespace {

using dialects::table_ref;

/// One load: everything it writes is inside the warehouse connection's transaction,
/// which commit() ends with the swap / merge / commit token. Any failure, and
/// destruction without commit(), rolls the transaction back: the live table stays as
/// it was, and a staging table created by this load disappears with the rollback.
class loader final : public table_writer {
 public:
  loader(warehouse_base& wh, const load_request& request,
         const std::optional<schema::table_schema>& live)
      : wh_(wh), request_(request) {
    const auto& d = wh_.dialect();
    const table_ref& target = request_.target;
    // The statements that open the load, sent with BEGIN where the engine allows.
    std::vector<std::string> first;
    if (!live)
      first = d.free_table_name(target);
    switch (request_.mode) {
      case load_mode::replace: {
        const table_ref staging = sibling(target, staging_suffix, wh_.max_identifier_bytes());
        first.push_back(d.drop_table(staging));  // a leftover of an earlier crash
        // In place: the live table itself, emptied or re-created; otherwise the staging
        // table, swapped in by commit(). A table that does not exist yet is created and
        // loaded in the load's own transaction on every engine: no reader sees it before
        // the commit, so a staging table and its swap would only add DDL. A live table
        // whose columns stay as they are is emptied where the engine allows it (on
        // PostgreSQL a small one): readers see its old rows until the commit, and it
        // keeps what depends on it (views, grants, indexes) without any DDL.
        schema::table_schema stage = schema::full_refresh_columns(live, request_.columns, d.names());
        const bool keeps = live && d.keeps_live_table(*live, stage);
        const bool emptied = keeps && wh_.empties_in_place(target);
        in_place_ = d.replaces_in_place() || !live || emptied;
        replaces_live_ = live && !emptied && !(d.replaces_in_place() && keeps);
        into_ = in_place_ ? target : staging;
        // PostgreSQL swapping in a table whose columns stay as they are: the staging table
        // takes the live table's own column types (LIKE), which the portable types cannot
        // always spell (a bare numeric, timestamp(3), char(5) made by hand): seed 000's
        // contract none follows the live table, changes made by hand included, whatever
        // the table's size (one refreshed in place keeps them too).
        std::optional<std::vector<std::string>> like_relaxed;
        if (keeps && !in_place_ && d.name() == "postgres")
          if (const auto r = schema::relaxation_for(*live, stage); r && !r->drop_key && r->add_key.empty()) {
            like_relaxed.emplace();
            for (const auto& c : r->drop_not_null)
              like_relaxed->push_back(d.drop_not_null(into_, c));
          }
        if (wh_.key_after_load() && !emptied) {
          for (auto& c : stage.columns) {
            if (!c.key)
              continue;
            key_after_ += (key_after_.empty() ? "" : ", ") + d.quote(c.name);
            c.key = false;
            c.nullable = false;
          }
        }
        if (in_place_) {
          for (auto& sql : d.refresh_in_place(target, live, stage))
            first.push_back(std::move(sql));
        } else if (like_relaxed) {
          first.push_back(fmt::format("CREATE TABLE {} (LIKE {})", d.qualified(into_),
                                      d.qualified(target)));
          for (auto& sql : *like_relaxed)
            first.push_back(std::move(sql));
        } else {
          first.push_back(d.create_table(into_, stage));
        }
        break;
      }
      case load_mode::append:
        if (!live)
          first.push_back(d.create_table(target, request_.columns));
        into_ = target;
        break;
      case load_mode::merge: {
        if (!live)
          first.push_back(d.create_table(target, request_.columns));
        into_ = sibling(target, merge_suffix, wh_.max_identifier_bytes());
        schema::table_schema stage = request_.columns;
        for (auto& c : stage.columns) {
          c.nullable = true;
          c.key = false;
        }
        stage.columns.push_back(
            schema::column{std::string(seq_column), schema::portable_type::of(schema::type_kind::bigint)});
        first.push_back(d.drop_table(into_));
        first.push_back(d.create_table(into_, stage));
        break;
      }
    }
    open_ = true;  // from here on a failure rolls back
    try {
      wh_.begin_with(first);
      inserter_ = wh_.open_inserter(into_, request_.columns, request_.mode == load_mode::merge);
    } catch (...) {
      abandon();
      throw;
    }
  }

  ~loader() override { abandon(); }

  void write(const schema::row_batch& batch) override {
    if (!open_)
      throw sink_error(fmt::format("target '{}': write on a finished load of {}",
                                   wh_.target_name(), wh_.dialect().qualified(request_.target)));
    if (batch.rows() == 0)
      return;
    if (batch.is_copy_text() && wh_.dialect().name() != "postgres")
      throw sink_error(fmt::format("target '{}': the load of {} got PostgreSQL COPY text, which "
                                   "only a postgres target takes",
                                   wh_.target_name(), wh_.dialect().qualified(request_.target)));
    if (batch.width != request_.columns.columns.size())
      throw sink_error(fmt::format("target '{}': batch has {} columns, the load of {} has {}",
                                   wh_.target_name(), batch.width,
                                   wh_.dialect().qualified(request_.target),
                                   request_.columns.columns.size()));
    try {
      inserter_->append(batch, rows_);
    } catch (const sink_error& e) {
      abandon();
      throw sink_error(as_target(e.what()));
    } catch (...) {
      abandon();
      throw;
    }
    rows_ += batch.rows();
  }

  /// A value error names the table the rows go into, which may be the staging or merge
  /// table: said as the target table, which the user knows.
  std::string as_target(std::string message) const {
    const auto& d = wh_.dialect();
    if (d.qualified(into_) == d.qualified(request_.target))
      return message;
    const std::string from = d.qualified(into_), to = d.qualified(request_.target);
    for (auto at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
      message.replace(at, from.size(), to);
    return message;
  }

  void set_commit_token(std::string token) override {
    if (!request_.commit_token)
      throw sink_error(fmt::format("target '{}': the load of {} was begun without a commit token",
                                   wh_.target_name(), wh_.dialect().qualified(request_.target)));
    request_.commit_token = std::move(token);
  }

  void commit() override {
    if (!open_)
      throw sink_error(fmt::format("target '{}': commit on a finished load of {}",
                                   wh_.target_name(), wh_.dialect().qualified(request_.target)));
    const auto& d = wh_.dialect();
    try {
      inserter_->finish();
      inserter_.reset();
      // The statements that finish the load, sent with COMMIT where the engine allows.
      std::vector<std::string> last;
      switch (request_.mode) {
        case load_mode::replace:
          if (!in_place_)
            for (auto& s : d.swap_in(into_, request_.target))
              last.push_back(std::move(s));
          // The key goes on the table under its final name, after the swap: its index
          // takes the name the engine gives the live table's key ("orders_pkey"), and
          // nothing has to be renamed after it.
          if (!key_after_.empty())
            last.push_back(fmt::format("ALTER TABLE {} ADD PRIMARY KEY ({})",
                                       d.qualified(request_.target), key_after_));
          break;
        case load_mode::append:
          break;
        case load_mode::merge:
          if (request_.recreate_as) {
            replaces_live_ = true;
            last.push_back(d.drop_table(request_.target));
            last.push_back(d.create_table(request_.target, *request_.recreate_as));
          } else if (request_.replace_rows) {
            last.push_back(fmt::format("DELETE FROM {}", d.qualified(request_.target)));
          } else if (request_.replaces_null_keys) {
            std::string any_null;
            for (const auto& k : request_.unique_key)
              any_null += fmt::format("{}{} IS NULL", any_null.empty() ? "" : " OR ",
                                      d.quote(request_.columns.find(k, d.names())->name));
            last.push_back(
                fmt::format("DELETE FROM {} WHERE {}", d.qualified(request_.target), any_null));
          }
          for (auto& s : merge_statements())
            last.push_back(std::move(s));
          last.push_back(d.drop_table(into_));
          break;
      }
      if (replaces_live_) {
        for (const auto& sql : request_.hand_made_sql)
          last.push_back(sql);
        made_again_ = request_.hand_made_names;
      }
      if (request_.commit_token) {
        if (request_.guard_token && wh_.checks_token_in_transaction() &&
            wh_.committed_token(request_.target) != request_.expected_token)
          throw wh_.changed_token(request_.target);
        last.push_back(wh_.token_statement(request_));
      }
      wh_.run_and_commit(last);
      open_ = false;
      wh_.writer_closed();
    } catch (...) {
      abandon();
      throw;
    }
  }

  [[nodiscard]] std::uint64_t rows() const override { return rows_; }
  [[nodiscard]] std::vector<std::string> made_again() const override { return made_again_; }

 private:
  void abandon() noexcept {
    inserter_.reset();
    if (open_) {
      wh_.rollback();
      open_ = false;
      wh_.writer_rolled_back();
    }
  }

  /// Deletes the live rows whose key arrives again, then inserts the last arriving
  /// version of every key. Keys compare with `=` so the engines can hash-join; a row
  /// whose key holds a NULL matches nothing (SQL's unique-key semantics).
  [[nodiscard]] std::vector<std::string> merge_statements() const {
    const auto& d = wh_.dialect();
    const std::string live = d.qualified(request_.target);
    const std::string stage = d.qualified(into_);
    const std::string n = d.quote("__flotilla_new");
    const std::string rn = d.quote("__flotilla_rn");

    std::string cols;
    for (const auto& c : request_.columns.columns) {
      if (!cols.empty())
        cols += ", ";
      cols += d.quote(c.name);
    }
    std::vector<std::string> key;
    std::string partition, null_key;
    for (const auto& k : request_.unique_key) {
      key.push_back(request_.columns.find(k, d.names())->name);
      partition += (partition.empty() ? "" : ", ") + d.quote(key.back());
      null_key += fmt::format(" OR {} IS NULL", d.quote(key.back()));
    }
    // The last arriving version of every key; every row whose key holds a NULL, which is
    // no key (it matches nothing, as SQL's unique constraints have it), not one per NULL.
    const std::string latest =
        fmt::format("(SELECT {0} FROM (SELECT {0}, row_number() OVER (PARTITION BY {1} ORDER BY "
                    "{2} DESC) AS {3} FROM {4}) AS {5} WHERE {3} = 1{6})",
                    cols, partition, d.quote(seq_column), rn, stage, d.quote("__flotilla_v"),
                    null_key);
    if (request_.keeps_other_columns)
      return update_then_insert(live, cols, key, latest);
    return {
        d.delete_matching(request_.target, into_, key),
        fmt::format("INSERT INTO {0} ({1}) SELECT {1} FROM {2} AS {3}", live, cols, latest, n),
    };
  }

  /// The merge of a live table holding columns beyond the load: the rows whose key
  /// arrives again have their loaded columns updated (the others keep their values), and
  /// the keys not in the live table are inserted. A key holding a NULL matches nothing.
  [[nodiscard]] std::vector<std::string> update_then_insert(
      const std::string& live, const std::string& cols, const std::vector<std::string>& key,
      const std::string& latest) const {
    const auto& d = wh_.dialect();
    const std::string l = d.quote("__flotilla_live");
    const std::string n = d.quote("__flotilla_new");
    const auto rule = d.names();
    std::string set, match, key_cols, key_not_null, new_key_null;
    for (const auto& k : key) {
      const std::string q = d.quote(k);
      const char* sep = match.empty() ? "" : " AND ";
      match += fmt::format("{}{}.{} = {}.{}", sep, n, q, l, q);
      key_cols += (key_cols.empty() ? "" : ", ") + q;
      key_not_null += fmt::format("{}{} IS NOT NULL", sep, q);
      new_key_null += fmt::format("{}{}.{} IS NULL", new_key_null.empty() ? "" : " OR ", n, q);
    }
    for (const auto& c : request_.columns.columns) {
      bool is_key = false;
      for (const auto& k : key)
        is_key = is_key || schema::same_name(c.name, k, rule);
      if (!is_key)
        set += fmt::format("{}{} = {}.{}", set.empty() ? "" : ", ", d.quote(c.name), n,
                           d.quote(c.name));
    }
    std::vector<std::string> out;
    if (!set.empty())
      out.push_back(fmt::format("UPDATE {} AS {} SET {} FROM {} AS {} WHERE {}", live, l, set,
                                latest, n, match));
    // The new keys. PostgreSQL and DuckDB run NOT EXISTS as a hashed anti-join (a NOT IN
    // whose keys outgrow work_mem is a scan of the live table per arriving row); SQLite
    // runs NOT IN over the live keys that hold no NULL with one index of them, where its
    // correlated NOT EXISTS is a nested loop without a key index.
    if (d.name() != "sqlite") {
      out.push_back(fmt::format(
          "INSERT INTO {0} ({1}) SELECT {1} FROM {2} AS {3} WHERE NOT EXISTS (SELECT 1 FROM {0} "
          "AS {4} WHERE {5})",
          live, cols, latest, n, l, match));
      return out;
    }
    std::string new_row;
    for (const auto& k : key)
      new_row += (new_row.empty() ? "" : ", ") + fmt::format("{}.{}", n, d.quote(k));
    if (key.size() > 1)
      new_row = "(" + new_row + ")";
    out.push_back(fmt::format(
        "INSERT INTO {0} ({1}) SELECT {1} FROM {2} AS {3} WHERE {4} OR {5} NOT IN (SELECT {6} "
        "FROM {0} WHERE {7})",
        live, cols, latest, n, new_key_null, new_row, key_cols, key_not_null));
    return out;
  }


  warehouse_base& wh_;
  load_request request_;
  table_ref into_;
  std::string key_after_;  ///< key columns added after the load (key_after_load)
  bool replaces_live_ = false;  ///< the live table is dropped for another (swap, made again)
  std::vector<std::string> made_again_;  ///< request_.hand_made_names, once made again
  bool in_place_ = false;  ///< a full refresh that loads the live table itself, no swap
  std::unique_ptr<row_inserter> inserter_;
  std::uint64_t rows_ = 0;
  bool open_ = false;
};

}  // namespace

// ---- warehouse_base -------------------------------------------------------------------

warehouse_base::warehouse_base(std::string target_name, std::unique_ptr<dialects::dialect> d)
    : target_name_(std::move(target_name)), dialect_(std::move(d)) {}

warehouse_base::~warehouse_base() = default;

sink_error warehouse_base::error(std::string_view what) const {
  return sink_error(fmt::format("target '{}': {}", target_name_, what));
}

constexpr std::string_view unmappable_words = "that Flotilla cannot map";
constexpr std::string_view changed_token_words = "the table's commit token changed";
constexpr std::string_view not_a_table_words = "not a table Flotilla can load into";


std::vector<warehouse::hand_made_index> warehouse_base::indexes_from(
    const table_ref& table,
    const std::vector<std::vector<std::optional<std::string>>>& rows) const {
  std::vector<hand_made_index> out;
  for (const auto& r : rows) {
    if (r.size() < 2 || !r[0] || !r[1])
      continue;
    table_ref index = table;
    index.name = *r[0];
    out.push_back({*r[0], *r[1], fmt::format("DROP INDEX {}", dialect().qualified(index))});
  }
  return out;
}

sink_error warehouse_base::unmappable(const table_ref& table, std::string_view column,
                                      std::string_view type,
                                      const schema::type_error& why) const {
  return error(fmt::format("{}: column '{}' has type {} {}: {}", dialect().qualified(table),
                           column, type, unmappable_words, why.message));
}

std::string changed_token_message(const dialects::dialect& d, const table_ref& table) {
  return fmt::format(
      "{}: another process committed rows of {} while this load ran (another run loading "
      "the table at the same time, from a second project or state directory on the same "
      "target; or a run stopped earlier whose server session finished its commit); nothing "
      "of this load was committed, and the next run resumes from that commit. Give each "
      "target table one project that loads it",
      changed_token_words, d.qualified(table));
}

sink_error warehouse_base::changed_token(const table_ref& table) const {
  return error(changed_token_message(dialect(), table));
}

std::string warehouse_base::token_statement(const load_request& request) const {
  const auto& d = dialect();
  const std::string tn = d.quote("table_name");
  const std::string tok = d.quote("token");
  const std::string at = d.quote("committed_at");
  return fmt::format(
      "INSERT INTO {0} ({1}, {2}, {3}) VALUES ({4}, {5}, CURRENT_TIMESTAMP) ON CONFLICT ({1}) "
      "DO UPDATE SET {2} = excluded.{2}, {3} = excluded.{3}",
      d.qualified(bookkeeping_table()), tn, tok, at, d.literal(d.qualified(request.target)),
      d.literal(*request.commit_token));
}

sink_error warehouse_base::not_a_table(const table_ref& table, std::string_view what) const {
  // "a view" -> "view", "an index on ..." -> "index", for the advice.
  std::string_view kind = what.substr(what.find(' ') + 1);
  kind = kind.substr(0, kind.find(" on "));
  return error(fmt::format("{} is {}, {}: Flotilla never drops or replaces another kind of "
                           "object; drop or rename the {} on the target, or load the table "
                           "elsewhere (another target schema)",
                           dialect().qualified(table), what, not_a_table_words, kind));
}

void warehouse_base::begin_with(const std::vector<std::string>& statements) {
  begin();
  for (const auto& s : statements)
    run(s);
}

void warehouse_base::run_and_commit(const std::vector<std::string>& statements) {
  for (const auto& s : statements)
    run(s);
  commit_transaction();
}

void warehouse_base::execute(const std::vector<std::string>& statements) {
  if (statements.empty())
    return;
  if (writer_open_)
    throw error("cannot run statements while a load is open on the same connection");
  begin();
  try {
    for (const auto& s : statements)
      run(s);
    commit_transaction();
  } catch (...) {
    rollback();
    throw;
  }
}

std::unique_ptr<table_writer> warehouse_base::begin_load(const load_request& request) {
  const auto& d = dialect();
  if (writer_open_)
    throw error("a load is already open on this connection; commit or destroy it first");
  if (request.target.name.empty())
    throw error("a load needs a table name");
  if (request.columns.columns.empty())
    throw error(fmt::format("the load of {} has no columns", d.qualified(request.target)));
  if (request.mode == load_mode::merge) {
    if (request.unique_key.empty())
      throw error(fmt::format("the merge into {} needs a unique_key", d.qualified(request.target)));
    for (const auto& k : request.unique_key)
      if (!request.columns.find(k, d.names()))
        throw error(fmt::format("unique_key column '{}' is not among the columns loaded into {}",
                                k, d.qualified(request.target)));
  }

  auto live = describe(request.target);
  if (!live && !request.target.schema.empty() && !schemas_ready_.contains(request.target.schema)) {
    ensure_schema(request.target.schema);
    schemas_ready_.insert(request.target.schema);
  }
  if (request.commit_token && !bookkeeping_ready_) {
    ensure_bookkeeping();
    bookkeeping_ready_ = true;
  }
  writer_open_ = true;
  try {
    return std::make_unique<loader>(*this, request, live);
  } catch (...) {
    writer_open_ = false;
    throw;
  }
}

std::optional<std::string> warehouse_base::committed_token(const table_ref& table) {
  const auto& d = dialect();
  const table_ref bk = bookkeeping_table();
  if (!describe(bk))
    return std::nullopt;
  auto rows = query(fmt::format("SELECT {} FROM {} WHERE {} = {}", d.quote("token"),
                                d.qualified(bk), d.quote("table_name"),
                                d.literal(d.qualified(table))));
  if (rows.empty() || rows.front().empty())
    return std::nullopt;
  return rows.front().front();
}

std::optional<std::map<std::string, std::string>> warehouse_base::committed_tokens() {
  const auto& d = dialect();
  const table_ref bk = bookkeeping_table();
  std::map<std::string, std::string> out;
  if (!describe(bk))
    return out;
  for (auto& row : query(fmt::format("SELECT {}, {} FROM {}", d.quote("table_name"),
                                     d.quote("token"), d.qualified(bk))))
    if (row.size() == 2 && row[0] && row[1])
      out.emplace(std::move(*row[0]), std::move(*row[1]));
  return out;
}

// ---- helpers --------------------------------------------------------------------------

void append_real(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "Infinity" : "-Infinity";
  } else {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, end);
  }
}

std::string format_real(double v) {
  std::string out;
  append_real(out, v);
  return out;
}

void append_hex(std::string& out, std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  const std::size_t at = out.size();
  out.resize(at + bytes.size() * 2);
  char* p = out.data() + at;
  for (unsigned char c : bytes) {
    *p++ = digits[c >> 4];
    *p++ = digits[c & 15];
  }
}

std::string value_text(const schema::value& v) {
  switch (v.kind) {
    case schema::value::tag::null:
      return {};
    case schema::value::tag::boolean:
      return v.b ? "true" : "false";
    case schema::value::tag::integer:
      return std::to_string(v.i);
    case schema::value::tag::real:
      return format_real(v.d);
    case schema::value::tag::text:
      return v.s;
  }
  return {};
}

}  // namespace detail

bool is_unmappable_column(std::string_view message) {
  return message.find(detail::unmappable_words) != std::string_view::npos;
}

bool is_not_a_table(std::string_view message) {
  return message.find(detail::not_a_table_words) != std::string_view::npos;
}

}  // namespace flotilla::sinks

namespace flotilla::sinks::detail {

std::optional<bool> as_bool(const schema::value& v) {
  switch (v.kind) {
    case schema::value::tag::boolean:
      return v.b;
    case schema::value::tag::integer:
      if (v.i == 0 || v.i == 1)
        return v.i == 1;
      return std::nullopt;
    case schema::value::tag::text: {
      std::string s;
      for (char c : v.s)
        s.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
      if (s == "true" || s == "t" || s == "1")
        return true;
      if (s == "false" || s == "f" || s == "0")
        return false;
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

std::optional<std::int64_t> as_int(const schema::value& v) {
  switch (v.kind) {
    case schema::value::tag::integer:
      return v.i;
    case schema::value::tag::boolean:
      return v.b ? 1 : 0;
    case schema::value::tag::real:
      // 2^63 is exactly representable; anything at or past it does not fit.
      if (std::isfinite(v.d) && std::trunc(v.d) == v.d && v.d >= -9223372036854775808.0 &&
          v.d < 9223372036854775808.0)
        return static_cast<std::int64_t>(v.d);
      return std::nullopt;
    case schema::value::tag::text: {
      std::int64_t out = 0;
      const char* b = v.s.data();
      const char* e = b + v.s.size();
      if (b != e && *b == '+')
        ++b;
      auto [p, ec] = std::from_chars(b, e, out);
      if (ec == std::errc{} && p == e && b != e)
        return out;
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

std::optional<double> as_real(const schema::value& v) {
  switch (v.kind) {
    case schema::value::tag::real:
      return v.d;
    case schema::value::tag::integer:
      return static_cast<double>(v.i);
    case schema::value::tag::text: {
      double out = 0;
      const char* b = v.s.data();
      const char* e = b + v.s.size();
      if (b != e && *b == '+')
        ++b;
      auto [p, ec] = std::from_chars(b, e, out);
      if (ec == std::errc{} && p == e && b != e)
        return out;
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

sink_error bad_value(const dialects::dialect& d, const dialects::table_ref& t,
                     std::string_view column, std::uint64_t row, const schema::value& v,
                     std::string_view engine_type) {
  // `row` counts from 0; people count rows from 1.
  std::string shown = value_text(v);
  if (shown.size() > 64)
    shown = shown.substr(0, 64) + "...";
  // A narrower integer than the value: bigint holds it. Otherwise the type is the user's.
  const bool integer = engine_type == "INTEGER" || engine_type == "SMALLINT" ||
                       engine_type == "TINYINT" || engine_type == "INT";
  return sink_error(fmt::format(
      "{}: row {}, column '{}': value '{}' does not fit type {}; declare a type that holds it "
      "in flotilla.toml (the table's columns = {{ {} = \"{}\" }}) and run again",
      d.qualified(t), row + 1, column, shown, engine_type, schema::toml_key(column),
      integer ? "bigint" : "<type>"));
}

}  // namespace flotilla::sinks::detail
