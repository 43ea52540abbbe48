"""One rank of a torch.distributed job on the kolo backend, started by
test_torch_distributed.py without a launcher:

    torch_distributed_job.py INIT_METHOD RANK SIZE SCENARIO

INIT_METHOD is tcp://HOST:PORT, file://PATH, or "store:HOST:PORT" (a
TCPStore passed to init_process_group). Prints "rank R: ok ..." or
"rank R: RuntimeError after S s: MESSAGE"."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import kolo.torch  # noqa: F401

init_method, rank, size, scenario = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
timeout = datetime.timedelta(seconds=5)
if init_method.startswith("store:"):
    _, host, port = init_method.split(":")
    store = dist.TCPStore(host, int(port), size, rank == 0, timeout=timeout)
    dist.init_process_group("kolo", store=store, rank=rank, world_size=size, timeout=timeout)
else:
    dist.init_process_group("kolo", init_method=init_method, rank=rank, world_size=size, timeout=timeout)

start = time.time()
try:
    if scenario == "sum":
        t = torch.full((1000,), float(rank))
        dist.all_reduce(t)
        assert torch.all(t == sum(range(size))), t
    elif scenario == "death":  # the last rank dies; the others are in an allreduce
        if rank == size - 1:
            os._exit(3)
        for _ in range(3):
            dist.all_reduce(torch.ones(1 << 20))
    elif scenario == "timeout":  # the last rank comes late to two big allreduces
        if rank == size - 1:
            time.sleep(8)
        for _ in range(2):
            dist.all_reduce(torch.ones(1 << 22))
    elif scenario == "mismatch":  # ranks disagree on the count
        dist.all_reduce(torch.ones(10 + rank))
    print("rank %d: ok" % rank, flush=True)
except RuntimeError as e:
    print("rank %d: RuntimeError after %.1f s: %s" % (rank, time.time() - start, e), flush=True)
dist.destroy_process_group()
