// A growable byte buffer owned by kolo (a communicator's workspace, the
// engine's fusion buffer) and declared long-lived to a transport, so that an
// RDMA transport registers it once and moves messages in it with no staging
// copy. Growing it deregisters the old memory before freeing it and
// registers the new; so does destroying it. A transport that cannot
// register it leaves it undeclared (messages in it are then staged).
#pragma once

#include <cstddef>
#include <memory>

#include "transport/transport.h"

namespace kolo {

class RegisteredBuffer {
 public:
  RegisteredBuffer() = default;
  ~RegisteredBuffer() { attach(nullptr); }

  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;

  // Declares the buffer to `transport` (nullptr: to none), undeclaring it
  // from the previous one. The transport must outlive the attachment.
  void attach(Transport* transport);

  // At least `bytes` of memory; the contents survive growth.
  unsigned char* get(size_t bytes);
  unsigned char* data() { return memory_.get(); }
  size_t size() const { return size_; }

 private:
  void declare();
  void undeclare();

  Transport* transport_ = nullptr;
  std::unique_ptr<unsigned char[]> memory_;
  size_t size_ = 0;
  bool declared_ = false;
};

}  // namespace kolo
