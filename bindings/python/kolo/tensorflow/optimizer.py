"""DistributedOptimizer for tf.compat.v1.train optimizers (TF1 graph code):
compute_gradients() returns the gradients reduced over the process set,
each allreduce starting in the graph as soon as its gradient exists. Keras
optimizers are wrapped by kolo._keras's wrapper instead (the same function
dispatches), over this package's reduction, as kolo.keras wraps them on
Keras's tensorflow backend."""
import keras
import tensorflow as tf

from kolo import _keras, _optimizer
from kolo._policy import Adasum, Average
from kolo._process_sets import global_process_set
from kolo.tensorflow.collectives import allreduce, gradient_reducer, reduce_except_local, variable_key
from kolo.tensorflow import tf_keras_optimizer
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.gradient_aggregation import LocalGradientAggregation


class _DistributedOptimizer(tf.compat.v1.train.Optimizer):
    def __init__(self, optimizer, name, use_locking, compression, sparse_as_dense, op, gradient_predivide_factor,
                 backward_passes_per_step, average_aggregated_gradients, groups, process_set,
                 scale_local_gradients):
        name = name or "Distributed%s" % type(optimizer).__name__
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._reduce = gradient_reducer(name, compression, sparse_as_dense, op, gradient_predivide_factor, groups,
                                        process_set)
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_vars = set()
        self._aggregation = None
        if backward_passes_per_step > 1:
            if tf.executing_eagerly():
                raise ValueError("backward_passes_per_step > 1 is supported for tf.compat.v1 optimizers in graph "
                                 "code only; use a Keras optimizer in eager code")
            self._aggregation = LocalGradientAggregation(backward_passes_per_step, self._reduce_shared,
                                                         average_aggregated_gradients, name)

    def register_local_var(self, var):
        """A worker-local variable: its gradient is not reduced (only scaled, see scale_local_gradients)."""
        self._local_vars.add(variable_key(var))

    def _reduce_shared(self, grads, variables):
        return reduce_except_local(self._reduce, grads, variables, self._local_vars, self.scale_local_gradients,
                                   self.process_set)

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's gradients, reduced over the process set."""
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        grads, variables = [list(x) for x in zip(*grads_and_vars)] if grads_and_vars else ([], [])
        if self._aggregation is not None:
            reduced = self._aggregation.compute_gradients(grads, variables)
        else:
            reduced = self._reduce_shared(grads, variables)
        return list(zip(reduced, variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if self._aggregation is not None:
            return self._aggregation.apply_gradients(
                lambda: self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name),
                grads_and_vars, global_step)
        return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


class _DistributedAdasumOptimizer(tf.compat.v1.train.Optimizer):
    """Horovod's delta optimizer (op=Adasum): each rank applies its own
    gradients, then every backward_passes_per_step-th step the variables'
    moves since the last combination are combined with Adasum."""

    def __init__(self, optimizer, name, use_locking, compression, backward_passes_per_step):
        super().__init__(name=name or "DistributedDelta%s" % type(optimizer).__name__, use_locking=use_locking)
        self._optimizer = optimizer
        self._compression = compression
        self._passes = backward_passes_per_step

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        with tf.init_scope():
            counter = tf.compat.v1.Variable(tf.constant(0, tf.int64), trainable=False, name=self._name + "_steps",
                                            collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
            starts = [tf.compat.v1.Variable(tf.zeros(v.shape, v.dtype.base_dtype), trainable=False,
                                            name="%s_delta_start" % v.op.name.replace("/", "_"),
                                            collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
                      for _, v in grads_and_vars]
        first = tf.equal(counter, 0)
        remembered = [tf.cond(first, lambda s=s, v=v: s.assign(v).op, tf.no_op) for s, (_, v) in
                      zip(starts, grads_and_vars)]
        with tf.control_dependencies(remembered):
            update = self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        with tf.control_dependencies([update]):
            comm_step = tf.equal(counter % self._passes, self._passes - 1)

            def combine():
                ops = []
                for s, (_, v) in zip(starts, grads_and_vars):
                    delta = allreduce(v.read_value() - s.read_value(), compression=self._compression, op=Adasum)
                    with tf.control_dependencies([s.assign_add(delta)]):
                        ops.append(v.assign(s.read_value()))
                return tf.group(*ops)

            applied = tf.cond(comm_step, combine, tf.no_op)
        with tf.control_dependencies([applied]):
            return counter.assign_add(1).op

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set, scale_local_gradients=True):
    """An optimizer that reduces gradients over the process set before the
    wrapped optimizer applies them (horovod.tensorflow.DistributedOptimizer):
    a tf.compat.v1.train.Optimizer is wrapped here, a Keras optimizer by
    kolo.keras.DistributedOptimizer (Keras 3's, or Keras 2's where tf.keras
    is tf_keras). op=Adasum makes Horovod's delta
    optimizer (tf.compat.v1 optimizers, the global set only)."""
    del device_dense, device_sparse
    _optimizer.check_arguments(op, gradient_predivide_factor, backward_passes_per_step, average_aggregated_gradients)
    groups = _optimizer.checked_groups(groups, num_groups, "tf.Variable")
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        if op == Adasum:
            if process_set.process_set_id != 0:
                raise NotImplementedError("Adasum does not support process sets yet")
            return _DistributedAdasumOptimizer(optimizer, name, use_locking, compression, backward_passes_per_step)
        return _DistributedOptimizer(optimizer, name, use_locking, compression, sparse_as_dense, op,
                                     gradient_predivide_factor, backward_passes_per_step,
                                     average_aggregated_gradients, groups, process_set, scale_local_gradients)
    if op == Adasum:
        raise ValueError("op == Adasum is not supported yet with Keras")
    if type(optimizer).__module__.startswith("tf_keras."):  # Keras 2 (tf.keras under TF_USE_LEGACY_KERAS)
        return tf_keras_optimizer.DistributedOptimizer(optimizer, name, compression=compression, sparse_as_dense=sparse_as_dense,
                                  gradient_predivide_factor=gradient_predivide_factor, op=op,
                                  backward_passes_per_step=backward_passes_per_step,
                                  average_aggregated_gradients=average_aggregated_gradients, groups=groups,
                                  process_set=process_set, scale_local_gradients=scale_local_gradients)
    if keras.backend.backend() != "tensorflow":
        raise ValueError("kolo.tensorflow.DistributedOptimizer wraps Keras optimizers on Keras's tensorflow "
                         "backend, not %r: use kolo.keras.DistributedOptimizer" % keras.backend.backend())
    reduce = gradient_reducer("DistributedOptimizer", compression, sparse_as_dense, op, gradient_predivide_factor,
                              groups, process_set)
    return _keras.distributed_optimizer(optimizer, reduce, name, backward_passes_per_step,
                                        average_aggregated_gradients, scale_local_gradients, process_set)
