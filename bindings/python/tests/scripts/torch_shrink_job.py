"""One rank of a torch.distributed job that shrinks its group with torch
2.13's torch.distributed.shrink_group, started by test_torch_shrink.py
without a launcher (so that a rank may die or stop without the others
being ended):

    torch_shrink_job.py BACKEND RENDEZVOUS_FILE RANK SIZE SCENARIO

The scenarios up to "vs_reinit" are torch's own shrink tests (the
test_shrink_group_* of test/distributed/test_c10d_nccl.py, which run on
NCCL and CUDA only) on the CPU with BACKEND's group; "dead" and "stuck"
are the case shrinking is for: a rank dies (kill -9) or stops (SIGSTOP)
mid-training, the others' allreduce fails, they shrink it away and train
on. On gloo, which cannot shrink, "dead" reconfigures the only way gloo
can: destroy the group, and the survivors form a new one through a new
store. Prints "rank R: ok [key=value ...]" or "rank R: FAILED: ..."."""
import datetime
import os
import signal
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

import kolo.torch  # noqa: F401

backend, rendezvous, rank, size, scenario = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("SHRINK_JOB_TIMEOUT_S", "20")))
CPU = torch.device("cpu")


def init(path=None, my_rank=None, world=None):
    store = dist.FileStore(path or rendezvous, world or size)
    dist.init_process_group(backend, store=store, rank=rank if my_rank is None else my_rank,
                            world_size=world or size, timeout=TIMEOUT)
    dist.all_reduce(torch.ones(1))  # warm up, as torch's _setup_shrink_test does
    return c10d._get_default_group()


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def all_reduce_of_ranks(group, ranks_kept):
    """torch's _test_collective_on_shrunk_group: each rank adds its old rank."""
    t = torch.full((1,), float(rank))
    dist.all_reduce(t, group=group)
    check(t.item() == sum(ranks_kept), "allreduce on the shrunk group: %s, not %s" % (t.item(), sum(ranks_kept)))


def perform_shrink(excluded, flags=c10d.SHRINK_DEFAULT):
    """torch's _perform_shrink_test: every rank sets up; the excluded ranks
    leave (aborting first with SHRINK_ABORT); the others shrink, check the
    new group's size, rank and an allreduce."""
    pg = init()
    if rank in excluded:
        if flags & c10d.SHRINK_ABORT:
            pg._get_backend(CPU).abort()
        dist.destroy_process_group()
        return {}
    shrunk = dist.shrink_group(excluded, shrink_flags=flags)
    kept = [r for r in range(size) if r not in excluded]
    check(shrunk.size() == len(kept), "size %d, not %d" % (shrunk.size(), len(kept)))
    check(shrunk.rank() == kept.index(rank), "rank %d, not %d" % (shrunk.rank(), kept.index(rank)))
    check(dist.get_world_size() == len(kept) and dist.get_rank() == kept.index(rank), "the default group is not it")
    all_reduce_of_ranks(shrunk, kept)
    dist.destroy_process_group()
    return {}


def basic():
    return perform_shrink([1])


def flags():
    return perform_shrink([1], c10d.SHRINK_ABORT)


def multiple_exclusions():
    return perform_shrink(list(range(2, size, 2)))


def validation():
    init()
    for ranks, error in (([], ValueError), ([0, 0, 1], ValueError), ([size + 1], ValueError), ([rank], RuntimeError),
                         (list(range(size)), ValueError)):
        try:
            dist.shrink_group(ranks)
        except error:
            continue
        raise AssertionError("shrink_group(%s) did not raise %s" % (ranks, error.__name__))
    try:
        dist.shrink_group([size - 1 if rank != size - 1 else 0], pg_options=object())
        raise AssertionError("pg_options were taken")
    except ValueError as e:
        check("pg_options" in str(e), str(e))
    dist.all_reduce(torch.ones(1))  # the group is unharmed
    dist.destroy_process_group()
    return {}


def backend_properties():
    """Rank 0, whose process serves kolo's rendezvous store, is the one left
    out: the store outlives its group for the others' shrink."""
    pg = init()
    before = pg._get_backend(CPU).options._timeout if rank != 0 else None
    if rank == 0:
        dist.destroy_process_group()
        return {}
    shrunk = dist.shrink_group([0])
    after = shrunk._get_backend(CPU).options._timeout
    check(before == after == TIMEOUT, "timeout before %s, after %s" % (before, after))
    all_reduce_of_ranks(shrunk, list(range(1, size)))
    dist.destroy_process_group()
    return {}


def multiple_comms():
    init()
    subgroup = dist.new_group([0, 1])
    if rank == 0:
        shrunk_sub = dist.shrink_group([1], group=subgroup)
        check(shrunk_sub.size() == 1, "subgroup of %d" % shrunk_sub.size())
        t = torch.full((1,), float(rank))
        dist.all_reduce(t, group=shrunk_sub)
        check(t.item() == 0, "subgroup allreduce %s" % t.item())
    dist.barrier()
    if rank != size - 1:
        shrunk = dist.shrink_group([size - 1])
        check(shrunk.size() == size - 1, "size %d" % shrunk.size())
        all_reduce_of_ranks(shrunk, list(range(size - 1)))
    dist.destroy_process_group()
    return {}


def multiple_iterations():
    init()
    first = [size - 1]
    if rank in first:
        dist.destroy_process_group()
        return {}
    first_pg = dist.shrink_group(first)
    check(first_pg.size() == size - 1, "first size %d" % first_pg.size())
    second = [first_pg.size() - 1]  # in the first group's numbering
    if first_pg.rank() in second:
        dist.destroy_process_group()
        return {}
    second_pg = dist.shrink_group(second, group=first_pg)
    check(second_pg.size() == size - 2, "second size %d" % second_pg.size())
    all_reduce_of_ranks(second_pg, list(range(size - 2)))
    dist.destroy_process_group()
    return {}


def vs_reinit():
    """torch's test_shrink_group_vs_abort_reinit_performance: destroying the
    group and forming it again, against shrinking it with SHRINK_ABORT."""
    init()
    start = time.perf_counter()
    dist.destroy_process_group()
    init(rendezvous + ".reinit")
    reinit = time.perf_counter() - start
    dist.destroy_process_group()
    init(rendezvous + ".shrink")
    if rank == size - 1:
        dist.destroy_process_group()
        return {}
    start = time.perf_counter()
    shrunk = dist.shrink_group([size - 1], shrink_flags=c10d.SHRINK_ABORT)
    dist.all_reduce(torch.ones(1), group=shrunk)
    shrink = time.perf_counter() - start
    all_reduce_of_ranks(shrunk, list(range(size - 1)))
    dist.destroy_process_group()
    return {"reinit_s": "%.4f" % reinit, "shrink_s": "%.4f" % shrink}


def train_through(fault, victim=1, steps=8, at=3):
    """Data-parallel steps (an allreduce of 64 Ki floats each); at step `at`
    the victim dies or stops. The others' allreduce fails; they shrink the
    victim away (on gloo: a new group through a new store) and finish the
    steps. Reports how long the failing allreduce took (detection) and the
    failure to the first allreduce on the new group (reconfigure)."""
    init()
    kept = [r for r in range(size) if r != victim]
    step, detect, reconfigure = 0, None, None
    while step < steps:
        if rank == victim and step == at:
            if fault == "dead":
                os.kill(os.getpid(), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGSTOP)
            # Woken once the others are done: this rank's group must fail,
            # not hang.
            try:
                dist.all_reduce(torch.ones(1 << 16))
            except RuntimeError as e:
                return {"woken": "failed", "error": str(e).splitlines()[0][:80].replace(" ", "_")}
            raise AssertionError("the stopped rank's allreduce succeeded after the others shrank it away")
        grad = torch.full((1 << 16,), float(rank + step))
        start = time.perf_counter()
        try:
            dist.all_reduce(grad)
        except RuntimeError:
            failed = time.perf_counter()
            check(detect is None, "a second failure")
            detect = failed - start
            if backend == "gloo":
                dist.destroy_process_group()
                init(rendezvous + ".survivors", kept.index(rank), len(kept))
            else:
                dist.shrink_group([victim], shrink_flags=c10d.SHRINK_ABORT)
            dist.all_reduce(torch.ones(1))
            reconfigure = time.perf_counter() - failed
            continue  # the step again, on the new group
        members = kept if detect is not None else range(size)
        check(torch.all(grad == sum(r + step for r in members)).item(), "step %d's sum" % step)
        step += 1
    check(detect is not None, "nothing failed")
    dist.destroy_process_group()
    return {"detect_s": "%.3f" % detect, "reconfigure_s": "%.3f" % reconfigure}


SCENARIOS = {
    "basic": basic,
    "validation": validation,
    "backend_properties": backend_properties,
    "multiple_comms": multiple_comms,
    "flags": flags,
    "multiple_exclusions": multiple_exclusions,
    "multiple_iterations": multiple_iterations,
    "vs_reinit": vs_reinit,
    "dead": lambda: train_through("dead"),
    "stuck": lambda: train_through("stuck"),
    # Rank 0, whose process serves kolo's rendezvous store: the survivors
    # shrink over rank 1's standby store.
    "dead0": lambda: train_through("dead", victim=0),
    "stuck0": lambda: train_through("stuck", victim=0),
}

try:
    facts = SCENARIOS[scenario]()
    print("rank %d: ok%s" % (rank, "".join(" %s=%s" % kv for kv in sorted(facts.items()))), flush=True)
except Exception as e:  # noqa: BLE001  (the test reads every rank's line)
    traceback.print_exc()
    print("rank %d: FAILED: %s: %s" % (rank, type(e).__name__, str(e).replace("\n", " ")), flush=True)
    sys.exit(1)
