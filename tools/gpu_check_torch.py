"""torch's CUDA tensors over kolo, each against a reference computed here:
the "kolo" torch.distributed backend (all_reduce, all_gather, broadcast,
stream order as NCCL's, DDP with device_ids, FSDP2) and kolo.torch
(Horovod's API: allreduce, grouped allreduce, broadcast, reducescatter,
allgather and alltoall with no host copy). Run by tools/gpu_check.sh under torchrun; the ranks may
share one GPU. Prints
"CHECK <name> ok" or "CHECK <name> FAIL: <what>" per check (rank 0), and
exits 1 if any failed on any rank."""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    import kolo.torch as hvd  # registers the "kolo" backend

    dist.init_process_group("kolo", rank=rank, world_size=world)
    failures = []

    def check(name, ok, what=""):
        if not ok:
            failures.append(name)
        if rank == 0 or not ok:
            print("CHECK %s %s" % (name, "ok" if ok else "FAIL: rank %d %s" % (rank, what)), flush=True)

    # The collectives on CUDA tensors, results on the same device.
    x = torch.arange(1031, dtype=torch.float32, device=device) + rank
    dist.all_reduce(x)
    want = sum(torch.arange(1031, dtype=torch.float32) + r for r in range(world))
    check("all_reduce", x.is_cuda and torch.equal(x.cpu(), want), "sum differs")

    parts = [torch.empty(7, device=device) for _ in range(world)]
    dist.all_gather(parts, torch.full((7,), float(rank), device=device))
    check("all_gather", all(torch.equal(p.cpu(), torch.full((7,), float(r))) for r, p in enumerate(parts)))

    b = torch.full((5,), float(rank), device=device)
    dist.broadcast(b, src=world - 1)
    check("broadcast", torch.equal(b.cpu(), torch.full((5,), float(world - 1))))

    # Stream order, as NCCL's: an all_reduce called while the current
    # stream is busy (a kernel spinning for about 0.1 s) returns at once,
    # before the stream gets to it, and its result is right once the
    # stream has run; the host did not wait for the GPU.
    z = torch.full((4099,), float(rank + 1), device=device)
    torch.cuda.synchronize(device)
    torch.cuda._sleep(200_000_000)
    start = time.monotonic()
    work = dist.all_reduce(z, async_op=True)
    returned_s = time.monotonic() - start
    pending = not work.is_completed()
    work.wait()
    torch.cuda.current_stream(device).synchronize()
    check("all_reduce on the stream", returned_s < 0.05 and pending and work.is_completed()
          and torch.equal(z.cpu(), torch.full((4099,), float(world * (world + 1) // 2))),
          "returned after %.3f s, pending then %s, sum right %s"
          % (returned_s, pending, torch.equal(z.cpu(), torch.full((4099,), float(world * (world + 1) // 2)))))
    gathered = torch.empty(world * 5, device=device)
    torch.cuda._sleep(50_000_000)
    dist.all_gather_into_tensor(gathered, torch.full((5,), float(rank), device=device))
    scattered = torch.empty(3, device=device)
    dist.reduce_scatter_tensor(scattered, torch.arange(3 * world, dtype=torch.float32, device=device))
    torch.cuda.current_stream(device).synchronize()
    check("all_gather_into_tensor, reduce_scatter_tensor on the stream",
          torch.equal(gathered.cpu(), torch.tensor([float(r) for r in range(world) for _ in range(5)]))
          and torch.equal(scattered.cpu(), torch.arange(3 * rank, 3 * rank + 3, dtype=torch.float32) * world))

    # DDP with device_ids: one step's gradients are the average of every
    # rank's, as one process computing on all the inputs finds them.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(device)
    reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    inputs = [torch.randn(8, 16, generator=torch.Generator().manual_seed(100 + r)) for r in range(world)]
    ddp(inputs[rank].to(device)).pow(2).mean().backward()
    ref_loss = sum(reference(i).pow(2).mean() for i in inputs) / world
    ref_loss.backward()
    close = all(
        torch.allclose(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5) for p, q in zip(model.parameters(), reference.parameters())
    )
    check("ddp_device_ids", close, "gradients differ from one process's")

    # FSDP2: sharded parameters, gathered for the forward pass, gradients
    # reduce-scattered; after one step every rank holds the same model.
    try:
        from torch.distributed.fsdp import fully_shard

        torch.manual_seed(1)
        sharded = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(device)
        fully_shard(sharded)
        opt = torch.optim.SGD(sharded.parameters(), lr=0.1)
        sharded(inputs[rank].to(device)).sum().backward()
        opt.step()
        full = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in sharded.parameters()]
        flat = torch.cat([t.detach().reshape(-1) for t in full])
        gathered = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(gathered, flat)
        check("fsdp2", all(torch.equal(g, gathered[0]) for g in gathered), "ranks hold different models")
    except Exception as e:  # FSDP2 itself missing or refusing is a failure to report, not to hide
        check("fsdp2", False, "%s: %s" % (type(e).__name__, e))

    # Horovod's API on CUDA tensors.
    hvd.init()
    y = hvd.allreduce(torch.full((3,), float(rank + 1), device=device), op=hvd.Sum)
    check("kolo.torch allreduce", y.is_cuda and torch.equal(y.cpu(), torch.full((3,), float(world * (world + 1) // 2))))
    # What the engine takes on the GPU never passes through the host: a
    # host copy of a CUDA tensor fails the check.
    from kolo.torch import _adapter

    def no_host_copy(t):
        raise AssertionError("a CUDA tensor was copied to the host")

    host_copy, _adapter.adapter.to_host = _adapter.adapter.to_host, no_host_copy
    try:
        # Produced on a side stream still busy when the allreduce is called.
        side = torch.cuda.Stream(device)
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            z = torch.arange(5000, dtype=torch.float32, device=device) * (rank + 1)
            out = hvd.allreduce(z, op=hvd.Average, prescale_factor=2.0, postscale_factor=0.5)
        want = torch.arange(5000, dtype=torch.float32) * sum(r + 1 for r in range(world)) / world
        check("kolo.torch allreduce on the GPU, after a busy side stream",
              out.is_cuda and torch.allclose(out.cpu(), want))
        ints = [torch.full((n,), rank + 1, dtype=torch.int16, device=device) for n in (1, 300, 70000)]
        outs = hvd.grouped_allreduce(ints, op=hvd.Sum)
        check("kolo.torch grouped_allreduce of int16 on the GPU",
              all(o.is_cuda and o.dtype == torch.int16 and bool((o.cpu() == world * (world + 1) // 2).all())
                  for o in outs))
        b = torch.full((1031,), float(rank), device=device)
        hvd.broadcast_(b, root_rank=world - 1)
        check("kolo.torch broadcast_ on the GPU", torch.equal(b.cpu(), torch.full((1031,), float(world - 1))))
        rs = hvd.reducescatter(torch.ones(2 * world, 3, device=device), op=hvd.Sum)
        check("kolo.torch reducescatter on the GPU",
              rs.is_cuda and torch.equal(rs.cpu(), torch.full((2, 3), float(world))))
        g = hvd.allgather(torch.full((rank + 1, 2), float(rank), device=device))
        want = torch.tensor([[float(r)] * 2 for r in range(world) for _ in range(r + 1)])
        check("kolo.torch allgather on the GPU", g.is_cuda and torch.equal(g.cpu(), want))
        a = hvd.alltoall(torch.arange(world, dtype=torch.int64, device=device) + 10 * rank)
        check("kolo.torch alltoall on the GPU",
              a.is_cuda and torch.equal(a.cpu(), torch.tensor([10 * r + rank for r in range(world)])))
    except AssertionError as e:
        check("kolo.torch on the GPU without host copies", False, str(e))
    finally:
        _adapter.adapter.to_host = host_copy

    flags = torch.tensor([len(failures)], dtype=torch.float32, device=device)
    dist.all_reduce(flags)
    dist.destroy_process_group()
    return 1 if flags.item() else 0


if __name__ == "__main__":
    sys.exit(main())
