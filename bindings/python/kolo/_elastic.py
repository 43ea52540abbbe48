"""Elastic training, framework-neutral (Horovod's horovod.common.elastic):
the state a job commits and restores, the loop that resets the job after a
lost worker or a change of hosts, and the worker's side of the elastic
driver (kolorun --min-np/--max-np; kolo/runner/elastic_driver.py).

A training function wrapped by run_fn(func, reset) runs as long as it
needs: when a collective fails because a worker was lost (PEER_LOST,
TIMEOUT, ABORTED, REVOKED, a transport error), every survivor restores
its last committed state, resets (leaves the job and joins its next
version: the driver says who is where) and syncs the state from the new
rank 0, a survivor; when the driver reports hosts added or removed, every
worker learns it at the same commit (rank 0 asks the driver and tells the
others), raises HostsUpdatedInterrupt and resets keeping its state.
"""
import functools
import http.client
import json
import os
import queue
import socket
import sys
import threading
import time
import urllib.request
import weakref

from kolo._library import (ERR_ABORTED, ERR_PEER_LOST, ERR_REVOKED, ERR_TIMEOUT, ERR_TRANSPORT, KoloError)

# What a lost worker looks like to the survivors: kolo's codes, by the
# names its messages begin with ("PEER_LOST: ...").
LOST_WORKER_CODES = {"ABORTED": ERR_ABORTED, "PEER_LOST": ERR_PEER_LOST, "REVOKED": ERR_REVOKED,
                     "TIMEOUT": ERR_TIMEOUT, "TRANSPORT": ERR_TRANSPORT}


class HostsUpdatedInterrupt(RuntimeError):
    """Hosts were added or removed: every worker resets at the same commit.
    skip_sync: the state need not be synced after the reset (Horovod's, when
    hosts were only removed; kolo's check_host_updates always syncs)."""

    def __init__(self, skip_sync=False):
        super().__init__("the job's hosts changed")
        self.skip_sync = skip_sync


def is_lost_worker(error):
    return isinstance(error, KoloError) and error.code in LOST_WORKER_CODES.values()


# -- the worker's side of the driver ------------------------------------------

class _Driver:
    version = 0          # of the assignment this worker runs in
    hosts_timestamp = 0  # the driver's host events that version already has


def under_driver():
    return bool(os.environ.get("KOLO_ELASTIC_DRIVER"))


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket: the driver as a remote host's ssh forwards
    it (kolo/runner/worker_processes.py)."""

    def __init__(self, socket_path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def _ask(path):
    """The driver's JSON answer to GET path (kolo/runner/elastic_protocol.py)
    at KOLO_ELASTIC_DRIVER (host:port, or unix:PATH); a refusal is a
    ConnectionError."""
    from kolo.runner.elastic_protocol import TOKEN_HEADER, driver_token
    address = os.environ["KOLO_ELASTIC_DRIVER"]
    timeout = float(os.environ.get("KOLO_ELASTIC_TIMEOUT_S", "900"))
    if address.startswith("unix:"):
        connection = _UnixConnection(address[len("unix:"):], timeout)
    else:
        connection = http.client.HTTPConnection(address, timeout=timeout)
    headers = {TOKEN_HEADER: driver_token(os.environ["KOLO_SECRET"])} if os.environ.get("KOLO_SECRET") else {}
    try:
        connection.request("GET", path, headers=headers)
        reply = connection.getresponse()
        body = reply.read()
    finally:
        connection.close()
    if reply.status != 200:
        raise ConnectionError("the elastic driver at %s answered %d %s" % (address, reply.status, reply.reason))
    return json.loads(body)


def next_assignment():
    """This worker's place in the job's next version (the driver waits until
    there is one): sets the launcher variables kolo's init reads, and
    returns the version's job id. A worker the job no longer has exits."""
    worker = urllib.request.quote(os.environ.get("KOLO_ELASTIC_WORKER", ""))
    a = _ask("/assignment?worker=%s&after=%d" % (worker, _Driver.version))
    if a.get("exit"):
        sys.stdout.flush()
        raise SystemExit(0)
    _Driver.version = a["version"]
    _Driver.hosts_timestamp = max(_Driver.hosts_timestamp, a.get("hosts_timestamp", 0))
    os.environ.update({
        "KOLO_RANK": str(a["rank"]), "KOLO_WORLD_SIZE": str(a["size"]),
        "KOLO_LOCAL_RANK": str(a["local_rank"]), "KOLO_LOCAL_WORLD_SIZE": str(a["local_size"]),
        "KOLO_MASTER_ADDR": a["master_addr"], "KOLO_MASTER_PORT": str(a["master_port"]),
        "RANK": str(a["rank"]), "WORLD_SIZE": str(a["size"]), "LOCAL_RANK": str(a["local_rank"]),
        "LOCAL_WORLD_SIZE": str(a["local_size"]), "MASTER_ADDR": a["master_addr"],
        # As Horovod's elastic workers have them after each init (scripts
        # read their rank there, e.g. Horovod's own elastic tests).
        "HOROVOD_RANK": str(a["rank"]), "HOROVOD_SIZE": str(a["size"]), "HOROVOD_LOCAL_RANK": str(a["local_rank"]),
        "HOROVOD_LOCAL_SIZE": str(a["local_size"])})
    return a["job_id"]


def join_next_version(join):
    """join(job_id) with the next assignment's job id, again with the one
    after while a version fails to come together (a lost worker's error)."""
    while True:
        try:
            return join(next_assignment())
        except KoloError as e:
            if not is_lost_worker(e):
                raise
            _say("version %d did not come together (%s)" % (_Driver.version, str(e).split(":")[0]))


class _HostWatcher:
    """The worker's side of Horovod's worker notification service: a thread
    that waits on the driver for host events and puts each in every State's
    _host_messages, as Horovod's service pushes them there (scripts may
    wait on that queue; check_host_updates reads it)."""

    lock = threading.Lock()
    states = weakref.WeakSet()
    thread = None

    @classmethod
    def add(cls, state):
        if not under_driver():
            return
        with cls.lock:
            cls.states.add(state)
            if cls.thread is None:
                cls.thread = threading.Thread(target=cls.watch, name="kolo-elastic-hosts", daemon=True)
                cls.thread.start()

    @classmethod
    def watch(cls):
        seen = 0
        while True:
            since = max(seen, _Driver.hosts_timestamp)
            try:
                reply = _ask("/hosts?since=%d&wait=30" % since)
            except OSError:  # the driver is gone: the job is ending
                time.sleep(1)
                continue
            if reply["timestamp"] <= since or not reply["update"]:
                time.sleep(0.1)  # nothing new (the driver is stopping, or its wait ended)
                continue
            seen = reply["timestamp"]
            with cls.lock:
                states = list(cls.states)
            for state in states:
                state._host_messages.put((seen, reply["update"]))


def _driver_hosts():
    """(timestamp, update flags) of the driver's newest host event."""
    if not under_driver():
        return 0, 0
    reply = _ask("/hosts?since=%d" % _Driver.hosts_timestamp)
    return reply["timestamp"], reply["update"]


# -- state --------------------------------------------------------------------

class State:
    """What a job commits (save) and goes back to (restore) when a worker is
    lost, and sends from rank 0 to everyone after a reset (sync).
    bcast_object(obj) broadcasts a picklable object from rank 0; get_rank()
    is this worker's rank."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []
        # Host events as Horovod's State keeps them: (timestamp, update)
        # from the driver, and the newest this job has acted on.
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = _Driver.hosts_timestamp
        _HostWatcher.add(self)

    def register_reset_callbacks(self, callbacks):
        """Called after every reset, in order (e.g. to scale the learning
        rate to the new size)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        # The new version has the host events up to its own: older
        # messages are no change any more.
        self._last_updated_timestamp = max(self._last_updated_timestamp, _Driver.hosts_timestamp)
        newer = []
        while not self._host_messages.empty():
            message = self._host_messages.get()
            if message[0] > _Driver.hosts_timestamp:
                newer.append(message)
        for message in newer:
            self._host_messages.put(message)
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (what a lost worker makes every survivor go back
        to), then checks for host updates."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every worker alike when the
        driver has changed the hosts since the last change acted on: rank 0
        reads its messages and asks the driver (the newest event may not
        have reached the queue yet), and tells the others."""
        previous = newest = self._last_updated_timestamp
        update = 0
        while not self._host_messages.empty():
            timestamp, flags = self._host_messages.get()
            if timestamp > newest:
                newest, update = timestamp, update | flags
        if self._rank() == 0:
            timestamp, flags = _driver_hosts()
            if timestamp > max(newest, _Driver.hosts_timestamp):
                newest, update = timestamp, update | flags
        previous, self._last_updated_timestamp, update = self._bcast_object((previous, newest, update))
        _Driver.hosts_timestamp = max(_Driver.hosts_timestamp, self._last_updated_timestamp)
        if self._last_updated_timestamp > previous:
            # Synced even when hosts were only removed (Horovod skips it
            # then): the workers that left take their records of the epoch
            # with them, and the survivors' samplers must agree again on
            # what is left of it.
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        """After a reset, before the training function runs again."""


class ObjectState(State):
    """State of plain attributes (picklable values): ObjectState(bcast_object,
    get_rank, epoch=0, batch=0) makes state.epoch and state.batch."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def _say(text):
    """KOLO_ELASTIC_VERBOSE=1: each reset's cause and times, on stderr (the
    chaos harness, tools/chaos/, reads them)."""
    if os.environ.get("KOLO_ELASTIC_VERBOSE") == "1":
        sys.stderr.write("kolo elastic: %s at %.6f\n" % (text, time.time()))
        sys.stderr.flush()


def run_fn(func, reset, lost_worker_error=None):
    """func(state, *args, **kwargs), run until it returns, across resets;
    reset() leaves the job and joins its next version. A KoloError says
    that a worker was lost (is_lost_worker); lost_worker_error(error), where
    given, finds the KoloError that one of a framework's own errors stands
    for (TensorFlow's ops raise TensorFlow's), or None."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as e:
                _say("hosts changed")
                skip_sync = e.skip_sync
            except Exception as e:
                lost = e if is_lost_worker(e) else lost_worker_error(e) if lost_worker_error is not None else None
                if lost is None:
                    raise
                _say("lost a worker (%s)" % str(lost).split(":")[0])
                state.restore()
                skip_sync = False
            reset()
            _say("reset to version %d as rank %d of %d" % (_Driver.version, int(os.environ.get("KOLO_RANK", "0")),
                                                           int(os.environ.get("KOLO_WORLD_SIZE", "1"))))
            state.on_reset()

    return wrapper
