#include "runtime/negotiator.h"

#include <algorithm>

#include "collectives/dtype.h"
#include "common/rank_list.h"

namespace kolo {
namespace {

// What a rank's own engine already checked on submission; re-checked for
// requests from other ranks so that a corrupted one fails cleanly.
Status check_remote(const OpRequest& r, int size) {
  if (!valid_dtype(r.dtype)) return internal_error("request with an unknown dtype");
  if (!valid_op(r.op)) return internal_error("request with an unknown op");
  for (const auto& s : r.shapes) {
    for (int64_t d : s) {
      if (d < 0) return internal_error("request with a negative dimension");
    }
  }
  if ((r.kind == OpKind::kAllgather || r.kind == OpKind::kAlltoall) && (r.shapes.size() != 1 || r.shapes[0].empty())) {
    return internal_error("allgather/alltoall request without exactly one shaped tensor");
  }
  if (r.kind == OpKind::kAlltoall && r.splits.size() != static_cast<size_t>(size)) {
    return internal_error("alltoall request without one split per rank");
  }
  return Status::ok();
}

// Horovod's rule: only allreduces (and barriers) take joined ranks in, with
// neutral contributions; the collectives whose output depends on every
// rank's rows or on a root fail on every rank that runs them.
bool fails_while_joined(OpKind kind) {
  return kind == OpKind::kAllgather || kind == OpKind::kAlltoall || kind == OpKind::kBroadcast ||
         kind == OpKind::kReduceScatter;
}

}  // namespace

Negotiator::Negotiator(int rank, int size, size_t cache_capacity)
    : rank_(rank), size_(size), capacity_(cache_capacity), joined_(size, false) {}

Status Negotiator::add_local(const OpRequest& request, SteadyClock::time_point now) {
  if (joined_[rank_] || pending_join_) {
    return invalid_usage("'" + request.name + "' was submitted after this rank joined; submit it after the join completes");
  }
  auto it = local_.find(request.name);
  if (it != local_.end()) {
    return invalid_usage("a " + std::string(op_kind_name(it->second.request.kind)) + " named '" + request.name +
                         "' is already in flight on this rank; names must be unique until their operation completes");
  }
  Local l;
  l.request = request;
  l.submitted = now;
  local_.emplace(request.name, std::move(l));
  return Status::ok();
}

void Negotiator::add_internal(const OpRequest& request) { internal_.push_back(request); }

Status Negotiator::join() {
  if (joined_[rank_] || pending_join_) return invalid_usage("this rank has already joined");
  pending_join_ = true;
  return Status::ok();
}

void Negotiator::expose_older_than(SteadyClock::time_point cutoff) {
  for (auto& entry : local_) {
    Local& l = entry.second;
    if (l.state == LocalState::kBySlot && l.submitted < cutoff) {
      l.state = LocalState::kNew;
      l.expose = true;
    }
  }
}

bool Negotiator::has_news() const {
  if (rerun_ || !internal_.empty() || (pending_join_ && local_.empty())) return true;
  for (const auto& entry : local_) {
    if (entry.second.state == LocalState::kNew) return true;
  }
  return false;
}

SteadyClock::time_point Negotiator::oldest_local() const {
  auto oldest = SteadyClock::time_point::max();
  for (const auto& entry : local_) oldest = std::min(oldest, entry.second.submitted);
  return oldest;
}

bool Negotiator::matches_cache(const OpRequest& r, const OpResponse& cached) const {
  if (!first_difference(r, cached.spec).empty()) return false;
  if (r.kind == OpKind::kAllgather) return r.shapes[0][0] == cached.rows[rank_];
  if (r.kind == OpKind::kAlltoall) {
    return std::equal(r.splits.begin(), r.splits.end(), cached.rows.begin() + static_cast<long>(rank_) * size_);
  }
  return true;
}

RoundContribution Negotiator::begin_round() {
  rerun_ = false;
  RoundContribution c;
  round_slot_count_ = slots_.size();
  c.control.assign(1 + round_slot_count_, 0);
  std::vector<OpRequest> message;
  for (auto& entry : local_) {
    Local& l = entry.second;
    if (l.state == LocalState::kNew) {
      auto it = slot_of_.find(entry.first);
      if (!l.expose && it != slot_of_.end() && matches_cache(l.request, slots_[it->second].response)) {
        l.state = LocalState::kBySlot;
        l.slot = it->second;
      } else {
        message.push_back(l.request);
        l.state = LocalState::kSent;
        l.expose = false;
      }
    }
    if (l.state == LocalState::kBySlot) c.control[1 + l.slot] = 1;
  }
  // A joined rank holds no requests and takes part in whatever the others run.
  if (joined_[rank_]) std::fill(c.control.begin() + 1, c.control.end(), 1);
  if (pending_join_ && local_.empty()) {
    OpRequest j;
    j.name = "kolo.join";
    j.kind = OpKind::kJoin;
    message.push_back(j);
    pending_join_ = false;
  }
  for (auto& r : internal_) message.push_back(std::move(r));
  internal_.clear();
  c.control[0] = message.empty() ? 1 : 0;
  if (!message.empty()) c.message = encode_requests(message);
  return c;
}

void Negotiator::evict(size_t slot) {
  Slot& s = slots_[slot];
  if (!s.valid) return;
  s.valid = false;
  slot_of_.erase(s.response.spec.name);
  for (auto& entry : local_) {
    if (entry.second.state == LocalState::kBySlot && entry.second.slot == slot) entry.second.state = LocalState::kNew;
  }
}

void Negotiator::insert_cache(const OpResponse& response) {
  if (capacity_ == 0) return;
  size_t slot = slots_.size();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].valid) {
      slot = i;
      break;
    }
  }
  if (slot == slots_.size()) {
    if (slots_.size() < capacity_) {
      slots_.emplace_back();
    } else {
      slot = 0;  // least recently used; ties go to the lowest slot
      for (size_t i = 1; i < slots_.size(); ++i) {
        if (slots_[i].last_used < slots_[slot].last_used) slot = i;
      }
      evict(slot);
    }
  }
  Slot& s = slots_[slot];
  s.valid = true;
  s.response = response;
  s.response.joined.clear();
  s.response.error = Status::ok();
  s.last_used = ++use_counter_;
  slot_of_[response.spec.name] = slot;
}

void Negotiator::check_joined(OpResponse* r) const {
  if (r->joined.empty() || !r->error.is_ok()) return;
  const std::string what = std::string(op_kind_name(r->spec.kind)) + " '" + r->spec.name + "'";
  if (fails_while_joined(r->spec.kind)) {
    r->error = invalid_usage(what + " cannot run while " + ranks_named(r->joined) +
                             " have joined (only allreduce and barrier can)");
  }
}

OpResponse Negotiator::resolve(const std::string& name, const Entry& e) const {
  OpResponse resp;
  int first = -1;
  for (int q = 0; q < size_; ++q) {
    if (!e.present[q]) {
      if (joined_[q]) resp.joined.push_back(q);
      continue;
    }
    if (first < 0) first = q;
    Status bad = check_remote(e.requests[q], size_);
    if (!bad.is_ok()) {
      resp.spec = e.requests[q];
      resp.error = bad.with_context("'" + name + "' from rank " + std::to_string(q));
      return resp;
    }
  }
  resp.spec = e.requests[first];
  // The first field on which any rank differs from the lowest one; the error
  // groups every rank by its value of that field.
  for (int q = first + 1; q < size_; ++q) {
    if (!e.present[q]) continue;
    const std::string field = first_difference(e.requests[first], e.requests[q]);
    if (field.empty()) continue;
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (int p = 0; p < size_; ++p) {
      if (!e.present[p]) continue;
      const std::string v = field_value(e.requests[p], field);
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == v; });
      if (g == groups.end()) {
        groups.push_back({v, {p}});
      } else {
        g->second.push_back(p);
      }
    }
    std::string text = "'" + name + "': ranks disagree on the " + field + ":";
    for (size_t i = 0; i < groups.size(); ++i) {
      text += (i ? "; " : " ") + groups[i].first + " on " + ranks_named(groups[i].second);
    }
    resp.error = mismatch(text);
    return resp;
  }
  if (resp.spec.kind == OpKind::kAllgather) {
    resp.rows.assign(size_, 0);
    for (int q = 0; q < size_; ++q) {
      if (e.present[q]) resp.rows[q] = e.requests[q].shapes[0][0];
    }
  } else if (resp.spec.kind == OpKind::kAlltoall) {
    resp.rows.assign(static_cast<size_t>(size_) * size_, 0);
    for (int q = 0; q < size_; ++q) {
      if (e.present[q]) std::copy(e.requests[q].splits.begin(), e.requests[q].splits.end(), resp.rows.begin() + q * size_);
    }
    // Each rank's own first dimension must be what it sends.
  }
  check_joined(&resp);
  return resp;
}

Status Negotiator::finish_round(const std::vector<uint8_t>& reduced, const std::vector<std::string>& messages,
                                SteadyClock::time_point now, RoundOutcome* out) {
  *out = RoundOutcome();
  if (reduced.size() != 1 + round_slot_count_) return internal_error("negotiation: control vector has the wrong size");
  if (reduced[0] == 0 && messages.size() != static_cast<size_t>(size_)) {
    return internal_error("negotiation: some rank has a message but the messages are missing");
  }
  const std::vector<bool> joined_before = joined_;
  const bool all_joined_before = std::all_of(joined_before.begin(), joined_before.end(), [](bool j) { return j; });
  bool joins_changed = false;

  // 1. Every rank's new requests, in rank order.
  for (size_t q = 0; q < messages.size(); ++q) {
    if (messages[q].empty()) continue;
    std::vector<OpRequest> requests;
    KOLO_RETURN_IF_ERROR(decode_requests(messages[q], &requests).with_context("from rank " + std::to_string(q)));
    for (auto& r : requests) {
      switch (r.kind) {
        case OpKind::kShutdown:
          if (out->shutdown_rank < 0) out->shutdown_rank = static_cast<int>(q);
          continue;
        case OpKind::kStallAbort:
          out->stall_abort = r.name;
          continue;
        case OpKind::kJoin:
          joined_[q] = true;
          last_joined_ = static_cast<int>(q);
          joins_changed = true;
          continue;
        default: break;
      }
      auto cached = slot_of_.find(r.name);
      if (cached != slot_of_.end()) evict(cached->second);
      auto it = table_.find(r.name);
      if (it == table_.end()) {
        Entry e;
        e.present.assign(size_, false);
        e.requests.resize(size_);
        e.first_seen = now;
        it = table_.emplace(r.name, std::move(e)).first;
      }
      if (it->second.present[q]) {
        return internal_error("negotiation: rank " + std::to_string(q) + " announced '" + r.name + "' twice");
      }
      it->second.present[q] = true;
      it->second.requests[q] = std::move(r);
    }
  }

  // 2. Names every rank holds by cache slot.
  if (!all_joined_before) {
    std::vector<int> joined_list;
    for (int q = 0; q < size_; ++q) {
      if (joined_before[q]) joined_list.push_back(q);
    }
    for (size_t i = 0; i < round_slot_count_; ++i) {
      if (reduced[1 + i] != 1 || !slots_[i].valid) continue;
      OpResponse resp = slots_[i].response;
      resp.joined = joined_list;
      check_joined(&resp);  // (an allgather, alltoall, broadcast or reduce-scatter fails here)
      slots_[i].last_used = ++use_counter_;
      local_.erase(resp.spec.name);
      out->ready.push_back(std::move(resp));
      ++out->cache_hits;
    }
  }

  // 3. Table names that every rank has announced (or joined without), and
  // those that cannot run while a rank has joined: they fail at once on the
  // ranks that announced them, rather than wait for ranks that may never
  // announce them under this name (unnamed operations are numbered per
  // rank, and a rank that joined early skipped a number; Horovod waits,
  // and hangs, there).
  const bool any_joined = std::any_of(joined_.begin(), joined_.end(), [](bool j) { return j; });
  for (auto it = table_.begin(); it != table_.end();) {
    const Entry& e = it->second;
    bool complete = true;
    for (int q = 0; q < size_ && complete; ++q) complete = e.present[q] || joined_[q];
    if (!complete && any_joined) complete = fails_while_joined(e.kind());
    if (!complete) {
      ++it;
      continue;
    }
    OpResponse resp = resolve(it->first, e);
    if (resp.error.is_ok()) insert_cache(resp);
    local_.erase(it->first);
    out->ready.push_back(std::move(resp));
    it = table_.erase(it);
  }

  // 4. Join: done when every rank has joined; then everyone is released.
  if (std::all_of(joined_.begin(), joined_.end(), [](bool j) { return j; })) {
    out->join_done = true;
    out->last_joined = last_joined_;
    std::fill(joined_.begin(), joined_.end(), false);
    joins_changed = true;
  }
  // Requests held by slot were not ready with the old set of joined ranks;
  // with the new one they may be, and only another round can tell.
  if (joins_changed && !local_.empty()) rerun_ = true;
  return Status::ok();
}

std::vector<StalledName> Negotiator::stalled(SteadyClock::time_point now, double threshold_s) const {
  std::vector<StalledName> out;
  for (const auto& entry : table_) {
    const double age = std::chrono::duration<double>(now - entry.second.first_seen).count();
    if (age < threshold_s) continue;
    StalledName s;
    s.name = entry.first;
    s.age_s = age;
    for (int q = 0; q < size_; ++q) {
      if (entry.second.present[q]) {
        s.kind = entry.second.requests[q].kind;
        s.present.push_back(q);
      } else if (!joined_[q]) {
        s.missing.push_back(q);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kolo
