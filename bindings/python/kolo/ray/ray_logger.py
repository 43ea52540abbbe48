"""horovod.ray's ray_logger: a worker's log(dict) reaches the callbacks
given to ElasticRayExecutor.run on the driver, through a Ray queue the
executor hands every worker. Outside such a worker, log does nothing."""
_queue = None


def configure(queue):
    global _queue
    _queue = queue


def log(info_dict):
    if _queue is not None:
        _queue.put(info_dict)
