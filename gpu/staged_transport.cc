#include "gpu/staged_transport.h"

#include <algorithm>
#include <cstdlib>

#include "gpu/device_progress.h"

namespace kolo {

StagedTransport::StagedTransport(Transport* wire, Device* device, size_t slot_bytes, int slots)
    : LayeredTransport(wire),
      device_(device),
      slot_bytes_(std::max<size_t>(slot_bytes, 4096)),
      slots_(std::max(slots, 2)),
      name_(std::string(wire->name()) + "+staging") {}

Status StagedTransport::allocate_slots() {
  for (auto* side : {&free_send_slots_, &free_recv_slots_}) {
    int* allocated = side == &free_send_slots_ ? &send_slots_ : &recv_slots_;
    while (*allocated < slots_) {
      void* s = device_->allocate_pinned(slot_bytes_);
      if (!s) return device_error("cannot allocate a staging slot of " + std::to_string(slot_bytes_) + " bytes");
      ++*allocated;
      all_slots_.push_back(s);
      side->push_back(s);
    }
  }
  return Status::ok();
}

StagedTransport::~StagedTransport() {
  for (void* s : all_slots_) device_->release_pinned(s);
}

Status StagedTransport::post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) {
  return post(peer, true, const_cast<void*>(data), bytes, tag, request);
}

Status StagedTransport::post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) {
  return post(peer, false, data, bytes, tag, request);
}

Status StagedTransport::post(int peer, bool send, void* data, size_t bytes, uint64_t tag, Request* request) {
  *request = Request{};
  request->data = data;
  request->bytes = bytes;
  request->tag = tag;
  auto m = std::make_unique<Message>();
  m->request = request;
  m->staged = bytes > 0 && device_->classify(data) == MemoryKind::kThisDevice;
  (send ? sends_ : recvs_)[peer].push_back(std::move(m));
  int completed = 0;
  bool busy = false;
  return pump(&completed, &busy);
}

void* StagedTransport::take_slot(std::vector<void*>* pool, int* allocated, size_t bytes, bool* own) {
  *own = bytes > slot_bytes_;
  // Larger than a slot: pageable host memory of its own. Pinned memory
  // would copy faster, but allocating it (and freeing it) waits for the
  // whole device, which kolo's thread must not do while a caller's stream
  // is held (device.h); and such messages are rare (the pipeline's are a
  // slot at most).
  if (*own) return std::malloc(bytes);
  if (!pool->empty()) {
    void* s = pool->back();
    pool->pop_back();
    return s;
  }
  if (*allocated >= slots_) return nullptr;
  void* s = device_->allocate_pinned(slot_bytes_);
  if (s) {
    ++*allocated;
    all_slots_.push_back(s);
  }
  return s;
}

void StagedTransport::give_slot(std::vector<void*>* pool, Message* m) {
  if (!m->slot) return;
  // Its copies have run (finish comes after the fence, or the wire).
  if (m->own_slot) std::free(m->slot);
  else pool->push_back(m->slot);
  m->slot = nullptr;
}

void StagedTransport::finish(std::vector<void*>* pool, Message* m, int* completed) {
  give_slot(pool, m);
  m->stage = Stage::kDone;
  m->request->done = true;
  ++*completed;
}

Status StagedTransport::pump_queue(int peer, bool send, Queue* q, int* completed, bool* device_busy) {
  std::vector<void*>* pool = send ? &free_send_slots_ : &free_recv_slots_;
  int* allocated = send ? &send_slots_ : &recv_slots_;
  // The wire matches messages in posting order, so a message goes on it
  // only once every earlier one has.
  bool earlier_off_wire = false;
  for (auto& ptr : *q) {
    Message* m = ptr.get();
    Request* r = m->request;
    if (m->stage == Stage::kQueued && !m->staged) m->stage = Stage::kReady;
    if (m->stage == Stage::kQueued) {
      m->slot = take_slot(pool, allocated, r->bytes, &m->own_slot);
      if (!m->slot) {
        if (m->own_slot || *allocated < slots_) {
          return device_error("cannot allocate " + std::to_string(std::max(r->bytes, slot_bytes_)) +
                              " bytes of host memory to stage GPU messages");
        }
        earlier_off_wire = true;
        break;  // no slot free: later messages wait their turn too
      }
      if (send) {
        device_->copy(m->slot, r->data, r->bytes);
        m->fence = device_->fence();
        m->stage = Stage::kCopying;
      } else {
        m->stage = Stage::kReady;
      }
    }
    if (m->stage == Stage::kCopying || m->stage == Stage::kUnstaging) {
      bool passed = false;
      KOLO_RETURN_IF_ERROR(device_->poll(m->fence, &passed));
      if (!passed) {
        *device_busy = true;
      } else if (m->stage == Stage::kCopying) {
        m->stage = Stage::kReady;
      } else {
        finish(pool, m, completed);
      }
    }
    if (m->stage == Stage::kReady && !earlier_off_wire) {
      void* on_wire = m->staged ? m->slot : r->data;
      KOLO_RETURN_IF_ERROR(send ? below_->post_send(peer, on_wire, r->bytes, r->tag, &m->wire)
                                : below_->post_recv(peer, on_wire, r->bytes, r->tag, &m->wire));
      m->stage = Stage::kOnWire;
    }
    if (m->stage == Stage::kOnWire && m->wire.done) {
      if (!send && m->staged) {
        device_->copy(r->data, m->slot, r->bytes);
        m->fence = device_->fence();
        m->stage = Stage::kUnstaging;
        *device_busy = true;
      } else {
        finish(pool, m, completed);
      }
    }
    if (m->stage == Stage::kQueued || m->stage == Stage::kCopying || m->stage == Stage::kReady) {
      earlier_off_wire = true;
    }
  }
  while (!q->empty() && q->front()->stage == Stage::kDone) q->pop_front();
  return Status::ok();
}

Status StagedTransport::pump(int* completed, bool* device_busy) {
  for (auto& [peer, q] : sends_) KOLO_RETURN_IF_ERROR(pump_queue(peer, true, &q, completed, device_busy));
  for (auto& [peer, q] : recvs_) KOLO_RETURN_IF_ERROR(pump_queue(peer, false, &q, completed, device_busy));
  return Status::ok();
}

Status StagedTransport::progress(Deadline deadline) {
  return progress_with_device(
      below_, deadline, [this](int* completed, bool* busy) { return pump(completed, busy); }, device_->name());
}

}  // namespace kolo
