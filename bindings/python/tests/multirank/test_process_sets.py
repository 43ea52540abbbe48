"""Process sets and the rest of horovod.torch's API: grouped allgather and
reduce-scatter, sparse allreduce, Adasum, SyncBatchNorm, re-joining.
Expected values are computed on each rank from every rank's inputs
(conftest.inputs), independently of kolo."""
import numpy as np
import pytest
import torch

import kolo.torch as hvd
from conftest import inputs

DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
          torch.float64]


def world():
    return hvd.rank(), hvd.size()


def rank_values(r, shape, dtype, seed=0):
    return torch.tensor(inputs(r, shape, "float64", seed)).to(dtype)


def split_sets():
    """Even and odd world ranks, each a process set (odd is empty on 1 rank)."""
    _, n = world()
    evens = hvd.add_process_set([r for r in range(n) if r % 2 == 0])
    odds = hvd.add_process_set([r for r in range(n) if r % 2 == 1]) if n > 1 else None
    return evens, odds


def remove(*sets):
    for ps in sets:
        if ps is not None:
            assert hvd.remove_process_set(ps)


def test_collectives_run_within_disjoint_sets_at_once():
    rank, n = world()
    evens, odds = split_sets()
    mine = evens if rank % 2 == 0 else odds
    assert mine.included() and mine.size() == len(mine.ranks) and mine.rank() == mine.ranks.index(rank)
    for dtype in DTYPES:
        # The same names in both sets at once: each set negotiates its own.
        x = rank_values(rank, (3, 4), dtype)
        summed = hvd.allreduce(x, op=hvd.Sum, name="same.name", process_set=mine)
        expected = sum(rank_values(r, (3, 4), torch.float64) for r in mine.ranks)
        assert torch.equal(summed.double(), expected.to(dtype).double()), dtype
        gathered = hvd.allgather(x[: rank % 3 + 1], name="gather", process_set=mine)
        assert torch.equal(gathered, torch.cat([rank_values(r, (3, 4), dtype)[: r % 3 + 1] for r in mine.ranks]))
        root = mine.ranks[-1]
        assert torch.equal(hvd.broadcast(x, root_rank=root, process_set=mine), rank_values(root, (3, 4), dtype))
    part = hvd.reducescatter(torch.ones(2 * mine.size(), 3), op=hvd.Sum, process_set=mine)
    assert part.tolist() == [[float(mine.size())] * 3] * 2
    received = hvd.alltoall(torch.full((mine.size(),), rank), process_set=mine)
    assert received.tolist() == mine.ranks
    assert hvd.allgather_object(rank, process_set=mine) == mine.ranks
    assert hvd.broadcast_object({"from": rank}, root_rank=mine.ranks[0], process_set=mine) == {"from": mine.ranks[0]}
    hvd.barrier(process_set=mine)
    remove(evens, odds)


@pytest.mark.skipif("hvd.size() < 3")
def test_overlapping_sets_run_in_one_order_on_their_members():
    rank, n = world()
    first, second = hvd.add_process_set([0, 1]), hvd.add_process_set([1, 2])
    assert 0 < first.process_set_id < second.process_set_id
    for ps in (first, second):  # rank 1 is in both: it runs them in this order, as the others do
        if ps.included():
            assert hvd.allreduce(torch.tensor([float(rank)]), op=hvd.Sum, process_set=ps).item() == sum(ps.ranks)
    remove(first, second)


def test_errors_name_the_set():
    rank, n = world()
    evens, odds = split_sets()
    if odds is not None:
        other = odds if rank % 2 == 0 else evens
        with pytest.raises(ValueError, match="rank %d is not in process set %d" % (rank, other.process_set_id)):
            hvd.allreduce(torch.ones(2), process_set=other)
        mine = evens if rank % 2 == 0 else odds
        with pytest.raises(ValueError, match="root_rank %d is not a rank of process set" % other.ranks[0]):
            hvd.broadcast(torch.ones(2), root_rank=other.ranks[0], process_set=mine)
    with pytest.raises(ValueError, match="duplicate process set"):
        hvd.add_process_set(list(evens.ranks))
    remove(evens, odds)
    assert not hvd.remove_process_set(evens), "removed twice"
    assert not hvd.remove_process_set(hvd.global_process_set)
    with pytest.raises(ValueError, match="not initialized"):
        hvd.allreduce(torch.ones(2), process_set=evens)


@pytest.mark.skipif("hvd.size() < 2")
def test_removing_a_set_fails_its_operations_in_flight():
    rank, n = world()
    for engine_up in (False, True):
        pair = hvd.add_process_set([0, 1])
        handle = None
        if engine_up and pair.included():
            assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=pair).item() == 2
        if rank == 0:  # rank 1 never submits it (nor, the first time, anything else on the set)
            handle = hvd.allreduce_async(torch.ones(4), name="never.matched", process_set=pair)
        hvd.barrier()  # the world's engine is not held up by the set's
        hvd.remove_process_set(pair)
        if handle is not None:
            with pytest.raises(hvd.KoloError, match="destroyed|shut|stopped"):
                hvd.synchronize(handle)
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n  # the world goes on


def test_distributed_optimizer_on_a_process_set_averages_within_it():
    rank, n = world()
    evens, odds = split_sets()
    mine = evens if rank % 2 == 0 else odds
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1, bias=False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), process_set=mine)
    before = model.weight.detach().clone()
    model(torch.full((1, 3), float(rank + 1))).sum().backward()  # gradient: rank + 1 everywhere
    opt.step()
    mean = sum(r + 1 for r in mine.ranks) / len(mine.ranks)
    assert torch.allclose(model.weight, before - mean)
    remove(evens, odds)


def test_grouped_allgather_and_reducescatter_with_gradients():
    rank, n = world()
    xs = [rank_values(rank, (rank + 1, 2), torch.float64, seed=1).requires_grad_(),
          rank_values(rank, (2,), torch.float64, seed=2).requires_grad_()]
    gathered = hvd.grouped_allgather(xs)
    assert torch.equal(gathered[0], torch.cat([rank_values(r, (r + 1, 2), torch.float64, 1) for r in range(n)]))
    assert torch.equal(gathered[1], torch.cat([rank_values(r, (2,), torch.float64, 2) for r in range(n)]))
    (gathered[0].sum() * 3 + gathered[1].sum()).backward()
    assert torch.equal(xs[0].grad, torch.full_like(xs[0], 3.0)) and torch.equal(xs[1].grad, torch.ones(2))

    ys = [torch.full((n + 1, 2), float(rank), requires_grad=True), torch.full((2 * n,), 1.0, requires_grad=True)]
    parts = hvd.grouped_reducescatter(ys, op=hvd.Sum, prescale_factor=2.0)
    rows = (n + 1) // n + (1 if rank < (n + 1) % n else 0)
    assert parts[0].tolist() == [[2.0 * n * (n - 1) / 2] * 2] * rows
    assert parts[1].tolist() == [2.0 * n] * 2
    (parts[0].sum() + parts[1].sum()).backward()
    assert torch.equal(ys[0].grad, torch.full_like(ys[0], 2.0 * n))  # Horovod's: Sum's gradient is size x


@pytest.mark.parametrize("dtype", DTYPES + [torch.int16, torch.bool, torch.complex64])
def test_grouped_calls_take_every_dtype(dtype):
    rank, n = world()
    evens, odds = split_sets()
    mine = evens if rank % 2 == 0 else odds
    for ps in (hvd.global_process_set, mine):
        members = ps.ranks
        xs = [rank_values(rank, (rank + 1, 3), dtype, seed=3), rank_values(rank, (2,), dtype, seed=4)]
        gathered = hvd.grouped_allgather(xs, process_set=ps)
        assert torch.equal(gathered[0], torch.cat([rank_values(r, (r + 1, 3), dtype, 3) for r in members]))
        assert torch.equal(gathered[1], torch.cat([rank_values(r, (2,), dtype, 4) for r in members]))
        if dtype == torch.bool:
            continue  # reduce-scatter sums; bool has no sum (allreduce takes it with Max/Min)
        ys = [rank_values(rank, (2 * len(members), 2), dtype, seed=5), rank_values(rank, (len(members),), dtype, 6)]
        parts = hvd.grouped_reducescatter(ys, op=hvd.Sum, process_set=ps)
        me = members.index(rank)
        for y_shape, seed, part in (((2 * len(members), 2), 5, parts[0]), ((len(members),), 6, parts[1])):
            total = sum(rank_values(r, y_shape, torch.float64, seed) for r in members).to(dtype)
            rows = y_shape[0] // len(members)
            assert torch.equal(part, total[me * rows:(me + 1) * rows]), (dtype, y_shape)
    remove(evens, odds)


def test_reducescatter_refuses_adasum_as_horovod():
    with pytest.raises(RuntimeError, match="Adasum"):  # Horovod's tests expect a RuntimeError
        hvd.reducescatter(torch.ones(4), op=hvd.Adasum)


def test_sparse_allreduce_matches_dense_and_sparse_gradients_train():
    rank, n = world()
    dense = torch.zeros(6, 3)
    dense[rank % 6] = rank + 1.0
    dense[5] = 1.0
    summed = hvd.sparse_allreduce_async(dense.to_sparse(), name="sparse", op=hvd.Average)()
    assert torch.allclose(summed.to_dense(), hvd.allreduce(dense, op=hvd.Average))
    for as_dense in (False, True):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(6, 2, sparse=True)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                       named_parameters=emb.named_parameters(), sparse_as_dense=as_dense)
        before = emb.weight.detach().clone()
        emb(torch.tensor([rank % 6])).sum().backward()
        opt.step()
        expected = before.clone()
        for r in range(n):
            expected[r % 6] -= 1.0 / n
        assert torch.allclose(emb.weight, expected), as_dense


def test_adasum_adds_orthogonal_and_averages_parallel_gradients():
    rank, n = world()
    if n & (n - 1):
        with pytest.raises(NotImplementedError, match="power of 2"):
            hvd.allreduce(torch.ones(3), op=hvd.Adasum)
        return
    rng = np.random.default_rng(2)
    for dtype, eps in ((torch.float64, np.finfo(np.float64).eps), (torch.float32, np.finfo(np.float32).eps),
                       (torch.float16, np.finfo(np.float16).eps)):
        q, _ = np.linalg.qr(rng.normal(size=(20 * n - 17, n)))  # orthonormal columns, one per rank
        q = q.astype(dtype_np(dtype)).astype(np.float64)
        out = hvd.allreduce(torch.tensor(q[:, rank]).to(dtype), op=hvd.Adasum)
        assert close(q.sum(axis=1), out, eps)
        a, r = rng.normal(size=(2 * n + 1, 1)), rng.normal(size=(n, 1))
        p = (a @ r.T).astype(dtype_np(dtype)).astype(np.float64)  # every rank's vector on one line
        out = hvd.allreduce(torch.tensor(p[:, rank]).to(dtype), op=hvd.Adasum)
        assert close(p.sum(axis=1) / n, out, eps)
    for dtype in (np.float32, np.float16):
        eps = np.finfo(dtype).eps
        # Horovod's stability tests: parallel vectors of tiny norm, and of
        # norms spread from the dtype's tiniest to the root of its largest
        # (the dot products must be taken in float64).
        tiny = (rng.normal(0, np.finfo(dtype).tiny, (1024, 1)) @ rng.normal(size=(1, n))).astype(dtype)
        t = torch.tensor(tiny[:, rank])
        hvd.allreduce_(t, op=hvd.Adasum)
        assert close(tiny.astype(np.float64).sum(axis=1) / n, t, eps), dtype
        lo, hi = np.float64(np.finfo(dtype).tiny), np.sqrt(np.float64(np.finfo(dtype).max))
        scales = np.array([hi ** ((i + 1) / n) * lo ** ((n - i - 1) / n) for i in range(n)]).reshape(n, 1)
        rng.shuffle(scales)
        spread = (rng.normal(size=(1024, 1)) @ scales.T).astype(dtype).astype(np.float64)
        t = torch.tensor(spread[:, rank].astype(dtype))
        hvd.allreduce_(t, op=hvd.Adasum)
        assert close(spread.sum(axis=1) / n, t, eps), dtype


def dtype_np(dtype):
    return {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16}[dtype]


def close(expected, got, eps):
    # Horovod's test_adasum_pytorch criterion.
    got = got.double().numpy()
    return np.linalg.norm(expected - got) / np.linalg.norm(expected) / 100.0 < eps


def test_adasum_optimizer_trains():
    rank, n = world()
    if n & (n - 1):
        return
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(2, 4) * (rank + 1)).pow(2).sum().backward()
        opt.step()
    weights = hvd.allgather(model.weight.detach())
    assert all(torch.equal(weights[0], w) for w in weights), "ranks' models differ"


def test_sync_batch_norm_equals_batch_norm_over_every_ranks_batch():
    rank, n = world()
    batch = torch.stack([torch.tensor([[r, r + 1], [r * 2, r * 2 + 1], [r * 3, r * 3 + 1], [r * 4, r * 4 + 1]])
                         for r in range(n)]).float()
    sync_bn, bn = hvd.SyncBatchNorm(num_features=4), torch.nn.BatchNorm1d(num_features=4)
    mine, whole = batch.clone().requires_grad_(), batch.clone().requires_grad_()
    out, reference = sync_bn(mine[rank].unsqueeze(0)), bn(whole)
    assert torch.allclose(out, reference[rank].unsqueeze(0), atol=1e-6)
    assert torch.allclose(sync_bn.running_mean, bn.running_mean, atol=1e-6)
    assert torch.allclose(sync_bn.running_var, bn.running_var, atol=1e-6)
    out.sum().backward()
    reference.mean(dim=0).sum().backward()
    assert torch.allclose(hvd.allreduce(sync_bn.weight.grad), bn.weight.grad, atol=1e-6)
    assert torch.allclose(hvd.allreduce(sync_bn.bias.grad), bn.bias.grad, atol=1e-6)
    assert torch.allclose(hvd.allreduce(mine.grad), whole.grad, atol=1e-6)


def test_horovod_semantics():
    rank, n = world()
    # A duplicate name in flight is a ValueError, as Horovod's: rank 0's
    # "dup" cannot complete before the others submit it, after the barrier.
    h = hvd.allreduce_async(torch.ones(2), name="dup") if rank == 0 else None
    if rank == 0 and n > 1:
        with pytest.raises(ValueError, match="already in flight"):
            hvd.allreduce_async(torch.ones(2), name="dup")
    hvd.barrier()
    if rank != 0:
        h = hvd.allreduce_async(torch.ones(2), name="dup")
    assert hvd.synchronize(h).tolist() == [1.0, 1.0]  # Average
    # Scaled integers are truncated, as Horovod scales them (in float64).
    x = torch.tensor([7, -7, 5], dtype=torch.int32)
    assert hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5).tolist() == [3 * n, -3 * n, 2 * n]
    # float32 scales in float32 (Horovod's CPU rule).
    y = torch.tensor([0.1, 1 / 3, 12345.678], dtype=torch.float32)
    assert torch.equal(hvd.allreduce(y, op=hvd.Sum, prescale_factor=0.7, name="f32"),
                       (y * torch.tensor(0.7, dtype=torch.float32)) * n)
    # join() may be called again, epoch after epoch.
    for epoch in range(2):
        if rank == 0:
            hvd.allreduce(torch.ones(1), name="epoch.%d" % epoch)
        assert hvd.join() in range(n)
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n
    # An optimizer without state gets one (a zero step) before the broadcast.
    model = torch.nn.Linear(2, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert model.weight.grad is not None and opt.state_dict()["state"]


def test_reinit_starts_a_new_run_of_the_job():
    rank, n = world()
    for _ in range(2):
        hvd.shutdown()
        hvd.init(process_sets=[hvd.ProcessSet([0])])
        assert (hvd.rank(), hvd.size()) == (rank, n)
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n
