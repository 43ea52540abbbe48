"""Prints, comma-separated, the suite's tests that its decorators skip for
BACKEND (default kolo) but run for gloo: those it reserves for gloo by
name or by feature set. For TORCH_SUITE_UNSKIP, so that both backends run
the same list:

  TORCH_SUITE_UNSKIP=$(.venv/bin/python tools/torch_suite/gloo_reserved.py) \\
      tools/torch_suite/run.sh kolo 2

Each backend's view comes from importing the suite in a fresh interpreter
with that backend declared, as run_suite.py does.
"""
import json
import os
import subprocess
import sys

_PROBE = r"""
import json, os, sys
sys.path.insert(0, os.environ["SUITE_DIR"])
import run_suite
base = run_suite._dt.DistributedTest._DistTestBase
print(json.dumps(sorted(n for n in dir(base) if n.startswith("test_")
                        and getattr(getattr(base, n), "__unittest_skip__", False))))
"""


def skipped_for(backend):
    here = os.path.dirname(os.path.abspath(__file__))
    # As run.sh's ranks: this tree's kolo.torch, and a file:// INIT_METHOD (some skip decorators read
    # its scheme).
    python_dir = os.environ.get("KOLO_PYTHON_DIR", os.path.join(here, "..", "..", "bindings", "python"))
    env = dict(os.environ, BACKEND=backend, WORLD_SIZE=os.environ.get("WORLD_SIZE", "2"), SUITE_DIR=here,
               TORCH_SUITE_UNSKIP="", INIT_METHOD=os.environ.get("INIT_METHOD", "file:///tmp/"),
               PYTHONPATH=os.pathsep.join(filter(None, [python_dir, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, check=True,
                         capture_output=True, text=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "kolo"
    print(",".join(sorted(skipped_for(backend) - skipped_for("gloo"))))
