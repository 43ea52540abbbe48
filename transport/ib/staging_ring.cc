#include "transport/ib/staging_ring.h"

#include <algorithm>

namespace kolo {

namespace {

constexpr size_t kAlign = 64;  // a cache line: slices never share one

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StagingRing::StagingRing(RegistrationBackend* backend, size_t initial_bytes, size_t max_bytes)
    : backend_(backend), initial_bytes_(round_up(initial_bytes)), max_bytes_(std::max(max_bytes, initial_bytes)) {}

StagingRing::~StagingRing() { drop(); }

void StagingRing::drop() {
  if (registered_) backend_->deregister(region_);
  registered_ = false;
  memory_.reset();
  capacity_ = 0;
}

Status StagingRing::grow(size_t at_least) {
  // Only while empty: no slice of the old memory is in use.
  size_t next = capacity_ == 0 ? initial_bytes_ : std::min(capacity_ * 2, max_bytes_);
  next = std::max(next, at_least);
  drop();
  memory_.reset(new unsigned char[next]);
  KOLO_RETURN_IF_ERROR(backend_->register_memory(reinterpret_cast<uintptr_t>(memory_.get()), next, &region_));
  registered_ = true;
  capacity_ = next;
  ++registrations_;
  return Status::ok();
}

Status StagingRing::allocate(size_t bytes, StagingSlice* out, bool* taken) {
  *taken = false;
  const size_t need = round_up(std::max<size_t>(bytes, 1));
  size_t at = 0;
  if (slices_.empty()) {
    tail_ = 0;
    if (need > capacity_) KOLO_RETURN_IF_ERROR(grow(need));
    at = 0;
  } else {
    const size_t head = slices_.front().offset;
    if (tail_ > head) {
      // Not wrapped: free space at the end, then before the head.
      if (capacity_ - tail_ >= need) {
        at = tail_;
      } else if (head >= need) {
        at = 0;
      } else {
        return Status::ok();
      }
    } else {
      // Wrapped: free space between the tail and the head.
      if (head - tail_ < need) return Status::ok();
      at = tail_;
    }
  }
  slices_.push_back(Slice{at, need});
  tail_ = at + need;
  out->data = memory_.get() + at;
  out->bytes = bytes;
  out->lkey = region_.lkey;
  out->rkey = region_.rkey;
  *taken = true;
  return Status::ok();
}

void StagingRing::release_oldest() {
  if (!slices_.empty()) slices_.pop_front();
}

}  // namespace kolo
