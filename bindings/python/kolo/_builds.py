"""Horovod's questions about how it was built, answered for kolo: it has no
MPI, Gloo, NCCL, DDL, oneCCL, CUDA or ROCm inside, so every answer is
False (Horovod's tests that need MPI then skip)."""


def mpi_threads_supported():
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False
