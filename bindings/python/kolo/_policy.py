"""What kolo reduces, and with which ops: the one policy every front end
follows (kolo on NumPy arrays, kolo.torch's Horovod API, the
torch.distributed backend, kolo.tensorflow, and any later one), so that
they all accept and refuse the same dtypes and ops, with the same message.

Dtypes are named as NumPy names them ("int16", "bool", "bfloat16",
"complex64"), which torch's and TensorFlow's names follow. Ops are
numbered as Horovod's (its API passes the numbers, and kolo.tensorflow's
kernels take them as attributes); a front end with ops of its own (torch's
ReduceOp) maps them to these. Moving data (allgather, broadcast, alltoall,
send and receive) takes any dtype of fixed-size elements as its bytes: only
reductions need a policy.

Standard library only: a front end consults it before its array library
has done anything, and a refusal raises on the calling rank, before any
operation is submitted.
"""
import warnings
from collections import namedtuple

# ---- ops ----------------------------------------------------------------------------

Average, Sum, Adasum, Min, Max, Product = range(6)
OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max", Product: "Product"}

# The ops each reduction takes. kolo's engine has no Adasum: the Horovod
# API's front ends compute it from an allgather, for allreduce alone (as
# Horovod, which refuses it for reducescatter). "reduce" is
# torch.distributed's reduction to one root rank.
COLLECTIVE_OPS = {
    "allreduce": (Average, Sum, Adasum, Min, Max, Product),
    "reducescatter": (Average, Sum, Min, Max, Product),
    "reduce": (Average, Sum, Min, Max, Product),
}

# ---- dtypes -------------------------------------------------------------------------

# How the engine gets a dtype's elements:
NATIVE = "native"  # as they are: the engine reduces this dtype (kolo_dtype_t)
LOGICAL = "logical"  # bool's bytes, 0 or 1, as uint8: or is Max, and is Min
WIDENED = "widened"  # a copy in the wider dtype: sums and products wrap the same modulo 2**16
PAIRS = "pairs"  # the same memory as twice as many reals (real, imaginary)

# The ops each kind of dtype takes, and the engine op each becomes.
_ARITHMETIC = {Average: Average, Sum: Sum, Min: Min, Max: Max, Product: Product}
_FLOATING = {**_ARITHMETIC, Adasum: Adasum}
_LOGICAL = {Sum: Max, Max: Max, Min: Min, Product: Min}
_COMPLEX = {Average: Average, Sum: Sum}  # componentwise; an order or a product of pairs is not complex's

# Every dtype kolo reduces: (the engine's dtype, how its elements get
# there, {op: the engine's op}).
Carriage = namedtuple("Carriage", "engine_dtype how ops")
DTYPES = {
    "bool": Carriage("uint8", LOGICAL, _LOGICAL),
    "int8": Carriage("int8", NATIVE, _ARITHMETIC),
    "uint8": Carriage("uint8", NATIVE, _ARITHMETIC),
    "int16": Carriage("int32", WIDENED, _ARITHMETIC),
    "uint16": Carriage("uint32", WIDENED, _ARITHMETIC),
    "int32": Carriage("int32", NATIVE, _ARITHMETIC),
    "uint32": Carriage("uint32", NATIVE, _ARITHMETIC),
    "int64": Carriage("int64", NATIVE, _ARITHMETIC),
    "uint64": Carriage("uint64", NATIVE, _ARITHMETIC),
    "float16": Carriage("float16", NATIVE, _FLOATING),
    "bfloat16": Carriage("bfloat16", NATIVE, _FLOATING),
    "float32": Carriage("float32", NATIVE, _FLOATING),
    "float64": Carriage("float64", NATIVE, _FLOATING),
    "complex64": Carriage("float32", PAIRS, _COMPLEX),
    "complex128": Carriage("float64", PAIRS, _COMPLEX),
}

# ---- refusals -----------------------------------------------------------------------


class DtypeRefusedError(TypeError, RuntimeError):
    """A dtype kolo does not reduce, or not with that op: a TypeError, as
    Python and Horovod raise for an argument of the wrong type, and a
    RuntimeError, as torch.distributed's backends raise."""


class OpRefusedError(NotImplementedError, ValueError):
    """An op kolo does not know, or one the collective does not take: a
    ValueError (a bad argument), and a NotImplementedError (a RuntimeError
    too) as Horovod raises for reducescatter's Adasum."""


def _spoken(ops):
    names = [OP_NAMES[op] for op in sorted(ops)]
    return names[0] if len(names) == 1 else "%s or %s" % (", ".join(names[:-1]), names[-1])


def check_op(op, collective):
    """Raises OpRefusedError unless `collective` takes `op`."""
    taken = COLLECTIVE_OPS[collective]
    if op in taken:
        return
    if op in OP_NAMES:
        raise OpRefusedError("%s: kolo does not reduce with %s here; use %s"
                             % (collective, OP_NAMES[op], _spoken(taken)))
    raise OpRefusedError("%s: unknown reduction op %s; use %s" % (collective, op, _spoken(taken)))


# What a front end hands the engine for one reduction: the engine's dtype
# (a DTYPES name), how the elements get there (NATIVE, LOGICAL, WIDENED,
# PAIRS) and the engine's op (Adasum: the front end's own computation).
Reduction = namedtuple("Reduction", "engine_dtype how engine_op")


def reduction(dtype, op, collective, scaled=False):
    """How `collective` reduces `dtype` tensors with `op` (scaled: with a
    prescale or postscale factor other than 1), or the refusal, raised:
    OpRefusedError for an op the collective does not take, else
    DtypeRefusedError for a dtype kolo does not reduce with that op."""
    check_op(op, collective)
    carriage = DTYPES.get(dtype)
    if carriage is None:
        raise DtypeRefusedError("%s: kolo cannot reduce %s tensors; it reduces %s"
                                % (collective, dtype, ", ".join(DTYPES)))
    engine_op = carriage.ops.get(op)
    if engine_op is None:
        raise DtypeRefusedError("%s: kolo reduces %s tensors with %s, not %s"
                                % (collective, dtype, _spoken(carriage.ops), OP_NAMES[op]))
    if scaled and carriage.how == LOGICAL:
        raise DtypeRefusedError("%s: kolo reduces %s tensors as logical or (Sum, Max) and and (Min, Product), "
                                "which take no prescale or postscale factor" % (collective, dtype))
    return Reduction(carriage.engine_dtype, carriage.how, engine_op)


def check_adasum_ranks(size):
    """Adasum's tree pairs ranks level by level: a power of two of them (Horovod's message)."""
    if size & (size - 1):
        raise NotImplementedError("Running Adasum with non-power of 2 ranks is not supported yet (%d ranks)" % size)


def resolve_op(op, average):
    """Horovod's rule: `average` is the deprecated spelling of op; neither means Average."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed", DeprecationWarning,
                      stacklevel=3)
        return Average if average else Sum
    return Average if op is None else op
