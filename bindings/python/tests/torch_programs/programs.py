"""Real programs that drive torch.distributed, each run on a kolo group and
on a gloo group of the same job with the same data, their results
compared. Started by torchrun on N ranks (python_test.sh torch_programs):

    torchrun --nproc_per_node N programs.py [PROGRAM ...]

The default group is kolo's; gloo's is a new_group over every rank. Each
program returns what it computed (losses, parameters, outputs), which must
match gloo's to float32 rounding (to fp16/bf16 rounding where a
compression hook rounds), on every rank. Prints "rank R: PROGRAM ok" per
program, and exits non-zero at the first difference. (DDP's bf16 hook is
not here: torch refuses it outside CUDA with NCCL, whatever the backend.)
"""
import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.testing import assert_close

import kolo.torch  # noqa: F401  (registers backend "kolo")

STEPS = 4


def data(step, rank, batch=8, features=16, outputs=4):
    """This rank's batch at a step: the same on either backend."""
    g = torch.Generator().manual_seed(1000 + 97 * step + rank)
    return torch.randn(batch, features, generator=g), torch.randn(batch, outputs, generator=g)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


def train(model, steps=STEPS, lr=0.05, optimizer=torch.optim.SGD):
    opt = optimizer(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        x, y = data(step, dist.get_rank())
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses


# --- DistributedDataParallel ---

def ddp(group, hook=None, bucket_cap_mb=0.01, **options):  # several buckets by default
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(mlp(), process_group=group, bucket_cap_mb=bucket_cap_mb, **options)
    if hook is not None:
        state, function = hook(group)
        model.register_comm_hook(state, function)
    losses = train(model)
    return {"losses": losses, "params": [p.detach().clone() for p in model.parameters()]}


def ddp_static_graph(group):
    return ddp(group, static_graph=True)


def ddp_gradient_as_bucket_view(group):
    return ddp(group, gradient_as_bucket_view=True)


def ddp_fp16_compress(group):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    return ddp(group, hook=lambda g: (g, default_hooks.fp16_compress_hook))


def ddp_device_map(group):
    """DDP on a group that maps CPU tensors to kolo and CUDA tensors to gloo
    ("cpu:kolo,cuda:gloo"): kolo serves its device as a c10d Backend
    (kolo/torch/_device_backend.py), gloo the other; gloo's run is a plain
    gloo group."""
    if dist.get_backend(group) != "kolo":
        return ddp(group)
    mixed = dist.new_group(backend="cpu:kolo,cuda:gloo")
    backends = {d: mixed._get_backend(torch.device(d)).name() for d in ("cpu", "cuda")}
    assert backends == {"cpu": "kolo", "cuda": "gloo"}, backends
    result = ddp(mixed)
    mixed.monitored_barrier(datetime.timedelta(seconds=30))  # through the Backend's own entry point
    dist.destroy_process_group(mixed)
    return result


def powersgd_hook(g):
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    # Compression from the second step on; the same random seed on either
    # backend, so the same low-rank projections.
    state = powersgd.PowerSGDState(process_group=g, matrix_approximation_rank=2, start_powerSGD_iter=2,
                                   min_compression_rate=0, random_seed=7)
    return state, powersgd.powerSGD_hook


def ddp_powersgd(group):
    """PowerSGD in one bucket: its second and third allreduce are issued
    from future callbacks, the next bucket's first from the autograd
    thread; with one bucket nothing races, and gloo runs it too."""
    return ddp(group, hook=powersgd_hook, bucket_cap_mb=25)


def ddp_powersgd_buckets(group):
    """PowerSGD over several buckets, where a bucket's callbacks issue their
    allreduces while the autograd thread issues the next bucket's: kolo
    runs what a completion issues next, at the same place on every rank
    (gloo orders them as the threads happen to run, and hangs)."""
    return ddp(group, hook=powersgd_hook)


def ddp_compiled(group):
    """DDP under torch.compile, both ways: the compiled DDP (Dynamo traces
    DDP's forward, whose reducer calls the backend from C++; torch 2.13
    compiles no graph of it, on gloo either), and DDP over a compiled
    module, whose graph Inductor compiles (checked)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    counters = torch._dynamo.utils.counters
    torch._dynamo.reset()
    # (Dynamo asks for buckets no smaller than DDP's first, 1 MB.)
    compiled_ddp = torch.compile(DDP(mlp(), process_group=group, bucket_cap_mb=1))
    outer = train(compiled_ddp)
    torch._dynamo.reset()
    ddp_of_compiled = DDP(torch.compile(mlp()), process_group=group, bucket_cap_mb=1)
    inner = train(ddp_of_compiled)
    assert counters["stats"]["unique_graphs"] > 0, "nothing compiled: %s" % dict(counters["graph_break"])
    return {"losses": outer + inner,
            "params": [p.detach().clone() for m in (compiled_ddp, ddp_of_compiled) for p in m.parameters()]}


# --- FSDP2, DTensor and tensor parallelism on a small transformer ---

class Block(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab=50, dim=32, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def tokens(step, rank, batch=4, length=12, vocab=50):
    g = torch.Generator().manual_seed(5000 + 31 * step + rank)
    t = torch.randint(vocab, (batch, length + 1), generator=g)
    return t[:, :-1], t[:, 1:]


def train_transformer(model, rank_of_data, steps=STEPS):
    # SGD, whose step is linear in the gradient: two correct reduction
    # orders then differ at float32 rounding (Adam's normalization would
    # blow a rounding difference in a near-zero gradient up to its step).
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        x, y = tokens(step, rank_of_data)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses


def mesh_of(group):
    from torch.distributed.device_mesh import DeviceMesh
    return DeviceMesh.from_group(group, "cpu")


def full(tensor):
    """A DTensor's whole value (an all-gather over its mesh), or the tensor."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def fsdp2(group):
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = Transformer()
    mesh = mesh_of(group)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    losses = train_transformer(model, dist.get_rank())
    return {"losses": losses, "params": [full(p).detach().clone() for p in model.parameters()]}


def tensor_parallel(group):
    """Megatron-style: attention's input projection and the MLP's first
    layer column-parallel, the second row-parallel; every rank sees the
    same batch."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    torch.manual_seed(0)
    model = Transformer()
    mesh = mesh_of(group)
    for block in model.blocks:
        parallelize_module(block, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    losses = train_transformer(model, 0)
    return {"losses": losses, "params": [full(p).detach().clone() for p in model.parameters()]}


def checkpoint(group):
    """torch.distributed.checkpoint: a sharded FSDP2 model saved by every
    rank's shard and loaded into a fresh model with other weights."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from torch.distributed.fsdp import fully_shard
    mesh = mesh_of(group)

    def sharded(seed):
        torch.manual_seed(seed)
        model = Transformer()
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    trained = sharded(0)
    train_transformer(trained, dist.get_rank(), steps=2)
    # One folder for the job: rank 0 names it, every rank writes its shard.
    folder = [tempfile.mkdtemp(prefix="kolo_dcp_") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(folder, src=0, group=group)
    dcp.save(get_model_state_dict(trained), checkpoint_id=folder[0], process_group=group)
    fresh = sharded(1)
    state = get_model_state_dict(fresh)
    dcp.load(state, checkpoint_id=folder[0], process_group=group)
    set_model_state_dict(fresh, state)
    before = [full(p).detach().clone() for p in trained.parameters()]
    after = [full(p).detach().clone() for p in fresh.parameters()]
    assert_close(after, before, rtol=0, atol=0)  # loaded bit for bit
    x, _ = tokens(99, 0)
    return {"params": after, "output": fresh(x).detach()}


PROGRAMS = {f.__name__: f for f in (ddp_static_graph, ddp_gradient_as_bucket_view, ddp_fp16_compress,
                                    ddp_device_map, ddp_powersgd, ddp_powersgd_buckets, ddp_compiled, fsdp2,
                                    tensor_parallel, checkpoint)}
# Run on kolo alone (gloo hangs on them): every rank must end with the same
# parameters, compared over the gloo group.
KOLO_ONLY = {"ddp_powersgd_buckets"}
# Where a hook rounds to 16 bits, the sums of 16-bit values may differ in
# their last bit between two correct reduction orders.
TOLERANCE = {"ddp_fp16_compress": dict(rtol=2e-3, atol=2e-3)}


def main(names):
    dist.init_process_group("kolo")
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    kolo = dist.group.WORLD
    assert dist.get_backend(kolo) == "kolo", dist.get_backend(kolo)
    for name in names or PROGRAMS:
        program = PROGRAMS[name]
        on_kolo = program(kolo)
        if name in KOLO_ONLY:
            mine = torch.cat([p.flatten() for p in on_kolo["params"]])
            everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
            dist.all_gather(everyone, mine, group=gloo)
            for r, theirs in enumerate(everyone):
                assert torch.equal(theirs, mine), "%s: rank %d's parameters differ from rank %d's" % (name, r, rank)
        else:
            on_gloo = program(gloo)
            assert_close(on_kolo, on_gloo, msg=lambda m: "%s: kolo differs from gloo: %s" % (name, m),
                         **TOLERANCE.get(name, dict(rtol=1e-5, atol=1e-6)))
        print("rank %d: %s ok" % (rank, name), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
