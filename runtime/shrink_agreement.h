// How the survivors of a shrink agree on the members of the new
// communicator, through the rendezvous store alone. No rank of the old
// communicator is trusted to be there (it may be dead, or alive and stuck),
// so none leads and none is waited for past the deadline: each survivor
// says it is here, and the first proposal written (set_if_absent) is the
// one every survivor adopts.
//
// With the ranks to exclude given, a survivor's proposal is every other
// rank, and proposals that differ are a MISMATCH (the survivors disagree on
// whom to exclude). Dropping the unresponsive too, a survivor proposes the
// ranks it has seen arrive, waiting until every rank has arrived, is known
// to have ended (its store connection closed), or the deadline passes; a
// survivor that finds a proposal already written takes it at once.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "transport/store.h"

namespace kolo {

struct ShrinkRequest {
  int rank = 0;  // this rank, in the old communicator
  int size = 1;
  std::vector<bool> excluded;       // by the caller, per rank
  bool drop_unresponsive = false;   // also without every rank that does not arrive
  // Whether rank r's process has ended, as the store saw it; may be empty.
  std::function<bool(int)> departed;
  // Until when a survivor waits for the others to arrive.
  Deadline deadline = Deadline::after_seconds(0);
  // How long one store call may take (the communicator's timeout).
  double store_timeout_s = 30;
};

// `store` holds only this shrink's keys. *members: old ranks in the new
// order (ascending). A survivor left out of what was agreed (it arrived
// after the others stopped waiting) gets an error saying so.
Status agree_on_members(Store* store, const ShrinkRequest& request, std::vector<int>* members);

// The members as the store keeps them ("0,2,3"), and back: a damaged or
// impossible list (a rank out of [0, size), not ascending) is refused.
std::string encode_members(const std::vector<int>& members);
Status decode_members(const std::string& text, int size, std::vector<int>* members);

}  // namespace kolo
