#pragma once
/// A captured DDL (cdc/ddl_capture.hpp) turned into seed 002's source changes and their
/// outcome on the table's target (cdc/outcome.hpp). Pure.

#include <string>
#include <variant>
#include <vector>

#include "cdc/ddl_capture.hpp"
#include "cdc/outcome.hpp"

namespace flotilla::cdc {

/// The table as the outcome rules see it, from the source's catalog columns.
[[nodiscard]] captured_table to_captured(const std::string& source, const std::string& table,
                                         const std::vector<source_column>& columns);

/// The source changes of one DDL of `table` ("public.orders"), in order.
[[nodiscard]] std::vector<source_change> to_source_changes(const std::string& table,
                                                           const std::vector<source_column>& before,
                                                           const ddl_event& event,
                                                           const std::string& position);

/// The DDL's outcome: applied (every change applied, statements in order), held (the
/// first change held; the whole DDL waits with it), or stopped (the first change that
/// stops). A stop outranks a hold.
[[nodiscard]] outcome decide_ddl(const std::string& source, const std::string& table,
                                 const std::vector<source_column>& before, const ddl_event& event,
                                 const std::string& position, const target_info& target);

}  // namespace flotilla::cdc
