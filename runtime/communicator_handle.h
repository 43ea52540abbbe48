// A communicator and the engine of its named operations, side by side: what
// a kolo_comm_t is. The engine depends on the communicator (it builds its
// own connections from it and reads its settings); the communicator knows
// nothing of the engine, so the failure calls that must reach both (abort,
// revoke, the asynchronous error) are this object's.
#pragma once

#include <memory>
#include <mutex>

#include "common/status.h"
#include "runtime/communicator.h"
#include "runtime/engine.h"

namespace kolo {

class CommunicatorHandle {
 public:
  explicit CommunicatorHandle(std::unique_ptr<Communicator> comm);
  // The engine first: it uses the communicator's store.
  ~CommunicatorHandle();
  CommunicatorHandle(const CommunicatorHandle&) = delete;
  CommunicatorHandle& operator=(const CommunicatorHandle&) = delete;

  Communicator* comm() const { return comm_.get(); }
  // The engine (engine.h), made by the first named operation: its own
  // thread and connections, beside the communicator's.
  Engine* engine();

  // Every later call fails with ABORTED: the engine's named operations
  // (what is pending ends at once), then the communicator's. Any thread.
  void abort();
  // ncclCommRevoke (Communicator::revoke), the engine's operations failing
  // with REVOKED too. Any thread.
  void revoke();
  // The communicator's sticky error, else the engine's (an engine stopped
  // by a shutdown is not a failure); OK while healthy.
  Status async_error() const;

 private:
  std::unique_ptr<Communicator> comm_;
  mutable std::mutex engine_mutex_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace kolo
