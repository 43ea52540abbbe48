"""A stand-in for the horovod package that resolves horovod.torch to
kolo.torch, so Horovod's own test suite runs against kolo unchanged. The
rest of Horovod's tree (horovod.runner, test utilities) comes from the
checkout given to tools/horovod_suite/run.sh, found on __path__ after this."""
import os

_checkout = os.environ.get("HOROVOD_CHECKOUT")
if _checkout:
    __path__.append(os.path.join(_checkout, "horovod"))  # noqa: F821 (a package's own __path__)
__version__ = "0.28.1"


def alias_package(name, target, submodules=()):
    """Makes the module `name` (a horovod.* stand-in) be the package
    `target`, and each of target's loaded submodules (and `submodules`,
    imported first) be horovod's of the same name."""
    import importlib
    import sys
    for module in list(submodules) + [target]:
        importlib.import_module(module)
    for loaded in list(sys.modules):
        if loaded == target or loaded.startswith(target + "."):
            sys.modules[name + loaded[len(target):]] = sys.modules[loaded]
