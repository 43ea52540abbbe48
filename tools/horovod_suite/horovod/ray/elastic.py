"""horovod.ray.elastic on kolo.ray.elastic. Two things Horovod's
test_ray_elastic.py reaches for are given here: the discovery interval it
patches (horovod.runner.elastic.driver.DISCOVER_HOSTS_FREQUENCY_SECS, read
when a job runs), and its test discovery's look at Horovod's driver
(executor.driver.get_slot_info(host, local_rank).hostname and
get_worker_client(slot): whether that slot's worker has registered), read
from kolo's driver."""
from types import SimpleNamespace
from unittest import mock

from kolo.ray import elastic as kolo_elastic
from kolo.ray.elastic import RayHostDiscovery  # noqa: F401


class _DriverView:
    def __init__(self, driver):
        self._driver = driver

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def get_slot_info(self, host, local_rank):
        for wid, a in list(self._driver.assignment.items()):
            if wid.rpartition(":")[0] == host and a["local_rank"] == local_rank:
                return SimpleNamespace(hostname=host, worker=wid, rank=a["rank"], local_rank=local_rank)
        return SimpleNamespace(hostname=None, worker=None)

    def get_worker_client(self, slot):
        w = self._driver.workers.get(slot.worker)
        return w is not None and w.asked_after >= 0


class ElasticRayExecutor(kolo_elastic.ElasticRayExecutor):
    @property
    def driver(self):
        return _DriverView(self._driver) if self._driver is not None else None

    @driver.setter
    def driver(self, driver):
        self._driver = driver

    def run(self, worker_fn, callbacks=None):
        from horovod.runner.elastic import driver as settings
        with mock.patch.object(kolo_elastic, "DISCOVER_HOSTS_FREQUENCY_SECS", settings.DISCOVER_HOSTS_FREQUENCY_SECS):
            return super().run(worker_fn, callbacks)
