#include "transport/shm/shm_transport.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <sstream>

#include "transport/frame.h"
#include "transport/shm/futex.h"

namespace kolo {

namespace {

// How often a sleeping progress() looks at the peers it waits on.
constexpr int kLivenessMs = 100;

std::string segment_name(uint64_t job_id, int from, int to) {
  std::random_device random;
  std::ostringstream name;
  name << "/kolo-" << std::hex << job_id << "-" << std::dec << from << "-" << to << "-" << std::hex << random()
       << random();
  return name.str();
}

}  // namespace

ShmTransport::ShmTransport(Store* store, int rank, int size, const ShmOptions& options)
    : store_(store), rank_(rank), size_(size), options_(options), peers_(std::max(size, 0)) {}

Status ShmTransport::create(Store* store, int rank, int size, const ShmOptions& options,
                            std::unique_ptr<ShmTransport>* out) {
  if (!options.ring.valid()) {
    return invalid_argument("a shared memory ring needs 2 or more slots, a power of two, of 64 bytes to 4 GiB each");
  }
  std::unique_ptr<ShmTransport> t(new ShmTransport(store, rank, size, options));
  KOLO_RETURN_IF_ERROR(t->loop_.open());
  *out = std::move(t);
  return Status::ok();
}

ShmTransport::~ShmTransport() {
  close_all(kShmGone);  // the peers learn at once
}

std::string ShmTransport::ring_key(int from, int to) const {
  return options_.store_prefix + "ring/" + std::to_string(from) + "/" + std::to_string(to);
}

Status ShmTransport::prepare(const std::vector<int>& peers) {
  for (int peer : peers) {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return invalid_argument("cannot connect to rank " + std::to_string(peer));
    }
    {
      std::lock_guard<std::mutex> lock(peers_mutex_);
      if (connected_peer(peer)) continue;
    }
    if (prepared_.count(peer)) continue;
    auto p = std::make_unique<Peer>();
    p->rank = peer;
    const std::string mine = segment_name(options_.job_id, rank_, peer);
    KOLO_RETURN_IF_ERROR(ShmRing::create(mine, options_.ring, options_.job_id, rank_, peer, &p->out));
    KOLO_RETURN_IF_ERROR(store_->set(ring_key(rank_, peer), mine));
    prepared_[peer] = std::move(p);
  }
  return Status::ok();
}

Status ShmTransport::connect(int peer, Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    if (connected_peer(peer)) return Status::ok();
  }
  KOLO_RETURN_IF_ERROR(prepare({peer}));
  std::unique_ptr<Peer> p = std::move(prepared_[peer]);
  prepared_.erase(peer);
  std::string theirs;
  Status s = store_->get_one(ring_key(peer, rank_), deadline, &theirs);
  if (!s.is_ok()) return s.with_context("waiting for rank " + std::to_string(peer) + "'s shared memory ring");
  KOLO_RETURN_IF_ERROR(ShmRing::open_and_unlink(theirs, options_.job_id, peer, rank_, &p->in));
  // This rank's ring is usable at once; the peer maps it (and unlinks its
  // name) when it connects in turn, which may be after this rank's next
  // connection (a cycle of ranks connecting must not wait on itself).
  const int pid = p->in.header()->sender_pid;
  if (pid != ::getpid()) p->process = ProcessWatch(pid);
  std::lock_guard<std::mutex> lock(peers_mutex_);
  active_.push_back(p.get());
  peers_[peer] = std::move(p);
  return Status::ok();
}

Status ShmTransport::peer_for(int peer, Peer** out) {
  if (!failed_.is_ok()) return failed_;
  Peer* p = connected_peer(peer);
  if (!p) return invalid_usage("no shared memory connection to rank " + std::to_string(peer));
  *out = p;
  return Status::ok();
}

// A message posted moves at once, as far as the ring allows: a small
// message is in the peer's ring before the caller's next step, and one
// already waiting in this rank's ring is taken without waiting for a
// progress() call. What completes here is counted by the next pump(), so
// that the next progress() returns at once (the contract's "completed since
// the previous call"), this transport's own or a PerPeerTransport's that
// pumps it among others.
Status ShmTransport::post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) {
  Peer* p = nullptr;
  KOLO_RETURN_IF_ERROR(peer_for(peer, &p));
  *request = Request{const_cast<void*>(data), bytes, tag, false};
  p->sends.push_back(Message{static_cast<unsigned char*>(const_cast<void*>(data)), bytes, tag, request});
  Pumped pumped;
  Status s = pump_sends(p, &pumped);
  if (!s.is_ok()) return fail(s);
  completed_early_ += pumped.completed;
  return Status::ok();
}

Status ShmTransport::post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) {
  Peer* p = nullptr;
  KOLO_RETURN_IF_ERROR(peer_for(peer, &p));
  *request = Request{data, bytes, tag, false};
  p->recvs.push_back(Message{static_cast<unsigned char*>(data), bytes, tag, request});
  Pumped pumped;
  Status s = pump_recvs(p, &pumped);
  if (!s.is_ok()) return fail(s);
  completed_early_ += pumped.completed;
  return Status::ok();
}

Status ShmTransport::fail(Status s) {
  if (failed_.is_ok()) failed_ = s;
  return s;
}

Status ShmTransport::pump_sends(Peer* p, Pumped* pumped) {
  while (!p->sends.empty()) {
    Message& m = p->sends.front();
    while (!m.started || m.offset < m.bytes) {
      if (!p->out.write_chunk(m.data, m.bytes, m.tag, &m.offset)) return Status::ok();  // full
      m.started = true;
      pumped->moved = true;
    }
    // Copied out of the caller's buffer: done, whenever the peer reads it.
    m.request->done = true;
    ++pumped->completed;
    ++p->sent;
    p->sends.pop_front();
  }
  return Status::ok();
}

Status ShmTransport::pump_recvs(Peer* p, Pumped* pumped) {
  while (!p->recvs.empty()) {
    Message& m = p->recvs.front();
    const ShmChunk* c = p->in.peek();
    if (!c) return Status::ok();
    if (c->message_bytes != m.bytes || c->tag != m.tag || c->offset != m.offset) {
      p->in.header()->receiver_closed.store(kShmMismatch);
      futex_wake_all(&p->in.header()->tail);
      return mismatch("message " + std::to_string(p->received) + " from rank " + std::to_string(p->rank) + " has " +
                      std::to_string(c->message_bytes) + " bytes (" + describe_tag(c->tag) +
                      ") where this rank expects " + std::to_string(m.bytes) + " bytes (" + describe_tag(m.tag) + ")");
    }
    if (c->bytes > 0) std::memcpy(m.data + m.offset, p->in.payload(c), c->bytes);
    m.offset += c->bytes;
    m.started = true;
    p->in.release();
    pumped->moved = true;
    if (m.offset == m.bytes) {
      m.request->done = true;
      ++pumped->completed;
      ++p->received;
      p->recvs.pop_front();
    }
  }
  return Status::ok();
}

Status ShmTransport::pump(Pumped* pumped) {
  if (!failed_.is_ok()) return failed_;
  pumped->completed += completed_early_;  // as they were posted (post_send)
  completed_early_ = 0;
  for (Peer* p : active_) {
    Status s = pump_sends(p, pumped);
    if (s.is_ok()) s = pump_recvs(p, pumped);
    if (!s.is_ok()) return fail(s);
  }
  if (!watched_.empty()) {
    for (Peer* p : watched_) {
      if (next_of(p, false).state != Arrival::kNothing) pumped->noticed = true;
    }
  }
  return Status::ok();
}

bool ShmTransport::process_ended(const Peer& p) { return p.ended || p.process.ended(); }

Arrival ShmTransport::next_of(Peer* p, bool check_process) {
  Arrival next;
  // Receives posted: the next chunk is theirs.
  if (!p->recvs.empty()) return next;
  if (const ShmChunk* c = p->in.peek()) {
    next.state = Arrival::kArrived;
    next.bytes = c->message_bytes;
    next.tag = c->tag;
    return next;
  }
  // What a peer wrote before it closed or ended is read first (above);
  // only then is it gone.
  if (check_process && !p->ended) p->ended = process_ended(*p);
  if (p->in.header()->sender_closed.load() != kShmOpen || p->ended) {
    // Once more: a chunk written just before the close.
    if (!p->in.peek()) next.state = Arrival::kClosed;
  }
  return next;
}

Status ShmTransport::try_connect(int peer, Deadline deadline, bool* connected) {
  *connected = false;
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return invalid_argument("cannot connect to rank " + std::to_string(peer));
  }
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    if (connected_peer(peer)) {
      *connected = true;
      return Status::ok();
    }
  }
  KOLO_RETURN_IF_ERROR(prepare({peer}));
  // The peer maps this rank's ring in its connect(), after publishing its
  // own: once it has, connect() finds the peer's ring without waiting.
  if (!prepared_[peer]->out.header()->receiver_attached.load()) return Status::ok();
  KOLO_RETURN_IF_ERROR(connect(peer, deadline));
  *connected = true;
  return Status::ok();
}

Status ShmTransport::peek(int peer, Arrival* next) {
  *next = Arrival{};
  Peer* p = nullptr;
  KOLO_RETURN_IF_ERROR(peer_for(peer, &p));
  *next = next_of(p, true);
  return Status::ok();
}

Status ShmTransport::watch(const std::vector<int>& peers) {
  watched_.clear();
  for (int peer : peers) {
    Peer* p = nullptr;
    KOLO_RETURN_IF_ERROR(peer_for(peer, &p));
    watched_.push_back(p);
  }
  return Status::ok();
}

Status ShmTransport::check_alive(const Peer& p) {
  const std::string who = "rank " + std::to_string(p.rank) + " (shared memory)";
  const uint32_t sender = p.in.header()->sender_closed.load();
  const uint32_t receiver = p.out.header()->receiver_closed.load();
  if (receiver == kShmMismatch && !p.sends.empty()) {
    return mismatch(who + " received a message of another size or operation than this rank sent");
  }
  const bool ended = process_ended(p);
  // What a peer wrote before it closed or ended is still read: only an
  // empty ring with a receive waiting on it is lost (a sender's messages
  // are complete once in the ring, so it may well have exited since).
  const bool receive_lost = (sender != kShmOpen || ended) && !p.recvs.empty() && !p.in.peek();
  const bool send_lost = (receiver != kShmOpen || ended) && !p.sends.empty();
  if (receive_lost || send_lost) {
    return peer_lost(who +
                     (ended ? ": its process has ended" : " closed the connection: its communicator closed or failed"));
  }
  return Status::ok();
}

Status ShmTransport::sleep(Deadline deadline, Pumped* pumped) {
  // Declare the sleep, then look once more (seq_cst, paired with the
  // writers in ring.cc): a chunk or a free slot that came meanwhile is
  // either seen here or wakes the futex.
  std::vector<FutexWait> waits = {{&wake_, wake_.load()}};
  for (Peer* p : active_) {
    if (!p->recvs.empty() || std::find(watched_.begin(), watched_.end(), p) != watched_.end()) {
      p->in.header()->receiver_sleeping.store(1);
      waits.push_back({&p->in.header()->head, p->in.header()->head.load()});
    }
    // A message not yet begun: its number, for a sender that waits
    // elsewhere to see (check_not_awaited).
    if (!p->recvs.empty() && !p->recvs.front().started) p->in.header()->receiver_awaits.store(p->received + 1);
    if (!p->sends.empty()) {
      p->out.header()->sender_sleeping.store(1);
      waits.push_back({&p->out.header()->tail, p->out.header()->tail.load()});
    }
  }
  Status s = pump(pumped);
  if (s.is_ok() && pumped->completed == 0 && !pumped->moved && !pumped->noticed) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_point() - std::chrono::steady_clock::now());
    futex_wait_any(waits, static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, kLivenessMs)));
  }
  for (Peer* p : active_) {
    p->in.header()->receiver_sleeping.store(0);
    p->in.header()->receiver_awaits.store(0);
    p->out.header()->sender_sleeping.store(0);
  }
  KOLO_RETURN_IF_ERROR(s);
  for (Peer* p : active_) {
    if (!p->recvs.empty() || !p->sends.empty()) {
      Status alive = check_alive(*p);
      if (!alive.is_ok()) return fail(alive);
    }
  }
  // A watched peer that closed or ended is news, not a failure: the
  // caller stops waiting for it.
  for (Peer* p : watched_) {
    if (next_of(p, true).state != Arrival::kNothing) pumped->noticed = true;
  }
  return Status::ok();
}

bool ShmTransport::has_pending() {
  for (const Peer* p : active_) {
    if (!p->sends.empty() || !p->recvs.empty()) return true;
  }
  return false;
}

std::string ShmTransport::describe_pending() {
  std::string what;
  for (const Peer* p : active_) {
    if (!p->sends.empty()) {
      what += (what.empty() ? "" : "; ") + std::string("sending message ") + std::to_string(p->sent) + " to rank " +
              std::to_string(p->rank) + " (" + std::to_string(p->sends.front().offset) + " of " +
              std::to_string(p->sends.front().bytes) + " bytes written)";
    }
    if (!p->recvs.empty()) {
      what += (what.empty() ? "" : "; ") + std::string("receiving message ") + std::to_string(p->received) +
              " from rank " + std::to_string(p->rank) + " (" + std::to_string(p->recvs.front().offset) + " of " +
              std::to_string(p->recvs.front().bytes) + " bytes)";
    }
  }
  return what;
}

Status ShmTransport::progress(Deadline deadline) {
  return loop_.run(
      deadline, [this](Pumped* pumped) { return pump(pumped); },
      [this](Deadline d, Pumped* pumped) { return sleep(d, pumped); }, [this] { return describe_pending(); });
}

void ShmTransport::close_all(uint32_t why) {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  for (auto& entry : peers_) {
    if (!entry) continue;
    Peer& p = *entry;
    uint32_t open = kShmOpen;
    p.out.header()->sender_closed.compare_exchange_strong(open, why);
    open = kShmOpen;
    p.in.header()->receiver_closed.compare_exchange_strong(open, why);
    // Whichever word the peer sleeps on.
    futex_wake_all(&p.out.header()->head);
    futex_wake_all(&p.in.header()->tail);
  }
}

Status ShmTransport::check_not_awaited(uint64_t tag) {
  // Connected peers only change under the caller's call lock (connect).
  for (const auto& p : peers_) {
    if (!p || !p->sends.empty()) continue;
    const uint64_t awaits = p->out.header()->receiver_awaits.load();
    // Message number awaits - 1 where this rank has sent `sent` (numbers 0
    // to sent - 1): one it has not sent, and this rank sends none now.
    // Not this transport's failure (it stays usable): the caller's wait
    // may have ended meanwhile, with the peer past it, and the caller
    // looks again before it fails.
    if (awaits != 0 && awaits - 1 >= p->sent) {
      return mismatch("rank " + std::to_string(p->rank) + " (shared memory) waits for message " +
                      std::to_string(awaits - 1) + " from this rank, which has sent it " + std::to_string(p->sent) +
                      " and runs " + describe_tag(tag) + ", which sends none");
    }
  }
  return Status::ok();
}

void ShmTransport::abort() {
  if (!loop_.abort()) return;
  close_all(kShmGone);
  interrupt();
}

void ShmTransport::interrupt() {
  loop_.interrupt();
  wake_.fetch_add(1);
  futex_wake_all(&wake_);
}

}  // namespace kolo
