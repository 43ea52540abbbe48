"""A group's kolo communicator from torch's store: rank 0 starts a kolo
rendezvous and publishes its id; every rank joins it."""
import ctypes
import os

import torch.distributed as dist

from kolo._library import Config, UniqueId, check, lib

_ID_KEY = "kolo/unique_id"


def join(comm, store, rank, size, timeout):
    """Creates the group's communicator: rank 0 starts a kolo rendezvous and
    publishes its id in torch's store; every rank then joins it. torch's
    timeout is kolo's deadline; its default (30 minutes) is only a default,
    under KOLO_TIMEOUT_S. Returns the deadline kolo settled on."""
    ident = UniqueId()
    # Per attempt: torchrun's agent keeps its store across restarts, and a
    # restarted rank must not read the id of the attempt that died.
    key = "%s/attempt-%s" % (_ID_KEY, os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if rank == 0:
        check(lib.kolo_get_unique_id(ctypes.byref(ident)))
        store.set(key, ctypes.string_at(ctypes.addressof(ident), ctypes.sizeof(ident)))
    else:
        got = store.get(key)
        if len(got) != ctypes.sizeof(ident):
            raise RuntimeError("kolo: the store's %s holds %d bytes, not a kolo id" % (key, len(got)))
        ctypes.memmove(ctypes.addressof(ident), got, len(got))
    config = Config.sharing_cores()
    if timeout == dist.default_pg_timeout:
        config.defaults_config.timeout_s = timeout.total_seconds()
    else:
        config.timeout_s = timeout.total_seconds()
    check(lib.kolo_comm_init_rank(ctypes.byref(comm), size, ctypes.byref(ident), rank, ctypes.byref(config)))
    seconds = ctypes.c_double()
    check(lib.kolo_comm_get_timeout(comm, ctypes.byref(seconds)))
    return seconds.value

