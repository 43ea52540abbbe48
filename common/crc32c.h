// CRC-32C (Castagnoli), the checksum of frame payloads when KOLO_CHECKSUM=1.
// Uses the SSE4.2 crc32 instruction where the CPU has it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kolo {

// Continues a CRC over more bytes; start with crc = 0.
uint32_t crc32c(uint32_t crc, const void* data, size_t bytes);

}  // namespace kolo
