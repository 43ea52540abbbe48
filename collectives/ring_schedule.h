// The ring's bookkeeping as pure functions of (rank, size, count): which
// chunk each step sends and receives, and where each segment lies. No I/O
// here, so all of it is tested without a network.
//
// Terms:
//  - chunk: the buffer is cut into `size` contiguous chunks, one per rank,
//    as equal as elements allow (the first count % size get one extra).
//  - segment: each chunk is cut again into `segments` pieces, the unit that
//    moves over the wire. Every chunk has the same number of segments, so
//    segment j of the chunk received at step s is segment j of the chunk
//    sent at step s + 1: that is what lets steps overlap (pipelining).
//  - reduce-scatter: after size - 1 steps rank r holds chunk r reduced over
//    all ranks. Step s sends chunk (r - s - 1) and receives chunk (r - s - 2).
//  - allgather: size - 1 more steps circulate the finished chunks. Step s
//    sends chunk (r - s) and receives chunk (r - s - 1).
#pragma once

#include <cstddef>
#include <vector>

namespace kolo {

struct Range {
  size_t offset = 0;  // in elements
  size_t count = 0;

  bool operator==(const Range& o) const { return offset == o.offset && count == o.count; }
};

// Part `index` of `count` elements cut into `parts` near-equal pieces.
Range partition(size_t count, size_t parts, size_t index);

inline int ring_mod(long long x, int n) { return static_cast<int>(((x % n) + n) % n); }

inline int rs_send_chunk(int rank, int size, int step) { return ring_mod(rank - step - 1, size); }
inline int rs_recv_chunk(int rank, int size, int step) { return ring_mod(rank - step - 2, size); }
inline int ag_send_chunk(int rank, int size, int step) { return ring_mod(rank - step, size); }
inline int ag_recv_chunk(int rank, int size, int step) { return ring_mod(rank - step - 1, size); }

// Segments per chunk so that no segment exceeds segment_bytes (at least 1).
size_t segments_per_chunk(size_t largest_chunk_elems, size_t elem_size, size_t segment_bytes);

// A buffer laid out for the ring: chunk c's segment j, as an element range
// of the whole buffer.
class RingLayout {
 public:
  // `count` elements cut into `size` near-equal chunks.
  RingLayout(size_t count, int size, size_t elem_size, size_t segment_bytes);
  // Chunks of the given sizes, laid out one after another (the "v" variants
  // of allgather and reduce-scatter, where ranks own blocks of any size).
  RingLayout(const std::vector<size_t>& chunk_counts, size_t elem_size, size_t segment_bytes);

  int size() const { return static_cast<int>(chunks_.size()); }
  size_t segments() const { return segments_; }
  Range chunk(int c) const { return chunks_[c]; }
  Range segment(int c, size_t j) const;

 private:
  std::vector<Range> chunks_;
  size_t segments_;
};

}  // namespace kolo
