"""torch.distributed.shrink_group on kolo: the group as torch sees a
backend that can shrink (ShrinkableView), and the shrunk group
(kolo_comm_shrink)."""
import ctypes
import datetime

from kolo._library import SUCCESS, check, error_for, lib
from kolo.torch import _device_backend


class ShrinkableView:
    """kolo's group as torch sees a backend (group._get_backend): it can
    shrink (shrink_group), and the shrunk group comes back as the
    c10d.Backend torch registers on the new group
    (kolo/torch/_device_backend.cpp; that Backend shrinks again the same
    way); it estimates collectives' times (_time_estimator). Anything else
    torch asks of a backend here is answered as a backend that supports
    none of it would."""

    supports_shrinking = True
    supports_splitting = False
    supports_coalescing = False
    supports_time_estimate = True

    def __init__(self, group):
        self._group = group

    def name(self):
        return self._group.getBackendName()

    # torch's _time_estimator: the collectives called inside it run
    # nothing; their estimated times add up (kolo_comm_estimate).
    def _start_time_estimate(self):
        self._group._start_time_estimate()

    def _end_time_estimate(self):
        return self._group._end_time_estimate()

    def supports_tensor_alloc(self, device):
        return False

    def rank(self):
        return self._group.rank()

    def size(self):
        return self._group.size()

    def shrink(self, ranks_to_exclude, shrink_flags=0, opts_override=None):
        return _device_backend.shrunk_backend(self._group, ranks_to_exclude, shrink_flags, opts_override)

    def abort(self):
        self._group.abort()

    @property
    def options(self):
        return options(self._group)



def options(group):
    """The group's deadline as torch shows a backend's timeout."""
    from torch._C._distributed_c10d import Backend
    return Backend.Options(group.getBackendName(), datetime.timedelta(seconds=group._deadline_s))


def shrunk(group, ranks_to_exclude, shrink_flags):
    """The group of the ranks not in ranks_to_exclude, numbered in their
    order here, over kolo_comm_shrink: it uses none of this group's
    connections and waits for no excluded rank, so it works after a
    failure and around a dead or stuck rank, within the group's
    timeout. SHRINK_ABORT (1, kolo's too) revokes this group first, so
    that an operation still in flight ends. This group stays to be
    destroyed (shrink_group does)."""
    comm = group._comm
    if comm is None or not comm.value:
        raise RuntimeError("kolo: cannot shrink a process group that was destroyed")
    ranks = sorted(int(r) for r in ranks_to_exclude)
    exclude = (ctypes.c_int * max(1, len(ranks)))(*ranks)
    new = ctypes.c_void_p()
    result = lib.kolo_comm_shrink(comm, exclude, len(ranks), None, int(shrink_flags), ctypes.byref(new))
    if result != SUCCESS:
        error = error_for(result)
        raise RuntimeError("kolo: shrinking the process group (rank %d of %d, excluding %s) failed: %s"
                           % (group.rank(), group.size(), ranks, error)) from error
    rank, size = ctypes.c_int(), ctypes.c_int()
    check(lib.kolo_comm_rank(new, ctypes.byref(rank)))
    check(lib.kolo_comm_size(new, ctypes.byref(size)))
    return type(group)(None, rank.value, size.value, None, comm=new)

