"""horovod.tensorflow.keras's callbacks for Keras 2 (tf_keras):
kolo/_keras_callbacks.py's logic in tf_keras's Callback."""
import tensorflow as tf

from kolo import _keras_callbacks as _impl
from kolo.tensorflow.tf_keras_optimizer import is_legacy

keras = tf.keras


class _TfKeras:
    @staticmethod
    def optimizer_variables(optimizer, model):
        if is_legacy(optimizer):
            optimizer._create_all_weights(model.trainable_variables)  # its slots, as its first step makes them
            return list(optimizer.variables())
        optimizer.build(model.trainable_variables)  # builds once
        return list(optimizer.variables)

    @staticmethod
    def to_numpy(value):
        return keras.backend.get_value(value)

    @staticmethod
    def get_lr(optimizer):
        return float(keras.backend.get_value(optimizer.learning_rate))

    @staticmethod
    def set_lr(optimizer, value):
        optimizer.learning_rate = value

    @staticmethod
    def momentum_variable(optimizer):
        momentum = getattr(optimizer, "momentum", None)
        return momentum if isinstance(momentum, tf.Variable) else None


class BroadcastGlobalVariablesCallback(_impl.BroadcastGlobalVariables, keras.callbacks.Callback):
    __doc__ = _impl.BroadcastGlobalVariables.__doc__
    flavour = _TfKeras


class MetricAverageCallback(_impl.MetricAverage, keras.callbacks.Callback):
    __doc__ = _impl.MetricAverage.__doc__


class LearningRateScheduleCallback(_impl.LearningRateSchedule, keras.callbacks.Callback):
    __doc__ = _impl.LearningRateSchedule.__doc__
    flavour = _TfKeras


class LearningRateWarmupCallback(_impl.LearningRateWarmup, LearningRateScheduleCallback):
    __doc__ = _impl.LearningRateWarmup.__doc__


class BestModelCheckpoint(_impl.BestModelCheckpoint, keras.callbacks.ModelCheckpoint):
    __doc__ = _impl.BestModelCheckpoint.__doc__
