#include "events/source_drift.hpp"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <fmt/format.h>

#include "events/errc.hpp"

namespace flotilla::events {
namespace {

/// `text` as one shell word: as it is when it is plain, else in single quotes.
std::string shell_word(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
           c == '/';
  });
  if (plain)
    return std::string(text);
  // A control character (a line break in a name) as bash's $'...' writes it: the word
  // stays on one line, and a terminal that flattens breaks does not change it.
  if (std::any_of(text.begin(), text.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
      })) {
    std::string out = "$'";
    for (char c : text) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '\\' || c == '\'')
        out += std::string("\\") + c;
      else if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else if (c == '\r')
        out += "\\r";
      else if (u < 0x20 || u == 0x7f)
        out += fmt::format("\\x{:02x}", u);
      else
        out += c;
    }
    return out + "'";
  }
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string describe_all(const std::vector<column_change>& changes) {
  std::string out;
  for (const auto& c : changes)
    out += (out.empty() ? "" : "; ") + describe(c);
  return out;
}

}  // namespace

std::string_view to_string(drift_decision d) {
  switch (d) {
    case drift_decision::skip: return "skip";
    case drift_decision::seed: return "seed";
    case drift_decision::reseed: return "reseed";
    case drift_decision::unchanged: return "unchanged";
    case drift_decision::warn: return "warn";
    case drift_decision::fail: return "fail";
    case drift_decision::not_seeded: return "not_seeded";
  }
  return "skip";
}

std::string_view to_string(change_kind k) {
  switch (k) {
    case change_kind::added: return "added";
    case change_kind::removed: return "removed";
    case change_kind::retyped: return "retyped";
  }
  return "added";
}

std::string describe(const column_change& c) {
  switch (c.kind) {
    case change_kind::added:
      return c.to.empty() ? fmt::format("column '{}' added (no values yet)", c.column)
                          : fmt::format("column '{}' added {}", c.column, upper(c.to));
    case change_kind::removed:
      return c.from.empty() ? fmt::format("column '{}' removed (it had no values)", c.column)
                            : fmt::format("column '{}' removed (was {})", c.column, upper(c.from));
    case change_kind::retyped:
      return fmt::format("column '{}' retyped {} -> {}", c.column, upper(c.from), upper(c.to));
  }
  return {};
}

std::string dataset_name(std::string_view source, std::string_view table) {
  return fmt::format("{}.{}", source, table);
}

bool drift_gate_applies(config::drift_policy policy, bool has_declared_columns) {
  return policy != config::drift_policy::ignore && !has_declared_columns;
}

std::string hints_hash(std::span<const std::string> columns, std::span<const std::string> filters) {
  // FNV-1a over a canonical text: a version, the columns in order, the sorted filters,
  // each part closed by a NUL so that ("ab","c") and ("a","bc") differ.
  std::uint64_t h = 1469598103934665603ull;
  auto feed = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h *= 1099511628211ull;  // the closing NUL byte (xor with 0 changes nothing)
  };
  feed("flotilla.hints.v1");
  feed("columns");
  if (columns.empty())
    feed("*");
  for (const auto& c : columns)
    feed(c);
  std::vector<std::string> sorted(filters.begin(), filters.end());
  std::sort(sorted.begin(), sorted.end());
  feed("filters");
  for (const auto& f : sorted)
    feed(f);
  return fmt::format("{:016x}", h);
}

observed_columns to_observed(const schema::table_schema& s) {
  observed_columns out;
  for (const auto& c : s.columns) {
    auto* o = out.Add();
    o->set_name(c.name);
    o->set_type(schema::to_string(c.type));
    o->set_nullable(c.nullable);
    o->set_key(c.key);
  }
  return out;
}

std::vector<column_change> compare_columns(const observed_columns& baseline,
                                           const observed_columns& observed) {
  std::unordered_map<std::string_view, const storage::pb::ObservedColumn*> now, before;
  for (const auto& c : observed)
    now.emplace(c.name(), &c);
  for (const auto& c : baseline)
    before.emplace(c.name(), &c);
  std::vector<column_change> out;
  for (const auto& b : baseline) {
    auto it = now.find(b.name());
    if (it == now.end())
      out.push_back({change_kind::removed, b.name(), b.type(), {}});
    // A column recorded with no values has no type yet: its first values type it.
    else if (it->second->type() != b.type() && !b.type().empty() && !it->second->type().empty())
      out.push_back({change_kind::retyped, b.name(), b.type(), it->second->type()});
  }
  for (const auto& o : observed)
    if (!before.contains(o.name()))
      out.push_back({change_kind::added, o.name(), {}, o.type()});
  return out;
}

drift_verdict evaluate_source_drift(const drift_input& in) {
  drift_verdict v;
  v.policy = in.policy;
  v.source = in.source;
  v.table = in.table;
  v.dataset = dataset_name(in.source, in.table);
  if (!drift_gate_applies(in.policy, in.has_declared_columns) ||
      (in.observed == nullptr && in.recorded == nullptr))
    return v;  // skip: nothing observed, nothing written, nothing said

  v.observed = in.observed != nullptr ? to_observed(*in.observed) : *in.recorded;
  // A column with no values: its baseline type where the baseline has one; else none
  // (an empty type), which its first values give it, never text or json from nothing.
  for (const auto& name : in.valueless)
    for (auto& o : v.observed)
      if (o.name() == name) {
        o.set_type("");
        if (in.baseline != nullptr)
          for (const auto& b : in.baseline->columns())
            if (b.name() == name)
              o.set_type(b.type());
      }
  v.hints_hash = in.hints_hash;
  auto baseline_now = [&] {
    storage::pb::SchemaBaseline b;
    *b.mutable_columns() = v.observed;
    b.set_hints_hash(in.hints_hash);
    b.set_run_id(in.run_id);
    b.set_recorded_at_us(in.now_us);
    return b;
  };
  // A table its plan refuses (a column that outgrew its type, a contract it cannot meet)
  // loads nothing: what was observed is no data a run read, and may be what the refusal
  // is about. No baseline is taken from it; the run that loads the table seeds it.
  if ((in.baseline == nullptr || in.baseline->hints_hash() != in.hints_hash) &&
      !in.refusal.empty()) {
    v.decision = drift_decision::not_seeded;
    if (in.baseline != nullptr)
      v.baseline_run_id = in.baseline->run_id();
    return v;
  }
  if (in.baseline == nullptr) {
    v.decision = drift_decision::seed;
    v.new_baseline = baseline_now();
    return v;
  }
  v.baseline_run_id = in.baseline->run_id();
  if (in.baseline->hints_hash() != in.hints_hash) {
    v.decision = drift_decision::reseed;
    v.new_baseline = baseline_now();
    return v;
  }
  v.changes = compare_columns(in.baseline->columns(), v.observed);
  if (v.changes.empty()) {
    v.decision = drift_decision::unchanged;
    // Columns the baseline has with no type (recorded with no values) that have values
    // now: their first type goes into the baseline, silently, as a first run's would.
    bool typed = false;
    storage::pb::SchemaBaseline filled = *in.baseline;
    for (auto& b : *filled.mutable_columns())
      if (b.type().empty())
        for (const auto& o : v.observed)
          if (o.name() == b.name() && !o.type().empty()) {
            b.set_type(o.type());
            typed = true;
          }
    if (typed)
      v.new_baseline = std::move(filled);
    return v;
  }
  const std::string what = describe_all(v.changes);
  const std::string since = v.baseline_run_id.empty()
                                ? std::string()
                                : fmt::format(" (baseline from run {})", v.baseline_run_id);
  if (in.policy == config::drift_policy::warn) {
    v.decision = drift_decision::warn;
    v.warning = fmt::format(
        "warning: source drift on {}: {}{}; warn does not hold the table back. The warning "
        "repeats every run until the change is accepted: flotilla schema accept {}",
        v.dataset, what, since, shell_word(v.dataset));
    return v;
  }
  v.decision = drift_decision::fail;
  v.error_code = code_name(errc::source_drift);
  if (in.planning)
    v.error = fmt::format(
        "source drift on {}: {}{}; on_source_drift = fail would stop the table before any "
        "target is written (`flotilla run` fails it{}). If the change is expected: `flotilla "
        "run` (it fails the table and records what it read; a plan records nothing), then "
        "`flotilla schema accept {}`, then {}",
        v.dataset, what, since,
        in.refusal.empty() ? std::string() : fmt::format("; the target refuses the change too: {}", in.refusal),
        shell_word(v.dataset),
        in.refusal.empty() ? std::string("`flotilla retry`")
                           : std::string("resolve the target's refusal as it says, then "
                                         "`flotilla run` (nothing is staged while the target "
                                         "refuses it)"));
  else if (!in.refusal.empty())
    v.error = fmt::format(
        "source drift on {}: {}{}; on_source_drift = fail stopped the table before any target "
        "was written; nothing was staged, as the target refuses the change too ({}). If the "
        "change is expected, run `flotilla schema accept {}`, resolve that refusal as it says, "
        "then `flotilla run`",
        v.dataset, what, since, in.refusal, shell_word(v.dataset));
  else
    v.error = fmt::format(
        "source drift on {}: {}{}; on_source_drift = fail stopped the table before any target "
        "was written, and its staged data is kept. If the change is expected, run `flotilla "
        "schema accept {}`, then `flotilla retry`",
        v.dataset, what, since, shell_word(v.dataset));
  return v;
}

std::expected<drift_verdict, std::string> check_source_drift(
    drift_input in,
    const std::function<std::expected<schema::table_schema, std::string>()>& describe,
    const std::function<std::expected<std::optional<storage::pb::SchemaBaseline>, std::string>()>&
        read_baseline) {
  in.observed = nullptr;
  in.recorded = nullptr;
  in.baseline = nullptr;
  if (!drift_gate_applies(in.policy, in.has_declared_columns))
    return evaluate_source_drift(in);
  auto observed = describe();
  if (!observed)
    return std::unexpected(std::move(observed.error()));
  auto baseline = read_baseline();
  if (!baseline)
    return std::unexpected(std::move(baseline.error()));
  in.observed = &*observed;
  in.baseline = *baseline ? &**baseline : nullptr;
  return evaluate_source_drift(in);
}

void record_observation(storage::pb::TableResult& result, const drift_verdict& v) {
  if (!v.checked())
    return;
  *result.mutable_observed_schema() = v.observed;
  result.set_has_observed_schema(true);
  result.set_hints_hash(v.hints_hash);
}

pb::Event source_drift_detected(const drift_verdict& v) {
  pb::Event e;
  e.set_source(v.source);
  e.set_table(v.table);
  e.set_type("source_drift_detected");
  auto* p = e.mutable_source_drift_detected();
  for (const auto& c : v.changes) {
    auto* x = p->add_changes();
    x->set_kind(std::string(to_string(c.kind)));
    x->set_column(c.column);
    x->set_from(c.from);
    x->set_to(c.to);
  }
  for (const auto& c : v.observed) {
    auto* x = p->add_observed();
    x->set_name(c.name());
    x->set_type(c.type());
    x->set_nullable(c.nullable());
  }
  p->set_hints_hash(v.hints_hash);
  p->set_baseline_run_id(v.baseline_run_id);
  p->set_policy(std::string(config::to_string(v.policy)));
  return e;
}

}  // namespace flotilla::events
