"""horovod.tensorflow.SyncBatchNormalization: kolo._keras's layer (Keras 3
is TensorFlow's Keras), its statistics summed over the set by
kolo.tensorflow's allreduce op."""
from kolo import _keras
from kolo._policy import Sum
from kolo.tensorflow.mpi_ops import _allreduce


class SyncBatchNormalization(_keras.SyncBatchNormalization):
    __doc__ = _keras.SyncBatchNormalization.__doc__

    @staticmethod
    def _allreduce_sum(x, process_set):
        return _allreduce(x, op=Sum, process_set=process_set)
