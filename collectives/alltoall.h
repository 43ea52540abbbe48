// All-to-all by pairwise exchange: every rank sends one block to every other
// rank and receives one from each, all posted at once so the transfers
// overlap. Needs a connection to every peer (the runtime engine makes them).
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/ring.h"

namespace kolo {

// send holds sum(send_counts) elements in rank order: send_counts[q] of them
// go to rank q. recv gets sum(recv_counts) elements in rank order:
// recv_counts[q] from rank q. send_counts[q] on rank r must equal
// recv_counts[r] on rank q (a difference is reported as MISMATCH).
Status pairwise_alltoall(const ScheduleContext& ctx, const void* send, const std::vector<size_t>& send_counts,
                         void* recv, const std::vector<size_t>& recv_counts, DataType dtype);

// The same with displacements: send_counts[q] elements from
// send + send_displs[q] go to rank q, recv_counts[q] from rank q land at
// recv + recv_displs[q].
Status pairwise_alltoall_displs(const ScheduleContext& ctx, const void* send, const std::vector<size_t>& send_counts,
                                const std::vector<size_t>& send_displs, void* recv,
                                const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                                DataType dtype);

}  // namespace kolo
