"""horovod.tensorflow.keras.elastic for Keras 2 (tf_keras): KerasState and
the three fit callbacks that keep it current, over kolo.tensorflow.elastic's
state and run (see kolo/keras/elastic.py for how they are used)."""
import tensorflow as tf

from kolo import _keras_callbacks as _impl
from kolo._tf_keras.callbacks import _TfKeras
from kolo.tensorflow.elastic import HostsUpdatedInterrupt, ObjectState, State, TensorFlowKerasState, run  # noqa: F401

keras = tf.keras


class KerasState(TensorFlowKerasState):
    """A built Keras 2 model, its optimizer (compiled into it, or given) and
    plain values, kept as TensorFlowKerasState keeps them."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, **kwargs)

    def _build_optimizer(self):
        if self.optimizer is not None:
            _TfKeras.optimizer_variables(self.optimizer, self.model)


class CommitStateCallback(_impl.CommitState, keras.callbacks.Callback):
    __doc__ = _impl.CommitState.__doc__


class UpdateBatchStateCallback(_impl.UpdateBatchState, keras.callbacks.Callback):
    __doc__ = _impl.UpdateBatchState.__doc__


class UpdateEpochStateCallback(_impl.UpdateEpochState, keras.callbacks.Callback):
    __doc__ = _impl.UpdateEpochState.__doc__
