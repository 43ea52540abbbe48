// Memory that every rank of a communicator maps, when all of them run on
// one host, with a barrier among them: what the shared-memory allreduce
// (collectives/arena_allreduce.h) runs on. Each rank owns a slot that it
// writes and every rank may read between barriers, so a rank reduces its
// share of a buffer reading its peers' data where they put it, with no
// message in between.
#pragma once

#include <cstddef>

#include "common/deadline.h"
#include "common/status.h"

namespace kolo {

class SharedArena {
 public:
  virtual ~SharedArena() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual size_t slot_bytes() const = 0;
  // Rank r's slot: written by r only, read by every rank between barriers.
  virtual unsigned char* slot(int r) = 0;

  // Returns once every rank has called it as many times: what each wrote
  // before its call is then visible to all. Fails at the deadline (TIMEOUT
  // naming the ranks not there), on abort(), or when a rank closes its end
  // or its process ends (PEER_LOST naming it), within a tenth of a second.
  virtual Status barrier(Deadline deadline) = 0;

  // Makes every current and later barrier() fail here, and in the other
  // ranks as a closed peer. Any thread.
  virtual void abort() = 0;

  // Where in every slot the next chunk goes, for the algorithms' own
  // bookkeeping (the same on every rank): halves alternate across chunks
  // and calls, since the ranks may still read the other half, so one
  // barrier per chunk keeps writers and readers apart.
  size_t next_half() { return (chunks++ % 2) * (slot_bytes() / 2); }
  uint64_t chunks = 0;  // chunks moved through the slots so far
};

}  // namespace kolo
