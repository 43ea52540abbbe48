"""The process's communicator (init/shutdown, rank and size) and handles of
named asynchronous operations (poll/synchronize)."""
import atexit
import ctypes
import itertools
import numbers
import os
import threading

from kolo import _elastic
from kolo._library import SUCCESS, Config, EngineStats, KoloError, UniqueId, check, error_for, lib

_LAUNCH_RANK_VARIABLES = ("KOLO_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


class Group:
    """A communicator the named operations run on: the world, or a process
    set's (kolo_comm_split of the world). `ranks` are its members' world
    ranks, in its own rank order; names given to no operation are counted
    per group, so a group's members must issue its unnamed operations in
    one order."""

    def __init__(self, comm, ranks, label):
        self.comm = comm
        self.ranks = list(ranks)
        self.size = len(self.ranks)
        out = ctypes.c_int()
        check(lib.kolo_comm_rank(comm, ctypes.byref(out)))
        self.rank = out.value
        self.label = label
        self._counters = {}  # kind -> itertools.count
        self._lock = threading.Lock()
        self._takes_gpu_memory = None

    def takes_gpu_memory(self):
        """Whether this communicator runs collectives on GPU memory: a
        libkolo built with CUDA, and a GPU this rank can use (kolo_comm_gpu,
        asked once). Where not, kolo's layers copy device arrays to the host
        and back."""
        if self._takes_gpu_memory is None:
            device = ctypes.c_int()
            self._takes_gpu_memory = lib.kolo_comm_gpu(self.comm, ctypes.byref(device)) == SUCCESS
        return self._takes_gpu_memory

    def operation_name(self, kind, name):
        """The engine name of an operation: the caller's, else
        "<kind>.noname.<n>" counted per kind."""
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ValueError("name must be a non-empty string, not %r" % (name,))
            return name.encode()
        with self._lock:
            counter = self._counters.setdefault(kind, itertools.count())
            return ("%s.noname.%d" % (kind, next(counter))).encode()

    def group_rank(self, world_rank, what="root_rank"):
        """The rank within this group of a world rank (Horovod's collectives
        name roots by world rank, whatever the process set)."""
        if isinstance(world_rank, bool) or not isinstance(world_rank, numbers.Integral):
            raise ValueError("%s must be an integer rank, not %r" % (what, world_rank))
        if world_rank not in self.ranks:
            raise ValueError("%s %d is not a rank of %s (ranks %s)" % (what, world_rank, self.label, self.ranks))
        return self.ranks.index(int(world_rank))

    def submit(self, fn, *args, keep=(), finish=None):
        """Calls a kolo_submit_* function on this group's communicator (its
        trailing handle argument added here) and wraps the result in a Handle."""
        raw = ctypes.c_void_p()
        check(fn(self.comm, *args, ctypes.byref(raw)))
        return Handle(raw, list(keep), finish or (lambda h: None), self.size)


class _State:
    comm = None  # ctypes.c_void_p while initialized
    world = None  # its Group
    rank = size = local_rank = local_size = 0
    lock = threading.Lock()
    inits = 0  # init()s tried from the launcher's environment, counted alike on every rank
    orphans = []  # handles dropped while running: kept alive until done


_state = _State()


def init(mpi_comm=None):
    """Joins the job: reads rank, size and the master's address from the
    launcher's environment (kolorun, torchrun, Open MPI, Slurm). Without any
    launcher the process is a world of one. With mpi_comm (an mpi4py
    communicator) the world is that communicator's ranks, in its order:
    its rank 0 makes the job's id (kolo_get_unique_id), which travels to the
    others by the communicator's bcast, as NCCL's does. The rank computes on
    the CPU meanwhile, so kolo's thread polls briefly and yields
    (Config.sharing_cores). Calling it again does nothing."""
    with _state.lock:
        if _state.comm is not None:
            return
        comm = ctypes.c_void_p()
        config = Config.sharing_cores()
        if mpi_comm is not None:
            _init_from_mpi(comm, mpi_comm, config)
        elif _elastic.under_driver():
            # An elastic job: the driver says where this worker is in the
            # job's next version (kolo/runner/elastic_driver.py); a version
            # that does not come together (a worker of it lost meanwhile)
            # gives way to the next.
            def join(job_id):
                config.job_id = job_id.encode()
                check(lib.kolo_comm_init_from_env_config(ctypes.byref(comm), ctypes.byref(config)))

            _elastic.join_next_version(join)
        elif any(v in os.environ for v in _LAUNCH_RANK_VARIABLES):
            _state.inits += 1
            job = _job_of_this_init()
            if job is not None:
                config.job_id = job
            check(lib.kolo_comm_init_from_env_config(ctypes.byref(comm), ctypes.byref(config)))
        else:
            check(lib.kolo_comm_init(ctypes.byref(comm), 0, 1, b"127.0.0.1", 0))
        values = []
        for getter in (lib.kolo_comm_rank, lib.kolo_comm_size, lib.kolo_comm_local_rank, lib.kolo_comm_local_size):
            out = ctypes.c_int()
            check(getter(comm, ctypes.byref(out)))
            values.append(out.value)
        _state.rank, _state.size, _state.local_rank, _state.local_size = values
        _state.world = Group(comm, range(_state.size), "the world")
        _state.comm = comm
        for hook in _init_hooks:
            hook(_state.world)


def _init_from_mpi(comm, mpi_comm, config):
    ident = UniqueId()
    rank, size = mpi_comm.Get_rank(), mpi_comm.Get_size()
    if rank == 0:
        check(lib.kolo_get_unique_id(ctypes.byref(ident)))
    raw = mpi_comm.bcast(ctypes.string_at(ctypes.addressof(ident), ctypes.sizeof(ident)) if rank == 0 else None,
                         root=0)
    ctypes.memmove(ctypes.addressof(ident), raw, ctypes.sizeof(ident))
    check(lib.kolo_comm_init_rank(ctypes.byref(comm), size, ctypes.byref(ident), rank, ctypes.byref(config)))


def _job_of_this_init():
    """Each init() after a shutdown() is a new run of the job, under a job
    id of its own (None for the first: the launcher's): every rank counts
    its inits alike (re-initializing is collective), and a rank that comes
    back early then waits for rank 0's new store instead of joining the one
    it is closing."""
    if _state.inits == 1:
        return None
    return ("%s/init-%d" % (os.environ.get("KOLO_JOB_ID", ""), _state.inits - 1)).encode()


def shutdown():
    """Leaves the job: operations still pending fail, the engine and the
    connections close. init() may be called again afterwards."""
    with _state.lock:
        comm, _state.comm = _state.comm, None
        if comm is None:
            return
        _state.world = None
        for hook in _shutdown_hooks:
            hook()
        lib.kolo_comm_destroy(comm)
        for h in _state.orphans:
            h.release()
        _state.orphans = []


atexit.register(shutdown)
_shutdown_hooks = []  # called before the world communicator goes (process sets destroy theirs)
_init_hooks = []  # called with the world's Group once init() has made it (framework layers record it)


def is_initialized():
    return _state.comm is not None


def world():
    w = _state.world
    if w is None:
        raise ValueError("kolo has not been initialized; call kolo.init() first")
    return w


def comm():
    return world().comm


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


def _launched_cross():
    """(cross rank, cross size) as the launcher placed this rank (kolorun
    says, as horovodrun does), when this is the world it launched."""
    try:
        launched = (int(os.environ["KOLO_RANK"]), int(os.environ["KOLO_WORLD_SIZE"]))
        cross = (int(os.environ["KOLO_CROSS_RANK"]), int(os.environ["KOLO_CROSS_SIZE"]))
    except (KeyError, ValueError):
        return None
    return cross if launched == (rank(), size()) else None


def cross_size():
    """The number of hosts with a rank of this local rank (Horovod's
    definition; kolorun says so, else as many ranks on each host is assumed)."""
    launched = _launched_cross()
    return launched[1] if launched else size() // local_size()


def cross_rank():
    """This rank's host among those with a rank of its local rank."""
    launched = _launched_cross()
    return launched[0] if launched else rank() // local_size()


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


def residual_bytes():
    """Bytes error feedback keeps on this rank (Compression.wire(...,
    error_feedback=True)): one float per element of each tensor that uses it."""
    kept = ctypes.c_size_t()
    check(lib.kolo_engine_get_residual_bytes(comm(), ctypes.byref(kept)))
    return kept.value


class Handle:
    """One named operation in flight. `keep` holds every buffer the engine
    reads or writes until it completes; `finish(handle)` builds the result
    once it has (copying outputs, casting back, writing in-place results)."""

    def __init__(self, raw, keep, finish, group_size):
        self._raw = raw
        self._group_size = group_size
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
        rows = (ctypes.c_int64 * self._group_size)()
        check(lib.kolo_handle_output_rows(self._raw, rows, self._group_size))
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


def poll(handle):
    return handle.poll()


def synchronize(handle):
    return handle.synchronize()


def barrier(name=None, group=None):
    """Returns once every rank (of the group) has reached the barrier of this name."""
    group = group or world()
    group.submit(lib.kolo_submit_barrier, group.operation_name("barrier", name)).synchronize()


def join():
    """This rank has no more data: it takes part in the other ranks'
    operations with neutral contributions until all have joined. Returns the
    last rank to join."""
    raw = ctypes.c_void_p()
    check(lib.kolo_join(comm(), ctypes.byref(raw)))
    return Handle(raw, [], lambda h: h.join_rank(), size()).synchronize()


class Combined:
    """Several operations seen as one handle (grouped allgathers and
    reduce-scatters, Adasum): poll() is true once all have completed;
    synchronize() waits for each and returns finish(their results). `parts`
    are the operations' own handles (an allgather's tells its rows)."""

    def __init__(self, handles, finish=list):
        self.parts = list(handles)
        self._finish = finish
        self._done = False
        self._result = None

    def poll(self):
        return self._done or all(h.poll() for h in self.parts)

    def synchronize(self):
        if not self._done:
            self._result = self._finish([h.synchronize() for h in self.parts])
            self._done = True
        return self._result
