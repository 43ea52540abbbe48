"""Arrays in GPU memory (CUDA tensors in kolo.torch) in kolo._collectives:
every collective hands the engine the device memory itself (staged on the
device where the dtype or layout asks, after ordering the current stream's
work first; outputs of allgather and alltoall copied from the engine's GPU
memory into a new device array); a compressed wire format and a
reducescatter's prescale go through host copies, and so does everything where libkolo has no GPU to run on. Without
a GPU this runs on a stand-in "device": NumPy arrays wrapped so that every
copy between them and the host is counted, with the group's answer to
whether it runs collectives on GPU memory set by the test (the engine,
finding no CUDA driver, reduces their memory as host memory; its GPU path
has its own tests on an emulated GPU, tests/gpu_engine_test.cc). Results
are checked against NumPy."""
import ctypes

import numpy as np
import pytest

import kolo
from kolo import _collectives as C
from kolo import _runtime
from kolo._compression import wire
from kolo._numpy import NumpyAdapter


class DeviceArray:
    """A device array: its memory, and what kolo may not do with it (read
    it on the host without a counted copy)."""

    def __init__(self, data):
        self.data = np.ascontiguousarray(data)

    def __getitem__(self, key):
        return DeviceArray(self.data[key])


class FakeDeviceAdapter(NumpyAdapter):
    def __init__(self):
        self.copies = {"to_host": 0, "to_device": 0}
        self.ordered = 0  # order_before_engine calls
        self.device_outputs = 0  # copy_from_device_memory calls

    def describe(self, x):
        if isinstance(x, DeviceArray):
            return C.ArrayInfo(x.data.ctypes.data, tuple(x.data.shape), x.data.dtype.name, x.data.dtype.itemsize,
                               True)
        return super().describe(x)

    def empty(self, shape, like, dtype=None):
        host = np.empty(shape, dtype=np.dtype(dtype) if dtype else self._dtype(like))
        return DeviceArray(host) if isinstance(like, DeviceArray) else host

    def assign(self, dst, src):
        d = dst.data if isinstance(dst, DeviceArray) else dst
        s = src.data if isinstance(src, DeviceArray) else src
        if isinstance(dst, DeviceArray) and not isinstance(src, DeviceArray):
            self.copies["to_device"] += 1
        if isinstance(src, DeviceArray) and not isinstance(dst, DeviceArray):
            self.copies["to_host"] += 1
        np.copyto(d, s, casting="unsafe")

    def on_device(self, x):
        return isinstance(x, DeviceArray)

    def to_host(self, x):
        self.copies["to_host"] += 1
        return x.data.copy()

    def copy_from_device_memory(self, out, address, nbytes):
        # The engine found no CUDA driver here: its "GPU" output is host memory.
        assert isinstance(out, DeviceArray)
        ctypes.memmove(out.data.ctypes.data, address, nbytes)
        self.device_outputs += 1

    def order_before_engine(self, x):
        assert isinstance(x, DeviceArray)
        self.ordered += 1

    @staticmethod
    def _dtype(like):
        return like.data.dtype if isinstance(like, DeviceArray) else like.dtype


@pytest.fixture
def gpu_collectives(monkeypatch):
    """The groups answer that they run collectives on GPU memory."""
    monkeypatch.setattr(_runtime.Group, "takes_gpu_memory", lambda self: True)


@pytest.fixture
def no_gpu_collectives(monkeypatch):
    """The groups answer that they do not (a build without CUDA, no GPU)."""
    monkeypatch.setattr(_runtime.Group, "takes_gpu_memory", lambda self: False)


def local(r, shape, dtype):
    return ((np.arange(np.prod(shape)) % 7) + r + 1).reshape(shape).astype(dtype)


def no_copies(xp):
    return xp.copies == {"to_host": 0, "to_device": 0}


@pytest.mark.parametrize("dtype", ["float32", "float16", "int16", "int64"])
@pytest.mark.parametrize("inplace", [False, True])
def test_allreduce_of_device_arrays_stays_on_the_device(dtype, inplace, gpu_collectives):
    xp = FakeDeviceAdapter()
    r, n = kolo.rank(), kolo.size()
    x = DeviceArray(local(r, (5, 3), dtype))
    h = C.allreduce_async(xp, x, inplace, "dev.allreduce.%s.%s" % (dtype, inplace), kolo.Sum)
    out = _runtime.synchronize(h)
    want = sum(local(q, (5, 3), "float64") for q in range(n))
    assert isinstance(out, DeviceArray), "the result of a device array lives on the device"
    assert out is x if inplace else out is not x
    np.testing.assert_array_equal(out.data.astype("float64"), want)
    assert no_copies(xp), xp.copies  # int16 is widened on the device
    assert xp.ordered == 1


def test_grouped_allreduce_with_scale_factors_stays_on_the_device(gpu_collectives):
    xp = FakeDeviceAdapter()
    r, n = kolo.rank(), kolo.size()
    xs = [DeviceArray(local(r, (k + 1, 2), "float32")) for k in range(3)]
    outs = _runtime.synchronize(C.grouped_allreduce_async(xp, xs, False, "dev.grouped", kolo.Sum,
                                                          prescale_factor=2.0, postscale_factor=0.25))
    for k, out in enumerate(outs):
        assert isinstance(out, DeviceArray)
        want = sum(local(q, (k + 1, 2), "float64") for q in range(n)) * 2.0 * 0.25
        np.testing.assert_array_equal(out.data, want)
    assert no_copies(xp), xp.copies
    assert xp.ordered == 1


def test_compressed_allreduce_of_device_arrays_goes_through_the_host(gpu_collectives):
    xp = FakeDeviceAdapter()
    r, n = kolo.rank(), kolo.size()
    x = DeviceArray(local(r, (3000,), "float32"))
    out = _runtime.synchronize(C.allreduce_async(xp, x, False, "dev.bf16", kolo.Sum, compression=wire("bf16")))
    assert isinstance(out, DeviceArray)
    want = sum(local(q, (3000,), "float64") for q in range(n))
    np.testing.assert_allclose(out.data, want, rtol=1e-2)
    assert xp.copies["to_host"] == 1 and xp.copies["to_device"] == 1, xp.copies
    assert xp.ordered == 0


def test_reducescatter_and_broadcast_stay_on_the_device(gpu_collectives):
    xp = FakeDeviceAdapter()
    r, n = kolo.rank(), kolo.size()
    x = DeviceArray(local(r, (2 * n + 1, 2), "float32"))
    out = _runtime.synchronize(C.reducescatter_async(xp, x, "dev.rs", kolo.Sum, postscale_factor=0.5))
    full = sum(local(q, (2 * n + 1, 2), "float64") for q in range(n))
    start = sum(C._rows_for(2 * n + 1, n, q) for q in range(r))
    assert isinstance(out, DeviceArray)
    np.testing.assert_array_equal(out.data, 0.5 * full[start:start + C._rows_for(2 * n + 1, n, r)])

    b = DeviceArray(local(r, (4,), "float64"))
    res = _runtime.synchronize(C.broadcast_async(xp, b, n - 1, True, "dev.bcast"))
    assert res is b
    np.testing.assert_array_equal(b.data, local(n - 1, (4,), "float64"))
    c = DeviceArray(local(r, (4,), "int8"))
    res = _runtime.synchronize(C.broadcast_async(xp, c, 0, False, "dev.bcast.copy"))
    assert isinstance(res, DeviceArray) and res is not c
    np.testing.assert_array_equal(res.data, local(0, (4,), "int8"))
    np.testing.assert_array_equal(c.data, local(r, (4,), "int8"))
    assert no_copies(xp), xp.copies
    assert xp.ordered == 3


def check_gathers(xp, prefix):
    """An allgather of r + 1 rows from rank r, and an alltoall of a row
    from each rank to each: new device arrays, equal to what was sent."""
    r, n = kolo.rank(), kolo.size()
    g = _runtime.synchronize(C.allgather_async(xp, DeviceArray(local(r, (r + 1, 3), "int32")), prefix + ".ag"))
    assert isinstance(g, DeviceArray)
    np.testing.assert_array_equal(g.data, np.concatenate([local(q, (q + 1, 3), "int32") for q in range(n)]))
    a = _runtime.synchronize(C.alltoall_async(xp, DeviceArray(np.full((n, 2), r, "int64")), None, prefix + ".a2a"))
    assert isinstance(a, DeviceArray)
    np.testing.assert_array_equal(a.data, np.repeat(np.arange(n), 2).reshape(n, 2))


def test_allgather_and_alltoall_gather_into_a_new_device_array(gpu_collectives):
    xp = FakeDeviceAdapter()
    check_gathers(xp, "dev")
    assert no_copies(xp), xp.copies
    assert xp.ordered == 2 and xp.device_outputs == 2


def test_what_the_engine_takes_on_the_host_only_goes_through_host_copies(gpu_collectives):
    xp = FakeDeviceAdapter()
    r, n = kolo.rank(), kolo.size()
    x = DeviceArray(local(r, (2 * n + 1, 2), "float32"))
    out = _runtime.synchronize(C.reducescatter_async(xp, x, "dev.rs.pre", kolo.Sum, prescale_factor=2.0))
    full = sum(local(q, (2 * n + 1, 2), "float64") for q in range(n))
    start = sum(C._rows_for(2 * n + 1, n, q) for q in range(r))
    assert isinstance(out, DeviceArray)
    np.testing.assert_array_equal(out.data, 2.0 * full[start:start + C._rows_for(2 * n + 1, n, r)])
    assert xp.copies["to_host"] == 1 and xp.copies["to_device"] == 1, xp.copies
    assert xp.ordered == 0


def test_without_gpu_collectives_every_device_array_goes_through_the_host(no_gpu_collectives):
    xp = FakeDeviceAdapter()
    r, n = kolo.rank(), kolo.size()
    x = DeviceArray(local(r, (5, 3), "int16"))
    out = _runtime.synchronize(C.allreduce_async(xp, x, False, "host.allreduce", kolo.Sum))
    assert isinstance(out, DeviceArray)
    np.testing.assert_array_equal(out.data, sum(local(q, (5, 3), "int64") for q in range(n)))
    b = DeviceArray(local(r, (4,), "float32"))
    assert _runtime.synchronize(C.broadcast_async(xp, b, 0, True, "host.bcast")) is b
    np.testing.assert_array_equal(b.data, local(0, (4,), "float32"))
    check_gathers(xp, "host")
    # Each input to the host and each result back; the gathers' outputs take
    # an empty host copy of the input as their template besides.
    assert xp.copies["to_host"] == 6 and xp.copies["to_device"] == 4, xp.copies
    assert xp.ordered == 0 and xp.device_outputs == 0
