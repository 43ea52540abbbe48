"""The collectives kolo.keras needs, on the tensors of the Keras backend in
use: TensorFlow's through kolo.tensorflow's ops (inside the train step's
graph, so they overlap the backward pass), PyTorch's through kolo.torch.
Values that leave the step (variables to broadcast, metrics to average)
go as NumPy arrays through kolo's framework-free collectives."""
import keras

import kolo
from kolo import _keras_callbacks, _optimizer


def name():
    return keras.backend.backend()


def check_supported():
    if name() not in ("tensorflow", "torch"):
        raise NotImplementedError("kolo.keras runs on Keras's tensorflow and torch backends, not %r "
                                  "(KERAS_BACKEND)" % name())


def gradient_reducer(compression, sparse_as_dense, op, gradient_predivide_factor, groups, process_set):
    """f(grads, variables) -> grads reduced over the set (None stays None)."""
    check_supported()
    if name() == "tensorflow":
        from kolo.tensorflow.collectives import gradient_reducer as tf_reducer
        return tf_reducer("DistributedOptimizer", compression, sparse_as_dense, op, gradient_predivide_factor,
                          groups, process_set)
    import kolo.torch as kt
    prescale, postscale = _optimizer.scale_factors(op, gradient_predivide_factor)

    def reduce(grads, variables, use_generic_names=False):
        del variables, use_generic_names
        grads = list(grads)
        present = [i for i, g in enumerate(grads) if g is not None]
        if not present or not _optimizer.communicates(process_set):
            return grads
        # One grouped operation per dtype (a grouped allreduce takes one).
        by_dtype = {}
        for i in present:
            by_dtype.setdefault(grads[i].dtype, []).append(i)
        # In place (the gradients are Keras's own fresh tensors), all dtypes in flight at once.
        pending = []
        for positions in by_dtype.values():
            compressed = [compression.compress(grads[i].contiguous()) for i in positions]
            tensors = [c for c, _ in compressed]
            pending.append((positions, compressed, tensors, kt.grouped_allreduce_async_(
                tensors, op=op, prescale_factor=prescale, postscale_factor=postscale, process_set=process_set,
                compression=compression)))
        for positions, compressed, tensors, handle in pending:
            kt.synchronize(handle)
            for i, t, (_, ctx) in zip(positions, tensors, compressed):
                grads[i] = compression.decompress(t, ctx)
        return grads

    return reduce


def allreduce_sum(x, process_set):
    """A differentiable sum over the set of a backend tensor (SyncBatchNormalization's statistics)."""
    check_supported()
    if name() == "tensorflow":
        from kolo.tensorflow.mpi_ops import _allreduce
        return _allreduce(x, op=kolo.Sum, process_set=process_set)
    import kolo.torch as kt
    return kt.allreduce(x, op=kolo.Sum, process_set=process_set)


def broadcast_values(variables, root_rank, process_set):
    """root_rank's values assigned to the variables (Keras variables of any
    backend), every broadcast in flight at once."""
    _keras_callbacks.broadcast_values(variables, root_rank, process_set, keras.ops.convert_to_numpy)
