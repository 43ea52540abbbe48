"""horovod.ray for Horovod's Ray tests (test/single/test_ray.py,
test_ray_elastic.py): RayExecutor, ElasticRayExecutor, RayHostDiscovery,
ray_logger and the worker actor are kolo.ray's (runner, worker, elastic
here name them where horovod.ray has them). The rest of what the tests
import is horovod.ray's internals, which kolo has not: see internals.py."""
import sys

import kolo.ray
import kolo.ray.ray_logger

from horovod.ray import elastic, runner, strategy, worker  # noqa: F401  (this package's modules)

ElasticRayExecutor = elastic.ElasticRayExecutor
RayExecutor = kolo.ray.RayExecutor
RayHostDiscovery = kolo.ray.RayHostDiscovery
ray_logger = sys.modules["horovod.ray.ray_logger"] = kolo.ray.ray_logger
