#include "gpu/ipc_transport.h"

#include <cstring>

#include "gpu/device_progress.h"

namespace kolo {

namespace {
// Every control message has this tag on `next`.
constexpr uint64_t kControlTag = 0x6b6f6c6f2d697063ull;  // "kolo-ipc"
// A message staged through `next` instead (see pump_peer) has this one.
constexpr uint64_t kDataTag = 0x6b6f6c6f2d646174ull;  // "kolo-dat"
}  // namespace

struct IpcTransport::Control {
  // kDoneStaged: the data follows on `next` (kDataTag), not in the buffer.
  enum Kind : uint32_t { kReady = 1, kDone = 2, kDoneStaged = 3 };
  uint32_t kind = 0;
  uint32_t reserved = 0;
  uint64_t bytes = 0;  // of the message it is about
  uint64_t tag = 0;
  IpcHandle handle{};  // kReady: where to copy to
};

struct IpcTransport::Message {
  enum class Stage {
    kFencing,   // receive: waits for our stream to finish with the destination
    kWaiting,   // send: for the receiver's READY; receive: for the sender's DONE
    kCopying,   // send: the copy into the receiver's buffer is enqueued
    kNotifying, // send: DONE is on its way (the send is done once it has left)
    kDone,
    kStagedData, // receive: the data comes staged through `next`
  };
  Request* request;
  uint64_t fence = 0;
  Stage stage;
  std::unique_ptr<std::pair<Control, Request>> done_note;
  bool staged = false;  // the data goes through `next`, not over IPC
  Request data;         // that message on `next`
};

struct IpcTransport::Peer {
  std::deque<std::unique_ptr<Message>> sends, recvs;  // in posting order
  // The next control message from the peer: its posted receive, one at a
  // time (after a staged DONE, the data's receive goes first).
  std::unique_ptr<std::pair<Control, Request>> inbox;
  std::deque<Control> readies;  // READYs not yet matched to a send
  size_t owed = 0;              // receives for control messages still to post
  // READYs expected (sends posted minus READYs arrived); negative when the
  // peer's READYs came before this rank posted the sends they are for.
  long ready_budget = 0;
  std::deque<std::unique_ptr<std::pair<Control, Request>>> outbox;  // READYs, until sent
};

IpcTransport::IpcTransport(Transport* next, Device* device, std::vector<bool> ipc_peers)
    : LayeredTransport(next), device_(device), ipc_peers_(std::move(ipc_peers)) {}

IpcTransport::~IpcTransport() = default;

Status IpcTransport::post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) {
  if (peer < 0 || static_cast<size_t>(peer) >= ipc_peers_.size() || !ipc_peers_[peer]) {
    return below_->post_send(peer, data, bytes, tag, request);
  }
  *request = Request{};
  request->data = const_cast<void*>(data);
  request->bytes = bytes;
  request->tag = tag;
  auto& p = peers_[peer];
  if (!p) p = std::make_unique<Peer>();
  auto m = std::make_unique<Message>();
  m->request = request;
  m->stage = Message::Stage::kWaiting;
  p->sends.push_back(std::move(m));
  if (p->ready_budget++ >= 0) ++p->owed;  // its READY has not come yet: a receive for it
  return expect_controls(peer, p.get());
}

Status IpcTransport::post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) {
  if (peer < 0 || static_cast<size_t>(peer) >= ipc_peers_.size() || !ipc_peers_[peer]) {
    return below_->post_recv(peer, data, bytes, tag, request);
  }
  *request = Request{};
  request->data = data;
  request->bytes = bytes;
  request->tag = tag;
  auto& p = peers_[peer];
  if (!p) p = std::make_unique<Peer>();
  // Earlier work on our stream may still read or write the destination
  // (a reduction reading a staging slot): share it once that has run.
  auto m = std::make_unique<Message>();
  m->request = request;
  m->fence = device_->fence();
  m->stage = Message::Stage::kFencing;
  p->recvs.push_back(std::move(m));
  ++p->owed;  // its DONE
  return expect_controls(peer, p.get());
}

Status IpcTransport::expect_controls(int peer, Peer* p) {
  // A receive is posted for each control message the peer owes, so none is
  // left posted on `next` when a collective ends (a host collective's
  // message would land in it); one at a time, since `next` matches
  // messages in order and a staged DONE's data comes right after it. The
  // peer sends a READY when its receive is posted, which may be before this
  // rank posts the matching send: such a READY takes a receive meant for
  // another message, which is then owed again (pump_peer).
  if (p->inbox || p->owed == 0) return Status::ok();
  auto slot = std::make_unique<std::pair<Control, Request>>();
  KOLO_RETURN_IF_ERROR(below_->post_recv(peer, &slot->first, sizeof(Control), kControlTag, &slot->second));
  p->inbox = std::move(slot);
  --p->owed;
  return Status::ok();
}

Status IpcTransport::send_ready(int peer, Peer* p, const Control& c) {
  auto slot = std::make_unique<std::pair<Control, Request>>();
  slot->first = c;
  KOLO_RETURN_IF_ERROR(below_->post_send(peer, &slot->first, sizeof(Control), kControlTag, &slot->second));
  p->outbox.push_back(std::move(slot));
  return Status::ok();
}

Status IpcTransport::pump_peer(int peer, Peer* p, int* completed, bool* device_busy) {
  const std::string who = "rank " + std::to_string(peer);
  KOLO_RETURN_IF_ERROR(expect_controls(peer, p));
  while (p->inbox && p->inbox->second.done) {
    const Control c = p->inbox->first;
    p->inbox.reset();
    if (c.kind == Control::kReady) {
      p->readies.push_back(c);
      if (p->ready_budget-- <= 0) ++p->owed;  // unannounced: replace the receive it took
    } else if (c.kind == Control::kDone || c.kind == Control::kDoneStaged) {
      // DONEs come in the order of this rank's READYs: for the first
      // receive still waiting.
      Message* m = nullptr;
      for (auto& r : p->recvs) {
        if (r->stage == Message::Stage::kWaiting) {
          m = r.get();
          break;
        }
      }
      if (!m) return mismatch(who + " sent a CUDA IPC DONE for no receive of this rank's");
      if (c.kind == Control::kDoneStaged) {
        // Its data is the next message on `next`: its receive goes first.
        KOLO_RETURN_IF_ERROR(below_->post_recv(peer, m->request->data, m->request->bytes, kDataTag, &m->data));
        m->stage = Message::Stage::kStagedData;
      } else {
        m->stage = Message::Stage::kDone;
        m->request->done = true;
        ++*completed;
      }
    } else {
      return mismatch(who + " sent a CUDA IPC control message of unknown kind " + std::to_string(c.kind));
    }
    KOLO_RETURN_IF_ERROR(expect_controls(peer, p));
  }
  while (!p->outbox.empty() && p->outbox.front()->second.done) p->outbox.pop_front();

  for (auto& m : p->recvs) {
    Request* r = m->request;
    if (m->stage == Message::Stage::kFencing) {
      bool passed = false;
      KOLO_RETURN_IF_ERROR(device_->poll(m->fence, &passed));
      if (!passed) {
        *device_busy = true;
        break;  // READYs go out in posting order
      }
      Control ready;
      ready.kind = Control::kReady;
      ready.bytes = r->bytes;
      ready.tag = r->tag;
      if (r->bytes > 0) {
        Status s = device_->export_memory(r->data, &ready.handle);
        if (!s.is_ok()) return s.with_context("sharing a receive buffer with " + who + " over CUDA IPC");
      }
      KOLO_RETURN_IF_ERROR(send_ready(peer, p, ready));
      m->stage = Message::Stage::kWaiting;
    }
  }
  for (auto& m : p->recvs) {
    if (m->stage == Message::Stage::kStagedData && m->data.done) {
      m->stage = Message::Stage::kDone;
      m->request->done = true;
      ++*completed;
    }
  }
  while (!p->recvs.empty() && p->recvs.front()->stage == Message::Stage::kDone) p->recvs.pop_front();

  for (auto& m : p->sends) {
    Request* r = m->request;
    if (m->stage == Message::Stage::kWaiting) {
      if (p->readies.empty()) break;
      const Control ready = p->readies.front();
      p->readies.pop_front();
      if (ready.bytes != r->bytes || ready.tag != r->tag) {
        return mismatch(who + " expects a message of " + std::to_string(ready.bytes) + " bytes (tag " +
                        std::to_string(ready.tag) + ") where this rank sends " + std::to_string(r->bytes) +
                        " bytes (tag " + std::to_string(r->tag) + "): the ranks called different collectives");
      }
      if (r->bytes > 0) {
        void* remote = nullptr;
        if (!ReleasingHoldsScope::on_this_thread()) {
          Status s = device_->import_memory(ready.handle, &remote);
          if (!s.is_ok()) return s.with_context("opening " + who + "'s receive buffer over CUDA IPC");
        } else if (!device_->find_imported(ready.handle, &remote)) {
          // Opening a peer's buffer waits for the whole device, and this
          // thread runs what a caller's stream is held for (device.h):
          // this message goes staged through `next`, and the buffer is
          // opened before the next call's hold (GpuContext::prepare).
          m->staged = true;
        }
        if (!m->staged) device_->copy(remote, r->data, r->bytes);
      }
      m->fence = device_->fence();
      m->stage = Message::Stage::kCopying;
    }
    if (m->stage == Message::Stage::kCopying) {
      bool passed = false;
      KOLO_RETURN_IF_ERROR(device_->poll(m->fence, &passed));
      if (!passed) {
        *device_busy = true;
        break;  // DONEs go out in posting order
      }
      m->done_note = std::make_unique<std::pair<Control, Request>>();
      Control& done = m->done_note->first;
      done.kind = m->staged ? Control::kDoneStaged : Control::kDone;
      done.bytes = r->bytes;
      done.tag = r->tag;
      KOLO_RETURN_IF_ERROR(below_->post_send(peer, &done, sizeof(Control), kControlTag, &m->done_note->second));
      // The data right after its note, which tells the receiver to expect it.
      if (m->staged) KOLO_RETURN_IF_ERROR(below_->post_send(peer, r->data, r->bytes, kDataTag, &m->data));
      m->stage = Message::Stage::kNotifying;
    }
    // Done only once DONE (and staged data) has left: the receiver must not
    // wait on a note that sits in this rank's queue after the collective
    // has returned.
    if (m->stage == Message::Stage::kNotifying && m->done_note->second.done && (!m->staged || m->data.done)) {
      m->stage = Message::Stage::kDone;
      r->done = true;
      ++*completed;
    }
  }
  while (!p->sends.empty() && p->sends.front()->stage == Message::Stage::kDone) p->sends.pop_front();
  return Status::ok();
}

Status IpcTransport::pump(int* completed, bool* device_busy) {
  for (auto& [peer, p] : peers_) KOLO_RETURN_IF_ERROR(pump_peer(peer, p.get(), completed, device_busy));
  return Status::ok();
}

Status IpcTransport::progress(Deadline deadline) {
  Status s = progress_with_device(
      below_, deadline, [this](int* completed, bool* busy) { return pump(completed, busy); }, device_->name());
  if (s.code() != Code::kTimeout) return s;
  return Status(s.code(), s.message() + "; CUDA IPC: " + describe());
}

std::string IpcTransport::describe() const {
  static const char* kStage[] = {"sharing its buffer", "waiting for the peer", "copying", "notifying", "done",
                                 "receiving it staged"};
  std::string out;
  for (const auto& [peer, p] : peers_) {
    if (p->sends.empty() && p->recvs.empty()) continue;
    if (!out.empty()) out += "; ";
    out += "rank " + std::to_string(peer) + ": ";
    if (!p->sends.empty()) {
      out += std::to_string(p->sends.size()) + " send(s), the first " +
             kStage[static_cast<int>(p->sends.front()->stage)] + ", ";
    }
    if (!p->recvs.empty()) {
      out += std::to_string(p->recvs.size()) + " receive(s), the first " +
             kStage[static_cast<int>(p->recvs.front()->stage)] + ", ";
    }
    out += std::to_string(p->owed + (p->inbox ? 1 : 0)) + " control message(s) expected";
  }
  return out.empty() ? "nothing in flight" : out;
}

}  // namespace kolo
