"""kolo.jax against JAX's own multi-process CPU collectives (jax.distributed
with Gloo: a psum in shard_map over one device per process) and mpi4jax on
Open MPI (not in the project's environment: `pip install mpi4jax`, with
PATH hiding nvcc where no CUDA headers are installed), in the same job: the
allreduce alone from 4 KiB to 64 MiB, and a
data-parallel training step of an MLP (25M parameters by default): its
gradients, averaged over the ranks inside the compiled step (and the
gradients alone, no communication, for the compute's share). Each measurement is the
median of --rounds turns of --reps calls after --warmup, the peers taking
turns within each size, so that they see the same machine. Run under a launcher that starts mpirun's
ranks (mpi4jax needs MPI's):

    mpirun --allow-run-as-root --oversubscribe -np 2 -x KOLO_MASTER_ADDR=127.0.0.1 -x KOLO_MASTER_PORT=29512 \\
        -x PYTHONPATH .venv/bin/python bench/jax_collectives.py [--mlp-width 2900] [--skip-mpi4jax]

Rank 0 prints a table: milliseconds per call or step and each peer's time
over kolo.jax's (> 1: kolo.jax is faster).
"""
import argparse
import os
import statistics
import time

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import kolo.jax as hvd  # noqa: E402

try:
    from jax import shard_map
except ImportError:  # jax 0.10 keeps it here
    from jax.experimental.shard_map import shard_map


def compared(fns, warmup, reps, rounds):
    """{name: ms per call}, each the median of rounds x reps calls: after
    warmup calls of each, the functions take turns, reps calls at a time,
    the first to go rotating from round to round, so that every one sees
    the same machine (4 ranks on 2 cores shift from second to second)."""
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            jax.block_until_ready(fns[name]())
    samples = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            for _ in range(reps):
                start = time.perf_counter()
                jax.block_until_ready(fns[name]())
                samples[name].append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(samples[name]) for name in names}


class GlooPsum:
    """JAX's own: one CPU device per process, a psum in shard_map."""

    def __init__(self, n):
        self.mesh = Mesh(np.array(jax.devices()), ("i",))
        self.sharding = NamedSharding(self.mesh, P("i"))
        self.n = n

    def global_array(self, local):
        shape = (self.n * local.shape[0],) + local.shape[1:]
        return jax.make_array_from_single_device_arrays(shape, self.sharding,
                                                        [jax.device_put(local, jax.local_devices()[0])])

    def mean(self, fn_of_local):
        """A jitted function of the global array whose per-device body is
        fn_of_local(x, psum_mean)."""
        return jax.jit(shard_map(lambda x: fn_of_local(x, lambda t: jax.lax.psum(t, "i") / self.n),
                                 mesh=self.mesh, in_specs=P("i"), out_specs=P("i")))


def mlp_init(width, depth, rng):
    sizes = [width] * (depth + 1)
    return [(jnp.asarray(rng.standard_normal((a, b)) / np.sqrt(a), jnp.float32), jnp.zeros((b,), jnp.float32))
            for a, b in zip(sizes[:-1], sizes[1:])]


def mlp_loss(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return jnp.mean((x @ w + b) ** 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="calls per turn")
    parser.add_argument("--rounds", type=int, default=5, help="turns of each")
    parser.add_argument("--warmup", type=int, default=10, help="calls of each allreduce before timing (steps: 2)")
    parser.add_argument("--mlp-rounds", type=int, default=3, help="turns of each training step")
    parser.add_argument("--mlp-width", type=int, default=2900, help="3 layers of width^2: 2900 is 25.2M parameters")
    parser.add_argument("--mlp-depth", type=int, default=3)
    parser.add_argument("--mlp-batch", type=int, nargs="+", default=[8, 512],
                        help="per-rank batches: communication dominates at the small one, compute at the large")
    parser.add_argument("--skip-mpi4jax", action="store_true")
    args = parser.parse_args()
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    jax.distributed.initialize("%s:%d" % (os.environ.get("KOLO_MASTER_ADDR", "127.0.0.1"),
                                          int(os.environ.get("KOLO_MASTER_PORT", "29512")) + 11), n, rank)
    gloo = GlooPsum(n)
    mpi4jax = None
    if not args.skip_mpi4jax:
        import mpi4jax  # noqa: F811  (not in the project's environment: pip install mpi4jax)
        from mpi4py import MPI
    rows = []

    # -- the allreduce alone --------------------------------------------------------
    for kib in (4, 64, 1024, 4096, 16384, 65536):
        local = jnp.ones((kib * 256,), jnp.float32) * (rank + 1)
        kolo_fn = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum))
        fns = {"kolo.jax": lambda: kolo_fn(local)}
        g = gloo.global_array(local)
        gloo_fn = gloo.mean(lambda x, mean: mean(x) * n)
        fns["jax gloo"] = lambda: gloo_fn(g)
        if mpi4jax is not None:
            m_fn = jax.jit(lambda x: mpi4jax.allreduce(x, op=MPI.SUM, comm=MPI.COMM_WORLD))
            fns["mpi4jax"] = lambda: m_fn(local)
        results = compared(fns, args.warmup, args.reps, args.rounds)
        rows.append(("allreduce %s" % ("%d KiB" % kib if kib < 1024 else "%d MiB" % (kib // 1024)), results))

    # -- a training step ------------------------------------------------------------
    params = mlp_init(args.mlp_width, args.mlp_depth, np.random.default_rng(0))
    count = sum(w.size + b.size for w, b in params)
    for batch in args.mlp_batch:
        x = jnp.asarray(np.random.default_rng(rank).standard_normal((batch, args.mlp_width)), jnp.float32)

        # Each step: the gradients, then their average over the ranks.
        @jax.jit
        def kolo_step(params, x):
            return hvd.average_gradients(jax.grad(mlp_loss)(params, x))
        fns = {"kolo.jax": lambda: kolo_step(params, x)}

        def gloo_body(xs, mean):
            grads = jax.grad(mlp_loss)(params, xs)
            return jnp.concatenate([mean(g).ravel() for w_b in grads for g in w_b])[None]
        gx = gloo.global_array(x)
        gloo_step = gloo.mean(gloo_body)
        fns["jax gloo"] = lambda: gloo_step(gx)
        if mpi4jax is not None:
            @jax.jit
            def m_step(params, x):
                grads = jax.grad(mlp_loss)(params, x)
                flat = jnp.concatenate([g.ravel() for w_b in grads for g in w_b])
                return mpi4jax.allreduce(flat, op=MPI.SUM, comm=MPI.COMM_WORLD) / n
            fns["mpi4jax"] = lambda: m_step(params, x)

        local_step = jax.jit(jax.grad(mlp_loss))
        fns["compute alone"] = lambda: local_step(params, x)
        results = compared(fns, 2, args.reps, args.mlp_rounds)
        rows.append(("MLP %.1fM params, batch %d/rank" % (count / 1e6, batch), results))

    if rank == 0:
        peers = [k for k in rows[0][1] if k != "kolo.jax"]
        print("%d ranks; ms per call or step (median of %d turns of %d calls, %d for the steps, the peers interleaved); "
              "peer / kolo.jax in brackets" % (n, args.rounds, args.reps, args.mlp_rounds))
        print("| what | kolo.jax | %s |" % " | ".join(peers + ["compute alone"]))
        print("| --- |" + " --- |" * (2 + len(peers)))
        for what, results in rows:
            cells = ["%.3f (%.2fx)" % (results[p], results[p] / results["kolo.jax"]) for p in peers]
            print("| %s | %.3f | %s | %s |" % (what, results["kolo.jax"], " | ".join(cells),
                                              "%.3f" % results["compute alone"] if "compute alone" in results
                                              else "-"))


if __name__ == "__main__":
    main()
