"""Bringing a whole model, optimizer or Python object to every rank (of a
process set)."""
import collections.abc

import torch

from kolo import _runtime
from kolo._objects import allgather_object, broadcast_object  # noqa: F401 (re-exported, process_set= and all)
from kolo._process_sets import global_process_set
from kolo.torch.mpi_ops import broadcast_async_, synchronize


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every rank's parameters with root_rank's, in place.
    params: model.state_dict(), model.named_parameters() or a list of
    tensors or (name, tensor) pairs."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, collections.abc.Iterable):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type %s" % type(params).__name__)
    handles = [broadcast_async_(p, root_rank, None if name is None else "broadcast." + name, process_set)
               for name, p in params]
    for h in handles:
        synchronize(h)


def _create_state(optimizer, model):
    """Gives an optimizer without state (no step taken yet) its state, as
    Horovod does: a step with zero gradients (sparse ones for sparse
    embeddings when model is given), so that there is state to broadcast."""
    sparse = {id(p) for m in (model.modules() if model else []) if isinstance(m, torch.nn.Embedding) and m.sparse
              for p in m.parameters()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
                if isinstance(optimizer, torch.optim.SparseAdam) or (
                        isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                    p.grad = p.grad.to_sparse()
    if type(optimizer).__module__ == "kolo.torch.optimizer":
        super(type(optimizer), optimizer).step()  # the wrapped optimizer's step: nothing to average
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state (hyperparameters of each param
    group, per-parameter buffers such as momentum) equal to root_rank's.
    An optimizer that has no state yet first takes a step with zero
    gradients to create it (Horovod's behaviour; model, if given, tells
    which parameters are sparse embeddings)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if not optimizer.state_dict()["state"]:
        _create_state(optimizer, model)
    state = broadcast_object(optimizer.state_dict(), root_rank, name="broadcast_optimizer_state",
                             process_set=process_set)
    if _runtime.rank() != root_rank:
        optimizer.load_state_dict(state)

