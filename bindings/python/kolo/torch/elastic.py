"""Horovod's horovod.torch.elastic on kolo: hvd.elastic.run, TorchState,
ObjectState, ElasticSampler, HostsUpdatedInterrupt (kolo/_elastic.py has
the mechanism). Run under `kolorun --min-np N --max-np M ...`:

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
from kolo._objects import allgather_object, broadcast_object
from kolo._process_sets import init
from kolo._runtime import rank, shutdown, size
from kolo.torch.functions import broadcast_optimizer_state, broadcast_parameters


def run(func):
    """Runs func(state, ...) until it returns: after a lost worker every
    survivor restores its last commit, the job resets to its next version
    and rank 0's state goes to everyone; after a change of hosts the same,
    keeping the state."""

    def reset():
        shutdown()
        init()

    return run_fn(func, reset)


class _Handler:
    """How TorchState keeps one torch object: save, restore, sync."""

    def __init__(self, value):
        self.value = value
        self.save()

    def set_value(self, value):
        self.value = value
        self.save()


class _ModelHandler(_Handler):
    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_Handler):
    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_Handler):
    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

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


class TorchState(ObjectState):
    """A model, an optimizer (kolo's DistributedOptimizer or any), samplers
    and plain values: TorchState(model, optimizer, epoch=0, batch=0).
    commit() copies their state; restore() loads it back; sync() sends rank
    0's to every worker."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is not None:
                handlers[name] = handler
            elif value is not None or name not in ("model", "optimizer"):
                plain[name] = value
        self.__dict__["_handlers"] = handlers
        for name, handler in handlers.items():
            self.__dict__[name] = handler.value
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **plain)

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)

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
