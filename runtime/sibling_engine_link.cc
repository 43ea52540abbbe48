#include "runtime/sibling_engine_link.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "collectives/elementwise.h"
#include "collectives/fingerprint.h"
#include "gpu/device.h"

namespace kolo {
namespace {

// The token that starts a round: an empty message with its own tag.
const uint64_t kRoundTag = fingerprint(CollectiveKind::kBarrier, DataType::kUint8, ReduceOp::kMin, 0xfffff, 0);

class SiblingEngineLink : public EngineLink {
 public:
  explicit SiblingEngineLink(std::unique_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  ~SiblingEngineLink() override {
    if (identity_.data) identity_.device->release(identity_.data);
    std::lock_guard<std::mutex> lock(open_->mutex);  // a release in progress ends first
    open_->device = nullptr;
  }

  void interrupt() override { comm_->interrupt(); }
  void abort() override { comm_->abort(); }
  void revoke() override { comm_->revoke(); }
  void attach(RegisteredBuffer* buffer) override { comm_->attach(buffer); }

  Status await_round(Deadline until, bool* peer_started) override {
    *peer_started = false;
    return comm_->run_custom("engine (waiting for work)", [&](const ScheduleContext& ctx) {
      KOLO_RETURN_IF_ERROR(post_token_recv(ctx));
      if (!token_in_.done) {
        Status s = ctx.transport->progress(until);
        // Waiting for work is not a failure, however long it takes.
        if (!(s.code() == Code::kTimeout && until.expired())) KOLO_RETURN_IF_ERROR(s);
      }
      *peer_started = token_in_.done;
      return Status::ok();
    });
  }

  Status start_round() override {
    KOLO_RETURN_IF_ERROR(comm_->run_custom("engine round start", [&](const ScheduleContext& ctx) {
      KOLO_RETURN_IF_ERROR(post_token_recv(ctx));
      token_out_ = Request();
      KOLO_RETURN_IF_ERROR(ctx.transport->post_send(ctx.right, nullptr, 0, kRoundTag, &token_out_));
      while (!token_in_.done || !token_out_.done) {
        KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds(comm_->config().timeout_s)));
      }
      return Status::ok();
    }));
    token_posted_ = false;
    return Status::ok();
  }

  Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                   std::optional<WireFormat> wire, float* residuals) override {
    return comm_->allreduce(send, recv, count, dtype, op, wire, residuals);
  }
  Status allreduce_spans(const std::vector<Span>& spans, DataType dtype, ReduceOp op, std::optional<WireFormat> wire,
                         const std::vector<float*>* residuals, const std::vector<SpanScale>* scales) override {
    return comm_->allreduce_spans(spans, dtype, op, wire, residuals, scales);
  }
  Status allgather(const void* send, void* recv, size_t send_count, DataType dtype) override {
    return comm_->allgather(send, recv, send_count, dtype);
  }
  Status allgather_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype) override {
    return comm_->allgather_v(send, recv, counts, dtype);
  }
  Status reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype,
                          ReduceOp op, double postscale) override {
    return comm_->reduce_scatter_v(send, recv, counts, dtype, op, postscale);
  }
  Status broadcast(void* buf, size_t count, DataType dtype, int root) override {
    return comm_->broadcast(buf, count, dtype, root);
  }
  Status alltoall(const void* send, const std::vector<size_t>& send_counts, void* recv,
                  const std::vector<size_t>& recv_counts, DataType dtype) override {
    return comm_->alltoall(send, send_counts, recv, recv_counts, dtype);
  }
  Status barrier() override { return comm_->barrier(); }
  Status identity_on_device(DataType dtype, ReduceOp op, size_t count, void** out) override {
    Device* device = nullptr;
    KOLO_RETURN_IF_ERROR(comm_->gpu_device(&device));
    const size_t bytes = std::max<size_t>(count * dtype_size(dtype), 1);
    if (identity_.bytes < bytes) {
      // From the engine's thread, which holds no caller's stream.
      void* grown = device->allocate(bytes);
      if (!grown) return device_error("no GPU memory for a joined rank's " + std::to_string(bytes) + " bytes");
      if (identity_.data) identity_.device->release(identity_.data);
      identity_ = {device, grown, bytes};
    }
    // Filled each time: the allreduce leaves its result there.
    std::vector<unsigned char> host(bytes);
    fill_identity(dtype, op, host.data(), count);
    // The engine's thread is the only one that works on this GPU's
    // stream for the link's communicator (its collectives are blocking).
    device->copy(identity_.data, host.data(), bytes);
    KOLO_RETURN_IF_ERROR(device->synchronize(Deadline::after_seconds(comm_->config().timeout_s)));
    *out = identity_.data;
    return Status::ok();
  }
  Status device_output(size_t bytes, std::shared_ptr<void>* out) override {
    Device* device = nullptr;
    KOLO_RETURN_IF_ERROR(comm_->gpu_device(&device));
    void* data = device->allocate(std::max<size_t>(bytes, 1));
    if (!data) return device_error("no GPU memory for an output of " + std::to_string(bytes) + " bytes");
    std::shared_ptr<OpenDevice> open = open_;
    *out = std::shared_ptr<void>(data, [open](void* p) {
      std::lock_guard<std::mutex> lock(open->mutex);
      if (open->device) open->device->release(p);  // else the GPU went with the communicator
    });
    std::lock_guard<std::mutex> lock(open->mutex);
    open->device = device;
    return Status::ok();
  }
  void set_reduce_scatter_mark(std::chrono::steady_clock::time_point* mark) override {
    comm_->set_reduce_scatter_mark(mark);
  }

 private:
  // Posted once per round, by whichever comes first: the idle wait (so a
  // peer's round wakes this rank) or this rank starting the round itself.
  Status post_token_recv(const ScheduleContext& ctx) {
    if (token_posted_) return Status::ok();
    token_in_ = Request();
    KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(ctx.left, nullptr, 0, kRoundTag, &token_in_));
    token_posted_ = true;
    return Status::ok();
  }

  std::unique_ptr<Communicator> comm_;
  struct DeviceBuffer {
    Device* device = nullptr;
    void* data = nullptr;
    size_t bytes = 0;
  };
  DeviceBuffer identity_;  // identity_on_device's
  // The GPU the outputs handed out (device_output) are released to,
  // shared with them: they may outlive the link, and its communicator's
  // GPU with it.
  struct OpenDevice {
    std::mutex mutex;
    Device* device = nullptr;  // nullptr once the link has gone
  };
  std::shared_ptr<OpenDevice> open_ = std::make_shared<OpenDevice>();
  Request token_in_, token_out_;
  bool token_posted_ = false;
};

}  // namespace

EngineConnector sibling_engine_connector(Communicator* parent) {
  EngineConnector c;
  c.connect = [parent](std::unique_ptr<EngineLink>* out) {
    std::unique_ptr<Communicator> comm;
    KOLO_RETURN_IF_ERROR(Communicator::create_sibling(parent, "engine/", /*full_mesh=*/true, &comm));
    *out = std::make_unique<SiblingEngineLink>(std::move(comm));
    return Status::ok();
  };
  // A split's store is its own view of the world's: cancelling it stops
  // the engine's rendezvous without touching the world's (the world's own
  // ignores this).
  c.cancel = [parent](const Status& why) { parent->cancel_store_waits(why); };
  // The parent opens the same GPU as the link's communicator (local rank).
  c.classify = [parent](const Submission& s, bool* on_device) {
    // By address alone, as the communicator classifies a rank's empty
    // buffers: where they are, not how much they hold.
    std::vector<NamedBuffer> buffers;
    for (const void* p : s.sends) {
      if (p) buffers.push_back({p, 1, "a send buffer"});
    }
    for (const void* p : s.recvs) {
      if (p) buffers.push_back({p, 1, "a receive buffer"});
    }
    return parent->classify(buffers, on_device);
  };
  return c;
}

std::unique_ptr<Engine> make_sibling_engine(Communicator* parent) {
  return std::make_unique<Engine>(parent->config(), parent->rank(), parent->size(), sibling_engine_connector(parent));
}

}  // namespace kolo
