#include "engine/copy.hpp"
#include "schema/toml_text.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <exception>
#include <filesystem>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "engine/change_queue.hpp"
#include "engine/coerce.hpp"
#include "engine/staging.hpp"
#include "schema/compat.hpp"
#include "sources/values.hpp"

namespace flotilla::engine {

std::string_view to_string(table_status s) {
  switch (s) {
    case table_status::copied: return "copied";
    case table_status::pruned: return "pruned";
    case table_status::failed: return "failed";
    case table_status::skipped: return "skipped";
    case table_status::held: return "held";
  }
  return "failed";
}

namespace {

/// The commit token of an incremental table: its cursor column and its watermark, so that
/// the token of another cursor column (the setting changed) is never taken for this one's;
/// then the run that commits it and its rows, so that a later run finding the target ahead
/// of state can say whose rows those are.
/// The run is written "<run id>@<project>" (a run id has no '@'), so that a token another
/// project committed is told from this one's.
std::string token_of(const std::string& cursor, const std::string& watermark,
                     const table_job& job, std::uint64_t rows) {
  if (!job.run_id || job.run_id->empty())
    return fmt::format("\x1e{}\x1f{}", cursor, watermark);
  if (job.project && !job.project->empty())
    return fmt::format("\x1e{}\x1f{}\x1d{}@{}\x1d{}", cursor, watermark, *job.run_id,
                       *job.project, rows);
  return fmt::format("\x1e{}\x1f{}\x1d{}\x1d{}", cursor, watermark, *job.run_id, rows);
}

struct token_parts {
  std::string watermark;
  std::string run_id;  ///< empty: a token from before runs were kept in it
  std::string project;  ///< empty: a token from before projects were kept in it
  std::uint64_t rows = 0;
};

/// What a commit token holds for `cursor`; nullopt when it is another column's. A token
/// written before the column was kept is its watermark alone; one written before the run
/// was kept ends with the watermark. The run part is taken only when it reads as one (a
/// run id, then digits): a text watermark may hold any character.
std::optional<token_parts> parse_token(const std::string& token, const std::string& cursor) {
  token_parts out;
  if (!token.starts_with('\x1e')) {
    out.watermark = token;
    return out;
  }
  const auto sep = token.find('\x1f');
  if (sep == std::string::npos || token.compare(1, sep - 1, cursor) != 0)
    return std::nullopt;
  out.watermark = token.substr(sep + 1);
  const auto last = out.watermark.rfind('\x1d');
  if (last == std::string::npos || last == 0)
    return out;
  const auto before = out.watermark.rfind('\x1d', last - 1);
  if (before == std::string::npos)
    return out;
  const std::string_view rows = std::string_view(out.watermark).substr(last + 1);
  const std::string_view run =
      std::string_view(out.watermark).substr(before + 1, last - before - 1);
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(rows.data(), rows.data() + rows.size(), n);
  if (rows.empty() || ec != std::errc{} || end != rows.data() + rows.size() || run.empty() ||
      run.find_first_of("\x1d\x1e\x1f") != std::string_view::npos)
    return out;
  out.run_id = std::string(run);
  if (const auto at = out.run_id.find('@'); at != std::string::npos) {
    out.project = out.run_id.substr(at + 1);
    out.run_id.resize(at);
  }
  out.rows = n;
  out.watermark.resize(before);
  return out;
}

/// What a run says about an earlier run's commit that state did not record.
std::string recovered_warning(const recovered_commit& r, const std::string& cursor) {
  return fmt::format(
      "run {} committed {} row(s) of this table to the target (up to {} = {}) and was stopped "
      "before recording them in the state store: this run goes on from that watermark, and "
      "reports those rows under `recovered`",
      r.run_id, r.rows, cursor, r.watermark);
}

struct described {
  std::optional<schema::table_schema> live;
  target_state state = target_state::absent;
  std::string unreadable;  ///< why the live table could not be described
};

described describe_target(sinks::warehouse& wh, const table_job& job) {
  const dialects::table_ref& t = job.target;
  described d;
  try {
    d.live = job.target_tables ? job.target_tables->describe(wh, t) : wh.describe(t);
    d.state = d.live ? target_state::present : target_state::absent;
  } catch (const std::exception& e) {
    d.state = target_state::unreadable;
    d.unreadable = e.what();
  }
  return d;
}

/// The plan of a table whose live table could not be described. Seed 001 (Rocky, the
/// default without a contract): treated as absent and rebuilt with a full refresh, which
/// plan and the run's table say. Seed 000 (SQLLoad, under an enforced contract) never
/// drops a column: a live table read but holding a column of a type Flotilla cannot map
/// (one added on the target by hand, say) fails FLT-S012 and is left as it is. So does
/// it under type_change_rebuild = deny, and under require_confirmation without
/// --allow-type-change-rebuild: dropping the table is a rebuild that keeps nothing.
table_plan plan_described(const schema::table_schema& columns, const described& d,
                          const dialects::dialect& dialect, const dialects::table_ref& target,
                          const table_settings& settings) {
  // The name is another kind of object's (a view, an index): nothing is dropped or loaded.
  if (d.state == target_state::unreadable && sinks::is_not_a_table(d.unreadable)) {
    table_plan p;
    p.target = target;
    p.shape_action = "none";
    p.error = plan_error{"FLT-S015", d.unreadable};
    return p;
  }
  if (d.state == target_state::unreadable && sinks::is_unmappable_column(d.unreadable)) {
    std::string by;
    if (settings.enforced)
      by = "Under an enforced contract";
    else if (settings.on_schema_change == new_column_rule::ignore)
      // Copied anew, the table would take every source column, the ones ignore leaves out
      // (seed 000) too: which those are cannot be told without the live table's columns.
      by = "Under on_schema_change = ignore (a copy anew would load the source columns it "
           "leaves out)";
    else if (settings.type_change_rebuild == rebuild_rule::deny)
      by = fmt::format("Under type_change_rebuild = deny ({})", settings.type_change_rebuild_from);
    else if (settings.type_change_rebuild == rebuild_rule::require_confirmation &&
             !settings.rebuild_confirmed)
      by = fmt::format("Under type_change_rebuild = require_confirmation ({}), without "
                       "--allow-type-change-rebuild",
                       settings.type_change_rebuild_from);
    if (!by.empty()) {
      table_plan p;
      p.target = target;
      p.shape_action = "none";
      p.error = plan_error{
          "FLT-S012",
          fmt::format("{}. {} the live table is left as it is rather than dropped and copied "
                      "anew, which would lose that column, its values and the table's grants: "
                      "change that column on the target to a type Flotilla maps (e.g. text), "
                      "or drop the column; or drop the table to have it copied again{}",
                      d.unreadable, by,
                      settings.enforced || settings.type_change_rebuild == rebuild_rule::deny ||
                              settings.on_schema_change == new_column_rule::ignore
                          ? ""
                          : "; or run with --allow-type-change-rebuild to drop it and copy it "
                            "anew")};
      return p;
    }
  }
  table_plan p = plan_table(columns, d.live, d.state, dialect, target, settings);
  // A plan that fails touches nothing: no drop to warn of (the failure says why).
  if (d.state == target_state::unreadable && !p.error) {
    p.warnings.push_back(fmt::format(
        "the live table could not be read ({}): it is treated as absent, dropped and copied "
        "anew with a full refresh; columns and rows only it has are lost, and so are its "
        "grants, comments and the indexes made by hand on it (make them again after the run)",
        d.unreadable));
    // A live table dropped for a column Flotilla cannot map is a schema action like any
    // other: the run's drift actions and the event stream say so, with the column.
    if (sinks::is_unmappable_column(d.unreadable) && !p.error && !p.ddl.empty()) {
      schema::evolution_step step;
      step.action = schema::evolution_action::drop_and_recreate;
      step.loses_column = true;
      step.decided_by =
          settings.type_change_rebuild == rebuild_rule::allow
              ? fmt::format("type_change_rebuild = allow ({})", settings.type_change_rebuild_from)
              : std::string("--allow-type-change-rebuild");
      // "<table>: column '<name>' has type <type, spaces and all> that Flotilla cannot
      // map: <why>" (sinks::warehouse_base::unmappable).
      const std::string_view m = d.unreadable;
      if (const auto at = m.find(": column '"); at != std::string_view::npos) {
        const auto from = at + 10;
        if (const auto end = m.find("' has type ", from); end != std::string_view::npos) {
          step.column = std::string(m.substr(from, end - from));
          const auto type_at = end + 11;
          if (const auto stop = m.find(" that Flotilla cannot map", type_at);
              stop != std::string_view::npos)
            step.from_text = std::string(m.substr(type_at, stop - type_at));
        }
      }
      // The table is copied anew from the source: every column only the live table has
      // goes, this one and any other (the live table could not be read to list them).
      step.reason =
          step.column.empty() || step.from_text.empty()
              ? fmt::format("the live table has a column Flotilla cannot map ({}): dropped and "
                            "copied anew from the source, that column, any other the source "
                            "does not have, and their values are lost",
                            d.unreadable)
              : fmt::format("live column '{}' has type {}, which Flotilla cannot map: the table "
                            "is dropped and copied anew from the source; that column, any "
                            "other the source does not have, their values, and the table's "
                            "grants, comments and indexes made by hand are lost",
                            step.column, step.from_text);
      step.sql = p.ddl.front();
      p.drift.steps.push_back(std::move(step));
      p.drift_checked = true;
      p.live_unmappable = true;
    }
  }
  return p;
}

/// Digits before the point a live column's values may have: 0 when it holds no numbers.
int integer_digits(const schema::portable_type& t) {
  using k = schema::type_kind;
  switch (t.kind) {
    case k::boolean: return 1;
    case k::smallint: return 5;
    case k::int32: return 10;
    case k::bigint: return 19;
    case k::decimal: return t.precision - t.scale;
    default: return 0;
  }
}

/// Live types an inferred column keeps, though the file's values now infer another:
/// - a csv/json column with no value in the file (every row empty or null) has nothing to
///   infer a type from, and DuckDB's readers say text (csv) or json: where it meets a live
///   column of another type it takes the live type, as a file with no rows does, instead
///   of failing as a type change (FLT-S005) whose advice would retype a good column;
/// - a JSON file's values read into a live json column as the JSON they are (a number, a
///   string, a record): such a column holds whatever they now infer as.
/// Pinned columns are read as pinned.
void keep_live_types_of_valueless(sources::source& src, const table_job& job,
                                  const std::optional<schema::table_schema>& live,
                                  const dialects::dialect& dialect, schema::table_schema& out) {
  if (!job.table.inferred || !live)
    return;
  const auto rule = dialect.names();
  const auto& declared = job.settings.declared;
  const auto pinned = [&](const std::string& name) {
    return std::any_of(declared.begin(), declared.end(),
                       [&](const auto& d) { return schema::same_name(d.name, name, rule); });
  };
  std::vector<std::string> asked;
  std::vector<std::pair<schema::column*, const schema::column*>> patched;
  const bool json_file = src.adapter() == "json";
  for (auto& c : out.columns) {
    const auto* l = live->find(c.name, rule);
    if (l == nullptr || pinned(c.name))
      continue;  // new, or read as pinned
    if (json_file && c.type.kind != schema::type_kind::json) {
      if (dialect.canonical(l->type).kind == schema::type_kind::json)
        c.type = l->type;
      continue;
    }
    if (c.type.kind != schema::type_kind::text && c.type.kind != schema::type_kind::json)
      continue;
    if (dialect.canonical(l->type) == dialect.canonical(c.type) ||
        schema::can_read_as(c.type, dialect.canonical(l->type)))
      continue;  // the live column holds the values as they are
    asked.push_back(c.name);
    patched.emplace_back(&c, l);
  }
  if (asked.empty())
    return;
  const auto empty = src.valueless(job.table, asked);
  for (std::size_t i = 0; i < empty.size() && i < patched.size(); ++i)
    if (empty[i])
      patched[i].first->type = patched[i].second->type;
}

/// Seed 000 widens an inferred column along bool -> int -> decimal, but DuckDB's file
/// readers infer a double for any number with a point. Where such a column meets a live
/// boolean, integer or decimal column, the plan sees the narrowest decimal holding both
/// the live column's values and every value in the file: the live decimal itself when it
/// holds them, or a wider one that auto_widen may take. A column with any value that is
/// not a plain decimal number stays a double, and its table fails FLT-S005 as before.
/// Each fit's digits go to `settings.digits`, for the plan to check them against the
/// target's exact numbers.
schema::table_schema with_decimal_fit(sources::source& src, const table_job& job,
                                      const std::optional<schema::table_schema>& live,
                                      const dialects::dialect& dialect, table_settings& settings) {
  schema::table_schema out = job.table.columns;
  if (!job.table.inferred || !live)
    return out;
  keep_live_types_of_valueless(src, job, live, dialect, out);
  const auto rule = dialect.names();
  std::vector<std::string> asked;
  std::vector<schema::column*> patched;
  std::vector<schema::portable_type> have;
  for (auto& c : out.columns) {
    if (c.type.kind != schema::type_kind::float64)
      continue;
    const auto& declared = job.settings.declared;
    const bool pinned = std::any_of(declared.begin(), declared.end(), [&](const auto& d) {
      return schema::same_name(d.name, c.name, rule);
    });
    const auto* l = live->find(c.name, rule);
    if (pinned || l == nullptr)
      continue;
    const auto t = dialect.canonical(l->type);
    if (integer_digits(t) == 0)
      continue;
    asked.push_back(c.name);
    patched.push_back(&c);
    have.push_back(t);
  }
  if (asked.empty())
    return out;
  const auto fits = src.decimal_fit(job.table, asked);
  for (std::size_t i = 0; i < fits.size() && i < asked.size(); ++i) {
    if (!fits[i])
      continue;
    settings.digits.push_back({asked[i], fits[i]->significant, fits[i]->scale == 0 || fits[i]->whole,
                               fits[i]->integer});
    // Whole numbers written with a point ("7.", "7.0") that the live integer column holds.
    if ((fits[i]->scale == 0 || fits[i]->whole) && schema::is_integer(have[i].kind) &&
        fits[i]->integer < integer_digits(have[i])) {
      patched[i]->type = have[i];
      continue;
    }
    const int scale = std::max(fits[i]->scale, have[i].kind == schema::type_kind::decimal
                                                   ? have[i].scale
                                                   : 0);
    const int digits = std::max(fits[i]->integer, integer_digits(have[i])) + scale;
    if (digits <= 38)
      patched[i]->type = schema::portable_type::decimal(digits, scale);
  }
  return out;
}


/// A csv/json file is parsed as its declared types, and DuckDB's casts round (7.9 read
/// as an int is 8, 2 as a boolean is true): where a declared type cannot read the
/// inferred one (schema::can_read_as), the file's values are checked, and a value the
/// declared type cannot hold exactly fails the plan (FLT-S002) instead of loading changed.
void note_unfit_values(sources::source& src, const table_job& job, table_settings& settings,
                       const dialects::dialect& dialect) {
  if (!job.table.inferred || job.settings.declared.empty())
    return;
  std::vector<schema::column> asked;
  for (const auto& d : job.settings.declared)
    if (const auto* c = job.table.columns.find(d.name, dialect.names()))
      if (!schema::can_read_as(c->type, d.type))
        asked.push_back(schema::column{c->name, d.type});
  if (asked.empty())
    return;
  const auto unfit = src.unfit_values(job.table, asked);
  for (std::size_t i = 0; i < unfit.size() && i < asked.size(); ++i)
    if (unfit[i])
      settings.unfit.push_back({asked[i].name, unfit[i]->value, unfit[i]->where});
}

/// A csv/json column whose values outgrew its inferred type (FLT-S005): the first value
/// the live type cannot hold, and where it is (the file, its data row), so the message
/// points at the line to look at. Read only for that table, once it failed so.
void name_outgrowing_value(sources::source* src, const table_job& job, table_plan& p) {
  if (src == nullptr || !p.error || p.error->code != "FLT-S005" || !job.table.inferred ||
      p.error->column.empty())
    return;
  const auto have = schema::parse_type(p.error->expected);
  if (!have)
    return;
  try {
    const auto unfit = src->unfit_values(job.table, {schema::column{p.error->column, *have}});
    if (!unfit.empty() && unfit[0]) {
      // Right after the column's own sentence: the table's other errors follow it.
      const std::string named = fmt::format(" (the first value {} cannot hold: '{}', {})",
                                            p.error->expected, unfit[0]->value, unfit[0]->where);
      const auto others = p.error->reason.find("; also [");
      p.error->reason.insert(others == std::string::npos ? p.error->reason.size() : others, named);
    }
  } catch (const std::exception&) {
    // The message stands without it.
  }
}

sinks::load_mode mode_of(load_kind k) {
  switch (k) {
    case load_kind::full_refresh: return sinks::load_mode::replace;
    case load_kind::incremental: return sinks::load_mode::append;
    case load_kind::merge: return sinks::load_mode::merge;
  }
  return sinks::load_mode::replace;
}

/// Creates the target schema once per process and target before any table of it loads.
/// Engines like DuckDB refuse two transactions creating the same schema at once
/// (a write-write conflict), which concurrent first loads of one schema would do.
void ensure_schema_once(sinks::warehouse& wh, const table_job& job) {
  if (job.target.schema.empty())
    return;
  const std::string sql = wh.dialect().create_schema(job.target.schema, job.target.catalog);
  if (sql.empty())
    return;
  static std::mutex mu;
  static std::set<std::string> done;
  const std::string key = job.target_name + '\n' + job.target.catalog + '\n' + job.target.schema;
  std::lock_guard lock(mu);
  if (done.contains(key))
    return;
  // The warehouse's own way where it has one: PostgreSQL asks its catalog first, since
  // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even for a schema that is there.
  if (job.target.catalog.empty())
    wh.ensure_schema(job.target.schema);
  else
    wh.execute({sql});
  done.insert(key);
}

/// The plan's DDL, keeping the indexes made by hand on the table: a rebuild drops them
/// with the old table, so they are made again after its swap, in its transaction (an
/// index that cannot be made again fails the change, named, and leaves the table as it
/// was). Where an index stops a retype (DuckDB, which sees the index until its DROP
/// commits), they are dropped in a transaction of their own first, then the ALTERs and
/// the indexes made again commit together; should those fail, the indexes are made again
/// as they were. Returns the indexes made again.
std::vector<std::string> execute_ddl(sinks::warehouse& wh, const dialects::table_ref& target,
                                     const table_plan& plan) {
  const bool rebuilds = plan.shape_action == "rebuild";
  const bool retypes =
      wh.index_blocks_retype() &&
      std::any_of(plan.drift.steps.begin(), plan.drift.steps.end(), [](const auto& st) {
        return st.action == schema::evolution_action::alter_column_types;
      });
  if (!rebuilds && !retypes) {
    wh.execute(plan.ddl);
    return {};
  }
  const auto indexes = wh.hand_made_indexes(target);
  if (indexes.empty()) {
    wh.execute(plan.ddl);
    return {};
  }
  std::vector<std::string> statements = plan.ddl;
  std::vector<std::string> drops, creates, names;
  for (const auto& i : indexes) {
    drops.push_back(i.drop_sql);
    creates.push_back(i.create_sql);
    names.push_back(i.name);
  }
  statements.insert(statements.end(), creates.begin(), creates.end());
  if (rebuilds) {
    wh.execute(statements);
    return names;
  }
  wh.execute(drops);
  try {
    wh.execute(statements);
  } catch (...) {
    try {
      wh.execute(creates);
    } catch (const std::exception&) {
      // nop: the change's own error is the one reported
    }
    throw;
  }
  return names;
}

/// Every column loads as it is read (`coerced`, the plan's columns_to_coerce, is empty):
/// nothing converts on the way, so a batch may keep its source's own text.
bool passes_through(const table_plan& plan, const std::vector<std::size_t>& coerced) {
  return coerced.empty() && plan.read_columns.columns.size() == plan.load_columns.columns.size();
}

/// Passes through, and every column loads with the type it is read as into a table the
/// load creates from those types (a full refresh): the source's binary COPY tuples are
/// what the target's binary COPY takes. Not JSON, read as text and loaded as jsonb.
bool passes_through_binary(const table_plan& plan, const std::vector<std::size_t>& coerced) {
  if (!passes_through(plan, coerced) || plan.load != load_kind::full_refresh)
    return false;
  const auto& read = plan.read_columns.columns;
  const auto& load = plan.load_columns.columns;
  for (std::size_t i = 0; i < read.size(); ++i)
    if (read[i].type != load[i].type || read[i].type.kind == schema::type_kind::json)
      return false;
  return true;
}

/// The rows of one table on their way into the target: both load paths (staged data and
/// the change queue) write each batch through it.
class batch_loader {
 public:
  /// `coerced`: the plan's columns_to_coerce, outliving the loader.
  batch_loader(sinks::table_writer& writer, const table_job& job, const table_plan& plan,
               const std::vector<std::size_t>& coerced)
      : writer_(writer), job_(job), plan_(plan), coerced_(coerced) {}

  /// Converts the batch to the load columns' representation where they are wider, writes
  /// it and counts its rows. Throws when the user stopped the run (nothing is committed).
  void write(schema::row_batch& batch) {
    if (job_.cancel && job_.cancel->load(std::memory_order_relaxed))
      throw std::runtime_error("stopped by the user before commit; the target is unchanged");
    if (!coerced_.empty())
      coerce_batch(batch, plan_.read_columns, plan_.load_columns, coerced_);
    writer_.write(batch);
    if (job_.rows_progress)
      job_.rows_progress->fetch_add(batch.rows(), std::memory_order_relaxed);
  }

 private:
  sinks::table_writer& writer_;
  const table_job& job_;
  const table_plan& plan_;
  const std::vector<std::size_t>& coerced_;
};

}  // namespace

/// The source's columns as the drift gate observes them (seed 004), each in the source's
/// own type: a csv/json file's as DuckDB inferred them, though the read may take one in
/// the live column's type (a live text column keeps the file's text as written). A pinned
/// column in the type the read takes (`read`: SQLite and files read it as declared).
schema::table_schema gate_observed(const table_job& job, schema::table_schema columns,
                                   const schema::table_schema& read) {
  const auto rule = schema::name_rule::case_sensitive;
  for (auto& c : columns.columns) {
    const auto& declared = job.settings.declared;
    const bool pinned = std::any_of(declared.begin(), declared.end(),
                                    [&](const auto& d) { return d.name == c.name; });
    const auto* from = pinned ? read.find(c.name, rule) : job.table.columns.find(c.name, rule);
    if (from != nullptr)
      c.type = from->type;
  }
  return columns;
}

valueless_probe valueless_probe_of(sources::source* src, const table_job& job) {
  if (src == nullptr || !job.table.inferred)
    return {};
  const sources::source_table* table = &job.table;
  return [src, table](const std::vector<std::string>& columns) {
    return src->valueless(*table, columns);
  };
}

std::optional<std::string> token_off_state(const std::optional<std::string>& token,
                                           const std::string& cursor,
                                           const std::string& watermark,
                                           const std::string& project,
                                           const std::vector<std::string>& earlier) {
  if (!token)
    return std::nullopt;
  if (token->empty())
    return fmt::format(
        "the target's last commit of this table is a full load this project's state did not "
        "record (state has {} = {}): it is copied, not pruned",
        cursor, watermark);
  const auto parts = parse_token(*token, cursor);
  if (!parts)
    return fmt::format(
        "the target's last commit of this table is of another cursor column than '{}', "
        "whose watermark {} this project's state recorded (the target was restored from an "
        "older copy?): it is copied, not pruned",
        cursor, watermark);
  if (!parts->project.empty() && parts->project != project &&
      std::find(earlier.begin(), earlier.end(), parts->project) == earlier.end())
    return fmt::format(
        "the target's last commit of this table is project '{}''s, not this one's: another "
        "flotilla.toml loaded it since; it is copied, not pruned",
        parts->project);
  if (parts->run_id.empty() || parts->watermark == watermark)
    return std::nullopt;
  return fmt::format(
      "the target holds this table's rows up to {0} = {1} (run {2}), not up to {0} = {3} as "
      "this project's state recorded: the target was restored from another copy, or loaded "
      "by another process since; it is copied, not pruned",
      cursor, parts->watermark, parts->run_id, watermark);
}

std::string cursor_family(const schema::portable_type& type) {
  using schema::type_kind;
  switch (type.kind) {
    case type_kind::smallint:
    case type_kind::int32:
    case type_kind::bigint:
    case type_kind::float32:
    case type_kind::float64:
    case type_kind::decimal:
      return "number";
    case type_kind::varchar:
    case type_kind::text:
      return "text";
    case type_kind::date:
    case type_kind::timestamp_ntz:
    case type_kind::timestamp_tz:
      return "time";
    case type_kind::time:
      return "time of day";
    default:
      return schema::to_string(schema::portable_type::of(type.kind));
  }
}

/// Where an incremental table's load starts, and why not where state says.
struct incremental_start {
  std::optional<std::string> watermark;
  std::string cursor_family;   ///< the cursor column's cursor_family()
  std::string cursor_retyped;  ///< a warning: the watermark was dropped for the cursor's type
  std::optional<recovered_commit> recovered;  ///< the target was ahead of state
  /// The target table holds an older copy than state's watermark stands for (the table's
  /// later loads went to another target table): said, and its rows are read in full and
  /// replace the copy's.
  std::string stale_copy;
  /// The target's commit is of a run the state store does not know: said.
  std::string state_behind;
  /// The target's commit token as read (the outer optional: read at all; the inner: a
  /// token was committed), which the load's commit expects to find unchanged.
  std::optional<std::optional<std::string>> token_read;
};

/// The watermark an incremental load of `job` starts from, as `run` and `plan` both see
/// it: the target keeps the watermark committed with its rows, so if a crash came between
/// the target commit and the state commit (or state was lost), the target is right. Not
/// when the source table was created anew: that watermark is the old table's too. An
/// empty token is a full load's: it cleared the watermark (clear_token), and state may
/// still hold the one before if the process died before its state commit. A watermark
/// committed under another cursor_family is dropped. Nothing for a full-refresh table.
incremental_start resume_from(sinks::warehouse& wh, const table_job& job) {
  incremental_start out;
  const auto& cursor_column = job.settings.cursor_column;
  if (cursor_column.empty())
    return out;
  out.watermark = job.watermark;
  if (!job.watermark_void) {
    auto token = wh.committed_token(job.target);
    out.token_read.emplace(token);  // engaged even when no token was committed
    if (token) {
      if (token->empty()) {
        out.watermark.reset();
      } else if (auto committed = parse_token(*token, cursor_column);
                 committed && !committed->project.empty() && job.project &&
                 committed->project != *job.project &&
                 !(job.project_earlier &&
                   std::find(job.project_earlier->begin(), job.project_earlier->end(),
                             committed->project) != job.project_earlier->end())) {
        // Another project's commit: two flotilla.toml files load this target table (or
        // this project was renamed). Its watermark is of its own source's rows.
        out.stale_copy = fmt::format(
            "the target table's rows and its watermark ({} = {}) were committed by project "
            "'{}', not this one ('{}'): another flotilla.toml loads this target table, or the "
            "project was renamed where its state directory did not follow. This run reads every row and replaces the table's rows, as a "
            "first load does; give each project a target table of its own",
            cursor_column, committed->watermark, committed->project, *job.project);
        out.watermark.reset();
      } else if (committed && !committed->run_id.empty() && !job.watermark_run_id.empty() &&
                 committed->run_id < job.watermark_run_id &&
                 committed->watermark != job.watermark) {
        // Behind state: run ids order by their start time, and the run that committed
        // state's watermark loaded another target table (the table's target changed since,
        // and changed back). This copy's watermark would skip every row loaded elsewhere.
        // (A retry that found its staged rows committed records their watermark again
        // under its own id: the same value, not another copy.)
        out.stale_copy = fmt::format(
            "the target table holds the copy run {} loaded (up to {} = {}), older than the "
            "watermark {} = {} run {} committed (the table's target changed since and back, "
            "or the target was restored from an older backup): this run reads every row and "
            "replaces the copy's rows, as a first load does",
            committed->run_id, cursor_column, committed->watermark, cursor_column,
            job.watermark.value_or(""), job.watermark_run_id);
        out.watermark.reset();
      } else if (committed) {
        // Ahead of state: an earlier run's commit whose state commit never came.
        if (!committed->run_id.empty() && committed->watermark != job.watermark &&
            !(job.run_id && committed->run_id == *job.run_id) &&
            (!job.unrecorded_commit || job.unrecorded_commit(committed->run_id)))
          out.recovered = recovered_commit{std::move(committed->run_id), committed->rows,
                                           committed->watermark};
        // A run the state store does not know committed it (the state directory was lost,
        // or restored from an older copy): the target is right, and that is said.
        else if (!committed->run_id.empty() && committed->watermark != job.watermark &&
                 job.run_known && !job.run_known(committed->run_id))
          out.state_behind = fmt::format(
              "the state store does not know run {}, which committed this table's rows up to "
              "{} = {} in the target (the state directory was lost, or restored from an older "
              "copy): this run goes on from the target's watermark",
              committed->run_id, cursor_column, committed->watermark);
        out.watermark = std::move(committed->watermark);
      }
      // Another cursor column's token (the setting changed since) says nothing here: state
      // keeps no watermark of that column to tell a lost state commit from a recorded one.
    }
  }
  const auto* cursor = job.table.columns.resolve(cursor_column);
  if (cursor)
    out.cursor_family = cursor_family(cursor->type);
  if (out.watermark && cursor && !job.watermark_family.empty() &&
      job.watermark_family != out.cursor_family) {
    out.cursor_retyped = fmt::format(
        "the cursor column '{}' changed type since the watermark {} was committed ({} values "
        "then, {} now, which order otherwise): this run reads every row, as a first run does",
        cursor_column, *out.watermark, job.watermark_family, out.cursor_family);
    out.watermark.reset();
  }
  return out;
}

/// What the run decided about the table before its plan (job.warnings), and that rows
/// below a kept watermark are not read after a rewrite, unless the watermark is dropped
/// anyway for the cursor column's new type (which says so).
/// A table the plan copies anew is read in full: no rows are left unread.
std::vector<std::string> run_warnings_of(const table_job& job, const incremental_start& start,
                                         const table_plan& plan) {
  std::vector<std::string> out = job.warnings;
  if (!start.stale_copy.empty())
    out.push_back(start.stale_copy);
  if (!start.state_behind.empty())
    out.push_back(start.state_behind);
  // The cursor column back at the source: said once it is (while it is not, the table
  // fails FLT-S010, which says so).
  if (!job.cursor_back_warning.empty() && job.table.columns.resolve(job.settings.cursor_column) &&
      plan.load != load_kind::full_refresh)
    out.push_back(job.cursor_back_warning);
  if (job.generation_changed && !job.generation_warning.empty() && start.cursor_retyped.empty() &&
      plan.load != load_kind::full_refresh)
    out.push_back(job.generation_warning);
  // The live table was described (drift checked): it is there, and not this project's.
  if (job.unclaimed_target && job.stream_owned_target && plan.drift_checked && !plan.error)
    out.push_back(fmt::format(
        "the target table {} was made by this project's `flotilla stream` of the source, "
        "and no run loaded it: this copy {}, and the stream, when it starts again, applies "
        "its changes since its saved position on top (a table without a key gets those rows "
        "twice, a column this copy adds stops it, FLT-H008). Let the stream own its "
        "tables: to copy them anew, stop it and start `flotilla stream --reload`",
        job.target.schema.empty() ? job.target.name : job.target.schema + "." + job.target.name,
        plan.load == load_kind::full_refresh ? "replaces its rows with the source's"
        : plan.load == load_kind::merge      ? "merges the source's rows into it on the key"
                                             : "appends the source's rows to it"));
  else if (job.unclaimed_target && plan.drift_checked && !plan.error)
    out.push_back(fmt::format(
        "the target table {} exists, and no run recorded in this project's state loaded it "
        "(made by hand, by another tool or project, by a run killed before it recorded it, or "
        "the state directory is new): this "
        "copy {}",
        job.target.schema.empty() ? job.target.name : job.target.schema + "." + job.target.name,
        plan.load == load_kind::full_refresh ? std::string("replaces its rows with the source's")
        // Its commit token gave the watermark (state had none): the copy goes on from it.
        : start.watermark && !job.watermark
            ? fmt::format("goes on from the watermark the target committed with its rows "
                          "({} = {}), {} the source's rows past it",
                          job.settings.cursor_column, *start.watermark,
                          plan.load == load_kind::merge ? "merging" : "appending")
        : plan.load == load_kind::merge ? std::string("merges the source's rows into it on the key")
                                        : std::string("appends the source's rows to it")));
  return out;
}

table_plan plan_first_load(const table_job& job, const dialects::dialect& d,
                           sources::source* src) {
  auto settings = job.settings;
  settings.inferred = job.table.inferred;
  settings.no_rows = job.table.no_rows;
  if (src)
    note_unfit_values(*src, job, settings, d);
  return plan_table(job.table.columns, std::nullopt, target_state::absent, d, job.target,
                    settings);
}

table_plan plan_against_target(sinks::warehouse& wh, const table_job& job,
                               sources::source* src) {
  auto d = describe_target(wh, job);
  auto settings = job.settings;
  settings.inferred = job.table.inferred;
  settings.no_rows = job.table.no_rows;
  // As the run will: from the watermark the target committed, when state lost it.
  const incremental_start start = resume_from(wh, job);
  settings.has_watermark = start.watermark.has_value();
  settings.foreign_rows = settings.foreign_rows || !start.stale_copy.empty();
  const auto columns =
      src ? with_decimal_fit(*src, job, d.live, wh.dialect(), settings) : job.table.columns;
  if (src)
    note_unfit_values(*src, job, settings, wh.dialect());
  auto p = plan_described(columns, d, wh.dialect(), job.target, settings);
  // A full refresh the target may do in place shows the statements the load will run.
  if (p.load == load_kind::full_refresh && !p.swap_sql.empty() && !p.error &&
      wh.empties_in_place(job.target)) {
    settings.empties_in_place = true;
    p = plan_described(columns, d, wh.dialect(), job.target, settings);
  }
  name_outgrowing_value(src, job, p);
  const auto said = run_warnings_of(job, start, p);
  p.warnings.insert(p.warnings.begin(), said.begin(), said.end());
  if (!start.cursor_retyped.empty())
    p.warnings.insert(p.warnings.begin(), start.cursor_retyped);
  if (start.recovered)
    p.warnings.insert(p.warnings.begin(),
                      recovered_warning(*start.recovered, job.settings.cursor_column));
  return p;
}

namespace {

/// A target's refusal as the run reports it (FLT-R001): which target, the engine's reason
/// with the statement it refused cut short, and what to do about it.
std::string target_failure(const table_job& job, std::string reason) {
  if (job.cancel && job.cancel->load(std::memory_order_relaxed))
    return reason;  // stopped by the user: nothing to fix
  if (const auto in = reason.find(" (in: "); in != std::string::npos && reason.size() - in > 240)
    reason = reason.substr(0, in + 200) + " ...)";
  while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' '))
    reason.pop_back();
  if (reason.starts_with("ERROR:"))
    reason.erase(0, std::min(reason.find_first_not_of(' ', 6), reason.size()));
  // One line, as a source's failure reads: libpq breaks its messages with a newline and a
  // tab ("server closed the connection unexpectedly\n\tThis probably means ...").
  // (A newline not followed by a tab may be a name's own, and stays.)
  for (auto nl = reason.find("\n\t"); nl != std::string::npos; nl = reason.find("\n\t", nl)) {
    auto end = nl + 1;
    while (end < reason.size() && (reason[end] == '\t' || reason[end] == ' '))
      ++end;
    const bool after_stop = nl > 0 && (reason[nl - 1] == '.' || reason[nl - 1] == ';');
    reason.replace(nl, end - nl, after_stop ? " " : "; ");
  }
  // The table the load writes is the user's, whatever name its staging copy goes by
  // ("d"."h__flotilla_staging" is "d"."h" to the user), where the reason names it first.
  if (const auto staged = reason.find("__flotilla_staging\":");
      staged != std::string::npos && staged < 300)
    reason.erase(staged, std::string_view("__flotilla_staging").size());
  std::string lower = reason;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto has = [&](std::string_view w) { return lower.find(w) != std::string::npos; };
  // A run confirmed with --allow-type-change-rebuild: its retry needs the flag again.
  const std::string then = job.settings.rebuild_confirmed
                               ? "then run `flotilla retry --allow-type-change-rebuild`"
                               : "then run `flotilla retry`";
  std::string fix;
  if (has("the table's commit token changed")) {
    // Says what happened and what the next run does; the statement it failed in (the
    // guarded token's) tells the user nothing.
    if (const auto in = reason.find(" (in: "); in != std::string::npos)
      reason.erase(in);
  }
  else if (has("columns = {") || has("declare the column")) {
    // The engine's message already says what to change in flotilla.toml, or that the
    // value may be fixed at the source: a retry would load the value as staged.
    if (job.gate)
      fix = "a value fixed at the source is read again by `flotilla run`; `flotilla retry` "
            "loads the rows this run read and staged, as they were";
  }
  else if (has("permission denied for database"))
    // CREATE SCHEMA of a schema that is missing: the target's, or the bookkeeping one.
    fix = fmt::format("grant the role Flotilla connects as CREATE on the target's database, "
                      "so it can create the schema {0}, or create that schema and grant the "
                      "role USAGE and CREATE on it, {1}",
                      has("\"_flotilla\"") ? std::string("_flotilla (where each load records "
                                                          "what it committed)")
                      : job.target.schema.empty() ? std::string("it loads into")
                                                  : job.target.schema,
                      then);
  else if ((has("permission denied") || has("insufficient privilege")) &&
           (has("for schema _flotilla") || has("for table _flotilla_commits")))
    // The bookkeeping table where each load's commit token goes with its rows.
    fix = fmt::format("grant the role Flotilla connects as USAGE on schema _flotilla and "
                      "SELECT, INSERT, UPDATE and DELETE on _flotilla._flotilla_commits (where "
                      "each load records what it committed, beside the rows), {}",
                      then);
  else if ((has("permission denied") || has("operation not permitted")) &&
           (has("cannot open file") || has("could not open") || has("failed to open") ||
            has(".wal\"")))
    // A file of an embedded database (DuckDB writes a .wal beside its file): no role, the
    // operating system's permissions.
    fix = fmt::format("make the target's database file and its directory writable by the user "
                      "Flotilla runs as (the engine writes a file beside the database, such as "
                      "DuckDB's .wal, while it commits), {}",
                      then);
  else if (has("disk i/o error") || has("database or disk is full") || has("file too large"))
    // SQLite says no more than this: the file's write failed.
    fix = fmt::format("the target's database file could not be written (a full disk, a file "
                      "size limit such as `ulimit -f`, or a failing device): free space or "
                      "lift the limit, {}",
                      then);
  else if (has("permission denied") || has("must be owner") || has("insufficient privilege"))
    fix = fmt::format("grant the role Flotilla connects as what the load needs on {} (INSERT, "
                      "UPDATE, DELETE and SELECT on the table; USAGE and CREATE on its "
                      "schema), {}",
                      job.target.schema.empty() ? job.target.name
                                                : job.target.schema + "." + job.target.name,
                      then);
  else if (has("duplicate key") || has("unique constraint failed") || has("is duplicated"))
    fix = fmt::format("the rows read repeat a key that the target table's primary key or a "
                      "unique index on it holds once. The primary key is the source's, which "
                      "the rows read need not keep unique (a parent of inheritance children "
                      "reads their rows too): set unique_key to columns unique in the rows "
                      "read (a full refresh then keeps the last row of each key) or correct "
                      "the rows at the source, then run `flotilla run`; a unique index made on "
                      "the target: drop or relax it, {}",
                      then);
  else if (has("foreign key") && (has("delete from") || has("drop table")) &&
           (has("is still referenced") || has("violates foreign key") ||
            has("depends on") || has("constraint failed")))
    // Another table's foreign key refers to this one: a merge deletes the rows whose key
    // arrives again and inserts them anew, a full refresh empties or replaces the table.
    fix = fmt::format("a foreign key of another table refers to {}: Flotilla's loads delete "
                      "and insert its rows again (a merge, the rows whose key arrives again; a "
                      "full refresh, all of them), which the key refuses at once. Make the "
                      "foreign key DEFERRABLE INITIALLY DEFERRED (checked at the load's "
                      "commit, when the rows are back), or drop it, {}",
                      job.target.schema.empty() ? job.target.name
                                                : job.target.schema + "." + job.target.name,
                      then);
  else if (has("violates") || has("constraint failed") || has("constraint error") ||
           has("constraint violation"))
    fix = fmt::format("a constraint on the target table refuses rows the source holds: drop or "
                      "relax it on the target, {}; or correct the rows at the source, then run "
                      "`flotilla run`{}",
                      then, job.gate ? " (a retry loads the rows this run read and staged)" : "");
  else if (has("tables can have at most") || has("too many columns")) {
    fix = "the target's tables hold fewer columns than the source table has (PostgreSQL "
          "1,600, SQLite 2,000 by default): load only the columns needed (contract = "
          "\"enforced\" with them declared in the table's section of flotilla.toml), or load "
          "the table into a target that holds it (DuckDB), then run `flotilla run`";
  } else if (const bool out_of_range =
                 (has("out of range") || has("field value out of range")) &&
                 (has("date") || has("timestamp") || has("time zone"));
             out_of_range || has("unsupported unicode escape") ||
             has("invalid input syntax for type") || has("invalid byte sequence")) {
    // A value the target's column type refuses (PostgreSQL's json refuses \u0000; its
    // date and timestamp hold 4713 BC to 5874897 AD, where DuckDB's range is wider): the
    // row never arrived, so there is nothing to correct on the target; text keeps it.
    static const std::regex column_re(R"re(column ([^:\s]+):)re");
    std::smatch m;
    const std::string column =
        std::regex_search(reason, m, column_re) ? m[1].str() : std::string("<column>");
    fix = fmt::format("the target column's {} cannot hold a value the source holds: declare "
                      "the column text in the table's section of flotilla.toml (columns = {{ "
                      "{} = \"text\" }}) to load it as written, or correct the value at the "
                      "source, then run `flotilla run`",
                      out_of_range ? "date or timestamp type" : "type", schema::toml_key(column));
  } else if (has("readonly") || has("read-only") || has("read only"))
    fix = fmt::format("make the target writable for the user Flotilla runs as, {}", then);
  else if (has("no space left") || has("disk is full") || has("disk full") || has("out of memory"))
    fix = fmt::format("free space (or memory) where the target is, {}", then);
  else if (has("conflicting lock is held") || has("could not set lock on file"))
    // DuckDB: another process has the file (a run of another project on the same target,
    // a client): one process at a time writes it.
    fix = fmt::format("another process has the DuckDB file open (the process the message "
                      "names: a flotilla run, plan or stream of the same target file, or a "
                      "client), and DuckDB lets one process at a time write a file: let it "
                      "finish, {}",
                      then);
  else if (has("locked") || has("lock timeout") || has("deadlock"))
    fix = fmt::format("another process holds the target table: let it finish, {}", then);
  else if (has("server closed the connection") || has("invalid socket") ||
           has("no connection to the server") || has("connection to server was lost"))
    // Lost mid-load: the answer to its commit may be what was lost, so the load may have
    // committed. The commit token tells, and the next run reads it.
    fix = fmt::format("check that the target's server is reachable, {}. The connection was "
                      "lost before the load's answer came, so the load may have committed "
                      "all the same: nothing is lost either way, as the next run finds out "
                      "(an incremental table goes on from the watermark committed with its "
                      "rows, said as recovered; a full refresh copies the table again)",
                      then);
  else if (has("connect") || has("connection") || has("server closed") || has("timeout"))
    fix = fmt::format("check that the target's server is reachable, {}", then);
  else
    fix = fmt::format("correct the cause on the target (or the value at the source, then run "
                      "`flotilla run`), {}; the run's other tables are not affected{}",
                      then, job.gate ? " (a retry loads the rows this run read and staged)" : "");
  const std::string prefix = fmt::format("target '{}': ", job.target_name);
  return fmt::format("{}{}{}{}", job.target_name.empty() || reason.starts_with(prefix) ? "" : prefix,
                     reason, fix.empty() ? "" : "; ", fix);
}

table_outcome copy_rows(sources::source& src, sinks::warehouse& wh, const table_job& job) {
  table_outcome out;
  try {
    // A shared connection (job.target_lock) is held while the target is described, then
    // from the load's start to its commit; declared first, so a writer rolls back before
    // it is released.
    std::unique_lock<std::mutex> target_held;
    const auto hold_target = [&] {
      if (job.target_lock && !target_held.owns_lock())
        target_held = std::unique_lock(*job.target_lock);
    };
    auto settings = job.settings;
    settings.inferred = job.table.inferred;
    settings.no_rows = job.table.no_rows;
    const bool incremental = !settings.cursor_column.empty();
    hold_target();
    const incremental_start start = resume_from(wh, job);
    std::optional<std::string> watermark = start.watermark;
    const std::string& cursor_retyped = start.cursor_retyped;
    out.cursor_family = start.cursor_family;
    if (incremental)
      settings.has_watermark = watermark.has_value();
    settings.foreign_rows = settings.foreign_rows || !start.stale_copy.empty();
    auto d = describe_target(wh, job);
    if (target_held.owns_lock())
      target_held.unlock();
    // A retry plans against the staged data's columns: they are what will load.
    std::optional<schema::table_schema> staged_cols;
    if (job.reuse) {
      verify_staged(job.reuse->path);  // damaged: fails before its DDL touches the target
      staged_cols = staged_columns(job.reuse->path);
    }
    const auto columns =
        staged_cols ? *staged_cols : with_decimal_fit(src, job, d.live, wh.dialect(), settings);
    if (!staged_cols)
      note_unfit_values(src, job, settings, wh.dialect());
    out.plan = plan_described(columns, d, wh.dialect(), job.target, settings);
    if (!staged_cols)
      name_outgrowing_value(&src, job, *out.plan);
    const auto said = run_warnings_of(job, start, *out.plan);
    out.plan->warnings.insert(out.plan->warnings.begin(), said.begin(), said.end());
    if (!cursor_retyped.empty())
      out.plan->warnings.insert(out.plan->warnings.begin(), cursor_retyped);
    if (start.recovered)
      out.recovered = *start.recovered;  // said by copy_table, once the table copied
    const table_plan& plan = *out.plan;
    // Stopped by the source-drift gate before anything touched the target: what its load
    // would have done (the plan's own warnings) did not happen and is not said; the run's
    // own warnings stay.
    const std::size_t run_warnings = said.size() + (cursor_retyped.empty() ? 0 : 1);
    const auto stopped_by_gate = [&](const auto& verdict) {
      out.status = table_status::failed;
      out.error_code = verdict.error_code;
      out.error = verdict.error;
      if (out.plan->warnings.size() > run_warnings)
        out.plan->warnings.resize(run_warnings);
    };
    if (plan.error) {
      // Decided before anything touched the target. The drift gate still looks at the
      // source's columns first (seed 004): its warning, or under fail its refusal, is
      // about the same change, and `schema accept` needs what it observed.
      if (job.gate) {
        // The source's columns as the read takes them, as the baseline has them: a pinned
        // column in the type the plan worked out for it before refusing (SQLite and files
        // read it as declared), not the source's own.
        const schema::table_schema observed =
            staged_cols ? *staged_cols : gate_observed(job, job.table.columns, plan.read_columns);
        auto verdict = job.gate(observed, job.reuse.has_value(),
                                fmt::format("{}: {}", plan.error->code, plan.error->reason),
                                job.reuse ? valueless_probe{} : valueless_probe_of(&src, job));
        out.gate_detail = std::move(verdict.detail);
        if (!verdict.proceed) {
          stopped_by_gate(verdict);
          return out;
        }
      }
      out.status = table_status::failed;
      out.error_code = plan.error->code;
      // Named as flotilla.toml and `schema accept` name it: in a fleet every client may have
      // a table of that name.
      out.error = fmt::format("{}{}: {}", job.source_name.empty() ? "" : job.source_name + ".",
                              job.table.qualified(), plan.error->reason);
      return out;
    }
    // Staged rows this load cannot take: the same copy, reading the source, says why.
    const auto read_source_again = [&](const char* why) {
      table_job fresh = job;
      fresh.reuse.reset();
      fresh.warnings.push_back(fmt::format("{}: it is read from the source again", why));
      return copy_rows(src, wh, fresh);
    };
    // Staged rows hold the columns their read took: a read that now takes others (a
    // contract declared since, a column left out) cannot load them.
    if (job.reuse && staged_cols) {
      bool same = staged_cols->columns.size() == plan.read_columns.columns.size();
      for (std::size_t i = 0; same && i < staged_cols->columns.size(); ++i)
        same = staged_cols->columns[i].name == plan.read_columns.columns[i].name;
      if (!same)
        return read_source_again(
            "its staged rows hold other columns than flotilla.toml's settings now read (a "
            "contract or declared columns changed since)");
    }
    // Staged rows read past a watermark this run does not start from (it reads every row:
    // the source points elsewhere now, the target file went, the table was created anew):
    // loaded, they would be all the table keeps.
    const bool staged_increment = job.reuse && job.reuse->increment.value_or(true);
    if (staged_increment && incremental && !watermark)
      return read_source_again(
          "its staged rows are only those the failed run read past the watermark, and this "
          "run reads every row, as a first run does");
    if (plan.reset_watermark || plan.load == load_kind::full_refresh) {
      // Staged rows read past the watermark are an increment: loaded as every row of a
      // table created anew (its key changed), they would be all it keeps.
      // (Staged rows the failed run read in full, its plan copying the table anew too,
      // are every row: they load as they are.)
      if (staged_increment && incremental && watermark)
        return read_source_again(
            "its staged rows are only those past the watermark, and the table is now copied "
            "in full (created anew or refreshed)");
      watermark.reset();
    }

    // A cursor value no later value can pass (NaN, +infinity) is never the watermark: it
    // would hide every row added after it. A merge reads such rows again each run (as it
    // does the rows at the watermark) and keeps one of each; an append would add them
    // again each run, so it fails, loading nothing. One kept by an earlier version is
    // dropped the same way.
    const auto* cursor_col = incremental ? job.table.columns.resolve(settings.cursor_column) : nullptr;
    const auto unbounded_rows = [&](std::uint64_t rows, const std::string& value) {
      if (!plan.unique_key.empty()) {  // merged on it, the first load's rows too
        out.plan->warnings.push_back(fmt::format(
            "cursor column '{0}' holds NaN or +infinity, values no later one can pass, in {2} "
            "row(s) (the first found: {1}): the watermark is never such a value (it stays at "
            "the largest finite one, if any), so these rows are read and merged again each "
            "run; give them a finite cursor value at the source to stop it",
            settings.cursor_column, value, rows));
        return;
      }
      throw sources::source_error(fmt::format(
          "cursor column '{0}' holds NaN or +infinity, values no later one can pass, in {2} "
          "row(s) (the first found: {1}): as the "
          "watermark it would hide every row added after it, and read again each run those "
          "rows would be appended again, so nothing was loaded; declare the table's "
          "unique_key (a merge reads such rows again each run and keeps one of each), give "
          "them a finite cursor value at the source, or use another cursor_column",
          settings.cursor_column, value, rows));
    };
    if (watermark && cursor_col && sources::unbounded_cursor(*watermark, cursor_col->type)) {
      if (plan.unique_key.empty())
        unbounded_rows(1, *watermark);  // else the read says it, of the rows it finds
      watermark.reset();
    }

    // What to read: the planned columns, past the watermark on an incremental table.
    const auto read_request_of = [&] {
      sources::read_request rr;
      rr.table = &job.table;
      rr.columns = plan.read_columns;
      if (incremental) {
        rr.cursor_column = settings.cursor_column;
        rr.after = watermark;
        // A merge upserts by key, so the rows at the watermark itself are read again:
        // a row committed after the last run with the same cursor value (a timestamp of
        // the same second) is not lost. Not those with a NULL in the key, which match
        // nothing and would be inserted again; nor on an append, for the same reason.
        if (plan.load == load_kind::merge)
          for (const auto& k : plan.unique_key)
            if (const auto* c = plan.read_columns.find(k, wh.dialect().names()))
              rr.inclusive_key.push_back(c->name);
      }
      rr.batch_rows = job.batch_rows;
      return rr;
    };

    // Staged path (seed 004): land the rows locally, let the drift gate look at them,
    // and only then touch the target.
    std::optional<std::filesystem::path> load_from;
    std::optional<std::string> staged_watermark;
    // This run's staged data, kept for `flotilla retry` if the target then fails.
    std::optional<staged_output> kept;
    if (job.reuse) {
      load_from = job.reuse->path;
      staged_watermark = job.reuse->watermark;
      out.reused_staged = true;
      if (job.gate) {
        auto verdict = job.gate(*staged_cols, true, {}, {});
        out.gate_detail = std::move(verdict.detail);
        if (!verdict.proceed) {
          stopped_by_gate(verdict);
          out.staged = staged_output{job.reuse->path, 0, job.reuse->watermark, *staged_cols, {},
                                     job.reuse->increment.value_or(true)};
          return out;
        }
      }
    } else if (job.gate) {
      staged_writer staged(job.staging_path, plan.read_columns);
      sources::read_request rr = read_request_of();
      auto rres = src.read(rr, [&](schema::row_batch&& b) {
        staged.write(b);
        return !(job.cancel && job.cancel->load(std::memory_order_relaxed));
      });
      if (job.cancel && job.cancel->load(std::memory_order_relaxed))
        throw std::runtime_error("stopped by the user before commit; the target is unchanged");
      staged.finish();
      if (incremental && rres.unbounded_cursor_rows > 0)
        unbounded_rows(rres.unbounded_cursor_rows, *rres.unbounded_cursor);
      staged_watermark = incremental && rres.max_cursor ? rres.max_cursor : watermark;
      load_from = staged.path();
      const auto observed = gate_observed(job, plan.observed_columns(), plan.read_columns);
      kept = staged_output{staged.path().string(), staged.rows(), staged_watermark,
                           plan.read_columns, observed, incremental && watermark.has_value()};
      auto verdict = job.gate(observed, false, {}, valueless_probe_of(&src, job));
      out.gate_detail = std::move(verdict.detail);
      if (!verdict.proceed) {
        stopped_by_gate(verdict);
        out.staged = kept;
        return out;
      }
    }

    // The load itself: the plan's DDL, then the rows in one transaction.
    const std::vector<std::size_t> coerced = columns_to_coerce(plan.read_columns,
                                                               plan.load_columns);
    std::unique_ptr<sinks::table_writer> writer;
    std::optional<batch_loader> loader;
    // Rows merged on a unique_key the source may repeat into a table this load fills
    // anew: one row per key stays (docs/decisions.md), and the run says how many merged.
    bool may_merge_repeats = false;
    const auto note_merged_repeats = [&] {
      if (!may_merge_repeats || out.rows == 0)
        return;
      try {
        hold_target();
        const auto got = wh.query("SELECT count(*) FROM " + wh.dialect().qualified(job.target));
        if (got.empty() || got[0].empty() || !got[0][0])
          return;
        const std::uint64_t kept_rows = std::stoull(*got[0][0]);
        if (kept_rows < out.rows)
          out.plan->warnings.push_back(fmt::format(
              "{} of the {} rows read repeated a unique_key ({}) of a row read after them and "
              "were merged into it: the table holds {} row{}, one per key (the last one read)",
              out.rows - kept_rows, out.rows, fmt::join(plan.unique_key, ", "), kept_rows,
              kept_rows == 1 ? "" : "s"));
      } catch (const std::exception&) {
        // Only a report: the load has committed.
      }
    };
    const auto start_load = [&] {
      hold_target();
      // Only a table that loads makes its schema: one refused by its plan leaves none.
      ensure_schema_once(wh, job);
      if (!plan.ddl.empty()) {
        // Said where the table stays the same object; a full refresh that swaps a
        // staging table in makes it anew, without them (docs/sinks.md).
        if (const auto kept = execute_ddl(wh, job.target, plan);
            !kept.empty() && plan.swap_sql.empty())
          out.plan->warnings.push_back(fmt::format(
              "the {} of {} kept {} made by hand on it: {} (made again after the change)",
              plan.shape_action == "rebuild" ? "rebuild" : "type change",
              wh.dialect().qualified(job.target),
              std::any_of(kept.begin(), kept.end(),
                          [](const std::string& k) { return k.starts_with("trigger "); })
                  ? "what was"
                  : kept.size() == 1 ? "the index" : "the indexes",
              fmt::join(kept, ", ")));
        out.ddl_applied = true;
        if (job.after_ddl)
          (*job.after_ddl)(job, plan);
      }
      sinks::load_request req;
      req.target = job.target;
      req.columns = plan.load_columns;
      req.mode = mode_of(plan.load);
      req.unique_key = plan.unique_key;
      // A full refresh with a unique_key: every row read replaces the table, one per key
      // (the last one read), as an incremental table's merge keeps them.
      // An incremental table's full refresh (recreated for a new key, say) likewise when its
      // unique_key is not the source's own key.
      if (plan.load == load_kind::full_refresh && !plan.unique_key.empty() &&
          (!incremental || plan.key_may_repeat)) {
        req.mode = sinks::load_mode::merge;
        req.replace_rows = true;
        // Copied anew (a drop_and_recreate): the new table, made in the load's transaction.
        if (plan.shape_action == "recreate")
          req.recreate_as = plan.refresh_columns;
      }
      // The source's own key never repeats: nothing to count then.
      const auto source_key_is_unique_key = [&] {
        std::vector<std::string> source_key;
        for (const auto& c : job.table.columns.columns)
          if (c.key)
            source_key.push_back(c.name);
        return source_key == plan.unique_key;
      };
      may_merge_repeats = req.mode == sinks::load_mode::merge && (req.replace_rows || !d.live) &&
                          (plan.key_may_repeat || !source_key_is_unique_key());
      if (req.mode == sinks::load_mode::merge && d.live)
        for (const auto& c : d.live->columns)
          if (plan.load_columns.find(c.name, wh.dialect().names()) == nullptr)
            req.keeps_other_columns = true;
      // Every row of the source read into a live table (no watermark): its rows with a NULL
      // in the key match none arriving, and would be there twice after the merge.
      req.replaces_null_keys = req.mode == sinks::load_mode::merge && !req.replace_rows &&
                               incremental && !watermark && d.live.has_value();
      if (incremental) {
        req.commit_token = watermark ? token_of(settings.cursor_column, *watermark, job, 0) : "";
        // The token this run read, which its commit expects to find: a killed run's server
        // session may still commit after this run began (docs/state.md).
        if (start.token_read) {
          req.guard_token = true;
          req.expected_token = *start.token_read;
        }
      }
      else if (job.clear_token)
        req.commit_token = "";
      // A live table the load replaces (a swap, the table made again): what was made by
      // hand on it is made again after the rows, in the load's transaction, where the
      // target keeps it (an object that cannot be made again fails the load, named, and
      // leaves the table as it was). Asked only where the plan replaces the table.
      if (d.live && wh.keeps_hand_made_on_replace() && plan.load == load_kind::full_refresh &&
          (!plan.swap_sql.empty() || req.recreate_as ||
           std::find(plan.staging_sql.begin(), plan.staging_sql.end(),
                     wh.dialect().drop_table(job.target)) != plan.staging_sql.end()))
        for (auto& o : wh.hand_made_indexes(job.target)) {
          req.hand_made_names.push_back(std::move(o.name));
          req.hand_made_sql.push_back(std::move(o.create_sql));
        }
      // DuckDB's swap makes the table anew without them (as dbt's table materialization
      // does): said, naming them, rather than dropped silently.
      else if (d.live && plan.load == load_kind::full_refresh && !plan.swap_sql.empty())
        if (const auto gone = wh.hand_made_indexes(job.target); !gone.empty()) {
          std::string names;
          for (const auto& o : gone)
            names += (names.empty() ? "" : ", ") + o.name;
          out.plan->warnings.push_back(fmt::format(
              "the full refresh makes {} anew from a staging table, without the indexes made "
              "by hand on it ({}): create them again after the run (DuckDB's full refresh "
              "does not keep them), or give the table a cursor_column, whose loads keep the "
              "table",
              wh.dialect().qualified(job.target), names));
        }
      writer = wh.begin_load(req);
      loader.emplace(*writer, job, plan, coerced);
    };
    // Said once the load committed: what it made again on the table it replaced, and
    // the views a change of the table's columns left unreadable, made again (DuckDB).
    const auto note_made_again = [&] {
      if (const auto names = writer->made_again(); !names.empty())
        out.plan->warnings.push_back(fmt::format(
            "the full refresh replaced {} and made again what was made by hand on it: {}",
            wh.dialect().qualified(job.target), fmt::join(names, ", ")));
      if (plan.ddl.empty() && plan.drift.steps.empty())
        return;
      try {
        if (const auto views = wh.rebind_views(job.target); !views.empty())
          out.plan->warnings.push_back(fmt::format(
              "the change of {} left views that no longer read it ({}): they were made "
              "again from their own statements, and read it as it is now",
              wh.dialect().qualified(job.target), fmt::join(views, ", ")));
      } catch (const std::exception& e) {
        out.plan->warnings.push_back(fmt::format(
            "the views over {} could not be checked after its change: {}",
            wh.dialect().qualified(job.target), e.what()));
      }
    };

    if (load_from) {
      // Reused staged rows whose watermark the target already holds were committed by a
      // run that died before its state commit: loading them again would append them twice.
      // (Its DDL ran before those rows, so none is left; DDL still to run means the staged
      // read found no new rows, and the change it was stopped for is made now.)
      if (job.reuse && incremental && staged_watermark && watermark == staged_watermark &&
          plan.ddl.empty()) {
        out.status = table_status::copied;
        out.new_watermark = staged_watermark;
        return out;
      }
      // Load the staged rows; nothing is read from the source again. Should the target
      // fail, seed 004: the staged data is kept, as for a refused table, and `retry`
      // loads it without the source.
      try {
        start_load();
        read_staged(*load_from, job.batch_rows, [&](schema::row_batch&& batch) {
          loader->write(batch);
          return true;
        });
        if (incremental && staged_watermark)
          writer->set_commit_token(
              token_of(settings.cursor_column, *staged_watermark, job, writer->rows()));
        writer->commit();
        note_made_again();
      } catch (...) {
        if (kept)
          out.staged = std::move(kept);
        throw;
      }
      out.rows = writer->rows();
      out.status = table_status::copied;
      note_merged_repeats();
      if (incremental)
        out.new_watermark = staged_watermark;
      // This run's own staged file is spent; a reused one is removed by the caller
      // after the state commit (its StagedEntry points at it until then).
      if (!job.reuse) {
        std::error_code ec;
        std::filesystem::remove(*load_from, ec);
        std::filesystem::remove(load_from->parent_path(), ec);  // the run's directory, if empty
      }
      return out;
    }

    // Room for the rows of the target's longest write besides the usual batches, so the
    // reader keeps reading while the writer is busy with it instead of waiting for room.
    const std::size_t batch_rows = job.batch_rows > 0 ? job.batch_rows : 8192;  // as sources read
    change_queue queue(job.queue_batches + (wh.write_burst_rows() + batch_rows - 1) / batch_rows);
    // This thread reads. A table whose rows fit in one batch is written here after its
    // read: most tables of a large fleet are that small, and a thread of their own cost
    // more than their rows (a thread per table made a 10,000-table fleet spend a third
    // of its time in clone, stack faults and hand-offs). From a table's second batch on,
    // a writer thread takes the batches from the change queue, so reading and writing
    // overlap where that pays. The load starts before the read, except where workers
    // share the target's connection: there it starts once the read has passed its first
    // batch, so one worker reads its table while another holds the connection.
    std::optional<schema::row_batch> first;
    std::thread write_thread;
    std::exception_ptr write_error;   // the writer thread's
    std::exception_ptr start_error;   // the load's start, on this thread during the read
    const auto write_queued = [&] {
      try {
        while (auto batch = queue.pop()) {
          loader->write(*batch);
          queue.release(std::move(*batch));
        }
      } catch (...) {
        write_error = std::current_exception();
        queue.fail("the target write failed");
      }
    };
    const auto hand_over = [&](schema::row_batch&& b) {
      if (!write_thread.joinable()) {
        if (!first) {
          first = std::move(b);
          return true;
        }
        if (!writer) {
          try {
            start_load();
          } catch (...) {
            start_error = std::current_exception();
            return false;
          }
        }
        write_thread = std::thread(write_queued);
        if (!queue.push(std::move(*first)))
          return false;
        first.reset();
      }
      return queue.push(std::move(b));
    };
    if (!job.target_lock)
      start_load();
    sources::read_result read_result;
    try {
      sources::read_request rr = read_request_of();
      rr.spent_batch = [&queue] { return queue.reuse(); };
      // PostgreSQL into PostgreSQL with nothing to convert: the rows stay COPY text, or
      // binary COPY tuples where both sides have the same types.
      // Not with a unique_key: such a full refresh loads through a merge (one row per key).
      rr.copy_text = !incremental && plan.unique_key.empty() &&
                     wh.dialect().name() == "postgres" && passes_through(plan, coerced);
      rr.copy_binary = rr.copy_text && passes_through_binary(plan, coerced);
      read_result = src.read(rr, hand_over);
    } catch (const std::exception& e) {
      queue.fail(e.what());
      if (write_thread.joinable())
        write_thread.join();
      if (start_error)
        std::rethrow_exception(start_error);
      throw sources::source_error(e.what());
    }
    if (start_error)
      std::rethrow_exception(start_error);
    if (write_thread.joinable()) {
      queue.close();
      write_thread.join();
      if (write_error)
        std::rethrow_exception(write_error);
    } else {
      if (!writer)
        start_load();
      if (first)
        loader->write(*first);
    }

    if (incremental && read_result.unbounded_cursor_rows > 0)
      unbounded_rows(read_result.unbounded_cursor_rows, *read_result.unbounded_cursor);
    std::optional<std::string> max_cursor = watermark;
    if (incremental && read_result.max_cursor)
      max_cursor = read_result.max_cursor;

    if (incremental && max_cursor)
      writer->set_commit_token(token_of(settings.cursor_column, *max_cursor, job, writer->rows()));
    writer->commit();
    note_made_again();
    out.rows = writer->rows();
    out.status = table_status::copied;
    note_merged_repeats();
    if (incremental)
      out.new_watermark = max_cursor;
  } catch (const staging_error& e) {
    out.status = table_status::failed;
    out.error_code = "FLT-R004";
    out.error = e.what();
  } catch (const sources::source_error& e) {
    out.status = table_status::failed;
    out.error_code = "FLT-R002";
    out.error = e.what();
  } catch (const std::exception& e) {
    out.status = table_status::failed;
    out.error_code = "FLT-R001";
    out.error = target_failure(job, e.what());
  }
  // Stopped by Ctrl-C or SIGTERM while it ran, and rolled back: no error of the target's
  // or the source's, which a script tells apart by the code.
  if (out.status == table_status::failed && job.cancel && job.cancel->load(std::memory_order_relaxed))
    out.error_code = "FLT-R008";
  return out;
}

}  // namespace

table_outcome copy_table(sources::source& src, sinks::warehouse& wh, const table_job& job) {
  const auto started = std::chrono::steady_clock::now();
  table_outcome out = copy_rows(src, wh, job);
  // Two loads of one run creating names at the same moment on PostgreSQL (a table
  // "orders_pkey" beside "orders", whose key index PostgreSQL names "orders_pkey"): the
  // one that commits second finds the name taken by a catalog entry it could not see
  // when it chose it, and rolled back. Once the other has committed, the load sees the
  // name taken and gives way (see dialect::free_table_name); so it runs once more.
  if (out.status == table_status::failed && out.error &&
      (out.error->find("pg_class_relname_nsp_index") != std::string::npos ||
       out.error->find("pg_type_typname_nsp_index") != std::string::npos) &&
      !(job.cancel && job.cancel->load(std::memory_order_relaxed)))
    out = copy_rows(src, wh, job);
  // Reported once, by the run that records the table after them: a table that fails
  // here leaves state as it was, and the next run finds the same commit.
  if (out.recovered && out.status == table_status::copied && out.plan)
    out.plan->warnings.insert(out.plan->warnings.begin(),
                              recovered_warning(*out.recovered, job.settings.cursor_column));
  else
    out.recovered.reset();
  out.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
  out.finished_at_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  if (out.plan) {
    table_plan& p = *out.plan;
    if (!job.settings.cursor_column.empty() && out.status == table_status::copied) {
      out.loaded_columns.reserve(p.load_columns.columns.size());
      out.loaded_column_types.reserve(p.load_columns.columns.size());
      for (const auto& c : p.load_columns.columns) {
        out.loaded_columns.push_back(c.name);
        out.loaded_column_types.push_back(schema::to_string(c.type));
      }
    }
    p.ddl = {};
    p.staging_sql = {};
    p.swap_sql = {};
    p.read_columns = {};
    p.load_columns = {};
  }
  return out;
}

}  // namespace flotilla::engine
