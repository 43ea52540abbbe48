"""SyncBatchNormalization for Keras 2 (tf_keras): the batch statistics of
every rank's batch together, as kolo._keras's layer has them for Keras 3
(the counts, sums and sums of squares per feature added over the set, so
ranks with different batch sizes weigh by their element counts; the sum is
differentiable, and the gradient reaches every rank's inputs)."""
import tensorflow as tf

from kolo import _sync_batch_norm
from kolo._policy import Sum
from kolo._process_sets import global_process_set, group_of
from kolo.tensorflow.mpi_ops import _allreduce


class _TfOps(_sync_batch_norm.Ops):
    stack = staticmethod(tf.stack)
    at_least = staticmethod(tf.maximum)


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    def __init__(self, fused=False, process_set=global_process_set, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        super().__init__(fused=False, **kwargs)
        self.process_set = process_set

    def _calculate_mean_and_var(self, inputs, reduction_axes, keep_dims, mask=None):
        if group_of(self.process_set).size == 1:
            return super()._calculate_mean_and_var(inputs, reduction_axes, keep_dims, mask=mask)
        x = tf.cast(inputs, tf.float32) if inputs.dtype in (tf.float16, tf.bfloat16) else inputs
        weights = tf.ones_like(x) if mask is None else tf.cast(
            tf.broadcast_to(tf.expand_dims(mask, axis=-1), tf.shape(x)), x.dtype)
        _, mean, variance = _sync_batch_norm.global_moments(
            _TfOps, tf.reduce_sum(weights, axis=reduction_axes, keepdims=keep_dims),
            tf.reduce_sum(x * weights, axis=reduction_axes, keepdims=keep_dims),
            tf.reduce_sum(tf.square(x) * weights, axis=reduction_axes, keepdims=keep_dims),
            lambda stacked: _allreduce(stacked, op=Sum, process_set=self.process_set))
        return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)
