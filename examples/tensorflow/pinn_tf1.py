"""Seed 3 (and 4 with --ensemble), TF1 style: a physics-informed network.

Solves -u'' = f on [-1, 1] with f = k^2 sin(k x) and u(-1) = u(1) = 0
(exact solution u = sin(k x), k = 2 pi) without samples of u: the loss is
the mean squared residual of the equation at collocation points, with u''
from tf.gradients taken twice, plus the boundary conditions. TF1 graph code
as in function_approximation_tf1.py (AdamOptimizer with the learning rate
scaled by the ranks, hvd.DistributedOptimizer, hvd.broadcast_global_variables,
rank-0 checkpoints). Data parallel, the collocation points are split across
ranks; with --ensemble, member m (a process set) solves its own problem,
k = (m + 1) pi, on all of [-1, 1], its ranks splitting the points.

    tools/kolorun -np 2 .venv/bin/python examples/tensorflow/pinn_tf1.py [--ensemble]
"""

import numpy as np
import tensorflow as tf

import kolo.tensorflow as hvd
from function_approximation_tf1 import mlp
from seed_common_tf import (Layout, StepTimer, log_loss, output_path, pinn_args, plot_pinn, relative_l2, report,
                            wave_number)


def main():
    args = pinn_args(__doc__.splitlines()[0])
    tf.compat.v1.disable_eager_execution()
    hvd.init()
    layout = Layout(hvd, args, split=False)
    k = wave_number(args, layout)
    config = tf.compat.v1.ConfigProto()
    config.gpu_options.visible_device_list = str(hvd.local_rank())

    x = tf.compat.v1.placeholder(tf.float32, [None, 1])
    with tf.compat.v1.variable_scope("u", reuse=tf.compat.v1.AUTO_REUSE):
        u = mlp(x, args.depth, args.width, seed=args.seed)
        boundary = mlp(tf.constant([[-1.0], [1.0]]), args.depth, args.width, seed=args.seed)
    du = tf.gradients(u, x)[0]
    d2u = tf.gradients(du, x)[0]
    residual = -d2u - k * k * tf.sin(k * x)
    loss = tf.reduce_mean(tf.square(residual)) + args.boundary_weight * tf.reduce_mean(tf.square(boundary))
    global_step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.AdamOptimizer(layout.lr),
                                         process_set=layout.process_set)
    train_op = optimizer.minimize(loss, global_step=global_step)
    if args.ensemble:  # each member's first rank gives its variables to the member's other ranks
        broadcast = hvd.broadcast_variables(tf.compat.v1.global_variables(), root_rank=layout.root,
                                            process_set=layout.process_set)
    else:  # Horovod's recipe
        broadcast = hvd.broadcast_global_variables(0)

    checkpoints = None
    if hvd.rank() == layout.root:
        checkpoints = output_path(args, "pinn_tf1" + ("_member%d" % layout.member if args.ensemble else ""))
    timer = StepTimer()
    with tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=checkpoints, config=config,
                                                     save_checkpoint_steps=args.steps, save_summaries_steps=None,
                                                     log_step_count_steps=None) as sess:
        sess.run(broadcast)

        def evaluate(points):
            prediction = sess.run(u, {x: points})
            return prediction, relative_l2(prediction, np.sin(k * points))

        initial_error = evaluate(np.linspace(layout.lo, layout.hi, 101, dtype=np.float32)[:, None])[1]
        for step in range(1, args.steps + 1):
            timer.begin()
            _, value = sess.run([train_op, loss], {x: layout.x_train})
            timer.end()
            if step % args.log_every == 0 or step == args.steps:
                log_loss(step, value, layout)
        x_all, predictions = report(layout, evaluate, initial_error, timer)
    if hvd.rank() == 0:
        plot_pinn(args, layout, "pinn_tf1.png", "TF1", k, x_all, predictions)


if __name__ == "__main__":
    main()
