#include "runtime/argument_checks.h"

#include <algorithm>
#include <string>
#include <utility>

#include "collectives/algorithm.h"
#include "collectives/dtype.h"
#include "common/ranges.h"

namespace kolo {

std::vector<size_t> packed_or(const std::vector<size_t>& displs, const std::vector<size_t>& counts) {
  return displs.empty() ? packed_displs(counts) : displs;
}

Status unknown_dtype(DataType dtype) {
  return invalid_argument("unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

Status unknown_op(ReduceOp op) {
  return invalid_argument("unknown reduction op " + std::to_string(static_cast<int>(op)));
}

Status null_buffer(const char* name) { return invalid_argument(std::string(name) + " is NULL with count > 0"); }

Status check_root(int root, int size) {
  if (root < 0 || root >= size) {
    return invalid_argument("root " + std::to_string(root) + " is not a rank of a world of " + std::to_string(size));
  }
  return Status::ok();
}

Status check_counts(const std::vector<size_t>& counts, int size, const char* name) {
  if (counts.size() != static_cast<size_t>(size)) {
    return invalid_argument(std::string(name) + " needs one count per rank (" + std::to_string(size) + "), not " +
                            std::to_string(counts.size()));
  }
  return Status::ok();
}

Status check_blocks(const std::vector<size_t>& counts, const std::vector<size_t>& displs, int size, const char* name,
                    size_t* extent) {
  if (displs.size() != static_cast<size_t>(size)) {
    return invalid_argument(std::string(name) + " needs one displacement per rank (" + std::to_string(size) +
                            "), not " + std::to_string(displs.size()));
  }
  std::vector<std::pair<size_t, size_t>> blocks;  // (start, end), nonempty only
  *extent = 0;
  for (int q = 0; q < size; ++q) {
    if (counts[q] == 0) continue;
    blocks.emplace_back(displs[q], displs[q] + counts[q]);
    *extent = std::max(*extent, displs[q] + counts[q]);
  }
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].first < blocks[i - 1].second) {
      return invalid_argument(std::string(name) + " puts two ranks' blocks on the same elements");
    }
  }
  return Status::ok();
}

size_t total_of(const std::vector<size_t>& counts) {
  size_t t = 0;
  for (size_t c : counts) t += c;
  return t;
}

Status check_rooted_blocks(const RootedBlocks& a, std::vector<size_t>* displs, size_t* extent) {
  KOLO_RETURN_IF_ERROR(check_dtype(a.dtype));
  KOLO_RETURN_IF_ERROR(check_root(a.root, a.size));
  KOLO_RETURN_IF_ERROR(check_counts(a.counts, a.size, a.counts_name));
  if (a.counts[a.rank] != a.own_count) {
    return invalid_argument(std::string(a.own_count_name) + " " + std::to_string(a.own_count) + " differs from " +
                            a.counts_name + "[" + std::to_string(a.rank) + "] = " + std::to_string(a.counts[a.rank]));
  }
  KOLO_RETURN_IF_ERROR(check_buffer(a.own, a.own_count, a.own_name));
  *extent = 0;
  if (a.rank != a.root) return Status::ok();
  const size_t es = dtype_size(a.dtype);
  *displs = packed_or(a.displs_or_packed, a.counts);
  KOLO_RETURN_IF_ERROR(check_blocks(a.counts, *displs, a.size, "displs", extent));
  KOLO_RETURN_IF_ERROR(check_buffer(a.blocks, *extent, a.blocks_name));
  const void* roots_block = static_cast<const char*>(a.blocks) + (*displs)[a.root] * es;
  if (a.own != roots_block && ranges_overlap(a.own, a.own_count * es, a.blocks, *extent * es)) {
    return invalid_argument(std::string(a.own_name) + " overlaps " + a.blocks_name + " but is not root's block of it");
  }
  return Status::ok();
}

}  // namespace kolo
