"""Seed 3 (and 4 with --ensemble), JAX: a physics-informed network.

The problem of the TensorFlow twins (-u'' = k^2 sin(k x), u(+-1) = 0) in
JAX: u'' by jax.grad taken twice, the residual and boundary loss trained
by the same compiled step as function_approximation_jax.py (kolo.jax's
DistributedOptimizer around Adam, the learning rate scaled by the ranks),
the first rank's initial weights broadcast, the model saved by rank 0
only. Data parallel, the collocation points are split across ranks; with
--ensemble, member m (a process set) solves its own problem, k = (m + 1) pi.

    tools/kolorun -np 2 .venv/bin/python examples/jax/pinn_jax.py [--ensemble]
"""
import jax
import jax.numpy as jnp
import numpy as np

import kolo.jax as hvd
from function_approximation_jax import init_mlp, mlp, save, train
from seed_common_tf import Layout, log, output_path, pinn_args, plot_pinn, relative_l2, report, wave_number


def main():
    args = pinn_args(__doc__.splitlines()[0])
    hvd.init()
    layout = Layout(hvd, args, split=False)
    k = wave_number(args, layout)
    params = init_mlp(jax.random.PRNGKey(args.seed + hvd.rank()), args.depth, args.width)
    params = hvd.broadcast_variables(params, root_rank=layout.root, process_set=layout.process_set)
    x = jnp.asarray(layout.x_train[:, 0])
    boundary = jnp.asarray([[-1.0], [1.0]], jnp.float32)

    def loss_fn(p):
        u = lambda t: mlp(p, t.reshape(1, 1))[0, 0]  # noqa: E731  u at one point
        d2u = jax.vmap(jax.grad(jax.grad(u)))(x)
        residual = -d2u - k * k * jnp.sin(k * x)
        return jnp.mean(residual ** 2) + args.boundary_weight * jnp.mean(mlp(p, boundary) ** 2)

    def evaluate(points):
        prediction = np.asarray(mlp(params, jnp.asarray(points)))
        return prediction, relative_l2(prediction, np.sin(k * points))

    initial_error = evaluate(np.linspace(layout.lo, layout.hi, 101, dtype=np.float32)[:, None])[1]
    params, timer = train(args, layout, loss_fn, params)
    x_all, predictions = report(layout, evaluate, initial_error, timer)
    if hvd.rank() == layout.root:  # one copy of each model: its first rank's
        save(params, output_path(args, "pinn_jax%s.npz" % ("_member%d" % layout.member if args.ensemble else "")))
    if hvd.rank() == 0:
        plot_pinn(args, layout, "pinn_jax.png", "JAX", k, x_all, predictions)
        log("plot: %s" % output_path(args, "pinn_jax.png"))


if __name__ == "__main__":
    main()
