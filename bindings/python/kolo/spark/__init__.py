"""kolo on Spark, with horovod.spark.run's semantics: fn runs as num_proc
ranks, one Spark task each, in a barrier stage (every task starts together
or none does), and the results come back in rank order:

    import kolo.spark

    def train(epochs):
        import kolo.torch as hvd
        hvd.init()
        ...
        return hvd.rank()

    results = kolo.spark.run(train, args=(3,), num_proc=2)

Each task's rank is its partition; its local rank and size count the tasks
on its executor's host (cross rank and size as Horovod defines them); rank
0's task finds a free port on its host and the stage's allGather tells every
task, which is the rendezvous. The active SparkSession's context runs it
(one is made in local mode, as many cores as num_proc, if there is none).
kolo.spark.run_elastic (kolo/spark/elastic.py) is horovod.spark.run_elastic.
"""
import contextlib
import io
import os
import secrets
import socket
import sys
import threading
import time

from kolo.runner.hosts import describe
from kolo.spark.elastic import run_elastic  # horovod.spark's elastic entry point

__all__ = ["run", "run_elastic"]


def _task(job, fn, args, kwargs, env, verbose, capture):
    """The body of every barrier task: a generator, as mapPartitions wants,
    of one (rank, result, output) with output the text fn wrote to
    sys.stdout and sys.stderr when capture (else None, None)."""
    def body(_partition):
        from pyspark import BarrierTaskContext

        from kolo.runner.supervisor import free_port
        ctx = BarrierTaskContext.get()
        rank = ctx.partitionId()
        host = socket.gethostbyname(socket.gethostname())
        # Every task's host, and rank 0's port, through the stage's own
        # all-gather (bounded by Spark's barrier timeout).
        told = ctx.allGather("%s %d" % (host, free_port() if rank == 0 else 0))
        hosts = [t.split()[0] for t in told]
        master, port = told[0].split()
        p = describe(hosts)[rank]
        os.environ.update(env)
        os.environ.update({
            "KOLO_RANK": str(rank), "KOLO_WORLD_SIZE": str(len(hosts)), "KOLO_LOCAL_RANK": str(p.local_rank),
            "KOLO_LOCAL_WORLD_SIZE": str(p.local_size), "KOLO_CROSS_RANK": str(p.cross_rank),
            "KOLO_CROSS_SIZE": str(p.cross_size), "KOLO_MASTER_ADDR": master, "KOLO_MASTER_PORT": port,
            "KOLO_JOB_ID": job["id"], "KOLO_SECRET": job["secret"], "RANK": str(rank),
            "WORLD_SIZE": str(len(hosts)), "LOCAL_RANK": str(p.local_rank), "MASTER_ADDR": master})
        if verbose >= 2:
            sys.stderr.write("kolo.spark: rank %d of %d on %s (local %d of %d)\n"
                             % (rank, len(hosts), host, p.local_rank, p.local_size))
        if not capture:
            yield rank, fn(*args, **kwargs), (None, None)
            return
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result = fn(*args, **kwargs)
        yield rank, result, (out.getvalue(), err.getvalue())
    return body


def _forward(rank, text, stream, name):
    """A rank's output to the caller's stream, each line prefixed as
    horovod.spark.run prefixes it: [rank]<stdout>:line."""
    if stream is None or not text:
        return
    for line in text.splitlines(keepends=True):
        stream.write("[%d]<%s>:%s" % (rank, name, line if line.endswith("\n") else line + "\n"))


class _StartWatch:
    """Cancels the run's job group if its num_proc tasks are not all
    running within start_timeout s (a barrier stage waits for every slot)."""

    def __init__(self, sc, group, num_proc, start_timeout):
        self.expired = False
        self.done = threading.Event()

        def watch():
            deadline = time.monotonic() + start_timeout
            tracker = sc.statusTracker()
            while not self.done.wait(0.5):
                started = 0
                for job_id in tracker.getJobIdsForGroup(group):
                    info = tracker.getJobInfo(job_id)
                    for stage in (info.stageIds if info else ()):
                        stage_info = tracker.getStageInfo(stage)
                        if stage_info:
                            started += stage_info.numActiveTasks + stage_info.numCompletedTasks
                if started >= num_proc:
                    return
                if time.monotonic() > deadline:
                    self.expired = True
                    sc.cancelJobGroup(group)
                    return
        threading.Thread(target=watch, daemon=True).start()

    def stop(self):
        self.done.set()


def run(fn, args=(), kwargs=None, num_proc=None, start_timeout=None, env=None, stdout=None, stderr=None,
        verbose=1, nics=None, executable=None, extra_mpi_args=None, use_mpi=None, use_gloo=None):
    """Runs fn(*args, **kwargs) on num_proc ranks (default: the context's
    default parallelism) and returns their results, rank 0's first.

    start_timeout (default 600 s, or HOROVOD_SPARK_START_TIMEOUT): if the
    num_proc tasks are not all running by then, the run is cancelled and
    TimeoutError raised; env adds to every
    rank's environment; nics: the interfaces the ranks may use (the first
    is KOLO_IFNAME). stdout and stderr (streams): what fn writes to
    sys.stdout and sys.stderr goes there once it returns, each line
    prefixed with its rank ("[1]<stdout>:..."), as horovod.spark.run
    forwards it; without them the tasks' output goes where Spark sends
    executors' output. executable, extra_mpi_args, use_mpi and use_gloo are
    Horovod's choices of how to launch, which kolo does not need."""
    del executable, extra_mpi_args, use_mpi, use_gloo
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        session = SparkSession.builder.master("local[%d]" % (num_proc or os.cpu_count())).getOrCreate()
    sc = session.sparkContext
    num_proc = num_proc or sc.defaultParallelism
    if num_proc < 1:
        raise ValueError("kolo.spark.run: num_proc must be at least 1, got %d" % num_proc)
    start_timeout = start_timeout or int(os.environ.get("HOROVOD_SPARK_START_TIMEOUT", "600"))
    job = {"id": "spark-" + secrets.token_hex(8), "secret": secrets.token_hex(32)}
    ranks_env = {k: str(v) for k, v in (env or {}).items()}
    if nics:
        ranks_env["KOLO_IFNAME"] = sorted(nics)[0] if isinstance(nics, set) else list(nics)[0]
    began = time.monotonic()
    watch = _StartWatch(sc, job["id"], num_proc, start_timeout)
    sc.setJobGroup(job["id"], "kolo.spark.run: %d ranks" % num_proc, interruptOnCancel=True)
    try:
        got = sc.parallelize(range(num_proc), num_proc).barrier().mapPartitions(
            _task(job, fn, tuple(args), dict(kwargs or {}), ranks_env, verbose,
                  stdout is not None or stderr is not None)).collect()
    except Exception:
        if watch.expired:
            raise TimeoutError("Timed out waiting for Spark tasks to start. kolo.spark.run: %d task slots did not "
                               "all start within start_timeout %s s" % (num_proc, start_timeout)) from None
        raise
    finally:
        watch.stop()
    if verbose >= 1:
        sys.stderr.write("kolo.spark: %d ranks done in %.1f s\n" % (num_proc, time.monotonic() - began))
    got.sort(key=lambda item: item[0])
    for rank, _, (out, err) in got:
        _forward(rank, out, stdout, "stdout")
        _forward(rank, err, stderr, "stderr")
    return [result for _, result, _ in got]
