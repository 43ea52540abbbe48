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
 *  - Collectives on one communicator must be called in the same order on
 *    every rank. One collective runs at a time per communicator; concurrent
 *    calls from several threads are serialized.
 *  - Buffers are host memory. Element counts, not bytes.
 */
#ifndef KOLO_H_
#define KOLO_H_

#include <stddef.h>

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
  KOLO_ERR_INTERNAL          /* a bug in kolo; please report it with kolo_last_error() */
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

/* Releases the communicator's sockets, threads and memory. Not collective;
 * NULL is accepted and ignored. */
kolo_result_t kolo_comm_destroy(kolo_comm_t comm);

kolo_result_t kolo_comm_rank(kolo_comm_t comm, int* rank);
kolo_result_t kolo_comm_size(kolo_comm_t comm, int* size);
kolo_result_t kolo_comm_local_rank(kolo_comm_t comm, int* local_rank);
kolo_result_t kolo_comm_local_size(kolo_comm_t comm, int* local_size);

/* recvbuf[i] = op over all ranks of sendbuf[i], for i < count, bitwise
 * identical on every rank. sendbuf == recvbuf is in place; other overlaps
 * are rejected. */
kolo_result_t kolo_allreduce(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo_dtype_t dtype,
                             kolo_op_t op);

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

/* A short constant description of a result code. */
const char* kolo_result_string(kolo_result_t result);

/* The calling thread's last failure, in detail; "" if none. Valid until the
 * thread's next kolo call. */
const char* kolo_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KOLO_H_ */
