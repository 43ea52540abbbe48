"""kolo.tensorflow's tests run on every rank of a kolorun job (`kolorun -np
N python -m pytest tests/tensorflow`): each test is collective, so every
rank runs the same tests in the same order. Rank r's inputs are a
function of r alone, so every rank computes the expected result of a
collective by itself, in NumPy."""
import numpy as np
import os
import sys

import pytest
import tensorflow as tf

import kolo.tensorflow as hvd


# training_reference.py, shared with the other framework's tests, is one folder up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session", autouse=True)
def world():
    hvd.init()
    yield
    hvd.shutdown()


def inputs(rank, shape, dtype_name="float64", seed=0):
    """Rank rank's values: small integers, exact in every dtype (sums,
    products and means included)."""
    rng = np.random.default_rng(1000 * seed + rank)
    if dtype_name == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    lo = 0 if dtype_name.startswith("uint") else -3
    return rng.integers(lo, 4, size=shape).astype(np.float64 if dtype_name == "bfloat16" else dtype_name)


def tensor(rank, shape, dtype_name="float64", seed=0):
    return tf.constant(inputs(rank, shape, dtype_name, seed), dtype=tf.as_dtype(dtype_name))


def both_modes(fn):
    """fn() run eagerly and inside a tf.function (a graph), results as NumPy."""
    eager = tf.nest.map_structure(lambda t: t.numpy(), fn())
    graph = tf.nest.map_structure(lambda t: t.numpy(), tf.function(fn)())
    return eager, graph
