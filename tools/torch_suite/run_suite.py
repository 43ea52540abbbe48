"""PyTorch's own torch.distributed conformance suite (the module behind
torch's test/distributed/test_distributed_spawn.py, shipped in the torch
2.13 wheel as torch.testing._internal.distributed.distributed_test) for
the backend named by $BACKEND. Collected by pytest
(tools/torch_suite/run.sh); each test starts $WORLD_SIZE ranks that have
imported this file (once, in a fork server, or each for itself when
spawned), so everything here runs in the ranks too.
"""
import multiprocessing
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

# As test_distributed_spawn.py: TestDistBackend starts the ranks, each of
# which init_process_group(BACKEND)s on a FileStore and runs the one test.
# No test is added, removed or skipped here: every backend runs the same
# list, and what the suite itself skips per backend (BACKEND != "gloo"...)
# shows in the report as skips.
#
# How the ranks start: TORCH_SUITE_START=spawn as the suite does (every rank
# a fresh interpreter that imports torch and this file: 2-4 s a test), or
# forkserver (the default): each rank forks from a server that imported this
# file once, so a test costs its own work only (the CI part, 58 tests, went
# from 465 s to 20 s on 2 cores). The ranks are fresh processes either way.
# The fork takes the test's environment along (the suite makes a new
# TEMP_DIR and INIT_METHOD per test, and distributed_test reads INIT_METHOD
# once, at import).
START = os.environ.get("TORCH_SUITE_START", "forkserver")
if START not in ("spawn", "forkserver"):
    raise SystemExit(f"TORCH_SUITE_START={START}: spawn or forkserver")
multiprocessing.set_forkserver_preload([__name__])


class _ForkedRank(multiprocessing.get_context("forkserver").Process):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._environ = dict(os.environ)  # the test's, pickled to the rank

    def run(self):
        os.environ.clear()
        os.environ.update(self._environ)
        _dt.INIT_METHOD = os.environ.get("INIT_METHOD", "env://")
        super().run()


class TestDistBackendWithSpawn(_dt.TestDistBackend, _dt.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if START == "forkserver":
            self._start_processes(_ForkedRank)
        else:
            self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()
