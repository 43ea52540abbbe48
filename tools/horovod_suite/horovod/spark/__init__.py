"""horovod.spark for Horovod's test_spark.py: run and run_elastic are
kolo.spark's; the rest of horovod.spark (its estimators' stores and
utilities, its driver and task services, which the test file imports)
comes from the checkout, found on __path__ after this."""
import os

from kolo.spark import run, run_elastic  # noqa: F401

_checkout = os.environ.get("HOROVOD_CHECKOUT")
if _checkout:
    __path__.append(os.path.join(_checkout, "horovod", "spark"))  # noqa: F821 (a package's own __path__)
