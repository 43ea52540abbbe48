"""horovod.ray.strategy's create_placement_group: see internals.py."""
from horovod.ray.internals import create_placement_group  # noqa: F401
