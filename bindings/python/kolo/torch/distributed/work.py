"""The kolo backend's works: each operation's future is completed by a
callback on kolo's own thread, at the operation's place in the group's
order, and the Work torch callers get raises kolo's error from wait()."""
import datetime
import itertools
import threading
import weakref

import torch
from torch._C._distributed_c10d import Work

from kolo._library import CALLBACK, ERR_TIMEOUT, SUCCESS, KoloTimeoutError, check, error_for, lib
from kolo.torch._eager import run_eagerly


def failure(code, deadline_s):
    """The exception for a failed kolo call (on the failing thread). A
    timeout says "Timed out" as gloo's and NCCL's do, which is what
    PyTorch's own tests look for."""
    error = error_for(code)
    if code == ERR_TIMEOUT:
        return KoloTimeoutError("kolo: Timed out after %g s (the process group's timeout): %s" % (deadline_s, error),
                                code)
    return error


# Operations in flight: token -> (handle, what they keep alive, the
# completion, the future, the deadline for a timeout's message).
_pending = {}
_tokens = itertools.count(1)
_on_kolo_thread = threading.local()


def on_kolo_thread():
    """Whether this thread is kolo's, inside a completion (where nothing
    may wait for the group: kolo runs the group's operations on it)."""
    return getattr(_on_kolo_thread, "active", False)


@CALLBACK
def _completed(code, token):
    """kolo_handle_set_callback's callback: runs on kolo's thread after the
    operation and before the next one (or on the caller's, at once, if it
    was done already). Completing the future runs its callbacks here too:
    DDP's comm hooks then issue their next collectives at this point of the
    order, which kolo runs next on every rank alike (kolo.h)."""
    handle, keep, complete, future, deadline_s = _pending.pop(token)
    error = failure(code, deadline_s) if code != SUCCESS else None
    future._kolo_handle = None
    lib.kolo_handle_release(handle)
    was, _on_kolo_thread.active = on_kolo_thread(), True
    try:
        try:
            if error is None:
                result = complete()
        except Exception as e:  # a write-back that failed: the caller's to see
            error = e
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    finally:
        _on_kolo_thread.active = was
        del keep


@run_eagerly
class KoloFuture(torch.futures.Future):
    """A work's future. Waited for inside a completion on kolo's thread
    (PowerSGD's hook waits for the allreduce it has just issued), it runs
    kolo's queue forward there (kolo_handle_wait does, on kolo's thread)
    instead of waiting for itself."""

    _kolo_handle = None  # until the operation completes

    def wait(self):
        handle = self._kolo_handle
        if handle is not None and on_kolo_thread() and not self.done():
            lib.kolo_handle_wait(handle, -1.0)  # its failure completes this future with it
        return super().wait()


def complete_when_done(handle, keep, complete, future, deadline_s):
    """Completes future (with complete()'s result, or kolo's error) once
    kolo has run the operation of handle, then releases the handle."""
    token = next(_tokens)
    _pending[token] = (handle, keep, complete, future, deadline_s)
    future._kolo_handle = handle
    check(lib.kolo_handle_set_callback(handle, _completed, token))


@run_eagerly
class KoloWork(Work):
    """One operation's work: its future completes with the outputs, or with
    kolo's error, which wait() raises (torch's future-wrapping work would
    swallow it: its wait() returns True whatever happened).

    A send or receive is posted at the first wait, poll or future asked of
    it or of any send or receive after it, or at the group's next
    collective (see KoloProcessGroup._post_batch)."""

    def __init__(self, group, future, point_to_point=False):
        super().__init__()
        # Weakly: the group keeps its recent works, and must not be kept
        # alive by them once torch lets it go.
        self._group = weakref.ref(group) if point_to_point else None
        self._future = future
        self.point_to_point = point_to_point

    def _posted(self):
        group = self._group() if self._group is not None else None
        if group is not None:
            group.post_point_to_point()

    def wait(self, timeout=None):
        """Waits for the operation and raises its error. A timeout (a
        timedelta; zero, torch's default, waits without one) bounds this
        wait only: past it, KoloTimeoutError, and the operation goes on."""
        self._posted()
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout or 0)
        if seconds > 0 and not self._future.done() and not on_kolo_thread():
            done = threading.Event()
            self._future.add_done_callback(lambda _: done.set())
            if not done.wait(seconds):
                raise KoloTimeoutError("kolo: Timed out after %g s waiting for the work (the timeout given to "
                                       "Work.wait); its operation is still running" % seconds, ERR_TIMEOUT)
        self._future.wait()  # raises the operation's error (run forward here on kolo's thread)
        return True

    def is_completed(self):
        self._posted()
        return self._future.done()

    def is_success(self):
        if not self._future.done():
            return False
        try:
            self._future.value()
        except Exception:
            return False
        return True

    def exception(self):
        if not self._future.done():
            return None
        try:
            self._future.value()
        except Exception as e:
            return e
        return None

    def get_future(self):
        self._posted()
        return self._future

    def result(self):
        self.wait()
        return self._future.value()

    def source_rank(self):
        """The sender of a receive from any source, once it is done."""
        source = getattr(self, "_source", None)
        if source is None:
            raise RuntimeError("kolo: source_rank is known only for a receive from any source")
        self.wait()
        return source.value

    _source_rank = source_rank  # torch 2's name for it

    def synchronize(self):
        self.wait()


@run_eagerly
class KoloStreamWork(KoloWork):
    """A collective on CUDA tensors run in the order of the caller's CUDA
    stream (the group's _run_on_stream), as NCCL's works are: its future is
    done at once (torch's CUDA future: its value is ready at that point of
    the stream, and another stream that uses it first waits for that
    point); wait() makes the current stream wait for the collective and
    raises the group's error if one has failed; is_completed() says whether
    the GPU has got past it."""

    def __init__(self, group, future, device, stream):
        super().__init__(group, future)
        self._group_ref = weakref.ref(group)
        self._device = device
        self._event = torch.cuda.Event()
        self._event.record(stream)

    def _posted(self):
        pass

    def _failure(self):
        group = self._group_ref()
        return group._async_error() if group is not None else None

    def wait(self, timeout=None):
        torch.cuda.current_stream(self._device).wait_event(self._event)
        error = self._failure()
        if error is not None:
            raise error
        return True

    def is_completed(self):
        return self._event.query()

    def is_success(self):
        return self.is_completed() and self._failure() is None

    def exception(self):
        return self._failure() if self.is_completed() else None


def retire(group_ref, work):
    """A completed work leaves its group's live works."""
    group = group_ref()
    if group is not None:
        group._alive.pop(id(work), None)
