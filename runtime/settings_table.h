// Every setting of a communicator, written once. Adding a setting is one row
// here, one field at the end of kolo_config_t (kolo.h, in a new
// KOLO_CONFIG_VERSION) and nothing else: from these rows come Config's
// members and limits (config.h), the environment reader (load_config), the
// conversion of kolo_config_t (bindings/c), the Python mirror of
// kolo_config_t (built from kolo_config_describe) and the docs' table
// (docs/configuration.md, `bazel run //runtime:settings_doc`). Tests check
// that kolo.h, the Python mirror and the docs agree with the rows.
//
// X(field, kind, variable, default, min, max, shown default, meaning)
//   field     Config's member and kolo_config_t's field
//   kind      Int (int64_t; the variable takes sizes such as 64K, 2M),
//             Double, Bool (0/1 in kolo_config_t), Text (std::string; a
//             const char* in kolo_config_t), or Transport / Algorithm /
//             LinkCosts / WireFormat (Text with a checked syntax)
//   min, max  the accepted range of a number (Text: unused); 0 as well for
//             the settings config.h's zero_is_automatic names
//
// The rows are in kolo_config_t's order.
#pragma once

#define KOLO_SETTINGS(X)                                                                                           \
  X(timeout_s, Double, "KOLO_TIMEOUT_S", 300, 0.001, 1e7, "300",                                                   \
    "longest wait without progress (rendezvous, connect, collective)")                                            \
  /* 0 (automatic): where every local rank has a core of its own, half a   */                                      \
  /* core's L2 cache (256K to 2M), so that a received segment is still in */                                      \
  /* the cache when it is reduced: 512K beat 2M by 26% over TCP at N=2 on */                                      \
  /* the 2-core EPYC VM (L2 1 MiB). Where ranks share cores, 2M: each     */                                      \
  /* wait then puts a rank to sleep, and fewer, larger units mean fewer   */                                      \
  /* wake-ups (2M beat 512K by 7-10% at N=4 there, 10-20% on earlier      */                                      \
  /* VMs). */                                                                                                     \
  X(segment_bytes, Int, "KOLO_SEGMENT_BYTES", 0, 64, double(int64_t{1} << 30), "auto (0)",                        \
    "pipeline unit on the wire; 0: half a core's L2 cache where each local rank has a core, 2M where they share") \
  X(pipeline_depth, Int, "KOLO_PIPELINE_DEPTH", 4, 1, 64, "4", "receives staged ahead of the reduction")           \
  X(small_allreduce_bytes, Int, "KOLO_SMALL_ALLREDUCE_BYTES", 64 << 10, 0, double(int64_t{1} << 30), "64K",         \
    "allreduce: recursive doubling may run up to this size, where the cost model finds it fastest")              \
  X(sockets_per_peer, Int, "KOLO_SOCKETS_PER_PEER", 1, 1, 64, "1", "parallel TCP connections to each neighbour")  \
  X(socket_buffer_bytes, Int, "KOLO_SOCKET_BUFFER", 0, 0, double(int64_t{1} << 30), "0",                           \
    "`SO_SNDBUF`/`SO_RCVBUF`; 0 keeps kernel autotuning")                                                          \
  X(spin_us, Int, "KOLO_SPIN_US", -1, -1, 1000000, "auto (-1)",                                                     \
    "busy-poll budget before sleeping: 2000 when each local rank has a core, 50 when oversubscribed")             \
  X(spin_yield, Int, "KOLO_SPIN_YIELD", -1, -1, 1, "auto (-1)",                                                     \
    "`sched_yield` while spinning (0 or 1): off when each local rank has a core, on when oversubscribed")         \
  X(checksum, Bool, "KOLO_CHECKSUM", 0, 0, 1, "0", "1: CRC-32C on every frame payload")                            \
  X(bind_address, Text, "KOLO_BIND_ADDR", "", 0, 0, "the address that reaches the master",                         \
    "where this rank listens")                                                                                    \
  X(secret, Text, "KOLO_SECRET", "", 0, 0, "unset (kolorun sets one)",                                              \
    "job secret authenticating every connection; never logged")                                                   \
  X(transport, Transport, "KOLO_TRANSPORT", "auto", 0, 0, "auto",                                                  \
    "`auto`: per peer, shared memory on this host, else RDMA where both ends have an active port, else TCP "      \
    "(logged); `shm`, `ib` or `tcp` for every peer")                                                               \
  X(ib_device, Text, "KOLO_IB_DEV", "", 0, 0, "the first with an active port", "the RDMA device")                  \
  X(ib_port, Int, "KOLO_IB_PORT", 0, 0, 255, "0 (the first active)", "the RDMA device's port")                     \
  X(ib_gid_index, Int, "KOLO_IB_GID_INDEX", -1, -1, 1 << 16, "-1 (RoCE v2 IPv4 first)", "the RDMA port's GID")     \
  X(cuda_ipc, Bool, "KOLO_CUDA_IPC", 1, 0, 1, "1",                                                                  \
    "device buffers between ranks on one node over CUDA IPC; 0: staged through host memory")                      \
  X(fusion_threshold_bytes, Int, "KOLO_FUSION_THRESHOLD", int64_t{64} << 20, 0, double(int64_t{1} << 34), "64M",   \
    "engine: fusion buffer size; 0 turns fusion off")                                                             \
  X(cycle_time_ms, Double, "KOLO_CYCLE_TIME_MS", 0, 0, 1e6, "0",                                                   \
    "engine: least time between two rounds a rank starts (0: a round starts whenever there is news; what "        \
    "arrives during a round goes in the next)")                                                                   \
  X(cache_capacity, Int, "KOLO_CACHE_CAPACITY", 1024, 0, 1 << 20, "1024",                                          \
    "engine: names remembered after negotiation (least recently used evicted); 0 = none")                         \
  X(timeline_path, Text, "KOLO_TIMELINE", "", 0, 0, "unset", "engine: rank 0 writes a Chrome trace here")          \
  X(stall_warning_s, Double, "KOLO_STALL_WARNING_S", 60, 0.001, 1e7, "60",                                          \
    "engine: rank 0 reports names missing on some ranks this long")                                               \
  X(stall_shutdown_s, Double, "KOLO_STALL_SHUTDOWN_S", 0, 0, 1e7, "0 (never)",                                      \
    "engine: a stall this long fails every rank")                                                                 \
  X(job_id, Text, "KOLO_JOB_ID", "", 0, 0, "derived from the master address (kolorun sets one)",                   \
    "names the job, so that jobs sharing a master address never join each other")                                 \
  /* KOLO_CONFIG_VERSION 2 */                                                                                     \
  X(algorithm, Algorithm, "KOLO_ALGORITHM", "auto", 0, 0, "auto",                                                  \
    "allreduce: `auto` (the cost model's fastest of those that apply; see docs/performance.md), or one "           \
    "at every size where it applies: `ring`, `recursive_doubling`, `halving_doubling`, `shared_memory` (one "     \
    "host), `tree`, `hierarchical` (hosts with equal numbers of ranks, 2+)")                                       \
  X(host_name, Text, "KOLO_HOSTNAME", "", 0, 0, "the host name",                                                   \
    "what tells hosts apart (with the kernel and the network and IPC namespaces): ranks with different names "    \
    "never share memory")                                                                                          \
  X(interface_name, Text, "KOLO_IFNAME", "", 0, 0, "unset",                                                         \
    "listen on this interface's address (when `KOLO_BIND_ADDR` is unset)")                                        \
  /* KOLO_CONFIG_VERSION 3 */                                                                                     \
  X(flight_recorder_entries, Int, "KOLO_FLIGHT_RECORDER_ENTRIES", 1024, 0, double(1 << 20), "1024",                 \
    "calls each communicator's flight recorder keeps (0: none)")                                                  \
  X(flight_recorder_dir, Text, "KOLO_FLIGHT_RECORDER_DIR", "", 0, 0, "unset",                                      \
    "each rank writes its flight record here when a communicator fails, on `SIGUSR1` and on request "            \
    "(`tools/kolo-doctor DIR` reads them)")                                                                      \
  /* KOLO_CONFIG_VERSION 4 */                                                                                     \
  X(link_costs, LinkCosts, "KOLO_LINK_COSTS", "", 0, 0, "by link class (shm, tcp, ib)",                           \
    "what the cost model takes links to cost: `local=LATENCY_US/GBYTES_PER_S,remote=...` (either or both), e.g. " \
    "`remote=50/0.125` for 1 Gbit/s between hosts; the same on every rank")                                     \
  /* KOLO_CONFIG_VERSION 5 */                                                                                     \
  X(wire_format, WireFormat, "KOLO_WIRE_FORMAT", "native", 0, 0, "native",                                         \
    "allreduce: what float32/float16/bfloat16 sums and averages above `KOLO_SMALL_ALLREDUCE_BYTES` carry on the " \
    "wire: `native` (the elements), `bf16`, `fp16`, `fp8_e4m3`, `fp8_e5m2` or `int8` (block-scaled), summed in " \
    "float32 at every hop, bit-identical on every rank (docs/compression.md); the same on every rank")         \
  /* KOLO_CONFIG_VERSION 6 */                                                                                     \
  X(encrypt, Bool, "KOLO_ENCRYPT", 0, 0, 1, "0",                                                                  \
    "1: every TCP connection of the job (data and rendezvous store) encrypted and authenticated, AES-256-GCM "    \
    "with keys derived from `KOLO_SECRET` (docs/transports.md); RDMA refuses; the same on every rank")    \
  /* KOLO_CONFIG_VERSION 7 */                                                                                     \
  X(tcp_congestion, Text, "KOLO_TCP_CONGESTION", "auto", 0, 0, "auto",                                            \
    "TCP congestion control of data connections: `auto` (a connection within one host runs `reno`, which does "   \
    "not pace its sends as BBR does: BBR halved loopback streams; one to another host keeps the system's), "       \
    "`system` (every connection the system's), or a kernel's name for every connection (`cubic`, `bbr`, ...)")
