// The rooted collectives (reduce, gather, scatter) and the "v" forms with
// displacements (allgatherv, alltoallv), over any Transport.
//
// Reduce, gather and scatter run as pipelined chains around the ring, the
// way ring_broadcast does: data moves segment by segment over the ring's
// own connections, and a rank forwards each segment as soon as it has it.
// Why a relay and not direct sends to or from the root: the root's link
// carries the same (N-1) blocks either way (gather, scatter) or one buffer
// (reduce), and with segments overlapping along the chain the relay costs
// about that link's time plus N-1 segment latencies; it needs no
// connections beyond the ring's, so a world communicator can run it as
// connected. Every chain starts with an empty frame each way between
// neighbours (ranks that disagree about the root could otherwise all wait
// to receive) and ends with an empty token making one lap of the ring (as
// ring_broadcast's does), so that ranks that disagree about the call
// (root, counts, collective) all fail with MISMATCH instead of some
// finishing.
//
// Arguments are already validated by the caller (runtime/communicator).
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/ring.h"

namespace kolo {

// root's recv = reduction of every rank's send (count elements); recv is
// used on root only (send == recv in place there). AVG divides by size.
// The chain starts at root + 1: each rank receives the partial result from
// its left, reduces its own data in and forwards it to the right; the root
// reduces last.
Status ring_reduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                   int root);

// Rank q's send (counts[q] elements) lands at root's recv + displs[q]
// elements. counts is the same on every rank; displs is read on root only.
// On root, send == recv + displs[root] is in place (no copy).
Status ring_gather_v(const ScheduleContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                     const std::vector<size_t>& displs, DataType dtype, int root);

// Rank q's recv gets counts[q] elements from root's send + displs[q].
// counts is the same on every rank; displs is read on root only. On root,
// recv == send + displs[root] is in place (no copy).
Status ring_scatter_v(const ScheduleContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                      const std::vector<size_t>& displs, DataType dtype, int root);

// ring_allgather_v with rank q's block at recv + displs[q]: blocks in rank
// order one after another go straight into recv; any other layout is
// gathered into scratch and copied out (one local copy of the result).
// send == recv + displs[rank] is in place.
Status ring_allgather_displs(const ScheduleContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                             const std::vector<size_t>& displs, DataType dtype);

}  // namespace kolo
