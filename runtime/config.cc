#include "runtime/config.h"

#include <iomanip>
#include <sstream>

#include "common/env.h"
#include "common/log.h"
#include "runtime/transport_registry.h"
#include "transport/socket/address.h"

namespace kolo {

Status check_limit(const std::string& name, double value, Limit limit) {
  auto text = [](double v) {
    std::ostringstream o;
    o << std::setprecision(15) << v;
    return o.str();
  };
  if (!(value >= limit.min)) return invalid_argument(name + " = " + text(value) + ": must be at least " + text(limit.min));
  if (!(value <= limit.max)) return invalid_argument(name + " = " + text(value) + ": must be at most " + text(limit.max));
  return Status::ok();
}

Status check_transport(const std::string& name, const std::string& value) {
  // Any transport of the registry, by name.
  std::string names = "auto";
  const auto& kinds = transport_registry();
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (value == kinds[k].name) return Status::ok();
    names += (k + 1 < kinds.size() ? ", " : " or ") + std::string(kinds[k].name);
  }
  if (value == "auto") return Status::ok();
  return invalid_argument(name + "='" + value + "': use " + names);
}

Status check_algorithm(const std::string& name, const std::string& value) {
  if (value != "auto" && value != "ring" && value != "hierarchical") {
    return invalid_argument(name + "='" + value + "': use auto, ring or hierarchical");
  }
  return Status::ok();
}

Status load_config(Config* c) {
  Config d;
  KOLO_RETURN_IF_ERROR(load_log_settings());
  KOLO_RETURN_IF_ERROR(env_double("KOLO_TIMEOUT_S", d.timeout_s, limits::timeout_s.min, limits::timeout_s.max, &c->timeout_s));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SEGMENT_BYTES", d.segment_bytes, int64_t(limits::segment_bytes.min), int64_t(limits::segment_bytes.max), &c->segment_bytes));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_PIPELINE_DEPTH", d.pipeline_depth, int64_t(limits::pipeline_depth.min), int64_t(limits::pipeline_depth.max), &c->pipeline_depth));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SMALL_ALLREDUCE_BYTES", d.small_allreduce_bytes, int64_t(limits::small_allreduce_bytes.min), int64_t(limits::small_allreduce_bytes.max), &c->small_allreduce_bytes));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SOCKETS_PER_PEER", d.sockets_per_peer, int64_t(limits::sockets_per_peer.min), int64_t(limits::sockets_per_peer.max), &c->sockets_per_peer));
  KOLO_RETURN_IF_ERROR(
      env_int64("KOLO_SOCKET_BUFFER", d.socket_buffer_bytes, int64_t(limits::socket_buffer_bytes.min), int64_t(limits::socket_buffer_bytes.max), &c->socket_buffer_bytes));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SPIN_US", d.spin_us, int64_t(limits::spin_us.min), int64_t(limits::spin_us.max), &c->spin_us));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_SPIN_YIELD", d.spin_yield, int64_t(limits::spin_yield.min), int64_t(limits::spin_yield.max), &c->spin_yield));
  KOLO_RETURN_IF_ERROR(env_bool("KOLO_CHECKSUM", d.checksum, &c->checksum));
  KOLO_RETURN_IF_ERROR(env_bool("KOLO_CUDA_IPC", d.cuda_ipc, &c->cuda_ipc));
  c->bind_address = env_string("KOLO_BIND_ADDR").value_or("");
  if (c->bind_address.empty()) {
    if (auto ifname = env_string("KOLO_IFNAME")) KOLO_RETURN_IF_ERROR(interface_address(*ifname, &c->bind_address));
  }
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_FUSION_THRESHOLD", d.fusion_threshold_bytes, int64_t(limits::fusion_threshold_bytes.min), int64_t(limits::fusion_threshold_bytes.max), &c->fusion_threshold_bytes));
  KOLO_RETURN_IF_ERROR(env_double("KOLO_CYCLE_TIME_MS", d.cycle_time_ms, limits::cycle_time_ms.min, limits::cycle_time_ms.max, &c->cycle_time_ms));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_CACHE_CAPACITY", d.cache_capacity, int64_t(limits::cache_capacity.min), int64_t(limits::cache_capacity.max), &c->cache_capacity));
  c->timeline_path = env_string("KOLO_TIMELINE").value_or("");
  KOLO_RETURN_IF_ERROR(env_double("KOLO_STALL_WARNING_S", d.stall_warning_s, limits::stall_warning_s.min, limits::stall_warning_s.max, &c->stall_warning_s));
  KOLO_RETURN_IF_ERROR(env_double("KOLO_STALL_SHUTDOWN_S", d.stall_shutdown_s, limits::stall_shutdown_s.min, limits::stall_shutdown_s.max, &c->stall_shutdown_s));
  c->job_id = env_string("KOLO_JOB_ID").value_or("");
  c->secret = env_string("KOLO_SECRET").value_or("");
  c->transport = env_string("KOLO_TRANSPORT").value_or(d.transport);
  KOLO_RETURN_IF_ERROR(check_transport("KOLO_TRANSPORT", c->transport));
  c->host_name = env_string("KOLO_HOSTNAME").value_or("");
  c->algorithm = env_string("KOLO_ALGORITHM").value_or(d.algorithm);
  KOLO_RETURN_IF_ERROR(check_algorithm("KOLO_ALGORITHM", c->algorithm));
  c->ib_device = env_string("KOLO_IB_DEV").value_or("");
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_IB_PORT", d.ib_port, int64_t(limits::ib_port.min), int64_t(limits::ib_port.max), &c->ib_port));
  KOLO_RETURN_IF_ERROR(env_int64("KOLO_IB_GID_INDEX", d.ib_gid_index, int64_t(limits::ib_gid_index.min), int64_t(limits::ib_gid_index.max), &c->ib_gid_index));
  return Status::ok();
}

}  // namespace kolo
