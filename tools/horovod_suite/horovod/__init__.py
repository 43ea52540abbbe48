"""A stand-in for the horovod package that resolves horovod.torch to
kolo.torch, so Horovod's own test suite runs against kolo unchanged. The
rest of Horovod's tree (horovod.runner, test utilities) comes from the
checkout given to tools/horovod_suite/run.sh, found on __path__ after this."""
import os

_checkout = os.environ.get("HOROVOD_CHECKOUT")
if _checkout:
    __path__.append(os.path.join(_checkout, "horovod"))  # noqa: F821 (a package's own __path__)
__version__ = "0.28.1"
