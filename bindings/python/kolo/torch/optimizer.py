"""DistributedOptimizer: gradients averaged across ranks during backprop.

As horovod.torch's: a hook on each parameter's gradient accumulator starts
that gradient's allreduce (named after the parameter) the moment backprop
has produced it, so communication overlaps the rest of the backward pass
and the engine fuses what is ready together; step() waits for them all and
then runs the wrapped optimizer's own step.
"""
import warnings
from contextlib import contextmanager

import torch

from kolo import _runtime
from kolo._collectives import Adasum, Average
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import allreduce_async_, synchronize


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%d.%d" % (i, j), p)
                                for i, group in enumerate(self.param_groups) for j, p in enumerate(group["params"])]
        if any(not isinstance(entry, tuple) or len(entry) != 2 for entry in named_parameters):
            raise ValueError("named_parameters should be a sequence of (name, parameter) tuples, "
                             "usually produced by model.named_parameters()")
        names = [name for name, _ in named_parameters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError("parameter names in named_parameters must be unique; repeated: %s"
                             % ", ".join(duplicates))
        named_ids = {id(p) for _, p in named_parameters}
        unnamed = [p for group in self.param_groups for p in group["params"] if id(p) not in named_ids]
        if unnamed:
            raise ValueError("named_parameters was given, but %d of the optimizer's parameters are not in it"
                             % len(unnamed))
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1, got %r" % (backward_passes_per_step,))

        self._parameter_names = {p: "allreduce." + name for name, p in named_parameters}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for _, p in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self._handles = {}  # parameter -> (handle or None, compression context)
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        if _runtime.size() > 1:
            self._register_hooks()

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The AccumulateGrad node of p: its hook runs once p.grad holds this pass's gradient.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _make_hook(self, p):
        def hook(*_):
            if self._handles.get(p, (None, None))[0] is not None and self._allreduce_delay[p] <= 0:
                raise AssertionError("Gradients were computed more than backward_passes_per_step times before "
                                     "call to step(). Increase backward_passes_per_step to accumulate "
                                     "gradients locally.")
            self._allreduce_delay[p] -= 1
            handle, ctx = None, None
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # This rank's graph did not reach p, but other ranks' may have:
            # take part with a zero gradient so their allreduce completes.
            p.grad = torch.zeros_like(p)
        if self.op == Average:
            prescale, postscale = 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        else:
            prescale = postscale = 1.0
        compressed, ctx = self._compression.compress(p.grad)
        handle = allreduce_async_(compressed, name=self._parameter_names[p], op=self.op,
                                  prescale_factor=prescale, postscale_factor=postscale)
        return handle, ctx

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hooks
        did not fire) and writes the averaged gradients into p.grad."""
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in self._handles.items():
            output = synchronize(handle)
            self._allreduce_delay[p] = self.backward_passes_per_step
            result = self._compression.decompress(output, ctx)
            if result is not p.grad:
                p.grad.copy_(result)
        self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """For step() after an explicit synchronize() (e.g. to clip the
        averaged gradients in between)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() after "
                              "optimizer.synchronize(): the gradients are averaged twice")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(); the allreduces still in flight "
                                 "would write into the cleared gradients")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False):
    """Wraps optimizer so step() applies gradients averaged (op) over all
    ranks. named_parameters (model.named_parameters()) names each
    allreduce; backward_passes_per_step > 1 accumulates that many local
    backward passes before communicating; gradient_predivide_factor splits
    the averaging into a division before and after the sum. num_groups and
    groups are accepted for compatibility: kolo's engine fuses whatever
    gradients are ready, up to KOLO_FUSION_THRESHOLD, on its own."""
    del num_groups, groups, sparse_as_dense
    if op == Adasum:
        raise NotImplementedError("kolo does not implement Adasum; use op=Average or op=Sum")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor is only supported with op=Average")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor)
