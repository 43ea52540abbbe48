"""The horovod.torch collectives on CPU tensors.

Each `_async` call returns a handle for poll()/synchronize(); the plain
forms wait. Out-of-place forms return new tensors; `_` forms write into
the tensor given and return it. allreduce, grouped_allreduce, allgather and
broadcast are differentiable, with horovod's gradients: allreduce's is the
same allreduce of the gradient; allgather's is this rank's rows of the
averaged gradient; broadcast's is the averaged gradient on the root and
zero elsewhere.
"""
import warnings

import torch

from kolo import _collectives as C
from kolo import _runtime
from kolo._collectives import Adasum, Average, Max, Min, Product, Sum  # noqa: F401 (re-exported)
from kolo.torch._adapter import adapter as _tx
from kolo.torch.compression import Compression

poll = _runtime.poll
synchronize = _runtime.synchronize


def _resolve_op(op, average):
    # horovod's rule: `average` is the deprecated spelling of op.
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed", DeprecationWarning)
        return Average if average else Sum
    return Average if op is None else op


# ---- allreduce ---------------------------------------------------------------

def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    return C.allreduce_async(_tx, tensor, False, name, _resolve_op(op, average), prescale_factor, postscale_factor)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    return C.allreduce_async(_tx, tensor, True, name, _resolve_op(op, average), prescale_factor, postscale_factor)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor))


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor):
        ctx.args = (op, prescale_factor, postscale_factor)
        return synchronize(allreduce_async(tensor, name=name, op=op, prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale_factor, postscale_factor = ctx.args
        grad = allreduce(grad_output, op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor)
        return grad, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0):
    """op over every rank's tensor (Average unless told), as a new tensor."""
    compressed, ctx = compression.compress(tensor)
    summed = _Allreduce.apply(compressed, name, _resolve_op(op, average), prescale_factor, postscale_factor)
    return compression.decompress(summed, ctx)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    return C.grouped_allreduce_async(_tx, tensors, False, name, _resolve_op(op, average), prescale_factor,
                                     postscale_factor)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0):
    return C.grouped_allreduce_async(_tx, tensors, True, name, _resolve_op(op, average), prescale_factor,
                                     postscale_factor)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor))


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, *tensors):
        ctx.args = (op, prescale_factor, postscale_factor)
        return tuple(synchronize(grouped_allreduce_async(list(tensors), name=name, op=op,
                                                         prescale_factor=prescale_factor,
                                                         postscale_factor=postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        op, prescale_factor, postscale_factor = ctx.args
        grads = grouped_allreduce(list(grad_outputs), op=op, prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor)
        return (None, None, None, None) + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0):
    """Several tensors of one dtype reduced as one operation; a list of new tensors."""
    compressed = [compression.compress(t) for t in tensors]
    outputs = _GroupedAllreduce.apply(name, _resolve_op(op, average), prescale_factor, postscale_factor,
                                      *[t for t, _ in compressed])
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(outputs, compressed)]


# ---- allgather, broadcast ------------------------------------------------------

def allgather_async(tensor, name=None):
    return C.allgather_async(_tx, tensor, name)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        handle = allgather_async(tensor, name)
        output = synchronize(handle)
        ctx.rows = handle.rows
        return output

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average)
        r = _runtime.rank()
        return grad.narrow(0, sum(ctx.rows[:r]), ctx.rows[r]), None


def allgather(tensor, name=None):
    """Every rank's tensor concatenated along the first dimension in rank
    order; the first dimension may differ between ranks."""
    return _Allgather.apply(tensor, name)


def broadcast_async(tensor, root_rank, name=None):
    return C.broadcast_async(_tx, tensor, root_rank, False, name)


def broadcast_async_(tensor, root_rank, name=None):
    return C.broadcast_async(_tx, tensor, root_rank, True, name)


def broadcast_(tensor, root_rank, name=None):
    return synchronize(broadcast_async_(tensor, root_rank, name))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average)
        if _runtime.rank() != ctx.root_rank:
            grad = torch.zeros_like(grad)
        return grad, None, None


def broadcast(tensor, root_rank, name=None):
    """root_rank's tensor, as a new tensor on every rank."""
    return _Broadcast.apply(tensor, root_rank, name)


# ---- alltoall, reducescatter -----------------------------------------------------

def alltoall_async(tensor, splits=None, name=None):
    """synchronize() gives the rows received; the handle's `rows` then says
    how many came from each rank."""
    return C.alltoall_async(_tx, tensor, _split_list(splits), name)


def _split_list(splits):
    if isinstance(splits, torch.Tensor):
        return splits.tolist()
    return splits


def alltoall(tensor, splits=None, name=None):
    """Sends splits[q] rows of tensor (equal parts if None) to rank q and
    returns the rows received in rank order, with (if splits was given) a
    tensor of how many came from each rank."""
    handle = alltoall_async(tensor, splits, name)
    output = synchronize(handle)
    if splits is None:
        return output
    return output, torch.tensor(handle.rows, dtype=torch.int32)


def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0):
    return C.reducescatter_async(_tx, tensor, name, op, prescale_factor, postscale_factor)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, prescale_factor=1.0,
                  postscale_factor=1.0):
    """op over every rank's tensor, cut along the first dimension: rank r
    gets part r (the first shape[0] % size parts have one more row)."""
    compressed, ctx = compression.compress(tensor)
    out = synchronize(reducescatter_async(compressed, name, op, prescale_factor, postscale_factor))
    return compression.decompress(out, ctx)


# ---- join, barrier ------------------------------------------------------------

def join(device=-1):
    """This rank is out of data: until every rank has joined, it contributes
    neutral values (zeros to sums, no rows to allgathers). Returns the last
    rank to join."""
    del device  # CPU only
    return _runtime.join()


def barrier():
    _runtime.barrier()
