"""Process sets, as Horovod's: subsets of the world's ranks that run
collectives among themselves.

A process set is a communicator split from the world (kolo_comm_split) with
its own engine, so its named operations negotiate, fuse and run apart from
every other set's: names are scoped to their set, and sets run concurrently.
Adding and removing sets is collective over the world (every rank calls
add_process_set/remove_process_set with the same sets in the same order,
as under Horovod's HOROVOD_DYNAMIC_PROCESS_SETS); ids count up from 1 in
that order, the global set being 0. Removing a set destroys its
communicator: operations still in flight on it fail.
"""
import ctypes
import numbers
import threading

from kolo import _runtime
from kolo._library import check, lib

_SPLIT_NOCOLOR = -1


class ProcessSet:
    """A set of world ranks. Pass it to init(process_sets=[...]) or
    add_process_set(), then as `process_set=` to the collectives."""

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        if isinstance(ranks_or_comm, (str, bytes)) or not hasattr(ranks_or_comm, "__iter__"):
            raise ValueError("ProcessSet takes a list of world ranks (kolo has no MPI communicators), not %r"
                             % (ranks_or_comm,))
        ranks = sorted(ranks_or_comm)
        if any(isinstance(r, bool) or not isinstance(r, numbers.Integral) for r in ranks):
            raise ValueError("ProcessSet takes a list of integer ranks, got %r" % (ranks_or_comm,))
        self.ranks = [int(r) for r in ranks]
        self._group = None  # this rank's communicator in the set, while the set exists and includes it

    def _invalidate(self):
        self.process_set_id = None
        self._group = None

    def size(self):
        """The number of ranks in the set, or None if it is not initialized."""
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        """This process's rank within the set (None if the set is not
        initialized; ValueError if this process is not in it)."""
        if self.process_set_id is None:
            return None
        return group_of(self).rank

    def included(self):
        """Whether this process is in the set (None before it has ranks)."""
        if self.ranks is None:
            return None
        return _runtime.rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=None)" % (self.process_set_id, self.ranks)

    __repr__ = __str__


class _Registry:
    lock = threading.Lock()
    sets = {}  # id -> ProcessSet, the global set excluded
    next_id = 1


_registry = _Registry()
global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def group_of(process_set):
    """The runtime group that runs process_set's operations on this rank; a
    ValueError naming the set if it is not initialized or this rank is not
    one of its members."""
    if process_set is None or process_set is global_process_set or process_set.process_set_id == 0:
        return _runtime.world()
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a kolo ProcessSet, not %r" % (process_set,))
    _runtime.world()  # raises if kolo is not initialized
    if process_set.process_set_id is None:
        raise ValueError("%s is not initialized: pass it to init(process_sets=...) or add_process_set()"
                         % process_set)
    if process_set._group is None:
        raise ValueError("rank %d is not in process set %d (ranks %s): only its members may submit to it"
                         % (_runtime.rank(), process_set.process_set_id, process_set.ranks))
    return process_set._group


def _exists(ranks):
    return any(ps.ranks == sorted(ranks) for ps in _registry.sets.values())


# Framework layers that look communicators up by set id themselves
# (kolo.tensorflow's kernels): each has added(process_set) and
# removing(process_set), called after a set is added and before its
# communicator is destroyed.
membership_listeners = []


def _destroy(process_set):
    """Forgets the set's id and communicator, then destroys it (its engine
    stops: operations in flight fail)."""
    for listener in membership_listeners:
        listener.removing(process_set)
    group = process_set._group
    process_set._invalidate()
    if group is not None:
        lib.kolo_comm_destroy(group.comm)


def add_process_set(process_set):
    """Adds a process set (a ProcessSet or a list of world ranks) and returns
    it initialized. Collective over the world. A set with the same ranks as
    one that exists is a ValueError on every rank."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    world = _runtime.world()
    with _registry.lock:
        if process_set.process_set_id is not None:
            raise ValueError("%s was added already" % process_set)
        bad = [r for r in process_set.ranks if not 0 <= r < world.size]
        if bad or not process_set.ranks or len(set(process_set.ranks)) != len(process_set.ranks):
            raise ValueError("a process set needs distinct ranks of the world (0..%d), got %s"
                             % (world.size - 1, process_set.ranks))
        if _exists(process_set.ranks):
            raise ValueError("Attempted to add a duplicate process set: %s" % process_set)
        member = world.rank in process_set.ranks
        new = ctypes.c_void_p()
        check(lib.kolo_comm_split(world.comm, 0 if member else _SPLIT_NOCOLOR, world.rank, ctypes.byref(new)))
        process_set.process_set_id = _registry.next_id
        _registry.next_id += 1
        if member:
            process_set._group = _runtime.Group(new, process_set.ranks,
                                                "process set %d" % process_set.process_set_id)
        _registry.sets[process_set.process_set_id] = process_set
    for listener in membership_listeners:
        listener.added(process_set)
    return process_set


def remove_process_set(process_set):
    """Removes a process set added before; returns whether it was removed
    (False for the global set or one not initialized). Collective over the
    world. Its operations still in flight fail."""
    with _registry.lock:
        ps_id = process_set.process_set_id
        if ps_id is None or ps_id == 0 or _registry.sets.get(ps_id) is not process_set:
            return False
        del _registry.sets[ps_id]
    _destroy(process_set)
    return True


def init(comm=None, process_sets=None):
    """Joins the job (see kolo._runtime.init), then adds process_sets (a
    list of ProcessSet, or "dynamic" for none yet; kolo always allows adding
    sets later), in order. A duplicate is left uninitialized and reported
    once the others are added, as Horovod does. comm: as Horovod's, an
    mpi4py communicator whose ranks are the world (the job's id travels by
    its bcast), or a list of world ranks to run on, which kolo supports only
    as all of them."""
    if hasattr(comm, "bcast") and hasattr(comm, "Get_rank"):
        _runtime.init(mpi_comm=comm)
        comm = None
    elif comm is not None and not isinstance(comm, (list, tuple, range)):
        raise ValueError("kolo.init(comm=...) takes an mpi4py communicator or a list of world ranks, not %r"
                         % (comm,))
    else:
        _runtime.init()
    if comm and sorted(comm) != list(range(_runtime.size())):
        raise NotImplementedError("kolo.init(comm=%s): every launched rank joins the world; use a process set "
                                  "for a subset of ranks" % (list(comm),))
    global_process_set.ranks = list(range(_runtime.size()))
    if process_sets is None:
        return
    if isinstance(process_sets, str):
        if process_sets.lower() != "dynamic":
            raise ValueError("process_sets must be a list of ProcessSet or \"dynamic\", not %r" % process_sets)
        return
    duplicates = []
    for index, ps in enumerate(process_sets):
        ranks = ps.ranks if isinstance(ps, ProcessSet) else ps
        if _exists(ranks):
            duplicates.append((index, ps))
        else:
            add_process_set(ps)
    if duplicates:
        index, ps = duplicates[0]
        raise ValueError("kolo could not be initialized because process_sets entry number %d is a duplicate: %s"
                         % (index, ps))


def registered_sets():
    """The process sets added and not removed, the global set excluded."""
    with _registry.lock:
        return list(_registry.sets.values())


def _remove_all():
    """At shutdown: every set's communicator goes before the world's, and
    the sets' ids become invalid (a later init starts counting again)."""
    with _registry.lock:
        sets, _registry.sets = list(_registry.sets.values()), {}
        _registry.next_id = 1
    for ps in sets:
        _destroy(ps)


_runtime._shutdown_hooks.append(_remove_all)
