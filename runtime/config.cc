#include "runtime/config.h"

#include "common/env.h"
#include "common/log.h"
#include "transport/socket/address.h"

namespace kolo {

Status load_config(Config* c) {
  Config d;
  KOLO_RETURN_IF_ERROR(load_log_settings());
  KOLO_RETURN_IF_ERROR(env_double("KOLO_TIMEOUT_S", d.timeout_s, 0.001, 1e7, &c->timeout_s));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SEGMENT_BYTES", d.segment_bytes, 64, int64_t{1} << 30, &c->segment_bytes));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_PIPELINE_DEPTH", d.pipeline_depth, 1, 64, &c->pipeline_depth));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SMALL_ALLREDUCE_BYTES", d.small_allreduce_bytes, 0, int64_t{1} << 30,
                                 &c->small_allreduce_bytes));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SOCKETS_PER_PEER", d.sockets_per_peer, 1, 64, &c->sockets_per_peer));
  KOLO_RETURN_IF_ERROR(
      env_int64("KOLO_SOCKET_BUFFER", d.socket_buffer_bytes, 0, int64_t{1} << 30, &c->socket_buffer_bytes));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SPIN_US", d.spin_us, -1, 1000000, &c->spin_us));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SPIN_YIELD", d.spin_yield, -1, 1, &c->spin_yield));
  KOLO_RETURN_IF_ERROR(env_bool("KOLO_CHECKSUM", d.checksum, &c->checksum));
  KOLO_RETURN_IF_ERROR(env_bool("KOLO_CUDA_IPC", d.cuda_ipc, &c->cuda_ipc));
  c->bind_address = env_string("KOLO_BIND_ADDR").value_or("");
  if (c->bind_address.empty()) {
    if (auto ifname = env_string("KOLO_IFNAME")) KOLO_RETURN_IF_ERROR(interface_address(*ifname, &c->bind_address));
  }
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_FUSION_THRESHOLD", d.fusion_threshold_bytes, 0, int64_t{1} << 34,
                                 &c->fusion_threshold_bytes));
  KOLO_RETURN_IF_ERROR(env_double("KOLO_CYCLE_TIME_MS", d.cycle_time_ms, 0, 1e6, &c->cycle_time_ms));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_CACHE_CAPACITY", d.cache_capacity, 0, 1 << 20, &c->cache_capacity));
  c->timeline_path = env_string("KOLO_TIMELINE").value_or("");
  KOLO_RETURN_IF_ERROR(env_double("KOLO_STALL_WARNING_S", d.stall_warning_s, 0.001, 1e7, &c->stall_warning_s));
  KOLO_RETURN_IF_ERROR(env_double("KOLO_STALL_SHUTDOWN_S", d.stall_shutdown_s, 0, 1e7, &c->stall_shutdown_s));
  c->job_id = env_string("KOLO_JOB_ID").value_or("");
  c->secret = env_string("KOLO_SECRET").value_or("");
  c->transport = env_string("KOLO_TRANSPORT").value_or(d.transport);
  if (c->transport != "auto" && c->transport != "tcp" && c->transport != "ib") {
    return invalid_argument("KOLO_TRANSPORT='" + c->transport + "': use auto, tcp or ib");
  }
  c->ib_device = env_string("KOLO_IB_DEV").value_or("");
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_IB_PORT", d.ib_port, 0, 255, &c->ib_port));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_IB_GID_INDEX", d.ib_gid_index, -1, 1 << 16, &c->ib_gid_index));
  return Status::ok();
}

}  // namespace kolo
