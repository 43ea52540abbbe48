"""A torch.distributed job on the kolo backend as mpirun or srun starts it:
rank and size from the launcher's own variables (torch's env:// wants
RANK and WORLD_SIZE, which neither sets), the rendezvous at tcp://. DDP
trains a small model for a few steps on kolo, and again on a gloo group of
the same job; both must end with the same parameters (to float32
rounding), the same on every rank.
   torch_ddp.py WORLD_SIZE MASTER_PORT"""
import os
import sys

import torch
import torch.distributed as dist

import kolo.torch  # noqa: F401  (registers the backend)


def launcher_rank_and_size():
    for rank, size in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    raise SystemExit("neither mpirun's nor srun's rank variables are set")


def train(group):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(4):
        gen = torch.Generator().manual_seed(1000 * step + rank)  # each rank its own batch
        loss = ddp(torch.randn(8, 32, generator=gen)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


want_size, port = int(sys.argv[1]), int(sys.argv[2])
rank, size = launcher_rank_and_size()
assert size == want_size, f"world size {size}, launcher asked for {want_size}"
dist.init_process_group("kolo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
assert dist.get_backend() == "kolo", dist.get_backend()
on_kolo = train(None)
on_gloo = train(dist.new_group(backend="gloo"))
torch.testing.assert_close(on_kolo, on_gloo, rtol=1e-5, atol=1e-6)
everyone = [torch.empty_like(on_kolo) for _ in range(size)]
dist.all_gather(everyone, on_kolo)
assert all(torch.equal(everyone[0], p) for p in everyone), "ranks ended with different parameters"
dist.destroy_process_group()
print(f"torch rank {rank} of {size} ok", flush=True)
