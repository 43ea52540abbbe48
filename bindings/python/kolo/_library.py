"""libkolo.so through ctypes: finding it, declaring its signatures, and
turning its result codes into Python exceptions.

This is the only module that knows the C API; everything else in the
package calls the functions declared here. ctypes releases the GIL around
every call, so a rank waiting on a handle never stalls other Python threads.
"""
import ctypes
import os

# kolo_result_t, in the order of kolo.h.
SUCCESS = 0
(ERR_INVALID_ARGUMENT, ERR_INVALID_USAGE, ERR_TIMEOUT, ERR_PEER_LOST, ERR_MISMATCH, ERR_TRANSPORT,
 ERR_AUTH, ERR_ABORTED, ERR_UNSUPPORTED, ERR_INTERNAL, ERR_DEVICE) = range(1, 12)

# kolo_dtype_t and kolo_op_t, in the order of kolo.h.
DTYPE_CODES = {name: code for code, name in enumerate(
    ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64"])}
OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_AVG = range(5)


class KoloError(RuntimeError):
    """A kolo call failed; `code` is the C API's kolo_result_t and the
    message is the engine's own description (which tensor, rank, field)."""

    def __init__(self, message, code=ERR_INTERNAL):
        super().__init__(message)
        self.code = code


class InvalidArgumentError(KoloError, ValueError):
    """A bad argument (dtype, shape, root, name...); nothing was submitted."""


class InvalidUsageError(KoloError):
    """A call that makes no sense now, e.g. a name already in flight."""


class KoloTimeoutError(KoloError, TimeoutError):
    """No progress within KOLO_TIMEOUT_S, or a stall longer than
    KOLO_STALL_SHUTDOWN_S."""


class PeerLostError(KoloError):
    """Another rank died or closed its connections."""


class MismatchError(KoloError):
    """Ranks submitted one name with different arguments (e.g. shapes)."""


class AbortedError(KoloError):
    """The communicator was aborted."""


class UnsupportedError(KoloError):
    """Not available in this build."""


_ERROR_CLASSES = {
    ERR_INVALID_ARGUMENT: InvalidArgumentError,
    ERR_INVALID_USAGE: InvalidUsageError,
    ERR_TIMEOUT: KoloTimeoutError,
    ERR_PEER_LOST: PeerLostError,
    ERR_MISMATCH: MismatchError,
    ERR_ABORTED: AbortedError,
    ERR_UNSUPPORTED: UnsupportedError,
}

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_int64_p = ctypes.POINTER(ctypes.c_int64)
_c_void_pp = ctypes.POINTER(ctypes.c_void_p)
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)


class EngineStats(ctypes.Structure):
    _fields_ = [("rounds", ctypes.c_uint64), ("rounds_with_messages", ctypes.c_uint64),
                ("cache_hits", ctypes.c_uint64), ("operations", ctypes.c_uint64),
                ("fused_batches", ctypes.c_uint64), ("negotiation_seconds", ctypes.c_double)]


# name: argument types (every function returns kolo_result_t).
_SIGNATURES = {
    "kolo_comm_init_from_env": [_c_void_pp],
    "kolo_comm_init": [_c_void_pp, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int],
    "kolo_comm_destroy": [ctypes.c_void_p],
    "kolo_comm_rank": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_size": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_local_rank": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_local_size": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_abort": [ctypes.c_void_p],
    "kolo_submit_allreduce": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                              _c_int64_p, ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double, _c_void_pp],
    "kolo_submit_grouped_allreduce": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, _c_void_pp, _c_void_pp,
                                      _c_int_p, ctypes.POINTER(_c_int64_p), ctypes.c_int, ctypes.c_int,
                                      ctypes.c_double, ctypes.c_double, _c_void_pp],
    "kolo_submit_allgather": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, _c_int64_p,
                              ctypes.c_int, _c_void_pp],
    "kolo_submit_broadcast": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, _c_int64_p,
                              ctypes.c_int, ctypes.c_int, _c_void_pp],
    "kolo_submit_reduce_scatter": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_int, _c_int64_p, ctypes.c_int, ctypes.c_int, ctypes.c_double,
                                   ctypes.c_double, _c_void_pp],
    "kolo_submit_alltoall": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, _c_int64_p,
                             _c_int64_p, ctypes.c_int, _c_void_pp],
    "kolo_submit_barrier": [ctypes.c_void_p, ctypes.c_char_p, _c_void_pp],
    "kolo_join": [ctypes.c_void_p, _c_void_pp],
    "kolo_handle_test": [ctypes.c_void_p, _c_int_p],
    "kolo_handle_wait": [ctypes.c_void_p, ctypes.c_double],
    "kolo_handle_output": [ctypes.c_void_p, _c_void_pp, ctypes.POINTER(ctypes.c_size_t)],
    "kolo_handle_output_rows": [ctypes.c_void_p, _c_int64_p, ctypes.c_int],
    "kolo_handle_join_rank": [ctypes.c_void_p, _c_int_p],
    "kolo_handle_release": [ctypes.c_void_p],
    "kolo_timeline_start": [ctypes.c_void_p, ctypes.c_char_p],
    "kolo_timeline_stop": [ctypes.c_void_p],
    "kolo_engine_get_stats": [ctypes.c_void_p, ctypes.POINTER(EngineStats)],
}


def _candidates():
    # KOLO_LIBRARY wins; then a copy beside the package; then the Bazel
    # output of the checkout this package lives in (bindings/python/kolo).
    explicit = os.environ.get("KOLO_LIBRARY")
    if explicit:
        return [explicit]
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    return [os.path.join(here, "libkolo.so"), os.path.join(repo, "bazel-bin", "bindings", "c", "libkolo.so")]


def _load():
    tried = _candidates()
    for path in tried:
        if os.path.exists(path):
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise ImportError("kolo: cannot load %s (%s). A sanitizer build of it (bazel-bin follows the last "
                                  "--config) needs its runtime preloaded; rebuild the plain one with `bazel build "
                                  "//bindings/c:libkolo.so` or set KOLO_LIBRARY" % (path, e)) from e
            break
    else:
        raise ImportError("kolo: libkolo.so not found (looked at %s); build it with "
                          "`bazel build //bindings/c:libkolo.so` or set KOLO_LIBRARY to its path"
                          % ", ".join(tried))
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    lib.kolo_last_error.argtypes = []
    lib.kolo_last_error.restype = ctypes.c_char_p
    lib.kolo_result_string.argtypes = [ctypes.c_int]
    lib.kolo_result_string.restype = ctypes.c_char_p
    return lib


lib = _load()


def error_for(code):
    """The exception for a failed call; must be built on the failing thread
    right after the call (kolo_last_error is per thread)."""
    detail = lib.kolo_last_error().decode("utf-8", "replace")
    summary = lib.kolo_result_string(code).decode("utf-8", "replace")
    return _ERROR_CLASSES.get(code, KoloError)(detail or summary, code)


def check(code):
    if code != SUCCESS:
        raise error_for(code)


def int64_array(values):
    values = list(values)
    return (ctypes.c_int64 * max(len(values), 1))(*values)
