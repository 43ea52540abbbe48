"""kolo's Keras 2 tests: kolo.tensorflow.keras where tf.keras is tf_keras
(TF_USE_LEGACY_KERAS=1, set by the test command), run on every rank of a
kolorun job: each test is collective, so every rank runs the same tests in
the same order, and every rank computes the expected results itself."""
import os
import sys

import pytest

import kolo.tensorflow.keras as hvd

# training_reference.py, shared with the other frameworks' tests, is one folder up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session", autouse=True)
def world():
    hvd.init()
    yield
    hvd.shutdown()
