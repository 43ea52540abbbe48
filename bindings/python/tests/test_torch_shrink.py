"""torch.distributed.shrink_group (torch 2.13) on the kolo backend: torch's
own shrink tests (those of test/distributed/test_c10d_nccl.py, which need
NCCL and CUDA, run here on the CPU by scripts/torch_shrink_job.py), and the
case shrinking is for: a rank that dies or stops mid-training is shrunk
away and the others train on. Each job is started rank by rank, with no
launcher, so that a rank may die without the others being ended."""
import os
import signal
import time

import pytest

from rank_by_rank import finish, start

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "torch_shrink_job.py")


@pytest.fixture(scope="module", autouse=True)
def backend_shim_built():
    """kolo's shrink goes through its c10d Backend shim, which torch compiles
    on first use (tens of seconds on 2 cores): built here once, before any
    job, so that no job's timings include it, whichever test runs first."""
    from kolo.torch import _device_backend
    _device_backend._load()


def start_job(tmp_path, backend, size, scenario, **env):
    rendezvous = tmp_path / "rendezvous"
    return start(SCRIPT, lambda r: [backend, rendezvous, r, size, scenario], size, **env)


def facts(line):
    return dict(kv.split("=", 1) for kv in line.split()[1:])


# torch's test_shrink_group_* (their world sizes: at least 2, 3 or 4). The
# default run takes the basic one and the validation of bad arguments; the
# rest of torch's tests are the extended set's (the dead and stopped ranks
# below shrink in the default run too).
@pytest.mark.parametrize("scenario,size", [
    ("basic", 3), ("validation", 2),
    *[pytest.param(s, n, marks=pytest.mark.extended) for s, n in [
        ("backend_properties", 3), ("multiple_comms", 3), ("flags", 3),
        ("multiple_exclusions", 4), ("multiple_iterations", 4), ("vs_reinit", 3)]]])
def test_torchs_shrink_tests(tmp_path, scenario, size):
    lines, codes, out = finish(start_job(tmp_path, "kolo", size, scenario))
    assert codes == [0] * size and all(lines.get(r, "").startswith("ok") for r in range(size)), out


@pytest.mark.parametrize("victim", [1, 0])  # 0: the rank whose process serves kolo's store
def test_a_dead_rank_is_shrunk_away_and_training_goes_on(tmp_path, victim):
    lines, codes, out = finish(start_job(tmp_path, "kolo", 4, "dead" if victim else "dead0"))
    assert codes[victim] == -signal.SIGKILL, out
    for r in set(range(4)) - {victim}:
        assert codes[r] == 0 and lines[r].startswith("ok"), out
        f = facts(lines[r])
        # Found by the connection's loss, not the 20 s timeout; the shrink
        # waits for no one.
        assert float(f["detect_s"]) < 10 and float(f["reconfigure_s"]) < 10, out


@pytest.mark.parametrize("victim", [1, 0])
def test_a_stopped_rank_is_shrunk_away_and_fails_when_woken(tmp_path, victim):
    procs = start_job(tmp_path, "kolo", 3, "stuck" if victim else "stuck0", SHRINK_JOB_TIMEOUT_S="3")
    survivors = [p for r, p in enumerate(procs) if r != victim]
    deadline = time.monotonic() + 90
    while any(p.poll() is None for p in survivors) and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(procs[victim].pid, signal.SIGCONT)
    lines, codes, out = finish(procs)
    assert codes == [0, 0, 0], out
    assert facts(lines[victim])["woken"] == "failed", out
    for r in set(range(3)) - {victim}:
        assert 2 < float(facts(lines[r])["detect_s"]) < 15, out  # its 3 s deadline


def test_gloo_reconfigures_by_forming_a_new_group(tmp_path):
    """The reference: gloo cannot shrink; its survivors destroy the group and
    form a new one. Times printed beside kolo's (pytest -s)."""
    lines, codes, out = finish(start_job(tmp_path, "gloo", 4, "dead"))
    assert [codes[r] for r in (0, 2, 3)] == [0, 0, 0], out
    print("gloo after a death: %s" % {r: lines[r] for r in (0, 2, 3)})


def test_a_build_killed_midway_leaves_no_lock_that_blocks_the_next_load(tmp_path):
    """cpp_extension waits, without end, while its build folder holds the
    lock file of a build: one killed midway leaves it. kolo's own lock,
    which a process's end drops, tells that it is stale."""
    import subprocess
    import sys
    from kolo._native_build import build_lock
    from kolo.torch import _device_backend
    folder = os.path.dirname(_device_backend._load().__file__)
    # What a killed build leaves, made as it would be: under kolo's lock
    # (other tests' ranks may be loading the backend meanwhile).
    with build_lock(folder + ".lock", "the test's stale lock"):
        open(os.path.join(folder, "lock"), "w").close()
    done = subprocess.run([sys.executable, "-c", "from kolo.torch import _device_backend as d; d._load()"],
                          timeout=120, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode == 0, done.stdout
    assert not os.path.exists(os.path.join(folder, "lock"))


def test_a_build_lock_held_past_its_deadline_is_an_error_naming_the_build(tmp_path):
    import subprocess
    import sys
    from kolo._native_build import build_lock
    path = str(tmp_path / "x.lock")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from kolo._native_build import build_lock\n"
                               "with build_lock(sys.argv[1], 'x'):\n    print('held', flush=True); time.sleep(30)",
                               path], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="build of the test's build"):
            with build_lock(path, "the test's build", timeout_s=0.5):
                pass
        assert time.monotonic() - started < 5
    finally:
        holder.kill()
        holder.wait()
    with build_lock(path, "the test's build", timeout_s=5):  # its holder's end dropped it
        pass
