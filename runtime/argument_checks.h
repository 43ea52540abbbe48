// The checks of a collective's arguments, before anything is queued or
// sent: each failure is invalid_argument naming what was wrong. Pure (no
// communicator), so each is unit-tested (argument_checks_test.cc).
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/dtype.h"
#include "common/status.h"

namespace kolo {

// displs: empty means blocks in rank order, one after another.
std::vector<size_t> packed_or(const std::vector<size_t>& displs, const std::vector<size_t>& counts);
size_t total_of(const std::vector<size_t>& counts);

// The refusals of the checks below, out of line: the checks themselves are
// inline, as every call makes several.
Status unknown_dtype(DataType dtype);
Status unknown_op(ReduceOp op);
Status null_buffer(const char* name);

// The C++ API takes the enums, but a value cast from a caller's int may be
// none of them: refused, naming it.
inline Status check_dtype(DataType dtype) {
  return valid_dtype(static_cast<int>(dtype)) ? Status::ok() : unknown_dtype(dtype);
}
inline Status check_op(ReduceOp op) { return valid_op(static_cast<int>(op)) ? Status::ok() : unknown_op(op); }
// NULL is allowed only with nothing to move.
inline Status check_buffer(const void* p, size_t count, const char* name) {
  return p == nullptr && count > 0 ? null_buffer(name) : Status::ok();
}
// A reducing collective's arguments: its dtype, op and both buffers.
inline Status check_reduction(DataType dtype, ReduceOp op, const void* send, const void* recv, size_t count) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  KOLO_RETURN_IF_ERROR(check_buffer(send, count, "sendbuf"));
  return check_buffer(recv, count, "recvbuf");
}
Status check_root(int root, int size);
// One count per rank.
Status check_counts(const std::vector<size_t>& counts, int size, const char* name);
// The blocks [displs[q], displs[q] + counts[q]) of one buffer: one per rank
// and no two overlapping. Sets *extent to the elements they span.
Status check_blocks(const std::vector<size_t>& counts, const std::vector<size_t>& displs, int size, const char* name,
                    size_t* extent);

// gatherv and scatterv mirror each other: every rank has a block of its own
// (`own`, own_count elements), the root a buffer holding every rank's block
// at its displacement (`blocks`). Checks both and gives the root's
// displacements and the elements its buffer spans.
struct RootedBlocks {
  DataType dtype;
  int root, rank, size;
  const std::vector<size_t>& counts;
  const char* counts_name;
  const std::vector<size_t>& displs_or_packed;
  const void* own;
  size_t own_count;
  const char* own_name;  // "sendbuf" in a gather
  const char* own_count_name;
  const void* blocks;
  const char* blocks_name;
};
Status check_rooted_blocks(const RootedBlocks& a, std::vector<size_t>* displs, size_t* extent);

}  // namespace kolo
