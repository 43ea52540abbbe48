"""kolo for PyTorch, with horovod.torch's API: a Horovod script runs after
changing its import to `import kolo.torch as hvd`.

    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

CPU tensors, every dtype torch has on CPU (see kolo._policy for how
int16, bool and complex are carried). Engine failures (ranks disagreeing
on a tensor, a lost peer, a timeout) raise kolo.KoloError subclasses with
the engine's message.
"""
from kolo._builds import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled, mpi_built,  # noqa: F401
                          mpi_enabled, mpi_threads_supported, nccl_built, rocm_built)
from kolo._library import KoloError, KoloTimeoutError, MismatchError, PeerLostError  # noqa: F401
from kolo._process_sets import (ProcessSet, add_process_set, global_process_set, init,  # noqa: F401
                                remove_process_set)
from kolo._runtime import (cross_rank, cross_size, is_homogeneous, is_initialized, local_rank,  # noqa: F401
                           local_size, rank, residual_bytes, shutdown, size, start_timeline, stop_timeline)
from kolo.torch.compression import Compression  # noqa: F401
from kolo.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,  # noqa: F401
                                  broadcast_parameters)
from kolo.torch.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async,  # noqa: F401
                                allreduce, allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async,
                                barrier, broadcast, broadcast_, broadcast_async, broadcast_async_, grouped_allgather,
                                grouped_allgather_async, grouped_allreduce, grouped_allreduce_,
                                grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
                                grouped_reducescatter_async, join, poll, reducescatter, reducescatter_async,
                                sparse_allreduce_async, synchronize)
from kolo.torch.optimizer import DistributedOptimizer  # noqa: F401
from kolo.torch.distributed import KoloProcessGroup, register as _register_backend  # noqa: F401
from kolo.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from kolo.torch import ddp_comm_hooks, elastic  # noqa: F401,E402  (hvd.elastic)

_register_backend()  # torch.distributed's "kolo" (kolo/torch/distributed/)

# horovod's name for the error a failed collective raises.
HorovodInternalError = KoloError
