"""The elastic driver of `kolorun --min-np N --max-np M
[--host-discovery-script S | -H host:slots,...]`: Horovod's elastic driver
semantics for kolo workers on other hosts over ssh, as Horovod's driver
starts them (a host that resolves to none of this machine's addresses; each
worker under a supervisor of its own, kolo/runner/supervisor.py, that ends
it when its connection is lost, and the driver's port forwarded to the
host's loopback), on this machine (each worker is told its host name, so
workers of different "hosts" are told apart as separate hosts are; a name
that does not resolve is such a host, said once), or on emulated hosts in
network namespaces (`--netns PREFIX:K`: hosts named PREFIXh<i>, see
EmulatedHosts); worker_processes.py starts them. kolo.ray's
ElasticRayExecutor runs the same driver with Ray actors for workers and
Ray's nodes for hosts.

It starts -np workers on the hosts' slots, then keeps the job going:
- a worker that fails (exits non-zero) is restarted on its slot, joining
  the next version, until its host has failed --host-failure-limit times
  (default 1: blacklisted at once, as Horovod does); a blacklisted host
  comes back after a cooldown drawn from --blacklist-cooldown-range (none:
  never). The survivors' next collective fails, they reset
  (kolo.torch.elastic.run) and ask for the next assignment;
- a worker alive but stuck (stopped, hung) holds the others' collectives
  until their deadline; they then ask for the next version, and the driver
  ends every worker that has not asked within --reset-grace s (a failure
  of its host) and goes on without it;
- hosts the discovery script adds (polled every --discovery-interval s)
  get workers up to --max-np, and the next version waits for them to be up;
  removed hosts' workers leave at their next reset (ended after
  --reset-grace s); the running workers learn of the change at their next
  state.commit() (HostsUpdatedInterrupt) and reset too;
- every change is a new version of the assignment: the ranks that stay keep
  their order (so rank 0 is a survivor, whose committed state the others
  receive), new workers come after them, and each version meets at a fresh
  rendezvous (its own port and job id);
- the job ends when every worker of the current version has exited 0; it
  fails when fewer than --min-np slots remain for --elastic-timeout s,
  after --reset-limit resets, or when no host is left.

Workers ask over HTTP on 127.0.0.1 (KOLO_ELASTIC_DRIVER), as
elastic_protocol.py says, signed with a token of the job's secret.
Standard library only: kolorun loads the runner without kolo's library.
"""
import random
import signal
import subprocess
import sys
import threading
import time

from .elastic_protocol import make_server
from .emulated_hosts import in_netns
from .hosts import parse_hosts
from .worker_processes import WorkerProcesses

ADDED, REMOVED = 1, 2


class Worker:
    def __init__(self, host, slot, proc):
        self.host, self.slot, self.proc = host, slot, proc
        self.id = "%s:%d" % (host, slot)
        self.rank = None  # in the current version
        self.done = False
        self.asked_after = -1  # the version after which it last asked for an assignment
        self.started = time.monotonic()
        self.awaited = False  # on a host added: the next version waits for it to be up


class ElasticDriver:
    def __init__(self, opts, argv, env, python_path, out_lock, launcher=None, discovery=None):
        """launcher starts and ends the workers (default: processes running
        argv, worker_processes.py); discovery() -> [(host, slots)] finds the
        hosts (default: --host-discovery-script, else -H)."""
        self.opts, self.env = opts, env
        self.out_lock = out_lock
        self.cond = threading.Condition()
        self.version = 0
        self.assignment = {}  # worker id -> dict, for self.version
        self.host_event = (0, 0)  # (timestamp, update flags since the last version)
        self.host_timestamp = 0
        self.workers = {}  # id -> Worker, alive or done, of the current plan
        self.blacklist = {}  # host -> when it may come back (inf: never)
        self.host_failures = {}  # host -> failures so far
        self.restarts = {}  # worker id -> replacements started
        self.hosts = []
        self.resets = 0
        self.asking_since = None
        self.finishing = False  # a worker has finished: no new version, and who asks for one exits
        self.pending = False  # a new version is due, waiting for workers or slots
        self.waiting_since = None  # since when the next version has lacked --min-np slots
        self.last_discovery = 0.0
        self.servers = {}  # network namespace or None (this machine's own) -> ThreadingHTTPServer
        self.failure = None  # why the job failed: "reset-limit", "min-np", "no-hosts" or a worker's failure
        self.leaving = {}  # id -> (Worker, deadline): on a removed host, to leave at its next reset
        self.launcher = launcher or WorkerProcesses(opts, argv, python_path, out_lock, self.serve, self.say)
        self.discovery = discovery or self.discover_from_options

    # -- what workers ask -------------------------------------------------
    def serve(self, namespace=None):
        """The driver's server on the launcher's bind_address (127.0.0.1 for
        processes) of `namespace` (None: this machine's own), started once;
        returns its port."""
        if namespace in self.servers:
            return self.servers[namespace].server_address[1]

        def make():
            return make_server(self, self.launcher.bind_address, self.env.get("KOLO_SECRET", ""))

        server = make() if namespace is None else in_netns(namespace, make)
        self.servers[namespace] = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server.server_address[1]

    def wait_assignment(self, worker, after):
        # The driver publishes a version or ends the job within these.
        deadline = time.monotonic() + self.start_timeout() + self.opts.elastic_timeout
        with self.cond:
            if worker in self.workers:
                self.workers[worker].asked_after = max(self.workers[worker].asked_after, after)
                self.cond.notify_all()
            while True:
                if self.version > after:
                    if worker in self.assignment:
                        return self.assignment[worker]
                    if worker not in self.workers:
                        return {"exit": True}
                if self.version < 0 or self.finishing or time.monotonic() > deadline:
                    return {"exit": True}
                self.cond.wait(timeout=1)

    def hosts_since(self, since, wait=0):
        deadline = time.monotonic() + min(wait, 60)
        with self.cond:
            while self.host_event[0] <= since and self.version >= 0 and time.monotonic() < deadline:
                self.cond.wait(timeout=max(0.01, deadline - time.monotonic()))
            timestamp, update = self.host_event
            return {"timestamp": timestamp if timestamp > since else since, "update": update if timestamp > since else 0}

    # -- hosts --------------------------------------------------------------
    def discover_from_options(self):
        if self.opts.host_discovery_script:
            try:
                out = subprocess.run([self.opts.host_discovery_script], stdout=subprocess.PIPE, timeout=30,
                                     check=True).stdout.decode()
            except (OSError, subprocess.SubprocessError) as e:
                self.say("host discovery failed (%s); keeping the hosts known" % e)
                return self.hosts
            return parse_hosts(out, self.opts.slots, "--host-discovery-script", strict=False)
        return parse_hosts(self.opts.hosts or "localhost:%d" % self.opts.np, self.opts.slots, strict=False)

    def usable_slots(self):
        now = time.monotonic()
        for host, until in list(self.blacklist.items()):
            if until <= now:
                del self.blacklist[host]
                self.host_failures[host] = 0
                self.say("host %s is back from its cooldown" % host)
        return [(h, s) for h, n in self.hosts if h not in self.blacklist for s in range(n)]

    def host_failed(self, host):
        """Counts a failure of the host; blacklists it at the limit."""
        self.host_failures[host] = self.host_failures.get(host, 0) + 1
        if self.host_failures[host] < self.opts.host_failure_limit:
            return False
        low, high = self.opts.blacklist_cooldown_range or (float("inf"), float("inf"))
        self.blacklist[host] = time.monotonic() + random.uniform(low, high)
        return True

    # -- workers ------------------------------------------------------------
    def say(self, text):
        with self.out_lock:
            sys.stderr.write("kolorun (elastic): %s\n" % text)
            sys.stderr.flush()

    def start_worker(self, host, slot):
        env = dict(self.env)
        wid = "%s:%d" % (host, slot)
        env.update({"KOLO_ELASTIC_WORKER": wid, "KOLO_ELASTIC_RESTARTS": str(self.restarts.get(wid, 0)),
                    "KOLO_HOSTNAME": host, "HOROVOD_HOSTNAME": host})
        for var in ("KOLO_RANK", "KOLO_WORLD_SIZE", "KOLO_LOCAL_RANK", "KOLO_LOCAL_WORLD_SIZE", "RANK",
                    "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            env.pop(var, None)
        prefix = b"" if self.opts.no_prefix else ("[%s] " % wid).encode()
        w = Worker(host, slot, self.launcher.start(host, slot, env, prefix))
        self.workers[w.id] = w
        return w

    def end_worker(self, w, sig=signal.SIGTERM):
        self.launcher.end(w.proc, sig)

    def ready_workers(self):
        """Workers that have asked for an assignment: up and waiting. A
        worker still starting (a Python process importing torch takes
        seconds) joins the version after it is ready, so that the others
        never wait for it at a rendezvous."""
        with self.cond:
            return [w for w in self.workers.values() if not w.done and w.asked_after >= 0]

    def publish(self):
        """A new version: the workers that stay in rank order, then the new."""
        live = self.ready_workers()
        # New workers in the hosts' order as given (or discovered), as
        # Horovod numbers them.
        order = {h: i for i, (h, _) in enumerate(self.hosts)}
        live.sort(key=lambda w: (w.rank is None, w.rank if w.rank is not None else 0, order.get(w.host, len(order)),
                                 w.slot))
        per_host = {}
        for w in live:
            per_host.setdefault(w.host, []).append(w)
        # Rank 0 serves the version's rendezvous: on its host's address, at a
        # port free there.
        master_addr, master_port = self.launcher.rendezvous(live)
        with self.cond:
            self.version += 1
            self.assignment = {}
            for rank, w in enumerate(live):
                w.rank = rank
                self.assignment[w.id] = {
                    "version": self.version, "rank": rank, "size": len(live),
                    "local_rank": per_host[w.host].index(w), "local_size": len(per_host[w.host]),
                    "master_addr": master_addr, "master_port": master_port,
                    "hosts_timestamp": self.host_timestamp,
                    "job_id": "%s-v%d" % (self.env.get("KOLO_JOB_ID", "elastic"), self.version)}
            self.cond.notify_all()
        self.say("version %d: %d worker(s): %s" % (self.version, len(live), ", ".join(w.id for w in live)))

    def plan(self):
        """Fills free slots up to --max-np; False while below --min-np."""
        live = [w for w in self.workers.values() if not w.done]
        taken = {(w.host, w.slot) for w in live}
        free = [hs for hs in self.usable_slots() if hs not in taken]
        want = max(0, min(self.opts.max_np - len(live), len(free)))
        if len(live) + want < self.opts.min_np:
            return False
        for host, slot in free[:want]:
            self.start_worker(host, slot).awaited = True
        return True

    def starting(self):
        """Workers of added hosts still starting (importing, say): the next
        version waits for them, as Horovod's does, so that the others reset
        once for them, not twice. A replacement of a failed worker is not
        waited for: the survivors train on and it joins later."""
        return [w for w in self.workers.values() if w.awaited and w.asked_after < 0 and w.proc.poll() is None
                and time.monotonic() - w.started < self.start_timeout()]

    def start_timeout(self):
        """How long a worker may take to start (import its framework) before
        the job goes on without it (--start-timeout, 300 s): not
        --elastic-timeout, which is how long the job may lack --min-np."""
        return getattr(self.opts, "start_timeout", 300)

    def leave(self, w):
        """A worker of a removed host: no version has it any more. One
        already in the job leaves at its next reset (told to exit when it
        asks for an assignment), as Horovod's do, so the others see a host
        update, not a lost peer; ended if it has not left within
        --reset-grace s. One still starting is ended at once."""
        del self.workers[w.id]
        if w.id in self.assignment and w.proc.poll() is None:
            self.leaving[w.id] = (w, time.monotonic() + self.opts.reset_grace)
        else:
            self.end_worker(w)

    def reap_leaving(self):
        for wid, (w, deadline) in list(self.leaving.items()):
            if w.proc.poll() is not None:
                del self.leaving[wid]
            elif time.monotonic() > deadline:
                self.say("worker %s of a removed host did not leave within --reset-grace %.0f s: ending it"
                         % (w.id, self.opts.reset_grace))
                self.end_worker(w, signal.SIGKILL)
                del self.leaving[wid]

    def run(self):
        """Runs the job to its end; returns its exit status (0: every worker
        of the last version finished; 1: failed, self.failure says why)."""
        self.serve()
        status = self.start_first_version()
        if status is not None:
            return status
        self.last_discovery = time.monotonic()
        while True:
            time.sleep(0.05)
            self.reap_leaving()
            changed = self.reap_exited()
            changed = self.note_joining() or changed
            changed = self.end_stuck() or changed
            changed = self.drop_blacklisted() or changed
            status = self.finish()
            if status is not None:
                return status
            if self.finishing:
                continue
            changed = self.rediscover() or changed
            if changed or self.pending:
                status = self.next_version(changed)
                if status is not None:
                    return status

    def fail(self, failure, text):
        self.say(text)
        self.failure = failure
        self.stop()
        return 1

    def start_first_version(self):
        """Waits for --min-np slots (and the hosts Horovod's launcher may
        want), starts -np workers and publishes the first version once they
        are up; 1 if the slots never come."""
        start = time.monotonic()
        while True:
            self.hosts = self.discovery()
            if len(self.usable_slots()) >= self.opts.min_np and len(self.hosts) >= getattr(self.opts, "min_hosts", 1):
                break
            if time.monotonic() - start > self.opts.elastic_timeout:
                return self.fail("min-np", "fewer than --min-np %d slots after %.0f s"
                                 % (self.opts.min_np, self.opts.elastic_timeout))
            time.sleep(self.opts.discovery_interval)
        for host, slot in self.usable_slots()[:min(self.opts.np, self.opts.max_np)]:
            self.start_worker(host, slot)
        while len(self.ready_workers()) < len(self.workers) and time.monotonic() - start < self.start_timeout():
            if any(w.proc.poll() is not None for w in self.workers.values()):
                break
            time.sleep(0.05)
        self.publish()
        return None

    def reap_exited(self):
        """Workers that exited: 0 is done; else restarted on their slot, or
        their host blacklisted at its failure limit. Whether any failed."""
        changed = False
        for w in list(self.workers.values()):
            rc = w.proc.poll()
            if rc is None or w.done:
                continue
            if rc == 0:
                w.done = True
                continue
            del self.workers[w.id]
            changed = True
            if self.host_failed(w.host):
                self.say("worker %s (rank %s) exited with status %d: blacklisting host %s" % (w.id, w.rank, rc, w.host))
            else:
                self.say("worker %s (rank %s) exited with status %d: restarting it" % (w.id, w.rank, rc))
                self.restarts[w.id] = self.restarts.get(w.id, 0) + 1
                self.start_worker(w.host, w.slot)
        return changed

    def note_joining(self):
        """A worker up and waiting that the current version lacks (a
        replacement, a new host's): a new version with it, which the others
        learn of at their next commit, as of a host added."""
        joining = [w for w in self.ready_workers() if w.id not in self.assignment]
        if not joining or self.pending:
            return False
        self.host_timestamp += 1
        with self.cond:
            self.host_event = (self.host_timestamp, ADDED)
            self.cond.notify_all()
        return True

    def end_stuck(self):
        """Workers asked for the next version while others did not: those are
        stuck (stopped, hung) and are ended after --reset-grace. When every
        worker asked and nothing changed (a timeout with no one lost), a new
        version of the same workers is due (True)."""
        with self.cond:
            live = [w for w in self.workers.values() if not w.done and w.id in self.assignment]
            asking = [w for w in live if w.asked_after >= self.version > 0]
        if asking and len(asking) < len(live):
            self.asking_since = self.asking_since or time.monotonic()
            if time.monotonic() - self.asking_since > self.opts.reset_grace:
                for w in live:
                    if w.asked_after < self.version and w.rank is not None:
                        self.say("worker %s (rank %s) did not reset within --reset-grace %.0f s: ending it"
                                 % (w.id, w.rank, self.opts.reset_grace))
                        self.end_worker(w, signal.SIGKILL)
                self.asking_since = None
            return False
        self.asking_since = None
        return bool(asking) and not self.pending

    def drop_blacklisted(self):
        """Workers on a blacklisted host go too: the host is not trusted."""
        changed = False
        for w in list(self.workers.values()):
            if w.host in self.blacklist and not w.done:
                self.end_worker(w)
                del self.workers[w.id]
                changed = True
        return changed

    def finish(self):
        """A worker that finished means the job is finishing: nothing new
        starts, a worker not yet in it goes, and the job ends when the
        others have finished too. The job's exit status once it has ended,
        else None."""
        if not any(w.done for w in self.workers.values()):
            return None
        with self.cond:
            self.finishing = True
            self.cond.notify_all()
        for w in list(self.workers.values()):
            if not w.done and w.id not in self.assignment:
                self.end_worker(w)
                del self.workers[w.id]
        if all(w.done for w in self.workers.values()):
            self.stop()
            return 0
        failed = [w for w in self.workers.values() if not w.done and w.proc.poll() not in (None, 0)]
        if failed:
            return self.fail("worker %s (exit status %d)" % (failed[0].id, failed[0].proc.returncode),
                             "worker %s failed while the job was finishing" % failed[0].id)
        return None

    def rediscover(self):
        """The hosts again, every --discovery-interval: workers of removed
        hosts (or slots) leave, and the running workers are told of the
        change. Whether the hosts changed."""
        if time.monotonic() - self.last_discovery < self.opts.discovery_interval:
            return False
        self.last_discovery = time.monotonic()
        hosts = self.discovery()
        if hosts == self.hosts:
            return False
        before = {h for h, _ in self.hosts}
        after = {h for h, _ in hosts}
        update = (ADDED if after - before or any(n > dict(self.hosts).get(h, 0) for h, n in hosts) else 0) | (
            REMOVED if before - after else 0)
        self.hosts = hosts
        for w in list(self.workers.values()):
            if w.host not in after or w.slot >= dict(hosts).get(w.host, 0):
                self.leave(w)
        self.host_timestamp += 1
        with self.cond:
            self.host_event = (self.host_timestamp, update | self.host_event[1] if self.pending else update)
            self.cond.notify_all()
        self.say("hosts now %s" % ", ".join("%s:%d" % h for h in hosts))
        return True

    def next_version(self, changed):
        """After a change (or while one is pending): counts the reset, fills
        free slots, and publishes the next version once its new workers are
        up; 1 when no host is left, past --reset-limit, or below --min-np
        for --elastic-timeout s."""
        if not self.workers and not self.usable_slots():
            return self.fail("no-hosts", "no host is left (blacklisted: %s)" % ", ".join(sorted(self.blacklist)))
        if changed:
            self.resets += 1
            if self.opts.reset_limit and self.resets > self.opts.reset_limit:
                return self.fail("reset-limit", "more than --reset-limit %d resets" % self.opts.reset_limit)
        if self.plan():
            if self.starting():
                self.pending = True  # published once they are up
            else:
                self.publish()
                self.pending, self.waiting_since = False, None
            return None
        self.pending = True
        self.waiting_since = self.waiting_since or time.monotonic()
        if time.monotonic() - self.waiting_since > self.opts.elastic_timeout:
            return self.fail("min-np", "fewer than --min-np %d workers for %.0f s"
                             % (self.opts.min_np, self.opts.elastic_timeout))
        return None

    def stop(self):
        with self.cond:
            self.version = -1 if self.version else self.version
            self.cond.notify_all()
        everyone = list(self.workers.values()) + [w for w, _ in self.leaving.values()]
        for w in everyone:
            self.end_worker(w)
        deadline = time.monotonic() + 5
        for w in everyone:
            try:
                w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.end_worker(w, signal.SIGKILL)
        self.launcher.close()
        for server in self.servers.values():
            server.shutdown()


def run(opts, argv, env, python_path, out_lock):
    try:
        driver = ElasticDriver(opts, argv, env, python_path, out_lock)
    except ValueError as e:  # the emulated hosts (--netns) are not there
        sys.stderr.write("kolorun: %s\n" % e)
        return 2
    return driver.run()
