"""Horovod's horovod.tensorflow.keras.elastic (and horovod.keras.elastic)
on kolo, for Keras 3: KerasState, the callbacks that keep it current during
model.fit (CommitStateCallback, UpdateBatchStateCallback,
UpdateEpochStateCallback) and run:

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    @hvd.elastic.run
    def train(state):
        model.fit(dataset, steps_per_epoch=steps, epochs=epochs - state.epoch,
                  callbacks=[hvd.elastic.CommitStateCallback(state),
                             hvd.elastic.UpdateBatchStateCallback(state),
                             hvd.elastic.UpdateEpochStateCallback(state)])

    train(state)

On Keras's tensorflow backend (kolo.tensorflow.elastic's state and run).
"""
import keras

from kolo import _keras_callbacks as _impl
from kolo.tensorflow.elastic import HostsUpdatedInterrupt, ObjectState, State, TensorFlowKerasState, run  # noqa: F401


class KerasState(TensorFlowKerasState):
    """A built Keras model, its optimizer (compiled into it, or given) and
    plain values, kept as TensorFlowKerasState keeps them."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, **kwargs)


class CommitStateCallback(_impl.CommitState, keras.callbacks.Callback):
    __doc__ = _impl.CommitState.__doc__


class UpdateBatchStateCallback(_impl.UpdateBatchState, keras.callbacks.Callback):
    __doc__ = _impl.UpdateBatchState.__doc__


class UpdateEpochStateCallback(_impl.UpdateEpochState, keras.callbacks.Callback):
    __doc__ = _impl.UpdateEpochState.__doc__
