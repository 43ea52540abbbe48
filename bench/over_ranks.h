// Reducing a per-rank measurement to the job's figure: the slowest rank's.
#pragma once

#include "bindings/c/kolo.h"

namespace kolo::bench {

inline kolo_result_t max_over_ranks(kolo_comm_t comm, double mine, double* worst) {
  return kolo_allreduce(comm, &mine, worst, 1, KOLO_FLOAT64, KOLO_MAX);
}

}  // namespace kolo::bench
