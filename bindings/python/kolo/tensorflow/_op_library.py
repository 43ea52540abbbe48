"""kolo's TensorFlow kernels (_ops_common.cc, _ops_kernels.cc,
_ops_definitions.cc): compiled on first use against the
TensorFlow that runs, loaded, and kept told which communicator serves each
process set.

A TensorFlow op library is tied to the TensorFlow it was compiled against,
so it is built here, the way Horovod builds its own at install time: with
the flags tf.sysconfig gives, by the C++ compiler ($CXX, else g++), into
KOLO_TF_OPS_DIR (default ~/.cache/kolo/tensorflow), named by a hash of the
sources, kolo.h, TensorFlow's version and the flags, so that a change to any
makes a new one and ranks that start together build it once (kolo._native_build:
the others wait and load it). The sources compile side by side, then link;
a build takes 10-40 s; later imports load it at once.
"""
import ctypes
import os

import tensorflow as tf

from kolo import _library, _process_sets, _runtime
from kolo._native_build import build_once, compiler, kolo_h_dir, library_path

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = [os.path.join(_HERE, name) for name in ("_ops_common.cc", "_ops_kernels.cc", "_ops_definitions.cc")]
_HEADERS = [os.path.join(_HERE, "_ops_common.h")]
_MODULE, _WHAT = "kolo.tensorflow", "kolo's TensorFlow kernels"


def _compile_command(source, output):
    return ([compiler(), "-c", "-fPIC", "-O2", "-w", "-I" + kolo_h_dir(_MODULE, _WHAT), "-I" + _HERE]
            + tf.sysconfig.get_compile_flags() + [source, "-o", output])


def _link_command(objects, output):
    return [compiler(), "-shared"] + objects + ["-o", output] + tf.sysconfig.get_link_flags() + ["-ldl"]


def _library_path():
    files = _SOURCES + _HEADERS + [os.path.join(kolo_h_dir(_MODULE, _WHAT), "kolo.h")]
    details = [tf.__version__, compiler()] + tf.sysconfig.get_compile_flags() + tf.sysconfig.get_link_flags()
    return library_path("kolo_tf_ops", tf.__version__, files, details, "KOLO_TF_OPS_DIR", "tensorflow")


def _build(path):
    def plan(scratch):
        objects = [os.path.join(scratch, os.path.basename(source) + ".o") for source in _SOURCES]
        linked = os.path.join(scratch, "kernels.so")
        return ([[_compile_command(source, obj) for source, obj in zip(_SOURCES, objects)],
                 [_link_command(objects, linked)]], linked)
    build_once(path, _MODULE, _WHAT, "TensorFlow " + tf.__version__, plan)


def _load():
    path = _library_path()
    if not os.path.isfile(path):
        _build(path)
    ops = tf.load_op_library(path)
    native = ctypes.CDLL(path)
    native.kolo_tf_bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    native.kolo_tf_set_process_set.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                                               ctypes.c_int]
    native.kolo_tf_set_process_set.restype = None
    native.kolo_tf_forget_process_set.argtypes = [ctypes.c_int]
    native.kolo_tf_forget_process_set.restype = None
    error = ctypes.create_string_buffer(1024)
    if native.kolo_tf_bind(os.fsencode(_library.path), error, len(error)) != 0:
        raise ImportError("kolo.tensorflow: " + error.value.decode("utf-8", "replace"))
    return ops, native


ops, _native = _load()


def _record(process_set_id, group, world_ranks):
    ranks = list(world_ranks)
    array = (ctypes.c_int * max(len(ranks), 1))(*ranks)
    _native.kolo_tf_set_process_set(process_set_id, group.comm if group is not None else None, array, len(ranks))


class _Membership:
    """Keeps the kernels' table of communicators in step with kolo's
    process sets (kolo._process_sets calls it)."""

    @staticmethod
    def added(process_set):
        _record(process_set.process_set_id, process_set._group, process_set.ranks)

    @staticmethod
    def removing(process_set):
        if process_set.process_set_id is not None:
            _native.kolo_tf_forget_process_set(process_set.process_set_id)


def _world_started(world):
    _record(0, world, world.ranks)
    for ps in _process_sets.registered_sets():
        _Membership.added(ps)


def _world_ending():
    _native.kolo_tf_forget_process_set(-1)


_process_sets.membership_listeners.append(_Membership)
_runtime._init_hooks.append(_world_started)
_runtime._shutdown_hooks.append(_world_ending)
if _runtime.is_initialized():
    _world_started(_runtime.world())
