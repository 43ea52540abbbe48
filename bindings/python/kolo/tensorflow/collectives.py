"""horovod.tensorflow's public collectives over kolo's ops: compression,
tf.IndexedSlices (allgathered, as Horovod does), grouped forms, and the
function that reduces a list of gradients for the optimizers and tapes."""
import tensorflow as tf

from kolo import _optimizer
from kolo._policy import Adasum, Average, Sum, resolve_op
from kolo._process_sets import global_process_set, group_of
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.mpi_ops import (_allreduce, _executing_eagerly, _grouped_allreduce, _grouped_reducescatter,
                                     _reducescatter, allgather, grouped_allgather)


def variable_key(v):
    """A hashable key for a variable or tensor: TensorFlow's ref(), else
    (a Keras 3 variable has none) the object's identity."""
    return v.ref() if hasattr(v, "ref") else id(v)


def _sparse_allreduce(slices, op, prescale_factor, postscale_factor, process_set, ignore_name_scope, gather):
    if op == Adasum:
        raise NotImplementedError("The Adasum reduction does not support sparse tensors (tf.IndexedSlices); pass "
                                  "sparse_as_dense=True to DistributedOptimizer")
    if op not in (Sum, Average):
        raise NotImplementedError("Only Sum and Average ops are supported with tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with tf.IndexedSlices")
    values, indices = gather([s.values for s in slices], [s.indices for s in slices])
    size = group_of(process_set).size
    return [tf.IndexedSlices(v / tf.cast(size, v.dtype) if op == Average else v, i, dense_shape=s.dense_shape)
            for v, i, s in zip(values, indices, slices)]


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """op (Average unless told) over the set's tensors, as a new tensor. A
    tf.IndexedSlices is allgathered (values and indices) instead, as Horovod
    does, and comes back as one holding every rank's slices."""
    del device_dense, device_sparse  # kolo's kernels run on the host
    op = resolve_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        def gather(values, indices):
            return ([allgather(values[0], process_set=process_set, ignore_name_scope=ignore_name_scope)],
                    [allgather(indices[0], process_set=process_set, ignore_name_scope=ignore_name_scope)])
        return _sparse_allreduce([tensor], op, prescale_factor, postscale_factor, process_set, ignore_name_scope,
                                 gather)[0]
    compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
    reduced = _allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                         process_set=process_set, compression=compression)
    return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="", compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """allreduce of each tensor: the dense ones as one engine operation per
    dtype, the tf.IndexedSlices as grouped allgathers."""
    del device_dense, device_sparse
    if not tensors:
        return tensors
    op = resolve_op(op, average)
    out = [None] * len(tensors)
    sparse = [i for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    if sparse:
        def gather(values, indices):
            return (grouped_allgather(values, process_set=process_set, ignore_name_scope=ignore_name_scope),
                    grouped_allgather(indices, process_set=process_set, ignore_name_scope=ignore_name_scope))
        reduced = _sparse_allreduce([tensors[i] for i in sparse], op, prescale_factor, postscale_factor, process_set,
                                    ignore_name_scope, gather)
        for i, r in zip(sparse, reduced):
            out[i] = r
    if dense:
        compressed = [compression.compress(tf.convert_to_tensor(tensors[i])) for i in dense]
        reduced = _grouped_allreduce([c for c, _ in compressed], name=name, op=op, prescale_factor=prescale_factor,
                                     postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                                     process_set=process_set, compression=compression)
        for i, r, (_, ctx) in zip(dense, reduced, compressed):
            out[i] = compression.decompress(r, ctx)
    return out


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """op over the set's tensors cut along the first dimension: rank r of
    the set gets part r (the first shape[0] % size parts have one more row)."""
    del device_dense
    compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
    reduced = _reducescatter(compressed, name=name, op=op, ignore_name_scope=ignore_name_scope,
                             process_set=process_set, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor)
    return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0, name=None):
    """reducescatter of each tensor (one dtype), as one op."""
    del device_dense
    if not tensors:
        return tensors
    compressed = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]
    reduced = _grouped_reducescatter([c for c, _ in compressed], name=name, op=op, process_set=process_set,
                                     prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, compressed)]


_reducers = {}  # arguments -> reducer: a tape wrapped anew each step reuses its traced function


def gradient_reducer(name, compression, sparse_as_dense, op, gradient_predivide_factor, groups, process_set):
    groups_key = groups if not isinstance(groups, list) else tuple(tuple(variable_key(v) for v in g) for g in groups)
    key = (name, compression, sparse_as_dense, op, gradient_predivide_factor, groups_key, id(process_set))
    if key not in _reducers:
        _reducers[key] = _gradient_reducer(name, compression, sparse_as_dense, op, gradient_predivide_factor,
                                           groups, process_set)
    return _reducers[key]


def _gradient_reducer(name, compression, sparse_as_dense, op, gradient_predivide_factor, groups, process_set):
    """f(grads, variables, use_generic_names=False) -> the grads reduced over
    the set (None stays None), for DistributedOptimizer and
    DistributedGradientTape. Each gradient is its own op unless `groups`
    bundles them (an int: that many grouped ops; a list of lists of
    variables: one grouped op per list, the others alone). In a graph each
    op starts as soon as its gradient exists, overlapping the rest of the
    backward pass; eager calls run the ops together inside one tf.function.
    A set of one rank, or one this rank is not in, leaves the gradients as
    they are (Horovod's rule)."""
    prescale, postscale = _optimizer.scale_factors(op, gradient_predivide_factor)
    if isinstance(groups, list):
        groups = [[variable_key(v) for v in group] for group in groups]

    def reduce(grads, bundles, use_generic_names):
        with tf.name_scope(name + "_Allreduce"):
            out = list(grads)
            for k, bundle in enumerate(bundles):
                kwargs = dict(compression=compression, op=op, prescale_factor=prescale, postscale_factor=postscale,
                              process_set=process_set, ignore_name_scope=use_generic_names,
                              name="grad_%d" % k if use_generic_names else None)
                if groups is None:
                    out[bundle[0]] = allreduce(grads[bundle[0]], **kwargs)
                else:
                    for i, r in zip(bundle, grouped_allreduce([grads[i] for i in bundle], **kwargs)):
                        out[i] = r
            return out

    compiled = tf.function(reduce, reduce_retracing=False)

    def reducer(grads, variables, use_generic_names=False):
        grads = list(grads)
        if sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        if not _optimizer.communicates(process_set):
            return grads
        keys = [variable_key(v) for v in variables]
        bundles = _optimizer.bundles([i for i, g in enumerate(grads) if g is not None], keys, groups)
        if _executing_eagerly():
            return compiled(grads, bundles, use_generic_names)
        return reduce(grads, bundles, use_generic_names)

    return reducer


def _divided(grad, size):
    """grad / size, for a tensor or a tf.IndexedSlices."""
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / float(size), grad.indices, grad.dense_shape)
    return grad / float(size)


def reduce_except_local(reducer, grads, variables, local_refs, scale_local, process_set, use_generic_names=False):
    """The gradients reduced over the set by reducer (gradient_reducer's),
    those of local variables kept (kolo._optimizer.reduce_except_local)."""
    return _optimizer.reduce_except_local(
        lambda shared, positions: reducer(shared, [variables[i] for i in positions], use_generic_names), grads,
        [variable_key(v) for v in variables], local_refs, scale_local, process_set, _divided)
