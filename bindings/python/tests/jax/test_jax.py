"""kolo.jax against NumPy: every collective eagerly and inside jax.jit,
many in one compiled function (their order pinned), gradients with
jax.grad and jax.vjp against finite differences, kolo's dtype policy,
process sets, pytrees and the optimizer wrapper, and errors that name what
was wrong on every rank."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kolo
import kolo.jax as hvd


def world():
    return hvd.rank(), hvd.size()


def data(r, shape=(6, 2), dtype=np.float64):
    """Rank r's array: every rank can make every other's."""
    return (np.random.default_rng(10 + r).standard_normal(shape) * 4).astype(dtype)


def everyone(shape=(6, 2), dtype=np.float64):
    return [data(r, shape, dtype) for r in range(hvd.size())]


REFERENCE = {hvd.Sum: lambda a: np.sum(a, 0), hvd.Average: lambda a: np.mean(a, 0), hvd.Min: lambda a: np.min(a, 0),
             hvd.Max: lambda a: np.max(a, 0), hvd.Product: lambda a: np.prod(a, 0)}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_allreduce(jit, op):
    rank, n = world()
    f = (lambda x: hvd.allreduce(x, op=op))
    got = (jax.jit(f) if jit else f)(jnp.asarray(data(rank)))
    np.testing.assert_allclose(np.asarray(got), REFERENCE[op](np.stack(everyone())), rtol=1e-12)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Max])
def test_grouped_allreduce_is_one_collective_per_dtype(jit, op):
    """Arrays of several shapes and dtypes (a scalar, bool and int16 as
    kolo's policy carries them, complex as pairs): each is its own
    allreduce's result, and a compiled function holds one collective per
    carriage, not one per array."""
    rank, n = world()
    shapes = [(6, 2), (), (5,), (3, 1, 2)]
    dtypes = [np.float64, np.float64, np.float32, np.int32]
    if op != hvd.Average:
        shapes, dtypes = shapes + [(4,), (3,)], dtypes + [np.bool_, np.int16]
    xs = [jnp.asarray(data(rank, s, d)) for s, d in zip(shapes, dtypes)]
    f = (lambda xs: hvd.grouped_allreduce(xs, op=op))
    got = (jax.jit(f) if jit else f)(xs)
    for x, s, d, g in zip(xs, shapes, dtypes, got):
        want = REFERENCE[op](np.stack([data(q, s, d) for q in range(n)]))  # bool: nonzero, as an or
        assert g.shape == x.shape and g.dtype == x.dtype
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(want, np.float64).astype(d), rtol=1e-6)
    # float64 (the scalar too), float32, int32 (int16 widened to it), uint8 (bool)
    carriages = 3 if op == hvd.Average else 4
    assert jax.jit(f).lower(xs).as_text().count("kolo_jax_allreduce_many") == carriages


def test_in_place_where_xla_owns_the_buffer_and_not_on_a_callers_array():
    """An intermediate of a compiled function is reduced where it lies (the
    output aliased to it); an argument is the caller's, which XLA would
    copy first, so its result goes to a new buffer. Both are right."""
    rank, n = world()
    x = jnp.asarray(data(rank))
    cases = {"argument": (lambda a: hvd.allreduce(a, op=hvd.Sum), False),
             "intermediate": (lambda a: hvd.allreduce(a * 2, op=hvd.Sum), True),
             "grouped intermediates": (lambda a: hvd.grouped_allreduce([a * 2, a + 1], op=hvd.Sum)[0], True),
             "broadcast of an argument": (lambda a: hvd.broadcast(a, 0) * 2, False),
             "broadcast of an intermediate": (lambda a: hvd.broadcast(a * 2, 0), True)}
    for what, (f, aliased) in cases.items():
        assert ("output_operand_aliases" in jax.jit(f).lower(x).as_text()) == aliased, what
    # One intermediate twice in a group: two results, not one buffer reduced twice.
    def same_twice(a):
        y = a * 2
        return hvd.grouped_allreduce([y, y], op=hvd.Sum)
    twice = jax.jit(same_twice)(x)
    total = np.sum(everyone(), 0)
    np.testing.assert_allclose(jax.jit(cases["argument"][0])(x), total, rtol=1e-12)
    np.testing.assert_allclose(jax.jit(cases["intermediate"][0])(x), 2 * total, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(x), data(rank))  # the caller's array untouched
    for result in twice:
        np.testing.assert_allclose(result, 2 * total, rtol=1e-12)


@pytest.mark.parametrize("jit", [False, True])
def test_allgather_broadcast_reducescatter_alltoall(jit):
    rank, n = world()
    shape = (2 * n, 3)
    x = jnp.asarray(data(rank, shape))
    all_x = everyone(shape)

    def f(x):
        return (hvd.allgather(x), hvd.broadcast(x, n - 1), hvd.reducescatter(x, op=hvd.Sum),
                hvd.reducescatter(x), hvd.alltoall(x))
    gathered, broadcast, scattered_sum, scattered_mean, exchanged = (jax.jit(f) if jit else f)(x)
    np.testing.assert_array_equal(gathered, np.concatenate(all_x))
    np.testing.assert_array_equal(broadcast, all_x[n - 1])
    mine = slice(2 * rank, 2 * rank + 2)
    np.testing.assert_allclose(scattered_sum, np.sum(all_x, 0)[mine], rtol=1e-12)
    np.testing.assert_allclose(scattered_mean, np.mean(all_x, 0)[mine], rtol=1e-12)
    np.testing.assert_array_equal(exchanged, np.concatenate([a[mine] for a in all_x]))


def test_many_collectives_in_one_function_run_in_program_order():
    """Twenty collectives that depend on nothing of each other, of
    different sizes and kinds: XLA could run them in any order; the
    ordering token keeps them in the program's on every rank."""
    rank, n = world()

    @jax.jit
    def f(x):
        outs = []
        for i in range(20):
            piece = x[:i + 1] * (i + 1)
            outs.append(hvd.allreduce(piece, op=hvd.Sum) if i % 3 else hvd.allgather(piece))
        return outs
    got = f(jnp.asarray(data(rank, (20,))))
    all_x = everyone((20,))
    for i, out in enumerate(got):
        pieces = [a[:i + 1] * (i + 1) for a in all_x]
        want = np.sum(pieces, 0) if i % 3 else np.concatenate(pieces)
        np.testing.assert_allclose(out, want, rtol=1e-12)
    hvd.barrier()


def job_gradient(local_loss, x, eps=1e-6):
    """The job's loss is every rank's local loss summed; its derivative by
    this rank's x, by central differences: rank s perturbs its x one
    element at a time while the others keep theirs, every rank evaluating
    (the collectives need them all)."""
    rank, n = world()
    forward = jax.jit(local_loss)
    x = np.asarray(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for s in range(n):
        for i in np.ndindex(x.shape):
            values = []
            for sign in (1, -1):
                moved = x.copy()
                if rank == s:
                    moved[i] += sign * eps
                values.append(float(hvd.allreduce(forward(jnp.asarray(moved)), op=hvd.Sum)))
            if rank == s:
                grad[i] = (values[0] - values[1]) / (2 * eps)
    return grad


@pytest.mark.parametrize("collective", ["allreduce_sum", "allreduce_average", "grouped_allreduce", "allgather",
                                        "broadcast", "reducescatter_sum", "reducescatter_average", "alltoall"])
def test_gradients_match_finite_differences(collective):
    """Each rank's loss weighs its own output (differently on each rank);
    jax.grad of it on this rank must be the derivative of the job's loss
    (every rank's summed: the collectives' gradients carry the other
    ranks' parts) by this rank's input."""
    rank, n = world()
    shape = (2 * n, 2)
    apply = {"allreduce_sum": lambda x: hvd.allreduce(x, op=hvd.Sum),
             "allreduce_average": lambda x: hvd.allreduce(x),
             "grouped_allreduce": lambda x: jnp.concatenate(
                 [g.ravel() for g in hvd.grouped_allreduce([x, x[:1] * 3], op=hvd.Sum)]),
             "allgather": hvd.allgather,
             "broadcast": lambda x: hvd.broadcast(x, n - 1),
             "reducescatter_sum": lambda x: hvd.reducescatter(x, op=hvd.Sum),
             "reducescatter_average": lambda x: hvd.reducescatter(x),
             "alltoall": hvd.alltoall}[collective]

    def local_loss(x):
        y = apply(x)
        w = jnp.arange(1, y.size + 1, dtype=y.dtype).reshape(y.shape) * (rank + 1)
        return jnp.sum(jnp.sin(y) * w)
    x = jnp.asarray(data(rank, shape))
    grad = jax.jit(jax.grad(local_loss))(x)
    np.testing.assert_allclose(grad, job_gradient(local_loss, x), rtol=1e-5, atol=1e-6)
    # jax.vjp: the same, from a cotangent of one.
    value, pullback = jax.vjp(local_loss, x)
    np.testing.assert_allclose(pullback(jnp.ones_like(value))[0], grad, rtol=1e-12)


def test_reductions_without_a_gradient_say_so():
    rank, n = world()
    with pytest.raises(NotImplementedError, match="Min, Max or Product has no gradient"):
        jax.grad(lambda x: jnp.sum(hvd.allreduce(x, op=hvd.Max)))(jnp.asarray(data(rank)))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64", "float16", "bfloat16", "float32",
                                   "int16", "uint16", "bool", "complex64"])
def test_dtypes_as_kolos_policy_reduces_them(dtype):
    rank, n = world()
    make = (lambda r: (np.arange(6) % (r + 2) == 0)) if dtype == "bool" else \
        (lambda r: (np.arange(6) + 1j * r).astype(dtype)) if dtype == "complex64" else \
        (lambda r: (np.arange(6) + r).astype(jnp.dtype(dtype)))
    mine = jnp.asarray(make(rank), dtype=dtype)
    got = jax.jit(lambda x: (hvd.allreduce(x, op=hvd.Sum), hvd.allgather(x), hvd.broadcast(x, 0)))(mine)
    all_x = [np.asarray(jnp.asarray(make(r), dtype=dtype)) for r in range(n)]
    want_sum = np.any(all_x, 0) if dtype == "bool" else np.sum(np.stack(all_x).astype(np.complex128 if dtype ==
                                                                                      "complex64" else np.float64), 0)
    assert got[0].dtype == mine.dtype
    np.testing.assert_allclose(np.asarray(got[0]).astype(want_sum.dtype), want_sum, rtol=1e-2)
    np.testing.assert_array_equal(np.asarray(got[1]), np.concatenate(all_x))
    np.testing.assert_array_equal(np.asarray(got[2]), all_x[0])


def test_refusals_name_what_was_wrong():
    rank, n = world()
    x = jnp.asarray(data(rank))
    with pytest.raises(kolo._policy.OpRefusedError, match="kolo.jax has no Adasum"):
        hvd.allreduce(x, op=hvd.Adasum)
    if n > 1:
        with pytest.raises(ValueError, match="first dimension \\(7\\) must split into %d equal parts" % n):
            hvd.reducescatter(jnp.ones((7, 2)), op=hvd.Sum)
    with pytest.raises(ValueError, match="must have a first dimension"):
        hvd.allgather(jnp.float32(1.0))
    with pytest.raises(ValueError, match="root_rank 99 is not a rank of the process set"):
        hvd.broadcast(x, 99)


def test_lowered_for_a_gpu_each_collective_calls_kolos_stream_handler():
    """Lowered for CUDA (as on a machine with a GPU; this one has none, so
    the handlers do not run here: tools/gpu_check.sh runs them): each
    collective is the custom call of its _cuda handler, which calls kolo's
    _stream API on XLA's stream; a broadcast is always in place there (the
    handler makes no device copy), the others as on the CPU. Another GPU
    platform is refused, saying so."""
    rank, n = world()
    x = jnp.asarray(data(rank, (2 * n, 3)))
    cases = {"allreduce": (lambda a: hvd.allreduce(a * 2), True),
             "allreduce_many": (lambda a: hvd.grouped_allreduce([a * 2, a + 1], op=hvd.Sum)[0], True),
             "allgather": (lambda a: hvd.allgather(a), False),
             "broadcast": (lambda a: hvd.broadcast(a, 0), True),
             "reducescatter": (lambda a: hvd.reducescatter(a, op=hvd.Sum), False),
             "alltoall": (lambda a: hvd.alltoall(a), False),
             "barrier": (lambda a: (hvd.barrier(), a)[1], False)}
    for target, (f, aliased) in cases.items():
        text = jax.jit(f).trace(x).lower(lowering_platforms=("cuda",)).as_text()
        assert "@kolo_jax_%s_cuda(" % target in text, target
        assert "@kolo_jax_%s(" % target not in text, target
        assert ("output_operand_aliases" in text) == aliased, target
        cpu_text = jax.jit(f).trace(x).lower(lowering_platforms=("cpu",)).as_text()
        assert "@kolo_jax_%s(" % target in cpu_text and "_cuda" not in cpu_text, target
    with pytest.raises(NotImplementedError, match="kolo.jax serves CPU and CUDA arrays, not rocm arrays"):
        jax.jit(lambda x: hvd.allreduce(x)).trace(jnp.ones(3)).lower(lowering_platforms=("rocm",))


def test_prescale_postscale_and_the_deprecated_average():
    rank, n = world()
    x = jnp.asarray(data(rank))
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    np.testing.assert_allclose(got, 1.5 * np.sum(everyone(), 0), rtol=1e-12)
    with pytest.warns(DeprecationWarning):
        summed = hvd.allreduce(x, average=False)
    np.testing.assert_allclose(summed, np.sum(everyone(), 0), rtol=1e-12)


def test_process_sets():
    rank, n = world()
    if n < 3:
        pytest.skip("needs three ranks")
    pair = hvd.add_process_set([0, 2])
    try:
        if rank in (0, 2):
            got = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum, process_set=pair))(jnp.asarray(data(rank)))
            np.testing.assert_allclose(got, data(0) + data(2), rtol=1e-12)
            np.testing.assert_array_equal(hvd.broadcast(jnp.asarray(data(rank)), 2, process_set=pair), data(2))
        else:
            with pytest.raises(ValueError, match="rank 1 is not in process set"):
                hvd.allreduce(jnp.asarray(data(rank)), process_set=pair)
    finally:
        hvd.remove_process_set(pair)


class _SGD:
    """An optax-style optimizer, for DistributedOptimizer (optax is not pinned)."""

    def __init__(self, lr):
        self.lr = lr

    def init(self, params):
        return ()

    def update(self, grads, state, params=None):
        return jax.tree.map(lambda g: -self.lr * g, grads), state


def test_training_with_average_gradients_and_the_optimizer_equals_one_process():
    """A linear fit: each rank its part of the batch; averaged gradients
    make every rank's steps those of one process on the whole batch."""
    rank, n = world()
    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((8 * n, 3))
    y_all = x_all @ np.array([1.0, -2.0, 0.5]) + 0.3

    def loss(params, x, y):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)
    start = {"w": jnp.asarray(data(rank, (3,))), "b": jnp.float64(rank)}
    params = hvd.broadcast_variables(start, root_rank=0)
    np.testing.assert_array_equal(params["w"], data(0, (3,)))
    opt = hvd.DistributedOptimizer(_SGD(0.1))
    state = opt.init(params)

    @jax.jit
    def step(params, state, x, y):
        updates, state = opt.update(jax.grad(loss)(params, x, y), state, params)
        return jax.tree.map(jnp.add, params, updates), state
    mine = slice(8 * rank, 8 * rank + 8)
    for _ in range(10):
        params, state = step(params, state, x_all[mine], y_all[mine])
    # One process, NumPy, on the whole batch.
    w, b = data(0, (3,)), 0.0
    for _ in range(10):
        err = x_all @ w + b - y_all
        w, b = w - 0.1 * 2 * x_all.T @ err / len(err), b - 0.1 * 2 * err.mean()
    np.testing.assert_allclose(params["w"], w, rtol=1e-10)
    np.testing.assert_allclose(params["b"], b, rtol=1e-10)
    grads = hvd.average_gradients({"a": jnp.ones(3) * rank, "b": jnp.ones(2, jnp.int32) * rank})
    np.testing.assert_allclose(grads["a"], np.full(3, (n - 1) / 2))
    assert grads["b"].dtype == jnp.int32


def test_zz_ranks_that_disagree_fail_on_every_rank_naming_it():
    """Last: a mismatch fails the communicator for good (kolo's rule)."""
    rank, n = world()
    if n < 2:
        pytest.skip("needs two ranks")
    with pytest.raises(Exception, match="kolo.jax allgather: .*MISMATCH: allgather on rank %d" % rank):
        jax.block_until_ready(hvd.allgather(jnp.ones(2 + rank)))
