"""horovod.tensorflow.util's helpers that programs and Horovod's tests import."""
import tensorflow as tf


def _executing_eagerly():
    return tf.executing_eagerly()
