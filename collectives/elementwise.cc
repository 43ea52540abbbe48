#include "collectives/elementwise.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "collectives/half.h"

namespace kolo {
namespace {

// A scaled integer is truncated toward zero, as a C cast (and Horovod,
// which scales integers in double) does; out-of-range values saturate.
template <typename T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return 0;
    v = std::trunc(v);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// float32 scales in float32 (the factor rounded to float first), as Horovod
// and the frameworks do; integers and float64 in double.
template <typename T>
void scale_typed(void* out, const void* in, size_t count, double factor) {
  const T* a = static_cast<const T*>(in);
  T* o = static_cast<T*>(out);
  if constexpr (std::is_same_v<T, float>) {
    const float f = static_cast<float>(factor);
    for (size_t i = 0; i < count; ++i) o[i] = a[i] * f;
  } else {
    for (size_t i = 0; i < count; ++i) o[i] = from_double<T>(static_cast<double>(a[i]) * factor);
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scale_half(void* out, const void* in, size_t count, double factor) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* o = static_cast<uint16_t*>(out);
  const float f = static_cast<float>(factor);
  for (size_t i = 0; i < count; ++i) o[i] = FromFloat(ToFloat(a[i]) * f);
}

template <typename T>
T identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd: return T(1);
    case ReduceOp::kMin:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
    case ReduceOp::kMax:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    default: return T(0);
  }
}

template <typename T>
void fill_typed(void* buf, size_t count, T value) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = value;
}

}  // namespace

void scale_copy(DataType dtype, void* out, const void* in, size_t count, double factor) {
  switch (dtype) {
    case DataType::kInt8: return scale_typed<int8_t>(out, in, count, factor);
    case DataType::kUint8: return scale_typed<uint8_t>(out, in, count, factor);
    case DataType::kInt32: return scale_typed<int32_t>(out, in, count, factor);
    case DataType::kUint32: return scale_typed<uint32_t>(out, in, count, factor);
    case DataType::kInt64: return scale_typed<int64_t>(out, in, count, factor);
    case DataType::kUint64: return scale_typed<uint64_t>(out, in, count, factor);
    case DataType::kFloat16: return scale_half<fp16_to_float, float_to_fp16>(out, in, count, factor);
    case DataType::kBfloat16: return scale_half<bf16_to_float, float_to_bf16>(out, in, count, factor);
    case DataType::kFloat32: return scale_typed<float>(out, in, count, factor);
    case DataType::kFloat64: return scale_typed<double>(out, in, count, factor);
  }
}

void fill_identity(DataType dtype, ReduceOp op, void* buf, size_t count) {
  switch (dtype) {
    case DataType::kInt8: return fill_typed<int8_t>(buf, count, identity_of<int8_t>(op));
    case DataType::kUint8: return fill_typed<uint8_t>(buf, count, identity_of<uint8_t>(op));
    case DataType::kInt32: return fill_typed<int32_t>(buf, count, identity_of<int32_t>(op));
    case DataType::kUint32: return fill_typed<uint32_t>(buf, count, identity_of<uint32_t>(op));
    case DataType::kInt64: return fill_typed<int64_t>(buf, count, identity_of<int64_t>(op));
    case DataType::kUint64: return fill_typed<uint64_t>(buf, count, identity_of<uint64_t>(op));
    case DataType::kFloat16: return fill_typed<uint16_t>(buf, count, float_to_fp16(identity_of<float>(op)));
    case DataType::kBfloat16: return fill_typed<uint16_t>(buf, count, float_to_bf16(identity_of<float>(op)));
    case DataType::kFloat32: return fill_typed<float>(buf, count, identity_of<float>(op));
    case DataType::kFloat64: return fill_typed<double>(buf, count, identity_of<double>(op));
  }
}

}  // namespace kolo
