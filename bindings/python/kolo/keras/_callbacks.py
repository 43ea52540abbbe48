"""horovod.keras's callbacks for Keras 3 (any backend kolo.keras runs on):
kolo/_keras_callbacks.py's logic in Keras 3's Callback."""
import keras

from kolo import _keras_callbacks as _impl


class _Keras3:
    @staticmethod
    def optimizer_variables(optimizer, model):
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        return list(optimizer.variables)

    @staticmethod
    def to_numpy(value):
        return keras.ops.convert_to_numpy(value)

    @staticmethod
    def get_lr(optimizer):
        return float(keras.ops.convert_to_numpy(optimizer.learning_rate))

    @staticmethod
    def set_lr(optimizer, value):
        optimizer.learning_rate = value

    @staticmethod
    def momentum_variable(optimizer):
        momentum = getattr(optimizer, "momentum", None)
        return momentum if isinstance(momentum, keras.Variable) else None


class BroadcastGlobalVariablesCallback(_impl.BroadcastGlobalVariables, keras.callbacks.Callback):
    __doc__ = _impl.BroadcastGlobalVariables.__doc__
    flavour = _Keras3


class MetricAverageCallback(_impl.MetricAverage, keras.callbacks.Callback):
    __doc__ = _impl.MetricAverage.__doc__


class LearningRateScheduleCallback(_impl.LearningRateSchedule, keras.callbacks.Callback):
    __doc__ = _impl.LearningRateSchedule.__doc__
    flavour = _Keras3


class LearningRateWarmupCallback(_impl.LearningRateWarmup, LearningRateScheduleCallback):
    __doc__ = _impl.LearningRateWarmup.__doc__


class BestModelCheckpoint(_impl.BestModelCheckpoint, keras.callbacks.ModelCheckpoint):
    __doc__ = _impl.BestModelCheckpoint.__doc__
