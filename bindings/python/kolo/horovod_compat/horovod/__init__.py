"""horovod, as kolo: under `kolorun --horovod` this package stands first on
the ranks' PYTHONPATH, and every horovod.torch*, horovod.tensorflow*,
horovod.keras*, horovod.ray* and horovod.spark* module is kolo's module of
the same name (kolo.torch, kolo.tensorflow.keras, kolo.ray, ...), the very
same object, so that nothing is imported twice and `hvd.allreduce` is
kolo's. horovod.runner is not here: kolorun is the launcher.

A real Horovod installed further along the path is shadowed: rank 0 says
so once, on standard error."""
import importlib
import importlib.abc
import importlib.util
import os
import sys

__version__ = "0.28.1"  # the Horovod whose API kolo's modules follow

FRAMEWORKS = ("torch", "tensorflow", "keras", "ray", "spark")


def run(*args, **kwargs):
    """horovod.run: kolo.run, a function as a job across hosts."""
    from kolo.function_job import run as kolo_run
    return kolo_run(*args, **kwargs)


class _KoloModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds horovod.<framework>[.sub] as kolo.<framework>[.sub]."""

    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        if len(parts) < 2 or parts[0] != __name__ or parts[1] not in FRAMEWORKS:
            return None
        try:
            kolo_spec = importlib.util.find_spec("kolo." + ".".join(parts[1:]))
        except ImportError:
            return None
        if kolo_spec is None:
            return None
        return importlib.util.spec_from_loader(fullname, self,
                                               is_package=kolo_spec.submodule_search_locations is not None)

    def create_module(self, spec):
        return importlib.import_module("kolo." + spec.name.split(".", 1)[1])

    def exec_module(self, module):
        pass  # kolo's module is already run


def _shadowed():
    """Another horovod package on the path after this one, if any."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for entry in sys.path:
        entry = os.path.abspath(entry or os.curdir)
        if entry != here and os.path.isfile(os.path.join(entry, "horovod", "__init__.py")):
            return os.path.join(entry, "horovod")
    return None


if not any(isinstance(f, _KoloModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _KoloModules())
    _other = _shadowed()
    if _other and os.environ.get("KOLO_RANK", "0") == "0":
        sys.stderr.write("kolo: horovod.* is kolo in this job (kolorun --horovod); the Horovod at %s is not used\n"
                         % _other)
