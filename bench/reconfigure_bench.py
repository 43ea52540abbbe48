"""Time to reconfigure a torch.distributed job after a rank dies, kolo
against gloo, in one run (the same machine, load and job):

    PYTHONPATH=bindings/python .venv/bin/python bench/reconfigure_bench.py [--ranks 4] [--repeats 5]

Each repeat is a job of N ranks training (an allreduce of 64 Ki floats per
step) in which rank 1 kill -9s itself at step 3 (the job of
bindings/python/tests/scripts/torch_shrink_job.py, scenario "dead"). On
kolo the survivors shrink the group (torch.distributed.shrink_group with
SHRINK_ABORT); on gloo, which cannot shrink, they destroy the group and
form a new one through a new store. detect: the failing allreduce's time;
reconfigure: from that failure to the first allreduce on the new group.
Also torch's own comparison (test_shrink_group_vs_abort_reinit_performance)
on kolo: shrink with SHRINK_ABORT against destroy and init again. Prints
medians and worst cases over the survivors of every repeat."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(ROOT, "bindings", "python", "tests", "scripts", "torch_shrink_job.py")


def job(backend, ranks, scenario):
    with tempfile.TemporaryDirectory() as d:
        procs = [subprocess.Popen([sys.executable, JOB, backend, os.path.join(d, "rendezvous"), str(r), str(ranks),
                                   scenario], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(ranks)]
        out = "".join(p.communicate(timeout=300)[0] for p in procs)
    found = [dict(kv.split("=", 1) for kv in m.group(1).split()) for m in re.finditer(r"^rank \d+: ok (.+)$", out, re.M)]
    if not found:
        sys.exit("%s %s printed no times:\n%s" % (backend, scenario, out[-3000:]))
    return found


def row(name, values):
    values = sorted(values)
    return "| %s | %.3f | %.3f | %d |" % (name, statistics.median(values), values[-1], len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    times = {}
    for _ in range(args.repeats):
        for backend in ("kolo", "gloo"):
            for f in job(backend, args.ranks, "dead"):
                times.setdefault("%s: detect" % backend, []).append(float(f["detect_s"]))
                times.setdefault("%s: reconfigure" % backend, []).append(float(f["reconfigure_s"]))
        for f in job("kolo", args.ranks, "vs_reinit"):
            times.setdefault("kolo, no failure: destroy and init again", []).append(float(f["reinit_s"]))
            times.setdefault("kolo, no failure: shrink_group(SHRINK_ABORT)", []).append(float(f["shrink_s"]))
    print("N=%d, %d repeats; seconds over every survivor" % (args.ranks, args.repeats))
    print("| what | median s | worst s | samples |")
    print("| --- | --- | --- | --- |")
    for name in sorted(times):
        print(row(name, times[name]))


if __name__ == "__main__":
    main()
