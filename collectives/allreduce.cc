#include "collectives/allreduce.h"

#include <string>

#include "collectives/arena_allreduce.h"
#include "collectives/hierarchical.h"
#include "collectives/recursive_doubling.h"

namespace kolo {

const char* algorithm_name(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::kRecursiveDoubling:
      return "recursive_doubling";
    case AllreduceAlgorithm::kHierarchical:
      return "hierarchical";
    case AllreduceAlgorithm::kSharedMemory:
      return "shared_memory";
    default:
      return "ring";
  }
}

AllreduceAlgorithm choose_allreduce(const RingContext& ctx, size_t bytes) {
  if (bytes == 0 || ctx.size == 1) return AllreduceAlgorithm::kRing;
  if (ctx.hosts && bytes >= ctx.hierarchical_bytes) return AllreduceAlgorithm::kHierarchical;
  if (bytes <= ctx.small_allreduce_bytes) return AllreduceAlgorithm::kRecursiveDoubling;
  return ctx.arena ? AllreduceAlgorithm::kSharedMemory : AllreduceAlgorithm::kRing;
}

Status allreduce(const RingContext& ctx, const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return allreduce_spans(ctx, {Span{send, recv, count}}, dtype, op);
}

Status allreduce_spans(const RingContext& ctx, const std::vector<Span>& spans, DataType dtype, ReduceOp op) {
  const size_t elem_size = dtype_size(dtype);
  size_t total = 0;
  for (const Span& s : spans) total += s.count;
  const AllreduceAlgorithm algorithm = choose_allreduce(ctx, total * elem_size);
  if (algorithm == AllreduceAlgorithm::kHierarchical) return hierarchical_allreduce_spans(ctx, spans, dtype, op);
  if (algorithm == AllreduceAlgorithm::kSharedMemory) return arena_allreduce_spans(ctx, spans, dtype, op);
  if (algorithm == AllreduceAlgorithm::kRing) return ring_allreduce_spans(ctx, spans, dtype, op);
  if (spans.size() == 1) return recursive_doubling_allreduce(ctx, spans[0].send, spans[0].recv, total, dtype, op);
  // Several small spans: through one contiguous buffer, which costs little
  // next to the exchanges.
  auto* buf = static_cast<unsigned char*>(ctx.memory->scratch(total * elem_size));
  if (!buf) return device_error("cannot allocate " + std::to_string(total * elem_size) + " bytes of scratch memory");
  size_t at = 0;
  for (const Span& s : spans) {
    ctx.memory->copy(buf + at, s.send, s.count * elem_size);
    at += s.count * elem_size;
  }
  KOLO_RETURN_IF_ERROR(recursive_doubling_allreduce(ctx, buf, buf, total, dtype, op));
  at = 0;
  for (const Span& s : spans) {
    ctx.memory->copy(s.recv, buf + at, s.count * elem_size);
    at += s.count * elem_size;
  }
  return Status::ok();
}

}  // namespace kolo
