"""kolo.keras's tests, run on every rank of a kolorun job on one Keras
backend (KERAS_BACKEND=tensorflow or torch, set by the test command): each
test is collective, so every rank runs the same tests in the same order,
and every rank computes the expected results itself."""
import os
import sys

import pytest

import kolo.keras as hvd


# training_reference.py, shared with the other framework's tests, is one folder up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session", autouse=True)
def world():
    hvd.init()
    yield
    hvd.shutdown()
