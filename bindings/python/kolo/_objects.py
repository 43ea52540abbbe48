"""Picklable Python objects across ranks, over byte arrays."""
import pickle

import numpy as np

from kolo import _numpy, _runtime
from kolo._process_sets import group_of


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """root_rank's obj on every rank of the process set (pickled there,
    unpickled here). The other ranks' obj is ignored (None will do)."""
    name = group_of(process_set).operation_name("broadcast_object", name).decode()
    is_root = _runtime.rank() == root_rank
    if is_root:
        payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        length = np.array([payload.size], dtype=np.int64)
    else:
        length = np.zeros(1, dtype=np.int64)
    _numpy.broadcast_(length, root_rank, name="%s.length" % name, process_set=process_set)
    if not is_root:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    payload = _numpy.broadcast(payload, root_rank, name="%s.payload" % name, process_set=process_set)
    return obj if is_root else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=None):
    """Every rank's obj (of the process set), as a list in rank order."""
    name = group_of(process_set).operation_name("allgather_object", name).decode()
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    h = _numpy.allgather_async(payload, name=name, process_set=process_set)
    data = h.synchronize().tobytes()
    objects, offset = [], 0
    for rows in h.rows:
        objects.append(pickle.loads(data[offset:offset + rows]))
        offset += rows
    return objects
