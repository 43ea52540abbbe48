// A first-in, first-out queue over one array that it reuses: once it has held
// as many entries as are ever in flight at once, pushing and popping
// allocate nothing. (A std::deque allocates a block and frees another every
// few entries as the queue moves through memory.) Entries move when the
// array grows, so they must not be pointed into across a push_back.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace kolo {

template <typename T>
class Fifo {
 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }

  // Not empty.
  T& front() { return slots_[head_ & mask_]; }
  const T& front() const { return slots_[head_ & mask_]; }

  void push_back(const T& item) {
    if (size() == slots_.size()) grow();
    slots_[tail_++ & mask_] = item;
  }

  // Not empty.
  void pop_front() { ++head_; }

 private:
  // Doubles the array (a power of two, so a position is a mask away from
  // its slot), keeping the order.
  void grow() {
    std::vector<T> bigger(std::max<size_t>(8, 2 * slots_.size()));
    const size_t n = size();
    for (size_t i = 0; i < n; ++i) bigger[i] = std::move(slots_[(head_ + i) & mask_]);
    slots_.swap(bigger);
    mask_ = slots_.size() - 1;
    head_ = 0;
    tail_ = n;
  }

  std::vector<T> slots_;
  size_t mask_ = 0;
  size_t head_ = 0;  // positions count up for ever; the slot is position & mask_
  size_t tail_ = 0;
};

}  // namespace kolo
