"""kolo.jax's FFI handlers (_ffi.cc): compiled on first use against the
installed jaxlib's FFI headers (jaxlib/include, jax.ffi.include_dir()),
loaded, registered with XLA, and kept told which communicator serves each
process set.

As kolo.tensorflow builds its kernels: by the C++ compiler ($CXX, else
g++), into KOLO_JAX_OPS_DIR (default ~/.cache/kolo/jax), named by a hash of
the source, kolo.h, jaxlib's version and the compiler, so that a change to
any makes a new one and ranks that start together build it once
(kolo._native_build: the others wait and load it). A build takes a few
seconds; later imports load it at once.
"""
import ctypes
import os

import jax
import jaxlib

from kolo import _library, _process_sets, _runtime
from kolo._native_build import build_once, compiler, kolo_h_dir, library_path

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCE = os.path.join(_HERE, "_ffi.cc")
_MODULE, _WHAT = "kolo.jax", "kolo's XLA handlers"
TARGETS = ("allreduce", "allreduce_many", "allgather", "broadcast", "reducescatter", "alltoall", "barrier")


def _command(output):
    return [compiler(), "-shared", "-fPIC", "-O2", "-std=c++17", "-w", "-I" + jax.ffi.include_dir(),
            "-I" + kolo_h_dir(_MODULE, _WHAT), _SOURCE, "-o", output, "-ldl"]


def _library_path():
    files = [_SOURCE, os.path.join(kolo_h_dir(_MODULE, _WHAT), "kolo.h")]
    return library_path("kolo_jax_ffi", jaxlib.__version__, files, [jaxlib.__version__, compiler()],
                        "KOLO_JAX_OPS_DIR", "jax")


def _build(path):
    def plan(scratch):
        built = os.path.join(scratch, "ffi.so")
        return [[_command(built)]], built
    build_once(path, _MODULE, _WHAT, "jaxlib " + jaxlib.__version__, plan)


def _load():
    path = _library_path()
    if not os.path.isfile(path):
        _build(path)
    native = ctypes.CDLL(path)
    native.kolo_jax_bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    native.kolo_jax_set_process_set.argtypes = [ctypes.c_int32, ctypes.c_void_p]
    native.kolo_jax_set_process_set.restype = None
    native.kolo_jax_forget_all.restype = None
    error = ctypes.create_string_buffer(1024)
    if native.kolo_jax_bind(os.fsencode(_library.path), error, len(error)) != 0:
        raise ImportError("kolo.jax: " + error.value.decode("utf-8", "replace"))
    for name in TARGETS:
        for symbol, platform in (("kolo_jax_" + name, "cpu"), ("kolo_jax_%s_cuda" % name, "CUDA")):
            jax.ffi.register_ffi_target(symbol, jax.ffi.pycapsule(getattr(native, symbol)), platform=platform)
    return native


_native = _load()


class _Membership:
    """Keeps the handlers' table of communicators in step with kolo's
    process sets (kolo._process_sets calls it)."""

    @staticmethod
    def added(process_set):
        group = process_set._group
        _native.kolo_jax_set_process_set(process_set.process_set_id, group.comm if group is not None else None)

    @staticmethod
    def removing(process_set):
        if process_set.process_set_id is not None:
            _native.kolo_jax_set_process_set(process_set.process_set_id, None)


def _world_started(world):
    _native.kolo_jax_set_process_set(0, world.comm)
    for ps in _process_sets.registered_sets():
        _Membership.added(ps)


def _world_ending():
    _native.kolo_jax_forget_all()


_process_sets.membership_listeners.append(_Membership)
_runtime._init_hooks.append(_world_started)
_runtime._shutdown_hooks.append(_world_ending)
if _runtime.is_initialized():
    _world_started(_runtime.world())
