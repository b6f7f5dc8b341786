#pragma once
/// Checks that span sections of a loaded project: schema templates against each source's
/// tags, enforced contracts against their declared columns, exclude patterns against
/// table sections. The loader runs it; it is public so a model built in code can be
/// checked the same way.

#include <vector>

#include "config/errc.hpp"
#include "config/model.hpp"

namespace flotilla::config {

/// Diagnostics (file = p.config_path) of the cross-section checks, in file order:
///   FLT-C009 a target's schema template names a tag a source writing to it lacks
///   FLT-C010 a malformed schema template (once per target)
///   FLT-C017 a table section whose effective contract is enforced declares no columns
///   FLT-C018 an enforced table's cursor_column or unique_key is not declared
///   FLT-C022 (warning) an exclude pattern removes a table that has a section
[[nodiscard]] std::vector<diagnostic> validate(const project& p);

}  // namespace flotilla::config
