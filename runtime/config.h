// Every tunable of kolo, read from the environment in one place. Each field
// names its variable; a malformed value is an error naming the variable.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kolo {

class Device;

struct Config {
  double timeout_s = 300;            // KOLO_TIMEOUT_S: the deadline of every blocking wait
  // KOLO_SEGMENT_BYTES: pipeline unit on the wire. Larger units mean fewer
  // system calls and wake-ups per byte, which is what loopback TCP in a VM
  // pays for most: 2 MiB beat 512 KiB by 10-20% from 4 MiB up at N=2 and N=4
  // on the 2-core VMs, and 4 MiB was no better again.
  int64_t segment_bytes = 2 << 20;
  int64_t pipeline_depth = 4;        // KOLO_PIPELINE_DEPTH: receives staged ahead
  int64_t small_allreduce_bytes = 64 << 10;  // KOLO_SMALL_ALLREDUCE_BYTES: recursive doubling up to here
  int64_t sockets_per_peer = 1;      // KOLO_SOCKETS_PER_PEER
  int64_t socket_buffer_bytes = 0;   // KOLO_SOCKET_BUFFER: 0 keeps kernel autotuning
  int64_t spin_us = -1;              // KOLO_SPIN_US: busy-poll before sleeping; -1 = automatic
  int64_t spin_yield = -1;           // KOLO_SPIN_YIELD: sched_yield while spinning (0/1); -1 = automatic
  bool checksum = false;             // KOLO_CHECKSUM: CRC-32C on every frame payload
  std::string bind_address;          // KOLO_BIND_ADDR, else the address of KOLO_IFNAME, else
                                     // the address this rank uses to reach the master
  std::string job_id;                // KOLO_JOB_ID: set by kolorun; empty = derived from the master address
  std::string secret;                // KOLO_SECRET: authenticates every connection; set by kolorun
  // KOLO_TRANSPORT: auto (per peer: shared memory on this machine, else RDMA
  // where both ends have it, else TCP), or tcp, ib, shm for every peer.
  std::string transport = "auto";
  // KOLO_ALGORITHM: allreduce's schedule. auto: hierarchical (hierarchical.h)
  // above KOLO_SMALL_ALLREDUCE_BYTES when the ranks span several hosts with
  // the same number of ranks (two or more) on each, else flat; ring: flat
  // only (recursive doubling, then the ring, by size); hierarchical: at
  // every size where the layout allows it.
  std::string algorithm = "auto";
  // KOLO_HOSTNAME: what tells machines apart, with the kernel and the
  // network and IPC namespaces; empty = the machine's host name.
  std::string host_name;
  std::string ib_device;             // KOLO_IB_DEV: RDMA device; empty = the first with an active port
  int64_t ib_port = 0;               // KOLO_IB_PORT: 0 = the device's first active port
  int64_t ib_gid_index = -1;         // KOLO_IB_GID_INDEX: -1 = RoCE v2 IPv4 GID first
  bool cuda_ipc = true;              // KOLO_CUDA_IPC: device buffers between ranks on one node over CUDA IPC
  // The GPU to use for device buffers instead of GPU local_rank % count
  // (not from the environment: tests pass an emulated one). Not owned.
  Device* device = nullptr;

  // The runtime engine (named asynchronous operations).
  int64_t fusion_threshold_bytes = 64 << 20;  // KOLO_FUSION_THRESHOLD: fusion buffer size; 0 turns fusion off
  double cycle_time_ms = 0;          // KOLO_CYCLE_TIME_MS: least time between rounds this rank starts (batching)
  int64_t cache_capacity = 1024;     // KOLO_CACHE_CAPACITY: names remembered after negotiation; 0 = none
  std::string timeline_path;         // KOLO_TIMELINE: rank 0 writes a Chrome trace here from the start
  double stall_warning_s = 60;       // KOLO_STALL_WARNING_S: rank 0 reports names missing on some ranks
  double stall_shutdown_s = 0;       // KOLO_STALL_SHUTDOWN_S: a stall this long fails every rank; 0 = never
};

// The accepted range of each numeric setting, shared by the environment
// reader (load_config) and the C API's kolo_config_t, so both refuse the
// same values.
struct Limit {
  double min;
  double max;
};
namespace limits {
constexpr Limit timeout_s{0.001, 1e7};
constexpr Limit segment_bytes{64, double(int64_t{1} << 30)};
constexpr Limit pipeline_depth{1, 64};
constexpr Limit small_allreduce_bytes{0, double(int64_t{1} << 30)};
constexpr Limit sockets_per_peer{1, 64};
constexpr Limit socket_buffer_bytes{0, double(int64_t{1} << 30)};
constexpr Limit spin_us{-1, 1000000};
constexpr Limit spin_yield{-1, 1};
constexpr Limit boolean{0, 1};
constexpr Limit ib_port{0, 255};
constexpr Limit ib_gid_index{-1, 1 << 16};
constexpr Limit fusion_threshold_bytes{0, double(int64_t{1} << 34)};
constexpr Limit cycle_time_ms{0, 1e6};
constexpr Limit cache_capacity{0, 1 << 20};
constexpr Limit stall_warning_s{0.001, 1e7};
constexpr Limit stall_shutdown_s{0, 1e7};
}  // namespace limits

// The checks of a value set in code (name is how the caller knows it, e.g.
// "config.segment_bytes"): out of range is invalid_argument naming it.
Status check_limit(const std::string& name, double value, Limit limit);
Status check_transport(const std::string& name, const std::string& value);
Status check_algorithm(const std::string& name, const std::string& value);

Status load_config(Config* config);

}  // namespace kolo
