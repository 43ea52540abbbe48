"""kolorun --bind-to: which cores each of a host's ranks gets (the rule,
supervisor.core_shares, on made-up hosts), and that the ranks kolorun starts
run on them (kolorun itself, its ranks printing the cores they may use)."""
import os
import subprocess
import sys

import pytest

from kolo.runner.supervisor import core_shares, start_on

KOLORUN = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "tools", "kolorun")


@pytest.mark.parametrize("cores, ranks, shares", [
    # A core each, or consecutive ranks sharing one.
    ([0, 1], 2, [[0], [1]]),
    ([0, 1], 3, [[0], [0], [1]]),
    ([0, 1], 4, [[0], [0], [1], [1]]),
    ([0, 1], 8, [[0]] * 4 + [[1]] * 4),
    ([2, 5], 4, [[2], [2], [5], [5]]),  # the cores the launcher may use, whatever their numbers
    ([0, 1, 2, 3], 6, [[0], [0], [1], [2], [2], [3]]),
    ([7], 3, [[7], [7], [7]]),
    # Several cores a rank: left to the scheduler.
    ([0, 1], 1, None),
    (list(range(8)), 2, None),
    (list(range(8)), 7, None),
])
def test_auto_binds_where_a_rank_gets_a_core_or_less(cores, ranks, shares):
    assert core_shares("auto", cores, ranks) == shares


@pytest.mark.parametrize("cores, ranks, shares", [
    (list(range(8)), 2, [[0, 1, 2, 3], [4, 5, 6, 7]]),
    (list(range(8)), 3, [[0, 1], [2, 3, 4], [5, 6, 7]]),
    ([0, 1], 1, [[0, 1]]),
    ([0, 1], 2, [[0], [1]]),
    ([0, 1], 3, [[0], [0], [1]]),
    ([0, 1, 2, 3], 6, [[0], [0], [1], [2], [2], [3]]),
])
def test_core_gives_every_rank_a_run_of_consecutive_cores(cores, ranks, shares):
    assert core_shares("core", cores, ranks) == shares
    # Every core goes to some rank.
    assert sorted({c for share in shares for c in share}) == cores


def test_none_and_degenerate_hosts_bind_nothing():
    assert core_shares("none", [0, 1], 4) is None
    assert core_shares("core", [0, 1], 0) is None
    assert core_shares("auto", [], 4) is None


def test_a_process_starts_on_its_cores_and_the_starter_keeps_its_own():
    own = os.sched_getaffinity(0)
    first = min(own)
    run, bound = start_on([first], lambda: subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"], capture_output=True, text=True))
    assert bound and run.stdout.strip() == "[%d]" % first
    assert os.sched_getaffinity(0) == own


def test_a_host_that_forbids_binding_starts_the_process_unbound(monkeypatch):
    def refuse(pid, cores):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "sched_setaffinity", refuse)
    assert start_on([0], lambda: "started") == ("started", False)


def two_cores():
    """Two of the cores this process may use: the tests start kolorun on them."""
    allowed = sorted(os.sched_getaffinity(0))
    assert len(allowed) >= 2, "this test needs two cores to share among the ranks"
    return allowed[:2]


def kolorun(tmp_path, cores, *argv):
    """kolorun with `argv`, started from a process allowed `cores`; it must succeed."""
    run = subprocess.run([sys.executable, KOLORUN] + list(argv), cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, preexec_fn=lambda: os.sched_setaffinity(0, cores))
    assert run.returncode == 0, run.stderr
    return run


def ranks_cores(tmp_path, cores, *argv):
    """{rank: the cores it may run on} of a job kolorun starts from a process
    allowed `cores`."""
    program = "import os; print(os.environ['KOLO_RANK'], ','.join(map(str, sorted(os.sched_getaffinity(0)))))"
    run = kolorun(tmp_path, cores, "--no-prefix", *argv, sys.executable, "-c", program)
    got = dict(line.split() for line in run.stdout.splitlines())
    return {int(rank): [int(c) for c in listed.split(",")] for rank, listed in got.items()}


def test_kolorun_verbose_says_where_it_bound_the_ranks(tmp_path):
    a, b = two_cores()
    run = kolorun(tmp_path, [a, b], "-np", "4", "--verbose", "true")
    assert ("kolorun: host localhost: ranks bound to cores (--bind-to auto): 0 on %d, 1 on %d, 2 on %d, 3 on %d\n"
            % (a, a, b, b)) in run.stderr
    run = kolorun(tmp_path, [a, b], "-np", "4", "--verbose", "--bind-to", "none", "true")
    assert "bound" not in run.stderr, run.stderr


def test_kolorun_starts_its_ranks_on_their_cores(tmp_path):
    a, b = two_cores()
    assert ranks_cores(tmp_path, [a, b], "-np", "4") == {0: [a], 1: [a], 2: [b], 3: [b]}
    assert ranks_cores(tmp_path, [a, b], "-np", "3") == {0: [a], 1: [a], 2: [b]}
    assert ranks_cores(tmp_path, [a, b], "-np", "1") == {0: [a, b]}
    assert ranks_cores(tmp_path, [a, b], "-np", "4", "--bind-to", "none") == {r: [a, b] for r in range(4)}
    assert ranks_cores(tmp_path, [a, b], "-np", "1", "--bind-to", "core") == {0: [a, b]}
