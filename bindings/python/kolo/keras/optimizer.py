"""DistributedOptimizer for Keras 3 optimizers, on the tensorflow and torch
backends: kolo._keras's wrapper (it reduces the gradients right before
Keras clips them) over this backend's reduction. On the tensorflow backend
this runs inside the train step's graph: each gradient's allreduce starts
as soon as the backward pass has produced it. On torch, the gradients go
as grouped allreduces (one per dtype) once Keras has them all.
"""
from kolo import _keras, _optimizer
from kolo._keras import local_layer_variables
from kolo._policy import Average
from kolo._process_sets import global_process_set
from kolo.keras import _backend
from kolo.keras.compression import Compression


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
    _optimizer.check_arguments(op, gradient_predivide_factor, backward_passes_per_step, average_aggregated_gradients)
    groups = _optimizer.checked_groups(groups, num_groups, "keras.Variable")
    reduce = _backend.gradient_reducer(compression, sparse_as_dense, op, gradient_predivide_factor, groups,
                                       process_set)
    return _keras.distributed_optimizer(optimizer, reduce, name, backward_passes_per_step,
                                        average_aggregated_gradients, scale_local_gradients, process_set)


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
