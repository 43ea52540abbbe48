"""Every collective, every dtype, in place and out of place, synchronous and
async, for both front ends (kolo on NumPy, kolo.torch on CPU tensors),
checked against results computed independently in NumPy."""
import numpy as np
import pytest

import kolo
from conftest import FRONTS, TorchFront, inputs

OPS = ["Sum", "Average", "Min", "Max", "Product"]
MODES = ["sync", "sync_inplace", "async", "async_inplace"]


def world():
    return kolo.rank(), kolo.size()


def reference(dtype, op, shape, seed=0, prescale=1.0, postscale=1.0):
    """op over every rank's inputs, computed here (exact for these inputs)."""
    _, n = world()
    per_rank = [inputs(r, shape, dtype, seed) for r in range(n)]
    if dtype == "bool":
        stacked = np.stack(per_rank)
        return stacked.any(0) if op in ("Sum", "Max") else stacked.all(0)
    stacked = np.stack([p.astype(np.complex128 if dtype.startswith("complex") else np.float64) * prescale
                        for p in per_rank])
    result = {"Sum": lambda: stacked.sum(0), "Min": lambda: stacked.min(0), "Max": lambda: stacked.max(0),
              "Product": lambda: stacked.prod(0), "Average": lambda: stacked.sum(0) / n}[op]()
    if op == "Average" and (dtype.startswith("int") or dtype.startswith("uint")):
        result = np.trunc(result)  # integer division, as C truncates
    return result * postscale


def supported(dtype, op):
    if dtype == "bool":
        return op != "Average"
    if dtype.startswith("complex"):
        return op in ("Sum", "Average")
    return True


def tolerance(dtype):
    return {"float16": 1e-3, "bfloat16": 1e-2}.get(dtype, 1e-6)


def run(front, mode, start, x, *args, **kwargs):
    """One call in one of the four modes; returns what the caller receives."""
    api = front.api
    inplace = mode.endswith("inplace")
    fn = getattr(api, start + ("_async" if mode.startswith("async") else "") + ("_" if inplace else ""))
    out = fn(x, *args, **kwargs)
    if mode.startswith("async"):
        out = api.synchronize(out)
    if inplace and not isinstance(x, list):
        assert out is x, "an in-place call returns its argument"
    return out


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", OPS)
def test_allreduce_every_dtype(front, mode, op):
    rank, _ = world()
    shape = (3, 5)
    for dtype in front.dtypes:
        name = "ar.%s.%s.%s" % (mode, op, dtype)
        x = front.make(inputs(rank, shape, dtype), dtype)
        if not supported(dtype, op):
            with pytest.raises(TypeError):
                run(front, mode, "allreduce", x, op=getattr(front.api, op), name=name)
            continue
        before = front.numpy(x).copy()
        out = run(front, mode, "allreduce", x, op=getattr(front.api, op), name=name)
        np.testing.assert_allclose(front.numpy(out), reference(dtype, op, shape), rtol=tolerance(dtype),
                                   err_msg=name)
        if not mode.endswith("inplace"):
            np.testing.assert_array_equal(front.numpy(x), before, err_msg=name + ": input changed")


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
@pytest.mark.parametrize("inplace", [False, True])
def test_allreduce_non_contiguous_and_scaled(front, inplace):
    rank, _ = world()
    for dtype in ("float32", "int32", "int16"):
        x = front.transposed(front.make(inputs(rank, (4, 6), dtype, seed=1), dtype))
        fn = front.api.allreduce_ if inplace else front.api.allreduce
        out = fn(x, op=front.api.Sum, prescale_factor=2.0, postscale_factor=3.0, name="scaled." + dtype)
        expected = reference(dtype, "Sum", (4, 6), seed=1, prescale=2.0, postscale=3.0).T
        np.testing.assert_allclose(front.numpy(out), expected, rtol=1e-6)
        assert tuple(out.shape) == (6, 4)


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce(front, mode):
    rank, _ = world()
    shapes = [(2,), (3, 3), (), (0,), (40000,)]
    for dtype in front.dtypes:
        op = "Max" if dtype == "bool" else "Sum"
        xs = [front.make(inputs(rank, s, dtype, seed=i), dtype) for i, s in enumerate(shapes)]
        outs = run(front, mode, "grouped_allreduce", xs, op=getattr(front.api, op), name="group." + mode + dtype)
        assert len(outs) == len(xs)
        for i, (s, out) in enumerate(zip(shapes, outs)):
            if mode.endswith("inplace"):
                assert out is xs[i]
            np.testing.assert_allclose(front.numpy(out), reference(dtype, op, s, seed=i), rtol=tolerance(dtype))


def test_grouped_allreduce_rejects_mixed_dtypes():
    with pytest.raises(TypeError, match="one dtype"):
        kolo.grouped_allreduce([np.zeros(2, np.float32), np.zeros(2, np.float64)])


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
@pytest.mark.parametrize("use_async", [False, True])
def test_allgather_rows_differ_per_rank(front, use_async):
    rank, n = world()
    for dtype in front.dtypes:
        x = front.make(inputs(rank, (rank + 1, 2, 3), dtype), dtype)
        if use_async:
            out = front.api.synchronize(front.api.allgather_async(x, name="ag." + dtype))
        else:
            out = front.api.allgather(x, name="ag." + dtype)
        expected = np.concatenate([inputs(r, (r + 1, 2, 3), dtype) for r in range(n)])
        assert tuple(out.shape) == expected.shape
        np.testing.assert_array_equal(front.numpy(out), front.numpy(front.make(expected, dtype)), err_msg=dtype)


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
def test_broadcast_from_every_root(front, mode):
    rank, n = world()
    for root in range(n):
        for dtype in front.dtypes:
            x = front.make(inputs(rank, (2, 7), dtype, seed=root), dtype)
            before = front.numpy(x).copy()
            out = run(front, mode, "broadcast", x, root, name="bc.%d.%s" % (root, dtype))
            expected = front.numpy(front.make(inputs(root, (2, 7), dtype, seed=root), dtype))
            np.testing.assert_array_equal(front.numpy(out), expected, err_msg=dtype)
            if not mode.endswith("inplace"):
                np.testing.assert_array_equal(front.numpy(x), before)


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
def test_broadcast_scalar_and_non_contiguous(front):
    rank, _ = world()
    scalar = front.make(np.array(rank + 5), "float64")
    assert front.numpy(front.api.broadcast(scalar, 0, name="scalar")) == 5
    x = front.transposed(front.make(inputs(rank, (3, 4), "int32"), "int32"))
    front.api.broadcast_(x, 0, name="bc.t")
    np.testing.assert_array_equal(front.numpy(x), inputs(0, (3, 4), "int32").T)


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
@pytest.mark.parametrize("with_splits", [False, True])
def test_alltoall(front, with_splits):
    rank, n = world()

    def splits_of(r):
        # Rank r sends q + r rows to rank q (unequal, some zero).
        return [q + r for q in range(n)]

    for dtype in front.dtypes:
        if with_splits:
            rows = sum(splits_of(rank))
            x = front.make(inputs(rank, (rows, 2), dtype), dtype)
            out, received = front.api.alltoall(x, splits=splits_of(rank), name="a2a." + dtype)
            assert list(np.asarray(received)) == [splits_of(r)[rank] for r in range(n)]
            pieces = []
            for r in range(n):
                start = sum(splits_of(r)[:rank])
                pieces.append(inputs(r, (sum(splits_of(r)), 2), dtype)[start:start + splits_of(r)[rank]])
        else:
            x = front.make(inputs(rank, (2 * n, 3), dtype), dtype)
            out = front.api.synchronize(front.api.alltoall_async(x, name="a2a.eq." + dtype))
            if front is TorchFront:  # horovod.torch's handle gives (rows, received splits)
                out, received = out
                assert received.tolist() == [2] * n
            pieces = [inputs(r, (2 * n, 3), dtype)[2 * rank:2 * rank + 2] for r in range(n)]
        expected = np.concatenate(pieces)
        np.testing.assert_array_equal(front.numpy(out), front.numpy(front.make(expected, dtype)), err_msg=dtype)


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
@pytest.mark.parametrize("op", ["Sum", "Average", "Max"])
@pytest.mark.parametrize("use_async", [False, True])
def test_reducescatter_uneven_rows(front, op, use_async):
    rank, n = world()
    rows = 2 * n + 1  # the first rank gets one more row
    for dtype in front.dtypes:
        if not supported(dtype, op):
            continue
        x = front.make(inputs(rank, (rows, 3), dtype), dtype)
        name = "rs.%s.%s" % (op, dtype)
        if use_async:
            out = front.api.synchronize(front.api.reducescatter_async(x, op=getattr(front.api, op), name=name))
        else:
            out = front.api.reducescatter(x, op=getattr(front.api, op), name=name)
        counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
        start = sum(counts[:rank])
        expected = reference(dtype, op, (rows, 3))[start:start + counts[rank]]
        np.testing.assert_allclose(front.numpy(out), expected, rtol=tolerance(dtype), err_msg=name)


def test_poll_and_barrier():
    rank, n = world()
    h = kolo.allreduce_async(np.full(3, float(rank)), op=kolo.Sum, name="polled")
    while not kolo.poll(h):
        pass
    np.testing.assert_array_equal(kolo.synchronize(h), np.full(3, n * (n - 1) / 2))
    for i in range(3):
        kolo.barrier()


def test_named_operations_in_different_orders():
    rank, n = world()
    names = ["order.%d" % i for i in range(6)]
    if rank % 2:
        names.reverse()
    handles = {name: kolo.allreduce_async(np.full(4, float(int(name[-1]))), op=kolo.Sum, name=name)
               for name in names}
    for name, h in handles.items():
        np.testing.assert_array_equal(h.synchronize(), np.full(4, n * float(int(name[-1]))))


def test_objects():
    rank, n = world()
    obj = {"rank": rank, "payload": list(range(rank * 100))}
    assert kolo.allgather_object(obj) == [{"rank": r, "payload": list(range(r * 100))} for r in range(n)]
    assert kolo.broadcast_object(obj if rank == n - 1 else None, root_rank=n - 1) == \
        {"rank": n - 1, "payload": list(range((n - 1) * 100))}


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f.name)
def test_mismatched_shapes_raise_on_every_rank(front):
    rank, _ = world()
    x = front.make(np.ones(rank + 2), "float32")
    h = front.api.allreduce_async(x, name="mismatched")
    for _ in range(2):  # the same error every time it is asked
        with pytest.raises(kolo.MismatchError, match="'mismatched': ranks disagree on the shape"):
            front.api.synchronize(h)
    y = front.make(np.ones(3), "float32" if rank == 0 else "float64")
    with pytest.raises(kolo.MismatchError, match="dtype"):
        front.api.allreduce(y, name="mismatched.dtype")
    # The engine goes on after a mismatch.
    out = front.api.allreduce(front.make(np.ones(3), "float32"), op=front.api.Sum, name="after.mismatch")
    np.testing.assert_array_equal(front.numpy(out), np.full(3, kolo.size()))


def test_bad_arguments_raise_before_submitting():
    with pytest.raises(ValueError, match="root_rank"):
        kolo.broadcast(np.zeros(2), root_rank=kolo.size())
    with pytest.raises(ValueError, match="splits"):
        kolo.alltoall(np.zeros(4), splits=[1] * (kolo.size() + 1))
    with pytest.raises(ValueError, match="scalar"):
        kolo.allgather(np.array(1.0))
    with pytest.raises(TypeError, match="NumPy arrays"):
        kolo.allreduce([1, 2, 3])
    with pytest.raises(ValueError, match="unknown reduction op"):
        kolo.allreduce(np.zeros(2), op=17)
    with pytest.raises(TypeError, match="int32 tensors with .*, not Adasum"):
        kolo.allreduce(np.zeros(2, np.int32), op=kolo.Adasum)

def test_a_name_in_flight_cannot_be_submitted_again():
    # Each rank checks while its operation cannot complete: rank 0 submits
    # "busy.a" (the others' first) only after the barrier, and the others
    # submit "busy.b" (rank 0's first) only after it too.
    rank, _ = world()
    first, second = ("busy.b", "busy.a") if rank == 0 else ("busy.a", "busy.b")
    h = kolo.allreduce_async(np.zeros(2), name=first)
    with pytest.raises(kolo.InvalidUsageError, match=first):
        kolo.allreduce_async(np.zeros(2), name=first)
    kolo.barrier()
    h2 = kolo.allreduce_async(np.zeros(2), name=second)
    h.synchronize()
    h2.synchronize()


def test_join_contributes_nothing():
    rank, n = world()
    # Rank r runs r + 1 allreduces, then joins: allreduce i sums only the ranks still running.
    for i in range(rank + 1):
        out = kolo.allreduce(np.ones(5, np.float32), op=kolo.Sum, name="joined.%d" % i)
        np.testing.assert_array_equal(out, np.full(5, n - i, np.float32))
    assert kolo.join() == n - 1
