"""How the kolo backend hands torch tensors to kolo's C API: reductions
as kolo._policy decides them, contiguous buffers (the caller's own memory,
or a copy written back), tensors packed into one byte buffer and back, and
the argument checks every operation shares."""
import ctypes

import torch
import torch.distributed as dist

from kolo import _policy
from kolo._library import DTYPE_CODES, OP_CODES
from kolo.torch._adapter import dtype_name

BYTES = DTYPE_CODES["uint8"]
# torch's reductions as kolo's ops; the others (the bitwise ones,
# PREMUL_SUM) are ops kolo does not know, named for the policy's message
# (a RedOpType compares equal to its number, which may be one of kolo's).
OPS = {dist.ReduceOp.SUM: _policy.Sum, dist.ReduceOp.PRODUCT: _policy.Product, dist.ReduceOp.MIN: _policy.Min,
       dist.ReduceOp.MAX: _policy.Max, dist.ReduceOp.AVG: _policy.Average}


def size_array(values):
    return (ctypes.c_size_t * max(len(values), 1))(*values)


class Reduction:
    """How kolo reduces tensors of one dtype with one of torch's ops in
    `collective` (kolo._policy's Reduction; a refusal raises, naming what
    kolo does not take): the engine's dtype and op, and each tensor's
    elements as the engine reads them."""

    def __init__(self, dtype, op, collective):
        plan = _policy.reduction(dtype_name(dtype), OPS.get(op, getattr(op, "name", str(op))), collective)
        self.how = plan.how
        self.dtype = DTYPE_CODES[plan.engine_dtype]
        self.op = OP_CODES[plan.engine_op]
        self._engine_dtype = getattr(torch, plan.engine_dtype)

    def engine_form(self, tensor):
        """A contiguous tensor's elements as the engine reduces them: its
        own memory, read as uint8 (bool) or as (real, imaginary) pairs; or
        a widened copy, which write_back narrows into it."""
        if self.how == _policy.PAIRS:
            return torch.view_as_real(tensor)
        if self.how == _policy.WIDENED:
            return tensor.to(self._engine_dtype)
        return tensor.view(self._engine_dtype)

    def count(self, numel):
        """The engine's elements for numel of the tensor's."""
        return 2 * numel if self.how == _policy.PAIRS else numel


class Buffer:
    """A tensor as kolo sees it: a contiguous tensor (the caller's own, or a
    copy written back by `write_back`), in the form a reduction's engine
    takes it when given one, and its address."""

    def __init__(self, tensor, output=True, reduction=None):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError("kolo: expected a torch.Tensor, got %s" % type(tensor).__name__)
        if tensor.device.type not in ("cpu", "cuda"):
            raise RuntimeError("kolo: tensors must be on the CPU or a CUDA device, not %s" % tensor.device)
        if tensor.is_sparse:
            raise RuntimeError("kolo: sparse tensors are not supported by the kolo backend")
        self.user = tensor
        # A lazily conjugated or negated view's memory is not its value: copied, like a strided one.
        dense = tensor.is_contiguous() and not tensor.is_conj() and not tensor.is_neg()
        self.tensor = tensor if dense else tensor.resolve_conj().resolve_neg().contiguous()
        self.copied = output and self.tensor is not tensor
        self.engine = reduction.engine_form(self.tensor) if reduction is not None else self.tensor
        self.widened = reduction is not None and reduction.how == _policy.WIDENED
        self.address = self.engine.data_ptr()

    @property
    def count(self):
        """The engine's elements."""
        return self.engine.numel()

    @property
    def nbytes(self):
        return self.engine.numel() * self.engine.element_size()

    def write_back(self):
        if self.widened:
            self.tensor.copy_(self.engine)  # narrowing wraps, as the sum modulo 2**16 does
        if self.copied:
            self.user.copy_(self.tensor)


def _memory_of(keep):
    """The tensors an operation's `keep` (as the group's _run takes it)
    hands to kolo: each Buffer's engine form, and the tensors themselves."""
    return [k.engine if isinstance(k, Buffer) else k for k in keep if isinstance(k, (Buffer, torch.Tensor))]


def cuda_device(keep):
    """The CUDA device of all of an operation's tensors, or None where any
    is host memory (or there are none)."""
    tensors = _memory_of(keep)
    if not tensors or not all(t.is_cuda for t in tensors):
        return None
    return tensors[0].device


def cuda_devices(keep):
    """The CUDA devices an operation's tensors are on (none: all on the host)."""
    return {t.device for t in _memory_of(keep) if t.is_cuda}


def same_layout(tensors, what):
    first = tensors[0]
    for t in tensors[1:]:
        if t.dtype != first.dtype or t.numel() != first.numel():
            raise RuntimeError("kolo: %s tensors must all have the same dtype and number of elements; got %s[%d] "
                               "and %s[%d]" % (what, first.dtype, first.numel(), t.dtype, t.numel()))


def concatenated(tensors):
    """The tensors' elements one after another in one contiguous tensor of
    their dtype, for one reduction."""
    return torch.cat([t.resolve_conj().resolve_neg().contiguous().view(-1) for t in tensors])


def pack(tensors):
    """One contiguous byte tensor holding tensors one after another."""
    if not tensors:
        return torch.empty(0, dtype=torch.uint8)
    return torch.cat([t.contiguous().view(-1).view(torch.uint8) for t in tensors])


def unpack(flat, tensors):
    """Copies a byte tensor laid out as pack's back into tensors."""
    offset = 0
    for t in tensors:
        n = t.numel() * t.element_size()
        t.copy_(flat[offset:offset + n].view(t.dtype).view(t.shape))
        offset += n


def single(tensors, what):
    if len(tensors) != 1:
        raise RuntimeError("kolo: %s takes one tensor per process (one device per process), got %d"
                           % (what, len(tensors)))
    return tensors[0]


def check_rank(rank, size, what):
    """rank, if it is one of a group of size ranks; what names it (root, peer)."""
    if not 0 <= rank < size:
        raise RuntimeError("kolo: %s rank %d is out of range for a group of %d ranks" % (what, rank, size))
    return rank


def offsets(counts):
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


def same_dtype(tensors, what):
    if any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError("kolo: %s tensors must all have one dtype; got %s"
                           % (what, sorted({str(t.dtype) for t in tensors})))


def op_of(opts):
    """The reduction opts ask for, as a ReduceOp.RedOpType (torch 2 hands a
    ReduceOp object, which compares equal to its type but hashes apart)."""
    if opts is None:
        return dist.ReduceOp.SUM
    return getattr(opts.reduceOp, "op", opts.reduceOp)
