"""The collectives, written once for any array library.

A front end (NumPy in kolo, PyTorch in kolo.torch) passes an adapter that
describes its arrays and makes new ones; everything else (names, wire
layouts, staging of non-contiguous or widened data, outputs whose size is
only known after negotiation) is decided here.

Any dtype moves (allgather, broadcast, alltoall) as its raw bytes. What
a reduction takes, and how the engine gets each dtype, is kolo._policy's:
what the engine reduces natively goes to it untouched (bool as its uint8
bytes too), from the array's own memory when it is contiguous; int16 and
uint16 through a widened copy; complex numbers as pairs of reals, an extra
dimension of 2.

Arrays in GPU memory (CUDA tensors) stay there: the engine reduces them
where they lie, scales them with the GPU's kernels and gathers into GPU
memory (kolo.h, "Named operations"). Any staging copy (a widened dtype, a
strided tensor) is made on the GPU, on the array library's current stream,
which the legacy default stream is then made to wait for: the engine runs
a collective on GPU memory after that stream's work, and its handle
completes once the results are in place. What the engine takes on the
host only goes through host copies made on the current stream: a
compressed wire format, a reducescatter's prescale, and everything where
libkolo was built without CUDA or the rank has no GPU it can use.
"""
import ctypes
from collections import namedtuple

from kolo import _policy, _runtime
from kolo._compression import wire_of
from kolo._library import DTYPE_CODES, OP_AVG, OP_CODES, OP_SUM, lib, int64_array
from kolo._policy import Average

# What the wire formats carry (kolo_allreduce_wire).
_WIRE_DTYPES = {DTYPE_CODES["float32"], DTYPE_CODES["float16"], DTYPE_CODES["bfloat16"]}

# What an adapter tells about one array: address, shape (tuple), dtype name
# as NumPy spells it ("float32", "bool", "bfloat16"...), element size in
# bytes, and whether its elements are dense in row-major order.
ArrayInfo = namedtuple("ArrayInfo", "ptr shape dtype itemsize contiguous")


class Adapter:
    """What the collectives need from an array library."""

    def describe(self, x):
        """ArrayInfo of x; raises TypeError for what is not an array here."""
        raise NotImplementedError

    def empty(self, shape, like, dtype=None):
        """A new contiguous array of that shape, with like's dtype (or dtype)."""
        raise NotImplementedError

    def assign(self, dst, src):
        """dst[...] = src, converting the dtype (and moving it between devices)."""
        raise NotImplementedError

    def on_device(self, x):
        """Whether x lives in GPU memory."""
        return False

    def to_host(self, x):
        """A contiguous host copy of a device array, in the library's stream order."""
        raise NotImplementedError

    def copy_from_device_memory(self, out, address, nbytes):
        """Copies nbytes of the engine's GPU memory at `address` (complete)
        into out, an array on the same GPU; done, or ordered before the
        library's later work, when it returns."""
        raise NotImplementedError

    def order_before_engine(self, x):
        """Makes the legacy default stream of x's device wait for the work
        already on the current stream (the engine's collectives on GPU
        memory start after the legacy default stream's work)."""
        raise NotImplementedError


def _converted(xp, x, dtype=None):
    info = xp.describe(x)
    out = xp.empty(info.shape, x, dtype)
    xp.assign(out, x)
    return out


def _shape_arg(shape):
    return len(shape), int64_array(shape)


def _movement_wire(info):
    """(kolo dtype code, shape) that moves the array's bytes exactly."""
    code = DTYPE_CODES.get(info.dtype)
    if code is not None:
        return code, info.shape
    return DTYPE_CODES["uint8"], info.shape + (info.itemsize,)


def _reduction(xp, x, op, prescale, postscale, collective):
    """kolo._policy's Reduction of x with op in `collective`, or its refusal, raised."""
    return _policy.reduction(xp.describe(x).dtype, op, collective, scaled=prescale != 1.0 or postscale != 1.0)


def _engine_args(info, plan):
    """(kolo dtype code, shape, kolo op) of the staged array `info` for plan."""
    shape = info.shape + (2,) if plan.how == _policy.PAIRS else info.shape
    return DTYPE_CODES[plan.engine_dtype], shape, OP_CODES[plan.engine_op]


def _on_gpu(xp, g, xs, allowed=True):
    """Whether the engine takes the device arrays xs where they lie: the
    call is one the engine takes on GPU memory (`allowed`), and group g's
    libkolo runs collectives on GPU memory."""
    return bool(xs) and xp.on_device(xs[0]) and allowed and g.takes_gpu_memory()


def _ordered(xp, xs, on_gpu):
    """Before a submission that the engine takes on the GPU: the work the
    current stream has so far (what produced xs, then their staging) is
    ordered before the engine's."""
    if on_gpu:
        xp.order_before_engine(xs[0])


def _staged(xp, x, inplace, plan, out_shape=None, on_gpu=False):
    """Buffers for a reduction of x: (send, recv, result). The engine reads
    send and writes recv; once it is done, recv is copied into result when
    they differ. Contiguous arrays whose memory the engine reads as it is
    (plan) are used as they are, on the host or the GPU (on_gpu); other
    device arrays through a host copy, the result then copied back."""
    info = xp.describe(x)
    if xp.on_device(x) and not on_gpu:
        host = xp.to_host(x)
        send, recv, _ = _staged(xp, host, out_shape is None, plan, out_shape)
        result = x if inplace else xp.empty(info.shape if out_shape is None else out_shape, x)
        return send, recv, result
    if plan.how == _policy.WIDENED:
        # The widened copy is the engine's to overwrite: reduce in place on
        # it unless the output has another shape (reducescatter).
        send = _converted(xp, x, plan.engine_dtype)
        if out_shape is None:
            return send, send, (x if inplace else xp.empty(info.shape, x))
        return send, xp.empty(out_shape, send), xp.empty(out_shape, x)
    send = x if info.contiguous else _converted(xp, x)
    if inplace:
        return send, send, x
    recv = xp.empty(info.shape if out_shape is None else out_shape, x)
    return send, recv, recv


def _sendable(xp, x, on_gpu):
    """x as the engine can read it: itself when contiguous, else a
    contiguous copy where it lies; a device array the engine takes on the
    host (not on_gpu) as a host copy."""
    if xp.on_device(x) and not on_gpu:
        return xp.to_host(x)
    return x if xp.describe(x).contiguous else _converted(xp, x)


def _copy_back(xp, recv, result):
    if recv is not result:
        xp.assign(result, recv)
    return result


def _wire_args(compression, code, op_code):
    """The wire format and error feedback `compression` asks for, where the
    tensor's dtype and op can take one (kolo_submit_allreduce_wire's
    arguments)."""
    wire, feedback = wire_of(compression)
    if wire > 0 and (code not in _WIRE_DTYPES or op_code not in (OP_SUM, OP_AVG)):
        return -1, 0  # an integer tensor, or min/max: sent as it is
    return wire, int(feedback)


def allreduce_async(xp, x, inplace=False, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
                    group=None, compression=None):
    g = group or _runtime.world()
    plan = _reduction(xp, x, op, prescale_factor, postscale_factor, "allreduce")
    wire, feedback = _wire_args(compression, DTYPE_CODES[plan.engine_dtype], OP_CODES[plan.engine_op])
    on_gpu = _on_gpu(xp, g, [x], allowed=wire <= 0)  # the wire formats' kernels run on the host
    send, recv, result = _staged(xp, x, inplace, plan, on_gpu=on_gpu)
    _ordered(xp, [x], on_gpu)
    info = xp.describe(send)
    code, shape, op_code = _engine_args(info, plan)
    return g.submit(lib.kolo_submit_allreduce_wire, g.operation_name("allreduce", name), info.ptr,
                           xp.describe(recv).ptr, *_shape_arg(shape), code, op_code, float(prescale_factor),
                           float(postscale_factor), wire, feedback, keep=(x, send, recv, result),
                           finish=lambda h: _copy_back(xp, recv, result))


def grouped_allreduce_async(xp, xs, inplace=False, name=None, op=Average, prescale_factor=1.0,
                            postscale_factor=1.0, group=None, compression=None):
    g = group or _runtime.world()
    xs = list(xs)
    if not xs:
        raise ValueError("grouped_allreduce needs at least one tensor")
    dtypes = sorted({xp.describe(x).dtype for x in xs})
    if len(dtypes) > 1:
        raise TypeError("grouped_allreduce: all tensors must have one dtype, got %s" % ", ".join(dtypes))
    plan = _reduction(xp, xs[0], op, prescale_factor, postscale_factor, "allreduce")
    wire, feedback = _wire_args(compression, DTYPE_CODES[plan.engine_dtype], OP_CODES[plan.engine_op])
    on_gpu = _on_gpu(xp, g, xs, allowed=wire <= 0)
    staged = [_staged(xp, x, inplace, plan, on_gpu=on_gpu) for x in xs]
    _ordered(xp, xs, on_gpu)
    infos = [xp.describe(s) for s, _, _ in staged]
    wires = [_engine_args(i, plan) for i in infos]
    n = len(xs)
    shapes = [int64_array(shape) for _, shape, _ in wires]
    sends = (ctypes.c_void_p * n)(*[i.ptr for i in infos])
    recvs = (ctypes.c_void_p * n)(*[xp.describe(r).ptr for _, r, _ in staged])
    ndims = (ctypes.c_int * n)(*[len(shape) for _, shape, _ in wires])
    shape_ptrs = (ctypes.POINTER(ctypes.c_int64) * n)(
        *[ctypes.cast(s, ctypes.POINTER(ctypes.c_int64)) for s in shapes])
    code, _, op_code = wires[0]

    def finish(_):
        return [_copy_back(xp, recv, result) for _, recv, result in staged]

    return g.submit(lib.kolo_submit_grouped_allreduce_wire, g.operation_name("grouped_allreduce", name),
                           n, sends, recvs, ndims, shape_ptrs, code, op_code, float(prescale_factor),
                           float(postscale_factor), wire, feedback,
                           keep=(xs, staged, shapes, sends, recvs, ndims, shape_ptrs), finish=finish)


def _rows_for(total, world, r):
    # kolo_submit_reduce_scatter's split: the first total % world parts get one more row.
    return total // world + (1 if r < total % world else 0)


def reducescatter_async(xp, x, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, group=None):
    g = group or _runtime.world()
    info = xp.describe(x)
    if not info.shape:
        raise ValueError("reducescatter needs an array with at least one dimension, got a scalar")
    plan = _reduction(xp, x, op, prescale_factor, postscale_factor, "reducescatter")
    out_shape = (_rows_for(info.shape[0], g.size, g.rank),) + info.shape[1:]
    on_gpu = _on_gpu(xp, g, [x], allowed=prescale_factor == 1.0)  # a reduce-scatter prescales on the host only
    send, recv, result = _staged(xp, x, False, plan, out_shape, on_gpu=on_gpu)
    _ordered(xp, [x], on_gpu)
    send_info = xp.describe(send)
    code, shape, op_code = _engine_args(send_info, plan)
    return g.submit(lib.kolo_submit_reduce_scatter, g.operation_name("reducescatter", name),
                           send_info.ptr, xp.describe(recv).ptr, *_shape_arg(shape), code, op_code,
                           float(prescale_factor), float(postscale_factor), keep=(x, send, recv, result),
                           finish=lambda h: _copy_back(xp, recv, result))


def _output_array(xp, handle, like, rows, row_shape, on_gpu):
    """The engine-owned output of an allgather or alltoall (GPU memory where
    the engine took a device array on the GPU), copied into a new array of
    like's dtype with sum(rows) rows, where like lies."""
    if xp.on_device(like) and not on_gpu:
        host = _output_array(xp, handle, xp.to_host(like[:0]), rows, row_shape, False)
        out = xp.empty(xp.describe(host).shape, like)
        xp.assign(out, host)
        return out
    out = xp.empty((sum(rows),) + tuple(row_shape), like)
    out_info = xp.describe(out)
    ptr, nbytes = handle.output_bytes()
    expected = out_info.itemsize * sum(rows)
    for d in row_shape:
        expected *= d
    if nbytes != expected:
        raise RuntimeError("kolo: engine output has %d bytes, expected %d" % (nbytes, expected))
    if nbytes and xp.on_device(like):
        xp.copy_from_device_memory(out, ptr, nbytes)
    elif nbytes:
        ctypes.memmove(out_info.ptr, ptr, nbytes)
    return out


def allgather_async(xp, x, name=None, group=None):
    """Result: rank order concatenation along the first dimension; the
    handle's `rows` then lists each rank's first dimension."""
    g = group or _runtime.world()
    info = xp.describe(x)
    if not info.shape:
        raise ValueError("allgather needs an array with at least one dimension, got a scalar")
    on_gpu = _on_gpu(xp, g, [x])
    send = _sendable(xp, x, on_gpu)
    _ordered(xp, [x], on_gpu)
    code, shape = _movement_wire(xp.describe(send))

    def finish(h):
        h.rows = h.output_rows()
        return _output_array(xp, h, x, h.rows, info.shape[1:], on_gpu)

    return g.submit(lib.kolo_submit_allgather, g.operation_name("allgather", name),
                           xp.describe(send).ptr, *_shape_arg(shape), code, keep=(x, send), finish=finish)


def broadcast_async(xp, x, root_rank, inplace=False, name=None, group=None):
    """root_rank is a world rank (a member of the group)."""
    g = group or _runtime.world()
    info = xp.describe(x)
    root = g.group_rank(root_rank)
    on_gpu = _on_gpu(xp, g, [x])
    if xp.on_device(x) and not on_gpu:
        buf = xp.to_host(x)
        result = x if inplace else xp.empty(info.shape, x)
    else:
        buf = x if inplace and info.contiguous else _converted(xp, x)  # where x lies
        result = x if inplace else buf
    _ordered(xp, [x], on_gpu)
    code, shape = _movement_wire(xp.describe(buf))
    return g.submit(lib.kolo_submit_broadcast, g.operation_name("broadcast", name),
                           xp.describe(buf).ptr, *_shape_arg(shape), code, root, keep=(x, buf),
                           finish=lambda h: _copy_back(xp, buf, result))


def alltoall_async(xp, x, splits=None, name=None, group=None):
    """Result: the rows received, in rank order; the handle's `rows` then
    lists how many came from each rank."""
    g = group or _runtime.world()
    info = xp.describe(x)
    if not info.shape:
        raise ValueError("alltoall needs an array with at least one dimension, got a scalar")
    on_gpu = _on_gpu(xp, g, [x])
    send = _sendable(xp, x, on_gpu)
    _ordered(xp, [x], on_gpu)
    code, shape = _movement_wire(xp.describe(send))
    split_arg = None
    if splits is not None:
        values = [int(s) for s in splits]
        if len(values) != g.size:
            raise ValueError("alltoall splits has %d entries; it needs one per rank (%d)" % (len(values), g.size))
        split_arg = int64_array(values)

    def finish(h):
        h.rows = h.output_rows()
        return _output_array(xp, h, x, h.rows, info.shape[1:], on_gpu)

    return g.submit(lib.kolo_submit_alltoall, g.operation_name("alltoall", name),
                           xp.describe(send).ptr, *_shape_arg(shape), split_arg, code, keep=(x, send, split_arg),
                           finish=finish)
