"""A small data-parallel training, the same on every launcher: a linear
model fits y = x.w + b with full-batch SGD. Each rank trains on its equal
slice of the batch and the gradients are averaged, so every rank must end
with the weights one process reaches on the whole batch (up to float32
rounding): one_process_weights() is that reference.

Used by test_ray.py and test_spark.py, from Ray actors and Spark tasks, in
torch, TensorFlow and Keras, each from the same data and starting weights."""
import torch

STEPS, LR, SAMPLES = 30, 0.1, 64


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 4, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [3.0], [0.5]]) + 0.25
    return x, y


def _model():
    torch.manual_seed(1)
    return torch.nn.Linear(4, 1)


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()


def _shard(x, y, rank, size):
    n = SAMPLES // size
    return x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]


def one_process_weights():
    x, y = _data()
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return _weights(model)


def horovod_training():
    """kolo.torch's Horovod API, as a Horovod program is written."""
    import kolo.torch as hvd
    hvd.init()
    x, y = _shard(*_data(), hvd.rank(), hvd.size())
    model = _model()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    for _ in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    where = {"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(), "local_size": hvd.local_size(),
             "cross_rank": hvd.cross_rank(), "cross_size": hvd.cross_size(), "weights": _weights(model)}
    hvd.shutdown()
    return where


def _start_numpy():
    """The torch model's starting weights, as (4x1 kernel, bias) arrays."""
    start = _model()
    return start.weight.detach().numpy().T.copy(), start.bias.detach().numpy().copy()


def tensorflow_training():
    """kolo.tensorflow's Horovod API, as a TensorFlow 2 program is written:
    the same fit with a DistributedGradientTape and plain SGD steps."""
    import tensorflow as tf

    import kolo.tensorflow as hvd
    hvd.init()
    x, y = (tf.constant(t.numpy()) for t in _shard(*_data(), hvd.rank(), hvd.size()))
    kernel, bias = _start_numpy()
    w, b = tf.Variable(kernel), tf.Variable(bias)
    hvd.broadcast_variables([w, b], root_rank=0)
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        grad_w, grad_b = hvd.DistributedGradientTape(tape).gradient(loss, [w, b])
        w.assign_sub(LR * grad_w)
        b.assign_sub(LR * grad_b)
    return {"rank": hvd.rank(), "size": hvd.size(),
            "weights": w.numpy().T.flatten().tolist() + b.numpy().tolist()}


def keras_training():
    """kolo.keras's Horovod API on a Keras model: compile with the
    DistributedOptimizer, fit with the broadcast callback."""
    import keras

    import kolo.keras as hvd
    hvd.init()
    x, y = (t.numpy() for t in _shard(*_data(), hvd.rank(), hvd.size()))
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.layers[0].set_weights(list(_start_numpy()))
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(learning_rate=LR)), loss="mse")
    model.fit(x, y, batch_size=len(x), epochs=STEPS, shuffle=False, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    kernel, bias = model.layers[0].get_weights()
    return {"rank": hvd.rank(), "size": hvd.size(), "weights": kernel.T.flatten().tolist() + bias.tolist()}


def torch_distributed_training():
    """torch.distributed on the "kolo" backend with DDP (the process group
    from the launcher's environment, env://)."""
    import torch.distributed as dist

    import kolo.torch  # noqa: F401  (registers the backend)
    if not dist.is_initialized():
        dist.init_process_group("kolo")
    rank, size = dist.get_rank(), dist.get_world_size()
    x, y = _shard(*_data(), rank, size)
    model = torch.nn.parallel.DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    weights = _weights(model.module)
    dist.destroy_process_group()
    return {"rank": rank, "size": size, "weights": weights}


def elastic_training(holds=(), hold_limit_s=120):
    """horovod_training as an elastic job (kolo.torch.elastic, a commit a
    step), from ElasticRayExecutor: with every rank's shard the same size,
    the averaged gradient is the whole batch's whatever the number of
    workers, so the workers that finish hold one_process_weights() however
    the job grew and shrank on the way. holds: (step, size) pairs: after
    that step the worker waits while the job has that many workers, until
    the hosts change (how a test makes a change land mid-training, not
    after it). Each step is logged through kolo.ray.ray_logger."""
    import os
    import time

    import kolo.torch as hvd
    from kolo.ray import ray_logger
    hvd.init()
    x_all, y_all = _data()
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters())
    ray_logger.log({"started": True, "pid": os.getpid()})

    @hvd.elastic.run
    def train(state):
        while state.step < STEPS:  # state.step: the steps taken, committed with the weights after them
            x, y = _shard(x_all, y_all, hvd.rank(), hvd.size())
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            state.step += 1
            ray_logger.log({"step": state.step, "size": hvd.size(), "rank": hvd.rank(), "pid": os.getpid()})
            state.commit()
            deadline = time.monotonic() + hold_limit_s
            while (state.step, hvd.size()) in holds:
                if time.monotonic() > deadline:
                    raise RuntimeError("the hosts did not change within %s s at step %d" % (hold_limit_s, state.step))
                time.sleep(0.05)
                state.check_host_updates()  # raises once they have changed
        ray_logger.log({"finished": True, "pid": os.getpid()})

    state = hvd.elastic.TorchState(model, opt, step=0)
    train(state)
    return {"rank": hvd.rank(), "size": hvd.size(), "weights": _weights(model)}
