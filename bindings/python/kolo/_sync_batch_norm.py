"""The statistics of a synchronized batch normalization, for any array
library: every rank's batch taken together as one.

Each rank gives, per channel, its element count, sum and sum of squares;
one allreduce of the three stacked adds them over the set, and the mean
and (biased) variance come from the totals, so ranks with different batch
sizes weigh by their element counts. kolo.torch's SyncBatchNorm and the
Keras layer (kolo._keras) both compute them here; each keeps its own
backward (torch's explicit, Keras's through a differentiable sum).
"""


class Ops:
    """What the statistics need from an array library."""

    @staticmethod
    def stack(arrays):
        """The arrays (one shape) stacked along a new first axis."""
        raise NotImplementedError

    @staticmethod
    def at_least(x, floor):
        """x elementwise, raised to floor where it is below."""
        raise NotImplementedError


def global_moments(xp, count, total, squares, allreduce_sum):
    """(count, mean, variance) per channel over the set, from this rank's
    per-channel count, sum and sum of squares; allreduce_sum(x) sums x over
    the set. The variance is E[x^2] - mean^2, kept from going below 0 by
    rounding; a channel with no elements (all masked) has mean and variance
    0, not a division by 0."""
    summed = allreduce_sum(xp.stack([count, total, squares]))
    count, total, squares = summed[0], summed[1], summed[2]
    divisor = xp.at_least(count, 1.0)
    mean = total / divisor
    return count, mean, xp.at_least(squares / divisor - mean * mean, 0.0)
