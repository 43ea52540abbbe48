"""ElasticRayExecutor: horovod.ray's elastic executor on kolo. Hosts are
Ray's nodes (RayHostDiscovery: a node's slots are what its CPUs, and GPUs
with use_gpu, allow), or what settings.discovery finds; workers are Ray
actors, each placed on its host with the host's `node:<name>` resource.
kolorun's elastic driver (kolo/runner/elastic_driver.py) runs the job with
Horovod's elastic semantics: workers start on every slot up to
max_num_proc once min_num_proc are there; hosts added get workers and
hosts removed lose theirs, and the survivors reset at their next
state.commit(); a worker that fails (raises, or its actor or node dies)
blacklists its host; the job fails after reset_limit resets or when fewer
than min_num_proc slots remain for elastic_timeout s.

    settings = ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=8)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    results = executor.run(train, callbacks=[print])  # every finished worker's, in rank order

`train` takes no arguments, calls kolo.torch.init() (or horovod.torch's,
under kolorun --horovod's names) and wraps its loop in
kolo.torch.elastic.run, as under `kolorun --min-np`. kolo.ray.ray_logger.log
(dict) in a worker reaches each callback.

The workers ask the driver for their assignments over HTTP: here it
answers on this node's Ray address (not only 127.0.0.1, since workers run
on other nodes), so the nodes' network must be trusted, as Ray's own is.
"""
import secrets
import subprocess
import threading
from types import SimpleNamespace

import ray
from ray.util.queue import Empty, Queue

from kolo.ray.worker import Worker
from kolo.runner.elastic_driver import ElasticDriver

DISCOVER_HOSTS_FREQUENCY_SECS = 1.0  # how often the driver asks for the hosts
RESET_GRACE_S = 30  # a worker that does not reset within this after the others is ended


class RayHostDiscovery:
    """Ray's live nodes, each with the slots its resources allow."""

    def __init__(self, use_gpu=False, cpus_per_slot=1, gpus_per_slot=1):
        self.use_gpu, self.cpus_per_slot, self.gpus_per_slot = use_gpu, cpus_per_slot, gpus_per_slot

    def find_available_hosts_and_slots(self):
        """{node address: slots}, for nodes with at least one slot."""
        hosts = {}
        for node in ray.nodes():
            if not node["alive"]:
                continue
            resources = node["Resources"]
            slots = int(resources.get("CPU", 0) // self.cpus_per_slot)
            if self.use_gpu:
                slots = min(slots, int(resources.get("GPU", 0) // self.gpus_per_slot))
            if slots:
                hosts[node["NodeManagerAddress"]] = slots
        return hosts


class _ActorProcess:
    """A worker actor running the job's function, seen as the driver sees a
    worker process: poll() and returncode (0 when the function returned or
    the worker left the job, 1 when it raised or the actor died), wait(),
    and the function's result (returned: whether it returned one). An actor
    whose function has ended is ended too, giving its resources back."""

    def __init__(self, name, actor, fn, env, queue, failed):
        self.name, self.actor, self.failed = name, actor, failed
        self.ref = actor.run_elastic.remote(fn, env, queue)
        self.returncode = None
        self.result, self.returned = None, False
        self.error = None
        self.ended = False  # by the driver (end()): its death is no failure

    def poll(self):
        if self.returncode is None:
            ready, _ = ray.wait([self.ref], timeout=0)
            if ready:
                try:
                    self.returncode, self.result, self.returned = ray.get(self.ref)
                except Exception as e:  # the function raised, or the actor (or its node) died
                    if self.ended:
                        self.returncode = -9  # as a process the driver killed
                    else:
                        self.returncode, self.error = 1, e
                        self.failed(self.name, str(e).strip())
                ray.kill(self.actor, no_restart=True)
        return self.returncode

    def wait(self, timeout=None):
        ray.wait([self.ref], timeout=timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired("ray actor", timeout)
        return self.returncode


class _RayActors:
    """The elastic driver's launcher (see kolo/runner/worker_processes.py
    for the four methods) for Ray actors."""

    def __init__(self, executor, fn, queue, say):
        self.executor, self.fn, self.queue, self.say = executor, fn, queue, say
        self.bind_address = ray.util.get_node_ip_address()
        self.driver_port = None  # set once the driver serves
        self.first_failure = None  # "worker W: its error's last line", for the job's error

    def failed(self, name, error):
        self.say("worker %s failed: %s" % (name, error[-2000:]))
        self.first_failure = self.first_failure or "worker %s: %s" % (name, (error.splitlines() or [""])[-1])

    def start(self, host, slot, env, prefix):
        del slot, prefix  # an actor's output goes to Ray's logs
        e = self.executor
        options = {"num_cpus": e.cpus_per_slot, "max_concurrency": 2, "resources": {"node:%s" % host: 0.01}}
        if e.use_gpu:
            options["num_gpus"] = e.gpus_per_slot
        actor = ray.remote(Worker).options(**options).remote()
        env = dict(env, KOLO_ELASTIC_DRIVER="%s:%d" % (self.bind_address, self.driver_port), PYTHONUNBUFFERED="1")
        return _ActorProcess(env.get("KOLO_ELASTIC_WORKER", host), actor, self.fn, env, self.queue, self.failed)

    def end(self, proc, sig=None):
        del sig  # an actor ends one way
        if proc.poll() is None:
            proc.ended = True
            ray.kill(proc.actor, no_restart=True)

    def rendezvous(self, workers):
        """Rank 0's node address and a port free there, asked of rank 0's
        actor (within the settings' timeout_s)."""
        if not workers:  # a version of no one (every worker failed before it was up): nothing to serve
            return "127.0.0.1", 0
        try:
            return tuple(ray.get(workers[0].proc.actor.node_and_port.remote(),
                                 timeout=self.executor.settings.timeout_s))
        except Exception as e:
            self.say("could not ask host %s for a rendezvous port (%s): using its name" % (workers[0].host, e))
            from kolo.runner.supervisor import free_port
            return workers[0].host, free_port()

    def close(self):
        pass


class ElasticRayExecutor:
    @staticmethod
    def create_settings(min_num_proc=1, max_num_proc=None, reset_limit=None, elastic_timeout=600, timeout_s=30,
                        ssh_identity_file=None, nics=None, min_np=None, max_np=None, **kwargs):
        """horovod.ray's settings: min_num_proc (min_np) workers for the job
        to go on, at most max_num_proc (max_np; no limit by default),
        reset_limit resets at most, elastic_timeout s at most below
        min_num_proc, timeout_s for each worker to start; nics (a set of
        interface names) the interfaces the ranks use; verbose. The
        discovery is set by the executor, or by the caller after this. The
        ssh identity is accepted for horovod.ray's callers: Ray reaches the
        nodes itself."""
        del ssh_identity_file
        return SimpleNamespace(
            discovery=None, min_num_proc=min_np if min_np is not None else min_num_proc,
            max_num_proc=max_np if max_np is not None else max_num_proc, reset_limit=reset_limit,
            elastic_timeout=elastic_timeout, timeout_s=timeout_s, nics=set(nics) if nics else None,
            verbose=kwargs.get("verbose", 0))

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None, env_vars=None,
                 override_discovery=True):
        if gpus_per_slot and not use_gpu:
            raise ValueError("ElasticRayExecutor: gpus_per_slot is set but use_gpu is False")
        gpus_per_slot = gpus_per_slot or int(use_gpu)
        if use_gpu and gpus_per_slot < 1:
            raise ValueError("ElasticRayExecutor: gpus_per_slot must be at least 1, got %s" % gpus_per_slot)
        if override_discovery:
            settings.discovery = RayHostDiscovery(use_gpu, cpus_per_slot, gpus_per_slot)
        self.settings, self.use_gpu = settings, use_gpu
        self.cpus_per_slot, self.gpus_per_slot = cpus_per_slot, gpus_per_slot
        self.env_vars = dict(env_vars or {})
        self.driver = None  # kolorun's elastic driver, while run() runs and after
        self.started = False

    def start(self):
        """Checks the settings; run() starts the workers once there are slots."""
        if self.settings.discovery is None:
            raise ValueError("ElasticRayExecutor: settings.discovery is not set (override_discovery=False "
                             "wants a discovery object with find_available_hosts_and_slots())")
        self.started = True

    def run(self, worker_fn, callbacks=None):
        """worker_fn() on every worker until the job ends; the results of the
        workers that finished it, in rank order. Raises RuntimeError when
        the job fails."""
        if not self.started:
            raise RuntimeError("ElasticRayExecutor: call start() first")
        s = self.settings
        max_np = s.max_num_proc or 1 << 20
        opts = SimpleNamespace(
            np=max_np, min_np=s.min_num_proc, max_np=max_np, hosts="", host_discovery_script="", slots=1,
            discovery_interval=DISCOVER_HOSTS_FREQUENCY_SECS, elastic_timeout=s.elastic_timeout, min_hosts=1,
            reset_limit=s.reset_limit or 0, host_failure_limit=1, blacklist_cooldown_range=None,
            reset_grace=RESET_GRACE_S, start_timeout=s.timeout_s, no_prefix=True)
        env = {"KOLO_JOB_ID": "ray-elastic-" + secrets.token_hex(8), "KOLO_SECRET": secrets.token_hex(32)}
        if s.nics:
            env["KOLO_IFNAME"] = sorted(s.nics)[0]
        env.update({k: str(v) for k, v in self.env_vars.items()})
        queue = Queue(actor_options={"num_cpus": 0}) if callbacks else None
        actors = _RayActors(self, worker_fn, queue, lambda text: self.driver.say(text))
        self.driver = ElasticDriver(opts, [], env, "", threading.Lock(), launcher=actors,
                                    discovery=lambda: list(s.discovery.find_available_hosts_and_slots().items()))
        actors.driver_port = self.driver.serve()
        done = threading.Event()
        pump = None
        if queue is not None:
            pump = threading.Thread(target=_deliver, args=(queue, callbacks, done), daemon=True)
            pump.start()
        try:
            status = self.driver.run()
        finally:
            done.set()
            if queue is not None:
                pump.join(timeout=60)
                queue.shutdown()
        if status != 0:
            raise RuntimeError("ElasticRayExecutor: the job failed (%s)%s" % (
                self.driver.failure or "unknown", "; first failure: " + actors.first_failure if actors.first_failure
                else ""))
        finished = sorted((w for w in self.driver.workers.values() if w.done and w.proc.returned),
                          key=lambda w: w.rank)
        return [w.proc.result for w in finished]


def _deliver(queue, callbacks, done):
    """Hands the workers' ray_logger records to the callbacks until the job
    has ended and the queue is drained."""
    while True:
        try:
            record = queue.get(timeout=0.1)
        except Empty:
            if done.is_set():
                return
            continue
        for callback in callbacks:
            callback(record)
