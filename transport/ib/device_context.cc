#include "transport/ib/device_context.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "transport/ib/verbs_library.h"

namespace kolo {

namespace {

// The open contexts by device name; weak, so the last transport closes one.
std::mutex registry_mutex;
std::map<std::string, std::weak_ptr<IbDeviceContext>>& registry() {
  static auto* contexts = new std::map<std::string, std::weak_ptr<IbDeviceContext>>();
  return *contexts;
}

}  // namespace

Status IbDeviceContext::get(const std::string& device, std::shared_ptr<IbDeviceContext>* out) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (auto open = registry()[device].lock()) {
    *out = std::move(open);
    return Status::ok();
  }
  std::shared_ptr<IbDeviceContext> opened(new IbDeviceContext());
  KOLO_RETURN_IF_ERROR(opened->open(device));
  registry()[device] = opened;
  *out = std::move(opened);
  return Status::ok();
}

int IbDeviceContext::open_count() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  int n = 0;
  for (const auto& entry : registry()) n += entry.second.expired() ? 0 : 1;
  return n;
}

Status IbDeviceContext::open(const std::string& device) {
  name_ = device;
  if (!VerbsLibrary::get().loaded()) return VerbsLibrary::get().status();
  const VerbsLibrary& ibv = verbs();
  int count = 0;
  ibv_device** list = ibv.get_device_list(&count);
  for (int i = 0; list && i < count && !context_; ++i) {
    if (device == ibv.get_device_name(list[i])) context_ = ibv.open_device(list[i]);
  }
  if (list) ibv.free_device_list(list);
  if (!context_) return transport_error("cannot open RDMA device " + device + ": " + std::strerror(errno));
  pd_ = ibv.alloc_pd(context_);
  if (!pd_) return transport_error("ibv_alloc_pd on " + device + ": " + std::strerror(errno));
  int flags = ::fcntl(context_->async_fd, F_GETFL);
  if (flags < 0 || ::fcntl(context_->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return errno_error(Code::kTransport, "fcntl(verbs async event channel)", errno);
  }
  return Status::ok();
}

IbDeviceContext::~IbDeviceContext() {
  if (pd_) verbs().dealloc_pd(pd_);
  if (context_) verbs().close_device(context_);
}

void IbDeviceContext::add_listener(IbEventListener* listener) {
  std::lock_guard<std::mutex> lock(listeners_mutex_);
  listeners_.push_back(listener);
}

void IbDeviceContext::remove_listener(IbEventListener* listener) {
  std::lock_guard<std::mutex> lock(listeners_mutex_);
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener), listeners_.end());
}

void IbDeviceContext::read_async_events() {
  // Under the lock: a listener being removed waits until no event is being
  // handed to it.
  std::lock_guard<std::mutex> lock(listeners_mutex_);
  ibv_async_event event;
  const VerbsLibrary& ibv = verbs();
  while (ibv.get_async_event(context_, &event) == 0) {
    for (IbEventListener* listener : listeners_) listener->on_async_event(event);
    ibv.ack_async_event(&event);
  }
}

}  // namespace kolo
