"""PyTorch's own torch.distributed conformance suite (the module behind
torch's test/distributed/test_distributed_spawn.py, shipped in the torch
2.13 wheel as torch.testing._internal.distributed.distributed_test) for
the backend named by $BACKEND. Collected by pytest
(tools/torch_suite/run.sh); each test spawns $WORLD_SIZE ranks that
re-import this file, so everything here runs in the ranks too.
"""
import os

import torch
from torch.testing._internal.common_distributed import DistTestCases

BACKEND = os.environ["BACKEND"]
_BUILTIN = ("gloo", "nccl", "mpi", "ucc")

if BACKEND not in _BUILTIN:
    # Registers the plugin ("kolo" via `import kolo.torch`; another plugin's
    # module may be named by TORCH_SUITE_IMPORT).
    __import__(os.environ.get("TORCH_SUITE_IMPORT", "kolo.torch"))
    # Declared before distributed_test is imported: its skip decorators read
    # these sets at import. "plugin" is how the suite knows a third-party
    # backend (test_Backend_enum_class and friends); "ddp" because the
    # backend claims DistributedDataParallel works, so the DDP tests that run
    # for gloo run for it too instead of being skipped as unsupported. The
    # GPU feature sets are left alone: their tests need GPUs anyway.
    for feature in os.environ.get("TORCH_SUITE_FEATURES", "plugin,ddp").split(","):
        DistTestCases.backend_feature[feature].add(BACKEND)

from torch.testing._internal.distributed import distributed_test as _dt  # noqa: E402

# TORCH_SUITE_UNSKIP=test_a,test_b runs these tests although the suite
# skips them for this backend (it reserves some for gloo by name). Off by
# default, so the counts are the suite's own; it is there to see how a
# plugin fares on gloo's tests, and the report must say it was used.
for _name in filter(None, os.environ.get("TORCH_SUITE_UNSKIP", "").split(",")):
    getattr(_dt.DistributedTest._DistTestBase, _name).__unittest_skip__ = False

# As test_distributed_spawn.py: TestDistBackend spawns the ranks, each of
# which init_process_group(BACKEND)s on a FileStore and runs the one test.
# No test is added, removed or skipped here: every backend runs the same
# list, and what the suite itself skips per backend (BACKEND != "gloo"...)
# shows in the report as skips.


class TestDistBackendWithSpawn(_dt.TestDistBackend, _dt.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()
