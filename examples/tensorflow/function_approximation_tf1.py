"""Seed 1 (and 2 with --ensemble), TF1 style: function approximation.

A fully connected network fits y = sin(2 pi x) + sin(4 pi x) on [-1, 1],
written as TF1 graph code the way Horovod's examples are: placeholders and
variables, tf.compat.v1.train.AdamOptimizer with the learning rate scaled
by the number of ranks, hvd.DistributedOptimizer, variables broadcast from
the first rank once the MonitoredTrainingSession starts, checkpoints
written by rank 0 only. Data parallel, each rank trains on its own slice
of x; with --ensemble each member (a process set) trains a model of its
own on its own subinterval.

    tools/kolorun -np 2 .venv/bin/python examples/tensorflow/function_approximation_tf1.py [--ensemble]
"""
import numpy as np
import tensorflow as tf

import kolo.tensorflow as hvd
from seed_common_tf import Layout, StepTimer, TWO_PI, column, log_loss, output_path, parse_args, relative_l2, \
    report, save_plot


def target(x):
    return np.sin(TWO_PI * x) + np.sin(2 * TWO_PI * x)


def mlp(x, depth, width, seed):
    """x -> u: `depth` tanh layers of `width` units, TF1 variables."""
    init = tf.compat.v1.glorot_uniform_initializer(seed=seed)
    h, n_in = x, 1
    for i in range(depth):
        w = tf.compat.v1.get_variable("w%d" % i, [n_in, width], initializer=init)
        b = tf.compat.v1.get_variable("b%d" % i, [width], initializer=tf.compat.v1.zeros_initializer())
        h, n_in = tf.tanh(tf.matmul(h, w) + b), width
    w = tf.compat.v1.get_variable("w_out", [n_in, 1], initializer=init)
    b = tf.compat.v1.get_variable("b_out", [1], initializer=tf.compat.v1.zeros_initializer())
    return tf.matmul(h, w) + b


def main():
    args = parse_args(__doc__.splitlines()[0], steps=4000, lr=2e-3)
    tf.compat.v1.disable_eager_execution()
    hvd.init()
    layout = Layout(hvd, args)
    config = tf.compat.v1.ConfigProto()
    config.gpu_options.visible_device_list = str(hvd.local_rank())

    x = tf.compat.v1.placeholder(tf.float32, [None, 1])
    y = tf.compat.v1.placeholder(tf.float32, [None, 1])
    u = mlp(x, args.depth, args.width, seed=args.seed + hvd.rank())  # different on purpose: the broadcast aligns them
    loss = tf.reduce_mean(tf.square(u - y))
    global_step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.AdamOptimizer(layout.lr),
                                         process_set=layout.process_set)
    train_op = optimizer.minimize(loss, global_step=global_step)

    hooks = []
    if args.ensemble:  # each member's first rank gives its variables to the member's other ranks
        broadcast = hvd.broadcast_variables(tf.compat.v1.global_variables(), root_rank=layout.root,
                                            process_set=layout.process_set)
    else:  # Horovod's recipe: every rank starts from rank 0's variables
        broadcast = tf.no_op()
        hooks.append(hvd.BroadcastGlobalVariablesHook(0))
    # One copy of each model: rank 0's (an ensemble's: each member's first rank, in a folder of its own).
    checkpoints = None
    if hvd.rank() == layout.root:
        checkpoints = output_path(args, "function_approximation_tf1" +
                                  ("_member%d" % layout.member if args.ensemble else ""))
    feed = {x: layout.x_train, y: target(layout.x_train)}
    timer = StepTimer()
    with tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=checkpoints, hooks=hooks, config=config,
                                                     save_checkpoint_steps=args.steps, save_summaries_steps=None,
                                                     log_step_count_steps=None) as sess:
        sess.run(broadcast)

        def evaluate(points):
            prediction = sess.run(u, {x: points})
            return prediction, relative_l2(prediction, target(points))

        initial_error = evaluate(column(layout.lo, layout.hi, 101))[1]
        for step in range(1, args.steps + 1):
            timer.begin()
            _, value = sess.run([train_op, loss], feed)
            timer.end()
            if step % args.log_every == 0 or step == args.steps:
                log_loss(step, value, layout)
        x_all, predictions = report(layout, evaluate, initial_error, timer)
    if hvd.rank() == 0:
        curves = ([("prediction", predictions[0])] if layout.members == 1 else
                  [("member %d" % m, p) for m, p in enumerate(predictions)])
        save_plot(output_path(args, "function_approximation_tf1.png"),
                  "TF1 %s on %d ranks" % ("ensemble" if args.ensemble else "data parallel", hvd.size()),
                  x_all[:, 0], target(x_all)[:, 0], [(label, p[:, 0]) for label, p in curves])


if __name__ == "__main__":
    main()
