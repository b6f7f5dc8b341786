#pragma once
/// Factories of the built-in dialects, one per <name>_dialect.cpp. Only the registry
/// calls them; everyone else goes through make_dialect.

#include <memory>

#include "dialects/dialect.hpp"

namespace flotilla::dialects::detail {

[[nodiscard]] std::unique_ptr<dialect> make_duckdb();
[[nodiscard]] std::unique_ptr<dialect> make_postgres();
[[nodiscard]] std::unique_ptr<dialect> make_sqlite();
[[nodiscard]] std::unique_ptr<dialect> make_snowflake();
[[nodiscard]] std::unique_ptr<dialect> make_bigquery();
[[nodiscard]] std::unique_ptr<dialect> make_databricks();
[[nodiscard]] std::unique_ptr<dialect> make_trino();

}  // namespace flotilla::dialects::detail
