"""The kolo backend of torch.distributed on jobs started here, rank by rank,
with no launcher (so that a rank may die without the others being ended):
every init method, and failures (a dead rank, a late one past the timeout,
ranks that disagree) that raise RuntimeError with kolo's message on every
surviving rank, within seconds."""
import os
import re
import subprocess
import sys

import pytest

from rank_by_rank import finish, free_port, start

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "torch_distributed_job.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def run_job(init_method, size, scenario):
    """{rank: its output line}, and every rank's exit status."""
    return finish(start(SCRIPT, lambda r: [init_method, r, size, scenario], size))


@pytest.mark.parametrize("how", ["tcp", "file", "store"])
def test_every_init_method(tmp_path, how):
    init = {"tcp": "tcp://127.0.0.1:%d" % free_port(), "file": "file://%s" % (tmp_path / "rendezvous"),
            "store": "store:127.0.0.1:%d" % free_port()}[how]
    lines, codes, out = run_job(init, 3, "sum")
    assert lines == {0: "ok", 1: "ok", 2: "ok"} and codes == [0, 0, 0], out


def failures(lines, ranks):
    """(seconds, message) of each rank's RuntimeError."""
    found = {}
    for r in ranks:
        m = re.match(r"RuntimeError after (\S+) s: (.*)", lines.get(r, ""))
        assert m, "rank %d raised no RuntimeError: %r" % (r, lines.get(r))
        found[r] = (float(m.group(1)), m.group(2))
    return found


def test_a_dead_rank_fails_the_others_at_once(tmp_path):
    lines, codes, out = run_job("file://%s" % (tmp_path / "rendezvous"), 3, "death")
    assert codes[2] == 3, out
    for seconds, message in failures(lines, [0, 1]).values():
        assert seconds < 4, out  # well before the 5 s timeout: the connection's loss says it
        assert re.search(r"(PEER_LOST|ABORTED|TIMEOUT): allreduce", message), out
        assert "rank 2" in message, out


def test_a_late_rank_times_out_everywhere(tmp_path):
    lines, codes, out = run_job("tcp://127.0.0.1:%d" % free_port(), 2, "timeout")
    found = failures(lines, [0, 1])
    seconds, message = found[0]
    assert 4.5 < seconds < 8, out  # init_process_group's timeout is kolo's deadline
    # Worded as gloo's and NCCL's timeouts are ("Timed out"), then kolo's own message.
    assert message.startswith("kolo: Timed out after 5 s (the process group's timeout): TIMEOUT: allreduce on "
                              "rank 0: no progress before the deadline"), out
    assert re.search(r"(PEER_LOST|TIMEOUT|ABORTED): ", found[1][1]), out


def test_ranks_that_disagree_both_learn_it(tmp_path):
    lines, codes, out = run_job("file://%s" % (tmp_path / "rendezvous"), 2, "mismatch")
    for _, message in failures(lines, [0, 1]).values():
        assert message.startswith("MISMATCH: allreduce on rank"), out
        assert "count=10" in message and "count=11" in message, out
    assert codes == [0, 0], out


def test_the_ddp_benchmark_runs():
    """bench/ddp_bench.py on a small model: both backends, one line each."""
    cmd = [sys.executable, os.path.join(REPO, "tools", "kolorun"), "-np", "2", "--timeout", "200", sys.executable,
           os.path.join(REPO, "bench", "ddp_bench.py"), "--params", "2e5", "--width", "256", "--steps", "2",
           "--rounds", "1"]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    assert done.returncode == 0, done.stdout
    for backend in ("kolo", "gloo"):
        assert re.search(r"^\[0\] %s +[0-9.]+ +[0-9]+%%$" % backend, done.stdout, re.M), done.stdout
    assert re.search(r"^\[0\] kolo/gloo speedup per step: [0-9.]+x$", done.stdout, re.M), done.stdout


def test_torchrun_restarts_meet_again_cleanly():
    """torchrun --max-restarts 2: a worker dies on the first attempt; the
    restarted workers meet again on kolo (the agent's store, a prefix per
    attempt). (torchrun --nnodes 1:2 with the c10d rendezvous does the
    same, but names the master by the host's name, which this sandbox
    cannot reach.)"""
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [torchrun, "--nproc_per_node", "2", "--max-restarts", "2", "--master_addr", "127.0.0.1", "--master_port",
           str(free_port()), "--redirects", "2", "--tee", "3",
           os.path.join(HERE, "scripts", "torch_elastic_restart.py")]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    assert done.returncode == 0, done.stdout
    for r in (0, 1):
        assert re.search(r"rank %d: attempt 1 done" % r, done.stdout), done.stdout
    assert "attempt 0 done" not in done.stdout, done.stdout
