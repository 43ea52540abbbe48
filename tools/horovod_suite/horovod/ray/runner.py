"""horovod.ray.runner's names: RayExecutor is kolo's; see internals.py."""
from kolo.ray import RayExecutor  # noqa: F401

from horovod.ray.internals import Coordinator, MiniSettings  # noqa: F401
