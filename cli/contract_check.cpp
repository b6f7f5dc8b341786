#include "cli/contract_check.hpp"
#include "cli/fleet_builder.hpp"

#include <exception>
#include <filesystem>
#include <map>

#include <fmt/core.h>

#include "config/policy.hpp"
#include "config/toml_edit.hpp"
#include "sinks/warehouse.hpp"
#include "sources/source.hpp"

namespace flotilla::cli {
namespace {

/// One target, opened at most once per survey.
struct target_reader {
  const dialects::dialect* dialect = nullptr;
  std::unique_ptr<sinks::warehouse> warehouse;  ///< null: no live tables, or unreadable
  std::string unreadable;                       ///< why its tables cannot be read
};

target_reader open_target(const config::target_config& t, contract_survey& out) {
  target_reader r;
  if (auto d = dialects::make_dialect(t.dialect)) {
    r.dialect = d->get();
    out.dialects.push_back(std::move(*d));
  } else {
    r.unreadable = d.error().message;
    return r;
  }
  if (!t.executed) {
    r.unreadable = fmt::format(
        "target '{}' uses dialect '{}', which Flotilla plans for but does not execute", t.name,
        t.dialect);
    return r;
  }
  // Opening a database file creates it; a comparison must change nothing, and a file
  // that does not exist has no tables anyway.
  const bool file_target = t.dialect == "duckdb" || t.dialect == "sqlite";
  std::error_code ec;
  if (file_target && !std::filesystem::exists(t.path, ec))
    return r;
  try {
    r.warehouse = sinks::open_warehouse(
        sinks::warehouse_options{t.name, t.dialect, t.path, t.dsn, t.block_size,
                                 t.in_place_max_bytes});
  } catch (const std::exception& e) {
    r.unreadable = e.what();
  }
  return r;
}

}  // namespace

std::string_view to_string(finding_kind k) {
  switch (k) {
    case finding_kind::type_mismatch: return "type_mismatch";
    case finding_kind::missing: return "missing";
    case finding_kind::undeclared: return "undeclared";
    case finding_kind::missing_table: return "missing_table";
    case finding_kind::unreadable: return "unreadable";
    case finding_kind::missing_source_table: return "missing_source_table";
    case finding_kind::target_taken: return "target_taken";
  }
  return "unknown";
}

namespace {

/// Of two selected tables landing on one target table, `run` loads one and refuses the
/// other (FLT-R006): the one with a table section, else the one of the source listed
/// first. The refused one is compared with nothing: the live table is the other's.
void mark_taken_targets(const config::project& p, std::vector<contract_table>& tables) {
  std::map<std::string, std::string> databases;  // target name -> target_database
  std::map<std::string, const contract_table*> taken;
  const auto claim = [&](contract_table& t) {
    const auto* target = p.find_target(t.target);
    if (target == nullptr || !t.absent_in_source.empty())
      return;
    auto db = databases.find(target->name);
    if (db == databases.end())
      db = databases.emplace(target->name, target_database(*target)).first;
    auto [at, fresh] = taken.try_emplace(target_claim(*target, db->second, t.where), &t);
    if (!fresh)
      t.taken_by = fmt::format(
          "{}.{} lands on target table {}, which {}.{} also loads: `run` loads that one and "
          "refuses this one (FLT-R006), so it is not compared. Give them distinct target "
          "tables (a schema template with {{source}}, or a section named \"schema.table\"), "
          "or exclude one of them",
          t.source, t.source_table, display_name(t.where), at->second->source,
          at->second->source_table);
  };
  for (auto& t : tables)
    if (t.section != nullptr)
      claim(t);
  for (auto& t : tables)
    if (t.section == nullptr)
      claim(t);
}

}  // namespace

contract_survey survey_contracts(const config::project& p,
                                 const std::vector<config::filter>& filters) {
  contract_survey out;
  std::map<std::string, target_reader> targets;
  for (const auto& s : p.sources) {
    if (!config::source_may_match(s, filters))
      continue;
    const config::target_config* target = p.target_of(s);
    if (target == nullptr)
      continue;
    sources::catalog catalog;
    try {
      auto src = sources::open_source(sources::source_options{
          s.name, std::string(config::to_string(s.adapter)), s.path, s.dsn});
      catalog = src->read_catalog();
    } catch (const std::exception& e) {
      out.failures.push_back(source_failure{s.name, e.what()});
      continue;
    }
    std::vector<std::string> names;
    names.reserve(catalog.tables.size());
    for (const auto& t : catalog.tables)
      names.push_back(t.qualified());
    const auto selected = config::select_tables(s, names, filters);
    const auto unmatched = config::unmatched_table_names(s, names, filters);
    if (selected.empty() && unmatched.empty())
      continue;
    auto found = targets.find(target->name);
    if (found == targets.end())
      found = targets.emplace(target->name, open_target(*target, out)).first;
    target_reader& reader = found->second;
    for (const auto& name : selected) {
      contract_table t;
      // The target table by the table's own name, as a run names it: a schema or table
      // name holding a dot ("s.1".t) splits the catalog name at the wrong dot.
      std::string own_name;
      for (auto& c : catalog.tables)
        if (c.qualified() == name) {
          t.source_columns = std::move(c.columns);
          own_name = c.name;
        }
      t.source = s.name;
      t.source_table = name;
      t.target = target->name;
      const auto where = own_name.empty() ? config::target_table(*target, s, name)
                                          : config::target_table_named(*target, s, own_name);
      t.where = dialects::table_ref{where.catalog, where.schema, where.name};
      t.section = config::find_table(s, name, names);
      t.contract = config::effective_policy(p, s, t.section).contract;
      t.dialect = reader.dialect;
      if (!reader.unreadable.empty()) {
        t.unreadable = reader.unreadable;
      } else if (reader.warehouse) {
        try {
          t.live = reader.warehouse->describe(t.where);
        } catch (const std::exception& e) {
          t.unreadable = e.what();
        }
      }
      out.tables.push_back(std::move(t));
    }
    // A table flotilla.toml names that the source does not have fails `run` (FLT-R005):
    // the comparison reports it too, so a CI gate on `contract diff` sees it.
    for (const auto& m : unmatched) {
      contract_table t;
      t.source = s.name;
      t.source_table = m.name;
      t.target = target->name;
      const auto where = config::target_table(*target, s, m.name);
      t.where = dialects::table_ref{where.catalog, where.schema, where.name};
      t.section = config::find_table(s, m.name);
      t.contract = config::effective_policy(p, s, t.section).contract;
      t.dialect = reader.dialect;
      t.absent_in_source = fmt::format(
          "source '{}' has no table '{}', which flotilla.toml names in {}{}; fix the name, or "
          "remove it from flotilla.toml",
          s.name, m.name,
          m.where == "section" ? config::table_header(s.name, m.name)
                               : fmt::format("sources.{}.include", s.name),
          m.nearest.empty() ? "" : fmt::format(" (did you mean '{}'?)", m.nearest));
      out.tables.push_back(std::move(t));
    }
  }
  mark_taken_targets(p, out.tables);
  return out;
}

std::vector<contract_finding> compare_contract(const std::vector<config::declared_column>& declared,
                                               config::contract_mode contract,
                                               const schema::table_schema& live,
                                               const schema::type_rules& rules,
                                               const schema::table_schema* source) {
  std::vector<contract_finding> out;
  for (const auto& d : declared) {
    const std::string want = schema::to_string(d.type);
    const schema::column* c = live.find(d.name, rules.names());
    if (c == nullptr) {
      out.push_back(contract_finding{
          finding_kind::missing, d.name, want, "",
          fmt::format("column '{}' is declared {} but the live table has no such column", d.name,
                      want)});
      continue;
    }
    // Compared as the target would report them: on a dialect where int and bigint are
    // one physical type, declaring either matches.
    if (rules.canonical(d.type) != rules.canonical(c->type)) {
      const std::string have = schema::to_string(c->type);
      out.push_back(contract_finding{
          finding_kind::type_mismatch, d.name, want, have,
          fmt::format("column '{}' is declared {} but physical type is {}", d.name, want, have)});
    }
  }
  if (contract == config::contract_mode::enforced)
    for (const auto& c : live.columns) {
      bool is_declared = false;
      for (const auto& d : declared)
        is_declared = is_declared || schema::same_name(d.name, c.name, rules.names());
      if (is_declared)
        continue;
      // Seed 000: every live column nothing declares. One the source does not have either
      // (dropped there, or added to the target by hand) cannot be declared (FLT-S001):
      // the message says so and how to end the difference.
      const bool not_in_source = source != nullptr && !source->columns.empty() &&
                                 source->find(c.name, rules.names()) == nullptr;
      const std::string have = schema::to_string(c.type);
      out.push_back(contract_finding{
          finding_kind::undeclared, c.name, "", have,
          not_in_source
              ? fmt::format("column '{}' ({}) is in the live table but not declared, and the "
                            "source has no such column (dropped there, or added to the target "
                            "by hand; it is never loaded): drop it from the live table, or set "
                            "contract = \"none\" for the table",
                            c.name, have)
              : fmt::format("column '{}' ({}) is in the live table but not declared", c.name,
                            have)});
    }
  return out;
}

std::vector<contract_finding> findings_of(const contract_table& t) {
  if (!t.absent_in_source.empty())
    return {contract_finding{finding_kind::missing_source_table, "", "", "", t.absent_in_source}};
  if (!t.taken_by.empty())
    return {contract_finding{finding_kind::target_taken, "", "", "", t.taken_by}};
  if (!t.unreadable.empty() || t.dialect == nullptr)
    return {contract_finding{finding_kind::unreadable, "", "", "",
                             fmt::format("the live table cannot be read: {}", t.unreadable)}};
  if (!t.live)
    return {contract_finding{finding_kind::missing_table, "", "", "",
                             fmt::format("the live table does not exist in target '{}'", t.target)}};
  static const std::vector<config::declared_column> none;
  return compare_contract(t.section ? t.section->columns : none, t.contract, *t.live, *t.dialect,
                          &t.source_columns);
}

}  // namespace flotilla::cli
