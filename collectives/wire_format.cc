// The wire formats' names and sizes (wire_format.h); their kernels are in
// wire_kernels.cc.
#include "collectives/wire_format.h"

namespace kolo {

const char* wire_format_name(WireFormat format) {
  switch (format) {
    case WireFormat::kNative: return "native";
    case WireFormat::kBf16: return "bf16";
    case WireFormat::kFp16: return "fp16";
    case WireFormat::kFp8E4M3: return "fp8_e4m3";
    case WireFormat::kFp8E5M2: return "fp8_e5m2";
    case WireFormat::kInt8: return "int8";
  }
  return "unknown";
}

bool parse_wire_format(const std::string& name, WireFormat* format) {
  for (int f = 0; f < kNumWireFormats; ++f) {
    if (name == wire_format_name(static_cast<WireFormat>(f))) {
      *format = static_cast<WireFormat>(f);
      return true;
    }
  }
  return false;
}

bool wire_format_carries(DataType dtype, ReduceOp op) {
  const bool floating = dtype == DataType::kFloat32 || dtype == DataType::kFloat16 || dtype == DataType::kBfloat16;
  return floating && (op == ReduceOp::kSum || op == ReduceOp::kAvg);
}

std::string wire_format_refusal(WireFormat format, DataType dtype, ReduceOp op) {
  if (format == WireFormat::kNative || wire_format_carries(dtype, op)) return "";
  return std::string("wire format ") + wire_format_name(format) +
         " carries float32, float16 and bfloat16 sums and averages, not " + dtype_name(dtype) + " " + op_name(op);
}

size_t wire_element_bytes(WireFormat format) {
  switch (format) {
    case WireFormat::kBf16:
    case WireFormat::kFp16: return 2;
    case WireFormat::kFp8E4M3:
    case WireFormat::kFp8E5M2:
    case WireFormat::kInt8: return 1;
    case WireFormat::kNative: return 4;
  }
  return 4;
}

size_t wire_bytes(WireFormat format, size_t count) {
  const size_t codes = count * wire_element_bytes(format);
  if (format == WireFormat::kBf16 || format == WireFormat::kFp16) return codes;
  return codes + 4 * ((count + kWireBlock - 1) / kWireBlock);
}

}  // namespace kolo
