"""Start-up time across hosts: kolorun against Open MPI's mpirun, both over
the same ssh, on 2 emulated hosts (tools/netns.sh, an sshd on each): the
time from the command to every rank initialised (the arrival of each rank's
first line, which tests/launchers/launch_worker prints right after
kolo_comm_init_from_env), and to the whole job's end. Alternating runs, the
median of each. Needs root.

    bazel build //tests/launchers:launch_worker
    sudo .venv/bin/python bench/launch_time.py [--ranks 8] [--runs 7]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETNS = os.path.join(ROOT, "tools", "netns.sh")
WORKER = os.path.join(ROOT, "bazel-bin", "tests", "launchers", "launch_worker")
PREFIX = "klt%d-" % os.getpid()
A0, A1 = "10.77.0.1", "10.77.0.2"


def timed(argv, env, ranks):
    """(seconds to every rank's first line, seconds to the end)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = {}
    lines = []
    for line in proc.stdout:
        lines.append(line)
        words = line.replace("[", " ").replace("]", " ").split()
        if "rank" in words and "of" in words:
            rank = int(words[words.index("rank") + 1])
            first.setdefault(rank, time.monotonic() - start)
    rc = proc.wait()
    end = time.monotonic() - start
    if rc != 0 or len(first) != ranks:
        sys.exit("%s failed (exit %d, %d of %d ranks):\n%s" % (argv[0], rc, len(first), ranks, "".join(lines[-20:])))
    return max(first.values()), end


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    if not os.path.exists(WORKER):
        sys.exit("build the worker first: bazel build //tests/launchers:launch_worker")
    env = dict(os.environ, KOLO_NETNS_PREFIX=PREFIX)
    work = tempfile.mkdtemp(prefix="launch_time.")
    subprocess.run(["bash", NETNS, "up", "2"], env=env, check=True)
    try:
        subprocess.run(["bash", NETNS, "sshd", work], env=env, check=True)
        config = os.path.join(work, "ssh_config")
        half = args.ranks // 2
        on0 = ["ip", "netns", "exec", PREFIX + "h0"]
        kolorun = on0 + [sys.executable, os.path.join(ROOT, "tools", "kolorun"), "-np", str(args.ranks),
                         "-H", "%s:%d,%s:%d" % (A0, half, A1, half), WORKER, str(args.ranks)]
        mpirun = on0 + ["mpirun", "--allow-run-as-root", "-np", str(args.ranks), "-H", "%s:%d,%s:%d" % (A0, half, A1, half),
                        "--mca", "plm_rsh_args", "-F " + config, "--mca", "oob_tcp_if_include", "eth0",
                        "--mca", "btl_tcp_if_include", "eth0", "-x", "KOLO_MASTER_ADDR=" + A0,
                        "-x", "KOLO_MASTER_PORT=29511", "-x", "LD_LIBRARY_PATH", WORKER, str(args.ranks)]
        launchers = {"kolorun": (kolorun, dict(env, KOLO_SSH_OPTIONS="-F " + config)), "mpirun": (mpirun, env)}
        times = {name: [] for name in launchers}
        for _ in range(args.runs):
            for name, (argv, run_env) in launchers.items():
                times[name].append(timed(argv, run_env, args.ranks))
        print("| %d ranks on 2 hosts over ssh, median of %d | every rank initialised | job's end |" %
              (args.ranks, args.runs))
        print("| --- | --- | --- |")
        for name, runs in times.items():
            print("| %s | %.3f s | %.3f s |" % (name, statistics.median(r[0] for r in runs),
                                              statistics.median(r[1] for r in runs)))
    finally:
        subprocess.run(["bash", NETNS, "down"], env=env)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
