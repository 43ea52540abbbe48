// The engine's submissions as the tests make them.
#pragma once

#include <cstdint>
#include <string>

#include "collectives/dtype.h"
#include "runtime/submission.h"

namespace kolo {

// An allreduce of `count` elements named `name`, from send into recv.
inline Submission allreduce_submission(const std::string& name, const void* send, void* recv, int64_t count,
                                       int dtype = static_cast<int>(DataType::kFloat32),
                                       int op = static_cast<int>(ReduceOp::kSum)) {
  Submission s;
  s.request.name = name;
  s.request.kind = OpKind::kAllreduce;
  s.request.dtype = dtype;
  s.request.op = op;
  s.request.shapes = {{count}};
  s.sends = {send};
  s.recvs = {recv};
  return s;
}

}  // namespace kolo
