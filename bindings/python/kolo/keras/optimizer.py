"""DistributedOptimizer for Keras 3 optimizers, on the tensorflow and torch
backends.

The wrapped optimizer is a subclass of the given optimizer's class, made
from its config, that reduces the gradients over the process set right
before Keras clips them (Keras calls _clip_gradients once per update, on
exactly the gradients it applies: after loss-scale unscaling and, with
backward_passes_per_step, after accumulation). So clipping sees the global
gradient, and with backward_passes_per_step = N Keras's own accumulation
(gradient_accumulation_steps) sums N passes locally and only every N-th
step communicates. On the tensorflow backend this runs inside the train
step's graph: each gradient's allreduce starts as soon as the backward pass
has produced it. On torch, the gradients go as grouped allreduces (one per
dtype) once Keras has them all.
"""
import keras

from kolo._policy import Average
from kolo._process_sets import global_process_set, group_of
from kolo.keras import _backend
from kolo.keras.compression import Compression


def _key(v):
    return id(v)


class _DistributedOptimizer:
    """Methods mixed into the wrapped optimizer's class."""

    def register_local_var(self, var):
        """A worker-local variable: its gradient is not reduced (only scaled
        by 1/size if scale_local_gradients)."""
        self._kolo.local_vars.add(_key(var))

    def _backend_apply_gradients(self, grads, trainable_variables):
        # The variables the gradients in _clip_gradients belong to, in order.
        self._kolo.variables = list(trainable_variables)
        return super(self._kolo_class, self)._backend_apply_gradients(grads, trainable_variables)

    def _clip_gradients(self, grads):
        grads = self._kolo_reduced(list(grads), self._kolo.variables)
        return super(self._kolo_class, self)._clip_gradients(grads)

    def _kolo_reduced(self, grads, variables):
        state = self._kolo
        if state.passes > 1 and not state.average_aggregated:
            # Keras averages the accumulated passes; Horovod's default sums them.
            grads = [g * float(state.passes) if g is not None else g for g in grads]
        shared = [i for i, v in enumerate(variables) if _key(v) not in state.local_vars]
        reduced = state.reduce([grads[i] for i in shared], [variables[i] for i in shared])
        out = list(grads)
        for i, g in zip(shared, reduced):
            out[i] = g
        if state.scale_local and state.local_vars:
            size = float(group_of(state.process_set).size)
            out = [g / size if _key(v) in state.local_vars and g is not None else g for g, v in zip(out, variables)]
        return out


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A Keras 3 optimizer like `optimizer` (a new instance of a subclass of
    its class, from its config) whose updates use the gradients reduced
    over the process set (averaged by default). backward_passes_per_step
    accumulates that many passes locally between reductions (their sum, or
    their mean with average_aggregated_gradients)."""
    del device_dense, device_sparse
    _backend.check_supported()
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError("kolo.keras.DistributedOptimizer wraps a Keras optimizer, not %s" % type(optimizer).__name__)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be at least 1, got %r" % (backward_passes_per_step,))
    if num_groups and groups is None:
        groups = num_groups
    if getattr(optimizer, "gradient_accumulation_steps", None) and backward_passes_per_step > 1:
        raise ValueError("the optimizer already accumulates gradients (gradient_accumulation_steps); "
                         "give backward_passes_per_step or that, not both")
    base = type(optimizer)
    cls = type(base.__name__, (base,), {k: v for k, v in _DistributedOptimizer.__dict__.items()
                                        if k not in ("__dict__", "__weakref__", "__module__")})
    # Saved models name the wrapped optimizer by its own class (load_model wraps it again).
    cls.__module__ = base.__module__
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    if backward_passes_per_step > 1:
        config["gradient_accumulation_steps"] = backward_passes_per_step
    cls._kolo_class = cls
    wrapped = cls.from_config(config)
    # A plain object: Keras tracks lists and variables set on an optimizer, not what this holds.
    wrapped._kolo = _State(
        reduce=_backend.gradient_reducer(compression, sparse_as_dense, op, gradient_predivide_factor, groups,
                                         process_set),
        passes=backward_passes_per_step, average_aggregated=average_aggregated_gradients, local_vars=set(),
        scale_local=scale_local_gradients, process_set=process_set, variables=[])
    return wrapped


class _State:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False, gradient_predivide_factor=1.0,
                                op=Average, backward_passes_per_step=1, average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """DistributedOptimizer whose local_layers' (Keras layers) gradients stay local."""
    local = local_layer_variables(local_layers)
    wrapped = DistributedOptimizer(optimizer, name, device_dense, device_sparse, compression, sparse_as_dense,
                                   gradient_predivide_factor, op, backward_passes_per_step,
                                   average_aggregated_gradients, 0, groups, process_set, scale_local_gradients)
    for var in local:
        wrapped.register_local_var(var)
    return wrapped


def local_layer_variables(local_layers):
    """The trainable variables of local_layers (a Keras layer, a list of
    them, or None), whose gradients a Partial optimizer or tape keeps local."""
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of keras.layers.Layer type.")
    return [var for layer in local_layers for var in layer.trainable_weights]
