"""kolo.tensorflow's collectives against NumPy references computed from
every rank's inputs, eagerly and inside tf.function, with Horovod's
gradients and errors."""
import numpy as np
import pytest
import tensorflow as tf

import kolo.tensorflow as hvd
from conftest import both_modes, inputs, tensor

REDUCED = ["uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
MOVED = REDUCED + ["uint16", "int16", "bool", "complex64"]


def world():
    return hvd.rank(), hvd.size()


def reference(op, arrays):
    stacked = np.stack(arrays).astype(np.float64)
    if op == hvd.Sum:
        return stacked.sum(0)
    if op == hvd.Average:
        return stacked.sum(0) / len(arrays)
    if op == hvd.Min:
        return stacked.min(0)
    if op == hvd.Max:
        return stacked.max(0)
    return stacked.prod(0)


def close(got, want, dtype_name):
    got = np.asarray(got, dtype=np.float64)
    if dtype_name in ("int8", "uint8", "int32", "int64") and want.dtype.kind == "f":
        want = np.trunc(want)  # integer averages truncate, as Horovod's
    np.testing.assert_allclose(got, want, rtol=1e-2 if dtype_name in ("float16", "bfloat16") else 1e-6)


# ---- allreduce ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product])
def test_allreduce(dtype, op):
    rank, n = world()
    if op == hvd.Product and dtype in ("uint8", "int8"):
        pytest.skip("products of %d small integers overflow %s" % (n, dtype))
    shape = (3, 5)
    eager, graph = both_modes(lambda: hvd.allreduce(tensor(rank, shape, dtype), op=op))
    want = reference(op, [inputs(r, shape, dtype) for r in range(n)])
    close(eager, want, dtype)
    close(graph, want, dtype)


def test_allreduce_scale_factors_and_name():
    rank, n = world()
    x = tensor(rank, (4,), "float32")
    y = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0, name="scaled")
    np.testing.assert_allclose(y.numpy(), 1.5 * sum(inputs(r, (4,), "float32") for r in range(n)), rtol=1e-6)


def test_grouped_allreduce_mixed_dtypes_one_call():
    rank, n = world()
    shapes = [((2,), "float32"), ((3, 2), "float64"), ((1,), "int32"), ((4,), "float32")]

    def run():
        return hvd.grouped_allreduce([tensor(rank, s, d) for s, d in shapes], op=hvd.Sum)

    for result in both_modes(run):
        for got, (s, d) in zip(result, shapes):
            close(got, reference(hvd.Sum, [inputs(r, s, d) for r in range(n)]), d)


def test_indexed_slices_are_allgathered():
    rank, n = world()
    slices = tf.IndexedSlices(tf.constant([[1.0 * rank, 2.0]]), tf.constant([rank]), dense_shape=tf.constant([n, 2]))
    out = hvd.allreduce(slices, op=hvd.Average)
    assert isinstance(out, tf.IndexedSlices)
    np.testing.assert_array_equal(out.indices.numpy(), np.arange(n))
    np.testing.assert_allclose(out.values.numpy(), np.array([[r, 2.0] for r in range(n)]) / n)
    dense = tf.convert_to_tensor(hvd.allreduce(slices, op=hvd.Sum))
    np.testing.assert_allclose(dense.numpy(), np.array([[r, 2.0] for r in range(n)]))
    with pytest.raises(NotImplementedError):
        hvd.allreduce(slices, op=hvd.Max)


def test_adasum_of_equal_vectors_is_the_vector():
    rank, n = world()
    if n & (n - 1):
        pytest.skip("Adasum needs a power-of-two number of ranks")
    x = tf.constant([3.0, -4.0, 1.0])
    np.testing.assert_allclose(hvd.allreduce(x, op=hvd.Adasum).numpy(), x.numpy(), rtol=1e-6)
    # Orthogonal vectors add.
    e = np.zeros(n)
    e[rank] = 1.0
    np.testing.assert_allclose(hvd.allreduce(tf.constant(e), op=hvd.Adasum).numpy(), np.ones(n), rtol=1e-12)


# ---- allgather, broadcast, alltoall, reducescatter ----------------------------------

@pytest.mark.parametrize("dtype", MOVED)
def test_allgather_rows_differ_per_rank(dtype):
    rank, n = world()
    eager, graph = both_modes(lambda: hvd.allgather(tensor(rank, (rank + 1, 3), dtype)))
    want = np.concatenate([inputs(r, (r + 1, 3), dtype) for r in range(n)])
    np.testing.assert_array_equal(eager, want.astype(eager.dtype))
    np.testing.assert_array_equal(graph, want.astype(graph.dtype))


def test_grouped_allgather():
    rank, n = world()
    out = hvd.grouped_allgather([tensor(rank, (rank + 1,), "int64"), tensor(rank, (2, 2), "float32")])
    np.testing.assert_array_equal(out[0].numpy(), np.concatenate([inputs(r, (r + 1,), "int64") for r in range(n)]))
    np.testing.assert_array_equal(out[1].numpy(), np.concatenate([inputs(r, (2, 2), "float32") for r in range(n)]))


@pytest.mark.parametrize("dtype", MOVED)
def test_broadcast_from_every_root(dtype):
    rank, n = world()
    for root in range(n):
        eager, graph = both_modes(lambda: hvd.broadcast(tensor(rank, (2, 3), dtype), root))
        np.testing.assert_array_equal(eager, inputs(root, (2, 3), dtype).astype(eager.dtype))
        np.testing.assert_array_equal(graph, inputs(root, (2, 3), dtype).astype(graph.dtype))


def test_broadcast_variables_and_inplace():
    rank, n = world()
    variables = [tf.Variable(tensor(rank, (3,), "float32")), tf.Variable(tensor(rank, (2, 2), "int64"))]
    hvd.broadcast_variables(variables, root_rank=n - 1)
    np.testing.assert_array_equal(variables[0].numpy(), inputs(n - 1, (3,), "float32"))
    np.testing.assert_array_equal(variables[1].numpy(), inputs(n - 1, (2, 2), "int64"))
    more = [tf.Variable(tensor(rank, (4,), "float64"))]
    values = hvd.broadcast_(more, root_rank=0)
    np.testing.assert_array_equal(more[0].numpy(), inputs(0, (4,), "float64"))
    np.testing.assert_array_equal(values[0].numpy(), inputs(0, (4,), "float64"))


def test_alltoall_with_and_without_splits():
    rank, n = world()
    # Rank r sends q + 1 rows to rank q; row values name sender and row.
    splits = [q + 1 for q in range(n)]
    rows = np.concatenate([[[rank * 100 + q * 10 + k] for k in range(q + 1)] for q in range(n)])
    out, received = hvd.alltoall(tf.constant(rows, tf.int32), splits=splits)
    want = np.concatenate([[[s * 100 + rank * 10 + k] for k in range(rank + 1)] for s in range(n)])
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(received.numpy(), [rank + 1] * n)
    equal = hvd.alltoall(tf.range(2 * n) + 1000 * rank)
    np.testing.assert_array_equal(equal.numpy(), np.concatenate([[1000 * s + 2 * rank, 1000 * s + 2 * rank + 1]
                                                                 for s in range(n)]))


@pytest.mark.parametrize("rows", [4, 7])
def test_reducescatter_uneven(rows):
    rank, n = world()
    x = tensor(rank, (rows, 2), "float32")
    total = reference(hvd.Sum, [inputs(r, (rows, 2), "float32") for r in range(n)])
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:rank])
    for op, want in [(hvd.Sum, total), (hvd.Average, total / n)]:
        eager, graph = both_modes(lambda: hvd.reducescatter(x, op=op))
        np.testing.assert_allclose(eager, want[start:start + counts[rank]], rtol=1e-6)
        np.testing.assert_allclose(graph, want[start:start + counts[rank]], rtol=1e-6)
    grouped = hvd.grouped_reducescatter([x, x * 2], op=hvd.Sum)
    np.testing.assert_allclose(grouped[1].numpy(), 2 * total[start:start + counts[rank]], rtol=1e-6)


# ---- gradients (Horovod's) ----------------------------------------------------------
# Each rank's loss is sum(w_r * y) with fixed weights w_r; the expected
# gradients are written out by hand.

def grad_of(fn, x, weights):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        loss = tf.reduce_sum(tf.cast(weights, y.dtype) * y)
    return tape.gradient(loss, x).numpy()


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_allreduce_gradient(op):
    rank, n = world()
    w = [inputs(r, (3, 2), seed=9) for r in range(n)]
    got = grad_of(lambda x: hvd.allreduce(x, op=op), tensor(rank, (3, 2)), w[rank])
    np.testing.assert_allclose(got, sum(w) / (n if op == hvd.Average else 1))


def test_allgather_gradient():
    rank, n = world()
    total = sum(r + 1 for r in range(n))
    w = [inputs(r, (total, 2), seed=9) for r in range(n)]
    got = grad_of(hvd.allgather, tensor(rank, (rank + 1, 2)), w[rank])
    start = sum(r + 1 for r in range(rank))
    np.testing.assert_allclose(got, (sum(w) / n)[start:start + rank + 1])


def test_broadcast_gradient():
    rank, n = world()
    w = [inputs(r, (4,), seed=9) for r in range(n)]
    got = grad_of(lambda x: hvd.broadcast(x, 1 % n), tensor(rank, (4,)), w[rank])
    np.testing.assert_allclose(got, sum(w) / n if rank == 1 % n else np.zeros(4))


def test_alltoall_gradient_returns_rows_to_their_senders():
    rank, n = world()
    w = [inputs(r, (2 * n, 1), seed=9) for r in range(n)]
    got = grad_of(hvd.alltoall, tensor(rank, (2 * n, 1)), w[rank])
    # The gradient of row k sent to rank q is q's weight on the row it received.
    want = np.concatenate([w[q][2 * rank:2 * rank + 2] for q in range(n)])
    np.testing.assert_allclose(got, want)


def test_reducescatter_gradient():
    rank, n = world()
    rows = 2 * n
    w = [inputs(r, (2, 3), seed=9) for r in range(n)]
    got = grad_of(lambda x: hvd.reducescatter(x, op=hvd.Sum), tensor(rank, (rows, 3)), w[rank])
    np.testing.assert_allclose(got, n * np.concatenate(w))  # Horovod's: allgather of the gradients, times n for Sum


# ---- errors ----------------------------------------------------------------------------

def test_ranks_that_disagree_on_a_shape_fail_on_every_rank():
    rank, n = world()
    with pytest.raises(tf.errors.FailedPreconditionError, match="shape"):
        hvd.allreduce(tf.zeros([3 + rank]), name="disagree")
    # The engine goes on.
    np.testing.assert_allclose(hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy(), [n, n])


def test_ranks_that_disagree_on_a_dtype_fail_for_movements_too():
    rank, n = world()
    if n < 2:
        pytest.skip("needs two ranks")
    with pytest.raises(tf.errors.FailedPreconditionError):
        hvd.allgather(tf.zeros([2], tf.int32 if rank == 0 else tf.float32), name="dtype.allgather")
    with pytest.raises(tf.errors.FailedPreconditionError):
        hvd.broadcast(tf.zeros([2], tf.int64 if rank == 0 else tf.float64), 0, name="dtype.broadcast")


def test_bad_arguments_raise_on_the_calling_rank():
    rank, n = world()
    with pytest.raises(ValueError, match="root_rank"):
        hvd.broadcast(tf.ones([1]), n)
    with pytest.raises(TypeError):
        hvd.allreduce(tf.constant(["a"]))
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce(tf.ones([1]), op=17)
    with pytest.raises(tf.errors.InvalidArgumentError, match="scalar"):
        hvd.allgather(tf.constant(1.0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="splits"):
        hvd.alltoall(tf.ones([n, 1]), splits=[n + 1] + [0] * (n - 1))


# ---- rank ops, join, barrier, objects, compression, process sets ---------------------------

def test_rank_and_size_ops_read_at_run_time():
    rank, n = world()
    assert (hvd.rank_op().numpy(), hvd.size_op().numpy()) == (rank, n)
    assert (hvd.local_rank_op().numpy(), hvd.local_size_op().numpy()) == (hvd.local_rank(), hvd.local_size())
    assert hvd.process_set_included_op(0).numpy() == 1
    assert hvd.process_set_included_op(99).numpy() == -2


def test_join_lets_ranks_with_less_data_finish():
    rank, n = world()
    for step in range(rank + 1):  # rank r has r + 1 batches
        total = hvd.allreduce(tf.ones([1]), op=hvd.Sum, name="join.%d" % step)
        assert total.numpy()[0] == n - step  # ranks below `step` have joined and add zeros
    assert hvd.join().numpy() == n - 1
    hvd.barrier()


def test_objects():
    rank, n = world()
    assert hvd.broadcast_object({"from": rank, "list": [rank]}, root_rank=n - 1) == {"from": n - 1, "list": [n - 1]}
    assert hvd.allgather_object(("rank", rank)) == [("rank", r) for r in range(n)]
    fn = hvd.broadcast_object_fn(root_rank=0)
    assert fn(rank * 10) == 0


def test_fp16_compression_keeps_the_dtype():
    rank, n = world()
    x = tensor(rank, (5,), "float32")
    y = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert y.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), sum(inputs(r, (5,), "float32") for r in range(n)))


@pytest.mark.parametrize("wire", ["bf16", "fp8_e4m3", "int8"])
def test_wire_compression_is_bitwise_the_same_everywhere_and_within_its_bound(wire):
    rank, n = world()

    def data(r):  # not exactly representable in any format; above the 64 KiB that go exact
        return np.random.default_rng(r).standard_normal(20000).astype(np.float32) * 10

    compression = getattr(hvd.Compression, wire)
    y = hvd.allreduce(tf.constant(data(rank)), op=hvd.Sum, compression=compression, name="wire.%s" % wire)
    assert y.dtype == tf.float32
    exact = sum(data(r).astype(np.float64) for r in range(n))
    eps = {"bf16": 2 ** -8, "fp8_e4m3": 2 ** -3.9, "int8": 1 / 200}[wire]
    largest = max(sum(np.abs(data(r)) for r in range(n)))
    assert np.abs(y.numpy() - exact).max() <= n * eps * largest
    for other in hvd.allgather_object(y.numpy().tobytes()):
        assert other == y.numpy().tobytes()
    # In a tf.function, grouped, and with error feedback on the tape.
    w = tf.Variable(tf.ones([8, 1]))
    tape_compression = hvd.Compression.wire("int8", error_feedback=True)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
        tape = hvd.DistributedGradientTape(tape, compression=tape_compression)
        return tape.gradient(loss, [w])[0]

    g = step(tf.constant(data(rank)[:32].reshape(4, 8)))
    for other in hvd.allgather_object(g.numpy().tobytes()):
        assert other == g.numpy().tobytes()


def test_process_sets():
    rank, n = world()
    if n < 2:
        pytest.skip("needs two ranks")
    evens = hvd.add_process_set([r for r in range(n) if r % 2 == 0])
    odds = hvd.add_process_set([r for r in range(n) if r % 2 == 1])
    try:
        mine, other = (evens, odds) if rank % 2 == 0 else (odds, evens)
        x = tensor(rank, (3,), "float32")
        eager, graph = both_modes(lambda: hvd.allreduce(x, op=hvd.Sum, process_set=mine))
        want = sum(inputs(r, (3,), "float32") for r in mine.ranks)
        np.testing.assert_allclose(eager, want)
        np.testing.assert_allclose(graph, want)
        root = mine.ranks[-1]
        np.testing.assert_array_equal(hvd.broadcast(x, root, process_set=mine).numpy(), inputs(root, (3,), "float32"))
        assert hvd.size_op(process_set_id=mine.process_set_id).numpy() == len(mine.ranks)
        assert hvd.size_op(process_set_id=other.process_set_id).numpy() == len(other.ranks)  # any set's size
        assert hvd.process_set_included_op(other.process_set_id).numpy() == 0
        with pytest.raises(ValueError, match="not in process set"):
            hvd.allreduce(x, process_set=other)
        with pytest.raises(tf.errors.InvalidArgumentError):  # Horovod's kind of error, and a ValueError
            hvd.allreduce(x, process_set=other)
        # A tape or optimizer over a set this rank is not in keeps its own gradients (Horovod's rule).
        w = tf.Variable([1.0])
        with tf.GradientTape() as tape:
            loss = (rank + 1.0) * w[0]
        grad, = hvd.DistributedGradientTape(tape, process_set=other).gradient(loss, [w])
        np.testing.assert_allclose(grad.numpy(), [rank + 1.0])
        with pytest.raises(ValueError, match="root_rank"):
            hvd.broadcast(x, other.ranks[0], process_set=mine)
    finally:
        hvd.remove_process_set(odds)
        hvd.remove_process_set(evens)
