"""SyncBatchNorm: batch normalization over the whole batch of every rank
(of a process set), as horovod.torch's, for CPU and CUDA tensors.

In training, each rank sums its input per channel (count, sum, sum of
squares, in float64) and one allreduce makes them global
(kolo._sync_batch_norm): every rank then normalizes with the mean and
variance of the combined batch, and
the running statistics advance as one BatchNorm over that batch would
(unbiased variance). Backward allreduces the two per-channel sums the input
gradient needs; the weight and bias gradients stay local, for the
DistributedOptimizer to average like any other. In eval mode (with running
statistics) it is a plain BatchNorm.
"""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from kolo import _sync_batch_norm
from kolo._policy import Sum
from kolo._process_sets import global_process_set, group_of
from kolo.torch.mpi_ops import grouped_allreduce


def _channels_last(x):
    """x (N, C, ...) as (C, N * ...)."""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def _per_channel(t, x):
    """A (C,) tensor shaped to broadcast against x (N, C, ...)."""
    return t.view((1, -1) + (1,) * (x.dim() - 2))


class _TorchOps(_sync_batch_norm.Ops):
    stack = staticmethod(torch.stack)

    @staticmethod
    def at_least(x, floor):
        return x.clamp(min=floor)


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, process_set):
        x = _channels_last(input).to(torch.float64)
        count, mean, var = _sync_batch_norm.global_moments(
            _TorchOps, torch.full((x.shape[0],), float(x.shape[1]), dtype=torch.float64), x.sum(dim=1),
            (x * x).sum(dim=1), lambda stacked: grouped_allreduce([stacked], op=Sum, process_set=process_set)[0])
        n = count[0].item()
        if n <= 1:
            raise ValueError("SyncBatchNorm expects more than 1 value per channel in training, got %d" % n)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
                running_var.mul_(1 - momentum).add_(momentum * (var * n / (n - 1)).to(running_var.dtype))
        invstd = (var + eps).rsqrt()
        mean, invstd = mean.to(input.dtype), invstd.to(input.dtype)
        xhat = (input - _per_channel(mean, input)) * _per_channel(invstd, input)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.count = n
        ctx.process_set = process_set
        out = xhat
        if weight is not None:
            out = out * _per_channel(weight, input) + _per_channel(bias, input)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        xhat, weight, invstd = ctx.saved_tensors
        dy = _channels_last(grad_output)
        xh = _channels_last(xhat)
        grad_weight = (dy * xh).sum(dim=1) if weight is not None else None
        grad_bias = dy.sum(dim=1) if weight is not None else None
        grad_input = None
        if ctx.needs_input_grad[0]:
            sums = torch.stack([dy.sum(dim=1), (dy * xh).sum(dim=1)]).to(torch.float64)
            sum_dy, sum_dy_xhat = grouped_allreduce([sums], op=Sum, process_set=ctx.process_set)[0]
            scale = invstd if weight is None else invstd * weight
            mean_dy = (sum_dy / ctx.count).to(grad_output.dtype)
            mean_dy_xhat = (sum_dy_xhat / ctx.count).to(grad_output.dtype)
            grad_input = _per_channel(scale, grad_output) * (
                grad_output - _per_channel(mean_dy, grad_output) - xhat * _per_channel(mean_dy_xhat, grad_output))
        return grad_input, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose statistics span every rank's batch (see the module
    doc). Arguments as torch.nn.BatchNorm*d's, plus process_set."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked = self.num_batches_tracked + 1
        if not self.training and self.track_running_stats:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, False,
                                self.momentum or 0.0, self.eps)
        if group_of(self.process_set).size == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, True,
                                self.momentum or 0.0, self.eps)
        momentum = self.momentum
        if momentum is None:  # a cumulative moving average, as BatchNorm's
            momentum = 1.0 / float(self.num_batches_tracked)
        return _SyncBatchNorm.apply(input, self.weight, self.bias, self.running_mean, self.running_var, self.eps,
                                    momentum, self.process_set)
