"""horovod.keras.callbacks, for the Keras tf.keras is (kolo/keras/__init__.py):
Keras 3's (kolo/keras/_callbacks.py) or Keras 2's (kolo/_tf_keras/callbacks.py)."""
from kolo._keras_flavour import tf_keras_in_use as _tf_keras_in_use

if _tf_keras_in_use():
    from kolo._tf_keras.callbacks import (BestModelCheckpoint, BroadcastGlobalVariablesCallback,  # noqa: F401
                                          LearningRateScheduleCallback, LearningRateWarmupCallback,
                                          MetricAverageCallback)
else:
    from kolo.keras._callbacks import (BestModelCheckpoint, BroadcastGlobalVariablesCallback,  # noqa: F401
                                       LearningRateScheduleCallback, LearningRateWarmupCallback,
                                       MetricAverageCallback)
