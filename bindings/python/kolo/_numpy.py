"""NumPy arrays for the collectives (the framework-free API of `kolo`)."""
import numpy as np

from kolo import _adasum
from kolo import _collectives as C
from kolo import _runtime
from kolo._policy import Adasum, Average
from kolo._process_sets import group_of


class NumpyAdapter(C.Adapter):
    def describe(self, x):
        if not isinstance(x, np.ndarray):
            raise TypeError("kolo collectives take NumPy arrays, not %s" % type(x).__name__)
        return C.ArrayInfo(x.ctypes.data, tuple(x.shape), x.dtype.name, x.dtype.itemsize,
                           bool(x.flags.c_contiguous))

    def empty(self, shape, like, dtype=None):
        return np.empty(shape, dtype=np.dtype(dtype) if dtype else like.dtype)

    def assign(self, dst, src):
        np.copyto(dst, src, casting="unsafe")


_np = NumpyAdapter()


def _writable(x):
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError("an in-place collective needs a writable array")
    return x


def _allreduce_async(array, inplace, name, op, prescale_factor, postscale_factor, process_set):
    group = group_of(process_set)
    if op == Adasum:
        return _adasum.allreduce_async(_np, array, inplace, name, prescale_factor, postscale_factor, group)
    return C.allreduce_async(_np, array, inplace, name, op, prescale_factor, postscale_factor, group)


def _grouped_allreduce_async(arrays, inplace, name, op, prescale_factor, postscale_factor, process_set):
    group = group_of(process_set)
    if op != Adasum:
        return C.grouped_allreduce_async(_np, arrays, inplace, name, op, prescale_factor, postscale_factor, group)
    # Adasum is not one engine operation: each array is its own, named NAME.0, NAME.1...
    arrays = list(arrays)
    if not arrays:
        raise ValueError("grouped_allreduce needs at least one tensor")
    base = group.operation_name("grouped_allreduce", name).decode()
    return _runtime.Combined([_adasum.allreduce_async(_np, a, inplace, "%s.%d" % (base, i), prescale_factor,
                                                      postscale_factor, group) for i, a in enumerate(arrays)])


def allreduce_async(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Starts an allreduce of array into a new array; synchronize(handle) returns it."""
    return _allreduce_async(array, False, name, op, prescale_factor, postscale_factor, process_set)


def allreduce(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """op over every rank's array (Average by default), as a new array."""
    return allreduce_async(array, op, name, prescale_factor, postscale_factor, process_set=process_set).synchronize()


def allreduce_async_(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    return _allreduce_async(_writable(array), True, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """The allreduce written into array itself; returns array."""
    return allreduce_async_(array, op, name, prescale_factor, postscale_factor, process_set=process_set).synchronize()


def grouped_allreduce_async(arrays, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                            process_set=None):
    return _grouped_allreduce_async(arrays, False, name, op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce(arrays, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Several arrays of one dtype reduced as one operation; a list of new arrays."""
    return grouped_allreduce_async(arrays, op, name, prescale_factor, postscale_factor,
                                   process_set=process_set).synchronize()


def grouped_allreduce_async_(arrays, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                             process_set=None):
    return _grouped_allreduce_async([_writable(a) for a in arrays], True, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_(arrays, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """The grouped allreduce written into each array; returns them as a list."""
    return grouped_allreduce_async_(arrays, op, name, prescale_factor, postscale_factor,
                                    process_set=process_set).synchronize()


def allgather_async(array, name=None, process_set=None):
    return C.allgather_async(_np, array, name, group_of(process_set))


def allgather(array, name=None, process_set=None):
    """Every rank's array concatenated along the first dimension, in rank
    order (first dimensions may differ between ranks)."""
    return allgather_async(array, name, process_set=process_set).synchronize()


def broadcast_async(array, root_rank, name=None, process_set=None):
    return C.broadcast_async(_np, array, root_rank, False, name, group_of(process_set))


def broadcast(array, root_rank, name=None, process_set=None):
    """root_rank's array, as a new array on every rank."""
    return broadcast_async(array, root_rank, name, process_set=process_set).synchronize()


def broadcast_async_(array, root_rank, name=None, process_set=None):
    return C.broadcast_async(_np, _writable(array), root_rank, True, name, group_of(process_set))


def broadcast_(array, root_rank, name=None, process_set=None):
    """root_rank's array written into array itself; returns array."""
    return broadcast_async_(array, root_rank, name, process_set=process_set).synchronize()


def reducescatter_async(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    return C.reducescatter_async(_np, array, name, op, prescale_factor, postscale_factor, group_of(process_set))


def reducescatter(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """The reduction of every rank's array, cut along the first dimension:
    rank r gets part r (the first shape[0] % size parts have one more row)."""
    return reducescatter_async(array, op, name, prescale_factor, postscale_factor,
                               process_set=process_set).synchronize()


def alltoall_async(array, splits=None, name=None, process_set=None):
    return C.alltoall_async(_np, array, splits, name, group_of(process_set))


def alltoall(array, splits=None, name=None, process_set=None):
    """Sends splits[q] rows (equal parts if None) of array to rank q, in
    order; returns the rows received in rank order and, if splits was
    given, how many came from each rank."""
    h = alltoall_async(array, splits, name, process_set)
    out = h.synchronize()
    return (out, np.array(h.rows, dtype=np.int64)) if splits is not None else out
