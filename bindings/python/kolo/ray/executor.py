"""RayExecutor: horovod.ray's executor on Ray actors, each a kolo rank.

start() makes the actors (in a placement group: num_hosts bundles of
num_workers_per_host workers spread over distinct nodes, or num_workers
bundles packed; or, called inside a placement group, in that one), asks
each for its node, numbers them by node (so a host's ranks are
consecutive and its local ranks 0..), and sets each actor's
environment as kolorun sets a rank's: KOLO_RANK, KOLO_WORLD_SIZE,
KOLO_LOCAL_RANK, KOLO_LOCAL_WORLD_SIZE, KOLO_CROSS_RANK, KOLO_CROSS_SIZE,
KOLO_MASTER_ADDR/PORT (rank 0's node, a port free there), a job id and
secret, and torch's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT. Every wait
on Ray is bounded by the settings' timeout_s.
"""
import secrets
from types import SimpleNamespace

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from kolo.ray.worker import Worker
from kolo.runner.hosts import describe


class RayExecutor:
    @staticmethod
    def create_settings(timeout_s=30, ssh_identity_file=None, ssh_str=None, placement_group_timeout_s=100,
                        nics=None):
        """horovod.ray's settings: timeout_s bounds every wait on the
        workers; placement_group_timeout_s the wait for their resources;
        nics (a set of interface names) the interfaces the ranks use. The
        ssh arguments are accepted for horovod.ray's callers: Ray reaches
        the nodes itself."""
        del ssh_identity_file, ssh_str
        return SimpleNamespace(timeout_s=timeout_s, placement_group_timeout_s=placement_group_timeout_s,
                               nics=set(nics) if nics else None)

    def __init__(self, settings, num_workers=None, num_hosts=None, num_workers_per_host=1, cpus_per_worker=1,
                 use_gpu=False, gpus_per_worker=None, use_current_placement_group=True):
        if (num_workers is None) == (num_hosts is None):
            raise ValueError("RayExecutor: give num_workers, or num_hosts (with num_workers_per_host), not both")
        if num_hosts is not None and (num_hosts < 1 or num_workers_per_host < 1):
            raise ValueError("RayExecutor: num_hosts and num_workers_per_host must be at least 1")
        if num_workers is not None and num_workers < 1:
            raise ValueError("RayExecutor: num_workers must be at least 1")
        self.settings = settings
        self.num_hosts, self.per_host = num_hosts, num_workers_per_host
        self.num_workers = num_workers if num_workers is not None else num_hosts * num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers = []
        self.group = None  # the placement group this executor made

    def _bundles(self):
        one = {"CPU": self.cpus_per_worker}
        if self.gpus_per_worker:
            one["GPU"] = self.gpus_per_worker
        if self.num_hosts is None:
            return [one] * self.num_workers, "PACK"
        return [{k: v * self.per_host for k, v in one.items()}] * self.num_hosts, "STRICT_SPREAD"

    def _get(self, refs, what):
        try:
            return ray.get(refs, timeout=self.settings.timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError("RayExecutor: the workers did not %s within timeout_s %s s"
                               % (what, self.settings.timeout_s)) from None

    def _placements(self):
        """Each worker's scheduling strategy. Inside a placement group (a
        Ray Tune trial, an actor placed in one) with
        use_current_placement_group, the workers take that group's bundles,
        whose resources are already theirs (a group of its own would wait
        for resources the outer group holds); else a group of its own."""
        current = ray.util.get_current_placement_group() if self.use_current_placement_group else None
        if current is not None:
            return [PlacementGroupSchedulingStrategy(current, placement_group_capture_child_tasks=True)
                    for _ in range(self.num_workers)]
        bundles, strategy = self._bundles()
        self.group = placement_group(bundles, strategy=strategy)
        try:
            ray.get(self.group.ready(), timeout=self.settings.placement_group_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.shutdown()
            raise TimeoutError("RayExecutor: Ray did not find %s (%s) within placement_group_timeout_s %s s"
                               % (bundles, strategy, self.settings.placement_group_timeout_s)) from None
        return [PlacementGroupSchedulingStrategy(self.group, i if self.num_hosts is None else i // self.per_host)
                for i in range(self.num_workers)]

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None, extra_env_vars=None):
        actor = ray.remote(Worker)
        for placement in self._placements():
            self.workers.append(actor.options(num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                                              scheduling_strategy=placement).remote())
        nodes = self._get([w.node.remote() for w in self.workers], "start")
        # Ranks by node, in the order the nodes first appear: a host's
        # workers get consecutive ranks, as launchers fill hosts.
        order = list(dict.fromkeys(ip for ip, _ in nodes))
        ranked = sorted(range(self.num_workers), key=lambda i: (order.index(nodes[i][0]), i))
        self.workers = [self.workers[i] for i in ranked]
        nodes = [nodes[i] for i in ranked]
        placements = describe([ip for ip, _ in nodes])
        master = nodes[0][0]
        port = self._get(self.workers[0].free_port.remote(), "find a free port")
        torch_port = self._get(self.workers[0].free_port.remote(), "find a free port")
        job = {"KOLO_JOB_ID": "ray-" + secrets.token_hex(8), "KOLO_SECRET": secrets.token_hex(32),
               "KOLO_MASTER_ADDR": master, "KOLO_MASTER_PORT": str(port), "MASTER_ADDR": master,
               "MASTER_PORT": str(torch_port), "KOLO_WORLD_SIZE": str(self.num_workers),
               "WORLD_SIZE": str(self.num_workers)}
        if self.settings.nics:
            job["KOLO_IFNAME"] = sorted(self.settings.nics)[0]
        job.update({k: str(v) for k, v in (extra_env_vars or {}).items()})
        setups = []
        for w, p in zip(self.workers, placements):
            env = dict(job, KOLO_RANK=str(p.rank), KOLO_LOCAL_RANK=str(p.local_rank),
                       KOLO_LOCAL_WORLD_SIZE=str(p.local_size), KOLO_CROSS_RANK=str(p.cross_rank),
                       KOLO_CROSS_SIZE=str(p.cross_size), RANK=str(p.rank), LOCAL_RANK=str(p.local_rank),
                       LOCAL_WORLD_SIZE=str(p.local_size))
            setups.append(w.setup.remote(env, executable_cls, executable_args or (), executable_kwargs))
        self._get(setups, "take their settings")

    def _started(self):
        if not self.workers:
            raise RuntimeError("RayExecutor: call start() first")

    def execute(self, fn, callbacks=None):
        """fn(executable) on every worker; the results in rank order."""
        del callbacks
        self._started()
        return ray.get([w.execute.remote(fn) for w in self.workers])

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """fn(*args, **kwargs) on every worker; the results in rank order."""
        del callbacks
        return ray.get(self.run_remote(fn, args, kwargs))

    def run_remote(self, fn, args=None, kwargs=None):
        """The same, without waiting: one ObjectRef per worker, in rank order."""
        self._started()
        return [w.run.remote(fn, list(args or ()), dict(kwargs or {})) for w in self.workers]

    def execute_single(self, fn):
        """fn(executable) on rank 0 alone."""
        self._started()
        return ray.get(self.workers[0].execute.remote(fn))

    def shutdown(self):
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None
