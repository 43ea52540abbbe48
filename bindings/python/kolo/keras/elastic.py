"""horovod.keras.elastic, for the Keras tf.keras is (kolo/keras/__init__.py):
Keras 3's (kolo/keras/_elastic.py) or Keras 2's (kolo/_tf_keras/elastic.py)."""
from kolo._keras_flavour import tf_keras_in_use as _tf_keras_in_use

if _tf_keras_in_use():
    from kolo._tf_keras.elastic import (CommitStateCallback, HostsUpdatedInterrupt, KerasState,  # noqa: F401
                                        ObjectState, State, UpdateBatchStateCallback, UpdateEpochStateCallback, run)
else:
    from kolo.keras._elastic import (CommitStateCallback, HostsUpdatedInterrupt, KerasState,  # noqa: F401
                                     ObjectState, State, UpdateBatchStateCallback, UpdateEpochStateCallback, run)
