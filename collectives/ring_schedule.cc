#include "collectives/ring_schedule.h"

#include <algorithm>

namespace kolo {

Range partition(size_t count, size_t parts, size_t index) {
  const size_t base = count / parts;
  const size_t extra = count % parts;
  Range r;
  r.count = base + (index < extra ? 1 : 0);
  r.offset = index * base + std::min(index, extra);
  return r;
}

size_t segments_per_chunk(size_t largest_chunk_elems, size_t elem_size, size_t segment_bytes) {
  const size_t bytes = largest_chunk_elems * elem_size;
  if (bytes == 0 || segment_bytes == 0) return 1;
  return (bytes + segment_bytes - 1) / segment_bytes;
}

RingLayout::RingLayout(size_t count, int size, size_t elem_size, size_t segment_bytes) {
  for (int c = 0; c < size; ++c) chunks_.push_back(partition(count, size, c));
  const size_t largest = chunks_.empty() ? 0 : chunks_[0].count;
  segments_ = segments_per_chunk(largest, elem_size, segment_bytes);
}

RingLayout::RingLayout(const std::vector<size_t>& chunk_counts, size_t elem_size, size_t segment_bytes) {
  size_t offset = 0, largest = 0;
  for (size_t n : chunk_counts) {
    chunks_.push_back(Range{offset, n});
    offset += n;
    largest = std::max(largest, n);
  }
  segments_ = segments_per_chunk(largest, elem_size, segment_bytes);
}

Range RingLayout::segment(int c, size_t j) const {
  Range ch = chunk(c);
  Range part = partition(ch.count, segments_, j);
  part.offset += ch.offset;
  return part;
}

}  // namespace kolo
