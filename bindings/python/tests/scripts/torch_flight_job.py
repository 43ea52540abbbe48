"""One rank of a torch.distributed job on kolo whose last rank passes 11
elements instead of 10 at its fifth allreduce, for
test_torch_flight_record.py (started rank by rank):

    torch_flight_job.py RENDEZVOUS_FILE RANK SIZE

With KOLO_FLIGHT_RECORDER_DIR set, every rank's record is written when the
mismatch fails the group. Prints "rank R: ok" or "rank R: RuntimeError: ..."."""
import datetime
import sys

import torch
import torch.distributed as dist

import kolo.torch  # noqa: F401

path, rank, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("kolo", init_method="file://" + path, rank=rank, world_size=size,
                        timeout=datetime.timedelta(seconds=10))
try:
    for step in range(6):
        dist.all_reduce(torch.ones(11 if (rank == size - 1 and step == 4) else 10))
    print("rank %d: ok" % rank, flush=True)
except RuntimeError as e:
    print("rank %d: RuntimeError: %s" % (rank, str(e).splitlines()[0]), flush=True)
dist.destroy_process_group()
