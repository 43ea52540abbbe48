"""Arrays in GPU memory (CUDA tensors in kolo.torch) go through host copies
in kolo._collectives. Without a GPU, that path runs here on a stand-in
"device": arrays wrapped so that their memory is unreachable from C (their
address is NULL), which any collective that handed it to the engine would
report as an error. Results are checked against NumPy."""
import numpy as np
import pytest

import kolo
from kolo import _collectives as C
from kolo import _runtime
from kolo._numpy import NumpyAdapter


class DeviceArray:
    """A device array: data the engine must never be given directly."""

    def __init__(self, data):
        self.data = np.ascontiguousarray(data)

    def __getitem__(self, key):
        return DeviceArray(self.data[key])


class FakeDeviceAdapter(NumpyAdapter):
    def __init__(self):
        self.copies = {"to_host": 0, "to_device": 0}

    def describe(self, x):
        if isinstance(x, DeviceArray):
            return C.ArrayInfo(None, tuple(x.data.shape), x.data.dtype.name, x.data.dtype.itemsize, True)
        return super().describe(x)

    def empty(self, shape, like, dtype=None):
        host = np.empty(shape, dtype=np.dtype(dtype) if dtype else self._dtype(like))
        return DeviceArray(host) if isinstance(like, DeviceArray) else host

    def assign(self, dst, src):
        d = dst.data if isinstance(dst, DeviceArray) else dst
        s = src.data if isinstance(src, DeviceArray) else src
        if isinstance(dst, DeviceArray):
            self.copies["to_device"] += 1
        np.copyto(d, s, casting="unsafe")

    def on_device(self, x):
        return isinstance(x, DeviceArray)

    def to_host(self, x):
        self.copies["to_host"] += 1
        return x.data.copy()

    def to_device_of(self, y, x):
        self.copies["to_device"] += 1
        return DeviceArray(y)

    @staticmethod
    def _dtype(like):
        return like.data.dtype if isinstance(like, DeviceArray) else like.dtype


def local(r, shape, dtype):
    return ((np.arange(np.prod(shape)) % 7) + r + 1).reshape(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int16", "int64"])
@pytest.mark.parametrize("inplace", [False, True])
def test_allreduce_of_device_arrays(dtype, inplace):
    xp = FakeDeviceAdapter()
    r, n = kolo.rank(), kolo.size()
    x = DeviceArray(local(r, (5, 3), dtype))
    h = C.allreduce_async(xp, x, inplace, "dev.allreduce.%s.%s" % (dtype, inplace), kolo.Sum)
    out = _runtime.synchronize(h)
    want = sum(local(q, (5, 3), "float64") for q in range(n))
    assert isinstance(out, DeviceArray), "the result of a device array lives on the device"
    assert out is x if inplace else out is not x
    np.testing.assert_array_equal(out.data.astype("float64"), want)
    assert xp.copies["to_host"] == 1 and xp.copies["to_device"] == 1


def test_reducescatter_allgather_broadcast_alltoall_of_device_arrays():
    xp = FakeDeviceAdapter()
    r, n = kolo.rank(), kolo.size()
    x = DeviceArray(local(r, (2 * n + 1, 2), "float32"))
    out = _runtime.synchronize(C.reducescatter_async(xp, x, "dev.rs", kolo.Sum))
    full = sum(local(q, (2 * n + 1, 2), "float64") for q in range(n))
    start = sum(C._rows_for(2 * n + 1, n, q) for q in range(r))
    assert isinstance(out, DeviceArray)
    np.testing.assert_array_equal(out.data, full[start:start + C._rows_for(2 * n + 1, n, r)])

    g = _runtime.synchronize(C.allgather_async(xp, DeviceArray(local(r, (r + 1, 3), "int32")), "dev.ag"))
    assert isinstance(g, DeviceArray)
    np.testing.assert_array_equal(g.data, np.concatenate([local(q, (q + 1, 3), "int32") for q in range(n)]))

    b = DeviceArray(local(r, (4,), "float64"))
    res = _runtime.synchronize(C.broadcast_async(xp, b, n - 1, True, "dev.bcast"))
    assert res is b
    np.testing.assert_array_equal(b.data, local(n - 1, (4,), "float64"))

    a = _runtime.synchronize(C.alltoall_async(xp, DeviceArray(np.full((n, 2), r, "int64")), None, "dev.a2a"))
    assert isinstance(a, DeviceArray)
    np.testing.assert_array_equal(a.data, np.repeat(np.arange(n), 2).reshape(n, 2))
