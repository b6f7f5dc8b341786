#include "events/schema_accept.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "config/errc.hpp"
#include "schema/table.hpp"

namespace flotilla::events {

std::vector<std::string> accept_plan::lines() const {
  std::vector<std::string> out;
  for (const auto& a : accepted) {
    if (a.first_baseline)
      out.push_back(fmt::format("{}: baseline recorded with {} column(s)", a.dataset,
                                a.baseline.columns_size()));
    for (const auto& c : a.changes)
      out.push_back(fmt::format("{}: {}", a.dataset, describe(c)));
  }
  return out;
}

std::size_t accept_plan::change_count() const {
  std::size_t n = 0;
  for (const auto& a : accepted)
    n += a.first_baseline ? 1 : a.changes.size();
  return n;
}

namespace {

/// `pg."sales.eu"."Order Lines"` as `pg.sales.eu.Order Lines`: the parts a name's double
/// quotes enclose (a doubled quote inside is one), joined by dots as dataset names are.
/// A name without quotes is returned as it is.
std::string unquoted_dataset(const std::string& given) {
  if (given.find('"') == std::string::npos)
    return given;
  // As SQL quotes a name: a part that begins with a double quote is quoted up to the
  // quote that closes it ("" inside stands for one), which a dot or the end follows; a
  // quote elsewhere in a part (`Weird "T"`) is a character of the name.
  std::string out;
  std::size_t i = 0;
  while (true) {
    if (i < given.size() && given[i] == '"') {
      ++i;
      while (true) {
        if (i >= given.size())
          return given;  // a quote never closed: taken as it is
        if (given[i] == '"') {
          if (i + 1 < given.size() && given[i + 1] == '"') {
            out += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        out += given[i++];
      }
      if (i < given.size() && given[i] != '.')
        return given;  // text after the closing quote: not a quoted part
    } else {
      while (i < given.size() && given[i] != '.')
        out += given[i++];
    }
    if (i >= given.size())
      return out;
    out += given[i++];  // the dot between parts
  }
}

}  // namespace

accept_plan plan_accept(const storage::pb::RunRecord* latest, std::span<const std::string> names,
                        const std::map<std::string, storage::pb::SchemaBaseline>& baselines,
                        std::int64_t now_us, const std::set<std::string>& declared,
                        const std::set<std::string>& ignored) {
  // What the latest run observed, by dataset.
  std::map<std::string, const storage::pb::TableResult*> observed;
  // The same datasets by the run JSON's `table`, the target table they land in (one
  // dataset per target table: two are refused, FLT-R006); "" where two share one.
  std::map<std::string, std::string> by_target;
  // Every table of the latest run by its target table, observed or not: a declared
  // table named by its target table is said to be one.
  std::map<std::string, std::string> any_by_target;
  // Every table of the latest run by dataset, observed or not, with its status.
  std::map<std::string, std::string> any_status;
  if (latest != nullptr)
    for (const auto& t : latest->tables()) {
      if (!t.table().empty())
        any_by_target.emplace(t.table(), dataset_name(t.source(), t.source_table()));
      any_status.emplace(dataset_name(t.source(), t.source_table()), t.status());
      if (t.has_observed_schema()) {
        const auto dataset = dataset_name(t.source(), t.source_table());
        observed[dataset] = &t;
        if (!t.table().empty()) {
          auto [it, fresh] = by_target.emplace(t.table(), dataset);
          if (!fresh && it->second != dataset)
            it->second.clear();
        }
      }
    }

  // A table whose section declares columns under an enforced contract: the gate never
  // looks at it. Sections are
  // named "<source>.<section>", and a section may leave out the schema ("orders" for
  // "public.orders").
  const auto is_declared = [&](const std::string& name) {
    if (declared.contains(name))
      return true;
    const auto first = name.find('.');
    const auto last = name.rfind('.');
    if (first == std::string::npos)
      return false;
    if (last != first)
      return declared.contains(name.substr(0, first) + name.substr(last));
    // "app.orders" for the section "public.orders" of source app: the bare name the
    // section's table goes by in the source's only schema that has it.
    std::size_t found = 0;
    for (const auto& d : declared)
      if (d.size() > name.size() && d.compare(0, first + 1, name, 0, first + 1) == 0 &&
          d.compare(d.size() - (name.size() - first), name.size() - first, name, first) == 0)
        ++found;
    return found == 1;
  };
  std::vector<std::string> order;
  accept_plan plan;
  if (names.empty()) {
    // A table declaring its columns now is not the gate's, whatever an earlier run saw.
    for (const auto& [name, _] : observed)
      if (!is_declared(name))
        order.push_back(name);
  } else {
    std::set<std::string> named;
    for (const auto& given : names) {
      // Quoted parts (pg."sales.eu"."Order Lines", as SQL quotes a name holding a dot or a
      // space) name the dataset their unquoted parts join to.
      // A name as the run printed it is taken as it is, quotes and all (a table named
      // `Weird "T".x`); else as SQL would read its quoted parts.
      const bool as_given = [&] {
        if (observed.contains(given) || any_status.contains(given))
          return true;
        const auto t = any_by_target.find(given);
        return t != any_by_target.end();
      }();
      const std::string name = as_given ? given : unquoted_dataset(given);
      if (!named.insert(name).second)
        continue;  // named twice: accepted, or refused, once
      const auto target = any_by_target.find(name);
      if (is_declared(name) || (target != any_by_target.end() && is_declared(target->second))) {
        plan.errors.push_back(error{
            errc::no_observed_schema,
            fmt::format("cannot accept '{}': its table section declares columns under "
                        "contract = \"enforced\", and on_source_drift skips such tables "
                        "entirely (the declared columns already type and prune the read; a "
                        "declared column the source lacks fails the "
                        "table, FLT-S001). There is no baseline of it to accept; `flotilla "
                        "plan` shows how the source differs from its declaration",
                        name)});
        continue;
      }
      const auto take = [&](const std::string& dataset) {
        if (std::find(order.begin(), order.end(), dataset) == order.end())
          order.push_back(dataset);
      };
      if (observed.contains(name)) {
        take(name);
        continue;
      }
      if (auto t = by_target.find(name); t != by_target.end() && !t->second.empty()) {
        take(t->second);
        continue;
      }
      // "pg.orders" (seed 004's own form) for "pg.public.orders": the one observed table
      // of the source so named, as a table section may leave out the schema.
      if (const auto dot = name.find('.'); dot != std::string::npos && name.rfind('.') == dot) {
        const std::string tail = name.substr(dot);
        // A schema holding a dot ("sales.eu") joins to more dots: such a schema is taken
        // when no schema without one has the table.
        std::vector<std::string> alike, dotted;
        for (const auto& [known, _] : observed)
          if (known.size() > name.size() + 1 && known.compare(0, dot + 1, name, 0, dot + 1) == 0 &&
              known.compare(known.size() - tail.size(), tail.size(), tail) == 0)
            (known.find('.', dot + 1) == known.size() - tail.size() ? alike : dotted)
                .push_back(known);
        if (alike.size() == 1 || (alike.empty() && dotted.size() == 1)) {
          take(alike.empty() ? dotted.front() : alike.front());
          continue;
        }
      }
      // "pg.orders" for "pg.public.orders": the name the run reports is suggested.
      std::string nearest;
      const auto dot = name.find('.');
      for (const auto& [known, _] : observed) {
        const bool same_source = dot != std::string::npos &&
                                 known.compare(0, dot + 1, name, 0, dot + 1) == 0;
        const std::string tail = dot == std::string::npos ? "" : "." + name.substr(dot + 1);
        if (schema::same_name(known, name, schema::name_rule::case_insensitive) ||
            (same_source && known.size() > tail.size() &&
             known.compare(known.size() - tail.size(), tail.size(), tail) == 0)) {
          nearest = known;
          break;
        }
      }
      // A typo: the nearest name by edit distance, of the datasets and their target tables,
      // and of the short forms (`pg.orders` for `pg.public.orders`), each suggested in full.
      if (nearest.empty()) {
        std::vector<std::string> short_forms;
        std::map<std::string, std::string> full_of;
        for (const auto& [known, _] : observed) {
          const auto first = known.find('.');
          const auto last = known.rfind('.');
          if (first != std::string::npos && last != first) {
            std::string brief = known.substr(0, first) + known.substr(last);
            if (full_of.emplace(brief, known).second)
              short_forms.push_back(std::move(brief));
            else
              full_of[brief].clear();  // two schemas have it: no short form
          }
        }
        std::vector<std::string_view> candidates;
        for (const auto& [known, _] : observed)
          candidates.push_back(known);
        for (const auto& [table, dataset] : by_target)
          if (!dataset.empty())
            candidates.push_back(table);
        for (const auto& brief : short_forms)
          if (!full_of[brief].empty())
            candidates.push_back(brief);
        nearest = config::nearest(name, candidates);
        if (auto f = full_of.find(nearest); f != full_of.end() && !f->second.empty())
          nearest = f->second;
      }
      // The table's own name without its source ("leads"), or under another source
      // ("crm.leads"): the one observed dataset whose table is so named.
      if (nearest.empty()) {
        const std::string part = name.substr(name.rfind('.') + 1);
        std::vector<std::string> alike;
        for (const auto& [known, _] : observed)
          if (schema::same_name(known.substr(known.rfind('.') + 1), part,
                                schema::name_rule::case_insensitive))
            alike.push_back(known);
        if (alike.size() == 1)
          nearest = alike.front();
      }
      // The latest run selected some tables only (--filter): a name it did not have may be
      // a table it left out, not a typo of one it had.
      const bool filtered = latest != nullptr && latest->filters_size() > 0;
      // A table the latest run had, whose schema it did not observe: why, and what to do.
      std::string dataset = name;
      if (!any_status.contains(dataset))
        if (auto t = any_by_target.find(name); t != any_by_target.end())
          dataset = t->second;
      // "pg.ign" for "pg.public.ign": the one table of the source so named.
      if (const auto dot = name.find('.');
          !any_status.contains(dataset) && dot != std::string::npos && name.rfind('.') == dot) {
        const std::string tail = name.substr(dot);
        std::vector<std::string> alike;
        for (const auto& [known, _] : any_status)
          if (known.size() > name.size() && known.compare(0, dot + 1, name, 0, dot + 1) == 0 &&
              known.compare(known.size() - tail.size(), tail.size(), tail) == 0)
            alike.push_back(known);
        if (alike.size() == 1)
          dataset = alike.front();
      }
      // Its source could not be read in the latest run: none of its tables was observed.
      std::string unread;
      if (latest != nullptr)
        for (const auto& src : latest->failed_sources())
          if (dataset.size() > src.size() && dataset.compare(0, src.size(), src) == 0 &&
              dataset[src.size()] == '.')
            unread = src;
      if (!unread.empty()) {
        plan.errors.push_back(error{
            errc::no_observed_schema,
            fmt::format("cannot accept '{}': the latest run ({}) could not read source '{}' "
                        "(its error is in that run's report), so it observed none of its "
                        "tables: run `flotilla run` once the source is reachable, then accept",
                        name, latest->run_id(), unread)});
        continue;
      }
      // (One observed goes on below: "did you mean" names it.)
      if (const auto st = any_status.find(dataset);
          latest != nullptr && st != any_status.end() && !observed.contains(dataset)) {
        plan.errors.push_back(error{
            errc::no_observed_schema,
            ignored.contains(dataset)
                ? fmt::format("cannot accept '{}': its on_source_drift is \"ignore\" (its table "
                              "section's, its source's or the project's setting), so no run "
                              "observes its schema and there is nothing to accept. To gate it, "
                              "set on_source_drift = \"warn\" or \"fail\" for it in "
                              "flotilla.toml, run `flotilla run` (the first run records its "
                              "baseline)",
                              name)
                : fmt::format("cannot accept '{}': the latest run ({}) had it ({}) but observed "
                              "no schema of it: a pruned table, a retry that reused staged data, "
                              "or a table that failed before landing records none. Run `flotilla "
                              "run` for it (--no-prune to copy it unchanged), then accept",
                              name, latest->run_id(), st->second)});
        continue;
      }
      // The same name in another case, a table the run had: named as it is written.
      std::string other_case;
      for (const auto& [known, _] : any_status)
        if (known != name && schema::same_name(known, name, schema::name_rule::case_insensitive))
          other_case = other_case.empty() ? known : "\n";  // two: none to name
      if (other_case == "\n")
        other_case.clear();
      const std::string run =
          latest == nullptr ? std::string("no run has been recorded yet")
          : !other_case.empty()
              ? fmt::format("the latest run ({}) had no table of that name as written: names are "
                            "matched as the source writes them (did you mean '{}'?)",
                            latest->run_id(), other_case)
          : filtered
              ? fmt::format("the latest run ({}) ran with --filter {}, and had no table of that "
                            "name{}: for a table that filter left out, run `flotilla run` (or "
                            "a --filter that selects it), then accept",
                            latest->run_id(),
                            [&] {
                              std::string f;
                              for (const auto& x : latest->filters())
                                f += (f.empty() ? "" : " --filter ") + x;
                              return f;
                            }(),
                            nearest.empty() ? std::string()
                                            : fmt::format(" (did you mean '{}'?)", nearest))
          : latest->command() == "retry"
              ? fmt::format("the latest run ({}) was a `flotilla retry`, which had only the "
                            "tables it retried, and not this one{}: for a table it left out, "
                            "run `flotilla run` (or a --filter that selects it), then accept",
                            latest->run_id(),
                            nearest.empty() ? std::string()
                                            : fmt::format(" (or did you mean '{}'?)", nearest))
          : !nearest.empty()
              ? fmt::format("the latest run ({}) observed no dataset of that name (did you mean "
                            "'{}'?)",
                            latest->run_id(), nearest)
              : fmt::format("the latest run ({}) had no table of that name",
                            latest->run_id());
      plan.errors.push_back(error{
          errc::no_observed_schema,
          fmt::format("cannot accept '{}': {}. A dataset is named <source>.<source_table> "
                      "(the run JSON's `source` and `source_table`, as the drift message "
                      "names it), or by its target table (the run JSON's `table`). Run `flotilla run` with on_source_drift = \"warn\" or "
                      "\"fail\" for it first (a retry that reused staged data, or a pruned or "
                      "failed-before-landing table, records none), then accept",
                      name, run)});
    }
  }
  if (!plan.errors.empty())
    return plan;

  for (const auto& name : order) {
    const storage::pb::TableResult& t = *observed.at(name);
    accepted_dataset a;
    a.dataset = name;
    *a.baseline.mutable_columns() = t.observed_schema();
    a.baseline.set_hints_hash(t.hints_hash());
    a.baseline.set_run_id(t.run_id().empty() ? latest->run_id() : t.run_id());
    a.baseline.set_recorded_at_us(now_us);
    auto b = baselines.find(name);
    if (b == baselines.end()) {
      a.first_baseline = true;
    } else {
      a.changes = compare_columns(b->second.columns(), t.observed_schema());
      if (a.changes.empty())
        continue;  // nothing moved: nothing to write
    }
    plan.accepted.push_back(std::move(a));
  }
  return plan;
}

}  // namespace flotilla::events
