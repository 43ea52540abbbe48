"""Keras 2 (tf_keras) training on kolo.tensorflow.keras: model.fit with
DistributedOptimizer, over both of tf_keras's optimizer families, and the
callbacks must train as one process does on the whole batch (NumPy
reference, float32 rounding); load_model, SyncBatchNormalization, the
partial optimizer and the elastic state, as the Keras 3 tests check them."""
import os

import numpy as np
import pytest
import tensorflow as tf

import kolo.keras
import kolo.tensorflow as hvd_tf
import kolo.tensorflow.keras as hvd
from training_reference import FEATURES, LOCAL_BATCH, STEPS, initial_weights, local_data, reference_sgd

keras = tf.keras
FAMILIES = {"legacy": keras.optimizers.legacy.SGD, "tf_keras": keras.optimizers.SGD}


def world():
    return hvd.rank(), hvd.size()


def test_tf_keras_is_what_both_modules_serve():
    assert keras.layers.Layer.__module__.startswith("tf_keras")
    assert kolo.keras.DistributedOptimizer is hvd.DistributedOptimizer
    assert issubclass(hvd.callbacks.BroadcastGlobalVariablesCallback, keras.callbacks.Callback)
    with pytest.raises(TypeError, match="wraps a Keras 2 \\(tf_keras\\) optimizer, not str"):
        hvd.DistributedOptimizer("sgd")


def linear_model(rank):
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    model.set_weights(initial_weights(0 if rank == 0 else 1 + rank))  # rank 0's must reach the others
    return model


def gathered(values):
    return hvd_tf.allgather(tf.constant(np.asarray(values, dtype=np.float64)[None])).numpy()


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("passes,average", [(1, False), (2, False), (2, True)])
def test_fit_equals_one_process_on_the_global_batch(family, passes, average):
    rank, n = world()
    lr = 0.05
    model = linear_model(rank)
    opt = hvd.DistributedOptimizer(FAMILIES[family](lr), backward_passes_per_step=passes,
                                   average_aggregated_gradients=average)
    model.compile(optimizer=opt, loss="mse", experimental_run_tf_function=False)
    x, y = local_data(rank, n)
    history = model.fit(x, y, batch_size=LOCAL_BATCH, epochs=1, shuffle=False, verbose=0,
                        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                   hvd.callbacks.MetricAverageCallback()])
    want_w, want_b = reference_sgd(lr, n, accumulate=passes, average_accumulated=average)
    got_w, got_b = model.get_weights()
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-5, atol=1e-6)
    assert int(opt.iterations.numpy()) == STEPS  # every pass counts, applied or accumulated
    losses = gathered(history.history["loss"])
    np.testing.assert_allclose(losses, np.repeat(losses[:1], n, axis=0))  # averaged: the same on every rank


def test_a_model_without_an_input_shape_is_made_alike_after_its_first_batch():
    rank, n = world()
    model = keras.Sequential([keras.layers.Dense(3, kernel_initializer=keras.initializers.Constant(rank + 1.0)),
                              keras.layers.Dense(1)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="mse")
    x, y = local_data(rank, n)
    model.fit(x, y, batch_size=LOCAL_BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    for w in model.get_weights():
        everyone = gathered(w)
        np.testing.assert_array_equal(everyone, np.repeat(everyone[:1], n, axis=0))


def test_lr_warmup_and_schedule_callbacks_with_momentum_correction():
    rank, n = world()
    initial_lr, steps = 0.1 * n, 4
    model = linear_model(rank)
    opt = hvd.DistributedOptimizer(keras.optimizers.legacy.SGD(initial_lr, momentum=0.9))
    model.compile(optimizer=opt, loss="mse")
    x, y = local_data(rank, n, steps)
    history = model.fit(x, y, batch_size=LOCAL_BATCH, epochs=6, shuffle=False, verbose=0, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=initial_lr, warmup_epochs=2),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=0.5, start_epoch=2, end_epoch=4),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=lambda e: 0.01, start_epoch=4)])
    lrs = history.history["lr"]
    for e in range(2):
        np.testing.assert_allclose(lrs[e], initial_lr / n * ((e + 1) * (n - 1) / 2 + 1), rtol=1e-5)
    np.testing.assert_allclose(lrs[2:4], [initial_lr, initial_lr * 0.5], rtol=1e-5)
    np.testing.assert_allclose(lrs[4:], [initial_lr * 0.01] * 2, rtol=1e-5)
    # The legacy SGD's momentum is a variable: corrected for a batch, then put back.
    assert float(keras.backend.get_value(opt.momentum)) == pytest.approx(0.9)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_best_model_checkpoint_on_rank_0_and_load_model(tmp_path, family):
    rank, n = world()
    path = os.path.join(str(tmp_path), "best.h5")
    model = linear_model(rank)
    adam = keras.optimizers.legacy.Adam if family == "legacy" else keras.optimizers.Adam
    model.compile(optimizer=hvd.DistributedOptimizer(adam(0.01)), loss="mse")
    x, y = local_data(rank, n)
    model.fit(x, y, batch_size=LOCAL_BATCH, epochs=2, shuffle=False, verbose=0, validation_data=(x, y),
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                         hvd.callbacks.MetricAverageCallback(), hvd.callbacks.BestModelCheckpoint(path)])
    assert os.path.exists(path) == (rank == 0)  # each rank has its own tmp_path: only rank 0 wrote
    if rank == 0:
        loaded = hvd.load_model(path)
        assert hasattr(loaded.optimizer, "_kolo_reduce")  # wrapped in DistributedOptimizer again
        assert int(loaded.optimizer.iterations.numpy()) == 2 * STEPS
        np.testing.assert_allclose(loaded.get_weights()[0], model.get_weights()[0], rtol=1e-6)
        saved = {v.name: v.numpy() for v in model.optimizer.variables()} if family == "legacy" else \
            {v.name: v.numpy() for v in model.optimizer.variables}
        mine = loaded.optimizer.variables() if family == "legacy" else loaded.optimizer.variables
        for v in mine:  # the slots came back too
            np.testing.assert_allclose(v.numpy(), saved[v.name], rtol=1e-6)


def test_sync_batch_norm_uses_every_ranks_batch():
    rank, n = world()
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((n * 4, 3)) * np.array([1.0, 5.0, 0.1]) + 2.0).astype(np.float32)
    local = x[rank * 4:(rank + 1) * 4]
    sync = hvd.SyncBatchNormalization(momentum=0.5)
    plain = keras.layers.BatchNormalization(momentum=0.5)
    expected = plain(x, training=True).numpy()[rank * 4:(rank + 1) * 4]
    np.testing.assert_allclose(sync(local, training=True).numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sync.moving_mean.numpy(), plain.moving_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sync.moving_variance.numpy(), plain.moving_variance.numpy(), rtol=1e-4)


def test_partial_distributed_optimizer_keeps_local_layers_local():
    rank, n = world()
    if n < 2:
        pytest.skip("needs two ranks")
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(2, name="shared"),
                              keras.layers.Dense(1, name="local")])
    shared, local = model.layers
    opt = hvd.PartialDistributedOptimizer(keras.optimizers.SGD(0.05), local_layers=[local])
    model.compile(optimizer=opt, loss="mse")
    x, y = local_data(rank, n)
    model.fit(x * (rank + 1), y, batch_size=LOCAL_BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    shared_w, local_w = gathered(shared.kernel.numpy()), gathered(local.kernel.numpy())
    np.testing.assert_allclose(shared_w, np.repeat(shared_w[:1], n, axis=0), rtol=1e-6)
    assert not np.allclose(local_w[0], local_w[1])


def test_elastic_keras_state_commits_restores_and_syncs():
    rank, n = world()
    model = linear_model(rank)
    opt = hvd.DistributedOptimizer(keras.optimizers.legacy.Adam(0.01))
    model.compile(optimizer=opt, loss="mse")
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    assert len(opt.variables()) > 1  # its slots made, so that a joining worker gets them
    state.sync()  # rank 0's weights everywhere
    everyone = gathered(model.get_weights()[0])
    np.testing.assert_array_equal(everyone, np.repeat(everyone[:1], n, axis=0))
    committed = model.get_weights()[0].copy()
    x, y = local_data(rank, n)
    model.fit(x, y, batch_size=LOCAL_BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[hvd.elastic.UpdateBatchStateCallback(state), hvd.elastic.UpdateEpochStateCallback(state)])
    assert state.epoch == 1 and state.batch == 0
    assert not np.allclose(model.get_weights()[0], committed)
    state.restore()
    np.testing.assert_array_equal(model.get_weights()[0], committed)


def test_value_collectives_and_broadcast_global_variables():
    rank, n = world()
    total = hvd.allreduce([float(rank), 1.0], op=hvd.Sum)
    assert total.dtype == tf.float32
    np.testing.assert_allclose(total.numpy(), [n * (n - 1) / 2, n])
    np.testing.assert_array_equal(hvd.broadcast(np.array([rank]), n - 1).numpy(), [n - 1])
    np.testing.assert_array_equal(hvd.allgather(np.array([rank])).numpy(), np.arange(n))
    with pytest.raises(RuntimeError, match="does not support eager execution"):
        hvd.broadcast_global_variables(0)
