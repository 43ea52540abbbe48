"""Adasum (op=hvd.Adasum), Horovod's adaptive summation, for host tensors.

Horovod defines it pairwise: two gradients a and b combine into
    (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
(a coefficient stays 1 where its vector's squared norm is below
sqrt(DBL_MIN)), so orthogonal gradients add and parallel ones average.
Ranks combine in a binary tree: at level d = 1, 2, 4... rank r's partial
result meets rank r ^ d's, which needs a power-of-two number of ranks.
Dot products and norms are taken in float64, as Horovod takes them.

kolo runs it as an allgather of the ranks' tensors followed by the same
tree computed on every rank, in float64, rounded to the tensor's dtype once
at the end (Horovod rounds after each level). The results are identical on
every rank. It moves N times the tensor's bytes to each rank where
Horovod's vector-halving schedule moves about twice: right for a few
ranks, not a bandwidth-optimal reduction.
"""
import sys

import torch

from kolo import _collectives as C
from kolo import _runtime
from kolo.torch._adapter import adapter as _tx

_SQRT_DOUBLE_MIN = sys.float_info.min ** 0.5


def combine(a, b):
    """Horovod's pairwise Adasum of two float64 vectors."""
    dot = torch.dot(a, b).item()
    anormsq = torch.dot(a, a).item()
    bnormsq = torch.dot(b, b).item()
    acoeff = 1.0 - dot / anormsq * 0.5 if anormsq >= _SQRT_DOUBLE_MIN else 1.0
    bcoeff = 1.0 - dot / bnormsq * 0.5 if bnormsq >= _SQRT_DOUBLE_MIN else 1.0
    return acoeff * a + bcoeff * b


def tree(vectors):
    """Adasum of a power-of-two number of vectors, in Horovod's order."""
    level = list(vectors)
    while len(level) > 1:
        level = [combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def allreduce_async(tensor, inplace, name, prescale_factor, postscale_factor, group):
    """Adasum of the group's tensors (float dtypes); a handle whose result
    is a new tensor, or tensor itself written when inplace."""
    if not tensor.is_floating_point():
        raise TypeError("Adasum reduces floating-point tensors, not %s" % tensor.dtype)
    n = group.size
    if n & (n - 1):
        raise NotImplementedError("Running Adasum with non-power of 2 ranks is not supported yet (%d ranks)" % n)
    flat = tensor.detach().reshape(1, -1)
    if prescale_factor != 1.0:
        flat = flat * prescale_factor
    name = group.operation_name("adasum", name).decode()
    gathered = C.allgather_async(_tx, flat.contiguous(), name, group)

    def finish(outputs):
        rows = outputs[0].to(device="cpu", dtype=torch.float64)
        result = tree(list(rows)) * postscale_factor
        result = result.reshape(tensor.shape).to(dtype=tensor.dtype, device=tensor.device)
        if inplace:
            with torch.no_grad():
                tensor.copy_(result)
            return tensor
        return result

    return _runtime.Combined([gathered], finish)
