"""The Keras program Horovod's tutorial teaches with, a Keras 2 (tf_keras)
program: tf.keras layers, Adam scaled by the ranks, DistributedOptimizer,
compile(experimental_run_tf_function=False), the broadcast, metric-average
and warmup callbacks, checkpoints on rank 0, and fit for 500 // size steps
an epoch. Only its import differs from Horovod's (kolo.tensorflow.keras for
horovod.tensorflow.keras), and its data: MNIST from an .npz file of
x_train and y_train (--make-data writes a stand-in of MNIST's shapes,
where the tutorial downloads MNIST). tf.keras is Keras 2 under
TF_USE_LEGACY_KERAS=1:

    .venv/bin/python examples/tensorflow/keras2_mnist.py --make-data /tmp/mnist.npz
    TF_USE_LEGACY_KERAS=1 tools/kolorun -np 2 .venv/bin/python examples/tensorflow/keras2_mnist.py \\
        --data /tmp/mnist.npz --epochs 1 --steps 40

Every rank ends with the same weights; each prints their hash.
"""
import argparse
import hashlib
import os

import numpy as np


def make_data(path, samples=6000):
    """MNIST's shapes and types: 28x28 uint8 images whose label is the
    quadrant holding a bright square (so that there is something to learn)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 60, size=(samples, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=samples).astype(np.uint8)
    for i, label in enumerate(labels):
        row, col = divmod(int(label), 4)
        images[i, 2 + 6 * row:8 + 6 * row, 2 + 6 * col:8 + 6 * col] = 255
    np.savez(path, x_train=images, y_train=labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="an .npz of x_train (N, 28, 28) uint8 and y_train (N,)")
    parser.add_argument("--make-data", metavar="FILE", help="write a stand-in MNIST there and exit")
    parser.add_argument("--epochs", type=int, default=24)
    parser.add_argument("--steps", type=int, default=500, help="steps of all ranks an epoch (each: steps // size)")
    parser.add_argument("--checkpoint-dir", default=".", help="where rank 0 writes its checkpoints")
    args = parser.parse_args()
    if args.make_data:
        make_data(args.make_data)
        return

    import tensorflow as tf

    import kolo.tensorflow.keras as hvd

    # Initialize kolo (Horovod's API).
    hvd.init()

    with np.load(args.data) as data:
        mnist_images, mnist_labels = data["x_train"], data["y_train"]
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.cast(mnist_images[..., tf.newaxis] / 255.0, tf.float32), tf.cast(mnist_labels, tf.int64)))
    dataset = dataset.repeat().shuffle(10000, seed=hvd.rank()).batch(128)

    mnist_model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, [3, 3], activation="relu"),
        tf.keras.layers.Conv2D(64, [3, 3], activation="relu"),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Dropout(0.25),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(10, activation="softmax"),
    ])

    # The learning rate scaled by the number of ranks.
    opt = tf.optimizers.Adam(0.001 * hvd.size())

    # The distributed optimizer averages the gradients over the ranks.
    opt = hvd.DistributedOptimizer(opt)

    # experimental_run_tf_function=False: the optimizer computes the gradients (Keras 2's own words).
    mnist_model.compile(loss=tf.losses.SparseCategoricalCrossentropy(), optimizer=opt, metrics=["accuracy"],
                        experimental_run_tf_function=False)

    callbacks = [
        # Rank 0's initial variables to every rank: the same start everywhere.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # The metrics averaged over the ranks at the end of every epoch.
        hvd.callbacks.MetricAverageCallback(),
        # A gradual warmup of the scaled learning rate over the first 3 epochs.
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.001 * hvd.size(), warmup_epochs=3, verbose=1),
    ]
    # Checkpoints on rank 0 only, so that the others cannot corrupt them.
    if hvd.rank() == 0:
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(os.path.join(args.checkpoint_dir,
                                                                         "checkpoint-{epoch}.h5")))

    # The steps an epoch divided among the ranks.
    history = mnist_model.fit(dataset, steps_per_epoch=args.steps // hvd.size(), callbacks=callbacks,
                              epochs=args.epochs, verbose=1 if hvd.rank() == 0 else 0)
    weights = np.concatenate([w.ravel() for w in mnist_model.get_weights()])
    print("rank %d of %d: loss %.4f, accuracy %.3f, weights' sha256 %s" % (
        hvd.rank(), hvd.size(), history.history["loss"][-1], history.history["accuracy"][-1],
        hashlib.sha256(weights.tobytes()).hexdigest()[:16]), flush=True)


if __name__ == "__main__":
    main()
