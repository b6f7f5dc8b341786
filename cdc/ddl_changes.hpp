#pragma once
/// A captured DDL (cdc/ddl_capture.hpp) turned into seed 002's source changes and their
/// outcome on the table's target (cdc/outcome.hpp). Pure.

#include <string>
#include <string_view>
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

/// A held change `h` that other changes came with (`where`: "in the same statement", or
/// before it in its transaction), whose statements ran in the stream as applied: its
/// proposal runs them too (`before_hold` first, then its own, then `after_hold`), and its
/// card names them (`others`, each as source_change_text says it). A proposal that only
/// comments (an edit is needed) lists them for the edit to keep.
void with_other_changes(storage::pb::HoldRecord& h, const std::vector<std::string>& before_hold,
                        const std::vector<std::string>& after_hold,
                        const std::vector<std::string>& others, std::string_view where);

/// The DDL's outcome: applied (every change applied, statements in order), held (the
/// first change held; the whole DDL waits with it, its proposal running the others'
/// statements too: with_other_changes), or stopped (the first change that stops). A stop
/// outranks a hold.
[[nodiscard]] outcome decide_ddl(const std::string& source, const std::string& table,
                                 const std::vector<source_column>& before, const ddl_event& event,
                                 const std::string& position, const target_info& target);

}  // namespace flotilla::cdc
