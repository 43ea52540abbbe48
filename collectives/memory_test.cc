#include "collectives/memory.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace kolo {
namespace {

// Every alignment of source and destination and every tail length around
// the 64-byte lines the streaming copy stores whole: the bytes equal
// memcpy's, and not one byte before or after the destination changes.
TEST(HostMemory, StreamingCopyMatchesMemcpy) {
  HostMemory memory;
  memory.copy_streaming(nullptr, nullptr, 0);  // an empty block: nothing touched
  std::vector<unsigned char> src(4096 + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{63}, size_t{64}, size_t{65}, size_t{127}, size_t{128},
                       size_t{1000}, size_t{4096}}) {
    for (size_t dst_offset = 0; dst_offset < 64; dst_offset += 7) {
      for (size_t src_offset : {size_t{0}, size_t{1}, size_t{33}}) {
        std::vector<unsigned char> got(bytes + 256, 0xEE), want(bytes + 256, 0xEE);
        // Line-aligned bases, so that dst_offset walks every alignment.
        auto* g = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(got.data()) + 63) / 64 * 64);
        auto* w = want.data() + (g - got.data());
        memory.copy_streaming(g + dst_offset, src.data() + src_offset, bytes);
        std::memcpy(w + dst_offset, src.data() + src_offset, bytes);
        ASSERT_EQ(got, want) << bytes << " bytes to offset " << dst_offset << " from offset " << src_offset;
      }
    }
  }
}

// Two copies at once, through the cache or the second around it: each
// equals its memcpy, whatever the two lengths (shorter than a step, whole
// steps, one longer than the other) and the alignments, and no byte
// beside either destination changes.
TEST(HostMemory, CopyingTogetherEqualsTwoCopies) {
  HostMemory memory;
  memory.copy_together({nullptr, nullptr, 0, true}, {nullptr, nullptr, 0, true});  // nothing to touch
  const std::vector<size_t> lengths = {0, 1, 63, 4095, 4096, 4097, 8192 + 65, 20000};
  std::vector<unsigned char> src(20000 + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (int around_cache = 0; around_cache < 4; ++around_cache) {  // neither, either, both
    for (size_t in_bytes : lengths) {
      for (size_t out_bytes : lengths) {
        for (size_t offset : {size_t{0}, size_t{5}, size_t{48}}) {
          std::vector<unsigned char> in_got(in_bytes + 256, 0xEE), out_got(out_bytes + 256, 0xDD);
          std::vector<unsigned char> in_want = in_got, out_want = out_got;
          memory.copy_together({in_got.data() + offset, src.data() + 1, in_bytes, (around_cache & 1) != 0},
                               {out_got.data() + 64 - offset, src.data() + offset, out_bytes, (around_cache & 2) != 0});
          std::memcpy(in_want.data() + offset, src.data() + 1, in_bytes);
          std::memcpy(out_want.data() + 64 - offset, src.data() + offset, out_bytes);
          ASSERT_EQ(in_got, in_want) << in_bytes << " and " << out_bytes << " bytes, offset " << offset
                                     << ", around the cache: " << around_cache;
          ASSERT_EQ(out_got, out_want) << in_bytes << " and " << out_bytes << " bytes, offset " << offset
                                       << ", around the cache: " << around_cache;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kolo
