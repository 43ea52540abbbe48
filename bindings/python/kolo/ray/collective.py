"""kolo as a ray.util.collective backend: between Ray actors,

    import kolo.ray.collective  # registers "kolo" (on the driver and in every actor)
    from ray.util import collective as col

    col.init_collective_group(world_size, rank, backend="kolo", group_name="g")
    col.allreduce(tensor, group_name="g")

runs Ray's collective API (allreduce, reduce, allgather, broadcast,
reducescatter, barrier, send, recv) on torch.distributed's "kolo" backend,
for torch tensors and NumPy arrays in host memory. Rank 0 publishes a
rendezvous address and a free port of its node in Ray's internal key-value
store; the others wait for it, at most timeout_ms (30 s by default).
"""
import time

import numpy as np
import ray
import ray.experimental.internal_kv as internal_kv
import torch
import torch.distributed as dist
from ray.util.collective.backend_registry import _global_registry, register_collective_backend
from ray.util.collective.collective_group.base_collective_group import BaseGroup
from ray.util.collective.types import (AllGatherOptions, AllReduceOptions, BarrierOptions, BroadcastOptions,
                                       ReduceOp, ReduceOptions, ReduceScatterOptions)

import kolo.torch  # noqa: F401  (registers torch.distributed's backend "kolo")

BACKEND = "KOLO"
OPS = {ReduceOp.SUM: dist.ReduceOp.SUM, ReduceOp.PRODUCT: dist.ReduceOp.PRODUCT,
       ReduceOp.MIN: dist.ReduceOp.MIN, ReduceOp.MAX: dist.ReduceOp.MAX}


def _key(group_name):
    return "kolo_collective_rendezvous_" + group_name


def _tensor(wrapped):
    """Ray wraps each tensor argument in a list of one."""
    t = wrapped[0] if isinstance(wrapped, list) else wrapped
    if isinstance(t, np.ndarray):
        return torch.from_numpy(t)  # the same memory: results land in the caller's array
    if isinstance(t, torch.Tensor):
        return t
    raise ValueError("the kolo collective backend takes torch tensors and NumPy arrays, not %s" % type(t).__name__)


def _tensors(wrapped):
    return [_tensor(t) for t in (wrapped[0] if len(wrapped) == 1 and isinstance(wrapped[0], list) else wrapped)]


class KoloGroup(BaseGroup):
    """A process's first group is torch.distributed's world on kolo; a
    later one (the same actors, as with Ray's own GLOO backend) a new group
    of it."""
    world_group = None  # the name of this process's first group

    def __init__(self, world_size, rank, group_name, timeout_ms=None):
        timeout_s = (timeout_ms or 30000) / 1000.0
        if not dist.is_initialized():
            self._meet(world_size, rank, group_name, timeout_s)
            KoloGroup.world_group = group_name
        super().__init__(world_size, rank, group_name)
        self._world = group_name == KoloGroup.world_group
        self._pg = dist.group.WORLD if self._world else dist.new_group(list(range(world_size)), backend="kolo")

    @staticmethod
    def _meet(world_size, rank, group_name, timeout_s):
        key = _key(group_name)
        if rank == 0:
            from kolo.runner.supervisor import free_port
            internal_kv._internal_kv_put(key, "%s:%d" % (ray.util.get_node_ip_address(), free_port()),
                                         overwrite=True)
        deadline = time.monotonic() + timeout_s
        while (found := internal_kv._internal_kv_get(key)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError("kolo collective group %r: rank 0 published no rendezvous within %.0f s"
                                   % (group_name, timeout_s))
            time.sleep(0.05)
        addr, port = found.decode().rsplit(":", 1)
        dist.init_process_group("kolo", init_method="tcp://%s:%s" % (addr, port), world_size=world_size, rank=rank)
        if rank == 0:
            internal_kv._internal_kv_del(key)  # every rank has met: init_process_group returns together

    @classmethod
    def backend(cls):
        return BACKEND

    @classmethod
    def check_backend_availability(cls):
        return True

    def destroy_group(self):
        if self._world:
            dist.destroy_process_group()
            KoloGroup.world_group = None
        else:
            dist.destroy_process_group(self._pg)

    def allreduce(self, tensor, allreduce_options=AllReduceOptions()):
        dist.all_reduce(_tensor(tensor), op=OPS[allreduce_options.reduceOp], group=self._pg)

    def barrier(self, barrier_options=BarrierOptions()):
        dist.barrier(group=self._pg)

    def reduce(self, tensor, reduce_options=ReduceOptions()):
        t = _tensor(tensor)
        # Ray's semantics: only the root's tensor changes.
        target = t if self.rank == reduce_options.root_rank else t.detach().clone()
        dist.reduce(target, dst=reduce_options.root_rank, op=OPS[reduce_options.reduceOp], group=self._pg)

    def allgather(self, tensor_list, tensor, allgather_options=AllGatherOptions()):
        dist.all_gather(_tensors(tensor_list), _tensor(tensor), group=self._pg)

    def broadcast(self, tensor, broadcast_options=BroadcastOptions()):
        dist.broadcast(_tensor(tensor), src=broadcast_options.root_rank, group=self._pg)

    def reducescatter(self, output_tensor, tensor_list, reducescatter_options=ReduceScatterOptions()):
        dist.reduce_scatter(_tensor(output_tensor), _tensors(tensor_list), op=OPS[reducescatter_options.reduceOp],
                            group=self._pg)

    def send(self, tensor, send_options):
        dist.send(_tensor(tensor), dst=send_options.dst_rank, group=self._pg)

    def recv(self, tensor, recv_options):
        dist.recv(_tensor(tensor), src=recv_options.src_rank, group=self._pg)


if not _global_registry.is_registered(BACKEND):
    register_collective_backend(BACKEND, KoloGroup)
