"""tools/gpu_check.sh's JAX step: kolo.jax's collectives on JAX arrays in
GPU memory, on every rank of a job (kolorun -np 2), against NumPy: eagerly
and inside jax.jit (each a custom call of the handler's CUDA twin, which
calls kolo's _stream API on XLA's stream), the results left on the GPU, and
the gradient of an allreduce. Prints "CHECK <what> ok" or "CHECK <what>
FAIL: ..." per check; exits 1 on any failure."""
import os
import sys

# Several processes may share one GPU: none may take most of its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import kolo.jax as hvd  # noqa: E402


def data(rank, shape):
    return np.random.default_rng(100 + rank).standard_normal(shape).astype(np.float32)


def main():
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    gpus = jax.devices("gpu")
    gpu = gpus[hvd.local_rank() % len(gpus)]  # kolo's GPU: local_rank % visible GPUs
    shape = (4 * n, 3)
    everyone = [data(q, shape) for q in range(n)]
    x = jax.device_put(data(rank, shape), gpu)
    rows = slice(4 * rank, 4 * rank + 4)
    a2a_want = np.concatenate([everyone[q][rows] for q in range(n)])
    failures = 0

    def check(what, got, want):
        nonlocal failures
        try:
            if got.devices() != {gpu}:
                raise AssertionError("the result left the GPU: %s" % got.devices())
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
            print("CHECK %s ok" % what, flush=True)
        except AssertionError as e:
            failures += 1
            print("CHECK %s FAIL: %s" % (what, str(e).strip().splitlines()[0]), flush=True)

    def collectives(a):
        return (hvd.allreduce(a, op=hvd.Sum), hvd.allreduce(a * 2, op=hvd.Average),
                hvd.grouped_allreduce([a, a + 1], op=hvd.Max), hvd.allgather(a), hvd.broadcast(a, n - 1),
                hvd.reducescatter(a, op=hvd.Sum), hvd.alltoall(a))

    stacked = np.stack(everyone)
    for jit in (False, True):
        how = "jit" if jit else "eager"
        total, mean2, (most, most1), gathered, broadcast, scattered, exchanged = (
            jax.jit(collectives) if jit else collectives)(x)
        check("allreduce sum, %s" % how, total, stacked.sum(0))
        check("allreduce average, %s" % how, mean2, 2 * stacked.mean(0))
        check("grouped allreduce max, %s" % how, most, stacked.max(0))
        check("grouped allreduce max (second), %s" % how, most1, stacked.max(0) + 1)
        check("allgather, %s" % how, gathered, np.concatenate(everyone))
        check("broadcast, %s" % how, broadcast, everyone[n - 1])
        check("reducescatter, %s" % how, scattered, stacked.sum(0)[rows])
        check("alltoall, %s" % how, exchanged, a2a_want)
    # d/dx of sum(allreduce(x) * w): the allreduce of every rank's w.
    weights = [data(50 + q, shape) for q in range(n)]
    w = jax.device_put(weights[rank], gpu)
    grad = jax.jit(jax.grad(lambda a: jnp.sum(hvd.allreduce(a, op=hvd.Sum) * w)))(x)
    check("gradient of an allreduce", grad, np.sum(weights, 0))
    hvd.barrier()
    hvd.shutdown()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
