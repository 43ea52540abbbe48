// Zero-copy fusion's logical buffer: several spans read as one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "collectives/ring.h"
#include "collectives/ring_schedule.h"

namespace kolo {

// A logical buffer made of spans (zero-copy fusion): cuts an element range
// of the concatenation at span boundaries. An empty range is one empty
// piece, so that even empty chunks carry a frame whose fingerprint the
// neighbour checks.
class SpanCutter {
 public:
  explicit SpanCutter(SpanList spans) : spans_(spans) {
    if (spans.size() + 1 > kInline) heap_.resize(spans.size() + 1);
    start_ = heap_.empty() ? inline_ : heap_.data();
    start_[0] = 0;
    for (size_t i = 0; i < spans.size(); ++i) start_[i + 1] = start_[i] + spans[i].count;
  }
  SpanCutter(const SpanCutter&) = delete;  // start_ may point into this object
  SpanCutter& operator=(const SpanCutter&) = delete;
  size_t total() const { return start_[spans_.size()]; }

  // fn(span, first element within it, count) for each piece of `range`.
  template <typename Fn>
  void for_each_piece(Range range, Fn&& fn) const {
    size_t i = span_at(range.offset);
    if (range.count == 0) return fn(spans_[i], range.offset - start_[i], size_t{0});
    size_t at = range.offset, left = range.count;
    while (left > 0) {
      while (start_[i + 1] <= at) ++i;  // skip empty spans
      const size_t take = std::min(left, start_[i + 1] - at);
      fn(spans_[i], at - start_[i], take);
      at += take;
      left -= take;
    }
  }

  // Where element `offset` (< total()) lies: its span, its index there, and
  // how many elements of the span follow from it, itself included.
  struct Place {
    const Span* span;
    size_t at;
    size_t left;
  };
  Place place_of(size_t offset) const {
    size_t i = span_at(offset);
    while (start_[i + 1] <= offset) ++i;  // skip empty spans
    return Place{&spans_[i], offset - start_[i], start_[i + 1] - offset};
  }

 private:
  size_t span_at(size_t offset) const {
    const size_t* first = start_;
    const size_t i = static_cast<size_t>(std::upper_bound(first, first + spans_.size() + 1, offset) - first);
    return std::min(i, spans_.size()) - 1;
  }
  // A call's few spans need no allocation; the fusion engine's many do.
  static constexpr size_t kInline = 8;
  SpanList spans_;
  size_t inline_[kInline];
  std::vector<size_t> heap_;
  size_t* start_;  // each span's first element in the logical buffer, and the total after the last
};

}  // namespace kolo
