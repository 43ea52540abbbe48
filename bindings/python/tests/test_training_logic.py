"""What kolo.torch, kolo.tensorflow and kolo.keras decide through one
framework-free module each, checked without a job: DistributedOptimizer's
arguments, scale factors and grouped allreduces (kolo._optimizer), and
synchronized batch normalization's statistics (kolo._sync_batch_norm)
against NumPy's over the ranks' batches put together."""
import numpy as np
import pytest

from kolo import _optimizer, _sync_batch_norm
from kolo._policy import Adasum, Average, Sum


@pytest.mark.parametrize("op, factor, passes, average_aggregated, message", [
    (Sum, 2.0, 1, False, "gradient_predivide_factor not supported with op != Average"),
    (Adasum, 1.0, 1, True, "Adasum does not support average_aggregated_gradients == True"),
    (Average, 1.0, 0, False, "backward_passes_per_step must be at least 1, got 0"),
])
def test_arguments_that_do_not_go_together_are_refused(op, factor, passes, average_aggregated, message):
    with pytest.raises(ValueError, match=message):
        _optimizer.check_arguments(op, factor, passes, average_aggregated)


def test_groups_take_num_groups_and_refuse_what_is_not_a_grouping():
    assert _optimizer.checked_groups(None, 3, "tf.Variable") == 3
    assert _optimizer.checked_groups(None, 0, "tf.Variable") is None
    with pytest.raises(ValueError, match="list of list of torch.Tensor"):
        _optimizer.checked_groups(-1, 0, "torch.Tensor")
    a, b = object(), object()
    with pytest.raises(ValueError, match="only appear once"):
        _optimizer.checked_groups([[a, b], [a]], 0, "tf.Variable")
    with pytest.raises(ValueError, match="groups must consist of torch.Tensor"):
        _optimizer.checked_groups([[a]], 0, "torch.Tensor", is_variable=lambda v: False)


def test_average_splits_the_predivide_factor_around_the_sum():
    assert _optimizer.scale_factors(Average, 4.0) == (0.25, 4.0)
    assert _optimizer.scale_factors(Sum, 1.0) == (1.0, 1.0)


def test_bundles():
    present = [0, 1, 3, 4, 5]  # position 2 has no gradient
    assert _optimizer.bundles(present, "abcdef", None) == ((0,), (1,), (3,), (4,), (5,))
    assert _optimizer.bundles(present, "abcdef", 2) == ((0, 1, 3), (4, 5))
    assert _optimizer.bundles(present, "abcdef", 9) == ((0,), (1,), (3,), (4,), (5,))
    # Lists of variables: one bundle each (absent ones left out), the rest alone.
    assert _optimizer.bundles(present, "abcdef", [["e", "a", "c"], ["c"]]) == ((4, 0), (1,), (3,), (5,))


class _NumPyOps(_sync_batch_norm.Ops):
    stack = staticmethod(np.stack)
    at_least = staticmethod(np.maximum)


def test_batch_norm_statistics_are_those_of_every_ranks_batch_together():
    rng = np.random.default_rng(0)
    batches = [rng.normal(size=(5, 3)), rng.normal(3.0, 2.0, size=(11, 3))]  # unequal batch sizes

    def local(x):
        return np.stack([np.full(3, float(len(x))), x.sum(axis=0), (x * x).sum(axis=0)])

    # Rank 0's view: the allreduce adds rank 1's stacked statistics to its own.
    count, mean, variance = _sync_batch_norm.global_moments(
        _NumPyOps, *local(batches[0]), allreduce_sum=lambda stacked: stacked + local(batches[1]))
    together = np.concatenate(batches)
    assert np.array_equal(count, np.full(3, 16.0))
    assert np.allclose(mean, together.mean(axis=0))
    assert np.allclose(variance, together.var(axis=0))
