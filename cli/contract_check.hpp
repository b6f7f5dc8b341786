#pragma once
/// What `flotilla contract diff` and `contract generate` work from: the selected tables
/// with their declarations and their live tables, and the comparison of the two.
/// Reading changes nothing: no table, schema or database file is created.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/model.hpp"
#include "config/selection.hpp"
#include "dialects/dialect.hpp"
#include "schema/table.hpp"

namespace flotilla::cli {

enum class finding_kind : std::uint8_t {
  type_mismatch,  ///< a declared column whose live type differs (compared canonically)
  missing,        ///< a declared column the live table lacks
  undeclared,     ///< contract = "enforced": a live column nothing declares
  missing_table,  ///< the live table does not exist
  unreadable,     ///< the live table cannot be read (plan-only target, connection error)
  missing_source_table,  ///< flotilla.toml names a table the source does not have (FLT-R005)
  target_taken,   ///< another selected table lands on the same target table (FLT-R006)
};

[[nodiscard]] std::string_view to_string(finding_kind k);

/// One difference between a table's declaration and its live table.
struct contract_finding {
  finding_kind kind = finding_kind::missing;
  std::string column;    ///< empty for missing_table and unreadable
  std::string declared;  ///< declared portable type; empty when none
  std::string physical;  ///< the live column's portable type; empty when none
  std::string message;   ///< "column 'total' is declared decimal(18,2) but ..."
};

/// A selected table, its declaration and what its target holds.
struct contract_table {
  std::string source;        ///< [sources.NAME]
  std::string source_table;  ///< the catalog name ("main.orders", "public.orders")
  std::string target;        ///< [targets.NAME]
  dialects::table_ref where; ///< the target table
  const config::table_config* section = nullptr;  ///< null when the table has no section
  config::contract_mode contract = config::contract_mode::none;
  const dialects::dialect* dialect = nullptr;  ///< the target's, for canonical types
  std::optional<schema::table_schema> live;    ///< nullopt: no live table, or unreadable
  schema::table_schema source_columns;         ///< the source table's, from its catalog
  std::string unreadable;                      ///< why the live table could not be read
  /// Not empty: flotilla.toml names the table (a section, or an include without `*`) but
  /// the source has no such table; why, as `run`'s FLT-R005 says it.
  std::string absent_in_source;
  /// Not empty: another selected table lands on the same target table, and `run` loads
  /// that one and refuses this (FLT-R006); why.
  std::string taken_by;
};

/// A source whose catalog could not be read.
struct source_failure {
  std::string source;
  std::string error;
};

/// Every selected table, sources in file order and tables in catalog order.
struct contract_survey {
  std::vector<contract_table> tables;
  std::vector<source_failure> failures;
  std::vector<std::unique_ptr<dialects::dialect>> dialects;  ///< owns contract_table::dialect
};

/// Reads each selected source's catalog (selecting like `run`) and each selected
/// table's live schema. A file target that does not exist yet has no live tables; a
/// plan-only target's tables are unreadable.
[[nodiscard]] contract_survey survey_contracts(const config::project& p,
                                               const std::vector<config::filter>& filters);

/// The differences between a declaration and its live table (pure): declared columns
/// missing from the live table or of another type (compared through `rules.canonical`,
/// matched by `rules.names()`), then, under an enforced contract, live columns nothing
/// declares. Types are named by their portable spelling. With `source`, a live column the
/// source no longer has is not one of those: dropped at the source, it is kept empty and
/// never loaded, and it cannot be declared (FLT-S001), so it is no difference.
[[nodiscard]] std::vector<contract_finding> compare_contract(
    const std::vector<config::declared_column>& declared, config::contract_mode contract,
    const schema::table_schema& live, const schema::type_rules& rules,
    const schema::table_schema* source = nullptr);

/// The findings of a surveyed table: compare_contract, or missing_table / unreadable.
[[nodiscard]] std::vector<contract_finding> findings_of(const contract_table& t);

}  // namespace flotilla::cli
