"""kolo.torch beyond the collectives themselves: autograd, the distributed
optimizer, and bringing models and optimizers to every rank."""
import copy

import numpy as np
import pytest
import torch

import kolo.torch as hvd
from conftest import inputs


def world():
    return hvd.rank(), hvd.size()


def rank_tensor(r, shape, seed=0):
    return torch.tensor(inputs(r, shape, "float64", seed), dtype=torch.float64)


# ---- autograd -------------------------------------------------------------------
# Each rank's loss is sum(w_r * y) for a fixed weight w_r; the expected
# gradients are horovod's (see kolo.torch.mpi_ops), written out by hand.

@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_allreduce_gradient(op):
    rank, n = world()
    x = rank_tensor(rank, (3, 2)).requires_grad_()
    y = hvd.allreduce(x, op=op, name="grad.ar.%d" % op)
    (rank_tensor(rank, (3, 2), seed=9) * y).sum().backward()
    weights = sum(rank_tensor(r, (3, 2), seed=9) for r in range(n))
    expected = weights if op == hvd.Sum else weights / n
    torch.testing.assert_close(x.grad, expected)


def test_grouped_allreduce_gradient():
    rank, n = world()
    xs = [rank_tensor(rank, s).requires_grad_() for s in [(2,), (2, 2)]]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum, name="grad.group")
    sum((rank_tensor(rank, y.shape, seed=9) * y).sum() for y in ys).backward()
    for x in xs:
        torch.testing.assert_close(x.grad, sum(rank_tensor(r, x.shape, seed=9) for r in range(n)))


def test_allgather_gradient():
    rank, n = world()
    x = rank_tensor(rank, (rank + 1, 2)).requires_grad_()
    y = hvd.allgather(x, name="grad.ag")
    total_rows = sum(r + 1 for r in range(n))
    (rank_tensor(rank, (total_rows, 2), seed=9) * y).sum().backward()
    averaged = sum(rank_tensor(r, (total_rows, 2), seed=9) for r in range(n)) / n
    start = sum(r + 1 for r in range(rank))
    torch.testing.assert_close(x.grad, averaged[start:start + rank + 1])


@pytest.mark.parametrize("root", [0, 1])
def test_broadcast_gradient(root):
    rank, n = world()
    x = rank_tensor(rank, (4,)).requires_grad_()
    y = hvd.broadcast(x, root, name="grad.bc.%d" % root)
    torch.testing.assert_close(y.detach(), rank_tensor(root, (4,)))
    (rank_tensor(rank, (4,), seed=9) * y).sum().backward()
    averaged = sum(rank_tensor(r, (4,), seed=9) for r in range(n)) / n
    torch.testing.assert_close(x.grad, averaged if rank == root else torch.zeros(4, dtype=torch.float64))


# ---- training ---------------------------------------------------------------------

def small_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def batch(r, step, micro=0):
    g = torch.Generator().manual_seed(100 * r + 10 * step + micro)
    x = torch.randn(4 + r, 3, generator=g)  # batch sizes differ between ranks
    return x, torch.sin(x.sum(1, keepdim=True))


@pytest.mark.parametrize("passes", [1, 2])
def test_data_parallel_training_equals_one_process_on_the_union(passes):
    """N ranks with DistributedOptimizer take the same steps as one process
    whose loss is the ranks' mean losses averaged (and, with
    backward_passes_per_step, summed over the passes)."""
    rank, n = world()
    model = small_model()
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters(), backward_passes_per_step=passes)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        opt.zero_grad()
        for micro in range(passes):
            x, y = batch(rank, step, micro)
            torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

        ref_opt.zero_grad()
        loss = 0
        for r in range(n):
            for micro in range(passes):
                x, y = batch(r, step, micro)
                loss = loss + torch.nn.functional.mse_loss(reference(x), y) / n
        loss.backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_fp16_compression_and_sum_op():
    rank, n = world()
    model = small_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                   named_parameters=model.named_parameters(), compression=hvd.Compression.fp16,
                                   op=hvd.Sum)
    x, y = batch(rank, 0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    local = [p.grad.clone() for p in model.parameters()]
    opt.synchronize()
    everyone = hvd.allgather_object([g.numpy() for g in local])
    for i, p in enumerate(model.parameters()):
        expected = sum(torch.tensor(e[i]).half().float() for e in everyone)
        assert p.grad.dtype == torch.float32
        torch.testing.assert_close(p.grad, expected, rtol=2e-3, atol=2e-3)
    with opt.skip_synchronize():
        opt.step()


@pytest.mark.parametrize("wire", ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8"])
def test_wire_compression_is_bitwise_the_same_everywhere_and_within_its_bound(wire):
    rank, n = world()

    def data(r):  # not exactly representable in any format; above the 64 KiB that go exact
        return torch.randn(20000, generator=torch.Generator().manual_seed(r), dtype=torch.float32) * 10

    x = data(rank)
    compression = getattr(hvd.Compression, wire, None) or hvd.Compression.wire(wire)
    y = hvd.allreduce(x, op=hvd.Sum, name="wire.%s" % wire, compression=compression)
    exact = sum(data(r).double() for r in range(n))
    # Each element is encoded once per rank; the bound is relative to the
    # largest sum of magnitudes (the block-scaled formats' scale).
    eps = {"bf16": 2 ** -8, "fp16": 2 ** -10, "fp8_e4m3": 2 ** -3.9, "fp8_e5m2": 2 ** -2.9, "int8": 1 / 200}[wire]
    largest = sum(data(r).abs() for r in range(n)).max().item()
    assert (y.double() - exact).abs().max().item() <= n * eps * largest
    assert not torch.equal(y.double(), exact) or n == 1, "the format applied"
    for other in hvd.allgather_object(y.numpy().tobytes()):
        assert other == y.numpy().tobytes()
    # Integer tensors are sent as they are.
    ints = torch.arange(10, dtype=torch.int32) + rank
    torch.testing.assert_close(hvd.allreduce(ints, op=hvd.Sum, name="wire.ints.%s" % wire, compression=compression),
                               sum(torch.arange(10, dtype=torch.int32) + r for r in range(n)))


def test_distributed_optimizer_with_int8_and_error_feedback_trains_like_float32():
    rank, n = world()

    def train(compression):
        torch.manual_seed(0)
        # A 128 KiB weight: above the 64 KiB that go exact.
        model = torch.nn.Sequential(torch.nn.Linear(8, 512), torch.nn.Tanh(), torch.nn.Linear(512, 64),
                                    torch.nn.Tanh(), torch.nn.Linear(64, 1))
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                       named_parameters=model.named_parameters(), compression=compression)
        g = torch.Generator().manual_seed(rank)
        for _ in range(30):
            x = torch.randn(16, 8, generator=g)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), torch.sin(x.sum(1, keepdim=True)))
            loss.backward()
            opt.step()
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()]), loss.item()

    exact, exact_loss = train(hvd.Compression.none)
    compressed, compressed_loss = train(hvd.Compression.wire("int8", error_feedback=True))
    # The same training, a little off: within 2% of the parameters' scale.
    assert (compressed - exact).abs().max().item() < 0.02 * exact.abs().max().item()
    assert abs(compressed_loss - exact_loss) < 0.1 * exact_loss + 1e-3
    for other in hvd.allgather_object(compressed.numpy().tobytes()):
        assert other == compressed.numpy().tobytes()
    if n > 1:  # one rank sends nothing, and keeps nothing
        assert hvd.residual_bytes() >= 4 * compressed.numel()


def test_distributed_optimizer_checks_its_arguments():
    model = small_model()
    params = list(model.named_parameters())
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("w", p) for _, p in params])
    with pytest.raises(ValueError, match="not in it"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=params[:1])
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=params)
    assert isinstance(opt, torch.optim.SGD)
    x, y = batch(hvd.rank(), 0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    if hvd.size() > 1:
        with pytest.raises(AssertionError, match="zero_grad"):
            opt.zero_grad()
    opt.step()
    opt.zero_grad()


def test_broadcast_parameters_and_optimizer_state_make_ranks_equal():
    rank, n = world()
    torch.manual_seed(rank)  # every rank starts different
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1))
    for _ in range(rank + 1):  # and has taken different steps
        opt.zero_grad()
        model(torch.randn(5, 3)).sum().backward()
        opt.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    mine = {k: v.clone() for k, v in model.state_dict().items()}
    roots = hvd.broadcast_object(mine if rank == 0 else None, root_rank=0)
    for k in mine:
        torch.testing.assert_close(mine[k], roots[k], rtol=0, atol=0, msg=k)
    state = opt.state_dict()
    root_state = hvd.broadcast_object(state if rank == 0 else None, root_rank=0)
    assert state["param_groups"] == root_state["param_groups"]
    assert state["param_groups"][0]["lr"] == 0.01
    for idx, s in root_state["state"].items():
        for key, value in s.items():
            torch.testing.assert_close(state["state"][idx][key], value, rtol=0, atol=0)


def test_broadcast_parameters_accepts_named_parameters():
    rank, _ = world()
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(rank)
    hvd.broadcast_parameters(model.named_parameters(), root_rank=hvd.size() - 1)
    for p in model.parameters():
        assert torch.all(p == hvd.size() - 1)


def test_mismatched_shapes_in_training_raise_on_every_rank():
    rank, _ = world()
    model = torch.nn.Linear(2 + rank, 1)  # ranks disagree on the weight's shape
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(1, 2 + rank)).sum().backward()
    if hvd.size() > 1:
        with pytest.raises(hvd.MismatchError, match="'allreduce.weight': ranks disagree on the shape"):
            opt.step()


def test_horovod_surface():
    rank, n = world()
    assert hvd.is_initialized()
    assert 0 <= hvd.local_rank() < hvd.local_size()
    assert hvd.cross_size() * hvd.local_size() == n
    assert not hvd.nccl_built() and not hvd.mpi_threads_supported()
    t = torch.full((2,), float(rank))
    with pytest.warns(DeprecationWarning, match="average"):
        h = hvd.allreduce_async_(t, average=False, name="legacy.average")
    while not hvd.poll(h):
        pass
    assert hvd.synchronize(h) is t and t.tolist() == [n * (n - 1) / 2] * 2
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(t, average=True, op=hvd.Sum)
    received = hvd.alltoall(torch.arange(n, dtype=torch.int64) + 10 * rank, splits=torch.ones(n, dtype=torch.int32))
    assert received[0].tolist() == [10 * r + rank for r in range(n)] and received[1].tolist() == [1] * n
    assert hvd.reducescatter(torch.ones(n, 2), op=hvd.Sum).tolist() == [[n, n]]
    hvd.barrier()
    np.testing.assert_array_equal(hvd.allgather_object(rank), np.arange(n))
    lazy = torch.tensor([1 + 2j, 3 - 1j]).conj()  # a view whose memory holds the unconjugated values
    assert hvd.allreduce(lazy, op=hvd.Sum).tolist() == [n * (1 - 2j), n * (3 + 1j)]
    assert hvd.broadcast(-torch.tensor([1.0, 2.0]), root_rank=0, name="neg").tolist() == [-1.0, -2.0]
