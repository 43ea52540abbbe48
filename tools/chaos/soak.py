#!/usr/bin/env python3
"""The chaos soak: trains a model with Horovod's elastic API on kolo
(tools/chaos/train.py under `kolorun --min-np 1 --max-np N -H ...`) and
injects faults at random steps, then says how the job took each one.

    tools/chaos/soak.py [--hosts h0:2,h1:2] [--netns] [--faults 100]
                        [--kinds kill,stop,slow,shm,link,kill0,stop0,link0] [--seed 1]
                        [--timeout 3]
                        [--report FILE.md]

Hosts are emulated by name (each worker's KOLO_HOSTNAME): workers of one
host share memory, and reach the others over TCP. With --netns (root) each
host is a network namespace with its own address and link
(tools/netns.sh, namespaces named KOLO_NETNS_PREFIX, default "kchaos-",
then h<i>; kolorun --netns), so a host's link can be taken down. Faults,
each on a random worker once the job is whole again and has trained a few
steps:
  kill   SIGKILL; the driver restarts the worker, which rejoins
  stop   SIGSTOP for longer than the deadline (KOLO_TIMEOUT_S), then
         SIGCONT; the others time out and reset, and the driver ends the
         stopped worker (--reset-grace) and restarts it
  slow   SIGSTOP for half the deadline, then SIGCONT: a slow rank, which
         must cost time and nothing else
  shm    removes the job's /dev/shm segments (kolo unlinks a segment once
         both ends have mapped it, so there is seldom one to remove)
  link   (--netns) takes the worker's host's link down for longer than the
         deadline, then up: both sides time out, reset, and the host's
         workers rejoin once they reach rank 0's rendezvous again
  kill0, stop0, link0
         the same, aimed at rank 0 (the worker that prints the committed
         steps), whose process serves the version's rendezvous store
For each fault it records: the detection time (injection to the survivors'
failed collective), the time until the survivors train again (their first
committed step after the reset), the replacement's time from its start to
training in a whole job again, committed steps lost (the first step after
the reset against the last step committed before the fault), and whether
the job hung (no step for 60 s). At the end every worker must hold
bit-identical parameters. Prints a table (markdown); exits 1 on a hang, a
lost committed step or workers that disagree.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NETNS = os.path.join(REPO, "tools", "netns.sh")


def netns(env, *args):
    subprocess.run(["bash", NETNS] + [str(a) for a in args], env=env, check=True, stdout=subprocess.DEVNULL)


class Job:
    """kolorun's output, parsed as it comes."""

    def __init__(self, cmd, env):
        self.lock = threading.Lock()
        self.pids = {}       # worker -> pid
        self.steps = []      # (step, size, time)
        self.lost = []       # (worker, time)
        self.resets = []     # (worker, time)
        self.restarts = []   # (worker, time seen)
        self.finals = []     # (worker, rank, size, step, digest)
        self.rank0 = None    # the worker that printed the last committed step
        self.log = []
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            now = time.time()
            with self.lock:
                self.log.append(line)
                m = re.search(r"worker (\S+) pid (\d+)", line)
                if m:
                    self.pids[m.group(1)] = int(m.group(2))
                m = re.search(r"^\[(\S+)\] step (\d+) size (\d+) at ([\d.]+)", line)
                if m:
                    self.rank0 = m.group(1)
                    self.steps.append((int(m.group(2)), int(m.group(3)), float(m.group(4))))
                m = re.search(r"^\[(\S+)\] kolo elastic: lost a worker .* at ([\d.]+)", line)
                if m:
                    self.lost.append((m.group(1), float(m.group(2))))
                m = re.search(r"^\[(\S+)\] kolo elastic: reset to version .* at ([\d.]+)", line)
                if m:
                    self.resets.append((m.group(1), float(m.group(2))))
                m = re.search(r"worker (\S+) \(rank \S+\) exited with status -?\d+: restarting it", line)
                if m:
                    self.restarts.append((m.group(1), now))
                m = re.search(r"worker (\S+): rank (\d+) of (\d+) ends at step (\d+), parameters (\w+)", line)
                if m:
                    self.finals.append((m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5)))

    def last_step(self):
        with self.lock:
            return self.steps[-1] if self.steps else (0, 0, 0.0)

    def wait_whole(self, size, steps_after, deadline):
        """Until `steps_after` steps at full size have been committed."""
        start = None
        while time.time() < deadline:
            step, n, _ = self.last_step()
            if n == size:
                start = step if start is None else start
                if step - start >= steps_after:
                    return True
            else:
                start = None
            time.sleep(0.05)
        return False


def remove_segments(pids):
    """Unlinks the names of the /dev/shm segments that this job's workers
    map. Only theirs: a glob of /dev/shm/kolo-* would also take the
    segments of any other kolo job of the host (other tests running beside
    this one) in the moment between their creation and their peers' open.
    A segment already unlinked shows in the maps as '(deleted)'."""
    names = set()
    for pid in pids:
        try:
            with open("/proc/%d/maps" % pid) as f:
                for line in f:
                    fields = line.split(None, 5)  # address perms offset dev inode [path]
                    path = fields[5].strip() if len(fields) == 6 else ""
                    if path.startswith("/dev/shm/kolo-") and not path.endswith("(deleted)"):
                        names.add(path)
        except OSError:
            pass  # a worker that has just ended
    removed = 0
    for path in names:
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    return removed


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def fmt(v):
    return "-" if v is None else "%.2f" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="h0:2,h1:2")
    ap.add_argument("--faults", type=int, default=100)
    ap.add_argument("--kinds", default="kill,stop,slow,shm")
    ap.add_argument("--netns", action="store_true", help="hosts as network namespaces (root; needed by link)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--in-order", action="store_true", help="the kinds in turn, not at random")
    ap.add_argument("--timeout", type=float, default=3.0, help="KOLO_TIMEOUT_S")
    ap.add_argument("--steps-between", type=int, default=10, help="whole-job steps before each fault")
    ap.add_argument("--report", default="", help="also write the table here")
    ap.add_argument("--log", default="", help="write the job's whole output here")
    opts = ap.parse_args()
    size = sum(int(h.split(":")[1]) for h in opts.hosts.split(","))
    kinds = opts.kinds.split(",")
    if ("link" in kinds or "link0" in kinds) and not opts.netns:
        ap.error("the link fault needs --netns")
    rng = random.Random(opts.seed)
    work = tempfile.mkdtemp(prefix="kolo-chaos-")
    stop_file = os.path.join(work, "stop")
    env = dict(os.environ, KOLO_TIMEOUT_S=str(opts.timeout), KOLO_ELASTIC_VERBOSE="1", PYTHONUNBUFFERED="1")
    grace = opts.timeout + 1
    hosts = opts.hosts
    emulated = []
    if opts.netns:
        prefix = env.setdefault("KOLO_NETNS_PREFIX", "kchaos-")
        # The i-th host given is namespace <prefix>h<i>.
        emulated = ["%sh%d" % (prefix, i) for i in range(len(hosts.split(",")))]
        hosts = ",".join("%s:%s" % (name, h.split(":")[1]) for name, h in zip(emulated, hosts.split(",")))
        netns(env, "up", len(emulated))
    cmd = [sys.executable, os.path.join(REPO, "tools", "kolorun"), "-np", str(size), "--min-np", "1", "--max-np",
           str(size), "-H", hosts, "--host-failure-limit", "1000000", "--reset-grace", str(grace)]
    if emulated:
        cmd += ["--netns", "%s:%d" % (env["KOLO_NETNS_PREFIX"], len(emulated))]
    cmd += [sys.executable, os.path.join(HERE, "train.py"), stop_file, str(size)]
    job = Job(cmd, env)
    records = []
    hang = False
    try:
        if not job.wait_whole(size, opts.steps_between, time.time() + 120):
            print("the job never trained whole:\n" + "".join(job.log[-40:]))
            return 1
        for i in range(opts.faults):
            kind = kinds[i % len(kinds)] if opts.in_order else rng.choice(kinds)
            with job.lock:
                workers = sorted(job.pids)
                victim = rng.choice(workers)
                if kind.endswith("0"):
                    victim, kind_done = job.rank0, kind[:-1]
                else:
                    kind_done = kind
                pid = job.pids[victim]
                workers_pids = list(job.pids.values())
                n_lost, n_resets, n_restarts = len(job.lost), len(job.resets), len(job.restarts)
            before, _, _ = job.last_step()
            t0 = time.time()
            removed = None
            try:
                if kind_done == "kill":
                    os.kill(pid, signal.SIGKILL)
                elif kind_done in ("stop", "slow"):
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(opts.timeout + 1.5 if kind_done == "stop" else opts.timeout * 0.5)
                    os.kill(pid, signal.SIGCONT)
                elif kind_done == "shm":
                    removed = remove_segments(workers_pids)
                elif kind_done == "link":
                    host = emulated.index(victim.rpartition(":")[0])
                    netns(env, "link-down", host)
                    time.sleep(opts.timeout + 1.5)
                    netns(env, "link-up", host)
            except ProcessLookupError:
                pass
            recovered = job.wait_whole(size, opts.steps_between, t0 + 60)
            with job.lock:
                lost = [t for _, t in job.lost[n_lost:]]
                resets = [t for _, t in job.resets[n_resets:]]
                restarts = [t for _, t in job.restarts[n_restarts:]]
                after_reset = [s for s in job.steps if resets and s[2] > min(resets)]
                whole_after = [s for s in job.steps if restarts and s[2] > restarts[0] and s[1] == size]
            rec = {"i": i, "kind": kind, "victim": victim, "hang": not recovered, "removed": removed,
                   "detect": (min(lost) - t0) if lost else None,
                   "resume": (after_reset[0][2] - t0) if after_reset else None,
                   "replacement": (whole_after[0][2] - restarts[0]) if whole_after else None,
                   "lost_steps": max(0, before + 1 - after_reset[0][0]) if after_reset else 0}
            records.append(rec)
            print("fault %3d %-5s on %-6s detect %s s, training again %s s, replacement %s s, steps lost %d%s"
                  % (i, kind, victim, fmt(rec["detect"]), fmt(rec["resume"]), fmt(rec["replacement"]),
                     rec["lost_steps"], ", HANG" if rec["hang"] else ""), flush=True)
            if rec["hang"]:
                hang = True
                print("".join(job.log[-60:]))
                break
        open(stop_file, "w").close()
        try:
            job.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            hang = True
            print("the job did not end after the stop file")
    finally:
        if job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)
        if emulated:
            netns(env, "down")
    time.sleep(0.5)
    if opts.log:
        with open(opts.log, "w") as f:
            f.write("".join(job.log))
    finals = job.finals
    digests = {f[4] for f in finals}
    steps = {f[3] for f in finals}
    identical = len(finals) == size and len(digests) == 1 and len(steps) == 1
    lines = ["| fault | count | detected (p50 / p99 s) | training again (p50 / p99 s) | "
             "replacement training (p50 / p99 s) | committed steps lost | hangs |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for kind in kinds + ["all"]:
        rs = [r for r in records if kind == "all" or r["kind"] == kind]
        if not rs:
            continue

        def pair(key):
            v = [r[key] for r in rs if r[key] is not None]
            return "%s / %s" % (fmt(percentile(v, 50)), fmt(percentile(v, 99))) if v else "- (none)"

        lines.append("| %s | %d | %s | %s | %s | %d | %d |" % (kind, len(rs), pair("detect"), pair("resume"),
                                                               pair("replacement"), sum(r["lost_steps"] for r in rs),
                                                               sum(r["hang"] for r in rs)))
    removed = [r["removed"] for r in records if r["kind"] == "shm"]
    lines.append("")
    lines.append("%d faults on %s (%d workers), KOLO_TIMEOUT_S=%g, seed %d; final parameters %s on %d workers at "
                 "step %s; shm segments found to remove: %s" % (
                     len(records), hosts + (" (network namespaces)" if emulated else ""), size, opts.timeout,
                     opts.seed,
                     "bit-identical" if identical else "NOT identical (%s)" % sorted(digests), len(finals),
                     sorted(steps) if steps else "-", sum(removed) if removed else 0))
    text = "\n".join(lines)
    print(text)
    if opts.report:
        with open(opts.report, "w") as f:
            f.write(text + "\n")
    bad = hang or not identical or any(r["lost_steps"] for r in records)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
