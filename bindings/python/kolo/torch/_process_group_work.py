"""The kolo backend's works: a thread per group completes each operation's
future once kolo has run it, and the Work torch callers get raises kolo's
error from wait()."""
import queue
import threading
import weakref

from torch._C._distributed_c10d import Work

from kolo._library import ERR_TIMEOUT, SUCCESS, KoloTimeoutError, error_for, lib


def failure(code, deadline_s):
    """The exception for a failed kolo call (on the failing thread). A
    timeout says "Timed out" as gloo's and NCCL's do, which is what
    PyTorch's own tests look for."""
    error = error_for(code)
    if code == ERR_TIMEOUT:
        return KoloTimeoutError("kolo: Timed out after %g s (the process group's timeout): %s" % (deadline_s, error),
                                code)
    return error


class Completer(threading.Thread):
    """Waits for a group's operations in the order they were called (the
    order kolo runs them in) and completes their futures."""

    def __init__(self, deadline_s):
        super().__init__(name="kolo-process-group", daemon=True)
        self.pending = queue.Queue()
        self.deadline_s = deadline_s

    def run(self):
        for item in iter(self.pending.get, None):
            self._complete(*item)
            del item  # no tensors held while waiting for the next

    def _complete(self, raw, keep, finish, future):
        code = lib.kolo_handle_wait(raw, -1.0)
        error = failure(code, self.deadline_s) if code != SUCCESS else None
        lib.kolo_handle_release(raw)
        try:
            if error is None:
                result = finish()
        except Exception as e:  # a write-back that failed: the caller's to see
            error = e
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


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
        self._posted()
        self._future.wait()  # raises the operation's error
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


def retire(group_ref, work):
    """A completed work moves from its group's live works to its recent ones."""
    group = group_ref()
    if group is not None:
        group._alive.pop(id(work), None)
        group._recent.append(work)
