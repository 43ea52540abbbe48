"""What kolo.tensorflow and kolo.keras both offer on Keras 3, written once
over the collective each passes in: kolo.tensorflow's are TensorFlow ops,
kolo.keras's those of its Keras backend (kolo.keras._backend), and
kolo.keras sits above kolo.tensorflow, so neither can hold them for the
other.

DistributedOptimizer's wrapped optimizer is a subclass of the given
optimizer's class, made from its config, that reduces the gradients over
the process set right before Keras clips them (Keras calls
_clip_gradients once per update, on exactly the gradients it applies:
after loss-scale unscaling and, with backward_passes_per_step, after
accumulation). So clipping sees the global gradient, and with
backward_passes_per_step = N Keras's own accumulation
(gradient_accumulation_steps) sums N passes locally and only every N-th
step communicates.

SyncBatchNormalization's batch statistics are those of every rank's batch
together: the element counts, sums and sums of squares per feature are
added over the set (kolo._sync_batch_norm), so ranks with different batch
sizes weigh by their element counts (Horovod averages the ranks' moments,
which assumes equal batches). The sum is differentiable: the gradient
reaches every rank's inputs.
"""
import keras
from keras import ops

from kolo import _optimizer, _sync_batch_norm
from kolo._process_sets import global_process_set, group_of


class _DistributedOptimizer:
    """Methods mixed into the wrapped optimizer's class."""

    def register_local_var(self, var):
        """A worker-local variable: its gradient is not reduced (only scaled
        by 1/size if scale_local_gradients)."""
        self._kolo.local_vars.add(id(var))

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
        return _optimizer.reduce_except_local(
            lambda shared, positions: state.reduce(shared, [variables[i] for i in positions]), grads,
            [id(v) for v in variables], state.local_vars, state.scale_local, state.process_set,
            lambda g, size: g / float(size))


class _State:
    """The wrapper's settings: a plain object, since Keras tracks the lists
    and variables set on an optimizer."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def distributed_optimizer(optimizer, reduce, name, backward_passes_per_step, average_aggregated_gradients,
                          scale_local_gradients, process_set):
    """A Keras 3 optimizer like `optimizer` (a new instance of a subclass of
    its class, from its config) whose updates use reduce(grads, variables):
    the gradients reduced over the process set. The arguments are checked
    already (kolo._optimizer.check_arguments)."""
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError("kolo.keras.DistributedOptimizer wraps a Keras optimizer, not %s" % type(optimizer).__name__)
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
    wrapped._kolo = _State(reduce=reduce, passes=backward_passes_per_step,
                           average_aggregated=average_aggregated_gradients, local_vars=set(),
                           scale_local=scale_local_gradients, process_set=process_set, variables=[])
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


class _KerasOps(_sync_batch_norm.Ops):
    stack = staticmethod(ops.stack)
    at_least = staticmethod(ops.maximum)


class SyncBatchNormalization(keras.layers.BatchNormalization):
    """BatchNormalization over every rank's batch (see the module doc); a
    subclass gives _allreduce_sum(x, process_set), a differentiable sum of
    a backend tensor over the set."""

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
        _, mean, variance = _sync_batch_norm.global_moments(
            _KerasOps, ops.sum(weights, axis=self._reduction_axes), ops.sum(x * weights, axis=self._reduction_axes),
            ops.sum(ops.square(x) * weights, axis=self._reduction_axes),
            lambda stacked: self._allreduce_sum(stacked, self.process_set))
        return ops.cast(mean, inputs.dtype), ops.cast(variance, inputs.dtype)
