"""Every torch.distributed operation on the kolo backend, for every dtype:
each result equals the gloo backend's for the same inputs in the same job
and a reference computed here from every rank's inputs (which are a
function of the rank alone)."""
import datetime

import pytest
import torch
import torch.distributed as dist

from conftest import DTYPES, values

OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX}


def rank():
    return dist.get_rank()


def size():
    return dist.get_world_size()


def everyone(shape, dtype, seed=0):
    return [values(r, shape, dtype, seed) for r in range(size())]


def reduced(tensors, op):
    """The reference reduction, in float64 (exact for these small integers)."""
    wide = torch.stack([t.double() for t in tensors])
    out = {"sum": wide.sum(0), "product": wide.prod(0), "min": wide.min(0).values,
           "max": wide.max(0).values}[op]
    if tensors[0].dtype == torch.bool:
        return {"sum": out > 0, "max": out > 0, "product": out > 0, "min": out > 0}[op]
    return out.to(tensors[0].dtype)


def on_gloo(gloo, fn):
    """fn(gloo group), or None where gloo cannot handle the dtype (bfloat16):
    then the reference alone judges kolo."""
    try:
        return fn(gloo)
    except RuntimeError as e:
        if "Unsupported" in str(e) or "unsupported" in str(e) or "Invalid scalar type" in str(e):
            return None
        raise


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    assert torch.equal(got, want), (got, want)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce(gloo, dtype, op):
    mine = values(rank(), (5, 7), dtype)
    want = reduced(everyone((5, 7), dtype), op)

    def run(group):
        t = mine.clone()
        dist.all_reduce(t, OPS[op], group=group)
        return t

    same(run(None), want)
    reference = on_gloo(gloo, run)
    if reference is not None:
        same(run(None), reference)


def test_all_reduce_average_and_bitwise_ops():
    t = values(rank(), (6,), torch.float32)
    dist.all_reduce(t, dist.ReduceOp.AVG)
    same(t, reduced(everyone((6,), torch.float32), "sum") / size())
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        with pytest.raises(RuntimeError, match="unknown reduction op B"):
            dist.all_reduce(torch.ones(3, dtype=torch.int32), op)
    with pytest.raises(RuntimeError, match="cannot reduce float8_e4m3fn"):
        dist.all_reduce(torch.ones(3, dtype=torch.float8_e4m3fn))


def test_all_reduce_async_non_contiguous_and_empty():
    base = values(rank(), (8, 6), torch.float64)
    view = base.clone().t()  # not contiguous: reduced through a copy written back
    works = [dist.all_reduce(view, async_op=True), dist.all_reduce(torch.empty(0), async_op=True)]
    future = works[0].get_future()
    for w in works:
        w.wait()
    same(view, reduced(everyone((8, 6), torch.float64), "sum").t())
    assert future.done() and torch.equal(future.value()[0], view)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_all_reduce_coalesced(gloo, dtype):
    shapes = [(3,), (2, 4), (1,)]
    mine = [values(rank(), s, dtype, seed=i) for i, s in enumerate(shapes)]

    def run(group):
        ts = [t.clone() for t in mine]
        dist.all_reduce_coalesced(ts, group=group)
        return ts

    got, reference = run(None), on_gloo(gloo, run)
    for i in range(3):
        same(got[i], reduced(everyone(shapes[i], dtype, seed=i), "sum"))
        if reference is not None:
            same(got[i], reference[i])


@pytest.mark.parametrize("dtype", DTYPES + [torch.int16, torch.complex64], ids=str)
def test_all_gather_and_all_gather_base(gloo, dtype):
    mine = values(rank(), (3, 2), dtype) if dtype != torch.complex64 else torch.randn(3, 2, dtype=dtype)

    def run(group):
        out = [torch.empty_like(mine) for _ in range(size())]
        dist.all_gather(out, mine, group=group)
        return out

    got = run(None)
    reference = on_gloo(gloo, run)
    if dtype != torch.complex64:
        for g, want in zip(got, everyone((3, 2), dtype)):
            same(g, want)
    if reference is not None:
        for g, want in zip(got, reference):
            same(g, want)
    flat = torch.empty((size() * 3, 2), dtype=dtype)
    dist._all_gather_base(flat, mine)
    same(flat, torch.cat(got))


def test_all_gather_coalesced(gloo):
    mine = [values(rank(), (2,), torch.int64), values(rank(), (3, 1), torch.int64, seed=1)]

    def run(group):
        out = [[torch.empty_like(t) for t in mine] for _ in range(size())]
        dist.all_gather_coalesced(out, mine, group=group)
        return out

    got, reference = run(None), run(gloo)
    for r in range(size()):
        for g, want in zip(got[r], reference[r]):
            same(g, want)
        same(got[r][1], values(r, (3, 1), torch.int64, seed=1))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_and_scatter(gloo, dtype):
    root = size() - 1
    mine = values(rank(), (4,), dtype)

    def gather(group):
        out = [torch.empty_like(mine) for _ in range(size())] if rank() == root else None
        dist.gather(mine, out, dst=root, group=group)
        return out

    got = gather(None)
    if rank() == root:
        for g, want in zip(got, everyone((4,), dtype)):
            same(g, want)

    def scatter(group):
        out = torch.empty(4, dtype=dtype)
        pieces = everyone((4,), dtype, seed=5) if rank() == root else None
        dist.scatter(out, pieces, src=root, group=group)
        return out

    got = scatter(None)
    same(got, values(rank(), (4,), dtype, seed=5))
    reference = on_gloo(gloo, scatter)
    if reference is not None:
        same(got, reference)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_reduce(gloo, dtype, op):
    root = 1 % size()
    mine = values(rank(), (9,), dtype)

    def run(group):
        t = mine.clone()
        dist.reduce(t, root, OPS[op], group=group)
        return t

    got = run(None)
    if rank() == root:
        same(got, reduced(everyone((9,), dtype), op))
        reference = on_gloo(gloo, run)
        if reference is not None:
            same(got, reference)
    else:
        on_gloo(gloo, run)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int8, torch.int16, torch.int64],
                         ids=str)
def test_reduce_scatter_and_base(dtype, op):
    # gloo has no reduce-scatter in torch 1.13: the reference alone judges.
    pieces = [values(rank(), (2, 3), dtype, seed=r) for r in range(size())]
    out = torch.empty(2, 3, dtype=dtype)
    dist.reduce_scatter(out, pieces, OPS[op])
    want = reduced([values(r, (2, 3), dtype, seed=rank()) for r in range(size())], op)
    same(out, want)
    flat_out = torch.empty(2, 3, dtype=dtype)
    dist._reduce_scatter_base(flat_out, torch.cat(pieces), OPS[op])
    same(flat_out, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.int16], ids=str)
def test_all_to_all_and_single(gloo, dtype):
    # Rank r sends r + d + 1 rows to rank d.
    sends = [values(rank(), (rank() + d + 1, 2), dtype, seed=d) for d in range(size())]
    receives = [torch.empty(s + rank() + 1, 2, dtype=dtype) for s in range(size())]
    dist.all_to_all(receives, sends)
    for s in range(size()):
        same(receives[s], values(s, (s + rank() + 1, 2), dtype, seed=rank()))

    def single(group):
        out = torch.empty(sum(s + rank() + 1 for s in range(size())), 2, dtype=dtype)
        dist.all_to_all_single(out, torch.cat(sends), [s + rank() + 1 for s in range(size())],
                               [rank() + d + 1 for d in range(size())], group=group)
        return out

    got = single(None)
    same(got, torch.cat(receives))
    reference = on_gloo(gloo, single)
    if reference is not None:
        same(got, reference)
    even = torch.empty(size() * 2, dtype=dtype)
    dist.all_to_all_single(even, values(rank(), (size() * 2,), dtype))
    same(even, torch.cat([values(s, (size() * 2,), dtype)[2 * rank():2 * rank() + 2] for s in range(size())]))


@pytest.mark.parametrize("dtype", DTYPES + [torch.int16], ids=str)
def test_broadcast(gloo, dtype):
    root = size() - 1

    def run(group):
        t = values(rank(), (3, 3), dtype)
        dist.broadcast(t, root, group=group)
        return t

    got = run(None)
    same(got, values(root, (3, 3), dtype))
    reference = on_gloo(gloo, run)
    if reference is not None:
        same(got, reference)


def test_barrier_orders_a_store_write():
    store = dist.distributed_c10d._get_default_store()
    store.set("barrier/%d" % rank(), "here")
    dist.barrier()
    store.wait(["barrier/%d" % r for r in range(size())], datetime.timedelta(seconds=0.5))


def test_send_recv_between_every_pair():
    for src in range(size()):
        for dst in range(size()):
            if src == dst:
                continue
            if rank() == src:
                dist.send(values(src, (5,), torch.float64, seed=dst), dst)
            elif rank() == dst:
                got = torch.empty(5, dtype=torch.float64)
                dist.recv(got, src)
                same(got, values(src, (5,), torch.float64, seed=dst))


@pytest.mark.parametrize("numel", [1, 1 << 21])
def test_ring_shift_with_isend_irecv(numel):
    # Every rank sends before it receives: the pair is posted together.
    right, left = (rank() + 1) % size(), (rank() - 1) % size()
    got = torch.empty(numel)
    ops = [dist.P2POp(dist.isend, torch.full((numel,), float(rank())), right),
           dist.P2POp(dist.irecv, got, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.all(got == left)
    reqs = [dist.isend(torch.full((numel,), rank() + 0.5), left), dist.irecv(got, right)]
    while not all(r.is_completed() for r in reqs):
        pass
    assert torch.all(got == right + 0.5)


def test_recv_from_any_source_names_each_sender():
    """Every other rank sends rank 0 two messages; rank 0 takes them from
    any source: each sender twice, its two messages in its order."""
    if rank() == 0:
        seen = {}
        for _ in range(2 * (size() - 1)):
            got = torch.empty(3)
            sender = dist.recv(got)
            assert sender != 0
            seen.setdefault(sender, []).append(got.tolist())
        assert seen == {r: [[r, 0.0, r * r], [r, 1.0, r * r]] for r in range(1, size())}
    else:
        for k in range(2):
            dist.send(torch.tensor([rank(), float(k), rank() * rank()]), 0)
    dist.barrier()


def test_irecv_from_any_source_after_a_posted_receive():
    """An any-source receive runs after the receives posted before it, and
    its work says who sent."""
    if rank() == 0:
        named = torch.empty(1)
        first = dist.irecv(named, src=1)
        anyone = [torch.empty(1) for _ in range(size() - 1)]
        works = [dist.irecv(t) for t in anyone]
        first.wait()
        senders = sorted(w.wait() and w._source_rank() for w in works)
        assert named.item() == 100.0
        assert senders == list(range(1, size()))
        assert sorted(t.item() for t in anyone) == sorted([101.0] + [float(r) for r in range(2, size())])
    elif rank() == 1:
        dist.send(torch.tensor([100.0]), 0)
        dist.send(torch.tensor([101.0]), 0)
    else:
        dist.send(torch.tensor([float(rank())]), 0)
    dist.barrier()


def test_new_group_of_some_ranks():
    members = list(range(0, size(), 2)) if size() > 2 else [0, 1]
    group = dist.new_group(members, backend="kolo")
    if rank() in members:
        assert dist.get_backend(group) == "kolo"
        t = torch.tensor([float(rank())])
        dist.all_reduce(t, group=group)
        assert t.item() == sum(members)
        out = [torch.empty(1) for _ in members]
        dist.all_gather(out, torch.tensor([rank() * 10.0]), group=group)
        assert [o.item() for o in out] == [m * 10.0 for m in members]
    else:
        assert group == dist.GroupMember.NON_GROUP_MEMBER
    dist.barrier()


def test_bad_arguments_raise_on_the_calling_rank():
    with pytest.raises(RuntimeError, match="out of range"):
        dist.broadcast(torch.ones(1), size() + 3)
    with pytest.raises(RuntimeError, match="needs %d tensors" % size()):
        dist.all_gather([torch.empty(1)], torch.ones(1))
    with pytest.raises(RuntimeError, match="split sizes"):
        dist.all_to_all_single(torch.empty(size()), torch.ones(size()), [1] * (size() + 1), [1] * size())
    dist.barrier()  # the group is healthy after them


@pytest.mark.parametrize("dense_dims", [(), (3,)], ids=["scalar values", "row values"])
def test_sparse_all_reduce(gloo, dense_dims):
    shape = (7,) + dense_dims

    def sparse(r):
        g = torch.Generator().manual_seed(r)  # rank r has 2r entries, some repeated; rank 0 none
        indices = torch.randint(0, 7, (1, 2 * r), generator=g)
        return torch.sparse_coo_tensor(indices, values(r, (2 * r,) + dense_dims, torch.float32), shape)

    got, reference = sparse(rank()), sparse(rank())
    dist.all_reduce(got)
    dist.all_reduce(reference, group=gloo)
    assert got.is_sparse and got.is_coalesced()
    same(got.to_dense(), reference.to_dense())
    same(got.to_dense(), sum(sparse(r).to_dense() for r in range(size())))
    with pytest.raises(RuntimeError, match="sparse tensors reduce with ReduceOp.SUM only"):
        dist.all_reduce(sparse(rank()), dist.ReduceOp.MAX)


def test_work_wait_with_a_timeout_bounds_the_wait_only():
    """Work.wait(timeout) raises once the timeout passes; the operation goes
    on, and completes when its peer comes."""
    store = dist.distributed_c10d._get_default_store()
    if rank() == 0:
        got = torch.empty(2)
        work = dist.irecv(got, src=1)
        with pytest.raises(RuntimeError, match="Timed out after 0.2 s"):
            work.wait(datetime.timedelta(seconds=0.2))
        store.set("waited", "yes")
        assert work.wait(datetime.timedelta(seconds=30))
        assert got.tolist() == [1.0, 2.0]
    elif rank() == 1:
        store.wait(["waited"], datetime.timedelta(seconds=30))
        dist.send(torch.tensor([1.0, 2.0]), 0)
    dist.barrier()


def test_monitored_barrier_passes_then_names_the_rank_that_did_not_come():
    """group.monitored_barrier (gloo's): passes when everyone comes; when
    rank 1 does not, rank 0 names it and the others hear that rank 0 did
    not release them. The reports and releases left unanswered are then
    answered by hand (each once its barrier has failed, told through the
    store), so the group ends clean."""
    group = dist.new_group(backend="kolo")
    group.monitored_barrier(datetime.timedelta(seconds=30))
    group.monitored_barrier(datetime.timedelta(seconds=30), wait_all_ranks=True)
    store = dist.distributed_c10d._get_default_store()
    if rank() == 0:
        with pytest.raises(RuntimeError, match="Rank 1 failed to pass monitoredBarrier in 500 ms"):
            group.monitored_barrier(datetime.timedelta(seconds=0.5))
        store.set("monitored/failed/0", "yes")
        store.wait(["monitored/failed/%d" % r for r in range(2, size())], datetime.timedelta(seconds=30))
        for r in range(2, size()):
            dist.send(torch.zeros(1), r, group=group)  # the releases it held back
    elif rank() == 1:
        store.wait(["monitored/failed/0"], datetime.timedelta(seconds=30))
        dist.send(torch.zeros(1), 0, group=group)  # the report it did not make
    else:
        with pytest.raises(RuntimeError, match="Rank %d successfully reached monitoredBarrier, but received errors "
                                               "while waiting for send/recv from rank 0" % rank()):
            group.monitored_barrier(datetime.timedelta(seconds=0.5))
        store.set("monitored/failed/%d" % rank(), "yes")
    if rank() == 0:
        with pytest.raises(RuntimeError, match="Rank 0 timed out in monitoredBarrier"):
            group.monitored_barrier(datetime.timedelta(seconds=0))  # no time at all
    dist.barrier()
    dist.destroy_process_group(group)


def test_a_finished_work_keeps_no_tensor_alive():
    """Once the caller lets go of a finished work and its tensors, nothing of
    the backend's holds them (it used to keep its last 1024 works, and with
    them FSDP2's all-gathered parameters: memory grew by the model's size
    every step until the machine ran out)."""
    import gc
    import time
    import weakref
    for async_op in (True, False):
        out = torch.empty(size() * 4)
        work = dist.all_gather_into_tensor(out, torch.ones(4), async_op=async_op)
        if work is not None:
            work.wait()
        gone = weakref.ref(out)
        del out, work
        # The completion that woke wait() may still be finishing on kolo's
        # thread, its references in hand, for a moment.
        deadline = time.monotonic() + 10
        while gone() is not None and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.01)
        assert gone() is None


def test_time_estimator_estimates_without_running():
    """torch's _time_estimator (torch 2.13) on kolo's backend: what is
    called inside it does not run, and its estimated time (microseconds,
    kolo's cost model) grows with the bytes and is the same on every rank.
    A Python group registers no C++ backend, so torch cannot find its
    default device: the caller names it."""
    from torch.distributed.distributed_c10d import _time_estimator
    small, big = torch.ones(16), torch.ones(1 << 22)
    gathered = torch.zeros(size() * 16)
    cpu = torch.device("cpu")
    with _time_estimator(device=cpu) as few:
        dist.all_reduce(small)
    with _time_estimator(device=cpu) as many:
        dist.all_reduce(big)
        dist.all_gather_into_tensor(gathered, small)
        dist.broadcast(big, src=0)
    assert torch.equal(small, torch.ones(16)) and torch.equal(big, torch.ones(1 << 22))  # nothing ran
    assert not gathered.any()
    assert 0 < few.estimated_time < many.estimated_time
    everyone_s = [None] * size()
    dist.all_gather_object(everyone_s, (few.estimated_time, many.estimated_time))
    assert all(e == everyone_s[0] for e in everyone_s)
    # Outside the estimator, calls run again.
    dist.all_reduce(small)
    assert torch.equal(small, torch.full((16,), float(size())))
