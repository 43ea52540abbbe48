"""Adasum (op=Adasum), Horovod's adaptive summation, on NumPy arrays, and
the tree kolo.torch's Adasum computes too.

Horovod defines it pairwise: two gradients a and b combine into
    (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
(a coefficient stays 1 where its vector's squared norm is below
sqrt(DBL_MIN)), so orthogonal gradients add and parallel ones average.
Ranks combine in a binary tree: at level d = 1, 2, 4... rank r's partial
result meets rank r ^ d's, which needs a power-of-two number of ranks.
Dot products and norms are taken in float64, as Horovod takes them.

kolo runs it as an allgather of the ranks' arrays followed by the same
tree computed on every rank, in float64, rounded to the array's dtype once
at the end (Horovod rounds after each level). The results are identical on
every rank. It moves N times the array's bytes to each rank where
Horovod's vector-halving schedule moves about twice: right for a few
ranks, not a bandwidth-optimal reduction. Which dtypes it takes (the
floating ones) is kolo._policy's.
"""
import sys

import numpy as np

from kolo import _collectives as C
from kolo import _policy, _runtime

_SQRT_DOUBLE_MIN = sys.float_info.min ** 0.5


def _combine(a, b):
    """Horovod's pairwise Adasum of two float64 vectors."""
    dot = float(np.dot(a, b))
    anormsq = float(np.dot(a, a))
    bnormsq = float(np.dot(b, b))
    acoeff = 1.0 - dot / anormsq * 0.5 if anormsq >= _SQRT_DOUBLE_MIN else 1.0
    bcoeff = 1.0 - dot / bnormsq * 0.5 if bnormsq >= _SQRT_DOUBLE_MIN else 1.0
    return acoeff * a + bcoeff * b


def tree(rows):
    """Adasum of the rows of a float64 array (one per rank, a power of two
    of them), in Horovod's order."""
    level = list(rows)
    while len(level) > 1:
        level = [_combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def check(dtype, prescale_factor, postscale_factor, group):
    """Raises unless the policy lets `group` take Adasum of `dtype` arrays."""
    _policy.reduction(dtype, _policy.Adasum, "allreduce", scaled=prescale_factor != 1.0 or postscale_factor != 1.0)
    _policy.check_adasum_ranks(group.size)


def allreduce_async(xp, array, inplace, name, prescale_factor, postscale_factor, group):
    """Adasum of the group's NumPy arrays (xp: kolo._numpy's adapter); a
    handle whose result is a new array, or array itself written when inplace."""
    check(xp.describe(array).dtype, prescale_factor, postscale_factor, group)
    flat = np.ascontiguousarray(array).reshape(1, -1)
    if prescale_factor != 1.0:
        flat = flat * flat.dtype.type(prescale_factor)
    gathered = C.allgather_async(xp, flat, group.operation_name("adasum", name).decode(), group)

    def finish(outputs):
        result = (tree(outputs[0].astype(np.float64)) * postscale_factor).reshape(array.shape).astype(array.dtype)
        if inplace:
            np.copyto(array, result)
            return array
        return result

    return _runtime.Combined([gathered], finish)
