"""A pytest plugin (-p ray_removed_arguments) for Horovod's Ray suites,
which run_single.sh runs: their fixtures call ray.init(...,
_redis_max_memory=...), an argument Ray 2.60 refuses (Ray keeps no Redis
since 2.0, so it has no meaning). Here ray.init drops it, and nothing
else, so the fixtures start Ray as they ask."""
import functools

try:
    import ray
except ImportError:  # the suites that need no Ray
    ray = None

REMOVED = ("_redis_max_memory",)

if ray is not None:
    _init = ray.init

    @functools.wraps(_init)
    def init(*args, **kwargs):
        for name in REMOVED:
            kwargs.pop(name, None)
        return _init(*args, **kwargs)

    ray.init = init
