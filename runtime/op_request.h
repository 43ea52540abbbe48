// What a rank announces about one named operation of the runtime engine, and
// what all ranks agree to run. Requests travel between ranks during
// negotiation, so they have a compact binary encoding whose decoder checks
// every length (a damaged or hostile message is an error, never a crash).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/dtype.h"
#include "common/status.h"

namespace kolo {

enum class OpKind : uint8_t {
  kAllreduce = 1,  // one tensor, or a group of tensors reduced as one
  kAllgather,      // first dimension may differ per rank
  kBroadcast,
  kReduceScatter,  // rank r keeps rows partition(first dim, size, r)
  kAlltoall,       // rank r sends splits[q] rows to rank q
  kBarrier,
  kJoin,      // this rank has no more data (internal name "kolo.join")
  kShutdown,  // this rank's engine is stopping
  kStallAbort,  // rank 0: stalled too long; `name` carries the report
};
constexpr int kMaxOpKind = static_cast<int>(OpKind::kStallAbort);

const char* op_kind_name(OpKind kind);
// Kinds users submit (the rest are the engine's own messages).
inline bool is_user_kind(OpKind k) { return k >= OpKind::kAllreduce && k <= OpKind::kBarrier; }

struct OpRequest {
  std::string name;
  OpKind kind = OpKind::kAllreduce;
  int32_t dtype = 0;
  int32_t op = 0;    // reducing kinds only
  // As the communicator takes them (a request from another rank is checked
  // before it runs: Negotiator's check_remote).
  DataType data_type() const { return static_cast<DataType>(dtype); }
  ReduceOp reduce_op() const { return static_cast<ReduceOp>(op); }
  int32_t root = 0;  // broadcast only
  double prescale = 1;
  double postscale = 1;
  std::vector<std::vector<int64_t>> shapes;  // one per tensor
  std::vector<int64_t> splits;               // alltoall: rows to each rank
  // allreduce: its wire format (collectives/wire_format.h), -1 for the
  // communicator's default; and whether it keeps error feedback's
  // residuals under its name.
  int32_t wire = -1;
  bool error_feedback = false;
  // Whether the tensors are in GPU memory. Every rank's must be where the
  // others' are: the engine runs the collective on the GPU path or the
  // host path, and neighbours must take the same.
  bool on_device = false;

  bool operator==(const OpRequest& o) const;
};

// The name of the first field on which two ranks' requests for the same
// name disagree ("" if none). Only fields every rank must share are
// compared: for allgather and alltoall the first dimension and the splits
// are each rank's own.
std::string first_difference(const OpRequest& a, const OpRequest& b);

// That field's value in `r`, for error messages ("float32", "[3, 4]").
std::string field_value(const OpRequest& r, const std::string& field);

// Elements of tensor i (product of its shape), and of one row (product of
// all but the first dimension).
int64_t element_count(const std::vector<int64_t>& shape);
int64_t row_elements(const std::vector<int64_t>& shape);

std::string encode_requests(const std::vector<OpRequest>& requests);
Status decode_requests(const std::string& bytes, std::vector<OpRequest>* out);

}  // namespace kolo
