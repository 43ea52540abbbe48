"""The Ray actor that is one kolo rank, for RayExecutor and
ElasticRayExecutor (horovod.ray's BaseHorovodWorker): it holds the job's
environment, an instance of the caller's executable class if asked, and
runs functions. ElasticRayExecutor makes them with max_concurrency 2, so
that it can ask where one is (node_and_port) while it runs the caller's
function."""
import os
import socket

import ray

from kolo.ray import ray_logger


class Worker:
    executable = None

    def hostname(self):
        return socket.gethostname()

    def node(self):
        return ray.util.get_node_ip_address(), socket.gethostname()

    def node_and_port(self):
        """This actor's node address and a port free there (for a rendezvous
        that a rank on this actor serves)."""
        from kolo.runner.supervisor import free_port
        return ray.util.get_node_ip_address(), free_port()

    def free_port(self):
        from kolo.runner.supervisor import free_port
        return free_port()

    def update_env_vars(self, env_vars):
        os.environ.update({k: str(v) for k, v in env_vars.items()})

    def env_vars(self):
        return dict(os.environ)

    def setup(self, env, executable_cls=None, args=(), kwargs=None):
        self.update_env_vars(env)
        if executable_cls is not None:
            self.executable = executable_cls(*args, **(kwargs or {}))

    def execute(self, fn):
        return fn(self.executable)

    def run(self, fn, args, kwargs):
        return fn(*args, **kwargs)

    def run_elastic(self, fn, env, queue=None):
        """fn() as an elastic worker, in the job's environment (set here, in
        the same call: a threaded actor's calls need not run in the order
        made), with ray_logger's records to queue: (0, its result, True)
        when it returns; an elastic worker the job no longer needs leaves
        with SystemExit, which here is an exit status and no result
        (status, None, False), not the end of the actor."""
        self.update_env_vars(env)
        if queue is not None:
            ray_logger.configure(queue)
        try:
            return 0, fn(), True
        except SystemExit as e:
            return (e.code if isinstance(e.code, int) else (0 if e.code is None else 1)), None, False
