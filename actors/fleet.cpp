// CAF 0.17 glue for a fleet run. Topology:
//   fleet supervisor -> pipeline (per source) -> table actor (per table)
//   catalog dispatcher -> detached catalog readers (blocking: open source, read catalog,
//                         select tables, read local state)
//   target dispatcher (per target) -> detached workers (blocking: describe, DDL, copy,
//                         commit, local state)
// Table actors and pipelines never block; results travel back as plain messages so no
// actor awaits thousands of pending replies (CAF 0.17 keeps those in a linear map).
#include "actors/fleet.hpp"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <caf/all.hpp>
#include <fmt/format.h>

#include "engine/heap.hpp"

namespace flotilla::actors {
namespace {

// ---- messages -------------------------------------------------------------------
struct catalog_task {
  std::shared_ptr<const pipeline_spec> pipeline;
  caf::actor reply_to;
};
struct catalog_reply {
  std::shared_ptr<std::vector<table_spec>> tables;
  std::shared_ptr<sources::catalog> catalog;
  std::string error;
};
struct copy_task {
  std::shared_ptr<const table_spec> table;
  caf::actor reply_to;
};
struct table_done {
  std::shared_ptr<table_report> report;
  std::size_t slot = 0;  ///< the table's place in its source's catalog order
};
struct pipeline_done {
  std::size_t index;
  std::shared_ptr<pipeline_report> report;
};
/// A claim group member's tables are selected (null: its catalog failed).
struct group_ready {
  std::size_t group;
  std::size_t index;
  std::shared_ptr<std::vector<table_spec>> tables;
  caf::actor pipeline;
};

}  // namespace
}  // namespace flotilla::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::actors::catalog_task)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::actors::catalog_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::actors::copy_task)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::actors::table_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::actors::pipeline_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(flotilla::actors::group_ready)

namespace flotilla::actors {
namespace {

/// `plan`: the source-drift gate (seed 004) asked of the columns the run would land, so
/// the plan says what the run would do: under fail the table fails as the run would
/// (FLT-D001), under warn its verdict is shown. Nothing is staged or recorded.
/// It observes the columns as the run's gate does (engine::gate_observed), and asks `src`
/// (when open) which changed-looking columns hold no value.
void plan_gate(const engine::table_job& job, engine::table_outcome& out, sources::source* src) {
  if (!job.gate || !out.plan)
    return;
  const auto& plan = *out.plan;
  const auto probe = engine::valueless_probe_of(src, job);
  auto verdict =
      plan.error ? job.gate(engine::gate_observed(job, job.table.columns, plan.read_columns), false,
                            fmt::format("{}: {}", plan.error->code, plan.error->reason), probe)
                 : job.gate(engine::gate_observed(job, plan.observed_columns(), plan.read_columns),
                            false, {}, probe);
  out.gate_detail = std::move(verdict.detail);
  if (!verdict.proceed) {
    out.status = engine::table_status::failed;
    out.error_code = verdict.error_code;
    out.error = verdict.error;
  }
}


using idle_atom = caf::atom_constant<caf::atom("idle")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using go_atom = caf::atom_constant<caf::atom("go")>;

// ---- dispatcher: hands tasks to idle detached workers, queues the rest ----------
template <class Task>
struct dispatcher_state {
  std::deque<Task> pending;
  std::vector<caf::actor> idle;
  std::vector<caf::actor> workers;
};

template <class Task>
caf::behavior dispatcher(caf::stateful_actor<dispatcher_state<Task>>* self,
                         std::vector<caf::actor> workers) {
  self->state.workers = workers;
  self->state.idle = workers;
  for (auto& w : workers)
    self->link_to(w);
  return {
      [=](Task& task) {
        auto& st = self->state;
        if (!st.idle.empty()) {
          auto w = st.idle.back();
          st.idle.pop_back();
          self->send(w, std::move(task));
        } else {
          st.pending.push_back(std::move(task));
        }
      },
      [=](idle_atom, caf::actor w) {
        auto& st = self->state;
        if (!st.pending.empty()) {
          self->send(w, std::move(st.pending.front()));
          st.pending.pop_front();
        } else {
          st.idle.push_back(w);
        }
      },
  };
}

/// Stands in for a source that cannot be opened while a retry loads a table's staged
/// data, which never reads the source.
class unavailable_source final : public sources::source {
 public:
  unavailable_source(std::string adapter, std::string reason)
      : adapter_(std::move(adapter)), reason_(std::move(reason)) {}
  [[nodiscard]] std::string_view adapter() const override { return adapter_; }
  [[nodiscard]] sources::catalog read_catalog() override { throw sources::source_error(reason_); }
  sources::read_result read(const sources::read_request&, const sources::batch_consumer&) override {
    throw sources::source_error(reason_);
  }

 private:
  std::string adapter_;
  std::string reason_;
};

// ---- detached I/O actors ----------------------------------------------------------
caf::behavior catalog_reader(caf::event_based_actor* self, bool trace) {
  return {
      [=](catalog_task& task) {
        engine::prepare_thread_heap();
        // The task came from the dispatcher: tell it when this reader is idle again.
        auto dispatcher_handle = caf::actor_cast<caf::actor>(self->current_sender());
        catalog_reply reply;
        try {
          const pipeline_spec& p = *task.pipeline;
          try {
            auto src = sources::open_source(p.source);
            if (p.kept_catalog) {
              // An unchanged whole-source marker: the catalog read at it still holds.
              if (auto marker = src->file_marker()) {
                if (auto kept = p.kept_catalog(*marker, src->catalog_version()))
                  reply.catalog = std::make_shared<sources::catalog>(std::move(*kept));
              } else if (src->reuses_known_tables()) {
                // A file per table: each unchanged file's table is taken from it.
                if (auto known = p.kept_catalog({}, src->catalog_version()))
                  src->known_tables(std::move(*known));
              }
            }
            if (trace && (reply.catalog || !src->reuses_known_tables()))
              fmt::print(stderr, "catalog {}: {}\n", p.source.name,
                         reply.catalog ? "kept (source marker unchanged)" : "read from the source");
            if (!reply.catalog) {
              reply.catalog = std::make_shared<sources::catalog>(src->read_catalog());
              if (trace && src->reuses_known_tables())
                // A table taken from the kept catalog still has its columns packed.
                fmt::print(stderr, "catalog {}: read from the source, {} of {} tables kept (file "
                                   "unchanged)\n",
                           p.source.name,
                           std::count_if(reply.catalog->tables.begin(), reply.catalog->tables.end(),
                                         [](const auto& t) { return !t.packed_columns.empty(); }),
                           reply.catalog->tables.size());
              if (p.keep_catalog && (reply.catalog->file_marker || src->reuses_known_tables()))
                p.keep_catalog(*reply.catalog, src->catalog_version());
            }
          } catch (const std::exception&) {
            // A retry whose tables all have staged data loads them without the source.
            auto staged = p.staged_catalog ? p.staged_catalog() : std::nullopt;
            if (!staged)
              throw;
            if (trace)
              fmt::print(stderr, "catalog {}: from the staged data (source unavailable)\n",
                         p.source.name);
            reply.catalog = std::make_shared<sources::catalog>(std::move(*staged));
          }
          reply.tables = std::make_shared<std::vector<table_spec>>(p.select(*reply.catalog));
        } catch (const std::exception& e) {
          reply.error = e.what();
        }
        self->send(task.reply_to, std::move(reply));
        self->send(dispatcher_handle, idle_atom::value, caf::actor_cast<caf::actor>(self));
      },
  };
}

/// The connections of one target in this run. Until one has opened, a few failed opens
/// in a row stop the attempts: the remaining tables fail at once with the first reason
/// (a database that does not exist, refused credentials, a server that is down), where
/// each of 10,000 tables would otherwise wait for a connection attempt of its own. Once
/// a connection has opened, a failure is the table's own and the next table reconnects.
class target_connections {
 public:
  static constexpr std::size_t attempts = 3;

  /// The reason to fail a table without trying, or empty: try.
  [[nodiscard]] std::string given_up() const {
    std::lock_guard lock(mu_);
    if (opened_ || failures_ < attempts)
      return {};
    return fmt::format("{}; not tried for this table: the target's first {} connections failed "
                       "(fix the target and run again)",
                       first_error_, attempts);
  }
  void opened() {
    std::lock_guard lock(mu_);
    opened_ = true;
  }
  void failed(const std::string& reason) {
    std::lock_guard lock(mu_);
    if (failures_++ == 0)
      first_error_ = reason;
  }

  /// Where the target's workers share one connection (target_spec::share_connection):
  /// held around each use of it, and the connection itself, opened by the first worker
  /// that needs it and dropped when a worker finds it broken.
  std::mutex shared_use;
  std::shared_ptr<sinks::warehouse> shared;

 private:
  mutable std::mutex mu_;
  bool opened_ = false;
  std::size_t failures_ = 0;
  std::string first_error_;
};

/// How many sources a target worker keeps open at once. A source holds its connection or
/// file from one table to the next of that source; kept for the whole run, every source a
/// worker once read stayed open: a fleet of 60 PostgreSQL databases held 60 idle
/// connections per worker (and failed on the server's connection limit), 1,100 SQLite
/// files as many file handles (and failed at 1,024). Bounded, the least recently used one
/// is closed: a worker's connections stay at this many, whatever the fleet's size.
constexpr std::size_t open_sources_per_worker = 4;

struct worker_state {
  std::shared_ptr<sinks::warehouse> warehouse;  ///< this worker's, or the shared one
  /// Open sources by name, most recently used first (open_sources_per_worker at most).
  std::vector<std::pair<std::string, std::unique_ptr<sources::source>>> sources;

  /// The slot of source `name`, made the most recent; a new one (empty) closes the least
  /// recently used source when the worker holds its limit.
  std::unique_ptr<sources::source>& source_slot(const std::string& name) {
    auto it = std::find_if(sources.begin(), sources.end(),
                           [&](const auto& s) { return s.first == name; });
    if (it == sources.end()) {
      if (sources.size() >= open_sources_per_worker)
        sources.pop_back();
      sources.emplace_back(name, nullptr);
      it = std::prev(sources.end());
    }
    std::rotate(sources.begin(), it, std::next(it));
    return sources.front().second;
  }
  void close_source(const std::string& name) {
    std::erase_if(sources, [&](const auto& s) { return s.first == name; });
  }
};

std::string not_pruned(const table_spec& t);

caf::behavior target_worker(caf::stateful_actor<worker_state>* self, const fleet_spec* spec,
                            std::size_t target_index, engine::target_catalog* target_tables,
                            target_connections* connections) {
  return {
      [=](copy_task& task) {
        engine::prepare_thread_heap();
        auto dispatcher_handle = caf::actor_cast<caf::actor>(self->current_sender());
        auto& st = self->state;
        const table_spec& t = *task.table;
        auto report = std::make_shared<table_report>();
        report->source = t.job.source_name;
        report->table = t.job.table.qualified();
        report->target = t.job.target;
        report->marker = t.job.table.marker;
        report->not_pruned = not_pruned(t);
        try {
          if (spec->cancel && spec->cancel->load()) {
            report->outcome.status = engine::table_status::skipped;
            report->outcome.error = "stopped by the user before this table started";
          } else if (!t.conflict.empty()) {
            report->outcome.status = engine::table_status::failed;
            report->outcome.error_code = "FLT-R006";
            report->outcome.error = t.conflict;
          } else if (!t.job.table.unreadable.empty()) {
            report->outcome.status = engine::table_status::failed;
            report->outcome.error_code = t.job.table.absent ? "FLT-R005" : "FLT-R002";
            report->outcome.error = t.job.table.unreadable;
          } else {
            const auto& target_options = spec->targets[target_index].options;
            auto plan_dialect = dialects::make_dialect(target_options.dialect);
            // A target file that does not exist yet has no tables: plan never creates it.
            std::error_code missing;
            const bool no_file = spec->plan_only && !target_options.path.empty() &&
                                 !std::filesystem::exists(target_options.path, missing);
            if (spec->plan_only && plan_dialect && (!(*plan_dialect)->executable() || no_file)) {
              // Plan-only warehouses: no connection; the plan shows the SQL a first load
              // would run there.
              // A file's declared columns are parsed as declared (as the run plans them),
              // its values checked against them.
              sources::source* file = nullptr;
              if (t.job.table.inferred && !t.job.settings.declared.empty())
                for (const auto& p : spec->pipelines)
                  if (p.source.name == t.job.source_name) {
                    auto& slot = st.source_slot(t.job.source_name);
                    try {
                      if (!slot)
                        slot = sources::open_source(p.source);
                      file = slot.get();
                    } catch (const std::exception&) {
                      // Planned without the check; the run names what fails.
                    }
                  }
              report->outcome.plan =
                  engine::plan_first_load(t.job, **plan_dialect, file);
              if (!no_file)
                report->outcome.plan->warnings.push_back(fmt::format(
                    "dialect {} is plan-only: its live table was not read, so this is the SQL "
                    "of a first load, drift unchecked; run as written, it drops a table of "
                    "this name if one exists there, rows and all, and creates it anew",
                    (*plan_dialect)->name()));
              report->outcome.status = engine::table_status::copied;
              plan_gate(t.job, report->outcome, file);
              self->send(task.reply_to, table_done{report});
              self->send(dispatcher_handle, idle_atom::value, caf::actor_cast<caf::actor>(self));
              return;
            }
            const bool shared = spec->targets[target_index].share_connection;
            std::unique_lock<std::mutex> shared_held;
            if (shared) {
              shared_held = std::unique_lock(connections->shared_use);
              st.warehouse = connections->shared;
            }
            if (!st.warehouse) {
              if (auto reason = connections->given_up(); !reason.empty())
                throw std::runtime_error(reason);
              try {
                st.warehouse = sinks::open_warehouse(target_options);
              } catch (const std::exception& e) {
                connections->failed(e.what());
                throw;
              }
              connections->opened();
              if (shared)
                connections->shared = st.warehouse;
            }
            auto& src = st.source_slot(t.job.source_name);
            std::unique_ptr<sources::source> stand_in;
            const auto open_source = [&] {
              if (src)
                return;
              for (const auto& p : spec->pipelines)
                if (p.source.name == t.job.source_name) {
                  try {
                    src = sources::open_source(p.source);
                  } catch (const std::exception& e) {
                    if (!t.job.reuse)
                      throw;
                    stand_in = std::make_unique<unavailable_source>(p.source.adapter, e.what());
                  }
                }
            };
            if (spec->plan_only) {
              engine::table_job job = t.job;
              job.target_tables = target_tables;
              // An inferred table's file answers what its double columns need as decimals.
              if (t.job.table.inferred)
                open_source();
              report->outcome.plan = engine::plan_against_target(*st.warehouse, job, src.get());
              report->outcome.status = engine::table_status::copied;
              plan_gate(t.job, report->outcome, src.get());
            } else {
              if (shared_held.owns_lock())
                shared_held.unlock();  // the copy holds it where it uses the target
              open_source();
              engine::table_job job = t.job;
              job.target_tables = target_tables;
              job.target_lock = shared ? &connections->shared_use : nullptr;
              job.cancel = spec->cancel;
              if (spec->progress_counters)
                job.rows_progress = &spec->progress_counters->rows;
              report->outcome = engine::copy_table(src ? *src : *stand_in, *st.warehouse, job);
              // PostgreSQL names a new table's array type after the table, cut to 63 bytes:
              // two tables created at once whose names share their first 62 bytes race for
              // it, and the loser's CREATE fails. Once the winner committed, PostgreSQL
              // picks another name: the table is tried once more.
              // PostgreSQL says so either way: a unique violation of the type name, or
              // 'type "_<name>" already exists'.
              const auto lost_type_race = [](const std::string& e) {
                return e.find("pg_type_typname_nsp_index") != std::string::npos ||
                       (e.find("type \"_") != std::string::npos &&
                        e.find("already exists") != std::string::npos);
              };
              if (report->outcome.status == engine::table_status::failed &&
                  report->outcome.error && lost_type_race(*report->outcome.error))
                report->outcome = engine::copy_table(src ? *src : *stand_in, *st.warehouse, job);
              if (report->outcome.status == engine::table_status::copied && spec->on_committed) {
                try {
                  spec->on_committed(t, *report);
                } catch (const std::exception& e) {
                  // The target committed the table; its state did not follow.
                  throw std::runtime_error(fmt::format(
                      "{}; the table's rows ({}) are in its target table, which committed "
                      "them before this: the next run finds them there (an incremental table "
                      "goes on from the watermark the target committed with them, and reports "
                      "them under `recovered`; another is copied again)",
                      e.what(), report->outcome.rows));
                }
              } else if (report->outcome.status == engine::table_status::failed && spec->on_failed)
                spec->on_failed(t, *report);
            }
          }
        } catch (const std::exception& e) {
          // A lost connection: drop it so the next table reconnects.
          if (spec->targets[target_index].share_connection) {
            std::lock_guard lock(connections->shared_use);
            if (connections->shared == st.warehouse)
              connections->shared.reset();
          }
          st.warehouse.reset();
          st.close_source(t.job.source_name);
          report->outcome.status = engine::table_status::failed;
          // Stopped (Ctrl-C, SIGTERM) while it waited for its connection (a DuckDB file
          // another process holds): the stop's code, as for a load rolled back.
          report->outcome.error_code =
              spec->cancel && spec->cancel->load() ? "FLT-R008" : "FLT-R003";
          report->outcome.error = e.what();
        }
        // A table that failed before its source gave a change marker (a file it could not
        // parse) says nothing of why it was not pruned: "no change marker" would be wrong.
        if (report->outcome.status == engine::table_status::failed && !t.job.table.marker &&
            t.not_pruned.empty())
          report->not_pruned.clear();
        self->send(task.reply_to, table_done{report});
        self->send(dispatcher_handle, idle_atom::value, caf::actor_cast<caf::actor>(self));
      },
  };
}

// ---- prune check: an unchanged table is reported at once -----------------------------
bool unchanged(const table_spec& t) {
  // A table that lands where another of this run's tables lands is never pruned: pruned,
  // it would let the other overwrite what it loaded, reported a success.
  return t.prune && t.conflict.empty() && t.job.table.marker && t.last_marker && *t.job.table.marker == *t.last_marker &&
         (t.job.settings.cursor_column.empty() || t.job.watermark);
}

std::string not_pruned(const table_spec& t) {
  if (!t.not_pruned.empty())
    return t.not_pruned;
  if (!t.prune || unchanged(t))
    return {};
  if (!t.conflict.empty())
    return "another table of this run lands on its target table";
  if (!t.job.table.marker)
    return "the source offers no change marker for this table (a view, or an adapter "
           "without one), so it is copied every run";
  if (t.settings_changed)
    return "the table's settings changed since the last copy (its target, declared columns, "
           "cursor, key or policies)";
  if (!t.last_marker)
    return "no earlier copy is recorded";
  if (*t.job.table.marker != *t.last_marker)
    return t.source_is_target_file
               ? "the source changed since the last copy: its file is a target's too, which "
                 "the runs write, and a change to the file is a change to each of its tables, "
                 "so they are copied every run"
               : "the source changed since the last copy";
  if (!t.job.settings.cursor_column.empty() && !t.job.watermark)
    return "an incremental table is pruned only once it has a watermark";
  return {};
}

table_report pruned_report(table_spec& t) {
  table_report report;
  report.source = std::move(t.job.source_name);
  report.table = t.job.table.qualified();
  report.target = std::move(t.job.target);
  report.marker = std::move(t.job.table.marker);
  report.outcome.status = engine::table_status::pruned;
  return report;
}

/// A table an open review holds: reported held, nothing copied (seed 003: none of its
/// changes is applied until the review is decided).
table_report held_report(table_spec& t) {
  table_report report = pruned_report(t);
  report.outcome.status = engine::table_status::held;
  report.outcome.error_code = "FLT-V014";
  report.outcome.error = std::move(t.held);
  return report;
}

/// A table whose kept columns cannot be unpacked (a damaged catalog record): failed,
/// copying nothing; --no-prune reads the source's catalog and replaces the record.
table_report unreadable_columns_report(table_spec& t) {
  table_report report = pruned_report(t);
  report.outcome.status = engine::table_status::failed;
  report.outcome.error_code = "FLT-R003";
  report.outcome.error = fmt::format(
      "the kept catalog of source '{}' holds unreadable columns for table '{}'; nothing was "
      "copied: run again with --no-prune, which reads the source's catalog and replaces the "
      "kept one",
      report.source, report.table);
  return report;
}

// ---- table actor: hands the copy to its target's I/O actors -----------------------
caf::behavior table_actor(caf::event_based_actor* self, std::shared_ptr<const table_spec> t,
                          std::size_t slot, caf::actor target_dispatcher, caf::actor pipeline) {
  return {
      [=](start_atom) {
        self->send(target_dispatcher, copy_task{t, caf::actor_cast<caf::actor>(self)});
      },
      [=](table_done& done) {
        done.slot = slot;
        self->send(pipeline, std::move(done));
        self->quit();
      },
  };
}

// ---- pipeline: one per source ------------------------------------------------------
struct pipeline_state {
  std::shared_ptr<pipeline_report> report;
  std::size_t expected = 0;
  std::size_t reported = 0;
  catalog_reply waiting;  ///< a claim group member's, until its group's clashes are decided
};

caf::behavior pipeline_actor(caf::stateful_actor<pipeline_state>* self, std::size_t index,
                             std::shared_ptr<const pipeline_spec> spec, const fleet_spec* fleet,
                             caf::actor catalogs, std::vector<caf::actor> targets,
                             std::vector<engine::target_catalog*> target_tables,
                             caf::actor supervisor) {
  self->state.report = std::make_shared<pipeline_report>();
  self->state.report->source = spec->source.name;
  auto finish = [=] {
    self->send(supervisor, pipeline_done{index, self->state.report});
    self->quit();
  };
  return {
      [=](start_atom) {
        self->send(catalogs, catalog_task{spec, caf::actor_cast<caf::actor>(self)});
      },
      [=](catalog_reply& reply) {
        if (spec->claim_group == pipeline_spec::no_group) {
          self->send(self, go_atom::value, std::move(reply));
          return;
        }
        auto tables = reply.error.empty() ? reply.tables : nullptr;
        self->state.waiting = std::move(reply);
        self->send(supervisor, group_ready{spec->claim_group, index, std::move(tables),
                                           caf::actor_cast<caf::actor>(self)});
      },
      [=](go_atom) {
        catalog_reply reply = std::move(self->state.waiting);
        self->send(self, go_atom::value, std::move(reply));
      },
      [=](go_atom, catalog_reply& reply) {
        auto& st = self->state;
        if (fleet->progress_counters)
          ++fleet->progress_counters->sources_read;
        if (!reply.error.empty()) {
          st.report->error = reply.error;
          finish();
          return;
        }
        st.expected = reply.tables->size();
        if (fleet->progress_counters)
          fleet->progress_counters->tables_total += st.expected;
        if (st.expected == 0) {
          finish();
          return;
        }
        // Reports keep the catalog's order, whenever each table finishes.
        st.report->tables.resize(st.expected);
        std::vector<std::pair<table_spec*, std::size_t>> to_copy;
        for (std::size_t i = 0; i < reply.tables->size(); ++i) {
          auto& t = (*reply.tables)[i];
          if (!t.held.empty())
            st.report->tables[i] = held_report(t);
          else if (unchanged(t))
            st.report->tables[i] = pruned_report(t);
          else if (t.job.table.unpack_columns())  // a kept catalog's are still packed
            to_copy.emplace_back(&t, i);
          else
            st.report->tables[i] = unreadable_columns_report(t);
        }
        st.reported = st.expected - to_copy.size();
        // Every target table the copies will describe, before the first of them is
        // asked for: each target schema is then read with one query. A pruned table
        // describes nothing.
        for (const auto& [t, slot] : to_copy)
          if (t->target_index < target_tables.size())
            target_tables[t->target_index]->expect(t->job.target);
        if (fleet->progress_counters)
          fleet->progress_counters->tables_done += st.reported;
        if (to_copy.empty()) {
          finish();
          return;
        }
        for (const auto& [copy, slot] : to_copy) {
          auto shared = std::make_shared<const table_spec>(std::move(*copy));
          auto a = self->spawn(table_actor, shared, slot, targets.at(shared->target_index),
                               caf::actor_cast<caf::actor>(self));
          self->send(a, start_atom::value);
        }
      },
      [=](table_done& done) {
        auto& st = self->state;
        st.report->tables[done.slot] = std::move(*done.report);
        if (fleet->progress_counters)
          ++fleet->progress_counters->tables_done;
        if (++st.reported == st.expected)
          finish();
      },
  };
}

/// Scheduler threads build the fleet's specs and reports: their heaps are prepared as
/// the main one is (engine/heap.hpp).
struct heap_thread_hook : caf::thread_hook {
  void init(caf::actor_system&) override {}
  void thread_started() override { engine::prepare_thread_heap(); }
  void thread_terminates() override {}
};

}  // namespace

std::vector<pipeline_report> run_fleet(const fleet_spec& spec) {
  caf::actor_system_config cfg;
  cfg.add_thread_hook<heap_thread_hook>();
  std::size_t threads = spec.scheduler_threads;
  if (threads == 0)
    threads = std::max<unsigned>(2, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<int64_t>(threads));
  // The actors only route work to the detached I/O workers and wait for their results:
  // idle scheduler threads block on a condition variable (sharing) instead of polling
  // with short sleeps (work stealing), which cost a few ms of CPU per table.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  std::vector<pipeline_report> reports(spec.pipelines.size());
  // One read-ahead of target table schemas per target for this run
  // (engine/target_catalog.hpp); declared before the actor system, whose destructor
  // waits for every actor, so it outlives the workers using it.
  std::vector<std::unique_ptr<engine::target_catalog>> target_tables;
  std::vector<engine::target_catalog*> target_table_ptrs;
  std::vector<std::unique_ptr<target_connections>> connections;
  for (std::size_t ti = 0; ti < spec.targets.size(); ++ti) {
    target_tables.push_back(std::make_unique<engine::target_catalog>());
    target_table_ptrs.push_back(target_tables.back().get());
    connections.push_back(std::make_unique<target_connections>());
  }
  {
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};

    std::vector<caf::actor> readers;
    for (std::size_t i = 0; i < std::max<std::size_t>(1, spec.catalog_readers); ++i)
      readers.push_back(sys.spawn<caf::detached>(catalog_reader, spec.trace_catalogs));
    auto catalogs = sys.spawn(dispatcher<catalog_task>, readers);

    std::vector<caf::actor> target_dispatchers;
    for (std::size_t ti = 0; ti < spec.targets.size(); ++ti) {
      std::vector<caf::actor> workers;
      for (std::size_t w = 0; w < std::max<std::size_t>(1, spec.targets[ti].workers); ++w)
        workers.push_back(sys.spawn<caf::detached>(target_worker, &spec, ti,
                                                   target_tables[ti].get(),
                                                   connections[ti].get()));
      target_dispatchers.push_back(sys.spawn(dispatcher<copy_task>, workers));
    }

    caf::actor supervisor = caf::actor_cast<caf::actor>(self);
    for (std::size_t i = 0; i < spec.pipelines.size(); ++i) {
      auto p = std::make_shared<const pipeline_spec>(spec.pipelines[i]);
      auto a = sys.spawn(pipeline_actor, i, p, &spec, catalogs, target_dispatchers,
                         target_table_ptrs, supervisor);
      self->send(a, start_atom::value);
    }
    std::size_t remaining = spec.pipelines.size();
    std::vector<std::vector<group_ready>> groups(spec.claim_group_sizes.size());
    while (remaining > 0) {
      self->receive(
          [&](pipeline_done& done) {
            reports[done.index] = std::move(*done.report);
            --remaining;
          },
          [&](group_ready& ready) {
            auto& members = groups.at(ready.group);
            members.push_back(std::move(ready));
            if (members.size() < spec.claim_group_sizes[members.back().group])
              return;
            // Every member's tables are in: the clashes are decided in flotilla.toml's order.
            std::sort(members.begin(), members.end(),
                      [](const auto& a, const auto& b) { return a.index < b.index; });
            std::vector<std::vector<table_spec>*> tables;
            std::vector<std::string> sources;
            for (auto& m : members) {
              tables.push_back(m.tables.get());  // null: its catalog could not be read
              sources.push_back(spec.pipelines[m.index].source.name);
            }
            if (spec.resolve_claims)
              spec.resolve_claims(tables, sources);
            for (auto& m : members)
              self->send(m.pipeline, go_atom::value);
            members.clear();
          });
    }
    // Stop the dispatchers (their links take the detached workers down with them).
    self->send_exit(catalogs, caf::exit_reason::user_shutdown);
    for (auto& d : target_dispatchers)
      self->send_exit(d, caf::exit_reason::user_shutdown);
    target_dispatchers.clear();
    readers.clear();
    catalogs = nullptr;
  }
  return reports;
}

}  // namespace flotilla::actors
