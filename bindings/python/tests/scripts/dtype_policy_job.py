"""One rank of a job started rank by rank (by test_dtype_policy.py):
`dtype_policy_job.py RANK SIZE KOLO_PORT TORCH_PORT` runs every case of
dtype_policy_paths on every path, among the job's ranks, and prints
"rank R: ok N" (N: the cases run, on every path) or "rank R: failed PATH CASE: message"
for the first case that failed."""
import os
import sys

rank, size, kolo_port, torch_port = (int(a) for a in sys.argv[1:5])
os.environ.update(KOLO_RANK=str(rank), KOLO_WORLD_SIZE=str(size), KOLO_MASTER_ADDR="127.0.0.1",
                  KOLO_MASTER_PORT=str(kolo_port))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # dtype_policy_paths
import torch.distributed as dist  # noqa: E402

import kolo  # noqa: E402
from dtype_policy_paths import CASES, PATHS, check  # noqa: E402

kolo.init()
# Its waits' deadline: KOLO_TIMEOUT_S, as the runtime's.
dist.init_process_group("kolo", init_method="tcp://127.0.0.1:%d" % torch_port, rank=rank, world_size=size)
checked = 0
try:
    for path in PATHS:
        for case in CASES:
            where = "%s %s" % (path.name, "/".join(case))
            checked += check(path, *case, rank=rank, size=size)
    print("rank %d: ok %d" % (rank, checked), flush=True)
except Exception as e:  # any: reported to the test, which fails
    print("rank %d: failed %s: %s: %s" % (rank, where, type(e).__name__, str(e).replace("\n", " ")), flush=True)
dist.destroy_process_group()
kolo.shutdown()
