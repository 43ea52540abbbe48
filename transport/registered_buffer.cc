#include "transport/registered_buffer.h"

#include <cstring>

namespace kolo {

void RegisteredBuffer::attach(Transport* transport) {
  undeclare();
  transport_ = transport;
  declare();
}

unsigned char* RegisteredBuffer::get(size_t bytes) {
  if (bytes <= size_) return memory_.get();
  std::unique_ptr<unsigned char[]> grown(new unsigned char[bytes]);
  if (size_ > 0) std::memcpy(grown.get(), memory_.get(), size_);
  undeclare();  // before the old memory is freed
  memory_ = std::move(grown);
  size_ = bytes;
  declare();
  return memory_.get();
}

void RegisteredBuffer::declare() {
  if (!transport_ || size_ == 0) return;
  // Not fatal: messages in undeclared memory are staged (the transport
  // logs why it could not register it).
  declared_ = transport_->register_memory(memory_.get(), size_).is_ok();
}

void RegisteredBuffer::undeclare() {
  if (declared_) transport_->deregister_memory(memory_.get(), size_);
  declared_ = false;
}

}  // namespace kolo
