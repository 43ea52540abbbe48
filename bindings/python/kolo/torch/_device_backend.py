"""kolo as a c10d.Backend: the backend of some devices of a group whose
other devices another backend serves (init_process_group("cpu:kolo,cuda:nccl")),
and the backend of a group torch.distributed.shrink_group made.

torch keeps one backend per device, and only as a C++ c10d.Backend, which
torch 2.13 gives Python no way to subclass; kolo's group is a Python
ProcessGroup, which torch takes as the whole group (it then creates no
backend for the other devices). For such a map, the group is wrapped in
_device_backend.cpp's Backend, which hands every operation to it. That
file is compiled on first use against the torch that runs, by torch's
cpp_extension (a C++ compiler, Python's headers and ninja: the project's
environment has them), into TORCH_EXTENSIONS_DIR (default
~/.cache/torch_extensions), once per source, torch and Python: the build is
named by a hash of the source, which is copied there first, so an install at
another path finds the same build (cpp_extension rebuilds when a source's
path changes).
"""
import hashlib
import os
import re
import shutil
import sys
import threading

import torch

from kolo._native_build import build_lock

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_device_backend.cpp")
_lock = threading.Lock()
_module = None


def _build_directory(name):
    from torch.utils import cpp_extension
    return os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root(), name)


def _load():
    global _module
    with _lock:
        if _module is None:
            from torch.utils import cpp_extension
            with open(_SOURCE, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()[:16]
            # A module's name: letters, digits and _ only.
            name = re.sub(r"\W", "_", "kolo_device_backend_%s_%s_%s"
                          % (torch.__version__, sys.implementation.cache_tag, digest))
            folder = _build_directory(name)
            # One build for the ranks of a machine. Under the lock no other
            # kolo process is in this build, so cpp_extension's own lock file
            # there is one a killed build left: its waiters would never end.
            with build_lock(folder + ".lock", "kolo's torch device backend"):
                os.makedirs(folder, exist_ok=True)
                stale = os.path.join(folder, "lock")
                if os.path.exists(stale):
                    os.unlink(stale)
                source = os.path.join(folder, "_device_backend.cpp")
                if not os.path.isfile(source):
                    shutil.copyfile(_SOURCE, source + ".part")
                    os.replace(source + ".part", source)
                # ninja may be the environment's own (pip's ninja), beside its interpreter.
                path = os.environ.get("PATH", "")
                os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + path
                try:
                    _module = cpp_extension.load(name=name, sources=[source], build_directory=folder,
                                                 extra_cflags=["-O2"], verbose=False)
                finally:
                    os.environ["PATH"] = path
    return _module


def device_backend(group):
    """A c10d.Backend over kolo's Python group `group`."""
    return _load().device_backend(group)


def shrunk_backend(group, ranks_to_exclude, shrink_flags, opts_override):
    """torch.distributed.shrink_group's backend half for kolo's Python group
    `group`: the shrunk group (group._shrunk) as a c10d.Backend, which torch
    registers on the new group."""
    if opts_override is not None:
        raise ValueError("kolo: a shrunk group keeps its group's settings (its timeout); pg_options must be None")
    return _load().device_backend(group._shrunk(ranks_to_exclude, shrink_flags))


def in_mixed_device_map(depth=4):
    """Whether the group torch is making maps some device to another
    backend. torch tells a backend's creator nothing of the map; the
    function that calls the creator (_new_process_group_helper) holds it
    as `backend_config`, whose device map is read here."""
    frame = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            break
        config = frame.f_locals.get("backend_config")
        if config is not None and hasattr(config, "get_device_backend_map"):
            return len(set(config.get_device_backend_map().values())) > 1
        frame = frame.f_back
    return False
