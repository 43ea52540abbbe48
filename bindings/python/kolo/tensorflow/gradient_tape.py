"""DistributedGradientTape: a tf.GradientTape whose gradient() returns the
gradients reduced over the process set (horovod.tensorflow's)."""
import tensorflow as tf

from kolo import _optimizer
from kolo._keras import local_layer_variables
from kolo._policy import Average
from kolo._process_sets import global_process_set
from kolo.tensorflow.collectives import gradient_reducer, reduce_except_local, variable_key
from kolo.tensorflow.compression import Compression


class _DistributedGradientTape(tf.GradientTape):
    """Methods of the wrapping tape; DistributedGradientTape makes a subclass
    of the given tape's class with them, sharing the tape's recording."""

    def register_local_source(self, source):
        """A worker-local source: its gradient is not reduced (only scaled, see scale_local_gradients)."""
        self._kolo_local_sources.add(variable_key(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False, **kwargs):
        sources_list = tf.nest.flatten(sources)
        grads = super(self._kolo_base, self).gradient(target, sources_list, output_gradients, **kwargs)
        reduced = reduce_except_local(self._kolo_reduce, list(grads), sources_list, self._kolo_local_sources,
                                      self._kolo_scale_local, self._kolo_process_set, use_generic_names)
        return tf.nest.pack_sequence_as(sources, reduced)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None, use_generic_names=False):
        """([(local source, gradient)], [(global source, gradient)])."""
        grads = self.gradient(target, sources, output_gradients, use_generic_names)
        local, shared = [], []
        for s, g in zip(sources, grads):
            (local if variable_key(s) in self._kolo_local_sources else shared).append((s, g))
        return local, shared


def DistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=global_process_set, scale_local_gradients=True):
    """The tape, wrapped: gradient() reduces the gradients over the set (in
    eager code all of them inside one tf.function, in a graph each as soon
    as it exists)."""
    del device_dense, device_sparse
    _optimizer.check_arguments(op, gradient_predivide_factor, backward_passes_per_step=1)
    groups = _optimizer.checked_groups(groups, num_groups, "tf.Variable")
    base = type(gradtape)
    cls = type(base.__name__, (base,), {k: v for k, v in _DistributedGradientTape.__dict__.items()
                                        if k not in ("__dict__", "__weakref__")})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)  # the same recording: wrapping before or after `with` both work
    tape._kolo_base = cls
    tape._kolo_reduce = gradient_reducer("DistributedGradientTape", compression, sparse_as_dense, op,
                                         gradient_predivide_factor, groups, process_set)
    tape._kolo_process_set = process_set
    tape._kolo_scale_local = scale_local_gradients
    tape._kolo_local_sources = set()
    return tape


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                                   sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set, local_layers=None,
                                   scale_local_gradients=True):
    """DistributedGradientTape whose local_layers' (Keras layers) gradients
    stay local."""
    local = local_layer_variables(local_layers)
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression, sparse_as_dense, op,
                                   gradient_predivide_factor, num_groups, groups, process_set,
                                   scale_local_gradients)
    for var in local:
        tape.register_local_source(var)
    return tape
