#include "runtime/shrink_agreement.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/rank_list.h"

namespace kolo {
namespace {

constexpr char kMembersKey[] = "members";
std::string here_key(int rank) { return "here/" + std::to_string(rank); }

// Whether `key` is set now (one store round trip; no wait).
Status is_set(Store* store, const std::string& key, bool* set, std::string* value) {
  Status s = store->get_one(key, Deadline::after_seconds(0), value);
  *set = s.is_ok();
  return s.is_ok() || s.code() == Code::kTimeout ? Status::ok() : s;
}

}  // namespace

std::string encode_members(const std::vector<int>& members) {
  std::string out;
  for (size_t i = 0; i < members.size(); ++i) out += (i ? "," : "") + std::to_string(members[i]);
  return out;
}

Status decode_members(const std::string& text, int size, std::vector<int>* members) {
  members->clear();
  const Status bad = internal_error("the shrink's member list '" + text.substr(0, 64) + "' in the store is damaged");
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    if (end == at || end - at > 9) return bad;
    int rank = 0;
    for (size_t i = at; i < end; ++i) {
      if (text[i] < '0' || text[i] > '9') return bad;
      rank = rank * 10 + (text[i] - '0');
    }
    if (rank >= size || (!members->empty() && rank <= members->back())) return bad;
    members->push_back(rank);
    at = end + 1;
    if (end < text.size() && at == text.size()) return bad;  // a trailing comma
  }
  if (members->empty()) return bad;
  return Status::ok();
}

Status agree_on_members(Store* store, const ShrinkRequest& request, std::vector<int>* members) {
  KOLO_RETURN_IF_ERROR(store->set(here_key(request.rank), "1"));
  std::vector<int> proposal;
  std::string agreed;
  bool decided = false;
  if (!request.drop_unresponsive) {
    for (int r = 0; r < request.size; ++r) {
      if (!request.excluded[r]) proposal.push_back(r);
    }
  } else {
    std::vector<int> pending;
    for (int r = 0; r < request.size; ++r) {
      if (r == request.rank) proposal.push_back(r);
      else if (!request.excluded[r]) pending.push_back(r);
    }
    // Polled: the store waits for keys that all exist, while here each
    // rank counts once it has arrived or ended, whichever comes first.
    while (!pending.empty() && !decided) {
      std::vector<int> still;
      for (int r : pending) {
        bool here = false;
        std::string unused;
        KOLO_RETURN_IF_ERROR(is_set(store, here_key(r), &here, &unused));
        if (here) proposal.push_back(r);
        else if (!(request.departed && request.departed(r))) still.push_back(r);
      }
      pending.swap(still);
      KOLO_RETURN_IF_ERROR(is_set(store, kMembersKey, &decided, &agreed));
      if (pending.empty() || decided || request.deadline.expired()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::sort(proposal.begin(), proposal.end());
  }
  const std::string mine = encode_members(proposal);
  if (!decided) {
    KOLO_RETURN_IF_ERROR(
        store->set_if_absent(kMembersKey, mine, Deadline::after_seconds(request.store_timeout_s), &agreed));
  }
  KOLO_RETURN_IF_ERROR(decode_members(agreed, request.size, members));
  if (!request.drop_unresponsive && agreed != mine) {
    return mismatch("rank " + std::to_string(request.rank) + "'s shrink keeps " + ranks_named(proposal, 16) +
                    " but another survivor's keeps " + ranks_named(*members, 16) +
                    ": every survivor must exclude the same ranks");
  }
  if (!std::binary_search(members->begin(), members->end(), request.rank)) {
    return timeout_error("rank " + std::to_string(request.rank) + " is not in the shrunk communicator: the others "
                         "agreed on " + ranks_named(*members, 16) +
                         " without it (it arrived after they had stopped waiting)");
  }
  return Status::ok();
}

}  // namespace kolo
