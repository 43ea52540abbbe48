"""kolo: ring-allreduce collectives for Python, framework-free.

    import kolo
    kolo.init()                       # rank, size, master from the launcher
    total = kolo.allreduce(np.ones(4), op=kolo.Sum)

Run under `tools/kolorun -np N /usr/bin/python3 script.py`; without a
launcher the process is a world of one. Every collective is a named
operation of kolo's engine: ranks may issue different names in different
orders, each runs once all ranks have issued it. Operations given no name
are numbered per kind, so those must be issued in one order on every rank.
The `_async` forms return a handle for poll()/synchronize(). PyTorch users
want `kolo.torch`, which mirrors horovod.torch. `kolo.__version__` is the
version of the libkolo in use. Process sets (ProcessSet, add_process_set,
`process_set=` on every collective) run collectives among a subset of the
ranks, as Horovod's do. `kolo.run(fn, np=4, hosts="a:2,b:2")` runs a
function as a job across hosts and returns its ranks' results, as
horovod.run does (kolo/function_job.py).
"""
from kolo._policy import Adasum, Average, Max, Min, Product, Sum
from kolo._library import (AbortedError, InvalidArgumentError, InvalidUsageError, KoloError, KoloTimeoutError,
                           MismatchError, PeerLostError, UnsupportedError)
from kolo._library import version as __version__  # the loaded libkolo's, from kolo_get_version
from kolo._numpy import (allgather, allgather_async, allreduce, allreduce_, allreduce_async, allreduce_async_,
                         alltoall, alltoall_async, broadcast, broadcast_, broadcast_async, broadcast_async_,
                         grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                         grouped_allreduce_async_, reducescatter, reducescatter_async)
from kolo._objects import allgather_object, broadcast_object
from kolo._process_sets import ProcessSet, add_process_set, global_process_set, init, remove_process_set
from kolo._runtime import (Handle, abort, barrier, cross_rank, cross_size, engine_stats, is_homogeneous,
                           is_initialized, join, local_rank, local_size, poll, rank, residual_bytes, shutdown, size,
                           start_timeline, stop_timeline, synchronize)


def run(func, *args, **kwargs):
    """horovod.run's kolo.run: func as a job of np ranks across hosts, the
    ranks' results in rank order (kolo/function_job.py says how)."""
    from kolo.function_job import run as run_job  # here, not above: `python -m kolo.function_job` is each rank
    return run_job(func, *args, **kwargs)
