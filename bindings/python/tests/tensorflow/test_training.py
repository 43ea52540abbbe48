"""Training with kolo.tensorflow: DistributedGradientTape (eager and in a
tf.function), DistributedOptimizer for tf.compat.v1 optimizers in TF1 graph
code (sessions, MonitoredTrainingSession, hooks, gradient accumulation).
Each rank trains on its part of a global batch; the result must equal one
process training on the whole batch, which every rank computes itself."""
import numpy as np
import pytest
import tensorflow as tf

import kolo.tensorflow as hvd
from training_reference import FEATURES, STEPS, global_batch, initial_weights, local_part, reference_sgd


def world():
    return hvd.rank(), hvd.size()


def start_weights(rank):
    """Rank 0 has the initial weights; the others start elsewhere and must be given rank 0's."""
    w, b = initial_weights(0 if rank == 0 else 1 + rank)
    return tf.Variable(w), tf.Variable(b)


def loss_of(w, b, x, y):
    return tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))


@pytest.mark.parametrize("compiled", [False, True])
def test_distributed_gradient_tape(compiled):
    rank, n = world()
    w, b = start_weights(rank)
    hvd.broadcast_variables([w, b], root_rank=0)
    lr = 0.05

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(w, b, x, y)
        tape = hvd.DistributedGradientTape(tape)
        gw, gb = tape.gradient(loss, [w, b])
        w.assign_sub(lr * gw)
        b.assign_sub(lr * gb)

    run = tf.function(step) if compiled else step
    for s in range(STEPS):
        x, y = global_batch(s, n)
        run(tf.constant(local_part(x, rank)), tf.constant(local_part(y, rank)))
    want_w, want_b = reference_sgd(lr, n)
    np.testing.assert_allclose(w.numpy(), want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), want_b, rtol=1e-5, atol=1e-6)


def test_tape_with_local_sources_and_groups():
    rank, n = world()
    shared = tf.Variable([1.0, 2.0])
    local = tf.Variable([3.0])
    with tf.GradientTape() as tape:
        loss = (rank + 1.0) * (tf.reduce_sum(shared) + tf.reduce_sum(local))
    tape = hvd.DistributedGradientTape(tape, groups=1)
    tape.register_local_source(local)
    g_shared, g_local = tape.gradient(loss, [shared, local])
    mean = sum(r + 1.0 for r in range(n)) / n
    np.testing.assert_allclose(g_shared.numpy(), [mean, mean])
    np.testing.assert_allclose(g_local.numpy(), [(rank + 1.0) / n])  # scaled, not reduced


def test_tf1_graph_optimizer_broadcast_and_session():
    rank, n = world()
    lr = 0.05
    with tf.Graph().as_default():
        w0, b0 = initial_weights(0 if rank == 0 else 1 + rank)
        w = tf.compat.v1.get_variable("w", initializer=w0)
        b = tf.compat.v1.get_variable("b", initializer=b0)
        x = tf.compat.v1.placeholder(tf.float32, [None, FEATURES])
        y = tf.compat.v1.placeholder(tf.float32, [None, 1])
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(lr))
        train = opt.minimize(loss_of(w, b, x, y))
        bcast = hvd.broadcast_global_variables(0)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(bcast)
            for s in range(STEPS):
                xs, ys = global_batch(s, n)
                sess.run(train, {x: local_part(xs, rank), y: local_part(ys, rank)})
            got_w, got_b = sess.run([w, b])
    want_w, want_b = reference_sgd(lr, n)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("average", [False, True])
def test_tf1_monitored_session_hook_and_accumulation(average):
    rank, n = world()
    lr, passes = 0.05, 2
    with tf.Graph().as_default():
        w0, b0 = initial_weights(0 if rank == 0 else 1 + rank)
        w = tf.compat.v1.get_variable("w", initializer=w0)
        b = tf.compat.v1.get_variable("b", initializer=b0)
        x = tf.compat.v1.placeholder(tf.float32, [None, FEATURES])
        y = tf.compat.v1.placeholder(tf.float32, [None, 1])
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(lr),
                                       backward_passes_per_step=passes, average_aggregated_gradients=average)
        train = opt.minimize(loss_of(w, b, x, y), global_step=global_step)
        hooks = [hvd.BroadcastGlobalVariablesHook(0)]
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as sess:
            for s in range(STEPS):
                xs, ys = global_batch(s, n)
                sess.run(train, {x: local_part(xs, rank), y: local_part(ys, rank)})
            got_w, got_b, steps = sess.run([w, b, global_step])
    assert steps == STEPS
    want_w, want_b = reference_sgd(lr, n, accumulate=passes, average_accumulated=average)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-5, atol=1e-6)


def test_tf1_adasum_delta_optimizer_keeps_ranks_equal():
    rank, n = world()
    if n & (n - 1):
        pytest.skip("Adasum needs a power-of-two number of ranks")
    with tf.Graph().as_default():
        w = tf.compat.v1.get_variable("w", initializer=np.ones([3], np.float32))
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), op=hvd.Adasum)
        train = opt.minimize(tf.reduce_sum(w * tf.constant([1.0, 2.0, 3.0]) * (rank + 1.0)))
        with tf.compat.v1.Session() as sess:
            sess.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()])
            for _ in range(3):
                sess.run(train)
            got = sess.run(w)
    everyone = hvd.allgather_object(got.tolist())
    assert all(np.allclose(other, everyone[0]) for other in everyone)
    assert not np.allclose(got, np.ones(3))
