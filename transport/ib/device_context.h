// The RDMA device opened once per process and shared by every
// communicator's transport, as Gloo's ibverbs Device is shared by its
// contexts: one device context and one protection domain however many
// communicators (splits, the engine's sibling) use the device. Each
// transport keeps its own completion channel and queue: it progresses on
// its own thread, and its queue pairs' completions are its alone.
//
// Asynchronous events (a port going down, a queue pair or the device
// failing) arrive on the shared context's one descriptor: whichever
// transport sees it readable reads them all and hands each to every
// transport listening, which keeps those that concern it.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace kolo {

class IbEventListener {
 public:
  virtual ~IbEventListener() = default;
  // On whichever thread read the event, under the device's listener lock:
  // must not block, nor call back into the device.
  virtual void on_async_event(const ibv_async_event& event) = 0;
};

class IbDeviceContext {
 public:
  // This process's context on `device`, opened by the first caller and
  // closed when the last holder lets go.
  static Status get(const std::string& device, std::shared_ptr<IbDeviceContext>* out);
  // Contexts open in this process now (for tests: one per device).
  static int open_count();
  ~IbDeviceContext();

  IbDeviceContext(const IbDeviceContext&) = delete;
  IbDeviceContext& operator=(const IbDeviceContext&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  // Non-blocking; readable when events wait.
  int async_fd() const { return context_->async_fd; }

  void add_listener(IbEventListener* listener);
  void remove_listener(IbEventListener* listener);
  // Reads every waiting event and hands each to every listener.
  void read_async_events();

 private:
  IbDeviceContext() = default;
  Status open(const std::string& device);

  std::string name_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::mutex listeners_mutex_;
  std::vector<IbEventListener*> listeners_;
};

}  // namespace kolo
