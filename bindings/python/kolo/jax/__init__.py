"""kolo for JAX, with Horovod's names: each collective is an XLA custom
call of kolo's C API on the buffers XLA hands it (in place where kolo can
reduce in place), eager and inside jax.jit alike, in program order on
every rank (kolo/jax/_primitives.py says how), and differentiable with
Horovod's rules:

    import jax
    import kolo.jax as hvd

    hvd.init()
    params = hvd.broadcast_variables(params, root_rank=0)   # one start on every rank

    @jax.jit
    def step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        grads = hvd.average_gradients(grads)                 # one allreduce per dtype, in place
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

allreduce (Average, Sum, Min, Max, Product; prescale_factor and
postscale_factor), grouped_allreduce (a list of arrays in one collective
per dtype, each reduced where it lies), allgather (along the first
dimension, which every rank gives the same size), broadcast,
reducescatter (the first dimension split among the ranks), alltoall (its
first dimension in equal blocks, one per rank), barrier; process_set= on each; broadcast_variables and
average_gradients over pytrees; DistributedOptimizer wraps any optax-style
optimizer (an object with init(params) and update(grads, state, params)).

Gradients, as Horovod's: of an allreduce by Sum or Average, the same
allreduce of the cotangent (Min, Max and Product have none); of an
allgather, the reducescatter (Sum) of the cotangent; of a broadcast, the
cotangents summed at the root (zero elsewhere); of a reducescatter, the
allgather of the cotangent (divided by the ranks for Average); of an
alltoall, the alltoall of the cotangent.

Dtypes follow kolo's one policy (kolo/_policy.py): the engine's own
(int8/uint8, int32/uint32, int64/uint64, float16, bfloat16, float32,
float64) natively, bool as a logical or/and, int16/uint16 widened, complex
as pairs of reals; a refused dtype or op raises on the calling rank before
anything is sent, and a failure of kolo (a rank gone, shapes that differ
between ranks) raises XLA's runtime error with kolo's message on every
rank. CPU arrays, and CUDA arrays through kolo's stream-ordered calls on
XLA's stream (docs/jax.md).
"""

import jax
import jax.numpy as jnp
import numpy as np

from kolo import _policy
from kolo._library import OP_CODES, KoloError  # noqa: F401
from kolo._policy import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from kolo._process_sets import (ProcessSet, add_process_set, global_process_set, group_of, init,  # noqa: F401
                                remove_process_set)
from kolo._runtime import (cross_rank, cross_size, is_initialized, local_rank, local_size, rank,  # noqa: F401
                           shutdown, size)
from kolo.jax import _primitives as _p


def _set(process_set):
    """(process set id, the group of its ranks): a ValueError naming the set
    unless this rank may use it, and one naming init() before kolo is
    initialized."""
    if not is_initialized():
        raise ValueError("kolo.jax: call kolo.jax.init() first")
    group = group_of(process_set)
    set_id = 0 if process_set is None else (process_set.process_set_id or 0)
    return set_id, group


def _as_carried(x, how, engine_dtype):
    """x as the engine gets it (how: kolo._policy's NATIVE, LOGICAL, WIDENED
    or PAIRS), and the way back."""
    if how == _policy.NATIVE:
        return x, lambda y: y
    if how == _policy.LOGICAL:
        return x.astype(jnp.uint8), lambda y: y.astype(jnp.bool_)
    if how == _policy.WIDENED:
        return x.astype(engine_dtype), lambda y: y.astype(x.dtype)
    # PAIRS: complex as (real, imaginary) along a last axis
    return (jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1),
            lambda y: jax.lax.complex(y[..., 0], y[..., 1]).astype(x.dtype))


def _carried(x, op, collective, scaled=False):
    """(what the engine reduces, the engine's op, how to get the result
    back): kolo's policy for x's dtype and op."""
    plan = _policy.reduction(str(x.dtype), op, collective, scaled)
    if plan.engine_op == Adasum:
        raise _policy.OpRefusedError("%s: kolo.jax has no Adasum; use Average or Sum" % collective)
    carried, back = _as_carried(x, plan.how, plan.engine_dtype)
    return carried, OP_CODES[plan.engine_op], back


def _checked(x, what):
    x = jnp.asarray(x)
    if x.dtype.itemsize == 0 or x.dtype == jnp.dtype("O"):
        raise TypeError("kolo.jax.%s: %s arrays have no fixed-size elements to move" % (what, x.dtype))
    return x


def _moved(x):
    """x as kolo moves it (bool as uint8, int16 widened, complex as pairs of
    reals: the carriage kolo's policy gives its dtype), and the way back."""
    carriage = _policy.DTYPES.get(str(x.dtype))
    if carriage is None:  # not one kolo reduces: the handler says whether it moves it
        return x, lambda y: y
    return _as_carried(x, carriage.how, carriage.engine_dtype)


def _differentiable(primal, adjoint, params):
    """primal(x, *params), the `params` after x not differentiated, whose
    gradient is adjoint(*params, cotangent): Horovod's rules need the
    cotangent alone, so the forward pass keeps nothing."""
    f = jax.custom_vjp(primal, nondiff_argnums=tuple(range(1, params + 1)))
    f.defvjp(lambda x, *rest: (f(x, *rest), None), lambda *args: (adjoint(*args[:-2], args[-1]),))
    return f


# ---- allreduce ----------------------------------------------------------------------
def _has_gradient(code, what):
    """Only a Sum or an Average has a gradient (Horovod's rule)."""
    if code not in (OP_CODES[Sum], OP_CODES[Average]):
        raise NotImplementedError("kolo.jax: %s by Min, Max or Product has no gradient (Horovod's rule); use Sum or "
                                  "Average" % what)


def _in_place(x):
    """Whether kolo may work on x where it lies, its output aliased to it:
    an intermediate of the function being compiled is XLA's own to reuse,
    while an argument of it (or an eager array) is the caller's, which XLA
    would first copy for kolo to overwrite: kolo writes its result into a
    new buffer instead. (A tracer of a transformation that is not jit's
    has no arguments to tell apart: in place.)"""
    if not isinstance(x, jax.core.Tracer):
        return False
    arguments = getattr(getattr(getattr(x, "_trace", None), "frame", None), "invars", None)
    if arguments is None:
        return True
    var = getattr(x, "val", None)
    return not any(a is var for a in arguments)


def _allreduce_adjoint(code, set_id, in_place, cotangent):
    _has_gradient(code, "an allreduce")
    return _allreduce(cotangent, code, set_id, True)


_allreduce = _differentiable(
    lambda x, code, set_id, in_place: _p.allreduce_p.bind(x, process_set=set_id, op=code, in_place=in_place),
    _allreduce_adjoint, 3)


def allreduce(x, op=None, average=None, process_set=global_process_set, prescale_factor=1.0,
              postscale_factor=1.0, name=None):
    """The op (Average unless told) over the set of x, elementwise, on
    every rank of the set; prescale_factor multiplies x first,
    postscale_factor the result."""
    del name  # kolo.jax's collectives are ordered, not named
    op = _policy.resolve_op(op, average)
    set_id, _ = _set(process_set)
    x = jnp.asarray(x)
    scaled = prescale_factor != 1.0 or postscale_factor != 1.0
    carried, code, back = _carried(x, op, "allreduce", scaled)
    if prescale_factor != 1.0:
        carried = carried * jnp.asarray(prescale_factor, carried.dtype)
    result = _allreduce(carried, code, set_id, _in_place(carried))
    if postscale_factor != 1.0:
        result = result * jnp.asarray(postscale_factor, result.dtype)
    return back(result)


def _allreduce_many_adjoint(code, set_id, in_place, cotangents):
    _has_gradient(code, "a grouped allreduce")
    return _allreduce_many(tuple(cotangents), code, set_id, (True,) * len(cotangents))


_allreduce_many = _differentiable(
    lambda xs, code, set_id, in_place: tuple(_p.allreduce_many_p.bind(*xs, process_set=set_id, op=code,
                                                                        in_place=in_place)),
    _allreduce_many_adjoint, 3)


def grouped_allreduce(tensors, op=None, average=None, process_set=global_process_set, prescale_factor=1.0,
                      postscale_factor=1.0, name=None):
    """allreduce of each array of the list, in one collective per dtype:
    kolo reduces them where they lie, with no copy into one buffer
    (kolo_allreduce_many), as Horovod's grouped_allreduce fuses them."""
    del name
    op = _policy.resolve_op(op, average)
    set_id, _ = _set(process_set)
    scaled = prescale_factor != 1.0 or postscale_factor != 1.0
    plans = [_carried(jnp.asarray(t), op, "allreduce", scaled) for t in tensors]
    results = [None] * len(plans)
    by_carriage = {}
    for i, (carried, code, _) in enumerate(plans):
        by_carriage.setdefault((carried.dtype, code), []).append(i)
    for (_, code), positions in by_carriage.items():
        carried = [plans[i][0] for i in positions]
        if prescale_factor != 1.0:
            carried = [c * jnp.asarray(prescale_factor, c.dtype) for c in carried]
        in_place = tuple(_in_place(c) for c in carried)
        for i, r in zip(positions, _allreduce_many(tuple(carried), code, set_id, in_place)):
            if postscale_factor != 1.0:
                r = r * jnp.asarray(postscale_factor, r.dtype)
            results[i] = plans[i][2](r)
    return results


# ---- allgather and reducescatter ----------------------------------------------------
def _reducescatter_adjoint(code, set_id, n, cotangent):
    _has_gradient(code, "a reducescatter")
    gathered = _allgather(cotangent, set_id, n)
    return gathered / n if code == OP_CODES[Average] else gathered


_allgather = _differentiable(lambda x, set_id, n: _p.allgather_p.bind(x, process_set=set_id, size=n),
                             lambda set_id, n, cotangent: _reducescatter(cotangent, OP_CODES[Sum], set_id, n), 2)
_reducescatter = _differentiable(
    lambda x, code, set_id, n: _p.reducescatter_p.bind(x, process_set=set_id, op=code, size=n),
    _reducescatter_adjoint, 3)


def allgather(x, process_set=global_process_set, name=None):
    """Every rank's x concatenated along the first dimension, in rank order
    (every rank's x has the same shape)."""
    del name
    set_id, group = _set(process_set)
    x = _checked(x, "allgather")
    if x.ndim == 0:
        raise ValueError("kolo.jax.allgather: x must have a first dimension to gather along (it is a scalar)")
    moved, back = _moved(x)
    return back(_allgather(moved, set_id, group.size))


def reducescatter(x, op=Average, process_set=global_process_set, name=None):
    """The op over the set of x, of which rank r keeps the r-th of size
    equal parts of the first dimension."""
    del name
    set_id, group = _set(process_set)
    n = group.size
    x = jnp.asarray(x)
    if x.ndim == 0 or x.shape[0] % n:
        raise ValueError("kolo.jax.reducescatter: the first dimension (%s) must split into %d equal parts, one "
                         "per rank" % (x.shape[0] if x.ndim else "none", n))
    carried, code, back = _carried(x, op, "reducescatter")
    return back(_reducescatter(carried, code, set_id, n))


# ---- broadcast and alltoall ----------------------------------------------------------
def _broadcast_adjoint(root, set_id, is_root, in_place, cotangent):
    summed = _allreduce(cotangent, OP_CODES[Sum], set_id, True)
    return summed if is_root else jnp.zeros_like(summed)


_broadcast = _differentiable(
    lambda x, root, set_id, is_root, in_place: _p.broadcast_p.bind(x, process_set=set_id, root=root,
                                                                   in_place=in_place),
    _broadcast_adjoint, 4)
_alltoall = _differentiable(lambda x, set_id, block: _p.alltoall_p.bind(x, process_set=set_id, block=block),
                            lambda set_id, block, cotangent: _alltoall(cotangent, set_id, block), 2)


def broadcast(x, root_rank, process_set=global_process_set, name=None):
    """root_rank's x (a world rank, member of the set) on every rank of the set."""
    del name
    set_id, group = _set(process_set)
    if root_rank not in group.ranks:
        raise ValueError("kolo.jax.broadcast: root_rank %d is not a rank of the process set (%s)"
                         % (root_rank, group.ranks))
    moved, back = _moved(_checked(x, "broadcast"))
    return back(_broadcast(moved, group.ranks.index(root_rank), set_id, rank() == root_rank, _in_place(moved)))


def alltoall(x, process_set=global_process_set, name=None):
    """x's first dimension in size equal blocks: block q goes to rank q,
    and the result's block q came from rank q."""
    del name
    set_id, group = _set(process_set)
    n = group.size
    x = _checked(x, "alltoall")
    if x.ndim == 0 or x.shape[0] % n:
        raise ValueError("kolo.jax.alltoall: the first dimension (%s) must split into %d equal blocks, one per "
                         "rank" % (x.shape[0] if x.ndim else "none", n))
    moved, back = _moved(x)
    return back(_alltoall(moved, set_id, int(np.prod(moved.shape)) // n))


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called it (in program order
    with the other collectives)."""
    set_id, _ = _set(process_set)
    _p.barrier_p.bind(process_set=set_id)


# ---- pytrees ------------------------------------------------------------------------
def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """root_rank's values of a pytree of arrays (parameters, optimizer
    state), on every rank of the set."""
    return jax.tree.map(lambda v: broadcast(v, root_rank, process_set), variables)


def average_gradients(grads, op=Average, process_set=global_process_set):
    """A pytree of gradients reduced over the set (averaged by default):
    one collective per dtype over the leaves where they lie
    (grouped_allreduce), each reduced in place."""
    leaves, tree = jax.tree.flatten(grads)
    return jax.tree.unflatten(tree, grouped_allreduce(leaves, op=op, process_set=process_set))


class DistributedOptimizer:
    """An optax-style optimizer (init(params) -> state,
    update(grads, state, params) -> (updates, state)) whose updates use the
    gradients averaged over the set: Horovod's DistributedOptimizer for
    JAX's optimizers."""

    def __init__(self, optimizer, op=Average, process_set=global_process_set):
        if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
            raise TypeError("kolo.jax.DistributedOptimizer wraps an optimizer with init() and update() (optax's "
                            "GradientTransformation), not %s" % type(optimizer).__name__)
        self.optimizer, self.op, self.process_set = optimizer, op, process_set

    def init(self, params):
        return self.optimizer.init(params)

    def update(self, grads, state, params=None):
        return self.optimizer.update(average_gradients(grads, self.op, self.process_set), state, params)
