#pragma once
/// The source-drift gate of seed 004 (`on_source_drift = ignore | warn | fail`): the
/// schema of a contract-less dataset's landed (staged) data, compared with its accepted
/// baseline in the state store's `schemas` family. Pure: the caller describes the staged
/// data, reads the baseline, and carries out the verdict (docs/events.md, "Source drift").
///
///   if (!drift_gate_applies(policy.on_source_drift, has_declared_columns))
///     ...;                        // ignore: no describe, no baseline read or write, no event
///   auto v = evaluate_source_drift({...observed, hints, baseline...});
///   record_observation(result, v);          // TableResult.observed_schema + hints_hash
///   v.new_baseline -> table_commit.baseline (seed / reseed, silently)
///   warn: emit source_drift_detected(v), print v.warning, the table succeeds
///   fail: emit source_drift_detected(v), fail the table with v.error_code / v.error,
///         keep the staged data, skip its dependants

#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/model.hpp"
#include "events/event.hpp"
#include "schema/table.hpp"
#include "storage/state_store.hpp"

namespace flotilla::events {

using observed_columns = google::protobuf::RepeatedPtrField<storage::pb::ObservedColumn>;

enum class drift_decision : std::uint8_t {
  skip,       ///< the gate does not apply (ignore, or declared columns): nothing to do at all
  seed,       ///< no baseline yet: write the observed schema as the baseline, silently
  reseed,     ///< the read shape (hints hash) changed: write a new baseline, silently
  unchanged,  ///< the observed schema matches the baseline
  warn,       ///< drifted under warn: event and warning; the table succeeds; baseline kept
  fail,       ///< drifted under fail: the table fails (FLT-D001); staged data kept; baseline kept
  /// No baseline yet (or the read changed) and the plan refused the table: nothing is
  /// seeded from data no run loaded; the run that loads it seeds. Not a check.
  not_seeded,
};

[[nodiscard]] std::string_view to_string(drift_decision d);

enum class change_kind : std::uint8_t { added, removed, retyped };

[[nodiscard]] std::string_view to_string(change_kind k);

/// One column-level difference between the baseline and the observed schema. Types are
/// portable type text (schema::to_string: "bigint", "varchar(20)", "decimal(18,2)").
struct column_change {
  change_kind kind = change_kind::added;
  std::string column{};
  std::string from{};  ///< removed, retyped: the baseline's type
  std::string to{};    ///< added, retyped: the observed type

  friend bool operator==(const column_change&, const column_change&) = default;
};

/// "column 'amount' retyped BIGINT -> VARCHAR", "column 'coupon' added TEXT",
/// "column 'note' removed (was TEXT)". Types upper-cased for reading.
[[nodiscard]] std::string describe(const column_change& c);

/// "<source>.<table>": the baseline's key and the dataset's name in every message.
[[nodiscard]] std::string dataset_name(std::string_view source, std::string_view table);

/// Whether the gate runs at all. False under `ignore` and for a table with declared
/// columns: the run must then not describe the staged data, read or write the baseline,
/// record an observed schema, or emit a drift event.
[[nodiscard]] bool drift_gate_applies(config::drift_policy policy, bool has_declared_columns);

/// The read shape's hash: the columns read, in order (empty: all of them), and the
/// filters pushed down, as shapes without their values ("updated_at > ?", never the
/// watermark itself), in any order. 16 hex digits (FNV-1a, 64 bits). A baseline taken
/// under another hash is reseeded silently: the read changed, not the source.
[[nodiscard]] std::string hints_hash(std::span<const std::string> columns,
                                     std::span<const std::string> filters);

/// The observed columns of a landed schema, in table order, with portable type text.
[[nodiscard]] observed_columns to_observed(const schema::table_schema& s);

/// Changes from `baseline` to `observed`, matched by exact name: first the baseline's
/// columns that were removed or retyped (baseline order), then the added ones (observed
/// order). A column that only moved, or only changed nullability, is not a change.
[[nodiscard]] std::vector<column_change> compare_columns(const observed_columns& baseline,
                                                         const observed_columns& observed);

struct drift_input {
  config::drift_policy policy = config::drift_policy::ignore;
  bool has_declared_columns = false;
  std::string source{};  ///< [sources.<name>]
  std::string table{};   ///< the table's name on the source
  std::string run_id{};  ///< the run observing
  /// The landed data's schema. Required when the gate applies, unless `recorded` is
  /// given (both null count as skip).
  const schema::table_schema* observed = nullptr;
  /// Instead of `observed`: columns recorded earlier, for a `retry` that reuses staged
  /// data under `fail` and re-checks its StagedEntry.observed_schema against the baseline
  /// (docs/events.md, "Retry"). Used only when `observed` is null.
  const observed_columns* recorded = nullptr;
  std::string hints_hash{};
  /// The stored baseline of "<source>.<table>"; null when there is none.
  const storage::pb::SchemaBaseline* baseline = nullptr;
  std::int64_t now_us = 0;  ///< recorded_at_us of a seeded baseline
  /// The target's own refusal of the table ("FLT-S005: ..."), when its plan refuses it
  /// too: nothing is staged, and a fail verdict says what to resolve instead of retry.
  std::string refusal{};
  /// `plan`: nothing is read or staged; a fail verdict says what a run would do.
  bool planning = false;
  /// Columns of `observed` that hold no value in the source (a csv/json column every row
  /// leaves empty or null, inferred as text or json from nothing): each is observed in its
  /// baseline type, not as a change.
  std::vector<std::string> valueless{};
};

struct drift_verdict {
  drift_decision decision = drift_decision::skip;
  config::drift_policy policy = config::drift_policy::ignore;
  std::string source{};
  std::string table{};
  std::string dataset{};                 ///< "<source>.<table>"
  std::vector<column_change> changes{};  ///< warn, fail
  observed_columns observed{};           ///< every decision but skip
  std::string hints_hash{};              ///< every decision but skip
  std::string baseline_run_id{};         ///< the run whose schema the baseline is; empty when none
  /// seed, reseed: the baseline to write, in the table's state commit
  /// (storage::table_commit::baseline). Nothing else ever writes it but `schema accept`.
  std::optional<storage::pb::SchemaBaseline> new_baseline{};
  std::string error_code{};  ///< fail: "FLT-D001"
  std::string error{};       ///< fail: names the dataset, the changes and `flotilla schema accept`
  std::string warning{};     ///< warn: the console line

  [[nodiscard]] bool checked() const {
    return decision != drift_decision::skip && decision != drift_decision::not_seeded;
  }
  [[nodiscard]] bool drifted() const {
    return decision == drift_decision::warn || decision == drift_decision::fail;
  }
};

/// The gate itself.
[[nodiscard]] drift_verdict evaluate_source_drift(const drift_input& in);

/// The gate with its reads: `describe` (the staged data's schema) and `read_baseline`
/// are called only when the gate applies, so under `ignore` (or with declared columns)
/// nothing is described or read. `in.observed` and `in.baseline` are ignored. An error of
/// either call is returned as is.
[[nodiscard]] std::expected<drift_verdict, std::string> check_source_drift(
    drift_input in,
    const std::function<std::expected<schema::table_schema, std::string>()>& describe,
    const std::function<std::expected<std::optional<storage::pb::SchemaBaseline>, std::string>()>&
        read_baseline);

/// Records what the gate saw in the table's result (observed_schema, has_observed_schema,
/// hints_hash), for `schema accept`. Does nothing when the gate was skipped.
void record_observation(storage::pb::TableResult& result, const drift_verdict& v);

/// The `source_drift_detected` event of a warn or fail verdict.
[[nodiscard]] pb::Event source_drift_detected(const drift_verdict& v);

}  // namespace flotilla::events
