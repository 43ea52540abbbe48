"""A torch.distributed job on the kolo backend under torchrun's elastic
agent: on the first attempt rank 1 dies at step 5; torchrun restarts every
worker, and the next attempt meets again (a fresh rendezvous under the
same agent store) and runs every step, each allreduce checked."""
import os

import torch
import torch.distributed as dist

import kolo.torch  # noqa: F401  (registers the "kolo" backend)

attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
dist.init_process_group("kolo")
rank, size = dist.get_rank(), dist.get_world_size()
for step in range(10):
    if attempt == 0 and rank == 1 and step == 5:
        os._exit(3)
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    assert t[0].item() == size * (size + 1) / 2, t[0].item()
print("rank %d: attempt %d done" % (rank, attempt), flush=True)
dist.destroy_process_group()
