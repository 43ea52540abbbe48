"""Broadcasting variables and Python objects, as horovod.tensorflow's."""
import tensorflow as tf

from kolo import _objects
from kolo._process_sets import global_process_set
from kolo.tensorflow.mpi_ops import _executing_eagerly, broadcast_, grouped_broadcast


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """root_rank's values of the variables, assigned on every rank of the
    set: one grouped broadcast (eager: done on return; graph: returns the op
    that does it)."""
    variables = list(variables)
    if inplace:
        return broadcast_(variables, root_rank, process_set=process_set)
    if not variables:
        return tf.no_op() if not _executing_eagerly() else None
    values = grouped_broadcast([tf.convert_to_tensor(v) for v in variables], root_rank, process_set=process_set)
    assigns = [v.assign(x) for v, x in zip(variables, values)]
    return None if _executing_eagerly() else tf.group(*assigns)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's picklable object on every rank of the set. Runs at once,
    in eager and in graph code alike (session is accepted for Horovod's
    signature and not needed)."""
    del session
    return _objects.broadcast_object(obj, root_rank, name=name, process_set=process_set)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts its argument from root_rank."""
    del session
    return lambda obj: broadcast_object(obj, root_rank, name=name, process_set=process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's picklable object, as a list in rank order."""
    del session
    return _objects.allgather_object(obj, name=name, process_set=process_set)

