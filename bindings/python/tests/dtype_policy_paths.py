"""The reductions every front end of kolo must treat alike, each front end
as a path that runs one, and the NumPy reference their values must equal.
Shared by test_dtype_policy.py (a world of one rank, in pytest's process)
and scripts/dtype_policy_job.py (two ranks started rank by rank).

What kolo reduces is restated here from what it promises (docs/python.md),
not read from kolo._policy, so that the table is checked too; a refusal's
words are the policy's, and every path must give exactly them."""
import re
import sys

import ml_dtypes
import numpy as np
import tensorflow as tf
import torch
import torch.distributed as dist

import kolo
import kolo.tensorflow as kolo_tf
import kolo.torch as kolo_torch
from kolo import _policy

FLOATING = ["float16", "bfloat16", "float32", "float64"]
INTEGER = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
COMPLEX = ["complex64", "complex128"]
NOT_REDUCED = ["float8_e4m3fn"]  # a dtype every framework has and kolo does not reduce
DTYPES = ["bool"] + INTEGER + FLOATING + COMPLEX + NOT_REDUCED
OPS = ["Average", "Sum", "Adasum", "Min", "Max", "Product"]
COLLECTIVES = ["allreduce", "reducescatter"]
CASES = [(c, d, o) for c in COLLECTIVES for d in DTYPES for o in OPS]
SHAPE = (4, 3)  # 4 rows: reduce-scatter parts of equal size on 1, 2 or 4 ranks


def accepted(collective, dtype, op):
    """Whether kolo reduces dtype with op in collective."""
    if dtype in NOT_REDUCED:
        return False
    if op == "Adasum":  # computed from an allgather, for allreduce, of floating-point values
        return collective == "allreduce" and dtype in FLOATING
    if dtype == "bool":  # logical or and and: no average
        return op != "Average"
    if dtype in COMPLEX:  # componentwise: no order, no product
        return op in ("Sum", "Average")
    return True


def numpy_dtype(name):
    return np.dtype(getattr(ml_dtypes, name, name))


def inputs(rank, dtype):
    """Rank rank's values: small integers, exact in every dtype; int16 and
    uint16 also have a column whose sums and products leave 16 bits (kolo
    reduces them in 32 and the result wraps modulo 2**16, as a sum in 16
    would, but averages stay exact)."""
    rng = np.random.default_rng(100 + rank)
    if dtype == "bool":
        return rng.integers(0, 2, SHAPE).astype(bool)
    values = rng.integers(0 if dtype.startswith("uint") else -3, 4, SHAPE)
    if dtype in COMPLEX:
        return (values + 1j * rng.integers(-3, 4, SHAPE)).astype(dtype)
    if dtype in ("int16", "uint16"):
        values[:, 0] = (30000 if dtype == "int16" else 60000) + 1000 * rank
    return values.astype(numpy_dtype(dtype))


def _adasum(vectors):
    """Horovod's Adasum of a power-of-two number of float64 vectors."""
    level = list(vectors)
    while len(level) > 1:
        pairs = []
        for a, b in zip(level[::2], level[1::2]):
            dot, aa, bb = a @ b, a @ a, b @ b
            ca = 1.0 - dot / (2 * aa) if aa >= sys.float_info.min ** 0.5 else 1.0
            cb = 1.0 - dot / (2 * bb) if bb >= sys.float_info.min ** 0.5 else 1.0
            pairs.append(ca * a + cb * b)
        level = pairs
    return level[0]


def reference(collective, dtype, op, rank, size):
    """This rank's result, computed here from every rank's inputs."""
    arrays = [inputs(r, dtype) for r in range(size)]
    if dtype == "bool":
        whole = np.any(arrays, axis=0) if op in ("Sum", "Max") else np.all(arrays, axis=0)
    elif op == "Adasum":
        whole = _adasum([a.astype(np.float64).ravel() for a in arrays]).reshape(SHAPE)
    else:
        # int64 holds every integer result exactly; the cast to dtype wraps as C's does.
        wide = np.stack([a.astype(np.complex128 if dtype in COMPLEX else np.float64 if dtype in FLOATING
                                  else np.int64) for a in arrays])
        whole = {"Sum": lambda: wide.sum(0), "Min": lambda: wide.min(0), "Max": lambda: wide.max(0),
                 "Product": lambda: wide.prod(0), "Average": lambda: wide.sum(0) / size}[op]()
        if op == "Average" and dtype in INTEGER:
            whole = np.trunc(whole).astype(np.int64)  # integer division, as C's
    whole = whole.astype(numpy_dtype(dtype))
    if collective == "reducescatter":
        rows = SHAPE[0] // size
        return whole[rank * rows:(rank + 1) * rows]
    return whole


def tensor_of(x):
    """A NumPy array as a torch tensor (through float32 for the dtypes torch
    cannot take from NumPy)."""
    if x.dtype.name in ("bfloat16", "float8_e4m3fn"):
        return torch.from_numpy(x.astype(np.float32)).to(getattr(torch, x.dtype.name))
    return torch.from_numpy(x.copy())


def array_of(t):
    if t.dtype in (torch.bfloat16, torch.float8_e4m3fn):
        return t.float().numpy().astype(numpy_dtype(str(t.dtype)[6:]))
    return t.numpy()


class NumpyPath:
    """kolo's Horovod-style API on NumPy arrays."""
    name = "numpy"

    def run(self, collective, x, op):
        return getattr(kolo, collective)(x, op=getattr(kolo, op))


class TorchPath:
    """kolo.torch, Horovod's API on torch tensors."""
    name = "torch"

    def run(self, collective, x, op):
        return array_of(getattr(kolo_torch, collective)(tensor_of(x), op=getattr(kolo_torch, op)))


class TorchDistributedPath:
    """torch.distributed on backend "kolo" (its default group)."""
    name = "torch.distributed"
    OPS = {"Sum": dist.ReduceOp.SUM, "Average": dist.ReduceOp.AVG, "Min": dist.ReduceOp.MIN,
           "Max": dist.ReduceOp.MAX, "Product": dist.ReduceOp.PRODUCT}

    def expressible(self, op):
        return op in self.OPS  # torch has no Adasum

    def run(self, collective, x, op):
        t = tensor_of(x)
        if collective == "allreduce":
            dist.all_reduce(t, self.OPS[op])
            return array_of(t)
        out = torch.empty((t.shape[0] // dist.get_world_size(),) + tuple(t.shape[1:]), dtype=t.dtype)
        dist.reduce_scatter_single(out, t, self.OPS[op])
        return array_of(out)

    def own_refusal(self, collective, dtype, op):
        """torch's all_reduce refuses complex orders and products itself,
        before any backend, in its own words (a ValueError naming both)."""
        if collective == "allreduce" and dtype in COMPLEX and op in ("Min", "Max", "Product"):
            return ValueError, r"all_reduce does not support RedOpType\.%s on complex tensors" % op.upper()
        return None


class TensorflowPath:
    """kolo.tensorflow's ops, eagerly."""
    name = "tensorflow"

    def run(self, collective, x, op):
        return getattr(kolo_tf, collective)(tf.constant(x), op=getattr(kolo_tf, op)).numpy()


PATHS = [NumpyPath(), TorchPath(), TorchDistributedPath(), TensorflowPath()]


def policy_refusal(collective, dtype, op):
    """The error kolo._policy raises for a reduction kolo refuses."""
    try:
        _policy.reduction(dtype, getattr(_policy, op), collective)
    except (_policy.DtypeRefusedError, _policy.OpRefusedError) as e:
        return e
    raise AssertionError("kolo._policy accepts %s of %s with %s, which kolo promises to refuse"
                         % (collective, dtype, op))


def check(path, collective, dtype, op, rank, size):
    """Runs the case on path: raises AssertionError unless its values equal
    the reference, or (a refused case) unless it raised the policy's error.
    False for a case the path has no words for (torch's Adasum)."""
    if not getattr(path, "expressible", lambda op: True)(op):
        return False
    x = inputs(rank, dtype)
    if not accepted(collective, dtype, op):
        own = getattr(path, "own_refusal", lambda *case: None)(collective, dtype, op)
        expected = policy_refusal(collective, dtype, op)
        kind, words = own if own else (type(expected), re.escape(str(expected)))
        try:
            path.run(collective, x, op)
        except Exception as e:  # any: what it raised is what is checked
            assert isinstance(e, kind) and re.fullmatch(words, str(e)), \
                "%s raised %s: %s; expected %s: %s" % (path.name, type(e).__name__, e, kind.__name__, words)
            return True
        raise AssertionError("%s took %s of %s with %s, which kolo refuses" % (path.name, collective, dtype, op))
    got = np.asarray(path.run(collective, x, op))
    want = reference(collective, dtype, op, rank, size)
    assert got.dtype == want.dtype and got.shape == want.shape, (path.name, got.dtype, got.shape, want.dtype)
    exact = dtype not in ("float16", "bfloat16") and op != "Adasum"
    as_numbers = np.complex128 if dtype in COMPLEX else np.float64
    np.testing.assert_allclose(got.astype(as_numbers), want.astype(as_numbers), rtol=0 if exact else 1e-2,
                               err_msg="%s: %s of %s with %s" % (path.name, collective, dtype, op))
    return True
