// The ops of kolo's TensorFlow kernels: their attributes, inputs, outputs
// and shape functions (the kernels are _ops_kernels.cc).
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

// The shape functions are this file's own (internal linkage).
namespace kolo_tf {
namespace {
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// ---- shape functions ----------------------------------------------------------------

absl::Status same_shapes(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

// Outputs like the inputs but with an unknown first dimension.
absl::Status first_dim_unknown(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs() && i < c->num_inputs(); ++i) {
    ShapeHandle output;
    TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(i), 0, c->UnknownDim(), &output));
    c->set_output(i, output);
  }
  return absl::OkStatus();
}

absl::Status alltoall_shapes(InferenceContext* c) {
  ShapeHandle output;
  TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(0), 0, c->UnknownDim(), &output));
  c->set_output(0, output);
  c->set_output(1, c->Vector(c->UnknownDim()));
  return absl::OkStatus();
}

absl::Status scalar_shape(InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return absl::OkStatus();
}

}  // namespace
}  // namespace kolo_tf

// ---- registration ----------------------------------------------------------------------

namespace tensorflow {
using kolo_tf::scalar_shape;

#define KOLO_TF_REDUCED_TYPES "{int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float, double}"
#define KOLO_TF_COMMON_ATTRS                 \
  Attr("ignore_name_scope: bool = false")    \
      .Attr("process_set_id: int = 0")       \
      .Attr("tensor_name: string = ''")

REGISTER_OP("KoloAllreduce")
    .Attr("T: " KOLO_TF_REDUCED_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("wire: int = -1")  // kolo_wire_format_t; -1: the communicator's
    .Attr("error_feedback: bool = false")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Output("sum: T")
    .SetShapeFn(kolo_tf::same_shapes);

REGISTER_OP("KoloGroupedAllreduce")
    .Attr("T: " KOLO_TF_REDUCED_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("wire: int = -1")
    .Attr("error_feedback: bool = false")
    .Attr("num_tensors: int >= 1")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensors: num_tensors * T")
    .Output("sum: num_tensors * T")
    .SetShapeFn(kolo_tf::same_shapes);

REGISTER_OP("KoloAllgather")
    .Attr("T: type")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(kolo_tf::first_dim_unknown);

REGISTER_OP("KoloGroupedAllgather")
    .Attr("T: list(type)")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensors: T")
    .Output("outputs: T")
    .SetShapeFn(kolo_tf::first_dim_unknown);

REGISTER_OP("KoloBroadcast")
    .Attr("T: type")
    .Attr("root_rank: int")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(kolo_tf::same_shapes);

REGISTER_OP("KoloGroupedBroadcast")
    .Attr("T: list(type)")
    .Attr("root_rank: int")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensors: T")
    .Output("outputs: T")
    .SetShapeFn(kolo_tf::same_shapes);

REGISTER_OP("KoloReducescatter")
    .Attr("T: " KOLO_TF_REDUCED_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(kolo_tf::first_dim_unknown);

REGISTER_OP("KoloGroupedReducescatter")
    .Attr("T: " KOLO_TF_REDUCED_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("num_tensors: int >= 1")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensors: num_tensors * T")
    .Output("outputs: num_tensors * T")
    .SetShapeFn(kolo_tf::first_dim_unknown);

REGISTER_OP("KoloAlltoall")
    .Attr("T: type")
    .Attr("Tsplits: {int32, int64} = DT_INT32")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Input("splits: Tsplits")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetShapeFn(kolo_tf::alltoall_shapes);

REGISTER_OP("KoloJoin")
    .Attr("process_set_id: int = 0")
    .Output("last_rank: int32")
    .SetIsStateful()
    .SetShapeFn(scalar_shape);

REGISTER_OP("KoloBarrier")
    .KOLO_TF_COMMON_ATTRS
    .SetIsStateful()
    .SetShapeFn([](shape_inference::InferenceContext*) { return absl::OkStatus(); });

// rank, size and membership, read when the graph runs
#define KOLO_TF_VALUE_OP(op_name) \
  REGISTER_OP(op_name).Attr("process_set_id: int = 0").Output("value: int32").SetShapeFn(scalar_shape)
KOLO_TF_VALUE_OP("KoloSize");
KOLO_TF_VALUE_OP("KoloRank");
KOLO_TF_VALUE_OP("KoloLocalSize");
KOLO_TF_VALUE_OP("KoloLocalRank");
KOLO_TF_VALUE_OP("KoloProcessSetIncluded");
#undef KOLO_TF_VALUE_OP
}  // namespace tensorflow
