"""libkolo.so through ctypes: finding it, declaring its signatures, and
turning its result codes into Python exceptions.

This is the only module that knows the C API; everything else in the
package calls the functions declared here. ctypes releases the GIL around
every call, so a rank waiting on a handle never stalls other Python threads.
"""
import ctypes
import os
import re
import sys

from kolo._policy import Average, Max, Min, Product, Sum

# kolo_result_t, in the order of kolo.h.
SUCCESS = 0
(ERR_INVALID_ARGUMENT, ERR_INVALID_USAGE, ERR_TIMEOUT, ERR_PEER_LOST, ERR_MISMATCH, ERR_TRANSPORT,
 ERR_AUTH, ERR_ABORTED, ERR_UNSUPPORTED, ERR_INTERNAL, ERR_DEVICE, ERR_REVOKED) = range(1, 13)

# kolo_dtype_t and kolo_op_t, in the order of kolo.h.
DTYPE_CODES = {name: code for code, name in enumerate(
    ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64"])}
OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_AVG = range(5)
# The kolo_op_t of each engine op kolo._policy names.
OP_CODES = {Average: OP_AVG, Sum: OP_SUM, Min: OP_MIN, Max: OP_MAX, Product: OP_PROD}
# kolo_comm_shrink's flags.
SHRINK_DEFAULT, SHRINK_ABORT, SHRINK_DROP_UNRESPONSIVE = 0, 1, 2


class KoloError(RuntimeError):
    """A kolo call failed; `code` is the C API's kolo_result_t and the
    message is the engine's own description (which tensor, rank, field)."""

    def __init__(self, message, code=ERR_INTERNAL):
        super().__init__(message)
        self.code = code


class InvalidArgumentError(KoloError, ValueError):
    """A bad argument (dtype, shape, root, name...); nothing was submitted."""


class InvalidUsageError(KoloError, ValueError):
    """A call that makes no sense now, e.g. a name already in flight
    (a ValueError, as Horovod raises for a duplicate name)."""


class KoloTimeoutError(KoloError, TimeoutError):
    """No progress within KOLO_TIMEOUT_S, or a stall longer than
    KOLO_STALL_SHUTDOWN_S."""


class PeerLostError(KoloError):
    """Another rank died or closed its connections."""


class MismatchError(KoloError):
    """Ranks submitted one name with different arguments (e.g. shapes)."""


class AbortedError(KoloError):
    """The communicator was aborted."""


class RevokedError(KoloError):
    """The communicator was revoked (kolo_comm_revoke), here or on another
    rank: shrink it, or make a new one."""


class UnsupportedError(KoloError):
    """Not available in this build."""


_ERROR_CLASSES = {
    ERR_INVALID_ARGUMENT: InvalidArgumentError,
    ERR_INVALID_USAGE: InvalidUsageError,
    ERR_TIMEOUT: KoloTimeoutError,
    ERR_PEER_LOST: PeerLostError,
    ERR_MISMATCH: MismatchError,
    ERR_ABORTED: AbortedError,
    ERR_REVOKED: RevokedError,
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


KOLO_UNIQUE_ID_BYTES = 128
CONFIG_UNSET_INT = -9223372036854775807 - 1
CONFIG_UNSET_DOUBLE = -1.0e300


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * KOLO_UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    """kolo_config_t, its fields made from the library's own list of them
    (kolo_config_describe, once the library is loaded: _mirror_config);
    Config.unset() leaves every field to the environment and the defaults
    (KOLO_CONFIG_INITIALIZER)."""
    config_version = None  # KOLO_CONFIG_VERSION of the loaded library

    @classmethod
    def unset(cls):
        c = cls()
        for name, kind in cls._fields_:
            if kind is ctypes.c_int64:
                setattr(c, name, CONFIG_UNSET_INT)
            elif kind is ctypes.c_double:
                setattr(c, name, CONFIG_UNSET_DOUBLE)
        c.size, c.version = ctypes.sizeof(cls), cls.config_version
        return c

    @classmethod
    def sharing_cores(cls):
        """Config.unset() whose defaults suit a rank that computes on the
        CPU while kolo communicates (DDP and Horovod-style training overlap
        allreduces with the backward pass): kolo's thread polls briefly
        (50 us) and yields rather than spin for milliseconds on a core the
        compute needs. They are defaults: KOLO_SPIN_US / KOLO_SPIN_YIELD,
        when set, win (kolo.h's `defaults`). Set c.defaults_config's fields
        for more such defaults."""
        c = cls.unset()
        d = cls.unset()
        d.spin_us, d.spin_yield = 50, 1
        c.defaults_config = d  # kept alive with c
        c.defaults = ctypes.addressof(d)
        return c


_V, _SZ, _I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
_SZ_P = ctypes.POINTER(ctypes.c_size_t)
# kolo_<call>_async (kolo.h's ordered asynchronous calls): arguments before
# the trailing kolo_handle_t*.
_ASYNC_CALLS = {
    "allreduce": [_V, _V, _V, _SZ, _I, _I],
    "allreduce_wire": [_V, _V, _V, _SZ, _I, _I, _I, _V],
    "allgather": [_V, _V, _V, _SZ, _I],
    "broadcast": [_V, _V, _SZ, _I, _I],
    "reduce_scatter": [_V, _V, _V, _SZ, _I, _I],
    "reduce_scatterv": [_V, _V, _V, _SZ_P, _I, _I],
    "barrier": [_V],
    "reduce": [_V, _V, _V, _SZ, _I, _I, _I],
    "gather": [_V, _V, _V, _SZ, _I, _I],
    "scatter": [_V, _V, _V, _SZ, _I, _I],
    "allgatherv": [_V, _V, _SZ, _V, _SZ_P, _SZ_P, _I],
    "alltoall": [_V, _V, _V, _SZ, _I],
    "alltoallv": [_V, _V, _SZ_P, _SZ_P, _V, _SZ_P, _SZ_P, _I],
    "send": [_V, _V, _SZ, _I, _I],
    "recv": [_V, _V, _SZ, _I, _I],
    "recv_any": [_V, _V, _SZ, _I, _c_int_p],  # the sender's rank is written to the last
}

# name: argument types (every function returns kolo_result_t).
_SIGNATURES = {
    "kolo_comm_init_from_env": [_c_void_pp],
    "kolo_comm_init_from_env_config": [_c_void_pp, ctypes.POINTER(Config)],
    "kolo_comm_init": [_c_void_pp, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int],
    "kolo_comm_destroy": [ctypes.c_void_p],
    "kolo_comm_split": [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, _c_void_pp],
    "kolo_comm_rank": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_gpu": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_size": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_local_rank": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_local_size": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_abort": [ctypes.c_void_p],
    "kolo_comm_revoke": [ctypes.c_void_p],
    "kolo_comm_shrink": [ctypes.c_void_p, _c_int_p, ctypes.c_int, ctypes.POINTER(Config), ctypes.c_int, _c_void_pp],
    "kolo_comm_get_unique_id": [ctypes.c_void_p, ctypes.POINTER(UniqueId)],
    "kolo_comm_grow": [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(UniqueId), ctypes.c_int, ctypes.POINTER(Config),
                       _c_void_pp],
    "kolo_comm_get_timeout": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)],
    "kolo_comm_get_async_error": [ctypes.c_void_p, _c_int_p],
    "kolo_comm_estimate": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_double),
                           ctypes.POINTER(ctypes.c_char_p)],
    "kolo_submit_allreduce": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                              _c_int64_p, ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double, _c_void_pp],
    "kolo_submit_grouped_allreduce": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, _c_void_pp, _c_void_pp,
                                      _c_int_p, ctypes.POINTER(_c_int64_p), ctypes.c_int, ctypes.c_int,
                                      ctypes.c_double, ctypes.c_double, _c_void_pp],
    "kolo_submit_allreduce_wire": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                   _c_int64_p, ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double,
                                   ctypes.c_int, ctypes.c_int, _c_void_pp],
    "kolo_submit_grouped_allreduce_wire": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, _c_void_pp, _c_void_pp,
                                           _c_int_p, ctypes.POINTER(_c_int64_p), ctypes.c_int, ctypes.c_int,
                                           ctypes.c_double, ctypes.c_double, ctypes.c_int, ctypes.c_int,
                                           _c_void_pp],
    "kolo_engine_get_residual_bytes": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)],
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
    "kolo_handle_set_callback": [ctypes.c_void_p, CALLBACK, ctypes.c_void_p],
    "kolo_timeline_start": [ctypes.c_void_p, ctypes.c_char_p],
    "kolo_timeline_stop": [ctypes.c_void_p],
    "kolo_engine_get_stats": [ctypes.c_void_p, ctypes.POINTER(EngineStats)],
    "kolo_get_version": [_c_int_p, _c_int_p, _c_int_p],
    "kolo_get_unique_id": [ctypes.POINTER(UniqueId)],
    "kolo_comm_init_rank": [_c_void_pp, ctypes.c_int, ctypes.POINTER(UniqueId), ctypes.c_int,
                            ctypes.POINTER(Config)],
    "kolo_group_start": [],
    "kolo_group_end": [],
}
_SIGNATURES.update({"kolo_%s_async" % call: args + [_c_void_pp] for call, args in _ASYNC_CALLS.items()})
# kolo_<call>_stream (kolo.h's GPU buffers): the asynchronous call's
# arguments and a cudaStream_t; it runs in that stream's order.
STREAM_CALLS = frozenset({"allreduce", "allgather", "broadcast", "reduce_scatter", "alltoall"})
_SIGNATURES.update({"kolo_%s_stream" % call: _ASYNC_CALLS[call] + [_V] for call in STREAM_CALLS})


_HERE = os.path.dirname(os.path.abspath(__file__))
# In a checkout (and in Bazel's runfiles) this package is <repo>/bindings/python/kolo.
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
_VERSION_FILE = os.path.join(_REPO, "bindings", "c", "version.bzl")
_IN_CHECKOUT = os.path.isfile(_VERSION_FILE)


def _package_version():
    """The libkolo version this package was made with: an installed package
    has it in kolo/_version.py (written by tools/install.sh and setup.py); a
    checkout reads bindings/c/version.bzl, where it is declared."""
    try:
        from kolo._version import version
        return version
    except ImportError:
        pass
    try:
        with open(_VERSION_FILE) as f:
            found = re.search(r'^KOLO_VERSION = "(\d+\.\d+\.\d+)"$', f.read(), re.M)
    except OSError:
        found = None
    if not found:
        raise ImportError("kolo: cannot tell which libkolo this package needs: it has no kolo/_version.py "
                          "(written when installed) and %s declares no KOLO_VERSION" % _VERSION_FILE)
    return found.group(1)


def _candidates(soname):
    """Where libkolo may be, in order (KOLO_LIBRARY, when set, replaces them
    all): the checkout's bazel-bin; beside this package; the lib directory of
    the prefix the package is installed under (PREFIX/lib/python3.X/
    dist-packages/kolo: PREFIX/lib); sys.prefix/lib (a virtual environment);
    last the bare SONAME, for the system loader (ld.so.cache, LD_LIBRARY_PATH)."""
    places = []
    if _IN_CHECKOUT:
        places.append(os.path.join(_REPO, "bazel-bin", "bindings", "c", "libkolo.so"))
    places.append(os.path.join(_HERE, soname))
    # Installed as PREFIX/lib/python3.X/{dist,site}-packages/kolo: PREFIX/lib.
    d = _HERE
    while os.path.dirname(d) != d:
        d = os.path.dirname(d)
        if os.path.basename(d) in ("lib", "lib64"):
            places.append(os.path.join(d, soname))
            break
    places.append(os.path.join(sys.prefix, "lib", soname))  # e.g. a virtual environment
    unique = []
    for p in places:
        if p not in unique:
            unique.append(p)
    return unique + [soname]


def _open(soname):
    explicit = os.environ.get("KOLO_LIBRARY")
    if explicit and not os.path.exists(explicit):
        # Asked for by name: any other library would not be what the user meant.
        raise ImportError("kolo: KOLO_LIBRARY=%s does not exist" % explicit)
    tried = []
    for where in [explicit] if explicit else _candidates(soname):
        if os.sep in where and not os.path.exists(where):
            tried.append(where)
            continue
        try:
            return ctypes.CDLL(where), where
        except OSError as e:
            if os.sep not in where:
                tried.append("%s through the system loader (%s)" % (where, e))
                continue
            raise ImportError("kolo: cannot load %s (%s). If it is a sanitizer build (a checkout's bazel-bin "
                              "follows the last --config), preload its runtime or rebuild the plain one with `bazel "
                              "build //bindings/c:libkolo.so`; KOLO_LIBRARY may name another" % (where, e)) from e
    raise ImportError("kolo: libkolo not found; looked at %s. Build it with `bazel build //bindings/c:libkolo.so`, "
                      "install it with tools/install.sh PREFIX, or set KOLO_LIBRARY to its path" % "; ".join(tried))


def _load():
    wanted = _package_version()
    major = wanted.split(".")[0]
    lib, where = _open("libkolo.so." + major)
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name, None)
        if fn is None:
            raise ImportError("kolo: %s has no %s: it is older than this package (libkolo %s); rebuild it with "
                              "`bazel build //bindings/c:libkolo.so` or install the matching one" % (where, name, wanted))
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    lib.kolo_last_error.argtypes = []
    lib.kolo_last_error.restype = ctypes.c_char_p
    lib.kolo_result_string.argtypes = [ctypes.c_int]
    lib.kolo_result_string.restype = ctypes.c_char_p
    got = [ctypes.c_int() for _ in range(3)]
    if lib.kolo_get_version(*(ctypes.byref(v) for v in got)) != SUCCESS:
        raise ImportError("kolo: kolo_get_version failed in %s: %s" % (where, lib.kolo_last_error().decode()))
    version = ".".join(str(v.value) for v in got)
    # The major version is libkolo's ABI; this package's signatures are its.
    if version.split(".")[0] != major:
        raise ImportError("kolo: %s is libkolo %s, but this package is for %s (major version %s)"
                          % (where, version, wanted, major))
    return lib, version, where


# The library, its version (kolo.__version__) and the file it was loaded from.
lib, version, path = _load()


def _mirror_config():
    """Config's fields, from the library's list of kolo_config_t's fields,
    checked against the offsets it gives."""
    lib.kolo_config_describe.argtypes = []
    lib.kolo_config_describe.restype = ctypes.c_char_p
    lines = lib.kolo_config_describe().decode().splitlines()
    _, config_version, size = lines[0].split("\t")
    types = {"int64": ctypes.c_int64, "double": ctypes.c_double, "string": ctypes.c_char_p, "config": ctypes.c_void_p}
    rows = [line.split("\t") for line in lines[1:]]
    Config._fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint)] + [(r[0], types[r[1]]) for r in rows]
    Config.config_version = int(config_version)
    for r in rows:
        if getattr(Config, r[0]).offset != int(r[2]):
            raise ImportError("kolo: kolo_config_t.%s lies at %s in %s, not where the mirror puts it (%d)"
                              % (r[0], r[2], path, getattr(Config, r[0]).offset))
    if ctypes.sizeof(Config) != int(size):
        raise ImportError("kolo: kolo_config_t is %s bytes in %s, not %d" % (size, path, ctypes.sizeof(Config)))
    return rows


# kolo_config_t's fields as the library lists them: name, type, offset,
# variable, default, least, greatest, meaning.
config_fields = _mirror_config()


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
