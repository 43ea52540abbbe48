"""Horovod's horovod.tensorflow.elastic on kolo: hvd.elastic.run,
TensorFlowKerasState (a Keras model and its optimizer), TensorFlowState
(a list of variables, eager or in a TF1 session), ObjectState and
HostsUpdatedInterrupt (kolo/_elastic.py has the mechanism,
kolo/_elastic_frameworks.py run and the state of framework objects; this
module how TensorFlow's variables are kept). Run under
`kolorun --min-np N --max-np M ...`:

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            ...
            state.commit()

    train(state)
"""
import re

import numpy as np
import tensorflow as tf

from kolo import _elastic_frameworks
from kolo._elastic import LOST_WORKER_CODES, HostsUpdatedInterrupt, ObjectState, State, run_fn  # noqa: F401
from kolo._elastic_frameworks import FrameworkState, Handler
from kolo._library import KoloError
from kolo.tensorflow.functions import broadcast_variables
from kolo.tensorflow.mpi_ops import _executing_eagerly

# A kolo op's TensorFlow error starts its message with kolo's code.
_CODE = re.compile(r"\b(%s): " % "|".join(LOST_WORKER_CODES))


def as_kolo_error(error):
    """A kolo op's TensorFlow error that says a worker was lost (kolo's
    PEER_LOST, TIMEOUT, ABORTED, REVOKED, TRANSPORT) as the KoloError the
    elastic loop resets on; None for any other error."""
    if not isinstance(error, tf.errors.OpError):
        return None
    m = _CODE.search(getattr(error, "message", "") or str(error))
    return KoloError(m.string[m.start():], code=LOST_WORKER_CODES[m.group(1)]) if m else None


def run(func):
    """Runs func(state, ...) until it returns: after a lost worker every
    survivor restores its last commit, the job resets to its next version
    and rank 0's state goes to everyone; after a change of hosts the same,
    keeping the state."""
    return _elastic_frameworks.run(func, lost_worker_error=as_kolo_error)


class _Variables(Handler):
    """Variables (variables() lists them, the same ones at every call),
    copied as their values: eager, or in a TF1 session (session, and
    broadcast_op, the op that gives them rank 0's values there). sync keeps
    rank 0's values as the copy too, so a worker that fails before its next
    commit goes back to them, not to its own."""

    def __init__(self, variables, session=None, broadcast_op=None):
        self._variables = variables
        self._session = session
        self._broadcast_op = broadcast_op

    def save(self):
        if self._session is None:
            self._saved = [np.array(v.numpy(), copy=True) for v in self._variables()]
        else:
            self._saved = self._session.run(self._variables())

    def restore(self):
        for v, value in zip(self._variables(), self._saved):
            if self._session is None:
                v.assign(value)
            else:
                v.load(value, self._session)

    def sync(self):
        if self._session is None:
            broadcast_variables(self._variables(), root_rank=0)
        else:
            self._session.run(self._broadcast_op)
        self.save()


class TensorFlowKerasState(FrameworkState):
    """A built Keras model, its optimizer (compiled into the model, or
    given) and plain values: TensorFlowKerasState(model, optimizer,
    epoch=0). commit() copies the weights and the optimizer's variables;
    restore() assigns them back; sync() broadcasts rank 0's. The optimizer's
    variables are made first (built for the model's trainable variables),
    so that a worker that joins, whose optimizer has not stepped yet,
    receives them too. backend is taken for Horovod's signature."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        del backend
        if not getattr(model, "built", True):
            raise ValueError("the model must be built first (model.build(input_shape), or call it once)")
        self.model = model
        self.optimizer = optimizer if optimizer is not None else model.optimizer
        self._build_optimizer()
        super().__init__({"variables": _Variables(self._variables)}, **kwargs)

    def _build_optimizer(self):
        optimizer = getattr(self.optimizer, "_optimizer", self.optimizer)  # kolo's DistributedOptimizer wraps one
        if optimizer is not None and hasattr(optimizer, "build") and not getattr(optimizer, "built", True):
            optimizer.build(self.model.trainable_variables)

    def _variables(self):
        optimizer_variables = []
        if self.optimizer is not None:
            found = self.optimizer.variables
            optimizer_variables = list(found() if callable(found) else found)
        return list(self.model.variables) + optimizer_variables


class TensorFlowState(FrameworkState):
    """A list of variables (default: the global variables) and plain
    values; in TF1 graph code, the session that holds the variables
    (default: the default session)."""

    def __init__(self, variables=None, session=None, **kwargs):
        self.variables = list(variables if variables is not None else tf.compat.v1.global_variables())
        self.session = session if session is not None or _executing_eagerly() else \
            tf.compat.v1.get_default_session()
        broadcast_op = None if _executing_eagerly() else broadcast_variables(self.variables, root_rank=0)
        super().__init__({"variables": _Variables(lambda: self.variables, self.session, broadcast_op)}, **kwargs)
