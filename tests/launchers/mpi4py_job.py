"""kolo started the way NCCL users start it with mpi4py, under the real
mpirun: rank 0's kolo_get_unique_id travels to the others through
MPI.COMM_WORLD.bcast, every rank calls kolo_comm_init_rank (the C API,
through ctypes), and an allreduce of the same NumPy arrays through kolo and
through MPI's Allreduce must agree exactly (integer-valued data: every
summation order gives the same sums). Then the same through Horovod's
spelling, kolo.init(comm=MPI.COMM_WORLD). Prints "mpi4py rank R of N ok".
"""
import ctypes

import numpy as np
from mpi4py import MPI

import kolo
from kolo._library import DTYPE_CODES, OP_MAX, OP_SUM, UniqueId, check, lib

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()

# The C API's own start (ncclGetUniqueId / MPI_Bcast / ncclCommInitRank).
ident = UniqueId()
if rank == 0:
    check(lib.kolo_get_unique_id(ctypes.byref(ident)))
raw = world.bcast(bytes(ident) if rank == 0 else None, root=0)
ctypes.memmove(ctypes.addressof(ident), raw, ctypes.sizeof(ident))
comm = ctypes.c_void_p()
check(lib.kolo_comm_init_rank(ctypes.byref(comm), size, ctypes.byref(ident), rank, None))
lib.kolo_allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                               ctypes.c_int]
for dtype, n, op, mpi_op in [(np.float32, 100003, OP_SUM, MPI.SUM), (np.float64, 4097, OP_MAX, MPI.MAX),
                             (np.int32, 1 << 20, OP_SUM, MPI.SUM)]:
    x = ((np.arange(n) * (rank + 3)) % 1000).astype(dtype)
    by_kolo, by_mpi = np.empty_like(x), np.empty_like(x)
    check(lib.kolo_allreduce(comm, x.ctypes.data, by_kolo.ctypes.data, n, DTYPE_CODES[np.dtype(dtype).name], op))
    world.Allreduce(x, by_mpi, op=mpi_op)
    assert np.array_equal(by_kolo, by_mpi), (dtype, np.flatnonzero(by_kolo != by_mpi)[:5])
lib.kolo_comm_destroy(comm)

# Horovod's spelling: hvd.init(comm=MPI.COMM_WORLD).
kolo.init(comm=world)
assert (kolo.rank(), kolo.size()) == (rank, size)
x = np.full(10, float(rank + 1))
assert np.array_equal(kolo.allreduce(x, op=kolo.Sum), np.full(10, size * (size + 1) / 2))
kolo.shutdown()
print("mpi4py rank %d of %d ok" % (rank, size), flush=True)
