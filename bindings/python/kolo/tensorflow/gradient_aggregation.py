"""backward_passes_per_step for tf.compat.v1 optimizers in graph code:
each pass adds its gradients into local accumulators; every N-th pass
allreduces the accumulated sums (divided by N with
average_aggregated_gradients), applies them and clears the accumulators.
The other passes communicate nothing and apply nothing (the global step
still advances, as the wrapped optimizer's apply would advance it). Every
rank counts the same passes, so every rank takes the same branch."""
import tensorflow as tf

from kolo.tensorflow.collectives import variable_key


class LocalGradientAggregation:
    def __init__(self, backward_passes_per_step, allreduce_grads, average_aggregated_gradients, name):
        self.passes = backward_passes_per_step
        self.allreduce_grads = allreduce_grads
        self.average = average_aggregated_gradients
        self.name = name
        self.counter = None
        self.accumulators = {}  # variable ref -> accumulator
        self._is_comm_step = None

    def _local_variable(self, initial, name):
        return tf.compat.v1.Variable(initial, trainable=False, name=name,
                                     collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])

    def _accumulator(self, var):
        key = variable_key(var)
        if key not in self.accumulators:
            with tf.init_scope():
                self.accumulators[key] = self._local_variable(tf.zeros(var.shape, var.dtype.base_dtype),
                                                              "%s_accumulator" % var.op.name.replace("/", "_"))
        return self.accumulators[key]

    def compute_gradients(self, grads, variables):
        """The gradients to apply: allreduced sums on a communication pass,
        the local sums otherwise (apply_gradients ignores those)."""
        if self.counter is None:
            with tf.init_scope():
                self.counter = self._local_variable(tf.constant(0, tf.int64), self.name + "_pass_counter")
        updates = []
        for g, v in zip(grads, variables):
            if g is None:
                continue
            updates.append(self._accumulator(v).assign_add(tf.convert_to_tensor(g)))
        with tf.control_dependencies(updates):
            passes = self.counter.assign_add(1)
        self._is_comm_step = tf.equal(passes % self.passes, 0)
        present = [(i, v) for i, (g, v) in enumerate(zip(grads, variables)) if g is not None]

        def reduced():
            sums = [self._accumulator(v).read_value() for _, v in present]
            if self.average:
                sums = [s / tf.cast(self.passes, s.dtype) for s in sums]
            return self.allreduce_grads(sums, [v for _, v in present])

        def local():
            return [self._accumulator(v).read_value() for _, v in present]

        values = tf.cond(self._is_comm_step, reduced, local) if present else []
        if len(present) == 1 and not isinstance(values, (list, tuple)):
            values = [values]
        out = [None] * len(grads)
        for (i, _), value in zip(present, values):
            out[i] = value
        return out

    def apply_gradients(self, apply, grads_and_vars, global_step):
        """apply() on a communication pass, then the accumulators cleared; on
        the others only the global step advances."""
        grads_and_vars = list(grads_and_vars)

        def communicate():
            with tf.control_dependencies([apply()]):
                clears = [self._accumulator(v).assign(tf.zeros_like(v)) for g, v in grads_and_vars if g is not None]
            with tf.control_dependencies(clears):
                return tf.no_op()

        def accumulate_only():
            if global_step is not None:
                with tf.control_dependencies([tf.compat.v1.assign_add(global_step, 1)]):
                    return tf.no_op()
            return tf.no_op()

        return tf.cond(self._is_comm_step, communicate, accumulate_only)
