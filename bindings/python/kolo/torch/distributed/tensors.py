"""How the kolo backend hands torch tensors to kolo's C API: which dtypes
and reductions kolo has, contiguous buffers (the caller's own memory, or a
copy written back), tensors packed into one byte buffer and back, and the
argument checks every operation shares."""
import ctypes

import torch
import torch.distributed as dist

from kolo._library import DTYPE_CODES, OP_AVG, OP_MAX, OP_MIN, OP_PROD, OP_SUM
from kolo.torch._adapter import _NAMES

# The dtypes kolo reduces (those of kolo_dtype_t); any other dtype is moved
# as bytes by the operations that only copy.
REDUCED = {dtype: name for dtype, name in _NAMES.items() if name in DTYPE_CODES}
BYTES = DTYPE_CODES["uint8"]
OPS = {dist.ReduceOp.SUM: OP_SUM, dist.ReduceOp.PRODUCT: OP_PROD, dist.ReduceOp.MIN: OP_MIN,
       dist.ReduceOp.MAX: OP_MAX, dist.ReduceOp.AVG: OP_AVG}
# bool as uint8 0/1: or for SUM and MAX, and for PRODUCT and MIN (gloo's).
BOOL_OPS = {OP_SUM: OP_MAX, OP_MAX: OP_MAX, OP_PROD: OP_MIN, OP_MIN: OP_MIN}


def size_array(values):
    return (ctypes.c_size_t * max(len(values), 1))(*values)


class Buffer:
    """A tensor as kolo sees it: a contiguous tensor (the caller's own, or a
    copy written back by `write_back`) and its address."""

    def __init__(self, tensor, output=True):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError("kolo: expected a torch.Tensor, got %s" % type(tensor).__name__)
        if tensor.device.type not in ("cpu", "cuda"):
            raise RuntimeError("kolo: tensors must be on the CPU or a CUDA device, not %s" % tensor.device)
        if tensor.is_sparse:
            raise RuntimeError("kolo: sparse tensors are not supported by the kolo backend")
        self.user = tensor
        self.tensor = tensor if tensor.is_contiguous() else tensor.contiguous()
        self.copied = output and self.tensor is not tensor
        if tensor.is_cuda:
            # kolo runs device buffers after the legacy default stream's work:
            # make the current stream's work (which produced them) done first.
            torch.cuda.current_stream(tensor.device).synchronize()
        self.address = self.tensor.data_ptr()

    @property
    def nbytes(self):
        return self.tensor.numel() * self.tensor.element_size()

    def write_back(self):
        if self.copied:
            self.user.copy_(self.tensor)


def reduced(tensor, op):
    """(kolo dtype, kolo op) for reducing tensor with torch's op, or a
    RuntimeError naming what kolo cannot reduce."""
    code = OPS.get(op)
    if code is None:
        raise RuntimeError("kolo: ReduceOp %s is not supported by the kolo backend (it has SUM, PRODUCT, MIN, MAX "
                           "and AVG)" % op)
    if tensor.dtype == torch.bool:
        if code == OP_AVG:
            raise RuntimeError("kolo: ReduceOp AVG of bool tensors is undefined")
        return DTYPE_CODES["uint8"], BOOL_OPS[code]
    name = REDUCED.get(tensor.dtype)
    if name is None:
        raise RuntimeError("kolo: cannot reduce %s tensors (kolo reduces %s)"
                           % (tensor.dtype, ", ".join(str(d) for d in REDUCED)))
    return DTYPE_CODES[name], code


def same_layout(tensors, what):
    first = tensors[0]
    for t in tensors[1:]:
        if t.dtype != first.dtype or t.numel() != first.numel():
            raise RuntimeError("kolo: %s tensors must all have the same dtype and number of elements; got %s[%d] "
                               "and %s[%d]" % (what, first.dtype, first.numel(), t.dtype, t.numel()))


def concatenated(tensors):
    """The tensors' elements one after another in one contiguous tensor of
    their dtype (bool as uint8, as kolo reduces it), for one reduction."""
    flat = torch.cat([t.contiguous().view(-1) for t in tensors])
    return flat.view(torch.uint8) if flat.dtype == torch.bool else flat


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
