"""A kolo.tensorflow job as a launcher starts it (the launcher's own rank
variables, nothing else): a TF2 GradientTape step in a tf.function and a
Keras fit with DistributedOptimizer, whose weights must end equal on every
rank, and a TF1-graph allreduce in a session.
   tensorflow_job.py WORLD_SIZE   (the size the launcher was asked for)"""
import sys

import keras
import numpy as np
import tensorflow as tf

import kolo.keras
import kolo.tensorflow as hvd

want_size = int(sys.argv[1])
hvd.init()
r, n = hvd.rank(), hvd.size()
assert n == want_size, f"world size {n}, launcher asked for {want_size}"

w = tf.Variable(tf.fill([3], float(r)))  # different on every rank until broadcast
hvd.broadcast_variables([w], root_rank=0)


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * x)
    grad, = hvd.DistributedGradientTape(tape).gradient(loss, [w])
    w.assign_sub(grad)
    return grad


grad = step(tf.fill([3], float(r + 1)))
assert np.allclose(grad.numpy(), (n + 1) / 2), grad  # the mean of 1..n
assert np.allclose(w.numpy(), -(n + 1) / 2), w

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
rng = np.random.default_rng(r)
model.fit(rng.random((16, 4)), rng.random((16, 2)), batch_size=4, epochs=2, verbose=0,
          callbacks=[kolo.keras.callbacks.BroadcastGlobalVariablesCallback(0)])
kernel = model.layers[0].kernel.numpy()
everyone = hvd.allgather(tf.constant(kernel[None]))
assert np.allclose(everyone.numpy(), everyone.numpy()[:1]), "the ranks' weights differ"

with tf.Graph().as_default():
    total = hvd.allreduce(tf.constant([float(r)]), op=hvd.Sum)
    with tf.compat.v1.Session() as sess:
        assert sess.run(total)[0] == n * (n - 1) / 2
hvd.shutdown()
print(f"tensorflow rank {r} of {n} ok", flush=True)
