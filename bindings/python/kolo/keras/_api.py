"""kolo.keras for Keras 3 (kolo/keras/__init__.py says when, and how it is
used), with horovod.keras's (and horovod.tensorflow.keras's) API, on
Keras's tensorflow backend and, beyond Horovod, its torch backend
(KERAS_BACKEND=torch). hvd.elastic is Horovod's keras elastic API
(kolo.keras.elastic, on Keras's tensorflow backend).
"""
import keras
import numpy as np

import kolo
from kolo import _keras_flavour
from kolo._builds import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled, mpi_built,  # noqa: F401
                          mpi_enabled, mpi_threads_supported, nccl_built, rocm_built)
from kolo._policy import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from kolo._library import KoloError
from kolo._process_sets import (ProcessSet, add_process_set, global_process_set, init,  # noqa: F401
                                remove_process_set)
from kolo._runtime import (cross_rank, cross_size, is_homogeneous, is_initialized, local_rank,  # noqa: F401
                           local_size, rank, shutdown, size, start_timeline, stop_timeline)
from kolo.keras import _backend, callbacks  # noqa: F401
from kolo.keras.compression import Compression
from kolo.keras.optimizer import DistributedOptimizer, PartialDistributedOptimizer  # noqa: F401
from kolo.keras.sync_batch_norm import SyncBatchNormalization  # noqa: F401

__all__ = _keras_flavour.API

HorovodInternalError = KoloError


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """root_rank's values assigned to the (Keras) variables on every rank of the set."""
    _backend.broadcast_values(variables, root_rank, process_set)


def broadcast_global_variables(root_rank):
    """TF1's global variables do not exist in Keras 3 (no session, no
    graph collections): raises, naming what to use instead."""
    raise RuntimeError("broadcast_global_variables() needs TF1 graph code; with Keras 3 use "
                       "hvd.callbacks.BroadcastGlobalVariablesCallback(%d) in fit(), or "
                       "hvd.broadcast_variables(model.variables, root_rank=%d)" % (root_rank, root_rank))


def _numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value))


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
              compression=Compression.none, process_set=global_process_set):
    """The op (Average unless told) over the set of a value (number, array
    or tensor), as a tensor of the Keras backend."""
    del compression
    if op is None:
        op = Sum if average is False else Average
    return keras.ops.convert_to_tensor(kolo.allreduce(_numpy(value), op=op, name=name, process_set=process_set,
                                                      prescale_factor=prescale_factor,
                                                      postscale_factor=postscale_factor))


def allgather(value, name=None, process_set=global_process_set):
    """Every rank's value concatenated along the first dimension, as a tensor of the Keras backend."""
    return keras.ops.convert_to_tensor(kolo.allgather(_numpy(value), name=name, process_set=process_set))


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """root_rank's value, as a tensor of the Keras backend."""
    return keras.ops.convert_to_tensor(kolo.broadcast(_numpy(value), root_rank, name=name, process_set=process_set))


def reducescatter(value, name=None, op=Average, process_set=global_process_set):
    """The op over the set of a value, this rank's part of the first
    dimension, as a tensor of the Keras backend."""
    return keras.ops.convert_to_tensor(kolo.reducescatter(_numpy(value), op=op, name=name, process_set=process_set))


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=Compression.none):
    """keras.models.load_model, with the saved optimizer wrapped in
    DistributedOptimizer again (its state restored): for every Keras
    optimizer class and custom_optimizers."""
    model = keras.models.load_model(filepath, custom_objects=custom_objects, compile=True)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or hasattr(optimizer, "_kolo"):
        return model
    known = tuple(custom_optimizers or ()) + (keras.optimizers.Optimizer,)
    if isinstance(optimizer, known):
        wrapped = DistributedOptimizer(optimizer, compression=compression)
        if optimizer.built:
            wrapped.build(model.trainable_variables)
            for mine, theirs in zip(wrapped.variables, optimizer.variables):
                mine.assign(theirs)
        model.optimizer = wrapped
        model.compile(optimizer=wrapped, loss=model.loss, metrics=_compiled_metrics(model))
    return model


def _compiled_metrics(model):
    config = getattr(model, "_compile_config", None)
    return (config.config.get("metrics") if config is not None else None)
