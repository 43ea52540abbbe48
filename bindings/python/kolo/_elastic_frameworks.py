"""hvd.elastic's framework-facing part, written once for kolo.torch.elastic
and kolo.tensorflow.elastic (kolo/_elastic.py has the mechanism, below the
runtime): run, whose reset leaves the job and joins its next version, and
FrameworkState, the state of framework objects (a model, an optimizer,
variables) beside plain values. A framework gives a Handler per object:
how to copy its state, put the copy back, and receive rank 0's.
"""
from kolo._elastic import ObjectState, run_fn
from kolo._objects import broadcast_object
from kolo._process_sets import init
from kolo._runtime import rank, shutdown


def run(func, lost_worker_error=None):
    """Runs func(state, ...) until it returns: after a lost worker every
    survivor restores its last commit, the job resets to its next version
    and rank 0's state goes to everyone; after a change of hosts the same,
    keeping the state. lost_worker_error: see kolo._elastic.run_fn."""

    def reset():
        shutdown()
        init()

    return run_fn(func, reset, lost_worker_error)


class Handler:
    """How a FrameworkState keeps one framework object."""

    def save(self):
        """Copies the object's state (what restore goes back to)."""
        raise NotImplementedError

    def restore(self):
        """Puts the last copy back into the object."""
        raise NotImplementedError

    def sync(self):
        """Gives the object rank 0's state."""
        raise NotImplementedError


class FrameworkState(ObjectState):
    """Framework objects, each kept by its Handler ({name: handler}), and
    plain values (ObjectState's keyword arguments). commit() copies them
    all, restore() puts the copies back, sync() sends rank 0's to every
    worker: the objects first, then the plain values."""

    def __init__(self, handlers, **kwargs):
        # Set directly: a subclass may route attribute assignment through them.
        self.__dict__["_handlers"] = dict(handlers)
        for handler in self._handlers.values():
            handler.save()
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **kwargs)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()
