"""horovod.keras's callbacks for Keras 3 (any backend kolo.keras runs on)."""
import keras

import kolo
from kolo._process_sets import global_process_set
from kolo.keras import _backend


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Broadcasts root_rank's model and optimizer variables to every rank
    when training begins, so every rank starts from the same weights and
    optimizer state. The optimizer is built first if it is not yet (Keras
    3 makes its slots at the first step, which would otherwise run on
    unsynchronized weights)."""

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
        if self.broadcast_done:
            return
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        variables = [v for v in self.model.variables if id(v) not in self._local_vars]
        if optimizer is not None:
            variables += list(optimizer.variables)
        _backend.broadcast_values(variables, self.root_rank, self.process_set)
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
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
        values = _backend.allreduce_values([float(logs[n]) for n in names], kolo.Average, self.process_set,
                                           name="MetricAverageCallback.%d" % epoch)
        for n, v in zip(names, values):
            logs[n] = float(v)


def _get_lr(optimizer):
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def _set_lr(optimizer, value):
    optimizer.learning_rate = value


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) from
    start_epoch to end_epoch: at each epoch's first batch (staircase), or at
    every batch with a fractional epoch. multiplier is a function of the
    epoch, or a number m for m ** (epoch - start_epoch). With
    momentum_correction, an optimizer whose momentum is a variable has it
    scaled by new_lr / old_lr for that batch (Goyal et al.); Keras 3's
    built-in optimizers keep momentum as a number fixed when the step is
    traced, so there it is left alone."""

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

    def _momentum_variable(self):
        momentum = getattr(self.model.optimizer, "momentum", None)
        return momentum if isinstance(momentum, keras.Variable) else None

    def _adjust(self, epoch):
        optimizer = self.model.optimizer
        old_lr = _get_lr(optimizer)
        new_lr = self.initial_lr * self.multiplier(epoch)
        _set_lr(optimizer, new_lr)
        momentum = self._momentum_variable()
        if momentum is not None and self.momentum_correction and old_lr:
            self._restore_momentum = float(keras.ops.convert_to_numpy(momentum))
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
            self._momentum_variable().assign(self._restore_momentum)
            self._restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get_lr(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate from initial_lr / size to initial_lr over
    warmup_epochs, batch by batch (Goyal et al.'s gradual warmup, as
    Horovod's)."""

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
            print("\nEpoch %d: finished gradual learning rate warmup to %g." % (epoch + 1,
                                                                                  _get_lr(self.model.optimizer)))


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """A ModelCheckpoint that keeps only the best model so far (by monitor),
    written by rank 0 alone."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch"):
        super().__init__(filepath=filepath, monitor=monitor, verbose=verbose, save_best_only=True,
                         save_weights_only=False, mode=mode, save_freq=save_freq)

    def _save_model(self, *args, **kwargs):
        if kolo.rank() == 0:
            return super()._save_model(*args, **kwargs)
        return None
