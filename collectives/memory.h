// Where a collective's buffers live, and how an algorithm touches them
// outside the transport: local copies, reductions, and scratch space of the
// same kind. Host memory is the default (HostMemory, below); gpu/ supplies
// a GPU's memory, whose copies and reductions are enqueued on the GPU's
// stream in call order, so that every later copy or transfer of the same
// data (the transports stage device memory through that stream too) sees
// their result. Failures of enqueued work surface where the caller waits
// for it (gpu/device.h), so these calls return nothing.
#pragma once

#include <cstddef>

#include "collectives/dtype.h"
#include "transport/registered_buffer.h"
#include "transport/transport.h"

namespace kolo {

class Memory {
 public:
  virtual ~Memory() = default;

  // Like memmove: dst and src may overlap.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // A copy into a destination nobody reads again soon (a result larger than
  // the caches; see collectives/arena_writes.h): where it can, it writes around
  // the caches, which saves reading each destination line from memory
  // before overwriting it. dst and src must not overlap.
  virtual void copy_streaming(void* dst, const void* src, size_t bytes) { copy(dst, src, bytes); }
  // Two copies that do not overlap, done at once: a few lines of one, then
  // of the other, so that memory serves the reads of one and the writes of
  // the other together, as in a single copy, where one after the other it
  // would only read and then only write. Each goes around the cache if it
  // says so (as copy_streaming does).
  struct CopyJob {
    void* dst;
    const void* src;
    size_t bytes;
    bool around_cache;
  };
  virtual void copy_together(CopyJob a, CopyJob b);
  // out[i] = a[i] OP b[i] for i < count; out may alias a or b. kAvg sums:
  // the division happens once, in finalize.
  virtual void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) = 0;
  // For kAvg, buf[i] /= divisor (integer division for integer types);
  // nothing for the other ops.
  virtual void finalize(DataType dtype, ReduceOp op, void* buf, size_t count, int divisor) = 0;
  // out[i] = in[i] * factor (elementwise.h's scale_copy); out may be in.
  virtual void scale(DataType dtype, void* out, const void* in, size_t count, double factor) = 0;

  // Scratch buffers of this memory's kind, at least `bytes`, reused between
  // calls (valid until the next call of the same function); nullptr when
  // that much cannot be had.
  virtual void* staging(size_t bytes) = 0;
  virtual void* scratch(size_t bytes) = 0;
  // A third, for an algorithm that packs its input into one buffer and then
  // runs others that use the two above (hierarchical.h).
  virtual void* packing(size_t bytes) = 0;

  // Whether these buffers are the host's (what the shared-memory arena and
  // the host's reduction kernels can touch directly).
  virtual bool is_host() const { return false; }
};

// Host memory, with the reduction kernels of reduce_kernels.h. Its scratch
// buffers belong to one communicator (so steady-state collectives do not
// allocate) and are declared to its transport: an RDMA transport registers
// them once and moves messages in them directly.
class HostMemory : public Memory {
 public:
  // The transport the scratch buffers are declared to (nullptr: none); it
  // must outlive the attachment.
  void attach(Transport* transport) {
    staging_.attach(transport);
    scratch_.attach(transport);
    packing_.attach(transport);
  }

  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_streaming(void* dst, const void* src, size_t bytes) override;
  void copy_together(CopyJob a, CopyJob b) override;
  void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) override;
  void finalize(DataType dtype, ReduceOp op, void* buf, size_t count, int divisor) override;
  void scale(DataType dtype, void* out, const void* in, size_t count, double factor) override;
  void* staging(size_t bytes) override { return staging_.get(bytes); }
  void* scratch(size_t bytes) override { return scratch_.get(bytes); }
  bool is_host() const override { return true; }
  void* packing(size_t bytes) override { return packing_.get(bytes); }

 private:
  RegisteredBuffer staging_;
  RegisteredBuffer scratch_;
  RegisteredBuffer packing_;
};

// A piece of a collective's result into the caller's buffer: around the
// cache where the result outgrows it (`around_cache`; the arena measures
// which, collectives/arena_writes.h).
inline void copy_result(Memory* memory, bool around_cache, void* dst, const void* src, size_t bytes) {
  if (around_cache) {
    memory->copy_streaming(dst, src, bytes);
  } else {
    memory->copy(dst, src, bytes);
  }
}

inline void Memory::copy_together(CopyJob a, CopyJob b) {
  copy_result(this, a.around_cache, a.dst, a.src, a.bytes);
  copy_result(this, b.around_cache, b.dst, b.src, b.bytes);
}

}  // namespace kolo
