// The shared-memory transport, for host buffers between ranks of one
// machine: each direction of a pair is a ring of slots in a segment of its
// own (ring.h), so a message costs a copy in and a copy out and no system
// call while both sides are busy. Segments are created in /dev/shm and
// unlinked as soon as the receiver has mapped them, so a job that dies
// (kill -9 included) leaves nothing behind.
//
// progress() spins briefly, then sleeps on the futexes of every ring it
// waits on at once (futex_waitv), waking every 100 ms to see whether a
// peer it waits on has closed its end (abort, failure, mismatch) or its
// process has ended (a pidfd): a dead peer is noticed within that, never
// at the deadline.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/any_source.h"
#include "transport/fifo.h"
#include "transport/progress_loop.h"
#include "transport/shm/process_watch.h"
#include "transport/shm/ring.h"
#include "transport/store.h"
#include "transport/transport.h"

namespace kolo {

struct ShmOptions {
  uint64_t job_id = 0;                // the communicator (as TcpOptions::job_id)
  std::string store_prefix = "shm/";  // keys this transport owns in the store
  ShmRingShape ring;                  // each direction's slots
};

class ShmTransport final : public DirectTransport, public AnySource {
 public:
  static Status create(Store* store, int rank, int size, const ShmOptions& options, std::unique_ptr<ShmTransport>* out);
  ~ShmTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "shm"; }

  // Creates this rank's ring to each peer and publishes its name, so that
  // ranks connecting around a cycle never wait on one another.
  Status prepare(const std::vector<int>& peers) override;
  Status connect(int peer, Deadline deadline) override;
  Status post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status progress(Deadline deadline) override;
  void abort() override;
  void interrupt() override;
  void set_polling(int spin_us, bool yield) override { loop_.set_polling(spin_us, yield); }
  Status pump(Pumped* pumped) override;
  // On the futexes of every ring with a request waiting, at once.
  Status sleep(Deadline deadline, Pumped* pumped) override;
  bool has_pending() override;
  std::string describe_pending() override;
  // Receiving from any peer: the next message's first chunk waits in the
  // peer's ring, so peek() reads its size and tag there. try_connect
  // publishes this rank's ring to the peer (its connect() then completes
  // without this rank), and maps the peer's once the peer has mapped this
  // one, which is how it tells that the peer's ring is published.
  AnySource* any_source() override { return this; }
  bool can_peek(int) const override { return true; }
  Status try_connect(int peer, Deadline deadline, bool* connected) override;
  Status peek(int peer, Arrival* next) override;
  Status watch(const std::vector<int>& peers) override;
  bool watching() const override { return !watched_.empty(); }
  Status check_not_awaited(uint64_t tag) override;

 private:
  struct Message {
    unsigned char* data;
    size_t bytes;
    uint64_t tag;
    Request* request;
    size_t offset = 0;
    bool started = false;  // a chunk has moved (a 0-byte message is one empty chunk)
  };
  struct Peer {
    int rank = -1;
    ShmRing out;  // this rank -> peer, created here
    ShmRing in;   // peer -> this rank, created there
    Fifo<Message> sends, recvs;  // posted, oldest first
    ProcessWatch process;             // the peer's, when it is another process
    uint64_t sent = 0, received = 0;  // messages, for errors
    bool ended = false;               // its process has ended (seen by a watch)
  };

  ShmTransport(Store* store, int rank, int size, const ShmOptions& options);
  Status peer_for(int peer, Peer** out);
  // The connected peer of that rank, or nullptr (not connected, or no such rank).
  Peer* connected_peer(int peer) const { return peer >= 0 && peer < size_ ? peers_[peer].get() : nullptr; }
  Status pump_sends(Peer* p, Pumped* pumped);
  Status pump_recvs(Peer* p, Pumped* pumped);
  // Whether a peer this rank waits on has closed its end or ended.
  Status check_alive(const Peer& p);
  // peek() for a connected peer; with check_process, also asks the pidfd.
  Arrival next_of(Peer* p, bool check_process);
  static bool process_ended(const Peer& p);
  // Closes this rank's ends (why: a ShmClosed) and wakes the peers.
  void close_all(uint32_t why);
  Status fail(Status s);
  std::string ring_key(int from, int to) const;

  Store* store_;
  int rank_;
  int size_;
  ShmOptions options_;
  std::mutex peers_mutex_;                         // guards peers_ against abort() from another thread
  std::map<int, std::unique_ptr<Peer>> prepared_;  // ring published, peer's not yet mapped
  // Connected peers by rank (nullptr: not connected), and the same in a
  // vector for the hot loop. Changed only by connect(), which runs as posts
  // and pumps do, one caller at a time (the communicator's call lock), so
  // they read them without peers_mutex_.
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Peer*> active_;
  std::vector<Peer*> watched_;                     // watch()'s peers
  ProgressLoop loop_;
  std::atomic<uint32_t> wake_{0};  // bumped by interrupt() and abort(): the sleep's own futex
  Status failed_;
  // Requests that completed as they were posted, since the last pump().
  int completed_early_ = 0;
};

}  // namespace kolo
