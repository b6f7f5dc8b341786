#include "cdc/review_store.hpp"

namespace flotilla::cdc {

std::string edited_ddl_of(const pb::HoldRecord& h) {
  const auto trimmed = [](std::string_view v) {
    const auto b = v.find_first_not_of(" \t\r\n;");
    const auto e = v.find_last_not_of(" \t\r\n;");
    return b == std::string_view::npos ? std::string_view{} : v.substr(b, e - b + 1);
  };
  std::string out = h.earlier_edits();
  if (h.state() == pb::HOLD_STATE_RESUMED && !trimmed(h.applied_ddl()).empty() &&
      trimmed(h.applied_ddl()) != trimmed(h.proposed_ddl()))
    out += (out.empty() ? "" : ";\n") + h.applied_ddl();
  return out;
}

storage::result<review> create_review(storage::state_store& store, pb::HoldRecord draft,
                                      std::span<const pb::HeldChange> kept, std::int64_t now_us) {
  if (auto earlier = store.get_hold(draft.target(), draft.table()); earlier && *earlier) {
    // The edits of the table's earlier review (resumed) stay in force on the target.
    if ((*earlier)->state() == pb::HOLD_STATE_RESUMED)
      draft.set_earlier_edits(edited_ddl_of(**earlier));
    // A finished one is kept for `review list` (seed 003 lists finished reviews); the new
    // hold replaces the table's record.
    if (!is_open((*earlier)->state()) &&
        (*earlier)->created_at_us() != draft.created_at_us()) {
      auto note = store.get_hold_review(draft.target(), draft.table());
      pb::HoldRecord kept = **earlier;
      kept.set_target(draft.target());
      kept.set_table(draft.table());
      if (auto st = store.put_finished_review(kept, note && *note ? **note : std::string());
          !st)
        return std::unexpected(std::move(st.error()));
    }
  }
  review r = open_review(std::move(draft), now_us);
  // The record and the first kept changes together, then the note; a note missing after
  // a crash between the two reads as a fresh one (note_for), which is what was written.
  if (auto put = store.put_hold(r.hold.target(), r.hold.table(), r.hold, kept); !put)
    return std::unexpected(std::move(put.error()));
  if (auto st = save_review(store, r); !st)
    return std::unexpected(std::move(st.error()));
  return r;
}

storage::result<std::optional<review>> load_review(const storage::state_store& store,
                                                   std::string_view target,
                                                   std::string_view table) {
  auto hold = store.get_hold(target, table);
  if (!hold)
    return std::unexpected(std::move(hold.error()));
  if (!*hold)
    return std::nullopt;
  auto note = store.get_hold_review(target, table);
  if (!note)
    return std::unexpected(std::move(note.error()));
  review r;
  r.hold = std::move(**hold);
  r.note = note_for(r.hold, *note);
  return r;
}

storage::result<std::vector<review>> list_reviews(const storage::state_store& store,
                                                  std::string_view target) {
  auto holds = store.list_holds(target);
  if (!holds)
    return std::unexpected(std::move(holds.error()));
  std::vector<review> out;
  out.reserve(holds->size());
  for (auto& h : *holds) {
    auto note = store.get_hold_review(h.target, h.table);
    if (!note)
      return std::unexpected(std::move(note.error()));
    review r;
    r.hold = std::move(h.record);
    // The key is the truth; a record written without them still lists correctly.
    r.hold.set_target(h.target);
    r.hold.set_table(h.table);
    r.note = note_for(r.hold, *note);
    out.push_back(std::move(r));
  }
  return out;
}

storage::result<std::vector<review>> list_finished_reviews(const storage::state_store& store,
                                                           std::string_view target) {
  auto kept = store.list_finished_reviews(target);
  if (!kept)
    return std::unexpected(std::move(kept.error()));
  std::vector<review> out;
  out.reserve(kept->size());
  for (auto& f : *kept) {
    review r;
    r.hold = std::move(*f.mutable_hold());
    r.note = note_for(r.hold, f.note().empty() ? std::nullopt : std::optional(f.note()));
    out.push_back(std::move(r));
  }
  return out;
}

storage::status save_review(storage::state_store& store, const review& r) {
  return store.put_hold_review(r.hold.target(), r.hold.table(), r.hold, r.note.serialize());
}

storage::status finish_replay(storage::state_store& store, const review& r,
                              std::uint64_t last_sequence, std::int64_t now_us) {
  if (last_sequence > 0)
    if (auto st = store.remove_held_changes_through(r.hold.target(), r.hold.table(), last_sequence);
        !st)
      return st;
  return save_review(store, replay_finished(r, now_us));
}

storage::status finish_resync(storage::state_store& store, const review& r, bool ok,
                              std::string_view reason, std::int64_t now_us) {
  if (ok)
    if (auto st = store.clear_held_changes(r.hold.target(), r.hold.table()); !st)
      return st;
  return save_review(store, resync_finished(r, ok, reason, now_us));
}

}  // namespace flotilla::cdc
