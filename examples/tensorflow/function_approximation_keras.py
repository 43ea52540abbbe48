"""Seed 1 (and 2 with --ensemble), Keras: function approximation.

The network of seed 1 as a Keras 3 model trained with model.fit, the way
Horovod's Keras examples are written: hvd.DistributedOptimizer around Adam
with the learning rate scaled by the number of ranks,
BroadcastGlobalVariablesCallback so every rank starts from the same
weights, the model saved by rank 0 only. Each step is one full batch of
the rank's points. It runs on Keras's tensorflow backend and, unlike
Horovod, on its torch backend (KERAS_BACKEND=torch).

    tools/kolorun -np 2 .venv/bin/python examples/tensorflow/function_approximation_keras.py [--ensemble]
"""
import keras
import numpy as np

import kolo.keras as hvd
from seed_common_tf import Layout, StepTimer, TWO_PI, column, log_loss, output_path, parse_args, relative_l2, \
    report, save_plot


def target(x):
    return np.sin(TWO_PI * x) + np.sin(2 * TWO_PI * x)


def mlp(depth, width):
    layers = [keras.Input((1,))] + [keras.layers.Dense(width, activation="tanh") for _ in range(depth)]
    return keras.Sequential(layers + [keras.layers.Dense(1)])


class Progress(keras.callbacks.Callback):
    """Times each step and, at each epoch's end (every args.log_every
    steps), logs the epoch's mean loss."""

    def __init__(self, args, layout, timer):
        super().__init__()
        self.args, self.layout, self.timer = args, layout, timer

    def on_train_batch_begin(self, batch, logs=None):
        self.timer.begin()

    def on_train_batch_end(self, batch, logs=None):
        self.timer.end()

    def on_epoch_end(self, epoch, logs=None):
        log_loss((epoch + 1) * self.args.log_every, logs["loss"], self.layout)


def fit(model, args, layout, y, callbacks):
    """args.steps steps, each on all of the rank's points, in epochs of
    args.log_every steps (Keras's work between epochs is paid once per epoch)."""
    if args.steps % args.log_every:
        raise SystemExit("--steps %d must be a multiple of --log-every %d" % (args.steps, args.log_every))
    model.fit(np.tile(layout.x_train, (args.log_every, 1)), np.tile(y, (args.log_every, 1)),
              batch_size=len(layout.x_train), epochs=args.steps // args.log_every, shuffle=False, verbose=0,
              callbacks=callbacks)


def main():
    args = parse_args(__doc__.splitlines()[0], steps=4000, lr=2e-3)
    hvd.init()
    layout = Layout(hvd, args)
    keras.utils.set_random_seed(args.seed + hvd.rank())  # different on purpose: the broadcast aligns them
    model = mlp(args.depth, args.width)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(layout.lr),
                                                     process_set=layout.process_set),
                  loss="mse")

    def evaluate(points):
        prediction = keras.ops.convert_to_numpy(model(points))
        return prediction, relative_l2(prediction, target(points))

    initial_error = evaluate(column(layout.lo, layout.hi, 101))[1]
    timer = StepTimer()
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(layout.root, process_set=layout.process_set),
                 Progress(args, layout, timer)]
    fit(model, args, layout, target(layout.x_train), callbacks)
    x_all, predictions = report(layout, evaluate, initial_error, timer)
    if hvd.rank() == layout.root:  # one copy of each model: its first rank's
        model.save(output_path(args, "function_approximation_keras%s.keras" % (
            "_member%d" % layout.member if args.ensemble else "")))
    if hvd.rank() == 0:
        curves = ([("prediction", predictions[0])] if layout.members == 1 else
                  [("member %d" % m, p) for m, p in enumerate(predictions)])
        save_plot(output_path(args, "function_approximation_keras.png"),
                  "Keras (%s) %s on %d ranks" % (keras.backend.backend(),
                                                 "ensemble" if args.ensemble else "data parallel", hvd.size()),
                  x_all[:, 0], target(x_all)[:, 0], [(label, np.asarray(p)[:, 0]) for label, p in curves])


if __name__ == "__main__":
    main()
