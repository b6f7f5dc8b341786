#pragma once
/// `flotilla schema accept [source.table ...]` as a pure function: what the latest run
/// observed against the stored baselines, and the baselines to write. It never needs a
/// source or a target; cli/schema_verb.cpp reads the state and writes the result.

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "events/errc.hpp"
#include "events/source_drift.hpp"
#include "storage/state_store.hpp"

namespace flotilla::events {

struct accepted_dataset {
  std::string dataset{};                   ///< "<source>.<table>"
  std::vector<column_change> changes{};    ///< what moved; empty for a first baseline
  bool first_baseline = false;             ///< no baseline was stored before
  storage::pb::SchemaBaseline baseline{};  ///< to write under `dataset`
};

struct accept_plan {
  std::vector<accepted_dataset> accepted{};  ///< datasets whose baseline changes
  /// FLT-D002, one per named dataset the latest run recorded no observed schema for.
  /// When any is present nothing may be written.
  std::vector<error> errors{};

  /// Printed lines: "shop.orders: column 'amount' retyped BIGINT -> VARCHAR", one per change.
  [[nodiscard]] std::vector<std::string> lines() const;
  /// Changes accepted: one per changed column, one per first baseline.
  [[nodiscard]] std::size_t change_count() const;
};

/// `latest`: the latest run's record (null before the first run). `names`: the
/// datasets named on the command line, empty for all. `baselines`: every stored baseline
/// by key. Named datasets are handled in the order given, the others in key order.
/// `declared`: the datasets whose table section declares columns (`<source>.<section>`),
/// which the gate skips (seed 004): a name among them is refused as such. `ignored`: the
/// datasets of the latest run whose on_source_drift is "ignore" now, which no run observes:
/// a name among them is refused saying so.
[[nodiscard]] accept_plan plan_accept(
    const storage::pb::RunRecord* latest, std::span<const std::string> names,
    const std::map<std::string, storage::pb::SchemaBaseline>& baselines, std::int64_t now_us,
    const std::set<std::string>& declared = {}, const std::set<std::string>& ignored = {});

}  // namespace flotilla::events
