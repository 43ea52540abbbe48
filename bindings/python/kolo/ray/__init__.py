"""kolo on Ray, with horovod.ray's API: RayExecutor starts one Ray actor
per worker, places them (hosts in node order, each host's workers together),
tells each its rank, local and cross rank and the job's rendezvous, and
runs functions on all of them:

    from kolo.ray import RayExecutor

    settings = RayExecutor.create_settings(timeout_s=30)
    executor = RayExecutor(settings, num_workers=4, cpus_per_worker=1)
    executor.start()
    results = executor.run(train, kwargs={"epochs": 3})  # one per worker, in rank order
    executor.shutdown()

`train` calls `kolo.torch.init()` (or `kolo.tensorflow`'s, `kolo.keras`'s)
as under kolorun. ElasticRayExecutor (kolo/ray/elastic.py) runs elastic
jobs on Ray's nodes, as horovod.ray's does. kolo.ray.collective is a
ray.util.collective backend ("kolo"); Ray Train's TorchTrainer runs on
kolo with TorchConfig(backend="kolo") through the wheel's torch.backends
entry point.
"""
from kolo.ray.elastic import ElasticRayExecutor, RayHostDiscovery  # noqa: F401
from kolo.ray.executor import RayExecutor  # noqa: F401
