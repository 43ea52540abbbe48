#include "transport/per_peer_transport.h"

#include <algorithm>
#include <chrono>

namespace kolo {

Status PerPeerTransport::create(std::vector<std::unique_ptr<DirectTransport>> transports, std::vector<int> routes,
                                std::unique_ptr<PerPeerTransport>* out) {
  if (transports.empty()) return invalid_argument("a per-peer transport needs at least one transport");
  const int size = transports[0]->size();
  if (static_cast<int>(routes.size()) != size) {
    return invalid_argument("per-peer transport: " + std::to_string(routes.size()) + " routes for " +
                            std::to_string(size) + " ranks");
  }
  for (int r : routes) {
    if (r < 0 || r >= static_cast<int>(transports.size())) {
      return invalid_argument("per-peer transport: route " + std::to_string(r) + " names no transport");
    }
  }
  std::unique_ptr<PerPeerTransport> t(new PerPeerTransport);
  KOLO_RETURN_IF_ERROR(t->loop_.open());
  for (const auto& child : transports) t->name_ += (t->name_.empty() ? "" : "+") + std::string(child->name());
  t->transports_ = std::move(transports);
  t->routes_ = std::move(routes);
  *out = std::move(t);
  return Status::ok();
}

Status PerPeerTransport::prepare(const std::vector<int>& peers) {
  for (size_t i = 0; i < transports_.size(); ++i) {
    std::vector<int> mine;
    for (int peer : peers) {
      if (routes_[peer] == static_cast<int>(i)) mine.push_back(peer);
    }
    if (!mine.empty()) KOLO_RETURN_IF_ERROR(transports_[i]->prepare(mine));
  }
  return Status::ok();
}

Status PerPeerTransport::progress(Deadline deadline) {
  return loop_.run(
      deadline,
      [this](Pumped* pumped) {
        for (auto& t : transports_) KOLO_RETURN_IF_ERROR(t->pump(pumped));
        return Status::ok();
      },
      [this](Deadline d, Pumped* pumped) { return sleep(d, pumped); },
      [this] {
        std::string what;
        for (auto& t : transports_) {
          const std::string mine = t->describe_pending();
          if (!mine.empty()) what += (what.empty() ? "" : "; ") + mine;
        }
        return what;
      });
}

Status PerPeerTransport::sleep(Deadline deadline, Pumped* pumped) {
  std::vector<DirectTransport*> waiting;
  for (auto& t : transports_) {
    if (t->has_pending() || t->watching()) waiting.push_back(t.get());
  }
  // Nothing in flight: any transport's sleep ends on interrupt() or abort().
  if (waiting.empty()) return transports_[0]->sleep(deadline, pumped);
  if (waiting.size() == 1) return waiting[0]->sleep(deadline, pumped);
  const auto slice = Deadline::after(std::chrono::milliseconds(1));
  DirectTransport* t = waiting[next_sleeper_++ % waiting.size()];
  return t->sleep(slice.time_point() < deadline.time_point() ? slice : deadline, pumped);
}

namespace {

Status cannot_receive_from_any(const Transport& t) {
  return unsupported(std::string(t.name()) + " transport cannot receive from any peer");
}

}  // namespace

bool PerPeerTransport::can_peek(int peer) const {
  AnySource* any = route(peer)->any_source();
  return any != nullptr && any->can_peek(peer);
}

Status PerPeerTransport::try_connect(int peer, Deadline deadline, bool* connected) {
  *connected = false;
  AnySource* any = route(peer)->any_source();
  return any ? any->try_connect(peer, deadline, connected) : cannot_receive_from_any(*route(peer));
}

Status PerPeerTransport::peek(int peer, Arrival* next) {
  *next = Arrival{};
  AnySource* any = route(peer)->any_source();
  return any ? any->peek(peer, next) : cannot_receive_from_any(*route(peer));
}

Status PerPeerTransport::watch(const std::vector<int>& peers) {
  for (size_t i = 0; i < transports_.size(); ++i) {
    std::vector<int> mine;
    for (int peer : peers) {
      if (routes_[peer] == static_cast<int>(i)) mine.push_back(peer);
    }
    AnySource* any = transports_[i]->any_source();
    if (any) {
      KOLO_RETURN_IF_ERROR(any->watch(mine));
    } else if (!mine.empty()) {
      return cannot_receive_from_any(*transports_[i]);
    }
  }
  return Status::ok();
}

void PerPeerTransport::abort() {
  if (!loop_.abort()) return;
  for (auto& t : transports_) t->abort();
}

Status PerPeerTransport::check_not_awaited(uint64_t tag) {
  for (auto& t : transports_) KOLO_RETURN_IF_ERROR(t->check_not_awaited(tag));
  return Status::ok();
}

void PerPeerTransport::interrupt() {
  loop_.interrupt();
  // Wakes whichever transport sleep() is in.
  for (auto& t : transports_) t->interrupt();
}

void PerPeerTransport::set_polling(int spin_us, bool yield) {
  loop_.set_polling(spin_us, yield);
  for (auto& t : transports_) t->set_polling(spin_us, yield);
}

Status PerPeerTransport::register_memory(const void* data, size_t bytes) {
  // Every transport is asked, even after one declines: the first refusal is
  // what the caller hears.
  Status first = Status::ok();
  for (auto& t : transports_) {
    Status s = t->register_memory(data, bytes);
    if (first.is_ok()) first = s;
  }
  return first;
}

void PerPeerTransport::deregister_memory(const void* data, size_t bytes) {
  for (auto& t : transports_) t->deregister_memory(data, bytes);
}

}  // namespace kolo
