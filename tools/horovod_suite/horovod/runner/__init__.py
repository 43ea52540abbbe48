"""A stand-in for horovod.runner: Horovod's own module (its _HorovodArgs
and run(), which Horovod's test_static_run.py and horovod.run callers use)
over launch.py here, whose entry points run kolo's launchers: a fixed job
under kolorun or kolo.run, an elastic one under kolorun's elastic driver
(kolo/runner/elastic_driver.py). Everything else of horovod.runner (its
common utilities, elastic constants, test helpers) comes from the checkout,
found on __path__ after this."""
import os

_checkout = os.environ.get("HOROVOD_CHECKOUT")
if _checkout:
    __path__.append(os.path.join(_checkout, "horovod", "runner"))  # noqa: F821 (a package's own __path__)
    _own = os.path.join(_checkout, "horovod", "runner", "__init__.py")
    with open(_own) as _f:
        exec(compile(_f.read(), _own, "exec"))
