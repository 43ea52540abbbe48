"""Which Keras a process's Keras programs use: Keras 3 (the keras package,
which tf.keras is by default), or Keras 2 (tf_keras, which tf.keras is
when TF_USE_LEGACY_KERAS is set, as TensorFlow tells Keras 2 programs to
do since 2.16). kolo.keras and kolo.tensorflow.keras serve the one tf.keras
is."""
import os


def tf_keras_in_use():
    """Whether tf.keras is tf_keras here. TensorFlow itself is imported only
    where the variable asks for tf_keras (a Keras 3 program on the torch
    backend need not have it)."""
    if os.environ.get("TF_USE_LEGACY_KERAS", "") not in ("1", "true", "True"):
        return False
    import tensorflow as tf
    # By its classes: the module tf.keras is may be named tensorflow.keras
    # either way, once something has imported from tensorflow.keras.*.
    return tf.keras.layers.Layer.__module__.startswith("tf_keras")


# horovod.keras's (and horovod.tensorflow.keras's) names, which each
# Keras's implementation (kolo/keras/_api.py, kolo/_tf_keras) exports.
API = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size", "cross_rank", "cross_size",
    "is_homogeneous", "start_timeline", "stop_timeline", "ProcessSet", "add_process_set", "remove_process_set",
    "global_process_set", "Average", "Sum", "Adasum", "Min", "Max", "Product", "Compression",
    "HorovodInternalError", "DistributedOptimizer", "PartialDistributedOptimizer", "SyncBatchNormalization",
    "allreduce", "allgather", "broadcast", "reducescatter", "broadcast_variables", "broadcast_global_variables",
    "load_model", "callbacks", "ccl_built", "cuda_built", "ddl_built", "gloo_built", "gloo_enabled", "mpi_built",
    "mpi_enabled", "mpi_threads_supported", "nccl_built", "rocm_built",
]
