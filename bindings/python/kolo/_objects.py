"""Picklable Python objects across ranks, over byte arrays."""
import pickle

import numpy as np

from kolo import _numpy, _runtime


def broadcast_object(obj, root_rank=0, name=None):
    """root_rank's obj on every rank (pickled there, unpickled here). The
    other ranks' obj is ignored (None will do)."""
    name = _runtime.operation_name("broadcast_object", name).decode()
    if _runtime.rank() == root_rank:
        payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        length = np.array([payload.size], dtype=np.int64)
    else:
        length = np.zeros(1, dtype=np.int64)
    _numpy.broadcast_(length, root_rank, name="%s.length" % name)
    if _runtime.rank() != root_rank:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    payload = _numpy.broadcast(payload, root_rank, name="%s.payload" % name)
    return obj if _runtime.rank() == root_rank else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None):
    """Every rank's obj, as a list in rank order."""
    name = _runtime.operation_name("allgather_object", name).decode()
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    h = _numpy.allgather_async(payload, name=name)
    data = h.synchronize().tobytes()
    objects, offset = [], 0
    for rows in h.rows:
        objects.append(pickle.loads(data[offset:offset + rows]))
        offset += rows
    return objects
