// The engine's submissions as the tests make them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/dtype.h"
#include "runtime/submission.h"

namespace kolo {

// One tensor of `shape` named `name`, of any kind, with the buffers its
// kind takes (broadcast: its buffer in recvs alone; allgather and alltoall:
// sends alone, the handle keeping the output).
inline Submission one_tensor_submission(const std::string& name, OpKind kind, std::vector<int64_t> shape,
                                        std::vector<const void*> sends, std::vector<void*> recvs,
                                        int dtype = static_cast<int>(DataType::kFloat32),
                                        int op = static_cast<int>(ReduceOp::kSum)) {
  Submission s;
  s.request.name = name;
  s.request.kind = kind;
  s.request.dtype = dtype;
  s.request.op = op;
  s.request.shapes = {std::move(shape)};
  s.sends = std::move(sends);
  s.recvs = std::move(recvs);
  return s;
}

// An allreduce of `count` elements named `name`, from send into recv.
inline Submission allreduce_submission(const std::string& name, const void* send, void* recv, int64_t count,
                                       int dtype = static_cast<int>(DataType::kFloat32),
                                       int op = static_cast<int>(ReduceOp::kSum)) {
  return one_tensor_submission(name, OpKind::kAllreduce, {count}, {send}, {recv}, dtype, op);
}

}  // namespace kolo
