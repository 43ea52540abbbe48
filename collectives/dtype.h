// Element types and reduction operators, value for value the same as
// kolo_dtype_t and kolo_op_t in the C API.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kolo {

enum class DataType : int {
  kInt8 = 0,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kBfloat16,
  kFloat32,
  kFloat64,
};
constexpr int kNumDataTypes = 10;

enum class ReduceOp : int { kSum = 0, kProd, kMin, kMax, kAvg };
constexpr int kNumReduceOps = 5;

inline bool valid_dtype(int d) { return d >= 0 && d < kNumDataTypes; }

// The address of element `index` of a buffer of elem_size-byte elements.
inline unsigned char* element(void* base, size_t index, size_t elem_size) {
  return static_cast<unsigned char*>(base) + index * elem_size;
}
inline const unsigned char* element(const void* base, size_t index, size_t elem_size) {
  return static_cast<const unsigned char*>(base) + index * elem_size;
}
inline bool valid_op(int o) { return o >= 0 && o < kNumReduceOps; }

// Inline: every call's path asks it several times. 0 for a value that is
// no DataType.
inline size_t dtype_size(DataType d) {
  switch (d) {
    case DataType::kInt8:
    case DataType::kUint8: return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}
const char* dtype_name(DataType d);
const char* op_name(ReduceOp op);

}  // namespace kolo
