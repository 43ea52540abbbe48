#include "runtime/fake_engine_link.h"

#include <cstring>
#include <utility>

#include "collectives/elementwise.h"
#include "collectives/reduce_kernels.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;

Bytes bytes_of(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  return n ? Bytes(p, p + n) : Bytes();
}

// Every rank's buffer reduced in rank order, as a reference would.
Bytes reduce_all(const std::vector<std::vector<Bytes>>& all, DataType dtype, ReduceOp op) {
  Bytes out = all[0][0];
  const size_t count = out.size() / dtype_size(dtype);
  for (size_t r = 1; r < all.size(); ++r) reduce_kernel(dtype, op)(out.data(), out.data(), all[r][0].data(), count);
  if (FinalizeFn finalize = finalize_kernel(dtype, op)) finalize(out.data(), count, static_cast<int>(all.size()));
  return out;
}

size_t sum(const std::vector<size_t>& v, size_t end) {
  size_t s = 0;
  for (size_t i = 0; i < end; ++i) s += v[i];
  return s;
}

}  // namespace

class FakeFabric::Link : public EngineLink {
 public:
  Link(FakeFabric* fabric, int rank) : f_(fabric), rank_(rank) {}

  void interrupt() override { f_->interrupt(rank_); }
  void abort() override { end(aborted("rank " + std::to_string(rank_) + " aborted its link")); }
  void revoke() override { end(revoked("rank " + std::to_string(rank_) + " revoked its link")); }
  void attach(RegisteredBuffer*) override { f_->count(rank_, "attach"); }
  Status await_round(Deadline until, bool* peer_started) override {
    return f_->await_round(rank_, until, peer_started);
  }
  Status start_round() override { return f_->start_round(rank_); }

  Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, std::optional<WireFormat>,
                   float*) override {
    std::vector<std::vector<Bytes>> all;
    KOLO_RETURN_IF_ERROR(f_->exchange(rank_, "allreduce", {bytes_of(send, count * dtype_size(dtype))}, &all));
    const Bytes out = reduce_all(all, dtype, op);
    if (!out.empty()) std::memcpy(recv, out.data(), out.size());
    return Status::ok();
  }
  Status allreduce_spans(const std::vector<Span>& spans, DataType dtype, ReduceOp op, std::optional<WireFormat>,
                         const std::vector<float*>*, const std::vector<SpanScale>* scales) override {
    const size_t elem = dtype_size(dtype);
    Bytes mine;
    for (size_t i = 0; i < spans.size(); ++i) {
      Bytes b = bytes_of(spans[i].send, spans[i].count * elem);
      if (scales) scale_copy(dtype, b.data(), b.data(), spans[i].count, (*scales)[i].pre);
      mine.insert(mine.end(), b.begin(), b.end());
    }
    std::vector<std::vector<Bytes>> all;
    KOLO_RETURN_IF_ERROR(f_->exchange(rank_, "allreduce_spans", {std::move(mine)}, &all));
    const Bytes out = reduce_all(all, dtype, op);
    size_t at = 0;
    for (size_t i = 0; i < spans.size(); ++i) {
      const Span& s = spans[i];
      if (s.count) std::memcpy(s.recv, out.data() + at, s.count * elem);
      if (scales) scale_copy(dtype, s.recv, s.recv, s.count, (*scales)[i].post);
      at += s.count * elem;
    }
    return Status::ok();
  }
  Status allgather(const void* send, void* recv, size_t send_count, DataType dtype) override {
    return gather("allgather", send, recv, std::vector<size_t>(f_->size_, send_count), dtype);
  }
  Status allgather_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype) override {
    return gather("allgather_v", send, recv, counts, dtype);
  }
  Status reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype,
                          ReduceOp op, double postscale) override {
    const size_t elem = dtype_size(dtype);
    std::vector<std::vector<Bytes>> all;
    KOLO_RETURN_IF_ERROR(
        f_->exchange(rank_, "reduce_scatter_v", {bytes_of(send, sum(counts, counts.size()) * elem)}, &all));
    const Bytes out = reduce_all(all, dtype, op);
    if (counts[rank_]) std::memcpy(recv, out.data() + sum(counts, rank_) * elem, counts[rank_] * elem);
    if (postscale != 1) scale_copy(dtype, recv, recv, counts[rank_], postscale);
    return Status::ok();
  }
  Status broadcast(void* buf, size_t count, DataType dtype, int root) override {
    const size_t bytes = count * dtype_size(dtype);
    std::vector<std::vector<Bytes>> all;
    KOLO_RETURN_IF_ERROR(f_->exchange(rank_, "broadcast", {rank_ == root ? bytes_of(buf, bytes) : Bytes()}, &all));
    if (bytes) std::memcpy(buf, all[root][0].data(), bytes);
    return Status::ok();
  }
  Status alltoall(const void* send, const std::vector<size_t>& send_counts, void* recv,
                  const std::vector<size_t>& recv_counts, DataType dtype) override {
    const size_t elem = dtype_size(dtype);
    std::vector<Bytes> mine;  // one part per destination
    for (size_t p = 0; p < send_counts.size(); ++p) {
      mine.push_back(bytes_of(static_cast<const unsigned char*>(send) + sum(send_counts, p) * elem,
                              send_counts[p] * elem));
    }
    std::vector<std::vector<Bytes>> all;
    KOLO_RETURN_IF_ERROR(f_->exchange(rank_, "alltoall", std::move(mine), &all));
    for (size_t p = 0; p < all.size(); ++p) {
      const Bytes& part = all[p][rank_];
      if (part.size() != recv_counts[p] * elem) return internal_error("fake alltoall: counts disagree");
      if (!part.empty()) std::memcpy(static_cast<unsigned char*>(recv) + sum(recv_counts, p) * elem, part.data(), part.size());
    }
    return Status::ok();
  }
  Status device_output(size_t, std::shared_ptr<void>*) override {
    return unsupported("the fake link has no GPU");
  }
  Status identity_on_device(DataType, ReduceOp, size_t, void**) override {
    return unsupported("the fake link has no GPU");
  }
  Status barrier() override {
    std::vector<std::vector<Bytes>> all;
    return f_->exchange(rank_, "barrier", {Bytes()}, &all);
  }
  void set_reduce_scatter_mark(std::chrono::steady_clock::time_point*) override {}

 private:
  Status gather(const char* what, const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype) {
    const size_t elem = dtype_size(dtype);
    std::vector<std::vector<Bytes>> all;
    KOLO_RETURN_IF_ERROR(f_->exchange(rank_, what, {bytes_of(send, counts[rank_] * elem)}, &all));
    for (size_t p = 0; p < all.size(); ++p) {
      if (all[p][0].size() != counts[p] * elem) return internal_error(std::string("fake ") + what + ": counts disagree");
      if (!all[p][0].empty()) {
        std::memcpy(static_cast<unsigned char*>(recv) + sum(counts, p) * elem, all[p][0].data(), all[p][0].size());
      }
    }
    return Status::ok();
  }
  // This rank's calls fail with `why`; the others', as when a peer goes.
  void end(Status why) {
    std::lock_guard<std::mutex> lock(f_->mu_);
    if (f_->aborted_[rank_].is_ok()) f_->aborted_[rank_] = why;
    if (f_->broken_.is_ok()) f_->broken_ = peer_lost("rank " + std::to_string(rank_) + " left: " + why.message());
    f_->cv_.notify_all();
  }

  FakeFabric* f_;
  const int rank_;
};

FakeFabric::FakeFabric(int size, double timeout_s)
    : size_(size),
      timeout_s_(timeout_s),
      next_slot_(size, 0),
      tokens_(size, 0),
      interrupted_(size, false),
      aborted_(size),
      calls_(size) {}

FakeFabric::~FakeFabric() = default;

EngineConnector FakeFabric::connector(int rank) {
  EngineConnector c;
  c.connect = [this, rank](std::unique_ptr<EngineLink>* out) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!refused_.is_ok()) return refused_;
    ++connected_;
    cv_.notify_all();
    const Deadline deadline = Deadline::after_seconds(timeout_s_);
    while (connected_ < size_ && cancelled_.is_ok()) {
      if (cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout) {
        return timeout_error("fake connect: only " + std::to_string(connected_) + " ranks connected");
      }
    }
    if (!cancelled_.is_ok()) return cancelled_;
    *out = std::make_unique<Link>(this, rank);
    return Status::ok();
  };
  c.cancel = [this](const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = why;
    cv_.notify_all();
  };
  return c;
}

void FakeFabric::refuse_connections(Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  refused_ = std::move(why);
}

int FakeFabric::calls(int rank, const std::string& what) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_[rank].find(what);
  return it == calls_[rank].end() ? 0 : it->second;
}

void FakeFabric::hold_rounds(bool held) {
  std::lock_guard<std::mutex> lock(mu_);
  rounds_held_ = held;
  cv_.notify_all();
}

void FakeFabric::break_all(Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.is_ok()) broken_ = std::move(why);
  cv_.notify_all();
}

void FakeFabric::count(int rank, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_[rank][what];
}

Status FakeFabric::broken_locked(int rank) const { return aborted_[rank].is_ok() ? broken_ : aborted_[rank]; }

Status FakeFabric::exchange(int rank, const std::string& what, std::vector<std::vector<unsigned char>> mine,
                            std::vector<std::vector<std::vector<unsigned char>>>* all) {
  std::unique_lock<std::mutex> lock(mu_);
  ++calls_[rank][what];
  KOLO_RETURN_IF_ERROR(broken_locked(rank));
  const uint64_t number = next_slot_[rank]++;
  Slot& slot = slots_[number];
  if (slot.parts.empty()) {
    slot.parts.resize(size_);
    slot.what = what;
  }
  if (slot.what != what) slot.mismatch = true;
  slot.parts[rank] = std::move(mine);
  ++slot.arrived;
  cv_.notify_all();
  const Deadline deadline = Deadline::after_seconds(timeout_s_);
  while (slot.arrived < size_) {
    KOLO_RETURN_IF_ERROR(broken_locked(rank));
    if (cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout) {
      return timeout_error("fake " + what + ": " + std::to_string(slot.arrived) + " of " + std::to_string(size_) +
                           " ranks arrived");
    }
  }
  if (slot.mismatch) return internal_error("fake exchange " + std::to_string(number) + ": ranks called different collectives");
  *all = slot.parts;
  if (++slot.taken == size_) slots_.erase(number);
  return Status::ok();
}

Status FakeFabric::await_round(int rank, Deadline until, bool* peer_started) {
  std::unique_lock<std::mutex> lock(mu_);
  ++calls_[rank]["await_round"];
  while (tokens_[rank] == 0 && !interrupted_[rank] && broken_locked(rank).is_ok()) {
    if (cv_.wait_until(lock, until.time_point()) == std::cv_status::timeout) break;
  }
  interrupted_[rank] = false;
  KOLO_RETURN_IF_ERROR(broken_locked(rank));
  *peer_started = tokens_[rank] > 0;
  return Status::ok();
}

Status FakeFabric::start_round(int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  ++calls_[rank]["start_round"];
  const Deadline deadline = Deadline::after_seconds(timeout_s_);
  while (rounds_held_ && broken_locked(rank).is_ok()) {
    if (cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout) {
      return timeout_error("fake round start: the rounds were held past the timeout");
    }
  }
  KOLO_RETURN_IF_ERROR(broken_locked(rank));
  ++tokens_[(rank + 1) % size_];
  cv_.notify_all();
  while (tokens_[rank] == 0) {
    KOLO_RETURN_IF_ERROR(broken_locked(rank));
    if (cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout) {
      return timeout_error("fake round start: no token from rank " + std::to_string((rank + size_ - 1) % size_));
    }
  }
  --tokens_[rank];
  return Status::ok();
}

void FakeFabric::interrupt(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  interrupted_[rank] = true;
  cv_.notify_all();
}

}  // namespace kolo
