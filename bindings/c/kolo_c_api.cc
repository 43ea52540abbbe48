// The C API over kolo::Communicator. Each entry point catches everything:
// no C++ exception crosses into C, and a failure becomes a result code plus
// a thread-local message.
#include "bindings/c/kolo.h"

#include <memory>
#include <string>
#include <vector>

#include "bindings/c/api_support.h"

using kolo_c::guarded;
using kolo_c::null_comm;
using kolo_c::raw_enum;
using kolo_c::report;

namespace kolo_c {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

}  // namespace kolo_c

namespace {

kolo_result_t get_int(kolo_comm_t comm, int* out, const char* name, int (kolo::Communicator::*getter)() const) {
  if (!comm) return null_comm();
  if (!out) return report(kolo::invalid_argument(std::string(name) + " output pointer is NULL"));
  *out = (comm->impl()->*getter)();
  return KOLO_SUCCESS;
}

}  // namespace

extern "C" {

kolo_result_t kolo_comm_init_from_env(kolo_comm_t* comm) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm output pointer is NULL");
    *comm = nullptr;
    std::unique_ptr<kolo::Communicator> made;
    KOLO_RETURN_IF_ERROR(kolo::Communicator::create_from_env(&made));
    *comm = new kolo_comm(std::move(made));
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_init(kolo_comm_t* comm, int rank, int world_size, const char* master_addr, int master_port) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm output pointer is NULL");
    *comm = nullptr;
    if (world_size < 1) return kolo::invalid_argument("world_size must be at least 1");
    if (rank < 0 || rank >= world_size) {
      return kolo::invalid_argument("rank " + std::to_string(rank) + " is not in [0, " + std::to_string(world_size) + ")");
    }
    if (!master_addr || !*master_addr) return kolo::invalid_argument("master_addr is NULL or empty");
    if (master_port < 0 || master_port > 65535) {
      return kolo::invalid_argument("master_port " + std::to_string(master_port) + " is not a TCP port");
    }
    if (master_port == 0 && world_size > 1) {
      return kolo::invalid_argument("master_port 0 only works for a world of one rank");
    }
    kolo::LaunchInfo info;
    info.rank = rank;
    info.world_size = world_size;
    info.master_addr = master_addr;
    info.master_port = master_port;
    info.source = "kolo_comm_init";
    kolo::Config config;
    KOLO_RETURN_IF_ERROR(kolo::load_config(&config));
    std::unique_ptr<kolo::Communicator> made;
    KOLO_RETURN_IF_ERROR(kolo::Communicator::create(info, config, &made));
    *comm = new kolo_comm(std::move(made));
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_destroy(kolo_comm_t comm) {
  return guarded([&] {
    delete comm;
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_split(kolo_comm_t comm, int color, int key, kolo_comm_t* newcomm) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm is NULL");
    if (!newcomm) return kolo::invalid_argument("newcomm output pointer is NULL");
    *newcomm = nullptr;
    static_assert(KOLO_SPLIT_NOCOLOR == kolo::Communicator::kSplitNoColor, "one no-color value");
    std::unique_ptr<kolo::Communicator> made;
    KOLO_RETURN_IF_ERROR(comm->impl()->split(color, key, &made));
    if (made) *newcomm = new kolo_comm(std::move(made));
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_dump_flight_record(kolo_comm_t comm, const char* path) {
  if (!comm) return null_comm();
  return guarded([&] { return comm->impl()->dump_flight_record(path ? path : "", "kolo_comm_dump_flight_record"); });
}

kolo_result_t kolo_comm_revoke(kolo_comm_t comm) {
  if (!comm) return null_comm();
  return guarded([&] {
    comm->revoke();
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_shrink(kolo_comm_t comm, const int* exclude, int n_exclude, const kolo_config_t* config,
                               int flags, kolo_comm_t* newcomm) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm is NULL");
    if (!newcomm) return kolo::invalid_argument("newcomm output pointer is NULL");
    *newcomm = nullptr;
    if (n_exclude < 0) return kolo::invalid_argument("n_exclude " + std::to_string(n_exclude) + " is negative");
    if (n_exclude > 0 && !exclude) return kolo::invalid_argument("exclude is NULL with n_exclude > 0");
    if (config) return kolo::invalid_argument("config must be NULL: a shrunk communicator keeps comm's settings");
    static_assert(KOLO_SHRINK_ABORT == kolo::Communicator::kShrinkAbort, "one abort flag");
    static_assert(KOLO_SHRINK_DROP_UNRESPONSIVE == kolo::Communicator::kShrinkDropUnresponsive, "one drop flag");
    std::unique_ptr<kolo::Communicator> made;
    KOLO_RETURN_IF_ERROR(comm->impl()->shrink(std::vector<int>(exclude, exclude + n_exclude), flags, &made));
    *newcomm = new kolo_comm(std::move(made));
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_rank(kolo_comm_t comm, int* rank) {
  return get_int(comm, rank, "rank", &kolo::Communicator::rank);
}
kolo_result_t kolo_comm_size(kolo_comm_t comm, int* size) {
  return get_int(comm, size, "size", &kolo::Communicator::size);
}
kolo_result_t kolo_comm_local_rank(kolo_comm_t comm, int* local_rank) {
  return get_int(comm, local_rank, "local_rank", &kolo::Communicator::local_rank);
}
kolo_result_t kolo_comm_local_size(kolo_comm_t comm, int* local_size) {
  return get_int(comm, local_size, "local_size", &kolo::Communicator::local_size);
}

kolo_result_t kolo_comm_get_transport(kolo_comm_t comm, const char** name) {
  if (!comm) return null_comm();
  if (!name) return kolo_c::report(kolo::invalid_argument("name output pointer is NULL"));
  *name = comm->impl()->transport_name();
  return KOLO_SUCCESS;
}

kolo_result_t kolo_comm_get_timeout(kolo_comm_t comm, double* seconds) {
  if (!comm) return null_comm();
  if (!seconds) return kolo_c::report(kolo::invalid_argument("seconds output pointer is NULL"));
  *seconds = comm->impl()->config().timeout_s;
  return KOLO_SUCCESS;
}

kolo_result_t kolo_comm_get_allreduce_algorithm(kolo_comm_t comm, size_t bytes, const char** name) {
  if (!comm) return null_comm();
  if (!name) return kolo_c::report(kolo::invalid_argument("name output pointer is NULL"));
  return guarded([&] {
    *name = comm->impl()->allreduce_algorithm(bytes);
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_estimate(kolo_comm_t comm, const char* collective, size_t bytes, double* seconds,
                                 const char** algorithm) {
  if (!comm) return null_comm();
  if (!collective) return kolo_c::report(kolo::invalid_argument("collective is NULL"));
  return guarded([&] { return comm->impl()->estimate(collective, bytes, seconds, algorithm); });
}

kolo_result_t kolo_comm_gpu(kolo_comm_t comm, int* device) {
  if (!comm) return null_comm();
  if (!device) return kolo_c::report(kolo::invalid_argument("device is NULL"));
  return guarded([&] { return comm->impl()->gpu_ordinal(device); });
}

kolo_result_t kolo_comm_register_memory(kolo_comm_t comm, const void* buf, size_t bytes) {
  if (!comm) return null_comm();
  return guarded([&] { return comm->impl()->register_memory(buf, bytes); });
}

kolo_result_t kolo_comm_deregister_memory(kolo_comm_t comm, const void* buf, size_t bytes) {
  if (!comm) return null_comm();
  return guarded([&] { return comm->impl()->deregister_memory(buf, bytes); });
}

kolo_result_t kolo_comm_abort(kolo_comm_t comm) {
  if (!comm) return null_comm();
  return guarded([&] {
    comm->abort();
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_get_async_error(kolo_comm_t comm, kolo_result_t* async_error) {
  if (!comm) return null_comm();
  if (!async_error) return report(kolo::invalid_argument("async_error output pointer is NULL"));
  return guarded([&] {
    const kolo::Status s = comm->async_error();
    *async_error = static_cast<kolo_result_t>(s.code());
    if (!s.is_ok()) kolo_c::last_error() = s.to_string();
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_get_version(int* major, int* minor, int* patch) {
  // KOLO_VERSION_* come from bindings/c/version.bzl through BUILD.bazel.
  return guarded([&] {
    if (!major) return kolo::invalid_argument("major output pointer is NULL");
    if (!minor) return kolo::invalid_argument("minor output pointer is NULL");
    if (!patch) return kolo::invalid_argument("patch output pointer is NULL");
    *major = KOLO_VERSION_MAJOR;
    *minor = KOLO_VERSION_MINOR;
    *patch = KOLO_VERSION_PATCH;
    return kolo::Status::ok();
  });
}

const char* kolo_result_string(kolo_result_t result) {
  switch (raw_enum(result)) {
    case KOLO_SUCCESS: return "success";
    case KOLO_ERR_INVALID_ARGUMENT: return "invalid argument";
    case KOLO_ERR_INVALID_USAGE: return "invalid usage";
    case KOLO_ERR_TIMEOUT: return "timed out: a peer made no progress within KOLO_TIMEOUT_S";
    case KOLO_ERR_PEER_LOST: return "a peer was lost (its process died or its connection closed)";
    case KOLO_ERR_MISMATCH: return "ranks called different collectives or passed different arguments";
    case KOLO_ERR_TRANSPORT: return "transport error";
    case KOLO_ERR_AUTH: return "authentication failed";
    case KOLO_ERR_ABORTED: return "communicator aborted";
    case KOLO_ERR_UNSUPPORTED: return "unsupported";
    case KOLO_ERR_INTERNAL: return "internal error";
    case KOLO_ERR_DEVICE: return "GPU error";
    case KOLO_ERR_REVOKED: return "communicator revoked";
  }
  return "unknown result code";
}

const char* kolo_last_error(void) { return kolo_c::last_error().c_str(); }

}  // extern "C"
