"""Keras 3 training on kolo.keras, on whichever backend KERAS_BACKEND names:
model.fit with DistributedOptimizer and the callbacks must train as one
process does on the whole batch (NumPy reference, float32 rounding)."""
import os

import keras
import numpy as np
import pytest

import kolo.keras as hvd
from training_reference import FEATURES, LOCAL_BATCH, STEPS, initial_weights, local_data, reference_sgd


def world():
    return hvd.rank(), hvd.size()


def linear_model(rank):
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    model.set_weights(initial_weights(0 if rank == 0 else 1 + rank))  # rank 0's must reach the others
    return model


def gathered(values):
    return keras.ops.convert_to_numpy(hvd.allgather(np.asarray(values, dtype=np.float64)[None]))


@pytest.mark.parametrize("passes,average", [(1, False), (2, False), (2, True)])
def test_fit_equals_one_process_on_the_global_batch(passes, average):
    rank, n = world()
    lr = 0.05
    model = linear_model(rank)
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(lr), backward_passes_per_step=passes,
                                   average_aggregated_gradients=average)
    model.compile(optimizer=opt, loss="mse")
    x, y = local_data(rank, n)
    history = model.fit(x, y, batch_size=LOCAL_BATCH, epochs=1, shuffle=False, verbose=0,
                        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                   hvd.callbacks.MetricAverageCallback()])
    want_w, want_b = reference_sgd(lr, n, accumulate=passes, average_accumulated=average)
    got_w, got_b = model.get_weights()
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-5, atol=1e-6)
    losses = gathered(history.history["loss"])
    np.testing.assert_allclose(losses, np.repeat(losses[:1], n, axis=0))  # averaged: the same on every rank


def test_fit_with_a_wire_format_and_error_feedback_stays_close_and_alike_on_every_rank():
    rank, n = world()
    lr = 0.05
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(20000), keras.layers.Dense(1)])
    keras.utils.set_random_seed(0)  # the same start everywhere, so the broadcast only confirms it
    model.set_weights([np.random.default_rng(i).standard_normal(w.shape).astype("float32") * 0.01
                       for i, w in enumerate(model.get_weights())])
    # The 20000-wide kernel's gradient is 80 KiB: above the 64 KiB that go exact.
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(lr),
                                   compression=hvd.Compression.wire("int8", error_feedback=True))
    model.compile(optimizer=opt, loss="mse")
    x, y = local_data(rank, n)
    model.fit(x, y, batch_size=LOCAL_BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    for w in model.get_weights():
        everyone = gathered(w)
        np.testing.assert_array_equal(everyone, np.repeat(everyone[:1], n, axis=0))  # bitwise alike


def test_lr_warmup_and_schedule_callbacks():
    rank, n = world()
    initial_lr, steps = 0.1 * n, 4
    model = linear_model(rank)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(initial_lr)), loss="mse")
    x, y = local_data(rank, n, steps)
    history = model.fit(x, y, batch_size=LOCAL_BATCH, epochs=6, shuffle=False, verbose=0, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=initial_lr, warmup_epochs=2),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=0.5, start_epoch=2, end_epoch=4),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=lambda e: 0.01, start_epoch=4)])
    lrs = history.history["lr"]
    # Warmup: from initial_lr / n towards initial_lr, batch by batch; at each
    # warmup epoch's last batch, epoch e + (steps - 1) / steps + 1 / steps.
    for e in range(2):
        np.testing.assert_allclose(lrs[e], initial_lr / n * ((e + 1) * (n - 1) / 2 + 1), rtol=1e-5)
    np.testing.assert_allclose(lrs[2:4], [initial_lr, initial_lr * 0.5], rtol=1e-5)
    np.testing.assert_allclose(lrs[4:], [initial_lr * 0.01] * 2, rtol=1e-5)


def test_best_model_checkpoint_on_rank_0_and_load_model(tmp_path):
    rank, n = world()
    path = os.path.join(str(tmp_path), "best.keras")
    model = linear_model(rank)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="mse")
    x, y = local_data(rank, n)
    model.fit(x, y, batch_size=LOCAL_BATCH, epochs=2, shuffle=False, verbose=0, validation_data=(x, y),
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                         hvd.callbacks.MetricAverageCallback(), hvd.callbacks.BestModelCheckpoint(path)])
    assert os.path.exists(path) == (rank == 0)  # each rank has its own tmp_path: only rank 0 wrote
    if rank == 0:
        loaded = hvd.load_model(path)
        assert hasattr(loaded.optimizer, "_kolo")  # wrapped in DistributedOptimizer again
        assert int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)) == 2 * STEPS
        np.testing.assert_allclose(loaded.get_weights()[0], model.get_weights()[0], rtol=1e-6)


def test_sync_batch_norm_uses_every_ranks_batch():
    rank, n = world()
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((n * 4, 3)) * np.array([1.0, 5.0, 0.1]) + 2.0).astype(np.float32)
    local = x[rank * 4:(rank + 1) * 4]
    sync = hvd.SyncBatchNormalization(momentum=0.5)
    plain = keras.layers.BatchNormalization(momentum=0.5)
    out_sync = keras.ops.convert_to_numpy(sync(local, training=True))
    out_plain = keras.ops.convert_to_numpy(plain(x, training=True))
    np.testing.assert_allclose(out_sync, out_plain[rank * 4:(rank + 1) * 4], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(sync.moving_mean),
                               keras.ops.convert_to_numpy(plain.moving_mean), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(sync.moving_variance),
                               keras.ops.convert_to_numpy(plain.moving_variance), rtol=1e-4)


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
    shared_w = gathered(keras.ops.convert_to_numpy(shared.kernel))
    local_w = gathered(keras.ops.convert_to_numpy(local.kernel))
    np.testing.assert_allclose(shared_w, np.repeat(shared_w[:1], n, axis=0), rtol=1e-6)
    assert not np.allclose(local_w[0], local_w[1])


def test_value_collectives_and_broadcast_global_variables():
    rank, n = world()
    total = hvd.allreduce([float(rank), 1.0], op=hvd.Sum)
    assert keras.backend.standardize_dtype(total.dtype) == "float64"  # a tensor of the backend
    np.testing.assert_allclose(keras.ops.convert_to_numpy(total), [n * (n - 1) / 2, n])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(hvd.broadcast(np.array([rank]), n - 1)), [n - 1])
    with pytest.raises(RuntimeError, match="BroadcastGlobalVariablesCallback"):
        hvd.broadcast_global_variables(0)
