"""The tests run on every rank of a kolorun job (`kolorun -np N python3 -m
pytest ...`): each test is collective, so every rank runs the same tests in
the same order. Rank r's inputs are a function of r alone, so every rank
can compute the expected result of a collective by itself, in NumPy."""
import numpy as np
import pytest
import torch

import kolo
import kolo.torch


@pytest.fixture(scope="session", autouse=True)
def world():
    kolo.init()
    yield
    kolo.shutdown()


def inputs(rank, shape, dtype_name, seed=0):
    """Rank rank's values: small integers, so that sums, products and means
    are exact in every dtype (including float16 and bfloat16)."""
    rng = np.random.default_rng(1000 * seed + rank)
    if dtype_name == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    lo = 0 if dtype_name.startswith("uint") else -3
    values = rng.integers(lo, 4, size=shape)
    if dtype_name.startswith("complex"):
        return values + 1j * rng.integers(-3, 4, size=shape)
    return values


class NumpyFront:
    """kolo's own API on NumPy arrays."""
    name = "numpy"
    api = kolo
    dtypes = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "float32",
              "float64", "bool", "complex64", "complex128"]

    @staticmethod
    def make(values, dtype_name):
        return np.asarray(values).astype(dtype_name)

    @staticmethod
    def numpy(x):
        return np.asarray(x)

    @staticmethod
    def transposed(x):
        return x.T


_TORCH_DTYPES = {"uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
                 "int64": torch.int64, "float16": torch.float16, "bfloat16": torch.bfloat16,
                 "float32": torch.float32, "float64": torch.float64, "bool": torch.bool,
                 "complex64": torch.complex64, "complex128": torch.complex128}


class TorchFront:
    """kolo.torch on CPU tensors: every dtype torch has on CPU."""
    name = "torch"
    api = kolo.torch
    dtypes = list(_TORCH_DTYPES)

    @staticmethod
    def make(values, dtype_name):
        values = np.asarray(values)
        if dtype_name == "bfloat16":
            return torch.tensor(values.astype(np.float32)).to(torch.bfloat16)
        return torch.tensor(values.astype(dtype_name if dtype_name != "bool" else bool))

    @staticmethod
    def numpy(x):
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()

    @staticmethod
    def transposed(x):
        return x.t()


FRONTS = [NumpyFront, TorchFront]
