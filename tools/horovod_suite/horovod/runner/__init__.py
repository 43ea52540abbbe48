"""A stand-in for horovod.runner: the entry points Horovod's elastic
integration tests call in-process (launch.parse_args, launch._run_elastic,
the constants they patch) run kolorun's elastic driver
(kolo/runner/elastic_driver.py) with kolo workers. Everything else of
horovod.runner (its common utilities, elastic constants, test helpers)
comes from the checkout, found on __path__ after this."""
import os

_checkout = os.environ.get("HOROVOD_CHECKOUT")
if _checkout:
    __path__.append(os.path.join(_checkout, "horovod", "runner"))  # noqa: F821 (a package's own __path__)
