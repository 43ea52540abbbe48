"""DistributedOptimizer: gradients averaged across ranks during backprop.

As horovod.torch's: a hook on each parameter's gradient accumulator starts
that gradient's allreduce (named after the parameter) the moment backprop
has produced it, so communication overlaps the rest of the backward pass
and the engine fuses what is ready together; step() waits for them all and
then runs the wrapped optimizer's own step. Sparse gradients (nn.Embedding
with sparse=True) are allgathered as Horovod does, or densified with
sparse_as_dense=True. With op=Adasum the optimizer is Horovod's delta
optimizer: each parameter's local step is taken first and the steps are
combined with Adasum.
"""
import warnings
import weakref
from contextlib import contextmanager

import torch

from kolo import _optimizer, _runtime
from kolo._policy import Adasum, Average
from kolo._process_sets import global_process_set
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import allreduce_async_, sparse_allreduce_async, synchronize


def _checked_names(param_groups, named_parameters):
    """{parameter: engine name}: named_parameters' names, or for none
    "allreduce.noname.<group>.<index>", alike on every rank."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [("allreduce.noname.%d.%d" % (i, j), p)
                            for i, group in enumerate(param_groups) for j, p in enumerate(group["params"])]
    if any(not isinstance(entry, tuple) or len(entry) != 2 for entry in named_parameters):
        raise ValueError("named_parameters should be a sequence of (name, parameter) tuples, "
                         "usually produced by model.named_parameters()")
    names = [name for name, _ in named_parameters]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError("parameter names in named_parameters must be unique; repeated: %s" % ", ".join(duplicates))
    named_ids = {id(p) for _, p in named_parameters}
    unnamed = [p for group in param_groups for p in group["params"] if id(p) not in named_ids]
    if unnamed:
        raise ValueError("named_parameters was given, but %d of the optimizer's parameters are not in it"
                         % len(unnamed))
    return {p: "allreduce." + name for name, p in named_parameters}


def _counting_hook(self, p):
    """The hook on p's gradient accumulator (both optimizers): counts the
    backward passes and starts p's allreduce at the last one."""
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


# Every DistributedOptimizer alive: when kolo shuts down (an elastic reset
# among others), the allreduces they wait for are gone with the
# communicator, and a step that failed half-way left some behind.
_optimizers = weakref.WeakSet()


def _forget_pending_allreduces():
    for optimizer in list(_optimizers):
        optimizer._handles.clear()
        optimizer._allreduce_delay = {p: optimizer.backward_passes_per_step for p in optimizer._allreduce_delay}


_runtime._shutdown_hooks.append(_forget_pending_allreduces)


def _checked_zero_grad(self, *args, **kwargs):
    if self._handles:
        raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                             "optimizer.step() or optimizer.synchronize(); the allreduces still in flight "
                             "would write into the cleared gradients")
    return super(self.__class__, self).zero_grad(*args, **kwargs)


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0, sparse_as_dense=False, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._parameter_names = _checked_names(self.param_groups, named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for p in self._parameter_names}
        self.op = op
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self.gradient_predivide_factor = gradient_predivide_factor
        self._handles = {}  # parameter -> (handle or None, compression context)
        _optimizers.add(self)
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        if _optimizer.communicates(process_set):
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

    _make_hook = _counting_hook

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # This rank's graph did not reach p, but other ranks' may have:
            # take part with a zero gradient so their allreduce completes.
            p.grad = torch.zeros_like(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(tensor, name=self._parameter_names[p], op=self.op,
                                              process_set=self.process_set), None
            tensor = tensor.to_dense()
        prescale, postscale = _optimizer.scale_factors(self.op, self.gradient_predivide_factor)
        compressed, ctx = self._compression.compress(tensor)
        handle = allreduce_async_(compressed, name=self._parameter_names[p], op=self.op,
                                  prescale_factor=prescale, postscale_factor=postscale,
                                  process_set=self.process_set, compression=self._compression)
        return handle, ctx

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hooks
        did not fire) and writes the averaged gradients into p.grad."""
        if self.process_set.included() is False:
            self._synchronized = True
            return
        try:
            for p in self._requires_update - set(self._handles):
                self._handles[p] = self._allreduce_grad_async(p)
            for p, (handle, ctx) in list(self._handles.items()):
                if handle is None:
                    self._handles[p] = self._allreduce_grad_async(p)
            for p, (handle, ctx) in self._handles.items():
                # A sparse gradient's handle is a function returning the gathered sparse tensor.
                output = handle() if callable(handle) else synchronize(handle)
                self._allreduce_delay[p] = self.backward_passes_per_step
                if output.is_sparse:
                    p.grad = output
                    continue
                result = self._compression.decompress(output, ctx)
                if p.grad.is_sparse:
                    p.grad = result.to_sparse()  # sparse_as_dense: densified for the allreduce only
                elif result is not p.grad:
                    p.grad.copy_(result)
        except BaseException:
            # A failed step (a lost peer) leaves nothing behind: an elastic
            # job resets and runs the step again from its last commit.
            self._allreduce_delay = {p: self.backward_passes_per_step for p in self._allreduce_delay}
            raise
        finally:
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

    zero_grad = _checked_zero_grad


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    """Horovod's delta optimizer for Adasum: when a parameter's gradient is
    ready, its value is saved and the wrapped optimizer steps that parameter
    alone; the parameter then holds this rank's step (new - saved), whose
    Adasum across ranks starts; step() adds the combined step to the saved
    value."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._parameter_names = _checked_names(self.param_groups, named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for p in self._parameter_names}
        self.process_set = process_set
        self._handles = {}
        _optimizers.add(self)
        self._grad_accs = []
        self._requires_update = set()
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False) for p in self._parameter_names}
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
                    self._requires_update.add(p)
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        start = self._starting_models[p]
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is v for v in group["params"]) else []
        try:
            start.data.copy_(p)
            super(self.__class__, self).step()
        finally:
            for params, group in zip(stashed, self.param_groups):
                group["params"] = params
        p.data.sub_(start)  # this rank's step for p
        compressed, ctx = self._compression.compress(p.data)
        handle = allreduce_async_(compressed, name=self._parameter_names[p], op=Adasum,
                                  process_set=self.process_set)
        return handle, ctx

    _make_hook = _counting_hook

    def synchronize(self):
        pass

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum optimizer.")

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                handle, ctx = self._allreduce_grad_async(p)
            delta = self._compression.decompress(synchronize(handle), ctx)
            start = self._starting_models[p]
            start.data.add_(delta.data)
            p.data.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    zero_grad = _checked_zero_grad


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=global_process_set):
    """Wraps optimizer so step() applies gradients averaged (op) over the
    ranks of process_set. named_parameters (model.named_parameters()) names
    each allreduce; backward_passes_per_step > 1 accumulates that many local
    backward passes before communicating; gradient_predivide_factor splits
    the averaging into a division before and after the sum; sparse_as_dense
    allreduces sparse gradients as dense ones. op=Adasum combines the ranks'
    steps with Adasum (Horovod's delta optimizer). num_groups and groups are
    checked as Horovod checks them, then left to kolo's engine, which fuses
    whatever gradients are ready, up to KOLO_FUSION_THRESHOLD, on its own."""
    _optimizer.check_arguments(op, gradient_predivide_factor, backward_passes_per_step)
    _optimizer.checked_groups(groups, num_groups, "torch.Tensor", lambda p: isinstance(p, torch.Tensor))
    if op == Adasum:
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedAdasumOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, process_set)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, sparse_as_dense, process_set)
