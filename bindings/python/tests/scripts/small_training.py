"""A small data-parallel training, the same on every launcher: a linear
model fits y = x.w + b with full-batch SGD. Each rank trains on its equal
slice of the batch and the gradients are averaged, so every rank must end
with the weights one process reaches on the whole batch (up to float32
rounding): one_process_weights() is that reference.

Used by test_ray.py and test_spark.py, from Ray actors and Spark tasks."""
import torch

STEPS, LR, SAMPLES = 30, 0.1, 64


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 4, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [3.0], [0.5]]) + 0.25
    return x, y


def _model():
    torch.manual_seed(1)
    return torch.nn.Linear(4, 1)


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()


def _shard(x, y, rank, size):
    n = SAMPLES // size
    return x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]


def one_process_weights():
    x, y = _data()
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return _weights(model)


def horovod_training():
    """kolo.torch's Horovod API, as a Horovod program is written."""
    import kolo.torch as hvd
    hvd.init()
    x, y = _shard(*_data(), hvd.rank(), hvd.size())
    model = _model()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    for _ in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    where = {"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(), "local_size": hvd.local_size(),
             "cross_rank": hvd.cross_rank(), "cross_size": hvd.cross_size(), "weights": _weights(model)}
    hvd.shutdown()
    return where


def torch_distributed_training():
    """torch.distributed on the "kolo" backend with DDP (the process group
    from the launcher's environment, env://)."""
    import torch.distributed as dist

    import kolo.torch  # noqa: F401  (registers the backend)
    if not dist.is_initialized():
        dist.init_process_group("kolo")
    rank, size = dist.get_rank(), dist.get_world_size()
    x, y = _shard(*_data(), rank, size)
    model = torch.nn.parallel.DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    weights = _weights(model.module)
    dist.destroy_process_group()
    return {"rank": rank, "size": size, "weights": weights}
