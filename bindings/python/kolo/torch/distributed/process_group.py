"""KoloProcessGroup: a torch.distributed process group over a kolo
communicator (see the package's docstring): how one operation is
submitted in kolo's order (_run, _post, the batch of sends and receives),
the time estimator's answers, coalescing, and the group's lifetime. The
collectives themselves are collectives.py's."""
import atexit
import ctypes
import threading
import weakref

import torch
from torch._C._distributed_c10d import ProcessGroup

from kolo._library import STREAM_CALLS, SUCCESS, check, error_for, lib
from kolo.torch._eager import run_eagerly
from kolo.torch.distributed.coalescing import Coalesced
from kolo.torch.distributed.collectives import Collectives
from kolo.torch.distributed.rendezvous import join
from kolo.torch.distributed.shrink import ShrinkableView, shrunk
from kolo.torch.distributed.tensors import Buffer, cuda_device, cuda_devices
from kolo.torch.distributed.work import (KoloFuture, KoloStreamWork, KoloWork, complete_when_done, failure,
                                         on_kolo_thread, retire)

BACKEND_NAME = "kolo"


@run_eagerly
class KoloProcessGroup(Collectives, ProcessGroup):
    """A torch.distributed process group over a kolo communicator."""

    def __init__(self, store, rank, size, timeout, comm=None):
        """A group whose rank 0 starts a rendezvous through `store`, or,
        with `comm`, the group over that kolo communicator (a shrink's)."""
        super().__init__(rank, size)
        if comm is None:
            self._comm = ctypes.c_void_p()
            deadline_s = join(self._comm, store, rank, size, timeout)
        else:
            self._comm = comm
            seconds = ctypes.c_double()
            check(lib.kolo_comm_get_timeout(comm, ctypes.byref(seconds)))
            deadline_s = seconds.value
        # A call and its place in the order go together. Reentrant: a work
        # already done when posted completes at once on the posting thread,
        # and its future's callbacks may post more.
        self._lock = threading.RLock()
        self._batch = []  # sends and receives not yet posted
        self._alive = {}  # id -> KoloWork, until it completes
        self._coalesced = None  # inside torch's coalescing manager: the works since it began
        self._estimated_us = None  # inside torch's _time_estimator: the estimated time so far
        self._group_name = self._group_desc = ""
        self._deadline_s = deadline_s
        _groups.add(self)

    def getBackendName(self):
        return BACKEND_NAME

    # torch keeps a group's name and description in the C++ backends it
    # registers on the group; a Python group has none, so it keeps its own
    # (DeviceMesh and the functional collectives find groups by name).
    def _set_group_name(self, name):
        self._group_name = name

    def _set_group_desc(self, desc):
        self._group_desc = desc

    @property
    def group_name(self):
        return self._group_name

    @property
    def group_desc(self):
        return self._group_desc

    def __del__(self):
        self._close()

    def _close(self):
        comm, self._comm = getattr(self, "_comm", None), None
        if comm is None or not comm.value:
            return
        for operation in getattr(self, "_batch", []):  # sends and receives never posted
            operation[-1].set_exception(RuntimeError("kolo: the process group was destroyed before this send or "
                                                     "receive was waited for"))
        self._batch = []
        if on_kolo_thread():
            # Closed inside a completion (its last reference went there):
            # kolo's thread cannot destroy its own communicator.
            _closers.append(threading.Thread(target=lib.kolo_comm_destroy, args=(comm,),
                                             name="kolo-process-group-close"))
            _closers[-1].start()
        else:
            lib.kolo_comm_destroy(comm)  # runs what is queued: every work completes

    # --- the submission of one operation ---

    def _run(self, call, args, keep, outputs=(), written=(), finish=None):
        """Calls kolo_<call>_async(comm, *args) and returns a Work whose
        future completes with `outputs` once kolo has run it, after writing
        back `written` (Buffers) and running `finish`. Sends and receives
        wait in a batch (see _post_batch)."""
        future = KoloFuture()
        if self._estimated_us is not None:  # torch's _time_estimator: estimate, run nothing
            self._estimated_us += self._estimate_us(call, keep)
            future.set_result(list(outputs))
            return KoloWork(self, future, point_to_point=False)

        def complete():
            for b in written:
                b.write_back()
            if finish is not None:
                finish()
            return list(outputs)

        device = cuda_device(keep) if call in STREAM_CALLS else None
        if device is not None:
            return self._run_on_stream(call, args, device, complete)
        for d in cuda_devices(keep):
            # kolo runs other device buffers after the legacy default
            # stream's work: the current stream's work (which produced them,
            # and the copies made of them) must be done first.
            torch.cuda.current_stream(d).synchronize()
        operation = (call, args, keep, complete, future)
        with self._lock:
            if self._comm is None:
                raise RuntimeError("kolo: this process group has been destroyed")
            work = KoloWork(self, future, point_to_point=call in ("send", "recv"))
            if self._coalesced is not None:
                self._coalesced.append(work)
            # Kept until done. After that, torch's C++ callers (DDP) hold
            # it through the PyWorkHolder torch wraps every work a Python
            # group returns in; keeping done works here too would keep
            # their output tensors (FSDP2's all-gathered parameters), and
            # memory grew by the model's size every step.
            if work.point_to_point:
                self._batch.append(operation)
            else:
                self._post_batch()
                self._post(operation, raise_errors=True)  # a bad argument raises here, with no work
            self._alive[id(work)] = work
            group = weakref.ref(self)
            future.add_done_callback(lambda _: retire(group, work))
        return work

    def _run_on_stream(self, call, args, device, complete):
        """kolo_<call>_stream on torch's current stream of `device`, as
        NCCL runs CUDA tensors: the call returns at once, and the stream's
        later work (complete()'s write-backs, then the caller's) waits for
        the collective. The host does not wait for the GPU. A failure
        becomes the communicator's (the work's wait and the group's next
        call raise it), and the stream is released all the same."""
        stream = torch.cuda.current_stream(device)
        with self._lock:
            comm = self._comm
            if comm is None:
                raise RuntimeError("kolo: this process group has been destroyed")
            self._post_batch()
        # Called without the lock: the call may wait for the GPU (growing
        # kolo's device memory waits for streams held earlier, which kolo's
        # thread releases as it works through its queue), and a completion
        # kolo's thread runs on the way may call into this group.
        code = getattr(lib, "kolo_%s_stream" % call)(comm, *args, stream.cuda_stream)
        if code != SUCCESS:
            raise failure(code, self._deadline_s)
        future = torch.futures.Future(devices=[device])
        future.set_result(complete())
        work = KoloStreamWork(self, future, device, stream)
        with self._lock:
            if self._coalesced is not None:
                self._coalesced.append(work)
        return work

    def _async_error(self):
        """The communicator's failure as the exception a call would raise,
        or None while it is healthy."""
        comm = self._comm
        if comm is None:
            return None
        code = ctypes.c_int(SUCCESS)
        check(lib.kolo_comm_get_async_error(comm, ctypes.byref(code)))
        return failure(code.value, self._deadline_s) if code.value != SUCCESS else None

    # --- torch.distributed._time_estimator (torch 2.13) ---

    # kolo_comm_estimate's collective for each call, and the bytes it takes
    # (the largest buffer of the call on a rank; gather and scatter: the
    # root's, N blocks of this rank's).
    _ESTIMATED = {"allreduce": "allreduce", "allreduce_wire": "allreduce", "barrier": "allreduce", "allgather": "allgather",
                  "allgatherv": "allgather", "reduce_scatter": "reduce_scatter", "reduce_scatterv": "reduce_scatter",
                  "broadcast": "broadcast", "reduce": "reduce", "gather": "gather", "scatter": "scatter",
                  "alltoall": "alltoall", "alltoallv": "alltoall"}

    def _estimate_us(self, call, keep):
        collective = self._ESTIMATED.get(call)
        if collective is None:
            raise RuntimeError("kolo: torch's time estimator covers the collectives, not %s" % call)

        def nbytes(item):
            if isinstance(item, Buffer):
                return item.nbytes
            return item.numel() * item.element_size() if isinstance(item, torch.Tensor) else 0

        size = max([nbytes(k) for k in keep] + [4])
        if collective in ("gather", "scatter"):
            size = min(nbytes(k) for k in keep if nbytes(k)) * self.size()
        seconds = ctypes.c_double()
        check(lib.kolo_comm_estimate(self._comm, collective.encode(), size, ctypes.byref(seconds), None))
        return seconds.value * 1e6

    def _start_time_estimate(self):
        with self._lock:
            self._estimated_us = 0.0

    def _end_time_estimate(self):
        """The estimated time since _start_time_estimate, in microseconds
        (as NCCL's estimator answers torch)."""
        with self._lock:
            total, self._estimated_us = self._estimated_us, None
        return total

    def _post(self, operation, raise_errors=False):
        call, args, keep, complete, future = operation
        raw = ctypes.c_void_p()
        code = getattr(lib, "kolo_%s_async" % call)(self._comm, *args, ctypes.byref(raw))
        if code != SUCCESS:
            if raise_errors:
                raise failure(code, self._deadline_s)
            future.set_exception(failure(code, self._deadline_s))
            return
        complete_when_done(raw, keep, complete, future, self._deadline_s)

    def _post_batch(self):
        """Posts the sends and receives called since the last post as one
        kolo group: they progress together, so a rank may send to one
        neighbour and receive from another (a ring shift) without waiting
        for itself. Called with the lock held."""
        batch, self._batch = self._batch, []
        if not batch:
            return
        check(lib.kolo_group_start())
        try:
            for operation in batch:
                self._post(operation)
        finally:
            code = lib.kolo_group_end()
        if code != SUCCESS:
            raise error_for(code)

    def post_point_to_point(self):
        with self._lock:
            if self._comm is not None:
                self._post_batch()


    # torch's coalescing manager: the works between the two calls complete
    # as one.
    def _start_coalescing(self, device):
        with self._lock:
            self._coalesced = []

    def _end_coalescing(self, device):
        with self._lock:
            works, self._coalesced = self._coalesced, None
            self._post_batch()
        return Coalesced(works or [], [])

    def abort(self):
        """Fails every operation in flight on every rank (kolo_comm_abort),
        then closes the group."""
        comm = self._comm
        if comm is not None and comm.value:
            lib.kolo_comm_abort(comm)
        self._close()

    def shutdown(self):
        self._close()

    # --- torch.distributed.shrink_group (torch 2.13) ---

    def _get_backend(self, device):
        """What torch finds as this group's backend for a device. torch
        keeps a group's backends only as C++ c10d.Backends, and kolo's group
        is the whole group; shrink_group asks for the backend to shrink it,
        so kolo answers with a view that can (shrink.py)."""
        device = torch.device(device)
        if device.type not in ("cpu", "cuda"):
            raise RuntimeError("No backend type associated with device type %s" % device.type)
        return ShrinkableView(self)

    def _shrunk(self, ranks_to_exclude, shrink_flags):
        return shrunk(self, ranks_to_exclude, shrink_flags)


# At exit, before the interpreter finalizes: the groups still open close
# (their last completions run meanwhile, on kolo's thread), and so do those
# closed inside a completion, on threads of their own. A completion that
# reached Python once it finalizes would abort the process.
_groups = weakref.WeakSet()
_closers = []


@atexit.register
def _close_all():
    for group in list(_groups):
        group._close()
    for closer in _closers:
        closer.join(timeout=60)

