"""Seed 3 (and 4 with --ensemble), Keras: a physics-informed network.

The problem of pinn_tf1.py (-u'' = k^2 sin(k x), u(+-1) = 0) as a Keras 3
model whose train_step takes u'' with nested tf.GradientTapes, trained with
model.fit: hvd.DistributedOptimizer (the learning rate scaled by the
ranks), BroadcastGlobalVariablesCallback, the model saved by rank 0 only.
Data parallel, the collocation points are split across ranks; with
--ensemble, member m (a process set) solves its own problem, k = (m + 1) pi.
Keras's tensorflow backend (the train step uses tf.GradientTape).

    tools/kolorun -np 2 .venv/bin/python examples/tensorflow/pinn_keras.py [--ensemble]
"""
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kolo.keras as hvd  # noqa: E402
from function_approximation_keras import Progress, fit, mlp  # noqa: E402
from seed_common_tf import (Layout, StepTimer, log, output_path, pinn_args, plot_pinn, relative_l2,  # noqa: E402
                            report, wave_number)


class Pinn(keras.Model):
    """u(x) = net(x); fit's loss is the PDE's residual and boundary loss."""

    def __init__(self, net, k, boundary_weight):
        super().__init__()
        self.net, self.k, self.boundary_weight = net, k, boundary_weight
        self.loss_tracker = keras.metrics.Mean(name="loss")

    @property
    def metrics(self):
        return [self.loss_tracker]

    def call(self, x):
        return self.net(x)

    def train_step(self, data):
        x, _ = data
        with tf.GradientTape() as tape:
            with tf.GradientTape() as outer:
                outer.watch(x)
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    u = self.net(x)
                du = inner.gradient(u, x)
            d2u = outer.gradient(du, x)
            residual = -d2u - self.k * self.k * tf.sin(self.k * x)
            boundary = self.net(tf.constant([[-1.0], [1.0]]))
            loss = tf.reduce_mean(tf.square(residual)) + self.boundary_weight * tf.reduce_mean(tf.square(boundary))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(grads, self.trainable_variables)  # DistributedOptimizer averages them first
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}


def main():
    args = pinn_args(__doc__.splitlines()[0])
    if keras.backend.backend() != "tensorflow":
        raise SystemExit("pinn_keras.py takes u'' with tf.GradientTape: run it with KERAS_BACKEND=tensorflow")
    hvd.init()
    layout = Layout(hvd, args, split=False)
    k = wave_number(args, layout)
    keras.utils.set_random_seed(args.seed)
    model = Pinn(mlp(args.depth, args.width), k, args.boundary_weight)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(layout.lr),
                                                     process_set=layout.process_set))

    def evaluate(points):
        prediction = keras.ops.convert_to_numpy(model(points))
        return prediction, relative_l2(prediction, np.sin(k * points))

    initial_error = evaluate(np.linspace(layout.lo, layout.hi, 101, dtype=np.float32)[:, None])[1]
    timer = StepTimer()
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(layout.root, process_set=layout.process_set),
                 Progress(args, layout, timer)]
    fit(model, args, layout, np.zeros_like(layout.x_train), callbacks)
    x_all, predictions = report(layout, evaluate, initial_error, timer)
    if hvd.rank() == layout.root:  # one copy of each model: its first rank's
        model.net.save(output_path(args, "pinn_keras%s.keras" % ("_member%d" % layout.member if args.ensemble
                                                                  else "")))
    if hvd.rank() == 0:
        plot_pinn(args, layout, "pinn_keras.png", "Keras", k, x_all, predictions)
        log("plot: %s" % output_path(args, "pinn_keras.png"))


if __name__ == "__main__":
    main()
