"""A fixed job of kolorun: -np ranks on the hosts given (this machine alone
by default), each host's ranks started by a supervisor of their own
(kolo/runner/supervisor.py): directly on this machine, in an emulated
host's network namespace, or over ssh. In four steps, each within
--start-timeout:
  1. every host's supervisor says it is ready, with its interfaces and (host
     0's) the free ports the rendezvous will use;
  2. with more than one host, each tries every other host's addresses, and
     each host uses the first interface every other host reached
     (kolo/runner/network.py): its ranks listen there (KOLO_IFNAME) and
     rank 0's is the rendezvous address every rank is told;
  3. every host starts its ranks;
  4. the job runs until every rank has exited 0, or one fails, a host is
     lost, --timeout passes or kolorun is signalled: then every host is told
     to stop, ends its ranks (SIGTERM, then SIGKILL) and says so, and
     kolorun exits with the failing rank's status (1 for a host's failure,
     124 for --timeout, 128+N for signal N), naming host and rank.
     With --enable-recovery a failing rank is said and the others go on
     (a program that shrinks its communicator around lost ranks, rank 0
     too: kolo_comm_shrink); the job ends when every rank has exited, and
     succeeds when some rank exited 0.
"""
import os
import queue
import secrets
import signal
import threading
import time

from . import network
from . import session


def ended(status):
    return "killed by %s" % signal.Signals(-status).name if status and status < 0 else "ended with status %s" % status


class JobError(Exception):
    """The job cannot go on: says where and why; exit status 1."""


class FixedJob:
    def __init__(self, opts, placements, connectors, env, say):
        """placements: every rank's hosts.Placement; connectors: host name ->
        argv that starts its supervisor; env: what every rank gets before
        its own variables; say: prints one of kolorun's lines."""
        self.opts, self.placements, self.env, self.say = opts, placements, env, say
        self.host_names = list(dict.fromkeys(p.host for p in placements))
        self.events = queue.Queue()
        self.out_lock = threading.Lock()
        mark = "\x1fkolo-" + secrets.token_hex(8)
        self.token = secrets.token_hex(16)
        self.sessions = [session.HostSession(i, name, connectors[name], self.events, self.out_lock, mark)
                         for i, name in enumerate(self.host_names)]
        self.signalled = 0
        self.last_beat = 0.0
        self.status = 0
        self.failure = None  # what ended the job early, for kolorun's last line
        self.recovered = []  # --enable-recovery: the failures the job went on after, in order
        self.succeeded = 0   # ranks that exited 0
        self.done = set()  # hosts whose ranks have all exited 0 (a quick host's, even while others start)

    def next_event(self):
        """The next message of any host, or None after 0.2 s; keeps every
        supervisor's heartbeat going meanwhile."""
        now = time.monotonic()
        if now - self.last_beat >= session.HEARTBEAT_S:
            for s in self.sessions:
                s.send({"heartbeat": True})
            self.last_beat = now
        try:
            return self.events.get(timeout=0.2)
        except queue.Empty:
            return None

    # -- steps --------------------------------------------------------------
    def wait_all(self, kind, deadline, what):
        """Each host's `kind` message, by host index; a host that is gone or
        silent past the deadline is a JobError naming it."""
        got = {}
        while len(got) < len(self.sessions):
            left = deadline - time.monotonic()
            if self.signalled:
                raise JobError("interrupted (%s) while waiting for every host to %s" % (
                    signal.Signals(self.signalled).name, what))
            if left <= 0:
                late = [s for s in self.sessions if s.index not in got]
                raise JobError("; ".join("host %s: did not %s within --start-timeout %.0f s (%s)" % (
                    s.name, what, self.opts.start_timeout, s.last_words()) for s in late))
            got_event = self.next_event()
            if got_event is None:
                continue
            index, event, value = got_event
            if event == "done":
                self.done.add(index)
                continue
            if event == "gone" and index not in self.done:
                s = self.sessions[index]
                raise JobError("host %s: could not %s (%s %s): %s" % (
                    s.name, what, s.starter(), ended(value), s.last_words()))
            if event == "exit":
                self.rank_exited(value)
                if self.failure:
                    raise JobError(self.failure)
                continue
            if event == kind:
                got[index] = value
                if self.opts.verbose:
                    self.say("host %s: %s after %.3f s" % (self.sessions[index].name, kind,
                                                          time.monotonic() - self.began))
        return [got[i] for i in range(len(self.sessions))]

    def open(self, deadline):
        for s in self.sessions:
            s.open(self.token, ports=2 if s.index == 0 else 0)  # host 0's: the rendezvous's and torch's
        return self.wait_all("ready", deadline, "start kolo's supervisor")

    def choose_network(self, ready, deadline):
        if len(self.sessions) == 1:
            return [network.Choice(None, self.opts.master_addr, "one host")]
        targets = [[i, name, addr, r["probe_port"]] for i, r in enumerate(ready) for name, addr in r["interfaces"]]
        for s in self.sessions:
            s.send({"probe": [t for t in targets if t[0] != s.index]})
        reached = self.wait_all("reached", deadline, "try the other hosts' addresses")
        hosts = [{"name": s.name, "interfaces": [tuple(pair) for pair in r["interfaces"]], "default": r["default"]}
                 for s, r in zip(self.sessions, ready)]
        try:
            choices = network.choose(hosts, {i: {tuple(t) for t in got} for i, got in enumerate(reached)},
                                     self.opts.network_interfaces)
        except network.NetworkError as e:
            raise JobError(str(e))
        for s, c in zip(self.sessions, choices):
            self.say("host %s uses %s (%s): %s" % (s.name, c.interface, c.address, c.why))
        return choices

    def start(self, ready, choices, deadline):
        master_port, torch_port = ready[0]["ports"]
        if self.opts.master_port:
            master_port, torch_port = self.opts.master_port, self.opts.master_port + 1
        master = choices[0].address
        job_id = os.environ.get("KOLO_JOB_ID") or "kolorun-" + secrets.token_hex(8)
        secret = os.environ.get("KOLO_SECRET") or secrets.token_hex(32)
        bind = getattr(self.opts, "bind_to", "auto")
        for s, choice in zip(self.sessions, choices):
            ranks = []
            for p in self.placements:
                if p.host != s.name:
                    continue
                env = {"KOLO_RANK": p.rank, "KOLO_WORLD_SIZE": len(self.placements), "KOLO_LOCAL_RANK": p.local_rank,
                       "KOLO_LOCAL_WORLD_SIZE": p.local_size, "KOLO_CROSS_RANK": p.cross_rank,
                       "KOLO_CROSS_SIZE": p.cross_size, "KOLO_MASTER_ADDR": master, "KOLO_MASTER_PORT": master_port,
                       "KOLO_JOB_ID": job_id, "KOLO_SECRET": secret,
                       # torch.distributed's env:// (torchrun's names), its store on a port of its own
                       "RANK": p.rank, "WORLD_SIZE": len(self.placements), "LOCAL_RANK": p.local_rank,
                       "LOCAL_WORLD_SIZE": p.local_size, "GROUP_RANK": s.index, "MASTER_ADDR": master,
                       "MASTER_PORT": torch_port,
                       # horovodrun's names, which Horovod programs and tools may read before init
                       "HOROVOD_RANK": p.rank, "HOROVOD_SIZE": len(self.placements),
                       "HOROVOD_LOCAL_RANK": p.local_rank, "HOROVOD_LOCAL_SIZE": p.local_size,
                       "HOROVOD_CROSS_RANK": p.cross_rank, "HOROVOD_CROSS_SIZE": p.cross_size,
                       "HOROVOD_HOSTNAME": s.name}
                if choice.interface:
                    env["KOLO_IFNAME"] = choice.interface
                prefix = "" if self.opts.no_prefix else "[%d] " % p.rank
                ranks.append([p.rank, {k: str(v) for k, v in env.items()}, prefix, self.output_dir(p.rank)])
            s.send({"start": {"argv": self.opts.command, "cwd": os.getcwd(), "env": self.env, "ranks": ranks,
                              "timestamp": self.opts.timestamp,
                              "bind": bind}})
        started = self.wait_all("started", deadline, "start its ranks")
        if self.opts.verbose:
            for s, value in zip(self.sessions, started):
                if value.get("cores"):
                    self.say("host %s: ranks bound to cores (--bind-to %s): %s" % (
                        s.name, bind,
                        ", ".join("%d on %s" % (rank, ",".join(map(str, cores))) for rank, cores in value["cores"])))

    def output_dir(self, rank):
        """--output-filename's directory for a rank's output, horovodrun's
        rank.<rank> with the rank zero-padded to sort; None without it."""
        if not self.opts.output_filename:
            return None
        width = len(str(len(self.placements) - 1))
        return os.path.join(os.path.abspath(self.opts.output_filename), "rank.%s" % str(rank).zfill(width))

    # -- running --------------------------------------------------------------
    def rank_exited(self, value, stopping=False):
        rank, raw, error = value["rank"], value["status"], value.get("error")
        status = raw if raw is None or raw >= 0 else 128 - raw
        if status == 0:
            self.succeeded += 1
        if status and self.failure is None:
            host = self.placements[rank].host
            what = "rank %d on host %s %s" % (rank, host, error or "exited with status %d" % status)
            if getattr(self.opts, "enable_recovery", False) and not stopping:
                self.say(what + "; the others go on (--enable-recovery)")
                self.recovered.append((what, status))
                return
            self.status = status
            self.failure = what

    def run_until_done(self):
        begun = time.monotonic()
        done = self.done
        while len(done) < len(self.sessions):
            now = time.monotonic()
            if self.signalled:
                self.status = 128 + self.signalled
                self.failure = "interrupted (%s)" % signal.Signals(self.signalled).name
                return
            if self.opts.timeout and now - begun > self.opts.timeout:
                self.status, self.failure = 124, "the job exceeded --timeout %.0f s" % self.opts.timeout
                return
            got_event = self.next_event()
            if got_event is None:
                continue
            index, event, value = got_event
            if event == "exit":
                self.rank_exited(value)
                if self.failure:
                    return
            elif event == "done":
                done.add(index)
            elif event == "gone" and index not in done:
                s = self.sessions[index]
                self.status = 1
                self.failure = "host %s: lost (%s %s): %s" % (s.name, s.starter(), ended(value), s.last_words())
                return

    def stop(self):
        """Every host ends its ranks; what is still running after that is
        killed where kolorun can (its own children; a remote supervisor
        whose ssh is killed sees its input end and ends its ranks)."""
        if self.failure and os.environ.get("KOLO_FLIGHT_RECORDER_DIR"):
            # The ranks still running write their flight records (SIGUSR1)
            # for tools/kolo-doctor, and those failing too get 3 s to end
            # by themselves, their records saying how their failure went.
            for s in self.sessions:
                s.send({"signal": "USR1"})
            time.sleep(3)
        for s in self.sessions:
            s.send({"stop": True})
        deadline = time.monotonic() + session.STOP_GRACE_S + 5
        while any(not s.gone for s in self.sessions) and time.monotonic() < deadline:
            got_event = self.next_event()
            if got_event is None:
                continue
            _, event, value = got_event
            if event == "exit":
                self.rank_exited(value, stopping=True)  # the first failure, if nothing failed before
        for s in self.sessions:
            s.close()
            s.kill()

    def run(self):
        self.began = time.monotonic()
        deadline = self.began + self.opts.start_timeout
        try:
            ready = self.open(deadline)
            choices = self.choose_network(ready, deadline)
            self.start(ready, choices, deadline)
            self.run_until_done()
            if self.recovered and not self.failure:
                if self.succeeded:
                    self.say("the job went on after %d failure(s) (--enable-recovery): %s" % (
                        len(self.recovered), "; ".join(what for what, _ in self.recovered)))
                else:
                    self.status, self.failure = self.recovered[0][1], "no rank exited 0 (--enable-recovery); " \
                        "the first failure: " + self.recovered[0][0]
        except JobError as e:
            self.status, self.failure = self.status or 1, str(e)
        if self.failure:
            self.say(self.failure + "; ending the job")
        self.stop()
        return self.status


def run(opts, placements, connectors, env, say):
    """Runs the job; returns kolorun's exit status. SIGINT and SIGTERM end
    every rank on every host."""
    job = FixedJob(opts, placements, connectors, env, say)

    def on_signal(signum, _frame):
        job.signalled = signum  # the driver's loop sees it within 0.2 s
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    return job.run()
