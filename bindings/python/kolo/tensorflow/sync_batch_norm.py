"""horovod.tensorflow.SyncBatchNormalization is a Keras layer: kolo.keras's."""
from kolo.keras.sync_batch_norm import SyncBatchNormalization  # noqa: F401
