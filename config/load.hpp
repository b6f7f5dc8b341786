#pragma once
/// Loading flotilla.toml. Every problem is reported at once; the model is always
/// returned (best effort: an invalid value keeps its default, an invalid on_source_drift
/// is treated as ignore), so the caller decides — the CLI exits 2 when has_errors().

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/errc.hpp"
#include "config/model.hpp"

namespace flotilla::config {

struct load_result {
  std::shared_ptr<const project> model;  ///< never null
  std::vector<diagnostic> diagnostics;   ///< in file order

  /// No errors (warnings allowed).
  [[nodiscard]] bool ok() const { return !has_errors(diagnostics); }
};

/// Reads and validates the file at `path`. A missing file is FLT-C001.
[[nodiscard]] load_result load_project(const std::string& path);

/// Validates TOML text as if read from `path`; relative paths resolve against the
/// directory of `path` (made absolute against the working directory).
[[nodiscard]] load_result load_project_text(std::string_view toml_text, const std::string& path);

}  // namespace flotilla::config
