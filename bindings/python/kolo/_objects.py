"""Picklable Python objects across ranks, over byte arrays."""
import pickle

import numpy as np

from kolo import _collectives as C
from kolo import _numpy, _runtime


def broadcast_object(obj, root_rank=0, name=None, group=None):
    """root_rank's obj on every rank of the group (pickled there, unpickled
    here). The other ranks' obj is ignored (None will do)."""
    group = group or _runtime.world()
    name = group.operation_name("broadcast_object", name).decode()
    is_root = _runtime.rank() == root_rank
    if is_root:
        payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        length = np.array([payload.size], dtype=np.int64)
    else:
        length = np.zeros(1, dtype=np.int64)
    C.broadcast_async(_numpy.adapter, length, root_rank, True, "%s.length" % name, group).synchronize()
    if not is_root:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    payload = C.broadcast_async(_numpy.adapter, payload, root_rank, False, "%s.payload" % name, group).synchronize()
    return obj if is_root else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, group=None):
    """Every rank's obj (of the group), as a list in rank order."""
    group = group or _runtime.world()
    name = group.operation_name("allgather_object", name).decode()
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    h = C.allgather_async(_numpy.adapter, payload, name, group)
    data = h.synchronize().tobytes()
    objects, offset = [], 0
    for rows in h.rows:
        objects.append(pickle.loads(data[offset:offset + rows]))
        offset += rows
    return objects
