"""The horovod.torch collectives on CPU and CUDA tensors (CUDA ones on the
GPU where the engine takes them there; kolo._collectives says which).

Each `_async` call returns a handle for poll()/synchronize(); the plain
forms wait. Out-of-place forms return new tensors; `_` forms write into
the tensor given and return it. Every collective takes `process_set=`
(default: the global set) and runs among that set's ranks only; roots are
world ranks, as in Horovod. allreduce, grouped_allreduce, allgather,
grouped_allgather, broadcast, alltoall, reducescatter and
grouped_reducescatter are differentiable, with Horovod's gradients.
"""
import torch

from kolo import _collectives as C
from kolo import _runtime
from kolo._policy import Adasum, Average, Max, Min, Product, Sum  # noqa: F401 (re-exported)
from kolo._policy import resolve_op
from kolo._process_sets import global_process_set, group_of
from kolo.torch import adasum as _adasum
from kolo.torch._adapter import adapter as _tx
from kolo.torch.compression import Compression

poll = _runtime.poll
synchronize = _runtime.synchronize


# ---- allreduce ---------------------------------------------------------------

def _allreduce_async(tensor, inplace, name, op, prescale_factor, postscale_factor, process_set, compression=None):
    group = group_of(process_set)
    if op == Adasum:
        return _adasum.allreduce_async(tensor, inplace, name, prescale_factor, postscale_factor, group)
    return C.allreduce_async(_tx, tensor, inplace, name, op, prescale_factor, postscale_factor, group, compression)


# compression (kolo's addition to Horovod's signatures): a wire format's
# Compression class (Compression.int8, ...) has the allreduce carry it.
def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set, compression=None):
    return _allreduce_async(tensor, False, name, resolve_op(op, average), prescale_factor, postscale_factor,
                            process_set, compression)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set, compression=None):
    return _allreduce_async(tensor, True, name, resolve_op(op, average), prescale_factor, postscale_factor,
                            process_set, compression)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set))


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set, compression):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return synchronize(allreduce_async(tensor, name=name, op=op, prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor, process_set=process_set,
                                           compression=compression))

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grad = allreduce(grad_output, op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                         process_set=process_set)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """op over every rank's tensor (Average unless told), as a new tensor."""
    compressed, ctx = compression.compress(tensor)
    summed = _Allreduce.apply(compressed, name, resolve_op(op, average), prescale_factor, postscale_factor,
                              process_set, compression)
    return compression.decompress(summed, ctx)


def _each_of(kind, tensors, name, group, start):
    """One operation per tensor, start(tensor, name) named NAME.0, NAME.1...
    (NAME the caller's or numbered for `kind`), as one handle whose result
    is the list of their results."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("%s needs at least one tensor" % kind)
    base = group.operation_name(kind, name).decode()
    return _runtime.Combined([start(t, "%s.%d" % (base, i)) for i, t in enumerate(tensors)])


def _grouped_allreduce_async(tensors, inplace, name, op, prescale_factor, postscale_factor, process_set,
                             compression=None):
    group = group_of(process_set)
    if op == Adasum:
        return _each_of("grouped_allreduce", tensors, name, group, lambda t, n: _adasum.allreduce_async(
            t, inplace, n, prescale_factor, postscale_factor, group))
    return C.grouped_allreduce_async(_tx, tensors, inplace, name, op, prescale_factor, postscale_factor, group,
                                     compression)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set, compression=None):
    return _grouped_allreduce_async(tensors, False, name, resolve_op(op, average), prescale_factor,
                                    postscale_factor, process_set, compression)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set, compression=None):
    return _grouped_allreduce_async(tensors, True, name, resolve_op(op, average), prescale_factor,
                                    postscale_factor, process_set, compression)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, compression, *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(grouped_allreduce_async(list(tensors), name=name, op=op,
                                                         prescale_factor=prescale_factor,
                                                         postscale_factor=postscale_factor,
                                                         process_set=process_set, compression=compression)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grads = grouped_allreduce(list(grad_outputs), op=op, prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor, process_set=process_set)
        return (None, None, None, None, None, None) + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Several tensors of one dtype reduced as one operation; a list of new tensors."""
    compressed = [compression.compress(t) for t in tensors]
    outputs = _GroupedAllreduce.apply(name, resolve_op(op, average), prescale_factor, postscale_factor,
                                      process_set, compression, *[t for t, _ in compressed])
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(outputs, compressed)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """A sparse (COO) tensor reduced as Horovod does: its indices and values
    are allgathered (names NAME.indices and NAME.values) and form one sparse
    tensor holding every rank's entries (duplicates not coalesced), values
    divided by the set's size for Average. Returns a function that waits and
    returns that tensor."""
    if op not in (Average, Sum):
        raise ValueError("sparse_allreduce_async supports op=Average or op=Sum, not %r" % (op,))
    t = tensor
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(), name="%s.indices" % name,
                                     process_set=process_set)
    values_handle = allgather_async(t._values(), name="%s.values" % name, process_set=process_set)
    size = group_of(process_set).size

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / size
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size())

    return handle


# ---- allgather, broadcast ------------------------------------------------------

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Result: the set's tensors concatenated along the first dimension in
    rank order; the first dimension may differ between ranks."""
    return C.allgather_async(_tx, tensor, name, group_of(process_set))


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        handle = allgather_async(tensor, name, process_set)
        output = synchronize(handle)
        ctx.rows = handle.rows
        ctx.process_set = process_set
        return output

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        r = group_of(ctx.process_set).rank
        return grad.narrow(0, sum(ctx.rows[:r]), ctx.rows[r]), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along the first dimension in rank
    order; the first dimension may differ between ranks."""
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor, as one handle whose result is the list of
    outputs (named NAME.0, NAME.1... within the set)."""
    group = group_of(process_set)
    return _each_of("grouped_allgather", tensors, name, group, lambda t, n: C.allgather_async(_tx, t, n, group))


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        handle = grouped_allgather_async(tensors, name, process_set)
        outputs = synchronize(handle)
        ctx.rows = [part.rows for part in handle.parts]
        ctx.process_set = process_set
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), op=Average, process_set=ctx.process_set)
        r = group_of(ctx.process_set).rank
        return (None, None) + tuple(g.narrow(0, sum(rows[:r]), rows[r]) for g, rows in zip(grads, ctx.rows))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor; a list of new tensors."""
    return list(_GroupedAllgather.apply(name, process_set, *tensors))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return C.broadcast_async(_tx, tensor, root_rank, False, name, group_of(process_set))


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    return C.broadcast_async(_tx, tensor, root_rank, True, name, group_of(process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if _runtime.rank() != ctx.root_rank:
            grad = torch.zeros_like(grad)
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor (root_rank a world rank), as a new tensor on every
    rank of the set."""
    return _Broadcast.apply(tensor, root_rank, name, process_set)


# ---- alltoall, reducescatter -----------------------------------------------------

def _split_list(splits):
    if isinstance(splits, torch.Tensor):
        return splits.tolist()
    return splits


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """synchronize() gives (rows received, how many came from each rank) as
    Horovod's does; the handle's `rows` says the latter too."""
    handle = C.alltoall_async(_tx, tensor, _split_list(splits), name, group_of(process_set))
    return _runtime.Combined([handle], lambda outs: (outs[0], torch.tensor(handle.rows, dtype=torch.int32)))


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *dead_gradients):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received, process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[q] rows of tensor (equal parts if None) to rank q of the
    set and returns the rows received in rank order, with (if splits was
    given) a tensor of how many came from each rank."""
    output, received = _Alltoall.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    return C.reducescatter_async(_tx, tensor, name, op, prescale_factor, postscale_factor, group_of(process_set))


def _reducescatter_grads(ctx, grads):
    # Horovod's: the gradient of a reduce-scatter is an allgather of the
    # gradients, scaled as the forward pass scaled (an Average's 1/N and N cancel).
    if ctx.op not in (Average, Sum):
        raise NotImplementedError("reducescatter is differentiable with op=Average or op=Sum only")
    factor = ctx.prescale_factor * ctx.postscale_factor
    if ctx.op == Sum:
        factor *= group_of(ctx.process_set).size
    return [g * factor if factor != 1.0 else g for g in grads]


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op, ctx.process_set = op, process_set
        ctx.prescale_factor, ctx.postscale_factor = prescale_factor, postscale_factor
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad, = _reducescatter_grads(ctx, [grad_output])
        return allgather(grad, process_set=ctx.process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """op (Average unless told; not Adasum) over the set's tensors, cut along the first
    dimension: rank r of the set gets part r (the first shape[0] % size parts
    have one more row)."""
    compressed, ctx = compression.compress(tensor)
    out = _Reducescatter.apply(compressed, name, op, process_set, prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each tensor, as one handle whose result is the list
    of outputs (named NAME.0, NAME.1... within the set)."""
    group = group_of(process_set)
    return _each_of("grouped_reducescatter", tensors, name, group, lambda t, n: C.reducescatter_async(
        _tx, t, n, op, prescale_factor, postscale_factor, group))


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op, ctx.process_set = op, process_set
        ctx.prescale_factor, ctx.postscale_factor = prescale_factor, postscale_factor
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, op, process_set,
                                                             prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = _reducescatter_grads(ctx, grad_outputs)
        return (None, None, None, None, None) + tuple(grouped_allgather(grads, process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each tensor; a list of new tensors."""
    compressed = [compression.compress(t) for t in tensors]
    outputs = _GroupedReducescatter.apply(name, op, process_set, prescale_factor, postscale_factor,
                                          *[t for t, _ in compressed])
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(outputs, compressed)]


# ---- join, barrier ------------------------------------------------------------

def join(device=-1):
    """This rank is out of data: until every rank has joined, it contributes
    neutral values (zeros to sums, no rows to allgathers). Returns the last
    rank to join. May be called again for the next epoch."""
    del device  # kolo makes the neutral contributions where the other ranks' tensors are
    return _runtime.join()


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has reached it."""
    _runtime.barrier(group=group_of(process_set))
