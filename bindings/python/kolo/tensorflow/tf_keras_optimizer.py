"""DistributedOptimizer for Keras 2 (tf_keras) optimizers: the OptimizerV2
family (tf.keras.optimizers.legacy.*) and tf_keras's own
tf.keras.optimizers.* alike. The wrapped optimizer is a subclass of the
given one's class, made from its config, whose gradient aggregation (the
step both families reserve for combining gradients across devices: after
loss-scale unscaling, before clipping) reduces the gradients over the
process set with kolo.tensorflow's ops, so each allreduce starts in the
train step's graph as soon as its gradient exists, and clipping sees the
global gradient.

Horovod's _compute_gradients(loss, var_list, tape=...) returns the
gradients reduced already (the OptimizerV2 family's minimize() goes through
it); apply_gradients then applies them as they are.

backward_passes_per_step = N: each pass adds its gradients to local
accumulators, and every N-th pass reduces the accumulated sum (or mean,
with average_aggregated_gradients) and applies it; the other passes
neither communicate nor apply (the optimizer's iterations still count
them). Every rank counts the same passes, so every rank takes the same
branch."""
import tensorflow as tf

from kolo import _optimizer
from kolo._policy import Average
from kolo._process_sets import global_process_set
from kolo.tensorflow.collectives import gradient_reducer, reduce_except_local, variable_key
from kolo.tensorflow.compression import Compression


def _keras():
    return tf.keras


def is_legacy(optimizer):
    """Whether a Keras 2 optimizer is of the OptimizerV2 family."""
    return isinstance(optimizer, _keras().optimizers.legacy.Optimizer)


class _Distributed:
    """Methods mixed into the wrapped optimizer's class."""

    def register_local_var(self, var):
        """A worker-local variable: its gradient is not reduced (only scaled
        by 1/size if scale_local_gradients)."""
        self._kolo_local_vars.add(variable_key(var))

    def _kolo_reduced(self, grads_and_vars):
        grads_and_vars = list(grads_and_vars)
        grads = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        reduced = reduce_except_local(self._kolo_reduce, grads, variables, self._kolo_local_vars,
                                      self._kolo_scale_local, self._kolo_process_set)
        return list(zip(reduced, variables))

    # The OptimizerV2 family's aggregation step, and tf_keras's optimizers':
    # where gradients that come into apply_gradients are reduced, unless
    # _compute_gradients reduced them already, or the passes are
    # accumulated (apply_gradients reduces their sum itself).
    def _aggregate_gradients(self, grads_and_vars):
        return self._kolo_aggregated(grads_and_vars)

    def aggregate_gradients(self, grads_and_vars):
        return self._kolo_aggregated(grads_and_vars)

    def _kolo_aggregated(self, grads_and_vars):
        if self.__dict__.pop("_kolo_reduced_already", False) or self._kolo_passes > 1:
            return list(grads_and_vars)
        return self._kolo_reduced(grads_and_vars)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """The (gradient, variable) pairs of loss, reduced over the set
        (Horovod's DistributedOptimizer._compute_gradients; the OptimizerV2
        family's minimize() calls it): apply_gradients then applies them as
        they are. With backward_passes_per_step > 1 they are this pass's
        own, which apply_gradients accumulates."""
        if is_legacy(self):
            grads_and_vars = super(self._kolo_class, self)._compute_gradients(loss, var_list, grad_loss, tape=tape)
        else:
            if grad_loss is not None:
                raise ValueError("grad_loss is taken by Keras 2's legacy optimizers only")
            grads_and_vars = self.compute_gradients(loss, var_list, tape=tape)
        if self._kolo_passes > 1:
            return list(grads_and_vars)
        self.__dict__["_kolo_reduced_already"] = True
        return self._kolo_reduced(grads_and_vars)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        if self._kolo_passes == 1:
            return super(self._kolo_class, self).apply_gradients(grads_and_vars, *args, **kwargs)
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        variables = [v for _, v in grads_and_vars]
        with tf.init_scope():
            # Slots and accumulators now, outside the branch below: a
            # traced step may create variables only where it always runs.
            if is_legacy(self):
                self._create_all_weights(variables)
            else:
                self.build(variables)
            for v in variables:
                if variable_key(v) not in self._kolo_accumulators:
                    self._kolo_accumulators[variable_key(v)] = tf.Variable(
                        tf.zeros_like(v), trainable=False, name="kolo_accumulator")
            if self._kolo_counter is None:  # untracked, as the accumulators: nothing to save
                self.__dict__["_kolo_counter"] = tf.Variable(0, dtype=tf.int64, trainable=False, name="kolo_passes")
        accumulators = [self._kolo_accumulators[variable_key(v)] for v in variables]
        for (g, _), acc in zip(grads_and_vars, accumulators):
            acc.assign_add(tf.convert_to_tensor(g))
        self._kolo_counter.assign_add(1)
        passes = self._kolo_passes

        def communicate():
            scale = 1.0 / passes if self._kolo_average_aggregated else 1.0
            summed = self._kolo_reduced([(acc * tf.cast(scale, acc.dtype), v)
                                         for acc, v in zip(accumulators, variables)])
            with tf.control_dependencies([g for g, _ in summed]):
                super(self._kolo_class, self).apply_gradients(summed, *args, **kwargs)
            with tf.control_dependencies([self.iterations]):
                for acc in accumulators:  # an infinite pass goes with its cycle
                    acc.assign(tf.zeros_like(acc))
            return tf.constant(True)

        def accumulate_only():
            self.iterations.assign_add(1)  # every pass counts, as the optimizer's own steps do
            return tf.constant(False)

        return tf.cond(tf.equal(self._kolo_counter % passes, 0), communicate, accumulate_only)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A Keras 2 optimizer like `optimizer` whose updates use the gradients
    reduced over the process set (averaged by default)."""
    del device_dense, device_sparse
    keras = _keras()
    if not isinstance(optimizer, (keras.optimizers.Optimizer, keras.optimizers.legacy.Optimizer)):
        raise TypeError("kolo.tensorflow.keras.DistributedOptimizer wraps a Keras 2 (tf_keras) optimizer, not %s"
                        % type(optimizer).__name__)
    _optimizer.check_arguments(op, gradient_predivide_factor, backward_passes_per_step, average_aggregated_gradients)
    groups = _optimizer.checked_groups(groups, num_groups, "tf.Variable",
                                       lambda v: isinstance(v, tf.Variable))
    base = type(optimizer)
    cls = type(base.__name__, (base,), {k: v for k, v in _Distributed.__dict__.items()
                                        if k not in ("__dict__", "__weakref__", "__module__", "__doc__")})
    cls.__module__ = base.__module__  # saved models name it by its own class (load_model wraps it again)
    cls._kolo_class = cls
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    wrapped = cls.from_config(config)
    reduce_name = name or "Distributed%s" % base.__name__
    # Attributes Keras does not track (it tracks what an optimizer holds).
    wrapped.__dict__.update(
        _kolo_reduce=gradient_reducer(reduce_name, compression, sparse_as_dense, op, gradient_predivide_factor,
                                      groups, process_set),
        _kolo_local_vars=set(), _kolo_scale_local=scale_local_gradients, _kolo_process_set=process_set,
        _kolo_passes=backward_passes_per_step, _kolo_average_aggregated=average_aggregated_gradients,
        _kolo_accumulators={}, _kolo_counter=None)
    return wrapped


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False, gradient_predivide_factor=1.0,
                                op=Average, backward_passes_per_step=1, average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """DistributedOptimizer whose local_layers' (Keras layers) gradients stay local."""
    keras = _keras()
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    wrapped = DistributedOptimizer(optimizer, name, device_dense, device_sparse, compression, sparse_as_dense,
                                   gradient_predivide_factor, op, backward_passes_per_step,
                                   average_aggregated_gradients, 0, groups, process_set, scale_local_gradients)
    for layer in local_layers:
        for var in layer.trainable_weights:
            wrapped.register_local_var(var)
    return wrapped
