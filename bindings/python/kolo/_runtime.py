"""The process's communicator (init/shutdown, rank and size) and handles of
named asynchronous operations (poll/synchronize)."""
import atexit
import ctypes
import itertools
import os
import threading

from kolo._library import SUCCESS, EngineStats, KoloError, check, error_for, lib

_LAUNCH_RANK_VARIABLES = ("KOLO_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


class _State:
    comm = None  # ctypes.c_void_p while initialized
    rank = size = local_rank = local_size = 0
    lock = threading.Lock()
    counters = {}  # kind -> itertools.count, for operations given no name
    orphans = []  # handles dropped while running: kept alive until done


_state = _State()


def init():
    """Joins the job: reads rank, size and the master's address from the
    launcher's environment (kolorun, torchrun, Open MPI, Slurm). Without any
    launcher the process is a world of one. Calling it again does nothing."""
    with _state.lock:
        if _state.comm is not None:
            return
        comm = ctypes.c_void_p()
        if any(v in os.environ for v in _LAUNCH_RANK_VARIABLES):
            check(lib.kolo_comm_init_from_env(ctypes.byref(comm)))
        else:
            check(lib.kolo_comm_init(ctypes.byref(comm), 0, 1, b"127.0.0.1", 0))
        values = []
        for getter in (lib.kolo_comm_rank, lib.kolo_comm_size, lib.kolo_comm_local_rank, lib.kolo_comm_local_size):
            out = ctypes.c_int()
            check(getter(comm, ctypes.byref(out)))
            values.append(out.value)
        _state.rank, _state.size, _state.local_rank, _state.local_size = values
        _state.counters = {}
        _state.comm = comm


def shutdown():
    """Leaves the job: operations still pending fail, the engine and the
    connections close. init() may be called again afterwards."""
    with _state.lock:
        comm, _state.comm = _state.comm, None
        if comm is None:
            return
        lib.kolo_comm_destroy(comm)
        for h in _state.orphans:
            h.release()
        _state.orphans = []


atexit.register(shutdown)


def is_initialized():
    return _state.comm is not None


def comm():
    c = _state.comm
    if c is None:
        raise ValueError("kolo has not been initialized; call kolo.init() first")
    return c


def rank():
    comm()
    return _state.rank


def size():
    comm()
    return _state.size


def local_rank():
    comm()
    return _state.local_rank


def local_size():
    comm()
    return _state.local_size


def cross_size():
    """The number of hosts (assuming as many ranks on each)."""
    return size() // local_size()


def cross_rank():
    """This rank's host index (ranks fill hosts in order)."""
    return rank() // local_size()


def is_homogeneous():
    return size() % local_size() == 0


def abort():
    """Aborts the communicator: pending and later operations on every rank
    fail with AbortedError (the others learn it through their connections)."""
    check(lib.kolo_comm_abort(comm()))


def start_timeline(file_path, mark_cycles=False):
    """Writes a Chrome-trace timeline of this rank's operations to file_path."""
    del mark_cycles  # the engine's rounds are marked anyway
    check(lib.kolo_timeline_start(comm(), os.fsencode(file_path)))


def stop_timeline():
    check(lib.kolo_timeline_stop(comm()))


def engine_stats():
    """The engine's counters on this rank, as a dict."""
    stats = EngineStats()
    check(lib.kolo_engine_get_stats(comm(), ctypes.byref(stats)))
    return {name: getattr(stats, name) for name, _ in EngineStats._fields_}


def operation_name(kind, name):
    """The engine name of an operation: the caller's, else "<kind>.noname.<n>"
    counted per kind, which matches across ranks that call in one order."""
    if name is not None:
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty string, not %r" % (name,))
        return name.encode()
    counter = _state.counters.setdefault(kind, itertools.count())
    return ("%s.noname.%d" % (kind, next(counter))).encode()


class Handle:
    """One named operation in flight. `keep` holds every buffer the engine
    reads or writes until it completes; `finish(handle)` builds the result
    once it has (copying outputs, casting back, writing in-place results)."""

    def __init__(self, raw, keep, finish):
        self._raw = raw
        self._keep = keep
        self._finish = finish
        self._done = False
        self._result = None
        self._error = None
        _sweep_orphans()

    def poll(self):
        """True once the operation has completed (successfully or not)."""
        if self._done or self._raw is None:
            return True
        done = ctypes.c_int()
        lib.kolo_handle_test(self._raw, ctypes.byref(done))
        return bool(done.value)

    def synchronize(self):
        """Waits for the operation and returns its result; raises the
        engine's error (mismatch, timeout, lost peer) as a KoloError."""
        if self._done:
            return self._result
        if self._error is not None:
            raise self._error
        if self._raw is None:
            raise KoloError("this operation's handle was already released")
        code = lib.kolo_handle_wait(self._raw, -1.0)
        if code != SUCCESS:
            error = error_for(code)
            if self.poll():
                self._error = error  # the operation's own failure: the same answer every time
            self._park_or_release()  # a wait that timed out leaves the operation running
            raise error
        try:
            self._result = self._finish(self)
        finally:
            self.release()
        self._done = True
        return self._result

    def output_bytes(self):
        """(address, size) of the engine-owned output (allgather, alltoall)."""
        data, nbytes = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.kolo_handle_output(self._raw, ctypes.byref(data), ctypes.byref(nbytes)))
        return data.value or 0, nbytes.value

    def output_rows(self):
        rows = (ctypes.c_int64 * _state.size)()
        check(lib.kolo_handle_output_rows(self._raw, rows, _state.size))
        return list(rows)

    def join_rank(self):
        last = ctypes.c_int()
        check(lib.kolo_handle_join_rank(self._raw, ctypes.byref(last)))
        return last.value

    def release(self):
        raw, self._raw = self._raw, None
        if raw is not None:
            lib.kolo_handle_release(raw)
        self._keep = None

    def _park_or_release(self):
        # While the operation runs the engine still uses the buffers, so
        # they must outlive this handle: park them until it is done.
        if self._raw is not None and _state.comm is not None and not self.poll():
            _state.orphans.append(_Orphan(self._raw, self._keep))
            self._raw, self._keep = None, None
        else:
            self.release()

    def __del__(self):
        self._park_or_release()


class _Orphan:
    def __init__(self, raw, keep):
        self.raw, self.keep = raw, keep

    def done(self):
        flag = ctypes.c_int()
        lib.kolo_handle_test(self.raw, ctypes.byref(flag))
        return bool(flag.value)

    def release(self):
        lib.kolo_handle_release(self.raw)
        self.keep = None


def _sweep_orphans():
    if _state.orphans:
        still = []
        for o in _state.orphans:
            if o.done():
                o.release()
            else:
                still.append(o)
        _state.orphans = still


def submit(fn, *args, keep=(), finish=None):
    """Calls a kolo_submit_* function (its trailing handle argument added
    here) and wraps the result in a Handle."""
    raw = ctypes.c_void_p()
    check(fn(comm(), *args, ctypes.byref(raw)))
    return Handle(raw, list(keep), finish or (lambda h: None))


def poll(handle):
    return handle.poll()


def synchronize(handle):
    return handle.synchronize()


def barrier(name=None):
    """Returns once every rank has reached the barrier of this name."""
    submit(lib.kolo_submit_barrier, operation_name("barrier", name)).synchronize()


def join():
    """This rank has no more data: it takes part in the other ranks'
    operations with neutral contributions until all have joined. Returns the
    last rank to join."""
    raw = ctypes.c_void_p()
    check(lib.kolo_join(comm(), ctypes.byref(raw)))
    return Handle(raw, [], lambda h: h.join_rank()).synchronize()
