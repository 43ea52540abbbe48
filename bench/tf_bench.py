"""Training steps of one model on kolo.tensorflow / kolo.keras and on
TensorFlow's own multi-worker path, each rank one process (run by
bench/tf_bench.sh, which alternates the frameworks' jobs and prints the
table). One job, one framework:

  --framework kolo   kolo: Keras model.fit with hvd.DistributedOptimizer
                     (style fit) or a tf.function GradientTape loop with
                     hvd.DistributedGradientTape (style loop); then the same
                     steps without any communication, for the compute-only
                     time under the same load (every rank computing)
  --framework mwms   tf.distribute.MultiWorkerMirroredStrategy (ring
                     collectives over gRPC), TF_CONFIG on loopback from
                     kolorun's rank variables, strategy.run in a
                     tf.function loop (Keras 3.15's fit does not run under
                     it)

The model is an MLP of --layers x --width (default 6 x 2048: 25.2M
parameters, 101 MB of float32 gradients), one step on --batch rows per
rank. Prints one line per timed run:
  RESULT framework=F style=S backend=B ranks=N batch=K ms=STEP compute_ms=C
"""
import argparse
import json
import os
import time

import numpy as np


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["kolo", "mwms"], required=True)
    p.add_argument("--style", choices=["fit", "loop"], default="fit")
    p.add_argument("--batch", type=int, default=1, help="rows per rank per step (default %(default)s)")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--steps", type=int, default=20, help="timed steps (default %(default)s)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--port-base", type=int, default=0, help="mwms: first worker port (default: from KOLO_MASTER_PORT)")
    return p.parse_args()


def rank_and_size():
    return int(os.environ.get("KOLO_RANK", "0")), int(os.environ.get("KOLO_WORLD_SIZE", "1"))


def build(keras, args):
    layers = [keras.Input((args.width,))]
    layers += [keras.layers.Dense(args.width, activation="relu") for _ in range(args.layers - 1)]
    return keras.Sequential(layers + [keras.layers.Dense(args.width)])


def data(args, rank):
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((args.batch, args.width)).astype(np.float32)
    return x, np.tanh(x)


class StepClock:
    """Mean ms per step of fit's batches after the warm-up ones."""

    def __init__(self):
        self.times, self.start = [], None

    def callback(self, keras):
        clock = self

        class Clock(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                clock.start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                clock.times.append(time.perf_counter() - clock.start)

        return Clock()

    def ms(self, warmup):
        return 1e3 * float(np.mean(self.times[warmup:]))


def timed_loop(step, x, y, args):
    for _ in range(args.warmup):
        step(x, y)
    start = time.perf_counter()
    for _ in range(args.steps):
        step(x, y)
    return 1e3 * (time.perf_counter() - start) / args.steps


def fit_ms(keras, model, x, y, args, callbacks=()):
    clock = StepClock()
    steps = args.warmup + args.steps
    model.fit(np.tile(x, (steps, 1)), np.tile(y, (steps, 1)), batch_size=args.batch, epochs=1, shuffle=False,
              verbose=0, callbacks=list(callbacks) + [clock.callback(keras)])
    return clock.ms(args.warmup)


def run_kolo(args, rank, size):
    import keras
    import tensorflow as tf
    if keras.backend.backend() == "tensorflow":
        import kolo.tensorflow as hvd
    else:
        import kolo.keras as hvd
    import kolo.keras as hk
    hvd.init()
    x, y = data(args, rank)
    model = build(keras, args)
    if args.style == "fit":
        model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.001)), loss="mse")
        ms = fit_ms(keras, model, x, y, args, [hk.callbacks.BroadcastGlobalVariablesCallback(0)])
        plain = build(keras, args)
        plain.compile(optimizer=keras.optimizers.SGD(0.001), loss="mse")
        compute = fit_ms(keras, plain, x, y, args)
    else:
        if keras.backend.backend() != "tensorflow":
            raise SystemExit("the loop style is TensorFlow's GradientTape: KERAS_BACKEND=tensorflow")
        opt = keras.optimizers.SGD(0.001)

        def step_of(distributed):
            @tf.function
            def step(xb, yb):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
                if distributed:
                    tape = hvd.DistributedGradientTape(tape)
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                return loss
            return step

        opt.build(model.trainable_variables)
        hvd.broadcast_variables(model.variables, root_rank=0)
        xt, yt = tf.constant(x), tf.constant(y)
        ms = timed_loop(step_of(True), xt, yt, args)
        compute = timed_loop(step_of(False), xt, yt, args)
    return ms, compute, keras.backend.backend()


def run_mwms(args, rank, size):
    base = args.port_base or int(os.environ["KOLO_MASTER_PORT"]) + 17
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["127.0.0.1:%d" % (base + r) for r in range(size)]},
                                          "task": {"type": "worker", "index": rank}})
    import tensorflow as tf
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    import keras
    x, y = data(args, rank)
    with strategy.scope():
        model = build(keras, args)
        opt = keras.optimizers.SGD(0.001)
    if args.style == "fit":
        # Keras 3.15's fit under this strategy fails before the first step
        # (its symbolic build reduces a PerReplica batch eagerly: "Attempt
        # to convert a value (PerReplica...) to a Tensor"), so TensorFlow's
        # multi-worker path is measured in its custom-loop form only.
        raise SystemExit("mwms: Keras fit under MultiWorkerMirroredStrategy does not run in Keras %s; use --style loop"
                         % keras.__version__)
    with strategy.scope():
        opt.build(model.trainable_variables)

    @tf.function
    def step(xb, yb):
        def replica(xr, yr):
            with tf.GradientTape() as tape:
                # The strategy's idiom: each replica's loss scaled by 1/replicas;
                # Keras's optimizer sums the gradients over the workers (one allreduce).
                loss = tf.reduce_mean(tf.square(model(xr, training=True) - yr)) / strategy.num_replicas_in_sync
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.run(replica, args=(xb, yb))

    ms = timed_loop(step, tf.constant(x), tf.constant(y), args)
    return ms, float("nan"), "tensorflow"


def main():
    args = parse()
    rank, size = rank_and_size()
    ms, compute, backend = (run_kolo if args.framework == "kolo" else run_mwms)(args, rank, size)
    if rank == 0:
        print("RESULT framework=%s style=%s backend=%s ranks=%d batch=%d ms=%.2f compute_ms=%.2f" % (
            args.framework, args.style, backend, size, args.batch, ms, compute), flush=True)


if __name__ == "__main__":
    main()
