#include "transport/ib/pair.h"

#include <arpa/inet.h>

#include <cstring>

#include "common/log.h"
#include "transport/ib/verbs_library.h"

namespace kolo {

namespace {

enum ControlKind : uint32_t { kCts = 1, kCredit = 2, kMismatch = 3 };

std::string verbs_error(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

}  // namespace

IbPair::IbPair(int rank, int peer, ibv_pd* pd, ibv_cq* cq, RegistrationCache* cache, RegistrationBackend* staging,
               const IbPairOptions& options)
    : rank_(rank),
      peer_(peer),
      pd_(pd),
      cq_(cq),
      cache_(cache),
      options_(options),
      credits_(options.window),
      send_ring_(staging, options.staging_initial_bytes, options.staging_max_bytes),
      recv_ring_(staging, options.staging_initial_bytes, options.staging_max_bytes) {}

IbPair::~IbPair() {
  if (qp_) verbs().destroy_qp(qp_);
  if (slots_mr_) verbs().dereg_mr(slots_mr_);
}

Status IbPair::lost() const {
  return peer_lost(who() + " closed the connection: its process ended, or its communicator closed or failed");
}

std::string IbPair::who() const { return "rank " + std::to_string(peer_) + " (RDMA)"; }

Status IbPair::create(IbAddress* mine) {
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = static_cast<uint32_t>(options_.max_send_wr);
  init.cap.max_recv_wr = static_cast<uint32_t>(options_.window);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = sizeof(IbControl);
  qp_ = verbs().create_qp(pd_, &init);
  if (!qp_) return transport_error(verbs_error("ibv_create_qp", errno));

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(options_.port);
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  int err = verbs().modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (err) return transport_error(verbs_error("ibv_modify_qp(INIT)", err));

  slots_.assign(static_cast<size_t>(options_.window), IbControl{});
  slots_mr_ = verbs().reg_mr(pd_, slots_.data(), slots_.size() * sizeof(IbControl), IBV_ACCESS_LOCAL_WRITE);
  if (!slots_mr_) return transport_error(verbs_error("ibv_reg_mr(control slots)", errno));

  mine->qp_num = qp_->qp_num;
  // Any 24-bit start works as long as this side sends from the value it
  // advertised; a per-pair value makes stray packets of another pair fail.
  send_psn_ = static_cast<uint32_t>(rank_ * 7919 + peer_ * 104729 + 1) & 0xffffff;
  mine->psn = send_psn_;
  return Status::ok();
}

Status IbPair::connect(const IbAddress& remote) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(common_mtu(options_.mtu, remote.mtu));
  attr.dest_qp_num = remote.qp_num;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;  // 0.64 ms before a sender retries a receive not yet posted
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.port_num = static_cast<uint8_t>(options_.port);
  if (options_.ethernet || remote.lid == 0) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(options_.gid_index);
    attr.ah_attr.grh.hop_limit = 64;
  }
  int err = verbs().modify_qp(qp_, &attr,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (err) return transport_error(verbs_error(("ibv_modify_qp(RTR) towards " + who()).c_str(), err));

  // Post the receive slots before the peer can send into them: it may reach
  // RTS first, and an RNR retry would only cost time.
  for (int s = 0; s < options_.window; ++s) {
    slot_work_.push_back(std::make_unique<IbWork>(IbWork{IbWork::kControlRecv, this, s, nullptr, {}}));
    KOLO_RETURN_IF_ERROR(post_slot(s));
  }

  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;   // 4.096 us * 2^14 = 67 ms per transport retry
  attr.retry_cnt = 7;  // so a dead peer is noticed in about half a second of sending
  attr.rnr_retry = 7;  // receive-not-ready: retry without limit (the peer posts slots on connect)
  attr.sq_psn = send_psn_;
  attr.max_rd_atomic = 1;
  err = verbs().modify_qp(qp_, &attr,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC);
  if (err) return transport_error(verbs_error(("ibv_modify_qp(RTS) towards " + who()).c_str(), err));
  return Status::ok();
}

void IbPair::break_connection() {
  if (!qp_) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  verbs().modify_qp(qp_, &attr, IBV_QP_STATE);
}

Status IbPair::on_peer_gone() {
  peer_gone_ = true;
  return has_pending() ? lost() : Status::ok();
}

Status IbPair::probe() {
  if (probing_ || peer_gone_ || send_wr_in_flight_ > 0 || !credits_.can_send_credit_return()) {
    KOLO_DEBUG("not probing " << who() << ": probing " << probing_ << ", sends in flight " << send_wr_in_flight_
                              << ", credits " << credits_.available());
    return Status::ok();
  }
  IbControl c{};
  c.kind = kCredit;
  KOLO_RETURN_IF_ERROR(send_control(c));
  probing_ = true;
  KOLO_DEBUG("probing " << who() << " (" << describe_pending() << ")");
  return Status::ok();
}

Status IbPair::post_slot(int slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(&slots_[static_cast<size_t>(slot)]);
  sge.length = sizeof(IbControl);
  sge.lkey = slots_mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = reinterpret_cast<uintptr_t>(slot_work_[static_cast<size_t>(slot)].get());
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int err = ibv_post_recv(qp_, &wr, &bad);
  if (err) return transport_error(verbs_error(("ibv_post_recv towards " + who()).c_str(), err));
  return Status::ok();
}

Status IbPair::post_send(const void* data, size_t bytes, uint64_t tag, Request* request) {
  if (peer_gone_) return lost();
  request->data = const_cast<void*>(data);
  request->bytes = bytes;
  request->tag = tag;
  request->done = false;
  sends_.push_back(request);
  return flush();
}

Status IbPair::post_recv(void* data, size_t bytes, uint64_t tag, Request* request) {
  if (peer_gone_) return lost();
  request->data = data;
  request->bytes = bytes;
  request->tag = tag;
  request->done = false;
  PendingRecv r;
  r.request = request;
  r.seq = next_recv_seq_++;
  recvs_.push_back(std::move(r));
  return flush();
}

Status IbPair::offer(PendingRecv* r, bool* offered) {
  *offered = false;
  IbControl cts{};
  cts.kind = kCts;
  cts.seq = r->seq;
  cts.bytes = r->request->bytes;
  cts.tag = r->request->tag;
  if (cts.bytes > 0) {
    if (cache_->find(r->request->data, cts.bytes, &r->pin)) {
      cts.addr = reinterpret_cast<uintptr_t>(r->request->data);
      cts.rkey = RegistrationCache::region(r->pin).rkey;
    } else {
      bool taken = false;
      KOLO_RETURN_IF_ERROR(recv_ring_.allocate(cts.bytes, &r->slice, &taken));
      if (!taken) return Status::ok();
      r->staged = true;
      cts.addr = reinterpret_cast<uintptr_t>(r->slice.data);
      cts.rkey = r->slice.rkey;
    }
  }
  outgoing_.push_back(cts);
  *offered = true;
  return Status::ok();
}

Status IbPair::send_control(IbControl control) {
  control.credits = credits_.take_owed();
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(&control);
  sge.length = sizeof(control);
  auto* work = new IbWork{IbWork::kControlSend, this, 0, nullptr, {}};
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<uintptr_t>(work);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;  // inline: the stack copy may go at once
  ibv_send_wr* bad = nullptr;
  int err = ibv_post_send(qp_, &wr, &bad);
  if (err) {
    delete work;
    return transport_error(verbs_error(("ibv_post_send(control) to " + who()).c_str(), err));
  }
  credits_.on_send();
  ++send_wr_in_flight_;
  return Status::ok();
}

Status IbPair::flush() {
  // Receives in order, as far as the staging ring has room.
  while (offered_ < recvs_.size()) {
    bool offered = false;
    KOLO_RETURN_IF_ERROR(offer(&recvs_[offered_], &offered));
    if (!offered) break;
    ++offered_;
  }
  // CTS messages first: each lets the peer's data move.
  while (!outgoing_.empty() && credits_.can_send() && send_wr_in_flight_ < options_.max_send_wr) {
    KOLO_RETURN_IF_ERROR(send_control(outgoing_.front()));
    outgoing_.pop_front();
  }
  while (!sends_.empty() && !cts_.empty() && credits_.can_send() && send_wr_in_flight_ < options_.max_send_wr) {
    bool started = false;
    KOLO_RETURN_IF_ERROR(start_write(sends_.front(), cts_.front(), &started));
    if (!started) break;
    sends_.pop_front();
    cts_.pop_front();
  }
  // Credits owed and no CTS to carry them (or none that may go): return
  // them on their own, with the reserved credit if need be. Whenever the
  // peer is out of credits, everything it sent has been or will be consumed
  // here, so what this rank owes reaches half the window and goes back.
  if (credits_.should_return_explicitly() && credits_.can_send_credit_return() &&
      send_wr_in_flight_ < options_.max_send_wr) {
    IbControl c{};
    c.kind = kCredit;
    KOLO_RETURN_IF_ERROR(send_control(c));
  }
  return Status::ok();
}

Status IbPair::start_write(Request* send, const IbControl& cts, bool* started) {
  *started = false;
  if (cts.bytes != send->bytes || cts.tag != send->tag) {
    std::string what = "message " + std::to_string(cts.seq) + " to " + who() + ": this rank sends " +
                       std::to_string(send->bytes) + " bytes (tag " + std::to_string(send->tag) +
                       ") where the peer expects " + std::to_string(cts.bytes) + " bytes (tag " +
                       std::to_string(cts.tag) + ")";
    return fail_mismatch(what);
  }
  auto work = std::make_unique<IbWork>(IbWork{IbWork::kWrite, this, 0, send, {}});
  ibv_sge sge{};
  ibv_send_wr wr{};
  if (send->bytes > 0) {
    sge.length = static_cast<uint32_t>(send->bytes);
    if (cache_->find(send->data, send->bytes, &work->pin)) {
      sge.addr = reinterpret_cast<uintptr_t>(send->data);
      sge.lkey = RegistrationCache::region(work->pin).lkey;
    } else {
      StagingSlice slice;
      bool taken = false;
      KOLO_RETURN_IF_ERROR(send_ring_.allocate(send->bytes, &slice, &taken));
      if (!taken) return Status::ok();
      std::memcpy(slice.data, send->data, send->bytes);
      work->staged = true;
      sge.addr = reinterpret_cast<uintptr_t>(slice.data);
      sge.lkey = slice.lkey;
    }
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  wr.wr_id = reinterpret_cast<uintptr_t>(work.get());
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(static_cast<uint32_t>(cts.seq));
  wr.wr.rdma.remote_addr = cts.addr;
  wr.wr.rdma.rkey = cts.rkey;
  ibv_send_wr* bad = nullptr;
  int err = ibv_post_send(qp_, &wr, &bad);
  if (err) return transport_error(verbs_error(("ibv_post_send(write) to " + who()).c_str(), err));
  work.release();
  credits_.on_send();
  ++send_wr_in_flight_;
  ++writes_in_flight_;
  *started = true;
  return Status::ok();
}

Status IbPair::fail_mismatch(const std::string& what) {
  // Tell the peer why before failing, so it reports the mismatch too
  // rather than a lost connection (the reserved credit is for such messages).
  if (credits_.can_send_credit_return()) {
    IbControl m{};
    m.kind = kMismatch;
    Status ignored = send_control(m);
    (void)ignored;
  }
  return mismatch(what);
}

Status IbPair::on_completion(const ibv_wc& wc, IbWork* work, int* completed) {
  if (wc.status != IBV_WC_SUCCESS) {
    const std::string why = std::string(verbs().wc_status_str(wc.status)) + " (verbs status " +
                            std::to_string(static_cast<int>(wc.status)) + ")";
    if (work->kind != IbWork::kControlRecv) delete work;
    // Retries exhausted: nothing answers at the peer's end.
    if (wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR) {
      return peer_lost(who() + " is unreachable: " + why);
    }
    // Flushed: this queue pair is in the error state (an earlier failure,
    // or forced there). Anything else: the peer refused the transfer. Both
    // may be the peer's process ending; IbTransport tells them apart.
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      return transport_error("the queue pair to " + who() + " is in the error state: " + why);
    }
    return transport_error("RDMA transfer with " + who() + " failed: " + why);
  }
  switch (work->kind) {
    case IbWork::kControlSend:
      delete work;
      --send_wr_in_flight_;
      probing_ = false;
      break;
    case IbWork::kWrite:
      // Writes complete in the order posted, so the staged ones release
      // their slices oldest first.
      if (work->staged) send_ring_.release_oldest();
      work->request->done = true;
      ++*completed;
      delete work;  // releases the source's pin
      --send_wr_in_flight_;
      --writes_in_flight_;
      break;
    case IbWork::kControlRecv: {
      credits_.on_consumed();
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        const uint32_t seq = ntohl(wc.imm_data);
        if (recvs_.empty() || static_cast<uint32_t>(recvs_.front().seq) != seq) {
          return transport_error("RDMA write from " + who() + " for message " + std::to_string(seq) +
                                 " that this rank is not expecting");
        }
        if (wc.byte_len != recvs_.front().request->bytes) {
          return mismatch("message " + std::to_string(seq) + " from " + who() + " has " +
                          std::to_string(wc.byte_len) + " bytes where this rank expects " +
                          std::to_string(recvs_.front().request->bytes));
        }
        PendingRecv& r = recvs_.front();
        if (r.staged) {
          std::memcpy(r.request->data, r.slice.data, r.request->bytes);
          recv_ring_.release_oldest();
        }
        r.request->done = true;
        ++*completed;
        recvs_.pop_front();
        --offered_;
        KOLO_RETURN_IF_ERROR(post_slot(work->slot));
      } else {
        IbControl control = slots_[static_cast<size_t>(work->slot)];
        KOLO_RETURN_IF_ERROR(post_slot(work->slot));
        KOLO_RETURN_IF_ERROR(credits_.on_credits_returned(control.credits));
        if (control.kind == kMismatch) {
          return mismatch("message " + std::to_string(recvs_.empty() ? 0 : recvs_.front().seq) + " from " + who() +
                          ": the peer sends a different size or tag than this rank expects");
        }
        if (control.kind == kCts) cts_.push_back(control);
      }
      break;
    }
  }
  return flush();
}

std::string IbPair::describe_pending() const {
  std::string s = who() + ": ";
  s += std::to_string(sends_.size() + static_cast<size_t>(writes_in_flight_)) + " send(s), " +
       std::to_string(recvs_.size()) + " receive(s) pending";
  if (!sends_.empty() && cts_.empty()) s += " (waiting for the peer to post its receive)";
  return s;
}

}  // namespace kolo
