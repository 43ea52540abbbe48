"""horovod.keras's callbacks, written once for both Kerases: each class here
is the callback's logic, mixed by kolo/keras/callbacks.py (Keras 3) and
kolo/_tf_keras/callbacks.py (Keras 2, tf_keras) into that Keras's
Callback, with a `flavour` class attribute for what the two do
differently:

  optimizer_variables(optimizer, model)  the optimizer's variables, its
      slots made first if they are not yet (both Kerases make them at the
      first step, which would otherwise run on unsynchronized weights)
  to_numpy(value)     a variable's or tensor's value as a NumPy array
  get_lr(optimizer) / set_lr(optimizer, value)
  momentum_variable(optimizer)  the momentum, where it is a variable (else None)

The elastic callbacks (CommitState, UpdateBatchState, UpdateEpochState)
need no flavour."""
import numpy as np

import kolo
from kolo._process_sets import global_process_set, group_of


def broadcast_values(variables, root_rank, process_set, to_numpy):
    """root_rank's values assigned to the variables, every broadcast in
    flight at once (as NumPy arrays through kolo's collectives)."""
    variables = list(variables)
    arrays = [np.array(to_numpy(v), order="C") for v in variables]  # 0-d stays 0-d
    base = group_of(process_set).operation_name("broadcast_variables", None).decode()
    handles = [kolo.broadcast_async_(a, root_rank, name="%s.%d" % (base, i), process_set=process_set)
               for i, a in enumerate(arrays)]
    for v, h in zip(variables, handles):
        v.assign(h.synchronize())


class BroadcastGlobalVariables:
    """Broadcasts root_rank's model and optimizer variables to every rank
    when training begins, so every rank starts from the same weights and
    optimizer state; or, for a model whose weights do not exist yet then (a
    Keras 2 model without an input shape), after the first batch."""

    def __init__(self, root_rank, device="", local_variables=None, process_set=global_process_set):
        super().__init__()
        del device
        self.root_rank = root_rank
        self.process_set = process_set
        self.broadcast_done = False
        self._local_vars = set()
        for var in local_variables or []:
            self.register_local_var(var)

    def register_local_var(self, var):
        """A worker-local variable, which is not broadcast."""
        self._local_vars.add(id(var))

    def on_train_begin(self, logs=None):
        if getattr(self.model, "built", True):
            self._broadcast()

    def on_train_batch_end(self, batch, logs=None):
        # A Keras 2 model without an input shape makes its weights in its
        # first step: they are rank 0's from the second on (as in Horovod).
        self._broadcast()

    def _broadcast(self):
        if self.broadcast_done:
            return
        variables = [v for v in self.model.variables if id(v) not in self._local_vars]
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None:
            variables += self.flavour.optimizer_variables(optimizer, self.model)
        broadcast_values(variables, self.root_rank, self.process_set, self.flavour.to_numpy)
        self.broadcast_done = True


class MetricAverage:
    """Averages every metric over the ranks at the end of each epoch, in the
    logs the callbacks after it (and the History) see."""

    def __init__(self, device="", process_set=global_process_set):
        super().__init__()
        del device
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        names = sorted(logs)  # the same order on every rank
        values = kolo.allreduce(np.asarray([float(logs[n]) for n in names], dtype=np.float64), op=kolo.Average,
                                name="MetricAverageCallback.%d" % epoch, process_set=self.process_set)
        for n, v in zip(names, values):
            logs[n] = float(v)


class LearningRateSchedule:
    """Sets the learning rate to initial_lr * multiplier(epoch) from
    start_epoch to end_epoch: at each epoch's first batch (staircase), or at
    every batch with a fractional epoch. multiplier is a function of the
    epoch, or a number m for m ** (epoch - start_epoch). With
    momentum_correction, an optimizer whose momentum is a variable has it
    scaled by new_lr / old_lr for that batch (Goyal et al.); an optimizer
    that keeps its momentum as a number fixed when the step is traced (Keras
    3's, tf_keras's new ones) has it left alone."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier ** (epoch - start_epoch))
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self._restore_momentum = None

    def _adjust(self, epoch):
        optimizer = self.model.optimizer
        old_lr = self.flavour.get_lr(optimizer)
        new_lr = self.initial_lr * self.multiplier(epoch)
        self.flavour.set_lr(optimizer, new_lr)
        momentum = self.flavour.momentum_variable(optimizer)
        if momentum is not None and self.momentum_correction and old_lr:
            self._restore_momentum = float(self.flavour.to_numpy(momentum))
            momentum.assign(self._restore_momentum * new_lr / old_lr)

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            steps = self.params.get("steps")
            if not steps:
                raise ValueError("Could not autodetect the number of steps per epoch. Please specify the "
                                 "steps_per_epoch parameter to the %s()" % type(self).__name__)
            self.steps_per_epoch = steps

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.current_epoch < self.start_epoch or (self.end_epoch is not None and
                                                     self.current_epoch >= self.end_epoch):
            return
        if self.staircase and batch == 0:
            self._adjust(self.current_epoch)
        elif not self.staircase:
            self._adjust(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_train_batch_end(self, batch, logs=None):
        if self._restore_momentum is not None:
            self.flavour.momentum_variable(self.model.optimizer).assign(self._restore_momentum)
            self._restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = self.flavour.get_lr(self.model.optimizer)


class LearningRateWarmup:
    """Raises the learning rate from initial_lr / size to initial_lr over
    warmup_epochs, batch by batch (Goyal et al.'s gradual warmup, as
    Horovod's); mixed in before a LearningRateSchedule callback."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            epoch += 1.0 / self.steps_per_epoch  # round numbers at each epoch's end
            size = kolo.size()
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs, staircase=False,
                         momentum_correction=momentum_correction, steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and kolo.rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g." % (
                epoch + 1, self.flavour.get_lr(self.model.optimizer)))


class BestModelCheckpoint:
    """A ModelCheckpoint (mixed in before that Keras's) that keeps only the
    best model so far (by monitor), written by rank 0 alone."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch"):
        super().__init__(filepath=filepath, monitor=monitor, verbose=verbose, save_best_only=True,
                         save_weights_only=False, mode=mode, save_freq=save_freq)

    def _save_model(self, *args, **kwargs):
        if kolo.rank() == 0:
            return super()._save_model(*args, **kwargs)
        return None


# -- elastic training (hvd.elastic's callbacks) ------------------------------
class CommitState:
    """Commits the state every batches_per_commit batches and at the end of
    every epoch."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.commit()

    def commit(self):
        self.state.commit()


class UpdateBatchState:
    """Keeps state.batch at the batch just done (0 at each epoch's end);
    with a steps_per_epoch, the first epoch after a reset runs only the
    batches it had left."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.steps_per_epoch = None

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params.get("steps")
            self.params["steps"] = self.steps_per_epoch - self.state.batch

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochState:
    """Keeps state.epoch at the epoch to run next (fit counts its epochs
    from 0 each time it is called again after a reset)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = self.initial_epoch + epoch + 1
