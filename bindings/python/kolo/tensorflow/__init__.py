"""kolo for TensorFlow, with horovod.tensorflow's API: a Horovod script runs
after changing its import to `import kolo.tensorflow as hvd`.

    hvd.init()
    tape = hvd.DistributedGradientTape(tape)              # TF2, eager or tf.function
    opt = hvd.DistributedOptimizer(opt)                   # tf.compat.v1 or Keras optimizers
    hvd.broadcast_variables(model.variables, root_rank=0)
    bcast = hvd.broadcast_global_variables(0)             # TF1 graph code

The collectives are TensorFlow ops whose kernels (compiled on first import
against the TensorFlow that runs, see _op_library.py) hand the tensors to
kolo's engine by name and complete asynchronously, so a graph's
collectives overlap its computation and are fused; they work in eager
code, inside tf.function and in tf.compat.v1 graphs and sessions. Failures
raise TensorFlow's errors with kolo's message on every rank: ranks that
disagree (shapes, dtypes) a FailedPreconditionError, a timeout a
DeadlineExceededError, a lost peer an UnknownError naming it; bad
arguments a ValueError or TypeError on the calling rank.
"""
import tensorflow as tf

from kolo._builds import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled, mpi_built,  # noqa: F401
                          mpi_enabled, mpi_threads_supported, nccl_built, rocm_built)
from kolo._library import KoloError, KoloTimeoutError, MismatchError, PeerLostError  # noqa: F401
from kolo._process_sets import (ProcessSet, add_process_set, global_process_set, init,  # noqa: F401
                                remove_process_set)
from kolo._runtime import (cross_rank, cross_size, is_homogeneous, is_initialized, local_rank,  # noqa: F401
                           local_size, rank, shutdown, size, start_timeline, stop_timeline)
from kolo.tensorflow.collectives import (allreduce, grouped_allreduce, grouped_reducescatter,  # noqa: F401
                                         reducescatter)
from kolo.tensorflow.compression import Compression  # noqa: F401
from kolo.tensorflow.functions import (allgather_object, broadcast_object, broadcast_object_fn,  # noqa: F401
                                       broadcast_variables)
from kolo.tensorflow.gradient_tape import DistributedGradientTape, PartialDistributedGradientTape  # noqa: F401
from kolo.tensorflow.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, _executing_eagerly,  # noqa: F401
                                     allgather, alltoall, barrier, broadcast, broadcast_, grouped_allgather,
                                     grouped_broadcast, join, local_rank_op, local_size_op,
                                     process_set_included_op, rank_op, size_op)
from kolo.tensorflow.optimizer import DistributedOptimizer  # noqa: F401
from kolo.tensorflow.sync_batch_norm import SyncBatchNormalization  # noqa: F401
from kolo.tensorflow import elastic  # noqa: F401,E402  (hvd.elastic)

# horovod's name for the error a failed collective raises outside TensorFlow's ops.
HorovodInternalError = KoloError


def broadcast_global_variables(root_rank):
    """The op that assigns root_rank's values to every global variable (TF1
    graph code; in eager code use broadcast_variables(model.variables))."""
    if _executing_eagerly():
        raise RuntimeError("hvd.broadcast_global_variables() does not support eager execution. "
                           "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A SessionRunHook that broadcasts every global variable from root_rank
    once the session is created (so all ranks start from root_rank's
    initial or restored values)."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.bcast_op = None

    def begin(self):
        if self.bcast_op is None or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
