"""kolo for Keras 2 (tf_keras, which tf.keras is under TF_USE_LEGACY_KERAS=1),
with horovod.tensorflow.keras's API: what kolo.tensorflow.keras and
kolo.keras are when tf.keras is tf_keras (kolo._keras_flavour), so that a
Horovod Keras program written for Keras 2 runs with only its import
changed:

    import tensorflow as tf
    import kolo.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(tf.optimizers.Adam(0.001 * hvd.size()))
    model.compile(loss=..., optimizer=opt, experimental_run_tf_function=False)
    model.fit(dataset, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)], ...)

The collectives are kolo.tensorflow's ops on TensorFlow tensors; the
optimizer wrapper is kolo/tensorflow/tf_keras_optimizer.py (which
kolo.tensorflow.DistributedOptimizer uses too), the callbacks
kolo/_keras_callbacks.py's in tf_keras's Callback, hvd.elastic
_tf_keras/elastic.py.
"""
import tensorflow as tf

import kolo.tensorflow as _tf
from kolo import _keras_flavour
from kolo._builds import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled, mpi_built,  # noqa: F401
                          mpi_enabled, mpi_threads_supported, nccl_built, rocm_built)
from kolo._library import KoloError
from kolo._policy import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from kolo._process_sets import (ProcessSet, add_process_set, global_process_set, init,  # noqa: F401
                                remove_process_set)
from kolo._runtime import (cross_rank, cross_size, is_homogeneous, is_initialized, local_rank,  # noqa: F401
                           local_size, rank, shutdown, size, start_timeline, stop_timeline)
from kolo._tf_keras import callbacks, elastic  # noqa: F401
from kolo._tf_keras.sync_batch_norm import SyncBatchNormalization  # noqa: F401
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.tf_keras_optimizer import (DistributedOptimizer, PartialDistributedOptimizer,  # noqa: F401
                                               is_legacy)

__all__ = _keras_flavour.API + ["elastic"]

HorovodInternalError = KoloError


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """root_rank's values assigned to the variables on every rank of the set."""
    return _tf.broadcast_variables(variables, root_rank, process_set=process_set)


def broadcast_global_variables(root_rank):
    """The op that assigns root_rank's values to every global variable (TF1
    graph code; in eager code, BroadcastGlobalVariablesCallback or
    broadcast_variables(model.variables))."""
    return _tf.broadcast_global_variables(root_rank)


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
              compression=Compression.none, process_set=global_process_set):
    """The op (Average unless told) over the set of a value (number, array
    or tensor), as a tensor."""
    return _tf.allreduce(tf.convert_to_tensor(value), average=average, compression=compression, op=op,
                         prescale_factor=prescale_factor, postscale_factor=postscale_factor, name=name,
                         process_set=process_set)


def allgather(value, name=None, process_set=global_process_set):
    """Every rank's value concatenated along the first dimension, as a tensor."""
    return _tf.allgather(tf.convert_to_tensor(value), name=name, process_set=process_set)


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """root_rank's value, as a tensor."""
    return _tf.broadcast(tf.convert_to_tensor(value), root_rank, name=name, process_set=process_set)


def reducescatter(value, name=None, op=Average, process_set=global_process_set):
    """The op over the set of a value, this rank's part of the first
    dimension, as a tensor."""
    return _tf.reducescatter(tf.convert_to_tensor(value), op=op, name=name, process_set=process_set)


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=Compression.none):
    """tf.keras.models.load_model, with the saved optimizer wrapped in
    DistributedOptimizer again, its state (slots, iterations) restored: for
    every Keras 2 optimizer class and custom_optimizers."""
    model = tf.keras.models.load_model(filepath, custom_objects=custom_objects, compile=True)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or hasattr(optimizer, "_kolo_reduce"):
        return model
    known = tuple(custom_optimizers or ()) + (tf.keras.optimizers.Optimizer, tf.keras.optimizers.legacy.Optimizer)
    if not isinstance(optimizer, known):
        return model
    wrapped = DistributedOptimizer(optimizer, compression=compression)
    variables = model.trainable_variables
    if is_legacy(optimizer):
        saved = optimizer.get_weights()
        wrapped._create_all_weights(variables)
        if saved:
            wrapped.set_weights(saved)
    else:
        wrapped.build(variables)
        for mine, theirs in zip(wrapped.variables, optimizer.variables):
            mine.assign(theirs)
    model.compile(optimizer=wrapped, loss=model.loss, metrics=_compiled_metrics(model))
    return model


def _compiled_metrics(model):
    compiled = getattr(model, "compiled_metrics", None)
    return getattr(compiled, "_user_metrics", None) if compiled is not None else None
