"""horovod.ray.worker's BaseHorovodWorker is kolo.ray's worker actor."""
from kolo.ray.worker import Worker as BaseHorovodWorker  # noqa: F401
