"""horovod.tensorflow's collectives as TensorFlow ops over kolo's engine
(the kernels of _ops_kernels.cc), each with Horovod's gradient.

Every op is named for the engine: the `name` given, else (in a graph, where
ops run concurrently) a name made from its position in the program (see
_naming), so that the same program builds the same names on every rank;
eager ops run one at a time and an unnamed one uses its kind's name.
`process_set=` restricts an op to a set's ranks; roots are world ranks, as
in Horovod.
"""
import itertools
import re

import tensorflow as tf
from tensorflow.python.framework import ops as _tf_ops

from kolo import _policy, _runtime
from kolo._compression import wire_of
from kolo._policy import Adasum, Average, Max, Min, Product, Sum  # noqa: F401 (re-exported)
from kolo._process_sets import global_process_set, group_of
from kolo.tensorflow import adasum
from kolo.tensorflow._op_library import ops as _ops


def _executing_eagerly():
    return tf.executing_eagerly()


def _normalize_name(name):
    """A tensor's name as TensorFlow accepts it in an op's name."""
    return re.sub("[^a-zA-Z0-9_]", "_", name)


class ProcessSetError(tf.errors.InvalidArgumentError, ValueError):
    """An op given a process set this rank may not submit to (not a member,
    or a set that does not exist): TensorFlow's InvalidArgumentError, as
    Horovod raises, and a ValueError, as kolo's other front ends do."""

    def __init__(self, message):
        tf.errors.InvalidArgumentError.__init__(self, None, None, message)


def _set_id(process_set):
    """The set's id, after checking that this rank may submit to it
    (ProcessSetError naming the set otherwise)."""
    try:
        group_of(process_set)
    except ValueError as e:
        raise ProcessSetError(str(e)) from None
    return 0 if process_set is None else process_set.process_set_id


_graphs_seen = itertools.count()  # graphs given a tag, in the order their first kolo op was built


def _graph_position():
    """"g<graph>.<op>": the default graph's tag and the number of kolo ops
    built in it so far. Every rank runs the same program, so it builds the
    same graphs and their kolo ops in the same order, and the positions
    agree; tensor names do not always (a tf.function's captured tensors are
    named by a per-process counter)."""
    graph = tf.compat.v1.get_default_graph()
    if not hasattr(graph, "_kolo_tag"):
        graph._kolo_tag = next(_graphs_seen)
        graph._kolo_ops = itertools.count()
    return "g%d.%d" % (graph._kolo_tag, next(graph._kolo_ops))


def _naming(name, prefix):
    """(node name, tensor_name attr) for an op. In a graph the node's name
    is the engine's name: the caller's, else prefix and the op's position
    (_graph_position). An eager op has no node name of its own, so a given
    name goes in the attr; an unnamed one is named after its kind, which is
    safe because eager ops run one at a time."""
    if _executing_eagerly():
        return None, name or ""
    return name if name is not None else "%s.%s" % (prefix, _graph_position()), ""


# ---- dtypes and ops -----------------------------------------------------------------

def _engine_forms(tensors, op, collective, prescale_factor, postscale_factor):
    """For each tensor, (the tensor as kolo's kernels reduce it, the
    engine's op, a function turning a result of that form back into the
    tensor's dtype); kolo._policy's refusal of any, raised on this rank
    before any op is built. The kernels reduce the engine's dtypes; the
    policy's others get there here, in TensorFlow ops (which have their
    gradients): int16 and uint16 cast wider, bool cast to uint8 (0 and 1),
    complex numbers as a last dimension of (real, imaginary)."""
    scaled = prescale_factor != 1.0 or postscale_factor != 1.0
    forms = []
    for tensor in tensors:
        tensor = tf.convert_to_tensor(tensor)
        plan = _policy.reduction(tensor.dtype.name, op, collective, scaled)
        if plan.how == _policy.PAIRS:
            pairs = tf.stack([tf.math.real(tensor), tf.math.imag(tensor)], axis=-1)
            forms.append((pairs, plan.engine_op, lambda r: tf.complex(r[..., 0], r[..., 1])))
        elif plan.engine_dtype != tensor.dtype.name:
            forms.append((tf.cast(tensor, plan.engine_dtype), plan.engine_op,
                          lambda r, dtype=tensor.dtype: tf.cast(r, dtype)))
        else:
            forms.append((tensor, plan.engine_op, lambda r: r))
    return forms


def _movable(tensor, what):
    """tensor, after checking its elements have a fixed size (a TypeError otherwise)."""
    tensor = tf.convert_to_tensor(tensor)
    if tensor.dtype in (tf.string, tf.resource, tf.variant):
        raise TypeError("%s: kolo moves tensors of fixed-size elements, not %s" % (what, tensor.dtype.name))
    return tensor


def _wire_attrs(compression, tensor_dtype, op):
    """The ops' wire and error_feedback attributes for `compression`: a
    wire format's Compression class (kolo.tensorflow.Compression.int8, ...)
    applies to float32, float16 and bfloat16 sums and averages."""
    wire, feedback = wire_of(compression)
    if wire > 0 and (tensor_dtype not in (tf.float32, tf.float16, tf.bfloat16) or op not in (Sum, Average)):
        return -1, False
    return wire, feedback


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0, ignore_name_scope=False,
               process_set=global_process_set, compression=None):
    """op over the set's tensors (one dtype and shape on every rank)."""
    _policy.check_op(op, "allreduce")
    if op == Adasum:
        return adasum.allreduce(tensor, name, prescale_factor, postscale_factor, process_set, allgather)
    (engine, engine_op, back), = _engine_forms([tensor], op, "allreduce", prescale_factor, postscale_factor)
    node, attr = _naming(name, "KoloAllreduce")
    wire, feedback = _wire_attrs(compression, engine.dtype, engine_op)
    return back(_ops.kolo_allreduce(engine, reduce_op=engine_op, prescale_factor=prescale_factor,
                                    postscale_factor=postscale_factor, wire=wire, error_feedback=feedback,
                                    ignore_name_scope=ignore_name_scope, process_set_id=_set_id(process_set),
                                    tensor_name=attr, name=node))


@_tf_ops.RegisterGradient("KoloAllreduce")
def _allreduce_grad(op, grad):
    # Horovod's: the gradient goes through the same reduction.
    return _allreduce(grad, op=op.get_attr("reduce_op"), prescale_factor=op.get_attr("prescale_factor"),
                      postscale_factor=op.get_attr("postscale_factor"),
                      ignore_name_scope=op.get_attr("ignore_name_scope"),
                      process_set=_set_of(op.get_attr("process_set_id")))


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set, compression=None):
    """The tensors reduced as one engine operation per dtype (a grouped
    operation takes one dtype; with several, each dtype's tensors form an
    operation named NAME.<dtype>)."""
    _policy.check_op(op, "allreduce")
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    if op == Adasum:
        return [adasum.allreduce(t, None if name is None else "%s.%d" % (name, i), prescale_factor,
                                 postscale_factor, process_set, allgather) for i, t in enumerate(tensors)]
    forms = _engine_forms(tensors, op, "allreduce", prescale_factor, postscale_factor)
    by_dtype = {}
    for i, t in enumerate(tensors):
        by_dtype.setdefault(t.dtype, []).append(i)
    out = [None] * len(tensors)
    for dtype, positions in by_dtype.items():
        part = [forms[i][0] for i in positions]
        engine_op = forms[positions[0]][1]
        part_name = name if name is None or len(by_dtype) == 1 else "%s.%s" % (name, dtype.name)
        node, attr = _naming(part_name, "KoloGroupedAllreduce")
        wire, feedback = _wire_attrs(compression, part[0].dtype, engine_op)
        reduced = _ops.kolo_grouped_allreduce(part, reduce_op=engine_op, prescale_factor=prescale_factor,
                                              postscale_factor=postscale_factor, wire=wire, error_feedback=feedback,
                                              ignore_name_scope=ignore_name_scope,
                                              process_set_id=_set_id(process_set), tensor_name=attr, name=node)
        for i, r in zip(positions, reduced):
            out[i] = forms[i][2](r)
    return out


@_tf_ops.RegisterGradient("KoloGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    return _grouped_allreduce(list(grads), op=op.get_attr("reduce_op"),
                              prescale_factor=op.get_attr("prescale_factor"),
                              postscale_factor=op.get_attr("postscale_factor"),
                              ignore_name_scope=op.get_attr("ignore_name_scope"),
                              process_set=_set_of(op.get_attr("process_set_id")))


# ---- allgather ---------------------------------------------------------------------

def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """The set's tensors concatenated along the first dimension, in rank
    order; the first dimension may differ between ranks."""
    tensor = _movable(tensor, "allgather")
    node, attr = _naming(name, "KoloAllgather")
    return _ops.kolo_allgather(tensor, ignore_name_scope=ignore_name_scope, process_set_id=_set_id(process_set),
                               tensor_name=attr, name=node)


def _gathered_part(grad, x, process_set, ignore_name_scope):
    """This rank's rows of an allgather's output gradient (Horovod's
    gradient: the gradients are averaged first, then cut by the first
    dimensions the ranks gave)."""
    group = group_of(process_set)
    with tf.device("/cpu:0"):
        rows = tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1])
        rows = allgather(rows, ignore_name_scope=ignore_name_scope, process_set=process_set)
    return tf.split(grad, num_or_size_splits=tf.reshape(rows, [group.size]), axis=0)[group.rank]


@_tf_ops.RegisterGradient("KoloAllgather")
def _allgather_grad(op, grad):
    process_set = _set_of(op.get_attr("process_set_id"))
    ignore = op.get_attr("ignore_name_scope")
    grad = _allreduce(grad, op=Average, ignore_name_scope=ignore, process_set=process_set)
    return _gathered_part(grad, op.inputs[0], process_set, ignore)


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=global_process_set):
    """allgather of each tensor, as one op (engine names NAME.0, NAME.1...)."""
    tensors = [_movable(t, "grouped_allgather") for t in tensors]
    if not tensors:
        return []
    node, attr = _naming(name, "KoloGroupedAllgather")
    return _ops.kolo_grouped_allgather(tensors, ignore_name_scope=ignore_name_scope,
                                       process_set_id=_set_id(process_set), tensor_name=attr, name=node)


@_tf_ops.RegisterGradient("KoloGroupedAllgather")
def _grouped_allgather_grad(op, *grads):
    process_set = _set_of(op.get_attr("process_set_id"))
    ignore = op.get_attr("ignore_name_scope")
    grads = _grouped_allreduce(list(grads), op=Average, ignore_name_scope=ignore, process_set=process_set)
    return [_gathered_part(g, x, process_set, ignore) for g, x in zip(grads, op.inputs)]


# ---- broadcast -----------------------------------------------------------------------

def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=global_process_set):
    """root_rank's tensor (root_rank a world rank of the set) on every rank of the set."""
    group = group_of(process_set)
    group.group_rank(root_rank)  # a ValueError naming the root if it is not in the set
    tensor = _movable(tensor, "broadcast")
    node, attr = _naming(name, "KoloBroadcast")
    return _ops.kolo_broadcast(tensor, root_rank=root_rank, ignore_name_scope=ignore_name_scope,
                               process_set_id=_set_id(process_set), tensor_name=attr, name=node)


@_tf_ops.RegisterGradient("KoloBroadcast")
def _broadcast_grad(op, grad):
    # Horovod's: averaged over the set, kept on the root only.
    process_set = _set_of(op.get_attr("process_set_id"))
    grad = _allreduce(grad, op=Average, ignore_name_scope=op.get_attr("ignore_name_scope"),
                      process_set=process_set)
    return grad if _runtime.rank() == op.get_attr("root_rank") else grad * 0


def grouped_broadcast(tensors, root_rank, name=None, ignore_name_scope=False, process_set=global_process_set):
    """broadcast of each tensor (any dtypes), as one op (engine names NAME.0, NAME.1...)."""
    group_of(process_set).group_rank(root_rank)
    tensors = [_movable(t, "grouped_broadcast") for t in tensors]
    if not tensors:
        return []
    node, attr = _naming(name, "KoloGroupedBroadcast")
    return _ops.kolo_grouped_broadcast(tensors, root_rank=root_rank, ignore_name_scope=ignore_name_scope,
                                       process_set_id=_set_id(process_set), tensor_name=attr, name=node)


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """root_rank's values written into the variables (of any kinds and
    dtypes), as one grouped broadcast; returns their new values."""
    variables = list(variables)
    if not variables:
        return []
    values = grouped_broadcast([v.read_value() for v in variables], root_rank, name=name, process_set=process_set)
    assigns = [v.assign(x) for v, x in zip(variables, values)]
    if _executing_eagerly():
        return [v.read_value() for v in variables]
    with tf.control_dependencies(assigns):
        return [tf.identity(v.read_value()) for v in variables]


# ---- alltoall -----------------------------------------------------------------------

def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Sends splits[q] rows of tensor (equal parts if None) to rank q of the
    set; returns the rows received in rank order and, when splits was
    given, how many came from each rank."""
    tensor = _movable(tensor, "alltoall")
    split_tensor = tf.convert_to_tensor(splits) if splits is not None else tf.constant([], dtype=tf.int32)
    if split_tensor.dtype not in (tf.int32, tf.int64):
        raise TypeError("alltoall splits must be int32 or int64, not %s" % split_tensor.dtype.name)
    node, attr = _naming(name, "KoloAlltoall")
    output, received = _ops.kolo_alltoall(tensor, split_tensor, ignore_name_scope=ignore_name_scope,
                                          process_set_id=_set_id(process_set), tensor_name=attr, name=node)
    return (output, received) if splits is not None else output


@_tf_ops.RegisterGradient("KoloAlltoall")
def _alltoall_grad(op, grad, _received_grad):
    # Horovod's: the gradients go back where their rows came from.
    back, _ = alltoall(grad, splits=op.outputs[1], ignore_name_scope=op.get_attr("ignore_name_scope"),
                       process_set=_set_of(op.get_attr("process_set_id")))
    return [back, None]


# ---- reducescatter ----------------------------------------------------------------------

def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False, process_set=global_process_set,
                   prescale_factor=1.0, postscale_factor=1.0):
    """op over the set's tensors, cut along the first dimension: rank r of
    the set gets part r (the first shape[0] % size parts have one more row)."""
    (engine, engine_op, back), = _engine_forms([tensor], op, "reducescatter", prescale_factor, postscale_factor)
    node, attr = _naming(name, "KoloReducescatter")
    return back(_ops.kolo_reducescatter(engine, reduce_op=engine_op, prescale_factor=prescale_factor,
                                        postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                                        process_set_id=_set_id(process_set), tensor_name=attr, name=node))


def _reducescatter_grad_scale(op, grads):
    # Horovod's: an allgather of the gradients, scaled as the forward pass was.
    factor = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if op.get_attr("reduce_op") == Sum:
        factor *= group_of(_set_of(op.get_attr("process_set_id"))).size
    return [g * factor if factor != 1.0 else g for g in grads]


@_tf_ops.RegisterGradient("KoloReducescatter")
def _reducescatter_grad(op, grad):
    grad, = _reducescatter_grad_scale(op, [grad])
    return allgather(grad, ignore_name_scope=op.get_attr("ignore_name_scope"),
                     process_set=_set_of(op.get_attr("process_set_id")))


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False, process_set=global_process_set,
                           prescale_factor=1.0, postscale_factor=1.0):
    _policy.check_op(op, "reducescatter")
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    dtypes = sorted({t.dtype.name for t in tensors})
    if len(dtypes) > 1:
        raise TypeError("grouped_reducescatter: all tensors must have one dtype, got %s" % ", ".join(dtypes))
    forms = _engine_forms(tensors, op, "reducescatter", prescale_factor, postscale_factor)
    node, attr = _naming(name, "KoloGroupedReducescatter")
    reduced = _ops.kolo_grouped_reducescatter([engine for engine, _, _ in forms], reduce_op=forms[0][1],
                                              prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                                              ignore_name_scope=ignore_name_scope,
                                              process_set_id=_set_id(process_set), tensor_name=attr, name=node)
    return [back(r) for r, (_, _, back) in zip(reduced, forms)]


@_tf_ops.RegisterGradient("KoloGroupedReducescatter")
def _grouped_reducescatter_grad(op, *grads):
    process_set = _set_of(op.get_attr("process_set_id"))
    return grouped_allgather(_reducescatter_grad_scale(op, grads),
                             ignore_name_scope=op.get_attr("ignore_name_scope"), process_set=process_set)


# ---- join, barrier, rank and size ops ---------------------------------------------------

def join():
    """This rank is out of data: until every rank has joined, it takes part
    in the others' allreduces with zeros. Returns the last rank to join."""
    return _ops.kolo_join()


def barrier(process_set=global_process_set, name=None):
    """Returns once every rank of the set has reached it."""
    node, attr = _naming(name, "KoloBarrier")
    return _ops.kolo_barrier(process_set_id=_set_id(process_set), tensor_name=attr, name=node)


def size_op(process_set_id=0, name=None):
    """The set's size, read when the graph runs (not when it is built)."""
    return _ops.kolo_size(process_set_id=process_set_id, name=name)


def local_size_op(name=None):
    return _ops.kolo_local_size(name=name)


def rank_op(name=None):
    return _ops.kolo_rank(name=name)


def local_rank_op(name=None):
    return _ops.kolo_local_rank(name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 if this rank is in the set, 0 if not; -1 before init, -2 for a set that does not exist."""
    return _ops.kolo_process_set_included(process_set_id=process_set_id, name=name)


for _name in ("KoloJoin", "KoloBarrier", "KoloSize", "KoloRank", "KoloLocalSize", "KoloLocalRank",
              "KoloProcessSetIncluded"):
    _tf_ops.NotDifferentiable(_name)


def _set_of(process_set_id):
    """The ProcessSet with this id (the gradients are built with the id the op kept)."""
    if process_set_id == 0:
        return global_process_set
    from kolo._process_sets import registered_sets
    for ps in registered_sets():
        if ps.process_set_id == process_set_id:
            return ps
    raise ValueError("process set %d no longer exists" % process_set_id)
