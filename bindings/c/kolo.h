/*
 * kolo: a ring-allreduce communication engine. The public C API.
 *
 * Conventions
 *  - Every call returns kolo_result_t; KOLO_SUCCESS is 0. On failure,
 *    kolo_last_error() returns a message for the calling thread describing
 *    what went wrong (which argument, which peer, what was in flight).
 *  - No call ever lets a C++ exception escape, and none crashes on bad
 *    arguments: they return KOLO_ERR_INVALID_ARGUMENT.
 *  - Every blocking call honours the deadline KOLO_TIMEOUT_S (default 300 s
 *    without progress) and fails with KOLO_ERR_TIMEOUT rather than hang.
 *  - Once a communicator has failed (timeout, lost peer, mismatch, abort),
 *    it stays failed: every later call returns the same error at once.
 *    Destroy it; survivors may create a new one.
 *  - Synchronous collectives on one communicator must be called in the same
 *    order on every rank. One runs at a time per communicator; concurrent
 *    calls from several threads are serialized. Named operations (below)
 *    need no common order.
 *  - Element counts, not bytes.
 *  - Buffers are host memory or CUDA device memory (see "GPU buffers" below).
 */
#ifndef KOLO_H_
#define KOLO_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kolo_comm* kolo_comm_t;

typedef enum {
  KOLO_SUCCESS = 0,
  KOLO_ERR_INVALID_ARGUMENT, /* a bad argument; the communicator is unaffected */
  KOLO_ERR_INVALID_USAGE,    /* a call that makes no sense now (e.g. missing launch variables) */
  KOLO_ERR_TIMEOUT,          /* no progress within KOLO_TIMEOUT_S */
  KOLO_ERR_PEER_LOST,        /* a peer closed its connection or died */
  KOLO_ERR_MISMATCH,         /* ranks called different collectives or arguments */
  KOLO_ERR_TRANSPORT,        /* a network error other than a lost peer */
  KOLO_ERR_AUTH,             /* a connection failed the job's handshake */
  KOLO_ERR_ABORTED,          /* kolo_comm_abort was called */
  KOLO_ERR_UNSUPPORTED,      /* not available in this build or on this machine */
  KOLO_ERR_INTERNAL,         /* a bug in kolo; please report it with kolo_last_error() */
  KOLO_ERR_DEVICE,           /* the GPU or its driver failed (CUDA's error in kolo_last_error()), e.g. out of device memory */
  KOLO_ERR_REVOKED           /* kolo_comm_revoke was called, here or on another rank of the communicator */
} kolo_result_t;

typedef enum {
  KOLO_INT8, KOLO_UINT8, KOLO_INT32, KOLO_UINT32, KOLO_INT64, KOLO_UINT64,
  KOLO_FLOAT16,  /* IEEE binary16, reduced in fp32, rounded to nearest even */
  KOLO_BFLOAT16, /* bfloat16, reduced in fp32, rounded to nearest even */
  KOLO_FLOAT32, KOLO_FLOAT64
} kolo_dtype_t;

typedef enum {
  KOLO_SUM,
  KOLO_PROD,
  KOLO_MIN,
  KOLO_MAX,
  KOLO_AVG /* the sum divided by the world size (integer division for integer types) */
} kolo_op_t;

/* What an allreduce sends on the wire (docs/compression.md). The formats
 * other than KOLO_WIRE_NATIVE carry float32, float16 and bfloat16 sums and
 * averages: every hop decodes, adds in float32 and encodes once, and every
 * rank decodes the same final bytes, so results stay bitwise identical on
 * every rank, within the format's error bound of the exact sum. */
typedef enum {
  KOLO_WIRE_DEFAULT = -1, /* the communicator's: kolo_config_t.wire_format, KOLO_WIRE_FORMAT */
  KOLO_WIRE_NATIVE = 0,   /* the elements themselves */
  KOLO_WIRE_BF16,         /* 2 bytes, bfloat16 */
  KOLO_WIRE_FP16,         /* 2 bytes, IEEE binary16 (partial sums beyond +-65504 become Inf) */
  KOLO_WIRE_FP8_E4M3,     /* 1 byte, e4m3 scaled per block of 256 elements */
  KOLO_WIRE_FP8_E5M2,     /* 1 byte, e5m2 scaled per block of 256 elements */
  KOLO_WIRE_INT8          /* 1 byte, integers -126..126 scaled per block of 256 elements */
} kolo_wire_format_t;

/* Creates a communicator from the launcher's environment: KOLO_RANK,
 * KOLO_WORLD_SIZE, KOLO_LOCAL_RANK, KOLO_LOCAL_WORLD_SIZE, KOLO_MASTER_ADDR,
 * KOLO_MASTER_PORT; failing those, torchrun's (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI's
 * (OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE) or Slurm's
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). Collective over all ranks:
 * blocks until every rank has arrived, or fails with KOLO_ERR_TIMEOUT naming
 * the ranks that did not. Rank 0 serves the rendezvous store at the master
 * address for the communicator's lifetime. */
kolo_result_t kolo_comm_init_from_env(kolo_comm_t* comm);

/* The same with explicit arguments; local rank and size are derived from
 * host identity. */
kolo_result_t kolo_comm_init(kolo_comm_t* comm, int rank, int world_size, const char* master_addr, int master_port);

/* Per-communicator settings in code (NCCL's ncclConfig_t): every setting
 * that is otherwise an environment variable (see docs/configuration.md, or
 * kolo_config_describe). Start from KOLO_CONFIG_INITIALIZER,
 * which leaves every field unset, and set the ones you want:
 *
 *   kolo_config_t config = KOLO_CONFIG_INITIALIZER;
 *   config.segment_bytes = 1 << 20;
 *
 * Precedence: a field that is set wins over its environment variable; an
 * unset one (KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_DOUBLE, NULL) takes
 * the variable's value, else the value `defaults` sets, else kolo's
 * default. `defaults` (NULL = none) is for a framework that knows better
 * defaults than kolo's and still lets its users' variables decide, e.g. a
 * short spin where the rank computes on the CPU meanwhile; its own
 * `defaults` is ignored. Values are checked against the same ranges as the
 * variables; a bad one is KOLO_ERR_INVALID_ARGUMENT naming the field
 * ("config.segment_bytes = 3: must be 0 (automatic) or at least 64").
 * size and version let a program built against an older kolo.h run with a
 * newer library: the fields beyond an older version's size are unset. A
 * version newer than the library's, or a size smaller than the version
 * implies, is KOLO_ERR_INVALID_ARGUMENT. Strings are copied. */
#define KOLO_CONFIG_VERSION 7
#define KOLO_CONFIG_UNSET_INT (-9223372036854775807LL - 1)
#define KOLO_CONFIG_UNSET_DOUBLE (-1.0e300)
typedef struct kolo_config {
  size_t size;                    /* sizeof(kolo_config_t) */
  unsigned int version;           /* KOLO_CONFIG_VERSION */
  double timeout_s;               /* KOLO_TIMEOUT_S */
  int64_t segment_bytes;          /* KOLO_SEGMENT_BYTES */
  int64_t pipeline_depth;         /* KOLO_PIPELINE_DEPTH */
  int64_t small_allreduce_bytes;  /* KOLO_SMALL_ALLREDUCE_BYTES */
  int64_t sockets_per_peer;       /* KOLO_SOCKETS_PER_PEER */
  int64_t socket_buffer_bytes;    /* KOLO_SOCKET_BUFFER */
  int64_t spin_us;                /* KOLO_SPIN_US (-1 = automatic) */
  int64_t spin_yield;             /* KOLO_SPIN_YIELD: 0, 1, or -1 = automatic */
  int64_t checksum;               /* KOLO_CHECKSUM: 0 or 1 */
  const char* bind_address;       /* KOLO_BIND_ADDR */
  const char* secret;             /* KOLO_SECRET (refused by kolo_comm_init_rank: the id carries one) */
  const char* transport;          /* KOLO_TRANSPORT: "auto", "tcp", "ib" or "shm" */
  const char* ib_device;          /* KOLO_IB_DEV */
  int64_t ib_port;                /* KOLO_IB_PORT */
  int64_t ib_gid_index;           /* KOLO_IB_GID_INDEX (-1 = RoCE v2 IPv4 first) */
  int64_t cuda_ipc;               /* KOLO_CUDA_IPC: 0 or 1 */
  int64_t fusion_threshold_bytes; /* KOLO_FUSION_THRESHOLD */
  double cycle_time_ms;           /* KOLO_CYCLE_TIME_MS */
  int64_t cache_capacity;         /* KOLO_CACHE_CAPACITY */
  const char* timeline_path;      /* KOLO_TIMELINE */
  double stall_warning_s;         /* KOLO_STALL_WARNING_S */
  double stall_shutdown_s;        /* KOLO_STALL_SHUTDOWN_S */
  const char* job_id;             /* KOLO_JOB_ID (refused by kolo_comm_init_rank: the id carries one) */
  /* KOLO_CONFIG_VERSION 2 */
  const char* algorithm;          /* KOLO_ALGORITHM: "auto", "ring", "recursive_doubling", "halving_doubling", "shared_memory", "tree" or "hierarchical" */
  const char* host_name;          /* KOLO_HOSTNAME */
  const char* interface_name;     /* KOLO_IFNAME */
  const struct kolo_config* defaults; /* see above; NULL = none */
  /* KOLO_CONFIG_VERSION 3 */
  int64_t flight_recorder_entries; /* KOLO_FLIGHT_RECORDER_ENTRIES */
  const char* flight_recorder_dir; /* KOLO_FLIGHT_RECORDER_DIR */
  /* KOLO_CONFIG_VERSION 4 */
  const char* link_costs;         /* KOLO_LINK_COSTS: "local=US/GBPS,remote=US/GBPS" */
  /* KOLO_CONFIG_VERSION 5 */
  const char* wire_format;        /* KOLO_WIRE_FORMAT: "native", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2" or "int8" */
  /* KOLO_CONFIG_VERSION 6 */
  int64_t encrypt;                /* KOLO_ENCRYPT: 0 or 1 */
  /* KOLO_CONFIG_VERSION 7 */
  const char* tcp_congestion;     /* KOLO_TCP_CONGESTION: "auto", "system" or an algorithm's name */
} kolo_config_t;
#define KOLO_CONFIG_INITIALIZER                                                                         \
  {                                                                                                     \
    sizeof(kolo_config_t), KOLO_CONFIG_VERSION, KOLO_CONFIG_UNSET_DOUBLE, KOLO_CONFIG_UNSET_INT,        \
        KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_INT,     \
        KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_INT, NULL, NULL, NULL, NULL,    \
        KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_INT, KOLO_CONFIG_UNSET_INT,     \
        KOLO_CONFIG_UNSET_DOUBLE, KOLO_CONFIG_UNSET_INT, NULL, KOLO_CONFIG_UNSET_DOUBLE,                \
        KOLO_CONFIG_UNSET_DOUBLE, NULL, NULL, NULL, NULL, NULL, KOLO_CONFIG_UNSET_INT, NULL, NULL, NULL, \
        KOLO_CONFIG_UNSET_INT, NULL                                                                      \
  }

/* Every field of kolo_config_t after size and version, for bindings that
 * mirror the struct and for people (docs/configuration.md's table comes
 * from the same rows). A static NUL-terminated text: a first line
 * "kolo_config_t\t<KOLO_CONFIG_VERSION>\t<sizeof(kolo_config_t)>", then one
 * line per field, in the struct's order, of tab-separated columns:
 * field, type (int64, double, string or config: the `defaults` pointer),
 * offset in bytes, environment variable, kolo's default, least and
 * greatest value (numbers), meaning. */
const char* kolo_config_describe(void);

/* A job's rendezvous in 128 opaque bytes (NCCL's ncclUniqueId): the
 * address and port of the store rank 0 serves, a job id and a random
 * secret that authenticates every connection of the job. */
#define KOLO_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[KOLO_UNIQUE_ID_BYTES];
} kolo_unique_id_t;

/* Called once, by the process of rank 0, before kolo_comm_init_rank: starts
 * the job's rendezvous store on a free port and describes it in *id, which
 * the caller hands to every rank by its own means (a file, MPI_Bcast, its
 * framework's store). The store listens on KOLO_BIND_ADDR, else the address
 * of KOLO_IFNAME, else the address of the interface of the default route
 * (else the first non-loopback IPv4, else 127.0.0.1): the address other
 * hosts reach. It stays up until this process's kolo_comm_init_rank with the
 * id takes it over (closed at exit if never). */
kolo_result_t kolo_get_unique_id(kolo_unique_id_t* id);

/* Every rank: joins the job of *id as `rank` of `nranks` (NCCL's
 * ncclCommInitRank). config NULL = the environment and the defaults. The
 * id's secret authenticates the job as KOLO_SECRET does, and its job id
 * names it; a config that sets secret or job_id is refused
 * (KOLO_ERR_INVALID_ARGUMENT), and KOLO_SECRET/KOLO_JOB_ID are ignored.
 * Local rank and size are derived from host identity. A wrong id fails
 * with KOLO_ERR_AUTH or KOLO_ERR_TIMEOUT. */
kolo_result_t kolo_comm_init_rank(kolo_comm_t* comm, int nranks, const kolo_unique_id_t* id, int rank,
                                  const kolo_config_t* config);

/* kolo_comm_init_from_env with settings in code: the launcher's variables
 * say who is where, config (NULL = the environment and the defaults) says
 * how, with the precedence above (a field that is set wins over its
 * variable). config.job_id names the job, as KOLO_JOB_ID does. */
kolo_result_t kolo_comm_init_from_env_config(kolo_comm_t* comm, const kolo_config_t* config);

/* Releases the communicator's sockets, threads and memory. Not collective;
 * NULL is accepted and ignored. A communicator and those split from it may
 * be destroyed in any order. */
kolo_result_t kolo_comm_destroy(kolo_comm_t comm);

/* Passed as the color by a rank that takes part in a split but joins no
 * new communicator. */
#define KOLO_SPLIT_NOCOLOR (-1)

/* Splits comm as MPI_Comm_split and ncclCommSplit do: the ranks that pass
 * the same color (>= 0) form a new communicator, ranked by key, then by
 * their rank in comm; KOLO_SPLIT_NOCOLOR gets *newcomm = NULL. Collective
 * over comm (every rank calls it, in the same order as comm's other
 * collectives). The new communicator has every feature of a world one
 * (collectives, named operations, faults, abort, timeouts, GPU buffers)
 * with connections of its own; it reuses comm's rendezvous store, so no
 * new server is started. A failure of comm is not one of newcomm's, nor
 * the other way round, unless a rank they share is lost. */
kolo_result_t kolo_comm_split(kolo_comm_t comm, int color, int key, kolo_comm_t* newcomm);

/* ------------------------------------------------------------------------
 * Changing membership: revoke, shrink, grow (NCCL's ncclCommRevoke,
 * ncclCommShrink, ncclCommGrow)
 *
 * A job that loses a rank goes on without it: the survivors revoke the
 * failed communicator (or find it failed already), shrink it, and carry on
 * with the new one; a replacement joins later by growing it. None of these
 * waits for a peer past KOLO_TIMEOUT_S, whatever the lost rank does. They
 * meet through the job's rendezvous store. Where a rank serves it (rank 0,
 * under kolo_comm_init_from_env with KOLO_MASTER_ADDR, and
 * kolo_get_unique_id), every rank also holds a standby store (one
 * listening socket): a shrink that excludes the store's rank, or finds
 * the store gone or stuck (it takes a look of at most 1 s), moves the
 * survivors to the standby of the first of them, which serves the new
 * communicator from then on. So any single rank, rank 0 too, may be lost.
 * Two lost at once, the store's rank and the first survivor, fail the
 * shrink by its deadline, naming the latter. Under torchrun's agent store
 * no rank serves the store. Ranks that joined by kolo_comm_grow hold a
 * standby too, and learn which rank serves the store from the others.
 * ------------------------------------------------------------------------ */

/* Revokes comm: an operation in progress on it, in any thread, and every
 * later one fail with KOLO_ERR_REVOKED at once, here and on every rank its
 * connections reach (they close at once, and the revocation is recorded as
 * comm's first failure, so those ranks report KOLO_ERR_REVOKED too, naming
 * this rank). Waits for no peer: returns within 2 s even if every peer is
 * stuck. Named operations of its engine fail (KOLO_ERR_ABORTED). Any thread;
 * comm stays valid for kolo_comm_shrink and kolo_comm_destroy. */
kolo_result_t kolo_comm_revoke(kolo_comm_t comm);

#define KOLO_SHRINK_DEFAULT 0
/* Revoke comm first, so that an operation still in flight on it ends. */
#define KOLO_SHRINK_ABORT 1
/* Also leave out every rank that has not called kolo_comm_shrink by the
 * deadline (KOLO_TIMEOUT_S), or whose process has ended (the store sees its
 * connection close: no waiting for the deadline then). */
#define KOLO_SHRINK_DROP_UNRESPONSIVE 2

/* The ranks of comm not in exclude[0 .. n_exclude) form *newcomm, numbered
 * in their order in comm. Called by every rank that stays (never by an
 * excluded one), with the same list (else KOLO_ERR_MISMATCH). Uses none of
 * comm's connections, so it works on a failed or revoked comm, and waits
 * for no excluded rank: it ends within KOLO_TIMEOUT_S even when an excluded
 * rank is alive but stuck, or a survivor dies during the shrink (then
 * KOLO_ERR_TIMEOUT or KOLO_ERR_PEER_LOST naming it). flags: KOLO_SHRINK_*,
 * or'ed. With KOLO_SHRINK_DROP_UNRESPONSIVE, the survivors agree on the
 * members through the store, and a rank the others left out (it came too
 * late) gets KOLO_ERR_TIMEOUT saying so. config: NULL keeps comm's settings
 * (the only choice for now; anything else is KOLO_ERR_INVALID_ARGUMENT).
 * *newcomm has every feature of a world communicator (named operations
 * too: its engine starts afresh). comm is still to be destroyed. */
kolo_result_t kolo_comm_shrink(kolo_comm_t comm, const int* exclude, int n_exclude, const kolo_config_t* config,
                               int flags, kolo_comm_t* newcomm);

/* On one rank of comm: an id by which new ranks join comm's next
 * kolo_comm_grow. Hand it to the new ranks by your own means.
 * KOLO_ERR_UNSUPPORTED where kolo does not serve the rendezvous store
 * (under torchrun's agent store). */
kolo_result_t kolo_comm_get_unique_id(kolo_comm_t comm, kolo_unique_id_t* id);

/* Grows comm to nranks ranks. Every rank of comm calls it with comm (its
 * rank stays; id and rank are ignored), and each new rank calls it with
 * comm NULL, the id from kolo_comm_get_unique_id and its rank in
 * [size of comm, nranks). config: for new ranks, as kolo_comm_init_rank's
 * (NULL = the environment); ranks of comm keep comm's (config must be
 * NULL). Collective over all of them; fails within KOLO_TIMEOUT_S naming
 * the ranks that never arrived. */
kolo_result_t kolo_comm_grow(kolo_comm_t comm, int nranks, const kolo_unique_id_t* id, int rank,
                             const kolo_config_t* config, kolo_comm_t* newcomm);

kolo_result_t kolo_comm_rank(kolo_comm_t comm, int* rank);
kolo_result_t kolo_comm_size(kolo_comm_t comm, int* size);
kolo_result_t kolo_comm_local_rank(kolo_comm_t comm, int* local_rank);
kolo_result_t kolo_comm_local_size(kolo_comm_t comm, int* local_size);

/* What the communicator runs on, for logs and benchmarks. *name is set to
 * the transports its peers are reached by, in order of preference ("shm",
 * "tcp", "ib", or several joined by '+': "shm+tcp"), or to the allreduce
 * schedule it runs for a host buffer of `bytes` ("ring",
 * "recursive_doubling", "halving_doubling", "hierarchical",
 * "shared_memory", "tree"); the
 * string lives as long as comm. */
kolo_result_t kolo_comm_get_transport(kolo_comm_t comm, const char** name);
kolo_result_t kolo_comm_get_allreduce_algorithm(kolo_comm_t comm, size_t bytes, const char** name);

/* The cost model's estimate of one call: `collective` ("allreduce",
 * "allgather", "reduce_scatter", "broadcast", "reduce", "gather", "scatter"
 * or "alltoall") of `bytes` in host memory (the largest buffer of the call
 * on a rank: allreduce's, allgather's result, reduce-scatter's input, the
 * root's for gather and scatter, each rank's send buffer for alltoall)
 * takes about *seconds by *algorithm (either may be NULL), from what the
 * communicator's links cost (KOLO_LINK_COSTS, or each class's defaults):
 * what a framework's scheduler needs to overlap communication with
 * compute (torch's time estimator asks kolo's backend through it). Local
 * and quick: no message is sent. Another collective name is
 * KOLO_ERR_INVALID_ARGUMENT. */
kolo_result_t kolo_comm_estimate(kolo_comm_t comm, const char* collective, size_t bytes, double* seconds,
                                 const char** algorithm);

/* The deadline of the communicator's waits, in seconds, as its settings'
 * layers decided it (kolo_config_t, KOLO_TIMEOUT_S, defaults): for a
 * binding that waits on kolo's handles with the same patience. */
kolo_result_t kolo_comm_get_timeout(kolo_comm_t comm, double* seconds);

/* recvbuf[i] = op over all ranks of sendbuf[i], for i < count, bitwise
 * identical on every rank. sendbuf == recvbuf is in place; other overlaps
 * are rejected. */
kolo_result_t kolo_allreduce(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo_dtype_t dtype,
                             kolo_op_t op);

/* One allreduce over n buffers of one dtype at once, as over their
 * concatenation, each reduced where it lies, with no copy into one buffer
 * (what Horovod's fusion and Gloo's allreduce of several inputs do):
 * recvbufs[i][j] = op over all ranks of sendbufs[i][j], for j < counts[i]
 * and i < n. Every rank passes the same counts (a different total is
 * KOLO_ERR_MISMATCH); sendbufs[i] == recvbufs[i] is in place, other
 * overlaps are rejected naming the buffer. The communicator's default wire
 * format applies as to kolo_allreduce, over the n buffers' total. The arrays are read before the
 * call returns (the _async form keeps no pointer into them, only into the
 * buffers). NULL arrays or n == 0: KOLO_ERR_INVALID_ARGUMENT. */
kolo_result_t kolo_allreduce_many(kolo_comm_t comm, const void* const* sendbufs, void* const* recvbufs,
                                  const size_t* counts, size_t n, kolo_dtype_t dtype, kolo_op_t op);

/* kolo_allreduce with `wire` on the wire for this call. A format other than
 * KOLO_WIRE_NATIVE with another dtype or op, or on device buffers, is
 * KOLO_ERR_INVALID_ARGUMENT or KOLO_ERR_UNSUPPORTED saying so. Every rank
 * passes the same format (else KOLO_ERR_MISMATCH).
 * residuals: NULL, or error feedback's state for this buffer: `count`
 * floats, zero at first, that the caller keeps between calls over the same
 * buffer. kolo adds them into this rank's contribution and writes back what
 * this rank's encodings lost; every rank's residuals together are what the
 * result lacks of the exact sum. Unused with KOLO_WIRE_NATIVE. */
kolo_result_t kolo_allreduce_wire(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  kolo_dtype_t dtype, kolo_op_t op, kolo_wire_format_t wire, float* residuals);

/* recvbuf holds world_size * sendcount elements: rank r's sendbuf lands at
 * block r. In place when sendbuf == recvbuf (this rank's block is already in
 * recvbuf) or sendbuf == recvbuf + rank * sendcount. */
kolo_result_t kolo_allgather(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                             kolo_dtype_t dtype);

/* Copies root's buf into every rank's buf. */
kolo_result_t kolo_broadcast(kolo_comm_t comm, void* buf, size_t count, kolo_dtype_t dtype, int root);

/* sendbuf holds world_size * recvcount elements; rank r receives the
 * reduction of block r. sendbuf == recvbuf is in place (the result lands in
 * the first recvcount elements). */
kolo_result_t kolo_reduce_scatter(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                  kolo_dtype_t dtype, kolo_op_t op);

/* Returns once every rank has entered the barrier. */
kolo_result_t kolo_barrier(kolo_comm_t comm);

/* The rooted and "v" collectives, as MPI and NCCL define them. Blocking,
 * on host or GPU buffers (not mixed). Counts and displacements are in
 * elements. Every rank passes the same count arrays (kolo's choice: its
 * rooted collectives relay blocks around the ring, so every rank needs
 * their sizes; MPI reads gatherv's recvcounts on root only); displacement
 * arrays are read where MPI reads them, and NULL means blocks in rank
 * order, one after another. Count 0 is allowed everywhere. Ranks that
 * disagree about a call (root, counts, dtype, op) all fail with
 * KOLO_ERR_MISMATCH. Reduce, gather and scatter run as pipelined chains
 * over the ring's connections; alltoall pairwise, connecting every pair of
 * ranks on a communicator's first alltoall. With GPU buffers, a rank whose
 * block is empty still passes a device pointer (NULL counts as host memory,
 * and neighbours must agree on host or device). */

/* root's recvbuf[i] = op over all ranks of sendbuf[i] (KOLO_AVG divides by
 * world_size); recvbuf is used on root only (may be NULL elsewhere).
 * sendbuf == recvbuf at root is in place. */
kolo_result_t kolo_reduce(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo_dtype_t dtype,
                          kolo_op_t op, int root);

/* root's recvbuf (world_size * sendcount elements) gets rank q's sendbuf at
 * block q; recvbuf is used on root only. In place at root when sendbuf ==
 * recvbuf + root * sendcount. */
kolo_result_t kolo_gather(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount, kolo_dtype_t dtype,
                          int root);

/* Rank q's sendbuf (sendcount == recvcounts[q] elements) lands at root's
 * recvbuf + displs[q]. recvcounts (world_size entries) on every rank;
 * displs (NULL: packed) and recvbuf on root only; blocks may not overlap.
 * In place at root when sendbuf == recvbuf + displs[root]. */
kolo_result_t kolo_gatherv(kolo_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                           const size_t* recvcounts, const size_t* displs, kolo_dtype_t dtype, int root);

/* Rank q's recvbuf gets block q (recvcount elements) of root's sendbuf
 * (world_size * recvcount elements, read on root only). In place at root
 * when recvbuf == sendbuf + root * recvcount. */
kolo_result_t kolo_scatter(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount, kolo_dtype_t dtype,
                           int root);

/* Rank q's recvbuf gets sendcounts[q] (== its recvcount) elements from
 * root's sendbuf + displs[q]. sendcounts on every rank; displs (NULL:
 * packed) and sendbuf on root only. In place at root when recvbuf ==
 * sendbuf + displs[root]. */
kolo_result_t kolo_scatterv(kolo_comm_t comm, const void* sendbuf, const size_t* sendcounts, const size_t* displs,
                            void* recvbuf, size_t recvcount, kolo_dtype_t dtype, int root);

/* Every rank's recvbuf gets rank q's sendbuf (sendcount == recvcounts[q])
 * at recvbuf + displs[q]. recvcounts and displs (NULL: packed) on every
 * rank; any displs whose blocks do not overlap (packed ones go straight
 * into recvbuf, others through a scratch buffer and one local copy). In
 * place when sendbuf == recvbuf + displs[rank]. */
kolo_result_t kolo_allgatherv(kolo_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                              const size_t* recvcounts, const size_t* displs, kolo_dtype_t dtype);

/* sendbuf holds sum(recvcounts) elements, block q (recvcounts[q] elements)
 * after blocks 0..q-1; rank r's recvbuf gets the reduction of block r.
 * recvbuf may overlap sendbuf anyhow (e.g. in place). */
kolo_result_t kolo_reduce_scatterv(kolo_comm_t comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                                   kolo_dtype_t dtype, kolo_op_t op);

/* Block q (count elements) of sendbuf goes to rank q, landing at block r
 * of its recvbuf (r: this rank). Both buffers hold world_size * count
 * elements and may not overlap (not in place). */
kolo_result_t kolo_alltoall(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo_dtype_t dtype);

/* sendcounts[q] elements from sendbuf + sdispls[q] go to rank q;
 * recvcounts[q] elements from rank q land at recvbuf + rdispls[q] (NULL
 * displs: packed). sendcounts[q] here must equal recvcounts[r] on rank q
 * (else MISMATCH). Receive blocks may not overlap each other or sendbuf. */
kolo_result_t kolo_alltoallv(kolo_comm_t comm, const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                             void* recvbuf, const size_t* recvcounts, const size_t* rdispls, kolo_dtype_t dtype);

/* ------------------------------------------------------------------------
 * GPU buffers
 *
 * Every collective above takes CUDA device memory as well as host memory,
 * told apart per pointer (cudaPointerGetAttributes); a call whose buffers
 * mix the two, or hold memory of another GPU than this rank's, returns
 * KOLO_ERR_INVALID_ARGUMENT naming them. Each rank uses GPU
 * local_rank % (visible GPUs), as Horovod's users expect; device buffers
 * must be on it. Several ranks may share one GPU.
 *
 * Without a stream (the calls above) a collective on device buffers starts
 * after the work already enqueued on the legacy default stream (which
 * follows every blocking stream) and returns when it is done, results in
 * place. The _stream variants below take a cudaStream_t (as void*, so this
 * header needs no CUDA; NULL is the legacy default stream) and return at
 * once, as NCCL's calls do: the collective runs after the work the stream
 * already has, and the stream's later work waits for it. Collectives run
 * in the order they were called, with or without a stream. A failure of
 * an enqueued collective becomes the communicator's sticky error
 * (kolo_comm_get_async_error, and every later call); the stream is
 * released all the same, so it never hangs; and if kolo's thread is
 * stuck in a CUDA call for KOLO_TIMEOUT_S and 1 s more while a stream
 * waits for it, the communicator fails with KOLO_ERR_TIMEOUT naming that
 * call and the stream is released. Host buffers may be given to
 * a _stream call too: they are touched only after the stream's earlier
 * work (a copy into them) has run.
 *
 * Between ranks on one node device messages move over CUDA IPC (one
 * device-to-device copy per message, buffers from cudaMalloc, as PyTorch's
 * allocator makes them; KOLO_CUDA_IPC=0 turns it off); to other nodes
 * through pinned host memory over the communicator's transport, the copies
 * pipelined against the network. Reductions run on the GPU. With IPC,
 * every rank must pass device buffers where one does.
 *
 * CUDA support is compiled in by `bazel build --config=cuda`. A build
 * without it, or a machine without a GPU, returns KOLO_ERR_UNSUPPORTED
 * saying so when given device memory or a stream. The named operations
 * take device memory too, where "Named operations" below says.
 * ------------------------------------------------------------------------ */
kolo_result_t kolo_allreduce_stream(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                    kolo_dtype_t dtype, kolo_op_t op, void* stream);
kolo_result_t kolo_allgather_stream(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                    kolo_dtype_t dtype, void* stream);
kolo_result_t kolo_broadcast_stream(kolo_comm_t comm, void* buf, size_t count, kolo_dtype_t dtype, int root,
                                    void* stream);
kolo_result_t kolo_reduce_scatter_stream(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                         kolo_dtype_t dtype, kolo_op_t op, void* stream);
kolo_result_t kolo_allreduce_many_stream(kolo_comm_t comm, const void* const* sendbufs, void* const* recvbufs,
                                         const size_t* counts, size_t n, kolo_dtype_t dtype, kolo_op_t op,
                                         void* stream);
kolo_result_t kolo_alltoall_stream(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   kolo_dtype_t dtype, void* stream);

/* Opens this rank's GPU if not yet open and gives its CUDA device number
 * (local_rank % visible GPUs). KOLO_ERR_UNSUPPORTED, kolo_last_error()
 * saying why, in a build without CUDA or where there is no GPU. */
kolo_result_t kolo_comm_gpu(kolo_comm_t comm, int* device);

/* Declares [buf, buf + bytes) long-lived: it stays allocated until
 * kolo_comm_deregister_memory covers it. Over RDMA it is registered with the
 * NIC once, and messages of this communicator's collectives in it then move
 * with no copy; messages in memory not declared are staged through kolo's
 * own registered buffers (kolo is not told when an application frees
 * memory, so it never keeps registrations it was not given this way). Like
 * NCCL's ncclCommRegister. CUDA device memory is registered for GPUDirect
 * RDMA (through a dma-buf, else a peer-memory module such as
 * nvidia-peermem) where the driver and NIC allow it. Over TCP both calls only check their
 * arguments. Call deregister before freeing the memory. A failed
 * registration (the locked-memory limit, ulimit -l; device memory no way
 * can register) returns KOLO_ERR_TRANSPORT saying why, is logged, and
 * leaves the communicator healthy; host memory is then simply staged. The
 * named operations (kolo_submit_*) run on the engine's own connections,
 * which register only kolo's fusion buffer and stage the rest. */
kolo_result_t kolo_comm_register_memory(kolo_comm_t comm, const void* buf, size_t bytes);
kolo_result_t kolo_comm_deregister_memory(kolo_comm_t comm, const void* buf, size_t bytes);

/* Aborts the communicator: a collective running in another thread returns
 * KOLO_ERR_ABORTED promptly, and so does every later call. The other ranks
 * learn of it through their connections and fail too (their messages name
 * this rank). Safe from any thread, at any time, also concurrently with a
 * collective; it does not free the communicator (kolo_comm_destroy does,
 * once no other thread is using it). */
kolo_result_t kolo_comm_abort(kolo_comm_t comm);

/* The communicator's sticky error: KOLO_SUCCESS while it is healthy, else
 * the failure that ended it (its message then in kolo_last_error()). Does not
 * block; safe from any thread, e.g. a watchdog. */
kolo_result_t kolo_comm_get_async_error(kolo_comm_t comm, kolo_result_t* async_error);

/* Writes this rank's flight record of comm to `path` (NULL: its file in
 * KOLO_FLIGHT_RECORDER_DIR, KOLO_ERR_INVALID_USAGE if that is unset): the
 * last KOLO_FLIGHT_RECORDER_ENTRIES calls, each with its sequence number,
 * arguments, state, times and error, as JSON. With KOLO_FLIGHT_RECORDER_DIR
 * set, every rank also writes it when comm fails and on SIGUSR1;
 * tools/kolo-doctor reads every rank's and says what went wrong
 * (docs/failures.md). Any thread, at any time; collective over nothing. */
kolo_result_t kolo_comm_dump_flight_record(kolo_comm_t comm, const char* path);

/* ------------------------------------------------------------------------
 * Named asynchronous operations (the runtime engine)
 *
 * For frameworks whose ranks produce tensors in their own order and at
 * their own pace (gradients during backprop). Each operation has a name;
 * ranks may submit the same names in any order, and the engine runs each
 * one once every rank has submitted it, with the same results as if all
 * ranks had called them in one order. Small allreduces of one dtype and op
 * are fused into one ring pass (up to KOLO_FUSION_THRESHOLD bytes, default
 * 64 MiB; 0 turns fusion off).
 *
 * Blocking: submit calls only check their arguments and queue; they never
 * wait for other ranks. kolo_handle_wait blocks up to its timeout.
 * The engine runs on a thread of its own, with connections of its own made
 * by each rank's first submission (collective: every rank must submit
 * something eventually). Synchronous collectives on the same communicator
 * stay independent of it and may be used alongside.
 *
 * Buffers: every buffer passed to a submit call must stay valid (and send
 * buffers unchanged) until the operation completes, even if the handle is
 * released before that. Outputs whose size is only known after
 * negotiation (allgather, alltoall) are owned by the handle.
 *
 * GPU memory: every kolo_submit_* takes CUDA device memory of this rank's
 * GPU as well (all of one operation's buffers, on every rank: where
 * differs is a KOLO_ERR_MISMATCH on the field "memory"). The operation
 * then runs as a blocking collective on device buffers does (after the
 * work on the legacy default stream at the time it runs; done, results in
 * place, when its handle completes); tensors are reduced where they lie,
 * never fused through host memory, and scaled by the GPU's kernels; an
 * allgather's or alltoall's output is GPU memory the handle owns
 * (kolo_handle_output). Not on GPU memory
 * (KOLO_ERR_UNSUPPORTED, saying why): wire formats and error feedback,
 * whose kernels run on the host; a reduce-scatter's prescale factor. A
 * rank that has joined takes part in such an allreduce from GPU memory of
 * its own.
 *
 * Errors: a bad argument is returned by the submit call itself, with no
 * handle. When ranks submit one name with different arguments (operation,
 * dtype, op, root, scale factors, shapes), the operation fails on every
 * rank with KOLO_ERR_MISMATCH and a message naming the tensor, the field and
 * which ranks disagree; the engine goes on. A name that is still in flight
 * on this rank cannot be submitted again (KOLO_ERR_INVALID_USAGE). A lost
 * peer, a timeout, kolo_comm_abort or a stall longer than
 * KOLO_STALL_SHUTDOWN_S fails every pending and later operation.
 *
 * Shapes: ndim dimensions (ndim 0 is a scalar). Allgather and alltoall
 * tensors need ndim >= 1; their first dimension may differ between ranks,
 * the others may not.
 * ------------------------------------------------------------------------ */

typedef struct kolo_handle* kolo_handle_t;

/* Called once on the engine's thread when the operation completes;
 * kolo_last_error() there describes a failure. It must not block on other
 * operations; it may submit new ones. */
typedef void (*kolo_callback_t)(kolo_result_t result, void* user_data);

/* recvbuf = op over ranks of (sendbuf * prescale), times postscale.
 * Integers are scaled in double and truncated toward zero (as Horovod does),
 * saturating at the type's limits.
 * sendbuf == recvbuf is in place. */
kolo_result_t kolo_submit_allreduce(kolo_comm_t comm, const char* name, const void* sendbuf, void* recvbuf,
                                    int ndim, const int64_t* shape, kolo_dtype_t dtype, kolo_op_t op,
                                    double prescale, double postscale, kolo_handle_t* handle);

/* Several tensors reduced as one operation (one name, one handle): tensor i
 * has ndims[i] dimensions shapes[i]. */
kolo_result_t kolo_submit_grouped_allreduce(kolo_comm_t comm, const char* name, int num_tensors,
                                            const void* const* sendbufs, void* const* recvbufs, const int* ndims,
                                            const int64_t* const* shapes, kolo_dtype_t dtype, kolo_op_t op,
                                            double prescale, double postscale, kolo_handle_t* handle);

/* The two above with `wire` on the wire (kolo_wire_format_t; every rank
 * passes the same) and, with a format, error feedback: error_feedback = 1
 * keeps what this rank's encodings of the tensor lost, one float per
 * element under the operation's name (and tensor index, in a group), and
 * adds it into the next allreduce of that name; every rank's kept loss
 * together is what the result lacks of the exact sum.
 * kolo_engine_get_residual_bytes says how much that keeps. A batch (the
 * operations fused into one allreduce) of no more than
 * KOLO_SMALL_ALLREDUCE_BYTES goes exact: its time is latency, which fewer
 * bytes do not shorten. */
kolo_result_t kolo_submit_allreduce_wire(kolo_comm_t comm, const char* name, const void* sendbuf, void* recvbuf,
                                         int ndim, const int64_t* shape, kolo_dtype_t dtype, kolo_op_t op,
                                         double prescale, double postscale, kolo_wire_format_t wire,
                                         int error_feedback, kolo_handle_t* handle);
kolo_result_t kolo_submit_grouped_allreduce_wire(kolo_comm_t comm, const char* name, int num_tensors,
                                                 const void* const* sendbufs, void* const* recvbufs,
                                                 const int* ndims, const int64_t* const* shapes, kolo_dtype_t dtype,
                                                 kolo_op_t op, double prescale, double postscale,
                                                 kolo_wire_format_t wire, int error_feedback,
                                                 kolo_handle_t* handle);

/* Concatenates every rank's tensor along the first dimension, in rank
 * order. The result is the handle's output; kolo_handle_output_rows gives
 * each rank's first dimension. */
kolo_result_t kolo_submit_allgather(kolo_comm_t comm, const char* name, const void* sendbuf, int ndim,
                                    const int64_t* shape, kolo_dtype_t dtype, kolo_handle_t* handle);

/* root's buf is copied into every rank's buf. */
kolo_result_t kolo_submit_broadcast(kolo_comm_t comm, const char* name, void* buf, int ndim, const int64_t* shape,
                                    kolo_dtype_t dtype, int root, kolo_handle_t* handle);

/* sendbuf has shape[0] rows; the rows are cut into world_size near-equal
 * parts (the first shape[0] % world_size parts get one more row), and rank
 * r's recvbuf receives the reduction of part r. */
kolo_result_t kolo_submit_reduce_scatter(kolo_comm_t comm, const char* name, const void* sendbuf, void* recvbuf,
                                         int ndim, const int64_t* shape, kolo_dtype_t dtype, kolo_op_t op,
                                         double prescale, double postscale, kolo_handle_t* handle);

/* Rank r sends splits[q] rows of sendbuf (in order) to rank q; splits has
 * world_size entries adding up to shape[0], or is NULL for equal parts.
 * The rows received, in rank order, are the handle's output;
 * kolo_handle_output_rows gives how many came from each rank. */
kolo_result_t kolo_submit_alltoall(kolo_comm_t comm, const char* name, const void* sendbuf, int ndim,
                                   const int64_t* shape, const int64_t* splits, kolo_dtype_t dtype,
                                   kolo_handle_t* handle);

kolo_result_t kolo_submit_barrier(kolo_comm_t comm, const char* name, kolo_handle_t* handle);

/* This rank has run out of data. Until every rank has joined, it takes part
 * in the other ranks' allreduces and barriers without data (the op's
 * identity, e.g. zeros for a sum); an allgather, alltoall, broadcast or
 * reduce-scatter fails with KOLO_ERR_INVALID_USAGE while any rank has
 * joined (Horovod's rule), on each rank as soon as it submits it, without
 * waiting for the others to submit the same name. It may not submit until
 * the join completes; then kolo_handle_join_rank gives the last rank to
 * join, and it may join again later (the next epoch). */
kolo_result_t kolo_join(kolo_comm_t comm, kolo_handle_t* handle);

/* *done = 1 and the operation's result if it has completed; *done = 0 and
 * KOLO_SUCCESS if not. Never blocks. */
kolo_result_t kolo_handle_test(kolo_handle_t handle, int* done);

/* Waits for completion and returns the operation's result, or
 * KOLO_ERR_TIMEOUT after timeout_s seconds (the operation goes on; the
 * handle stays valid). timeout_s < 0 means KOLO_TIMEOUT_S. */
kolo_result_t kolo_handle_wait(kolo_handle_t handle, double timeout_s);

/* Runs callback(result, user_data) on completion: on the engine's thread
 * (kolo's ordered thread for kolo_*_async), or at once on this thread if
 * already complete. At most one per handle. */
kolo_result_t kolo_handle_set_callback(kolo_handle_t handle, kolo_callback_t callback, void* user_data);

/* After completion (in the operation's callback too, which runs before a wait
 * returns): the output of an allgather or alltoall (owned by the
 * handle, valid until it is released; memory of this rank's GPU where the
 * operation ran on GPU memory: complete, to be read with a device copy
 * from any stream), and the rows each rank contributed (allgather) or sent
 * to this rank (alltoall): world_size entries. */
kolo_result_t kolo_handle_output(kolo_handle_t handle, const void** data, size_t* bytes);
kolo_result_t kolo_handle_output_rows(kolo_handle_t handle, int64_t* rows, int world_size);
kolo_result_t kolo_handle_join_rank(kolo_handle_t handle, int* last_rank);

/* Drops the caller's reference. An operation still running goes on (its
 * buffers must stay valid until it completes). NULL is ignored. */
kolo_result_t kolo_handle_release(kolo_handle_t handle);

/* Starts writing a Chrome-trace timeline of this rank's named operations
 * to path (KOLO_TIMELINE=path does so on rank 0 from the start), or stops
 * and closes it. Safe at any time from any thread. */
kolo_result_t kolo_timeline_start(kolo_comm_t comm, const char* path);
kolo_result_t kolo_timeline_stop(kolo_comm_t comm);

/* What the engine has done so far on this rank (counters since it started). */
typedef struct {
  uint64_t rounds;               /* negotiation rounds */
  uint64_t rounds_with_messages; /* rounds that had to exchange full requests (cache misses) */
  uint64_t cache_hits;           /* operations agreed through the response cache */
  uint64_t operations;           /* operations completed */
  uint64_t fused_batches;        /* allreduces of several tensors in one fusion buffer */
  double negotiation_seconds;    /* time in rounds' negotiation (token, control allreduce, requests) */
} kolo_engine_stats_t;
kolo_result_t kolo_engine_get_stats(kolo_comm_t comm, kolo_engine_stats_t* stats);
/* Bytes error feedback keeps on this rank (kolo_submit_allreduce_wire). */
kolo_result_t kolo_engine_get_residual_bytes(kolo_comm_t comm, size_t* bytes);

/* The version of the libkolo loaded at run time: MAJOR changes when the ABI
 * breaks (it is in the SONAME, libkolo.so.MAJOR), MINOR when the API grows,
 * PATCH for fixes. Returns KOLO_ERR_INVALID_ARGUMENT if any pointer is NULL.
 * Needs no communicator. (`pkg-config --modversion kolo` gives the installed
 * version at build time.) */
kolo_result_t kolo_get_version(int* major, int* minor, int* patch);

/* Point-to-point, as ncclSend/ncclRecv: count elements of dtype to or from
 * rank peer of comm (this rank itself too). A send and its receive must
 * agree on dtype and count: else the receive fails with KOLO_ERR_MISMATCH
 * (the communicator's sticky error), and the sender, whose bytes may have
 * left already, gets it at its next call on comm at the latest; messages
 * between two ranks match in call order, per direction; count 0 is
 * allowed. Blocking: outside a group each call returns when its message
 * is done (a send may wait for its receive). Peers are connected on first
 * use. Host or GPU buffers. */
kolo_result_t kolo_send(kolo_comm_t comm, const void* sendbuf, size_t count, kolo_dtype_t dtype, int peer);
kolo_result_t kolo_recv(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int peer);

/* A receive from any other rank (MPI_Recv with MPI_ANY_SOURCE; PyTorch's
 * recv without src): count elements of dtype into recvbuf (host memory,
 * only written; NULL only with count 0, which is allowed) from whichever
 * rank's point-to-point message is seen first, and *source (not NULL) =
 * that rank; -1 until it is known (and after a failure). The send must be
 * of the same count and dtype. Senders call kolo_send/kolo_send_async as
 * always; the ordinary send/recv path and the collectives cost nothing
 * more for it.
 *  - The message taken is a rank's next one, the message kolo_recv from
 *    that rank would get, so messages between two ranks keep their order.
 *    While this rank waits, the first message to arrive is taken; when
 *    several are already waiting at a look, which came first is not known
 *    and kolo takes them in turn, starting after the rank it took last
 *    (so no rank starves).
 *  - Its count and dtype must agree with the send's: else KOLO_ERR_MISMATCH
 *    naming the sender, as for kolo_recv (sticky).
 *  - Never a message of this rank itself. A rank whose next message to this
 *    one belongs to a collective, or whose connection has closed, is not
 *    waited for; when no rank is left to wait for, the call fails at once
 *    (KOLO_ERR_MISMATCH, KOLO_ERR_PEER_LOST).
 *  - Peers not yet connected are connected as their first message comes
 *    (the first one from each is noticed within 10 ms).
 *  - KOLO_ERR_TIMEOUT after KOLO_TIMEOUT_S with no message, saying that no
 *    peer sent anything and which ranks were waited for (sticky).
 *  - Not in a group: between kolo_group_start and kolo_group_end it
 *    returns KOLO_ERR_INVALID_ARGUMENT (which message it takes would depend
 *    on the group's other receives). Refused at once, with the communicator
 *    unharmed: a communicator of one rank (KOLO_ERR_INVALID_ARGUMENT), a
 *    device buffer, or a peer reached over RDMA, whose receiver-driven
 *    protocol shows nothing before the receive is posted
 *    (KOLO_ERR_UNSUPPORTED; KOLO_TRANSPORT=tcp avoids RDMA). For the same
 *    reason a send from device memory to a rank of its own node (CUDA IPC,
 *    receiver-driven too) is never seen by kolo_recv_any; from another
 *    node it is (staged through host memory).
 * Blocking; kolo_recv_any_async below is the ordered asynchronous form. */
kolo_result_t kolo_recv_any(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int* source);

/* Groups, as ncclGroupStart/ncclGroupEnd: between them (per thread, and
 * nestable) kolo_send and kolo_recv only queue, after checking their
 * arguments; the outermost kolo_group_end posts every queued message of a
 * communicator at once and returns when all are done, so any pattern (a
 * ring shift, an all-to-all, a pipeline stage) completes without deadlock.
 * Buffers must stay valid until then. Communicators mixed in one group run
 * one after another, in the order each first appears in it (give every
 * rank the same order). Collectives are not grouped: inside a group they
 * run at once. The first failure is returned; every communicator's queue
 * is run or, after a failure of its own, dropped. */
kolo_result_t kolo_group_start(void);
kolo_result_t kolo_group_end(void);

/* ------------------------------------------------------------------------
 * Ordered asynchronous calls
 *
 * Every collective and point-to-point call above also exists as
 * kolo_<call>_async, with the same arguments and a kolo_handle_t* last
 * (the handle API of the named operations below: test, wait with a
 * deadline, callback, release). It checks its arguments and returns at
 * once; the operations of one communicator then run on a thread of kolo's,
 * one after another in the order they were called (NCCL's stream
 * semantics, for host memory too), whichever threads call. Collectives on
 * a CUDA stream (the _stream calls) share that order. A blocking call
 * first waits for every operation queued on its communicator before it
 * (and an _async call made meanwhile from another thread waits for that
 * blocking call, which comes first in the order).
 *
 * Buffers belong to kolo until the handle completes: send buffers stay
 * unchanged, receive buffers are not read. Count and displacement arrays
 * are copied by the call. Device buffers are used after the work already
 * on the legacy default stream when the call was made.
 *
 * Errors: a bad argument, or a communicator already failed, is returned by
 * the call itself, with no handle. A failure while running becomes the
 * communicator's sticky error and the result of this handle and of every
 * later one. kolo_comm_abort fails what is queued promptly.
 * kolo_comm_destroy waits for queued operations (each bounded by
 * KOLO_TIMEOUT_S); the handles stay valid until released.
 *
 * Callbacks (kolo_handle_set_callback) run on kolo's thread, after the
 * operation and before the next one; they may queue more operations but
 * must not block on this communicator. What a callback queues runs next,
 * before what other threads queued meanwhile (in the order the callback
 * queued it), as if the callback had run at that point of the order: the
 * order then does not depend on when a callback ran, and ranks whose
 * callbacks queue the same operations agree on it.
 *
 * In a group, kolo_send_async and kolo_recv_async queue like kolo_send and
 * kolo_recv; kolo_group_end then returns at once when every call queued
 * for a communicator was _async (the handles complete together, when the
 * whole batch is done), else it waits for the batch as usual.
 *
 * None of these calls takes a lock a caller might hold (a framework may
 * call them from any thread with its interpreter lock released).
 * ------------------------------------------------------------------------ */
kolo_result_t kolo_allreduce_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   kolo_dtype_t dtype, kolo_op_t op, kolo_handle_t* handle);
kolo_result_t kolo_allreduce_many_async(kolo_comm_t comm, const void* const* sendbufs, void* const* recvbufs,
                                        const size_t* counts, size_t n, kolo_dtype_t dtype, kolo_op_t op,
                                        kolo_handle_t* handle);
kolo_result_t kolo_allreduce_wire_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                        kolo_dtype_t dtype, kolo_op_t op, kolo_wire_format_t wire,
                                        float* residuals, kolo_handle_t* handle);
kolo_result_t kolo_allgather_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                   kolo_dtype_t dtype, kolo_handle_t* handle);
kolo_result_t kolo_broadcast_async(kolo_comm_t comm, void* buf, size_t count, kolo_dtype_t dtype, int root,
                                   kolo_handle_t* handle);
kolo_result_t kolo_reduce_scatter_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                        kolo_dtype_t dtype, kolo_op_t op, kolo_handle_t* handle);
kolo_result_t kolo_barrier_async(kolo_comm_t comm, kolo_handle_t* handle);
kolo_result_t kolo_reduce_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                kolo_dtype_t dtype, kolo_op_t op, int root, kolo_handle_t* handle);
kolo_result_t kolo_gather_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                kolo_dtype_t dtype, int root, kolo_handle_t* handle);
kolo_result_t kolo_gatherv_async(kolo_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                 const size_t* recvcounts, const size_t* displs, kolo_dtype_t dtype, int root,
                                 kolo_handle_t* handle);
kolo_result_t kolo_scatter_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                 kolo_dtype_t dtype, int root, kolo_handle_t* handle);
kolo_result_t kolo_scatterv_async(kolo_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                  const size_t* displs, void* recvbuf, size_t recvcount, kolo_dtype_t dtype,
                                  int root, kolo_handle_t* handle);
kolo_result_t kolo_allgatherv_async(kolo_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                    const size_t* recvcounts, const size_t* displs, kolo_dtype_t dtype,
                                    kolo_handle_t* handle);
kolo_result_t kolo_reduce_scatterv_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf,
                                         const size_t* recvcounts, kolo_dtype_t dtype, kolo_op_t op,
                                         kolo_handle_t* handle);
kolo_result_t kolo_alltoall_async(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  kolo_dtype_t dtype, kolo_handle_t* handle);
kolo_result_t kolo_alltoallv_async(kolo_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                   const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                   const size_t* rdispls, kolo_dtype_t dtype, kolo_handle_t* handle);
kolo_result_t kolo_send_async(kolo_comm_t comm, const void* sendbuf, size_t count, kolo_dtype_t dtype, int peer,
                              kolo_handle_t* handle);
kolo_result_t kolo_recv_async(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int peer,
                              kolo_handle_t* handle);
/* kolo_recv_any's ordered asynchronous form: it runs in call order with the
 * communicator's other operations, and writes *source before the handle
 * completes, so *source (and recvbuf) must stay valid until then; -1 until
 * it is known. Refused in a group, as kolo_recv_any is. */
kolo_result_t kolo_recv_any_async(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int* source,
                                  kolo_handle_t* handle);

/* A short constant description of a result code. */
const char* kolo_result_string(kolo_result_t result);

/* The calling thread's last failure, in detail; "" if none. Valid until the
 * thread's next kolo call. */
const char* kolo_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KOLO_H_ */
