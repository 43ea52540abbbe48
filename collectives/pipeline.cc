#include "collectives/pipeline.h"

#include <algorithm>
#include <memory>
#include <string>

namespace kolo {

size_t pipeline_cache_bytes(size_t l2) {
  if (l2 == 0) l2 = size_t{1} << 20;
  return std::clamp(l2 / 2, size_t{256} << 10, size_t{2} << 20);
}

size_t pipeline_segment_bytes(int64_t configured, bool own_core, size_t l2) {
  if (configured > 0) return static_cast<size_t>(configured);
  return own_core ? pipeline_cache_bytes(l2) : size_t{2} << 20;
}

Status run_pipeline(const Pipeline& p, const PipelineOptions& options, Memory* memory) {
  const size_t S = p.sends.size();
  const size_t R = p.recvs.size();
  // Requests live at fixed addresses for the whole call: the transport holds
  // pointers to them.
  std::unique_ptr<Request[]> send_req(new Request[S]);
  std::unique_ptr<Request[]> recv_req(new Request[R]);

  size_t slot_bytes = 0;
  for (const auto& r : p.recvs) {
    if (r.local) slot_bytes = std::max(slot_bytes, r.bytes);
  }
  const size_t slots = std::max<size_t>(1, options.staging_slots);

  // Transient results (RecvUnit::transient) and the send that forwards
  // each: the only send "after" it, reading exactly its dest. Without such
  // a send, or with a UnitWork, the result goes to dest as any other.
  std::vector<long> forwarder;
  size_t keepable = 0;
  if (!p.work && std::any_of(p.recvs.begin(), p.recvs.end(), [](const RecvUnit& u) { return u.transient; })) {
    forwarder.assign(R, -1);
    std::vector<int> readers(R, 0);
    for (size_t i = 0; i < S; ++i) {
      const SendUnit& u = p.sends[i];
      if (u.after < 0) continue;
      const RecvUnit& from = p.recvs[static_cast<size_t>(u.after)];
      if (++readers[u.after] == 1 && from.transient && from.local && !from.finalize && u.data == from.dest &&
          u.bytes == from.bytes) {
        forwarder[u.after] = static_cast<long>(i);
      } else {
        forwarder[u.after] = -1;
      }
    }
    for (size_t i = 0; i < R; ++i) keepable += forwarder[i] >= 0;
  }
  size_t keeps = std::min(slots, keepable);  // buffers for transient results

  unsigned char* staging = nullptr;
  if (slot_bytes) {
    staging = static_cast<unsigned char*>(memory->staging(slot_bytes * (slots + keeps)));
    if (!staging && keeps) {  // the buffers for transient results are a gain, not a need
      keeps = 0;
      staging = static_cast<unsigned char*>(memory->staging(slot_bytes * slots));
    }
    if (!staging) return device_error("no memory for " + std::to_string(slots) + " staging slots of " +
                                            std::to_string(slot_bytes) + " bytes");
  }
  // Buffer k (after the staging slots) holds a transient result until the
  // send that forwards it (kept_for[k]) is finished; -1: free.
  std::vector<long> kept_for(keeps, -1);
  std::vector<const void*> kept_at(keeps ? R : 0, nullptr);  // per receive unit

  size_t posted_sends = 0, finished_sends = 0;
  size_t posted_recvs = 0, finished_recvs = 0;
  // Staging slot of reduce-receive i is (number of reduce-receives before i) % slots;
  // a slot is reusable once the receive that used it is finished.
  std::vector<size_t> reduce_index(R);
  size_t reduces = 0;
  for (size_t i = 0; i < R; ++i) {
    reduce_index[i] = reduces;
    if (p.recvs[i].local) ++reduces;
  }
  size_t finished_reduces = 0;
  // Sends finish in order; a transient result's buffer is free once the
  // send that forwards it has finished.
  const auto note_finished_sends = [&] {
    while (finished_sends < posted_sends && send_req[finished_sends].done) ++finished_sends;
    for (long& holder : kept_for) {
      if (holder >= 0 && static_cast<size_t>(holder) < finished_sends) holder = -1;
    }
  };

  for (;;) {
    while (posted_sends < S) {
      const SendUnit& u = p.sends[posted_sends];
      if (u.after >= 0 && static_cast<size_t>(u.after) >= finished_recvs) break;
      if (u.prepare && p.work) p.work->before_send(posted_sends);
      const void* data = keeps && u.after >= 0 && kept_at[u.after] ? kept_at[u.after] : u.data;
      KOLO_RETURN_IF_ERROR(p.transport->post_send(p.right, data, u.bytes, p.tag, &send_req[posted_sends]));
      ++posted_sends;
    }
    while (posted_recvs < R) {
      const RecvUnit& u = p.recvs[posted_recvs];
      void* into = u.dest;
      if (u.local) {
        if (reduce_index[posted_recvs] >= finished_reduces + slots) break;  // no free slot yet
        into = staging + (reduce_index[posted_recvs] % slots) * slot_bytes;
      }
      KOLO_RETURN_IF_ERROR(p.transport->post_recv(p.left, into, u.bytes, p.tag, &recv_req[posted_recvs]));
      ++posted_recvs;
    }
    note_finished_sends();
    if (finished_sends == S && finished_recvs == R) return Status::ok();

    KOLO_RETURN_IF_ERROR(p.transport->progress(Deadline::after_seconds_coarse(options.timeout_s)));
    if (keeps) note_finished_sends();  // frees buffers for the receives that just arrived

    // Finish receives in order: reduce staged data into its destination.
    while (finished_recvs < posted_recvs && recv_req[finished_recvs].done) {
      const RecvUnit& u = p.recvs[finished_recvs];
      if (p.work) {
        p.work->after_recv(finished_recvs, recv_req[finished_recvs].data);
      } else if (u.local) {
        // A transient result goes to a free buffer of its own if there is
        // one (else to dest, as any other): its forwarder sends it from there.
        void* out = u.dest;
        if (keeps && forwarder[finished_recvs] >= 0) {
          const auto free = std::find(kept_for.begin(), kept_for.end(), -1);
          if (free != kept_for.end()) {
            *free = forwarder[finished_recvs];
            out = staging + (slots + static_cast<size_t>(free - kept_for.begin())) * slot_bytes;
            kept_at[finished_recvs] = out;
          }
        }
        memory->reduce(p.dtype, p.op, out, u.local, recv_req[finished_recvs].data, u.count);
      }
      if (u.local) ++finished_reduces;
      if (u.finalize && !p.work) memory->finalize(p.dtype, p.op, u.dest, u.count, p.divisor);
      if (static_cast<long>(finished_recvs) == p.mark_recv && p.mark_time) {
        *p.mark_time = std::chrono::steady_clock::now();
      }
      ++finished_recvs;
    }
  }
}

}  // namespace kolo
