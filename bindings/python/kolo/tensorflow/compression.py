"""Gradient compression for allreduce, as horovod.tensorflow's."""
import tensorflow as tf

from kolo._compression import Compressor, NoneCompressor, compression  # noqa: F401 (re-exported)


def _to_float16(tensor):
    if tensor.dtype.is_floating and tensor.dtype != tf.float16:
        return tf.cast(tensor, tf.float16), tensor.dtype
    return tensor, None


Compression = compression(_to_float16, lambda tensor, dtype: tf.cast(tensor, dtype))
FP16Compressor = Compression.fp16
