"""Adasum (op=hvd.Adasum) for TensorFlow tensors, as kolo.torch computes it
(see kolo.torch.adasum): an allgather of the set's tensors, then Horovod's
pairwise tree in float64 on every rank, so every rank ends with the same
result. Its gradient is the Adasum of the gradients, as Horovod's. The
allgather is kolo.tensorflow.mpi_ops's, passed in: mpi_ops calls this
module for op=Adasum."""
import sys

import tensorflow as tf

from kolo import _policy
from kolo._process_sets import group_of

_SQRT_DOUBLE_MIN = sys.float_info.min ** 0.5


def _combine(a, b):
    """Horovod's pairwise Adasum of two float64 vectors."""
    dot = tf.reduce_sum(a * b)
    anormsq = tf.reduce_sum(a * a)
    bnormsq = tf.reduce_sum(b * b)
    acoeff = tf.where(anormsq >= _SQRT_DOUBLE_MIN, 1.0 - tf.math.divide_no_nan(dot, anormsq) * 0.5, 1.0)
    bcoeff = tf.where(bnormsq >= _SQRT_DOUBLE_MIN, 1.0 - tf.math.divide_no_nan(dot, bnormsq) * 0.5, 1.0)
    return tf.cast(acoeff, tf.float64) * a + tf.cast(bcoeff, tf.float64) * b


def allreduce(tensor, name, prescale_factor, postscale_factor, process_set, allgather):
    tensor = tf.convert_to_tensor(tensor)
    _policy.reduction(tensor.dtype.name, _policy.Adasum, "allreduce",
                      scaled=prescale_factor != 1.0 or postscale_factor != 1.0)
    n = group_of(process_set).size
    _policy.check_adasum_ranks(n)

    @tf.custom_gradient
    def adasum(x):
        flat = tf.reshape(x, [1, -1])
        if prescale_factor != 1.0:
            flat = flat * tf.cast(prescale_factor, flat.dtype)
        rows = tf.cast(allgather(flat, name=name, process_set=process_set), tf.float64)
        level = [rows[i] for i in range(n)]
        while len(level) > 1:
            level = [_combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        result = tf.reshape(tf.cast(level[0] * postscale_factor, x.dtype), tf.shape(x))

        def grad(dy):
            return allreduce(dy, None, prescale_factor, postscale_factor, process_set, allgather)

        return result, grad

    return adasum(tensor)
