"""What the TensorFlow and Keras training tests compare against: each rank
trains on its part of a global batch, and the result must equal one
process training on the whole batch (plain NumPy SGD, computed by every
rank itself)."""
import numpy as np

STEPS, LOCAL_BATCH, FEATURES = 4, 3, 5


def global_batch(step, n):
    """The step's data: rank r's part is rows [r * LOCAL_BATCH, (r + 1) * LOCAL_BATCH)."""
    rng = np.random.default_rng(100 + step)
    x = rng.standard_normal((n * LOCAL_BATCH, FEATURES)).astype(np.float32)
    y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32) + 0.5)[:, None]
    return x, y


def local_data(rank, n, steps=STEPS):
    """Rank rank's batches, one after another: a fit's batch k is its part
    of global batch k."""
    parts = [global_batch(s, n) for s in range(steps)]
    sl = slice(rank * LOCAL_BATCH, (rank + 1) * LOCAL_BATCH)
    return np.concatenate([x[sl] for x, _ in parts]), np.concatenate([y[sl] for _, y in parts])


def local_part(array, rank):
    return array[rank * LOCAL_BATCH:(rank + 1) * LOCAL_BATCH]


def initial_weights(seed):
    """A linear model's kernel and bias; seed 0's are the reference's start."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((FEATURES, 1)).astype(np.float32), np.zeros([1], np.float32)]


def reference_sgd(lr, n, steps=STEPS, accumulate=1, average_accumulated=False):
    """One process: SGD on the mean squared error of each global batch
    (accumulate > 1: the gradients of that many batches summed, or averaged,
    per update)."""
    w, b = [v.astype(np.float64) for v in initial_weights(0)]
    gw, gb = np.zeros_like(w), np.zeros_like(b)
    for step in range(steps):
        x, y = global_batch(step, n)
        err = x @ w + b - y
        gw += 2 * x.T @ err / len(x)
        gb += 2 * err.mean(0)
        if (step + 1) % accumulate == 0:
            scale = 1.0 / accumulate if average_accumulated else 1.0
            w, b = w - lr * scale * gw, b - lr * scale * gb
            gw, gb = np.zeros_like(w), np.zeros_like(b)
    return w, b
