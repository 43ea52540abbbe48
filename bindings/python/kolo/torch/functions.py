"""Bringing a whole model, optimizer or Python object to every rank."""
import collections.abc

from kolo import _runtime
from kolo._objects import allgather_object, broadcast_object  # noqa: F401 (re-exported)
from kolo.torch.mpi_ops import broadcast_async_, synchronize


def broadcast_parameters(params, root_rank):
    """Overwrites every rank's parameters with root_rank's, in place.
    params: model.state_dict(), model.named_parameters() or a list of
    tensors or (name, tensor) pairs."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, collections.abc.Iterable):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type %s" % type(params).__name__)
    handles = [broadcast_async_(p, root_rank, None if name is None else "broadcast." + name)
               for name, p in params]
    for h in handles:
        synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank):
    """Makes every rank's optimizer state (hyperparameters of each param
    group, per-parameter buffers such as momentum) equal to root_rank's."""
    state = broadcast_object(optimizer.state_dict(), root_rank, name="broadcast_optimizer_state")
    if _runtime.rank() != root_rank:
        optimizer.load_state_dict(state)
