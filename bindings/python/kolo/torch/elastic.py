"""Horovod's horovod.torch.elastic on kolo: hvd.elastic.run, TorchState,
ObjectState, ElasticSampler, HostsUpdatedInterrupt (kolo/_elastic.py has
the mechanism, kolo/_elastic_frameworks.py run and the state of framework
objects; this module how torch's objects are kept). Run under
`kolorun --min-np N --max-np M ...`:

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(state)
"""
import copy
import math

import torch

from kolo._elastic import HostsUpdatedInterrupt, ObjectState, State, run_fn  # noqa: F401
from kolo._elastic_frameworks import FrameworkState, Handler, run  # noqa: F401 (hvd.elastic.run)
from kolo._objects import allgather_object, broadcast_object
from kolo._runtime import rank, size
from kolo.torch.functions import broadcast_optimizer_state, broadcast_parameters


class _StateDictHandler(Handler):
    """A torch object with state_dict() and load_state_dict(): a model, an
    optimizer (kolo's DistributedOptimizer or any), an ElasticSampler."""

    def __init__(self, value):
        self.value = value

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)


class _ModelHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_StateDictHandler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_StateDictHandler):
    def sync(self):
        # Every worker's processed samples, so none is seen twice this
        # epoch; and rank 0's epoch (a new worker's sampler is at 0).
        processed = set()
        for indices in allgather_object(self.value.processed_indices):
            processed |= set(indices)
        self.value.load_state_dict(broadcast_object({"epoch": self.value.epoch, "processed_indices": processed}))


def _handler_for(value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(value)
    return None


class TorchState(FrameworkState):
    """A model, an optimizer (kolo's DistributedOptimizer or any), samplers
    and plain values: TorchState(model, optimizer, epoch=0, batch=0).
    commit() copies their state; restore() loads it back; sync() sends rank
    0's to every worker. Assigning a new model, optimizer or sampler to its
    attribute keeps that one instead."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is not None:
                handlers[name] = handler
            elif value is not None or name not in ("model", "optimizer"):
                plain[name] = value
        for name, handler in handlers.items():
            self.__dict__[name] = handler.value
        super().__init__(handlers, **plain)

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].value = value
            handlers[name].save()
        super().__setattr__(name, value)


class ElasticSampler(torch.utils.data.Sampler):
    """Shards a dataset over the current workers and resumes an epoch after
    a reset without repeating a sample: record_batch(batch_idx, batch_size)
    (or record_indices) marks what this worker has processed; the state's
    sync gathers every worker's, and the rest is shared out anew. The order
    is a permutation seeded by seed + epoch, the same on every worker."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        self.record_indices(self.get_indices(batch_idx, batch_size))

    def record_indices(self, indices):
        self.processed_indices.update(indices)

    def get_indices(self, batch_idx, batch_size):
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def state_dict(self):
        return {"epoch": self.epoch, "processed_indices": self.processed_indices}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self):
        self.num_replicas, self.rank = size(), rank()
        self.remaining_indices = [i for i in range(len(self.dataset)) if i not in self.processed_indices]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        order = self.remaining_indices
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = [order[i] for i in torch.randperm(len(order), generator=g).tolist()]
        order = order + order[:self.total_size - len(order)]  # evenly divisible
        self.indices = order[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
