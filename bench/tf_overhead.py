"""What the TensorFlow binding adds to a collective: a 4-byte allreduce of
kolo's engine through kolo.tensorflow (eager, and one op in a
tf.function), against the same named allreduce through kolo's C API
(kolo_submit_allreduce and kolo_handle_wait, called through ctypes) and a
tf.function that only copies its input (TensorFlow's own cost of a call).

It also measures the mechanism kolo.tensorflow did not choose:
tf.numpy_function around the same C API calls, in a tf.function, for one
4-byte tensor and for 16 tensors of 64 KiB (a small model's gradients),
against kolo.tensorflow's asynchronous kernels on the same tensors.
Rounds alternate all of them so the machine's noise falls on each alike.

    tools/kolorun -np 2 .venv/bin/python bench/tf_overhead.py [--calls 2000] [--rounds 5]

Rank 0 prints microseconds per call (medians of the rounds)."""
import argparse
import ctypes
import statistics
import time

import numpy as np
import tensorflow as tf

import kolo.tensorflow as hvd
from kolo import _runtime
from kolo._library import DTYPE_CODES, OP_SUM, check, int64_array, lib


def per_call_us(fn, calls):
    for _ in range(50):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return 1e6 * (time.perf_counter() - start) / calls


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    hvd.init()
    comm = _runtime.world().comm
    x_np = np.ones(1, np.float32)
    shape = int64_array([1])
    handle = ctypes.c_void_p()

    def c_api():
        check(lib.kolo_submit_allreduce(comm, b"c_api", x_np.ctypes.data, x_np.ctypes.data, 1, shape,
                                        DTYPE_CODES["float32"], OP_SUM, 1.0, 1.0, ctypes.byref(handle)))
        check(lib.kolo_handle_wait(handle, -1.0))
        lib.kolo_handle_release(handle)

    def numpy_allreduce(name):
        # The alternative: Python runs inside the graph, holding one of
        # TensorFlow's threads (and the GIL, but for ctypes' waits) for the
        # whole round trip.
        def run(a):
            out = np.empty_like(a)
            h = ctypes.c_void_p()
            check(lib.kolo_submit_allreduce(comm, name, a.ctypes.data, out.ctypes.data, 1,
                                            int64_array([a.size]), DTYPE_CODES["float32"], OP_SUM,
                                            1.0, 1.0, ctypes.byref(h)))
            check(lib.kolo_handle_wait(h, -1.0))
            lib.kolo_handle_release(h)
            return out
        return run

    x = tf.ones([1])
    grads = [tf.ones([16384]) * i for i in range(16)]
    numpy_one = tf.function(lambda: tf.numpy_function(numpy_allreduce(b"np"), [x], tf.float32))
    numpy_many = tf.function(lambda: [tf.numpy_function(numpy_allreduce(b"np%d" % i), [g], tf.float32)
                                      for i, g in enumerate(grads)])
    kernels_many = tf.function(lambda: [hvd.allreduce(g, op=hvd.Sum) for g in grads])
    in_graph = tf.function(lambda: hvd.allreduce(x, op=hvd.Sum))
    copy_only = tf.function(lambda: tf.identity(x) + 0)
    ways = {"C API (ctypes)": c_api, "kolo.tensorflow eager": lambda: hvd.allreduce(x, op=hvd.Sum),
            "kolo.tensorflow in a tf.function": in_graph, "a tf.function without kolo": copy_only,
            "numpy_function + C API, tf.function": numpy_one,
            "16 x 64 KiB, kolo.tensorflow kernels": kernels_many,
            "16 x 64 KiB, numpy_function + C API": numpy_many}
    times = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, fn in ways.items():
            times[name].append(per_call_us(fn, args.calls))
    if hvd.rank() == 0:
        for name in ways:
            print("%-38s %7.1f us per call" % (name, statistics.median(times[name])))


if __name__ == "__main__":
    main()
