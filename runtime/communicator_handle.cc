#include "runtime/communicator_handle.h"

#include <utility>

#include "runtime/sibling_engine_link.h"

namespace kolo {

CommunicatorHandle::CommunicatorHandle(std::unique_ptr<Communicator> comm) : comm_(std::move(comm)) {}

CommunicatorHandle::~CommunicatorHandle() {
  std::lock_guard<std::mutex> lock(engine_mutex_);
  engine_.reset();
}

Engine* CommunicatorHandle::engine() {
  std::lock_guard<std::mutex> lock(engine_mutex_);
  if (!engine_) engine_ = make_sibling_engine(comm_.get());
  return engine_.get();
}

void CommunicatorHandle::abort() {
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    if (engine_) engine_->abort();
  }
  comm_->abort();
}

void CommunicatorHandle::revoke() {
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    if (engine_) engine_->revoke();
  }
  comm_->revoke();
}

Status CommunicatorHandle::async_error() const {
  Status mine = comm_->async_error();
  if (!mine.is_ok()) return mine;
  std::lock_guard<std::mutex> lock(engine_mutex_);
  if (engine_ && engine_->error().code() != Code::kInvalidUsage) return engine_->error();
  return Status::ok();
}

}  // namespace kolo
