"""The flight recorder's fault matrix: 22 seeded faults at N=4
(tests/flight_worker.c: a rank that never arrives, skips a call, calls an
extra one, passes another dtype, count or root, dies, stops, straggles 10x,
deadlocks two communicators by calling them in the other order, or has its
host's link taken down), each run under kolorun with
KOLO_FLIGHT_RECORDER_DIR set; tools/kolo-doctor then reads the ranks'
records and must name the culprit rank and the kind of fault in its first
line. The partitions run on 4 emulated hosts, one rank each
(tools/netns.sh, kolorun --netns), where network namespaces can be made
(root); elsewhere they are left out, and the table says so. Prints the
matrix as a table."""
import concurrent.futures
import os
import random
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
WORKER = os.path.join(ROOT, "tests", "flight_worker")
KOLORUN = os.path.join(ROOT, "tools", "kolorun")
DOCTOR = os.path.join(ROOT, "tools", "kolo-doctor")
NETNS = os.path.join(ROOT, "tools", "netns.sh")
NETNS_PREFIX = "kflight-"  # apart from other tests' emulated hosts
N = 4

# fault: (the doctor's kind, a word its sentence must have, steps allowed)
FAULTS = {
    "missing": ("never-arrived", "never arrived", range(3, 20)),
    # Every rank stops at the first call that differs, so a skipped or an
    # extra call shows as a different one.
    "skip": ("mismatch", "skipped, added or changed", range(3, 20)),
    "extra": ("mismatch", "skipped, added or changed", range(3, 20)),
    "dtype": ("mismatch", "dtype", range(3, 20, 3)),
    "count": ("mismatch", "count", range(3, 20, 3)),
    "root": ("mismatch", "root", range(4, 20, 3)),
    "dead": ("died", "died", range(3, 20)),
    "straggler": ("straggler", "straggler", range(0, 1)),
    "stuck": ("hung", "hung", range(3, 20)),
    "order": ("deadlock", "deadlock", range(3, 20)),
    "partition": ("partition", "cut off from the others by the network", range(3, 20)),
}


def netns(*args):
    env = dict(os.environ, KOLO_NETNS_PREFIX=NETNS_PREFIX)
    return subprocess.run(["bash", NETNS] + [str(a) for a in args], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=60)


def run_case(fault, culprit, step):
    kind, word, _ = FAULTS[fault]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
        env = dict(os.environ, KOLO_FLIGHT_RECORDER_DIR=d, KOLO_TIMEOUT_S="2")
        hosts = []
        if fault == "partition":
            # Fresh hosts each time: the culprit takes its own link down.
            netns("up", N).check_returncode()
            hosts = ["--netns", "%s:%d" % (NETNS_PREFIX, N)]
        start = time.monotonic()
        try:
            job = subprocess.run([sys.executable, KOLORUN, "-np", str(N), "--timeout", "60"] + hosts +
                                 [WORKER, fault, str(culprit), str(step)], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, timeout=120)
        finally:
            if hosts:
                netns("down")
        took = time.monotonic() - start
        doctor = subprocess.run([sys.executable, DOCTOR, d], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=60)
        text = doctor.stdout.decode()
        first = text.splitlines()[0] if text else ""
        m = re.match(r"culprit: ranks? ([\d, ]+): ([\w-]+)", first)
        named = [int(x) for x in m.group(1).split(",")] if m else []
        ok = m is not None and named == [culprit] and m.group(2) == kind and word in text
        if not ok:
            print("---- %s culprit %d step %d: the job said:\n%s\n---- the doctor said:\n%s"
                  % (fault, culprit, step, job.stdout.decode()[-3000:], text))
        return ok, first, took, text


def main():
    rng = random.Random(int(os.environ.get("FLIGHT_SEED", "30")))
    cases = []
    for fault in FAULTS:
        for _ in range(2):
            cases.append((fault, rng.randrange(N), rng.choice(list(FAULTS[fault][2]))))
    failures = 0
    rows = []
    probe = netns("probe")
    if probe.returncode != 0:
        reason = probe.stdout.decode().strip()
        print("partition cases left out: no emulated hosts here (%s)" % reason)
        cases = [c for c in cases if c[0] != "partition"]
    # Most cases spend their time waiting for a deadline (KOLO_TIMEOUT_S=2)
    # with the CPU idle, so they run six at a time, the longest (a hung
    # rank's, a deadlock's) first; the partitions share one set of
    # emulated hosts, so they run one after the other, beside those. A
    # straggler is told by its timing: those run alone, after.
    slow_first = {"stuck": 0, "order": 1, "missing": 2}
    together = sorted([c for c in cases if c[0] not in ("straggler", "partition")],
                      key=lambda c: slow_first.get(c[0], 3))
    partitions = [c for c in cases if c[0] == "partition"]
    alone = [c for c in cases if c[0] == "straggler"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as on_hosts, \
            concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        beside = on_hosts.submit(lambda: [run_case(*c) for c in partitions])
        results = list(pool.map(lambda c: run_case(*c), together))
        results += beside.result()
    results += [run_case(*c) for c in alone]
    for (fault, culprit, step), (ok, first, took, text) in zip(together + partitions + alone, results):
        failures += not ok
        rows.append((fault, culprit, step if fault != "straggler" else "-", "yes" if ok else "NO", "%.1f" % took,
                     first[len("culprit: "):]))
    print("| fault | culprit | step | named | job s | the doctor's verdict |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print("| %s | %s | %s | %s | %s | %s |" % row)
    print("flight_recorder_test: %d of %d faults named" % (len(cases) - failures, len(cases)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
