"""What Horovod's DistributedOptimizer (and TensorFlow's
DistributedGradientTape) decides the same way in every framework: which
arguments it refuses and with which message, how the op and
gradient_predivide_factor become the allreduce's scale factors, whether a
rank communicates at all, how gradients are bundled into grouped
allreduces, and how worker-local variables are left out of the reduction.

Framework-free: kolo.torch, kolo.tensorflow and kolo.keras pass what is
theirs (a gradient's division, a variable's hashable key, the function
that reduces a list of gradients) and keep only their own plumbing:
hooks on torch parameters, TensorFlow's graphs and tf.function, Keras's
optimizer subclass.
"""
from kolo._elastic import under_driver
from kolo._policy import Adasum, Average
from kolo._process_sets import group_of


def check_arguments(op, gradient_predivide_factor, backward_passes_per_step, average_aggregated_gradients=False):
    """Raises Horovod's ValueError for arguments that do not go together."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum and average_aggregated_gradients:
        raise ValueError("Adasum does not support average_aggregated_gradients == True")
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be at least 1, got %r" % (backward_passes_per_step,))


def checked_groups(groups, num_groups, variable_type, is_variable=None):
    """groups as the optimizer uses it (num_groups is Horovod's older name
    for an integer groups): None, a number of grouped allreduces, or lists
    of variables, each reduced as one. is_variable, where given, checks
    the lists' members (Horovod checks torch's, naming variable_type)."""
    if num_groups and groups is None:
        groups = num_groups
    if groups is None:
        return None
    if not (isinstance(groups, list) or (isinstance(groups, int) and groups > 0)):
        raise ValueError("groups should be a non-negative integer or a list of list of %s." % variable_type)
    if isinstance(groups, list):
        seen = set()
        for variable in (v for group in groups for v in group):
            if is_variable is not None and not is_variable(variable):
                raise ValueError("groups must consist of %s." % variable_type)
            if id(variable) in seen:
                raise ValueError("A parameter can only appear once in groups.")
            seen.add(id(variable))
    return groups


def scale_factors(op, gradient_predivide_factor):
    """(prescale, postscale) of a gradient's allreduce: Average's division
    by the size split as Horovod splits it, 1/f before the sum and f after
    it (the engine divides by the size after both)."""
    if op == Average:
        return 1.0 / gradient_predivide_factor, gradient_predivide_factor
    return 1.0, 1.0


def communicates(process_set):
    """Whether this rank's gradients go to an allreduce. Horovod's rule: a
    rank outside the set, or a set of one rank, keeps its own; but not in
    an elastic job, which may grow (a worker that joins allreduces from its
    first step, and so must every other)."""
    if process_set.included() is False:
        return False
    return group_of(process_set).size > 1 or under_driver()


def bundles(present, keys, groups):
    """The grouped allreduces that reduce the gradients at positions
    `present` (keys[i]: position i's variable's key), each a tuple of
    positions: one each with no groups; `groups` runs of near-equal length
    for a number; for lists of variables (as keys), one per list with the
    rest alone."""
    if groups is None:
        return tuple((i,) for i in present)
    if isinstance(groups, int):
        size, extra = divmod(len(present), groups)
        runs, start = [], 0
        for g in range(groups):
            end = start + size + (1 if g < extra else 0)
            if end > start:
                runs.append(tuple(present[start:end]))
            start = end
        return tuple(runs)
    position = {keys[i]: i for i in present}
    grouped = []
    for group in groups:
        bundle = tuple(position.pop(key) for key in group if key in position)
        if bundle:
            grouped.append(bundle)
    return tuple(grouped) + tuple((i,) for i in present if keys[i] in position)


def reduce_except_local(reduce, grads, keys, local_keys, scale_local, process_set, divide):
    """grads (None where a variable has none) with those of shared
    variables replaced by reduce(their gradients, their positions), and
    those of worker-local ones (keys in local_keys) kept: divided by the
    set's size with scale_local (Horovod's scale_local_gradients), as if
    averaged with nothing. divide(gradient, size) divides one gradient."""
    shared = [i for i, key in enumerate(keys) if key not in local_keys]
    out = list(grads)
    for i, g in zip(shared, reduce([grads[i] for i in shared], shared)):
        out[i] = g
    if scale_local and local_keys:
        size = group_of(process_set).size
        out = [divide(g, size) if key in local_keys and g is not None else g for g, key in zip(out, keys)]
    return out
