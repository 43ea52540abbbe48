// One reliable-connected queue pair to one peer, and the protocol over it.
//
// The receiver says where a message goes: each post_recv sends the peer a
// small "clear to send" (CTS) control message naming a buffer (address,
// rkey, size, tag, sequence number). The k-th send posted for the peer waits
// for the k-th CTS, checks that sizes and tags agree, and RDMA-writes its
// bytes into that buffer with an immediate value (the sequence number),
// which completes the k-th receive on the other side. A sender can never
// overwrite anything the receiver has not offered.
//
// Memory declared long-lived (RegistrationCache) moves with no copy: the
// CTS names the receive buffer itself, the write reads the send buffer
// itself. Any other message is staged: the receiver offers a slice of its
// StagingRing and copies the message out when it lands; the sender copies
// it into its own ring and writes from there. A message waits, queued in
// order, while its ring is full.
//
// Control messages (SENDs) and writes with immediate both consume one of
// the receiver's posted receive slots; CreditWindow keeps the sender from
// exceeding them. Credits go back on every CTS, or in a credit message when
// half the window is owed.
//
// A size or tag disagreement fails both sides with MISMATCH (the sender
// tells the receiver with a control message before failing). A peer that
// ends is learnt from the TCP link beside the queue pair (IbTransport).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/ib/address.h"
#include "transport/ib/credits.h"
#include "transport/ib/registration_cache.h"
#include "transport/ib/staging_ring.h"
#include "transport/transport.h"

namespace kolo {

// The wire format of a control message (sent inline).
struct IbControl {
  uint32_t kind;     // kCts, kCredit, kMismatch
  int32_t credits;   // returned to the receiver of this message
  uint64_t seq;      // the receive this CTS is for
  uint64_t addr;     // where to write
  uint32_t rkey;
  uint32_t reserved;
  uint64_t bytes;
  uint64_t tag;
};
static_assert(sizeof(IbControl) == 48, "IbControl is a wire format");

// What a completion's wr_id points at.
struct IbWork {
  enum Kind { kControlRecv, kControlSend, kWrite } kind;
  class IbPair* pair;
  int slot = 0;                   // kControlRecv: which receive slot
  Request* request = nullptr;     // kWrite: the send it completes
  RegistrationCache::Pin pin;     // kWrite: keeps the source registered
  bool staged = false;            // kWrite: sent from the staging ring
};

struct IbPairOptions {
  int window = 64;          // receive slots per pair (credits)
  int max_send_wr = 256;    // send queue depth
  int port = 1;
  int gid_index = 0;
  uint8_t mtu = 3;
  bool ethernet = true;
  size_t staging_initial_bytes = 4 << 20;  // each ring (send, receive), once first needed
  size_t staging_max_bytes = 64 << 20;     // growth doubles up to this (or one message)
};

class IbPair {
 public:
  IbPair(int rank, int peer, ibv_pd* pd, ibv_cq* cq, RegistrationCache* cache, RegistrationBackend* staging,
         const IbPairOptions& options);
  ~IbPair();

  // Creates the queue pair (INIT) and describes it for the peer.
  Status create(IbAddress* mine);
  // Moves it to RTR and RTS towards the peer's address, and posts the receive slots.
  Status connect(const IbAddress& peer);

  Status post_send(const void* data, size_t bytes, uint64_t tag, Request* request);
  Status post_recv(void* data, size_t bytes, uint64_t tag, Request* request);

  // A completion of this pair's work; *completed counts requests finished.
  Status on_completion(const ibv_wc& wc, IbWork* work, int* completed);

  bool has_pending() const { return !sends_.empty() || !recvs_.empty() || writes_in_flight_ > 0; }
  std::string describe_pending() const;
  int peer() const { return peer_; }
  // Registrations the staging rings made (growths included).
  uint64_t staging_registrations() const { return send_ring_.registrations() + recv_ring_.registrations(); }
  ibv_qp* qp() const { return qp_; }
  // The peer's process ended (its TCP link closed; see IbTransport): what
  // this rank still expects of it is lost, PEER_LOST if anything is.
  Status on_peer_gone();
  // While waiting on the peer: sends it a credit message if nothing else is
  // in flight, so a peer whose host died (no TCP end to read) is noticed
  // when the send fails after the transport's retries (about half a second
  // on hardware), not at the deadline.
  Status probe();
  // Moves the queue pair to the error state: everything posted completes
  // as flushed (before it is destroyed).
  void break_connection();

 private:
  struct PendingRecv {
    Request* request;
    uint64_t seq;
    RegistrationCache::Pin pin;  // direct: keeps the buffer registered
    bool staged = false;         // lands in `slice`, copied out on arrival
    StagingSlice slice;
  };

  Status post_slot(int slot);
  Status send_control(IbControl control);
  Status flush();  // what credits, rings and the send queue allow: offers, control messages, writes
  // Queues the CTS of *r, unless its staging ring is full (*offered false).
  Status offer(PendingRecv* r, bool* offered);
  // Posts the write, unless its staging ring is full (*started false).
  Status start_write(Request* send, const IbControl& cts, bool* started);
  Status fail_mismatch(const std::string& what);
  std::string who() const;
  Status lost() const;

  int rank_;
  int peer_;
  ibv_pd* pd_;
  ibv_cq* cq_;
  RegistrationCache* cache_;
  IbPairOptions options_;
  ibv_qp* qp_ = nullptr;
  uint32_t send_psn_ = 0;  // advertised to the peer as the first PSN it will receive
  ibv_mr* slots_mr_ = nullptr;
  std::vector<IbControl> slots_;  // receive slots for control messages
  std::vector<std::unique_ptr<IbWork>> slot_work_;
  CreditWindow credits_;
  std::deque<IbControl> outgoing_;  // CTS messages waiting for a credit
  std::deque<Request*> sends_;      // posted sends waiting for their CTS (then for the write)
  std::deque<IbControl> cts_;       // CTS received, waiting for their send
  std::deque<PendingRecv> recvs_;   // posted receives, in order
  size_t offered_ = 0;              // how many of recvs_ (a prefix) have their CTS queued
  StagingRing send_ring_;
  StagingRing recv_ring_;
  uint64_t next_recv_seq_ = 0;
  uint64_t next_send_seq_ = 0;
  int send_wr_in_flight_ = 0;
  int writes_in_flight_ = 0;
  bool probing_ = false;    // a probe's credit message is in flight
  bool peer_gone_ = false;  // the peer's process ended
};

}  // namespace kolo
