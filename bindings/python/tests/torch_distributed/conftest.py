"""The tests run on every rank of a job started by torchrun or kolorun
(`torchrun --standalone --nproc_per_node N --no_python python3 -m pytest
...`): torch.distributed's default group is kolo's, and a gloo group over
the same ranks gives the reference each kolo result is compared with, in
the same job. Every test is collective: all ranks run the same tests in the
same order."""
import datetime

import pytest
import torch
import torch.distributed as dist

import kolo.torch  # noqa: F401  (registers the backend)

# The dtypes the tests move. Every result is compared with a reference
# computed here and, where gloo handles the dtype (not bfloat16, nor bool
# in every operation), with gloo's result too.
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64, torch.bool]


@pytest.fixture(scope="session", autouse=True)
def kolo_world():
    dist.init_process_group(backend="kolo", timeout=datetime.timedelta(seconds=60))
    yield
    dist.destroy_process_group()


@pytest.fixture(scope="session")
def gloo():
    return dist.new_group(backend="gloo")


def values(rank, shape, dtype, seed=0):
    """Rank rank's input: small integers, so that sums, products, minima and
    maxima are exact in every dtype (float16 and bfloat16 included)."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    low = 0 if dtype == torch.uint8 else -2
    return torch.randint(low, 3, shape, generator=g).to(dtype)
