#include "collectives/point_to_point.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "collectives/fingerprint.h"
#include "collectives/ring_schedule.h"
#include "common/rank_list.h"
#include "transport/any_source.h"

namespace kolo {
namespace {

std::string describe(const PointToPoint& op) {
  return std::string(op.direction == PointToPoint::kSend ? "send of " : "receive of ") + std::to_string(op.count) +
         " " + dtype_name(op.dtype) + " " + (op.direction == PointToPoint::kSend ? "to" : "from") + " rank " +
         std::to_string(op.peer);
}

// Messages to this rank itself: the k-th send meets the k-th receive.
Status copy_to_self(const ScheduleContext& ctx, const std::vector<PointToPoint>& ops) {
  std::vector<const PointToPoint*> sends, recvs;
  for (const auto& op : ops) {
    if (op.peer != ctx.rank) continue;
    (op.direction == PointToPoint::kSend ? sends : recvs).push_back(&op);
  }
  if (sends.size() != recvs.size()) {
    return mismatch("rank " + std::to_string(ctx.rank) + " posted " + std::to_string(sends.size()) +
                    " send(s) to itself and " + std::to_string(recvs.size()) + " receive(s) from itself");
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->count != recvs[i]->count || sends[i]->dtype != recvs[i]->dtype) {
      return mismatch(describe(*sends[i]) + " meets a " + describe(*recvs[i]));
    }
    ctx.memory->copy(recvs[i]->data, sends[i]->data, sends[i]->count * dtype_size(sends[i]->dtype));
  }
  return Status::ok();
}

}  // namespace

Status run_point_to_point(const ScheduleContext& ctx, const std::vector<PointToPoint>& ops) {
  KOLO_RETURN_IF_ERROR(copy_to_self(ctx, ops));
  // Each message goes in segments, cut the same way on both sides (both
  // know the count), so that no message outgrows what a transport stages.
  struct Posted {
    Request request;
  };
  size_t messages = 0;
  for (const auto& op : ops) {
    if (op.peer == ctx.rank) continue;
    messages += segments_per_chunk(op.count, dtype_size(op.dtype), ctx.segment_bytes);
  }
  std::unique_ptr<Posted[]> posted(new Posted[messages]);  // fixed addresses: the transport holds them
  size_t next = 0;
  for (const auto& op : ops) {
    if (op.peer == ctx.rank) continue;
    const size_t elem = dtype_size(op.dtype);
    const size_t segments = segments_per_chunk(op.count, elem, ctx.segment_bytes);
    const uint64_t tag = fingerprint(CollectiveKind::kSendRecv, op.dtype, ReduceOp::kSum, 0, op.count);
    for (size_t j = 0; j < segments; ++j) {
      const Range seg = partition(op.count, segments, j);
      auto* at = static_cast<unsigned char*>(op.data) + seg.offset * elem;
      Request* r = &posted[next++].request;
      KOLO_RETURN_IF_ERROR(op.direction == PointToPoint::kSend
                               ? ctx.transport->post_send(op.peer, at, seg.count * elem, tag, r)
                               : ctx.transport->post_recv(op.peer, at, seg.count * elem, tag, r));
    }
  }
  // Every wait has a deadline: KOLO_TIMEOUT_S without any message finishing.
  for (size_t done = 0; done < messages;) {
    done = 0;
    for (size_t i = 0; i < messages; ++i) done += posted[i].request.done ? 1 : 0;
    if (done == messages) break;
    KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds_coarse(ctx.pipeline.timeout_s)));
  }
  return Status::ok();
}

namespace {

// How often peers not yet connected are looked at again while waiting: a
// peer connects on its first send here, so this bounds how late that
// send's message is noticed (once per peer: later ones are watched).
constexpr auto kConnectPoll = std::chrono::milliseconds(10);

// Which peers a receive from any peer is waiting for, and why not for the
// others.
struct AnyPeers {
  std::vector<int> connected;    // waited for through watch()
  std::vector<int> unconnected;  // waited for through try_connect()
  std::vector<int> closed;       // closed their end, or their process is gone
  std::vector<int> collective;   // their next message belongs to a collective

  std::string describe() const {
    std::string s;
    auto add = [&](const std::vector<int>& ranks, const char* what) {
      if (ranks.empty()) return;
      s += (s.empty() ? "" : "; ") + ranks_named(ranks, 16) + what;
    };
    add(connected, ": sent nothing");
    add(unconnected, ": never connected to this rank");
    add(closed, ": closed the connection");
    add(collective, ": next message belongs to a collective");
    return s;
  }
};

void erase(std::vector<int>* v, int peer) { v->erase(std::remove(v->begin(), v->end(), peer), v->end()); }

}  // namespace

Status receive_from_any(const ScheduleContext& ctx, void* data, size_t count, DataType dtype, AnySourceState* state,
                        int* source) {
  Transport* t = ctx.transport;
  AnySource* any = t->any_source();
  if (any == nullptr) return unsupported(std::string(t->name()) + " transport cannot receive from any peer");
  const int n = ctx.size;
  const Deadline deadline = Deadline::after_seconds_coarse(ctx.pipeline.timeout_s);
  AnyPeers peers;
  for (int k = 1; k < n; ++k) peers.unconnected.push_back((ctx.rank + k) % n);
  int chosen = -1;
  Status waited = Status::ok();
  while (chosen < 0) {
    // Connect what can be: this rank's half of every pair is in place
    // after the first round, so a peer's send connects without it.
    for (int peer : std::vector<int>(peers.unconnected)) {
      bool connected = false;
      Status s = any->try_connect(peer, deadline, &connected);
      if (s.code() == Code::kPeerLost) {
        erase(&peers.unconnected, peer);
        peers.closed.push_back(peer);
        continue;
      }
      KOLO_RETURN_IF_ERROR(s);
      if (connected) {
        erase(&peers.unconnected, peer);
        peers.connected.push_back(peer);
      }
    }
    // One look at every connected peer, from where the last one left off.
    for (int k = 0; k < n && chosen < 0; ++k) {
      const int peer = (state->next_first + k) % n;
      if (std::find(peers.connected.begin(), peers.connected.end(), peer) == peers.connected.end()) continue;
      Arrival next;
      KOLO_RETURN_IF_ERROR(any->peek(peer, &next));
      if (next.state == Arrival::kArrived) {
        if (fingerprint_kind(next.tag) == CollectiveKind::kSendRecv) {
          chosen = peer;
        } else {
          erase(&peers.connected, peer);
          peers.collective.push_back(peer);
        }
      } else if (next.state == Arrival::kClosed) {
        erase(&peers.connected, peer);
        peers.closed.push_back(peer);
      }
    }
    if (chosen >= 0) break;
    if (peers.connected.empty() && peers.unconnected.empty()) {
      const std::string why = "no peer can send to rank " + std::to_string(ctx.rank) + " any more (" +
                              peers.describe() + ")";
      KOLO_RETURN_IF_ERROR(any->watch({}));
      return peers.collective.empty() ? peer_lost(why) : mismatch(why);
    }
    KOLO_RETURN_IF_ERROR(any->watch(peers.connected));
    Deadline until = deadline;
    if (!peers.unconnected.empty()) {
      const Deadline poll = Deadline::after(kConnectPoll);
      if (poll.time_point() < deadline.time_point()) until = poll;
    }
    waited = t->progress(until);
    if (waited.code() == Code::kTimeout && !deadline.expired()) {
      waited = Status::ok();  // time to look at the unconnected again
      continue;
    }
    if (!waited.is_ok()) break;
  }
  KOLO_RETURN_IF_ERROR(any->watch({}));
  if (waited.code() == Code::kTimeout) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", ctx.pipeline.timeout_s);
    return timeout_error("no peer sent anything to rank " + std::to_string(ctx.rank) + " within " + seconds +
                         " s (" + peers.describe() + ")");
  }
  KOLO_RETURN_IF_ERROR(waited);
  *source = chosen;
  state->next_first = (chosen + 1) % n;
  return run_point_to_point(ctx, {PointToPoint{PointToPoint::kRecv, chosen, data, count, dtype}});
}

}  // namespace kolo
