"""SyncBatchNormalization: batch normalization whose batch statistics are
those of every rank's batch together (horovod's, for Keras 3 on the
tensorflow and torch backends).

Each rank sums its element count, sum and sum of squares per feature; one
allreduce adds them over the set, and the mean and variance come from the
totals, so ranks with different batch sizes weigh by their element counts
(Horovod averages the ranks' moments, which assumes equal batches). The
sum is differentiable: the gradient reaches every rank's inputs."""
import keras
from keras import ops

from kolo._process_sets import global_process_set, group_of
from kolo.keras import _backend


class SyncBatchNormalization(keras.layers.BatchNormalization):
    def __init__(self, fused=False, process_set=global_process_set, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        super().__init__(**kwargs)
        self.process_set = process_set

    def _moments(self, inputs, mask):
        if group_of(self.process_set).size == 1:
            return super()._moments(inputs, mask)
        x = ops.cast(inputs, "float32") if keras.backend.standardize_dtype(inputs.dtype) in ("float16",
                                                                                           "bfloat16") else inputs
        if mask is None:
            weights = ops.ones_like(x)
        else:
            weights = ops.cast(ops.broadcast_to(ops.expand_dims(mask, axis=-1), ops.shape(x)), x.dtype)
        count = ops.sum(weights, axis=self._reduction_axes)
        total = ops.sum(x * weights, axis=self._reduction_axes)
        squares = ops.sum(ops.square(x) * weights, axis=self._reduction_axes)
        summed = _backend.allreduce_sum(ops.stack([count, total, squares]), self.process_set)
        count, total, squares = summed[0], summed[1], summed[2]
        count = ops.maximum(count, 1.0)
        mean = total / count
        variance = ops.maximum(squares / count - ops.square(mean), 0.0)
        return ops.cast(mean, inputs.dtype), ops.cast(variance, inputs.dtype)
