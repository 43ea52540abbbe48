"""DDP (or FSDP2) training steps on torch.distributed's kolo backend against
its gloo backend, in the same job: one rank per process, launched by
torchrun or kolorun (bench/ddp_bench.sh runs N=2 and N=4).

    torchrun --nproc_per_node 2 --redirects 2 --tee 1 bench/ddp_bench.py [--params 25e6] [--fsdp2]

The model is an MLP of about --params parameters; a small batch keeps the
step's compute short, so the gradients' allreduce (4 bytes per parameter)
dominates, as it does for large models on fast accelerators. Each round
times --steps steps on kolo, then on gloo, then the same steps without
communication, and the rounds alternate so that the machine's noise falls
on both backends alike. Without communication means DDP's no_sync
(forward, backward, optimizer), or for FSDP2 (--fsdp2: each layer and the
whole model fully_shard-ed, so every step all-gathers the parameters and
reduce-scatters the gradients) the same model unsharded on one rank. The
communication share of a step is (step - step without it) / step. Rank 0
prints one line of medians per backend (milliseconds per step)."""
import argparse
import ctypes
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import kolo.torch  # noqa: F401  (registers backend "kolo")


def build_model(params, width):
    """Square layers of `width` until about `params` parameters."""
    layers = max(1, round(params / (width * width + width)))
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks[:-1])


def shard(net, group):
    """FSDP2 over group: each Linear layer a unit, then the whole model."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    mesh = DeviceMesh.from_group(group, "cpu")
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(net, mesh=mesh)


def timed_steps(ddp, optimizer, x, steps, sync=True):
    """Median seconds per step over `steps` steps."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        if sync:
            ddp(x).square().mean().backward()
        else:
            with ddp.no_sync():
                ddp(x).square().mean().backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", type=float, default=25e6, help="model parameters (default 25e6)")
    parser.add_argument("--width", type=int, default=2048, help="layer width (default 2048)")
    parser.add_argument("--batch", type=int, default=1, help="samples per rank per step (default 1)")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per round (default 4)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, alternating the backends (default 5)")
    parser.add_argument("--bucket-mb", type=float, default=25, help="DDP's bucket_cap_mb (default 25, DDP's)")
    parser.add_argument("--fsdp2", action="store_true",
                        help="FSDP2 (fully_shard per layer) instead of DDP: all-gathers and reduce-scatters")
    parser.add_argument("--gradient-as-bucket-view", action="store_true",
                        help="DDP's gradient_as_bucket_view (no copies between gradients and buckets)")
    opts = parser.parse_args()

    dist.init_process_group(backend="kolo")
    groups = {"kolo": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # ranks share the machine's cores
    x = torch.randn(opts.batch, opts.width)
    runs = {}
    for name, group in groups.items():
        net = build_model(opts.params, opts.width)
        n_params = sum(p.numel() for p in net.parameters())  # before sharding splits them
        if opts.fsdp2:
            model = shard(net, group)
        else:
            model = DDP(net, process_group=group, bucket_cap_mb=opts.bucket_mb,
                        gradient_as_bucket_view=opts.gradient_as_bucket_view)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
        timed_steps(model, optimizer, x, 1)  # warm-up: connections, buckets
        runs[name] = (model, optimizer)
    if opts.fsdp2:
        local = build_model(opts.params, opts.width)
        runs["compute"] = (local, torch.optim.SGD(local.parameters(), lr=1e-6))

    samples = {"kolo": [], "gloo": [], "compute": []}
    for _ in range(opts.rounds):
        for name in ("kolo", "gloo"):
            ddp, optimizer = runs[name]
            dist.barrier(group=groups[name])
            samples[name].append(timed_steps(ddp, optimizer, x, opts.steps))
        if opts.fsdp2:
            samples["compute"].append(timed_steps(*runs["compute"], x, opts.steps))
        else:
            ddp, optimizer = runs["kolo"]
            samples["compute"].append(timed_steps(ddp, optimizer, x, opts.steps, sync=False))

    # Every rank's medians, and the slowest rank's: a step ends for all when
    # the last rank's does.
    medians = torch.tensor([statistics.median(samples[k]) for k in ("kolo", "gloo", "compute")], dtype=torch.float64)
    # Over kolo: torch 2.13's gloo can deadlock at exit when its last work
    # held a tensor Python made (its worker thread takes the GIL to let go
    # of it while the group's destructor, holding the GIL, joins that
    # thread), about one run in ten here with this allreduce on gloo.
    dist.all_reduce(medians, op=dist.ReduceOp.MAX, group=groups["kolo"])
    kolo_s, gloo_s, compute_s = medians.tolist()
    if rank == 0:
        how = ("FSDP2 (each layer fully_shard-ed)" if opts.fsdp2 else "buckets %g MB%s" % (
            opts.bucket_mb, " as gradient views" if opts.gradient_as_bucket_view else ""))
        print("%s %d ranks, %.1fM parameters (%.0f MB of float32 gradients), batch %d per rank, %s, "
              "median of %d rounds x %d steps" % ("FSDP2" if opts.fsdp2 else "DDP", size, n_params / 1e6,
                                                  n_params * 4 / 1e6, opts.batch, how, opts.rounds, opts.steps))
        print("%-8s %10s %16s" % ("backend", "ms/step", "allgather+reduce-scatter share" if opts.fsdp2
                                  else "allreduce share"))
        for name, s in (("kolo", kolo_s), ("gloo", gloo_s)):
            print("%-8s %10.1f %15.0f%%" % (name, s * 1e3, 100 * max(0.0, s - compute_s) / s))
        print("%-8s %10.1f" % ("compute", compute_s * 1e3))
        print("kolo/gloo speedup per step: %.2fx" % (gloo_s / kolo_s))
    # torch 2.13's gloo can also deadlock when its group is destroyed (by
    # the DDP model's reducer, at exit): a work's wait() returns before
    # gloo's worker thread lets go of it, letting go takes the GIL when the
    # work was issued under Python state, and the group's destructor holds
    # the GIL while it joins that thread (seen in 2 of 70 runs). So the gloo
    # model is never freed, and its group never destroyed; everything else,
    # kolo's side included, ends as usual.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(runs["gloo"][0]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
