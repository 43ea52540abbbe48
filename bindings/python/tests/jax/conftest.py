"""kolo.jax's tests, run on every rank of a kolorun job (2 and 3 ranks):
each test is collective, so every rank runs the same tests in the same
order, and every rank computes the expected results itself, with NumPy,
from every rank's data (which each rank can make). float64 is on, for the
finite differences."""
import jax
import pytest

jax.config.update("jax_enable_x64", True)

import kolo.jax as hvd  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def world():
    hvd.init()
    yield
    hvd.shutdown()
