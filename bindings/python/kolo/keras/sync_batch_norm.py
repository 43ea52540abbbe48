"""SyncBatchNormalization (horovod's, for Keras 3 on the tensorflow and
torch backends): kolo._keras's layer, its statistics summed over the set
by this backend's collective."""
from kolo import _keras
from kolo.keras import _backend


class SyncBatchNormalization(_keras.SyncBatchNormalization):
    __doc__ = _keras.SyncBatchNormalization.__doc__

    @staticmethod
    def _allreduce_sum(x, process_set):
        return _backend.allreduce_sum(x, process_set)
