"""The host side of a kolorun job: one supervisor per host starts that
host's ranks, relays their output, and ends them when the job ends or when
it loses kolorun. kolorun starts it directly on its own host (or inside an
emulated host's network namespace) and over ssh on the others, always the
same way: `PYTHON -c BOOTSTRAP`, with this file's text sent on standard
input (so nothing of kolo need be installed on the host, and nothing of the
job shows on its command line), then the job's messages.

kolorun -> supervisor, on standard input: a line with this file's length,
this file, then JSON lines:
  {"hello": {"host", "token", "mark", "ports", "heartbeat_s", "grace_s"}}
  {"probe": [[host, interface, address, port], ...]}  connect to each, reply "reached"
  {"start": {"argv", "cwd", "env", "ranks": [[rank, {env}, prefix, output], ...], "remove": [path, ...],
             "timestamp": bool, "bind": "auto" | "none" | "core"}}
      (ranks: this host's, in local rank order; output: a directory the
      rank's stdout and stderr are also written to, or null; remove: files
      of this host to remove when the ranks have ended; timestamp: the time
      before each line, after the prefix's rank; bind: kolorun's --bind-to,
      see core_shares)
  {"signal": "USR1" | "TERM"}                          forwarded to every rank
  {"stop": true}                                       end the ranks, then exit
  {"heartbeat": true}                                  (any line counts as one)
supervisor -> kolorun: the ranks' output (each line with its rank's prefix) on
standard output and error, and its own messages on standard output, each a
line `MARK JSON` (MARK: random per job, so no rank's line is taken for one):
  {"ready": {"interfaces", "default", "probe_port", "ports"}}
  {"reached": [[host, interface, address], ...]}
  {"started": {"pids": [pid, ...], "cores": [[rank, [core, ...]], ...] | null}}
      (cores: where --bind-to bound the ranks; null: unbound)
  {"exit": {"rank", "status", "error"}}                one per rank
  {"done": {"why"}}                                    the last line
Its ranks end (SIGTERM, then SIGKILL after grace_s) when kolorun says stop,
when its standard input ends (kolorun, or its ssh connection, is gone), and
when no line has come for heartbeat_s (a connection lost without a word).

Standard library only, and one file: it runs wherever python3 does.
"""
import array
import fcntl
import json
import os
import queue
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

SIOCGIFCONF = 0x8912  # <linux/sockios.h>
IFREQ_BYTES = 40  # struct ifreq on 64-bit Linux: a 16-byte name and a 24-byte union


def ipv4_interfaces():
    """[(interface, IPv4 address)] of the interfaces that are up, in the
    kernel's order (lo included); none where the kernel will not say."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            size = 64 * IFREQ_BYTES
            while True:
                buf = array.array("B", b"\0" * size)
                address, _ = buf.buffer_info()
                got = struct.unpack("iL", fcntl.ioctl(s.fileno(), SIOCGIFCONF, struct.pack("iL", size, address)))[0]
                if got < size:
                    break
                size *= 2
    except OSError:
        return []
    raw = buf.tobytes()
    found = []
    for offset in range(0, got, IFREQ_BYTES):
        name = raw[offset:offset + 16].split(b"\0", 1)[0].decode()
        found.append((name, socket.inet_ntoa(raw[offset + 20:offset + 24])))
    return found


def default_route_interface():
    """The interface of the IPv4 default route, or None."""
    try:
        with open("/proc/net/route") as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 2 and fields[1] == "00000000":
                    return fields[0]
    except OSError:
        pass
    return None


def free_port(addr=""):
    """A port nothing listens on (at addr; "": any of the host's), below the
    kernel's ephemeral range: one from that range (what bind to port 0
    gives) can be taken by any connection the host opens before the rank
    binds it. Should another process take it all the same, rank 0 fails
    loudly rather than joining a stranger."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    pick = random.SystemRandom()
    for _ in range(64 if low - 1024 >= 1000 else 0):
        port = pick.randrange(max(1024, low - 10000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((addr, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def core_shares(mode, cores, ranks):
    """kolorun's --bind-to: the cores each of a host's `ranks` local ranks
    may run on, in local rank order, out of `cores` (the supervisor's own,
    sorted), or None to leave them unbound. `core` gives each rank an equal
    run of consecutive cores, or, when the ranks outnumber the cores, one
    core that consecutive ranks share. `auto` does so where every rank's
    share is one core or part of one (the ranks at least as many as the
    cores). Unbound there, each rank's thread pools (OpenMP's, under torch;
    TensorFlow's) start a thread for every core of the host, and the host
    runs several times as many threads as it has cores: a torch matmul ran
    4.6x slower with 2 ranks on 2 cores. And the scheduler moves ranks
    between cores and wakes them where their caches are not; bound, the
    ranks that share a core are neighbours, whose messages stay in its
    caches. docs/performance-log.md's "Ranks bound to cores" has the
    figures. Where each rank would get several cores, `auto` leaves them to
    the scheduler: a run of consecutive numbers is not a run of one
    socket's cores on every machine (hyperthreads are often numbered after
    all the cores), so which cores go together is better said by the user
    (`core`, or a launcher that reads the topology)."""
    count = len(cores)
    if mode == "none" or ranks < 1 or count < 1:
        return None
    if mode == "auto" and ranks < count:
        return None
    shares = []
    for r in range(ranks):
        first = r * count // ranks
        shares.append(cores[first:max(first + 1, (r + 1) * count // ranks)])
    return shares


def start_on(cores, start):
    """(start()'s result, whether it was bound): the process start() forks
    bound to `cores` (None: unbound). The child inherits the forking
    thread's cores, so it is bound from its first instruction, before any
    thread of its own; this thread's own are put back after. Where the host
    forbids it (a container's policy), the process starts unbound: binding
    only speeds it up."""
    if cores is None:
        return start(), False
    own = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cores)
    except OSError:
        return start(), False
    try:
        return start(), True
    finally:
        os.sched_setaffinity(0, own)


class Supervisor:
    def __init__(self, hello):
        self.host = hello["host"]
        self.token = hello["token"]
        self.mark = hello["mark"].encode()
        self.heartbeat_s = hello.get("heartbeat_s", 30)
        self.grace_s = hello.get("grace_s", 5)
        self.events = queue.Queue()  # ("line", msg) from kolorun, ("eof",), ("exit", rank, status)
        self.out_lock = threading.Lock()
        self.ports = hello.get("ports", 0)  # free ports to find on this host (the rendezvous's)
        self.ranks = {}  # rank -> Popen
        self.pumps = []
        self.listener = None
        self.job_ranks = []  # this host's ranks, once started
        self.remove = []  # files to remove when the ranks have ended
        self.signalled = False  # SIGHUP/SIGTERM/SIGINT: end the ranks

    def tell(self, kind, value):
        line = self.mark + b" " + json.dumps({kind: value}).encode() + b"\n"
        self.write(sys.stdout.buffer, line)

    def write(self, out, data):
        with self.out_lock:
            try:
                out.write(data)
                out.flush()
            except (BrokenPipeError, OSError):
                self.events.put(("eof",))  # kolorun is gone: end the ranks

    # -- reachability: every host's listener answers with its own token ----
    def listen(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("", 0))
        self.listener.listen(64)
        answer = ("%s %d\n" % (self.token, self.host)).encode()

        def serve():
            while True:
                try:
                    conn, _ = self.listener.accept()
                except OSError:
                    return
                with conn:
                    try:
                        conn.sendall(answer)
                    except OSError:
                        pass
        threading.Thread(target=serve, daemon=True).start()
        return self.listener.getsockname()[1]

    def probe(self, targets):
        """Which of the other hosts' addresses reach the host they belong
        to (its listener answers with the job's token and its index)."""
        reached, lock = [], threading.Lock()

        def one(host, interface, address, port):
            try:
                with socket.create_connection((address, port), timeout=3) as conn:
                    conn.settimeout(3)
                    got = b""
                    while not got.endswith(b"\n") and len(got) < 256:
                        chunk = conn.recv(256)
                        if not chunk:
                            break
                        got += chunk
                if got.decode(errors="replace").strip() == "%s %d" % (self.token, host):
                    with lock:
                        reached.append([host, interface, address])
            except OSError:
                pass
        threads = [threading.Thread(target=one, args=tuple(t)) for t in targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(reached)

    # -- ranks ----------------------------------------------------------
    def start(self, job):
        self.remove = job.get("remove", [])
        base = dict(os.environ)
        base.update(job["env"])
        shares = core_shares(job.get("bind", "none"), sorted(os.sched_getaffinity(0)), len(job["ranks"]))
        bound = []  # (rank, its cores) of the ranks started bound
        for index, (rank, extra, prefix, *output) in enumerate(job["ranks"]):
            env = dict(base)
            env.update(extra)
            try:
                files = self.output_files(output[0] if output else None)
                proc, was_bound = start_on(shares[index] if shares else None, lambda: subprocess.Popen(
                    job["argv"], env=env, cwd=job["cwd"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=True))
                if was_bound:
                    bound.append((rank, shares[index]))
            except OSError as e:
                self.tell("exit", {"rank": rank, "status": 127,
                                   "error": "cannot start %s: %s" % (e.filename or job["argv"][0], e.strerror or e)})
                self.events.put(("exit", rank, None))
                continue
            self.ranks[rank] = proc
            pumps = [threading.Thread(target=self.pump, args=(stream, prefix, out, copy, job.get("timestamp")),
                                      daemon=True)
                     for stream, out, copy in ((proc.stdout, sys.stdout.buffer, files[0]),
                                               (proc.stderr, sys.stderr.buffer, files[1]))]
            for t in pumps:
                t.start()
            self.pumps += pumps
            threading.Thread(target=self.reap, args=(rank, proc, pumps), daemon=True).start()
        self.tell("started", {"pids": [p.pid for p in self.ranks.values()],
                              "cores": [[r, c] for r, c in bound] if bound else None})

    @staticmethod
    def output_files(directory):
        """(stdout, stderr) files in directory, made if need be, or (None, None)."""
        if not directory:
            return None, None
        os.makedirs(directory, exist_ok=True)
        return tuple(open(os.path.join(directory, name), "wb") for name in ("stdout", "stderr"))

    def pump(self, stream, prefix, out, copy=None, timestamp=False):
        """A rank's stream to kolorun, each line prefixed (and timed), and
        as it is to copy."""
        for raw in iter(stream.readline, b""):
            when = time.asctime() + " " if timestamp else ""
            self.write(out, (when + prefix).encode() + raw)
            if copy:
                copy.write(raw)
                copy.flush()
        stream.close()
        if copy:
            copy.close()

    def reap(self, rank, proc, pumps):
        proc.wait()
        for t in pumps:  # its last lines go out before its exit is told
            t.join(timeout=2)
        self.events.put(("exit", rank, proc.returncode))

    def signal_all(self, sig):
        for proc in self.ranks.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def end_ranks(self):
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        while any(p.poll() is None for p in self.ranks.values()) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.signal_all(signal.SIGKILL)
        for proc in self.ranks.values():
            proc.wait()

    # -- the loop ---------------------------------------------------------
    def read_commands(self):
        for line in iter(sys.stdin.readline, ""):
            self.events.put(("line", line))
        self.events.put(("eof",))

    def run(self):
        threading.Thread(target=self.read_commands, daemon=True).start()
        self.tell("ready", {"interfaces": ipv4_interfaces(), "default": default_route_interface(),
                            "probe_port": self.listen(), "ports": [free_port() for _ in range(self.ports)]})
        exited, started = set(), False
        last_word = time.monotonic()
        why = "all ranks exited"
        while True:
            if self.signalled:
                why = "the supervisor was signalled"
                break
            try:
                event = self.events.get(timeout=0.2)
            except queue.Empty:
                if time.monotonic() - last_word > self.heartbeat_s:
                    why = "no word from kolorun for %.0f s" % self.heartbeat_s
                    break
                continue
            if event[0] == "eof":
                why = "kolorun's connection ended"
                break
            if event[0] == "exit":
                _, rank, status = event
                exited.add(rank)
                if status is not None:
                    self.tell("exit", {"rank": rank, "status": status, "error": ""})
                if started and len(exited) == len(self.job_ranks):
                    break
                continue
            last_word = time.monotonic()
            msg = json.loads(event[1])
            if "probe" in msg:
                self.tell("reached", self.probe(msg["probe"]))
            elif "start" in msg and not started:
                started = True
                self.job_ranks = [entry[0] for entry in msg["start"]["ranks"]]
                self.start(msg["start"])
                if len(exited) == len(self.job_ranks):
                    break
            elif "signal" in msg:
                self.signal_all(getattr(signal, "SIG" + msg["signal"]))
            elif "stop" in msg:
                why = "kolorun ended the job"
                break
        if self.listener:
            self.listener.close()
        self.end_ranks()
        for path in self.remove:
            try:
                os.unlink(path)
            except OSError:
                pass  # never made (the job ended first), or gone
        for rank, proc in self.ranks.items():
            if rank not in exited:
                self.tell("exit", {"rank": rank, "status": proc.returncode, "error": ""})
        for t in self.pumps:
            t.join(timeout=2)
        self.tell("done", {"why": why})


def main():
    hello = json.loads(sys.stdin.readline())["hello"]
    supervisor = Supervisor(hello)

    def on_signal(*_):
        supervisor.signalled = True  # the loop sees it within 0.2 s (a queue is not safe here)
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    supervisor.run()


if __name__ == "__main__":
    main()
