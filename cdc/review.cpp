#include "cdc/review.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "cdc/outcome.hpp"

namespace flotilla::cdc {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

std::int64_t parse_i64(std::string_view s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::uint32_t fnv1a(std::string_view s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

refusal refuse(std::string_view code, std::string message, std::string hint = {}) {
  return refusal{std::string(code), std::move(message), std::move(hint)};
}

/// Earlier position first; equal positions by creation time.
bool earlier(const pb::HoldRecord& a, const pb::HoldRecord& b) {
  if (a.created_at_us() != b.created_at_us())
    return a.created_at_us() < b.created_at_us();
  return a.position() < b.position();
}

}  // namespace

std::string_view state_label(pb::HoldState s) {
  switch (s) {
    case pb::HOLD_STATE_AWAITING_REVIEW: return "paused: awaiting review";
    case pb::HOLD_STATE_APPLYING: return "applying";
    case pb::HOLD_STATE_LAST_DECISION_FAILED: return "paused: last decision failed";
    case pb::HOLD_STATE_AWAITING_RESYNC: return "paused: awaiting resync";
    case pb::HOLD_STATE_RESUMED: return "resumed";
    case pb::HOLD_STATE_REMOVED: return "removed from pipeline";
    default: return "unknown";
  }
}

std::string_view state_name(pb::HoldState s) {
  switch (s) {
    case pb::HOLD_STATE_AWAITING_REVIEW: return "awaiting_review";
    case pb::HOLD_STATE_APPLYING: return "applying";
    case pb::HOLD_STATE_LAST_DECISION_FAILED: return "last_decision_failed";
    case pb::HOLD_STATE_AWAITING_RESYNC: return "awaiting_resync";
    case pb::HOLD_STATE_RESUMED: return "resumed";
    case pb::HOLD_STATE_REMOVED: return "removed";
    default: return "unknown";
  }
}

bool is_open(pb::HoldState s) {
  return s == pb::HOLD_STATE_AWAITING_REVIEW || s == pb::HOLD_STATE_APPLYING ||
         s == pb::HOLD_STATE_LAST_DECISION_FAILED || s == pb::HOLD_STATE_AWAITING_RESYNC;
}

std::string kind_label(std::string_view kind) {
  std::string out(kind);
  for (auto& c : out)
    if (c == '_')
      c = ' ';
  return out;
}

std::string_view to_string(decision_kind k) {
  switch (k) {
    case decision_kind::apply_proposed: return "apply_proposed";
    case decision_kind::apply_edited: return "apply_edited";
    case decision_kind::resync: return "resync";
    case decision_kind::resync_edited: return "resync_edited";
    case decision_kind::remove: return "remove";
  }
  return "unknown";
}

std::optional<decision_kind> parse_decision_kind(std::string_view s) {
  for (auto k : {decision_kind::apply_proposed, decision_kind::apply_edited, decision_kind::resync,
                 decision_kind::resync_edited, decision_kind::remove})
    if (to_string(k) == s)
      return k;
  return std::nullopt;
}

std::string_view to_string(resync_state s) {
  switch (s) {
    case resync_state::none: return "none";
    case resync_state::requested: return "requested";
    case resync_state::running: return "running";
    case resync_state::failed: return "failed";
    case resync_state::done: return "done";
  }
  return "none";
}

// ---- the note ---------------------------------------------------------------------------

std::string review_note::serialize() const {
  auto clean = [](std::string v) {
    for (auto& c : v)
      if (c == '\n' || c == '\r')
        c = ' ';
    return v;
  };
  return fmt::format(
      "hold_created_at_us={}\ndecision={}\nphase={}\ndecided_at_us={}\nddl_ran={}\nresync={}\n"
      "resync_operation={}\nresync_error={}\n",
      hold_created_at_us, clean(decision), clean(phase), decided_at_us, ddl_ran ? 1 : 0,
      to_string(resync), clean(resync_operation), clean(resync_error));
}

review_note review_note::parse(std::string_view text) {
  review_note n;
  while (!text.empty()) {
    auto eol = text.find('\n');
    auto line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    auto eq = line.find('=');
    if (eq == std::string_view::npos)
      continue;
    auto k = line.substr(0, eq);
    auto v = line.substr(eq + 1);
    if (k == "hold_created_at_us")
      n.hold_created_at_us = parse_i64(v);
    else if (k == "decision")
      n.decision = v;
    else if (k == "phase")
      n.phase = v;
    else if (k == "decided_at_us")
      n.decided_at_us = parse_i64(v);
    else if (k == "ddl_ran")
      n.ddl_ran = v == "1";
    else if (k == "resync") {
      for (auto s : {resync_state::none, resync_state::requested, resync_state::running,
                     resync_state::failed, resync_state::done})
        if (to_string(s) == v)
          n.resync = s;
    } else if (k == "resync_operation")
      n.resync_operation = v;
    else if (k == "resync_error")
      n.resync_error = v;
  }
  return n;
}

review_note note_for(const pb::HoldRecord& hold, const std::optional<std::string>& stored) {
  if (stored) {
    auto n = review_note::parse(*stored);
    if (n.hold_created_at_us == hold.created_at_us())
      return n;
  }
  review_note n;
  n.hold_created_at_us = hold.created_at_us();
  return n;
}

// ---- review -----------------------------------------------------------------------------

std::string review::name() const { return fmt::format("{} {}", hold.target(), hold.table()); }

std::string review::short_id() const {
  // Each review of a table its own id: the hold's creation time is part of it.
  std::string key = hold.target();
  key.push_back('\0');
  key += hold.table();
  key.push_back('\0');
  key += std::to_string(hold.created_at_us());
  return fmt::format("{:08x}", fnv1a(key));
}

std::string review::decision_id() const {
  return fmt::format("{}/{}/{}/{}", hold.target(), hold.table(), hold.created_at_us(),
                     note.decided_at_us);
}

std::string review::resync_status() const {
  if (note.resync == resync_state::none)
    return {};
  const std::string op = note.resync_operation.empty() ? std::string("of the table")
                                                       : note.resync_operation;
  std::string state(to_string(note.resync));
  if (note.resync == resync_state::failed && !note.resync_error.empty())
    state += " (" + note.resync_error + ")";
  return fmt::format("Resync {}: {}", op, state);
}

bool review::ddl_was_tried() const {
  // Failed, or removed after it failed: the DDL did not commit.
  return (hold.state() == pb::HOLD_STATE_LAST_DECISION_FAILED ||
          hold.state() == pb::HOLD_STATE_REMOVED) &&
         !hold.applied_ddl().empty() && !note.ddl_ran;
}

namespace {
/// Characters of UTF-8 text (seed 003 counts the DDL's limit in characters): every byte
/// that does not continue a sequence.
std::size_t utf8_length(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}
}  // namespace

std::string wrong_state_message(pb::HoldState s) {
  // A decision taken and not carried out yet: only the stream carries it out.
  if (s == pb::HOLD_STATE_APPLYING)
    return fmt::format("This review is {}; it does not accept a decision. Its decision is "
                       "taken: start `flotilla stream`, which carries it out (it replays the "
                       "kept changes, then the table resumes).",
                       state_label(s));
  return fmt::format("This review is {}; it does not accept a decision.", state_label(s));
}

bool has_transaction_control(std::string_view ddl) {
  // Look at the first word of every statement, outside comments. Quoted text is not
  // parsed: a keyword inside a string literal at a statement start is a false alarm
  // that the user can avoid, never a missed BEGIN.
  bool at_start = true;
  std::size_t i = 0;
  while (i < ddl.size()) {
    const char c = ddl[i];
    if (c == '-' && i + 1 < ddl.size() && ddl[i + 1] == '-') {
      auto eol = ddl.find('\n', i);
      i = eol == std::string_view::npos ? ddl.size() : eol + 1;
      continue;
    }
    if (c == ';') {
      at_start = true;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (at_start) {
      std::size_t j = i;
      std::string word;
      while (j < ddl.size() && std::isalpha(static_cast<unsigned char>(ddl[j])))
        word += static_cast<char>(std::toupper(static_cast<unsigned char>(ddl[j++])));
      if (word == "BEGIN" || word == "COMMIT" || word == "ROLLBACK" || word == "START" ||
          word == "END" || word == "ABORT" || word == "SAVEPOINT" || word == "RELEASE")
        return true;
      at_start = false;
    }
    // skip to the end of the statement, stepping over quoted text
    if (c == '\'' || c == '"') {
      auto close = ddl.find(c, i + 1);
      i = close == std::string_view::npos ? ddl.size() : close + 1;
      continue;
    }
    if (c == '$') {  // a dollar-quoted body (DO $x$ ... $x$) may hold semicolons
      auto tag_end = ddl.find('$', i + 1);
      if (tag_end != std::string_view::npos) {
        auto tag = ddl.substr(i, tag_end - i + 1);
        bool plain = true;
        for (char t : tag.substr(1, tag.size() - 2))
          plain = plain && (std::isalnum(static_cast<unsigned char>(t)) || t == '_');
        if (plain) {
          auto close = ddl.find(tag, tag_end + 1);
          i = close == std::string_view::npos ? ddl.size() : close + tag.size();
          continue;
        }
      }
    }
    ++i;
  }
  return false;
}

// ---- decisions ----------------------------------------------------------------------------

std::expected<decision_plan, refusal> check_decision(const review& r, const decision& d,
                                                     std::span<const review> same_table) {
  const auto state = r.hold.state();
  if (!is_open(state) || state == pb::HOLD_STATE_APPLYING)
    return std::unexpected(refuse(
        code_wrong_state, wrong_state_message(state),
        state == pb::HOLD_STATE_APPLYING
            ? "start `flotilla stream`: it carries the decision out"
            : "`flotilla review list` shows the reviews that take a decision now"));

  // While the table is being copied again the review takes no other decision: the copy's
  // result decides. Removing the table is taken at any time (seed 003: "You can remove
  // the table at any time"): a copy only asked for, or waiting for its slot, is called off;
  // one under way commits, and the table then leaves the stream.
  if ((r.note.resync == resync_state::running || r.note.resync == resync_state::requested) &&
      d.kind != decision_kind::remove)
    return std::unexpected(refuse(code_resync_bound, std::string(resync_bound_message)));

  // A replay that reached a kept change the stream cannot carry: applying again would stop
  // the stream again, for every table.
  if (state == pb::HOLD_STATE_LAST_DECISION_FAILED && r.note.phase == "stopped" &&
      (d.kind == decision_kind::apply_proposed || d.kind == decision_kind::apply_edited))
    return std::unexpected(refuse(
        code_wrong_state,
        "The kept changes of this table hold a change the stream cannot carry (the review's "
        "error names it): applying would stop the stream again. Resync the table (flotilla "
        "review resync), or remove it, or reload the stream (flotilla stream --reload)"));

  decision_plan p;
  p.kind = d.kind;
  if (d.kind == decision_kind::remove) {  // otherwise allowed at any time while open
    p.remove = true;
    return p;
  }

  for (const auto& o : same_table) {
    if (o.hold.target() != r.hold.target() || o.hold.table() != r.hold.table())
      continue;
    if (!is_open(o.hold.state()) || !earlier(o.hold, r.hold))
      continue;
    return std::unexpected(refuse(
        code_not_earliest,
        fmt::format("Decide the reviews of {} in order, earliest first: {} is {}.", r.hold.table(),
                    o.hold.source_change(), state_label(o.hold.state()))));
  }

  if (r.note.resync == resync_state::failed)
    return std::unexpected(refuse(code_resync_failed, std::string(resync_failed_message)));

  const bool edited = d.kind == decision_kind::apply_edited || d.kind == decision_kind::resync_edited;
  if (edited) {
    if (trim(d.ddl).empty())
      return std::unexpected(refuse(code_no_ddl,
                                    "The edited DDL is empty; give the DDL (a comment-only DDL "
                                    "runs nothing on the target)."));
    if (utf8_length(d.ddl) > max_ddl_chars)
      return std::unexpected(refuse(code_too_long, std::string(too_long_message)));
  }

  const bool resync = d.kind == decision_kind::resync || d.kind == decision_kind::resync_edited;
  if (!resync && state == pb::HOLD_STATE_AWAITING_RESYNC)
    return std::unexpected(refuse(
        code_wrong_state,
        fmt::format("This review is {}; it accepts only resync or remove.", state_label(state))));

  p.resync = resync;
  switch (d.kind) {
    case decision_kind::apply_proposed:
      // Once the review's DDL ran, applying again replays the kept changes under it.
      if (r.note.ddl_ran) {
        p.ddl = r.hold.applied_ddl();
        break;
      }
      if (needs_edit(r.hold.proposed_ddl()))
        return std::unexpected(refuse(code_needs_edit, std::string(needs_edit_message),
                                      std::string(needs_edit_hint)));
      p.ddl = r.hold.proposed_ddl();
      break;
    case decision_kind::apply_edited:
      // DDL that ran is never run again, and no other DDL runs in its place: the review
      // would show as applied DDL that never ran.
      if (r.note.ddl_ran && trim(d.ddl) != trim(r.hold.applied_ddl()))
        return std::unexpected(refuse(code_resync_ddl_bound, std::string(apply_ddl_bound_message)));
      p.ddl = r.note.ddl_ran ? r.hold.applied_ddl() : d.ddl;
      break;
    case decision_kind::resync:
      if (r.note.ddl_ran) {
        p.ddl = r.hold.applied_ddl();
      } else {
        if (needs_edit(r.hold.proposed_ddl()))
          return std::unexpected(refuse(code_resync_needs_edit,
                                        std::string(resync_needs_edit_message),
                                        std::string(resync_needs_edit_message)));
        p.ddl = r.hold.proposed_ddl();
      }
      break;
    case decision_kind::resync_edited:
      if (r.note.ddl_ran && trim(d.ddl) != trim(r.hold.applied_ddl()))
        return std::unexpected(refuse(code_resync_ddl_bound, std::string(resync_ddl_bound_message)));
      p.ddl = r.note.ddl_ran ? r.hold.applied_ddl() : d.ddl;
      break;
    case decision_kind::remove: break;
  }
  if (has_transaction_control(p.ddl))
    return std::unexpected(refuse(code_transaction_control,
                                  "The DDL holds BEGIN, COMMIT or ROLLBACK; Flotilla runs it in "
                                  "one transaction of its own: leave them out."));
  p.run_ddl = !r.note.ddl_ran && !comment_only(p.ddl);
  return p;
}

// ---- transitions -----------------------------------------------------------------------------

review open_review(pb::HoldRecord draft, std::int64_t now_us) {
  review r;
  r.hold = std::move(draft);
  r.hold.set_state(pb::HOLD_STATE_AWAITING_REVIEW);
  r.hold.set_created_at_us(now_us);
  r.hold.set_updated_at_us(now_us);
  r.hold.clear_applied_ddl();
  r.hold.clear_error();
  r.note.hold_created_at_us = now_us;
  return r;
}

review begin_decision(const review& r, const decision_plan& p, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  out.note.decision = std::string(to_string(p.kind));
  out.note.decided_at_us = now_us;
  if (p.remove) {
    out.hold.set_state(pb::HOLD_STATE_REMOVED);
    out.note.phase.clear();
    // The last failure stays as what happened; its call for a decision is answered.
    if (auto e = out.hold.error(); e.ends_with(" Decide again.")) {
      e.resize(e.size() - std::string_view(" Decide again.").size());
      out.hold.set_error(e);
    }
    // A resync asked for, or waiting for its slot, is called off by the removal (seed 003).
    if (out.note.resync == resync_state::requested || out.note.resync == resync_state::running)
      out.note.resync = resync_state::none;
    return out;
  }
  out.hold.set_state(pb::HOLD_STATE_APPLYING);
  out.hold.set_applied_ddl(p.ddl);
  out.hold.clear_error();
  out.note.phase = "ddl";
  return out;
}

review decision_succeeded(const review& r, const decision_plan& p, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  out.hold.clear_error();
  // The review's DDL is applied (a comment-only one ran nothing): a later resync must
  // use it as it is, and it never runs again.
  out.note.ddl_ran = true;
  out.note.phase.clear();
  if (p.resync) {
    out.hold.set_state(pb::HOLD_STATE_AWAITING_RESYNC);
    out.note.resync = resync_state::requested;
    out.note.resync_operation.clear();
    out.note.resync_error.clear();
  } else if (r.hold.requires_resync()) {
    out.hold.set_state(pb::HOLD_STATE_AWAITING_RESYNC);
  } else {
    out.hold.set_state(pb::HOLD_STATE_APPLYING);
    out.note.phase = "replay";
  }
  return out;
}

review decision_failed(const review& r, const decision_plan& p, std::string_view reason,
                       std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  out.hold.set_state(pb::HOLD_STATE_LAST_DECISION_FAILED);
  out.hold.set_applied_ddl(p.ddl);
  out.hold.set_error(fmt::format("apply DDL failed: {}", reason));
  out.note.phase.clear();
  return out;
}

review decision_interrupted(const review& r, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  out.hold.set_state(pb::HOLD_STATE_LAST_DECISION_FAILED);
  out.hold.set_error(
      "the decision was interrupted by a restart before its DDL committed; it changed nothing. "
      "Decide again.");
  out.note.phase.clear();
  return out;
}

review resync_interrupted(const review& r, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  out.hold.set_error(fmt::format(
      "the resync{} was interrupted by a restart before its copy committed; the target table "
      "is as it was before it, and the table stays held. Decide again: resync or remove",
      r.note.resync_operation.empty() ? "" : " " + r.note.resync_operation));
  out.note.resync = resync_state::none;
  out.note.resync_operation.clear();
  return out;
}

review replay_failed(const review& r, std::string_view reason, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  out.hold.set_state(pb::HOLD_STATE_LAST_DECISION_FAILED);
  out.hold.set_error(fmt::format(
      "replaying the kept changes failed: {}; none of them was applied and the table stays "
      "held. Make the target table fit them and apply again, or resync the table, or remove it",
      reason));
  out.note.phase.clear();
  return out;
}

std::string_view decisions_accepted(const review& r) {
  const auto state = r.hold.state();
  if (r.note.resync == resync_state::failed)
    return "remove (or a `flotilla stream --reload`)";
  // A copy asked for and not started: the stream carries it out; only removing the
  // table calls it off (check_decision).
  if (resync_requested(r))
    return "";
  if (state == pb::HOLD_STATE_AWAITING_RESYNC ||
      (state == pb::HOLD_STATE_LAST_DECISION_FAILED && r.note.phase == "stopped"))
    return "resync or remove";
  // A proposal that is only comments (no DDL fits the change): it takes an edit first.
  if (!r.note.ddl_ran && needs_edit(r.hold.proposed_ddl()))
    return "edit (review edit --apply or --resync) or remove";
  if (state == pb::HOLD_STATE_APPLYING)
    return "";
  return "apply, edit, resync or remove";
}

review replay_stopped(const review& r, std::string_view reason, std::int64_t now_us) {
  review out = replay_failed(r, reason, now_us);
  out.hold.set_error(fmt::format(
      "replaying the kept changes reached a change that stops the stream: {}. The changes "
      "before it were applied; the table stays held at it. Resync the table (flotilla review "
      "resync), or remove it, or reload the stream (flotilla stream --reload)",
      reason));
  out.note.phase = "stopped";  // apply would stop the stream again: check_decision refuses it
  return out;
}

review replay_finished(const review& r, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  out.hold.set_state(pb::HOLD_STATE_RESUMED);
  out.note.phase.clear();
  return out;
}

review resync_started(const review& r, std::string operation, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  out.note.resync = resync_state::running;
  out.note.resync_operation = std::move(operation);
  return out;
}

review resync_finished(const review& r, bool ok, std::string_view reason, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  if (ok) {
    out.note.resync = resync_state::done;
    out.hold.set_state(pb::HOLD_STATE_RESUMED);
    out.hold.clear_error();
  } else {
    out.note.resync = resync_state::failed;
    out.note.resync_error = std::string(reason);
    out.hold.set_error(fmt::format("resync failed: {}. {}", reason, resync_failed_message));
  }
  return out;
}

review closed_by_reload(const review& r, std::int64_t now_us) {
  review out = r;
  out.hold.set_updated_at_us(now_us);
  // Closed by the reload, not decided: marked so, as a removed review the reload copied
  // again is (`review show`: superseded by a reload).
  if (is_open(out.hold.state())) {
    out.hold.set_state(pb::HOLD_STATE_RESUMED);
    out.note.phase = "reloaded";
  } else {
    out.note.phase.clear();
  }
  return out;
}

bool ready_to_replay(const review& r) {
  return r.hold.state() == pb::HOLD_STATE_APPLYING && r.note.phase == "replay";
}

bool resync_requested(const review& r) {
  return r.hold.state() == pb::HOLD_STATE_AWAITING_RESYNC && r.note.resync == resync_state::requested;
}

bool holds_table(const review& r) { return is_open(r.hold.state()); }

}  // namespace flotilla::cdc
