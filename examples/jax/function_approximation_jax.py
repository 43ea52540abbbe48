"""Seed 1 (and 2 with --ensemble), JAX: function approximation.

The network of seed 1 in JAX, its step one jax.jit function: kolo.jax's
DistributedOptimizer around Adam (the learning rate scaled by the number of
ranks) averages the gradients inside the compiled step,
broadcast_variables gives every rank the first rank's initial weights, and
rank 0 alone saves the model. Each step is one full batch of the rank's
points. Adam is written here in a few lines (optax is not in the project's
environment); DistributedOptimizer wraps optax's optimizers the same way.

    tools/kolorun -np 2 .venv/bin/python examples/jax/function_approximation_jax.py [--ensemble]
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import kolo.jax as hvd

# The command line, the layout of ranks and points, the report and the plot
# are the TensorFlow and Keras twins' (examples/tensorflow/seed_common_tf.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tensorflow"))
from seed_common_tf import (Layout, StepTimer, TWO_PI, column, log_loss, output_path, parse_args,  # noqa: E402
                            relative_l2, report, save_plot)


def target(x):
    return np.sin(TWO_PI * x) + np.sin(2 * TWO_PI * x)


def init_mlp(key, depth, width):
    """Glorot-uniform kernels and zero biases, as Keras makes its Dense layers'."""
    sizes = [1] + [width] * depth + [1]
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        params.append((jax.random.uniform(sub, (fan_in, fan_out), jnp.float32, -limit, limit),
                       jnp.zeros((fan_out,), jnp.float32)))
    return params


def mlp(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


class Adam:
    """Adam (Keras's defaults) as an optax-style optimizer: init(params) ->
    state, update(grads, state, params) -> (updates, state)."""

    def __init__(self, lr, beta1=0.9, beta2=0.999, eps=1e-7):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps

    def init(self, params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return jnp.zeros((), jnp.int32), zeros, zeros

    def update(self, grads, state, params=None):
        step, m, v = state
        step = step + 1
        m = jax.tree.map(lambda m, g: self.beta1 * m + (1 - self.beta1) * g, m, grads)
        v = jax.tree.map(lambda v, g: self.beta2 * v + (1 - self.beta2) * g * g, v, grads)
        lr = self.lr * jnp.sqrt(1 - self.beta2 ** step) / (1 - self.beta1 ** step)
        updates = jax.tree.map(lambda m, v: -lr * m / (jnp.sqrt(v) + self.eps), m, v)
        return updates, (step, m, v)


def train(args, layout, loss_fn, params):
    """args.steps compiled steps of DistributedOptimizer(Adam) on
    loss_fn(params); logs the loss every args.log_every steps. Returns the
    parameters and the step timer."""
    opt = hvd.DistributedOptimizer(Adam(layout.lr), process_set=layout.process_set)
    state = opt.init(params)

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, state = opt.update(grads, state, params)
        return jax.tree.map(jnp.add, params, updates), state, loss

    timer = StepTimer()
    for s in range(args.steps):
        timer.begin()
        params, state, loss = step(params, state)
        loss = float(loss)  # waits for the step
        timer.end()
        if (s + 1) % args.log_every == 0:
            log_loss(s + 1, loss, layout)
    return params, timer


def save(params, path):
    """The parameters as an .npz of arrays w0, b0, w1, b1, ..."""
    np.savez(path, **{"%s%d" % (name, i): np.asarray(a) for i, (w, b) in enumerate(params)
                      for name, a in (("w", w), ("b", b))})


def main():
    args = parse_args(__doc__.splitlines()[0], steps=4000, lr=2e-3)
    hvd.init()
    layout = Layout(hvd, args)
    # Different on purpose: the broadcast gives every rank of a model its first rank's.
    params = init_mlp(jax.random.PRNGKey(args.seed + hvd.rank()), args.depth, args.width)
    params = hvd.broadcast_variables(params, root_rank=layout.root, process_set=layout.process_set)
    x, y = jnp.asarray(layout.x_train), jnp.asarray(target(layout.x_train))

    def evaluate(points):
        prediction = np.asarray(mlp(params, jnp.asarray(points)))
        return prediction, relative_l2(prediction, target(points))

    initial_error = evaluate(column(layout.lo, layout.hi, 101))[1]
    params, timer = train(args, layout, lambda p: jnp.mean((mlp(p, x) - y) ** 2), params)
    x_all, predictions = report(layout, evaluate, initial_error, timer)
    if hvd.rank() == layout.root:  # one copy of each model: its first rank's
        save(params, output_path(args, "function_approximation_jax%s.npz" % (
            "_member%d" % layout.member if args.ensemble else "")))
    if hvd.rank() == 0:
        curves = ([("prediction", predictions[0])] if layout.members == 1 else
                  [("member %d" % m, p) for m, p in enumerate(predictions)])
        save_plot(output_path(args, "function_approximation_jax.png"),
                  "JAX %s on %d ranks" % ("ensemble" if args.ensemble else "data parallel", hvd.size()),
                  x_all[:, 0], target(x_all)[:, 0], [(label, np.asarray(p)[:, 0]) for label, p in curves])


if __name__ == "__main__":
    main()
