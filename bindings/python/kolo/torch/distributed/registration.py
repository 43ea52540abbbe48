"""The creator torch calls for a "kolo" group, and its registration with
torch (kolo.torch's import and torch's entry point into kolo call
register())."""
import datetime

import torch.distributed as dist

from kolo._library import KoloError
from kolo.torch import _device_backend
from kolo.torch.distributed.process_group import BACKEND_NAME, KoloProcessGroup


def create(store, rank, size, timeout):
    if not isinstance(timeout, datetime.timedelta):
        raise RuntimeError("kolo: timeout must be a datetime.timedelta, not %r" % (timeout,))
    try:
        group = KoloProcessGroup(store, rank, size, timeout)
    except KoloError as e:
        raise RuntimeError("kolo: could not create the process group (rank %d of %d): %s" % (rank, size, e)) from e
    if _device_backend.in_mixed_device_map():
        return _device_backend.device_backend(group)  # kolo for its devices only ("cpu:kolo,cuda:nccl")
    return group


def register():
    """Registers "kolo" with torch for CPU and CUDA tensors (kolo moves
    both), so that init_process_group("kolo") and new_group(backend="kolo")
    find it."""
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, create, devices=["cpu", "cuda"])

