"""horovod.runner.elastic.driver: Horovod's own module (its gloo_run
imports the ElasticDriver class), whose settings Horovod's tests patch
(mock.patch('horovod.runner.elastic.driver.DISCOVER_HOSTS_FREQUENCY_SECS',
...)); launch._run_elastic and horovod.ray.elastic here read them when they
start kolo's driver."""
import os

DISCOVER_HOSTS_FREQUENCY_SECS = 1.0
ELASTIC_TIMEOUT_SECS = 600

_checkout = os.environ.get("HOROVOD_CHECKOUT")
if _checkout:
    _own = os.path.join(_checkout, "horovod", "runner", "elastic", "driver.py")
    with open(_own) as _f:
        exec(compile(_f.read(), _own, "exec"))
