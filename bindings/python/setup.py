"""The kolo Python package and the kolorun launcher, for pip, offline:

    /usr/bin/python3 -m pip install --no-build-isolation --no-deps ./bindings/python

(from the repository root; it reads ../c/version.bzl and ../../tools/kolorun,
so it installs from a checkout, not from a copy of this folder). Debian's
python3-setuptools, python3-wheel and python3-numpy are all it needs. The
package loads libkolo (ctypes): install that with tools/install.sh PREFIX
into the same prefix, or put it where the system loader finds it, or set
KOLO_LIBRARY (see kolo/_library.py for the search order).

A wheel with libkolo inside (tools/build_wheel.sh): KOLO_WHEEL_LIBRARY
names a built libkolo.so.MAJOR, which goes into the package beside
kolo/_library.py (the first place it looks after a checkout's bazel-bin),
and the wheel is then tagged for this platform. Either way the package
declares the "torch.backends" entry point (_kolo_torch_backend), through
which `import torch` registers the backend "kolo".
"""
import atexit
import os
import re
import shutil
import tempfile

from setuptools import Distribution, find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION_FILE = os.path.join(HERE, "..", "c", "version.bzl")
KOLO_H = os.path.join(HERE, "..", "c", "kolo.h")


def read_version():
    # bindings/c/version.bzl is where kolo's version is declared.
    with open(VERSION_FILE) as f:
        found = re.search(r'^KOLO_VERSION = "(\d+\.\d+\.\d+)"$', f.read(), re.M)
    if not found:
        raise SystemExit("setup.py: no KOLO_VERSION line in %s" % VERSION_FILE)
    return found.group(1)


VERSION = read_version()


LIBRARY = os.environ.get("KOLO_WHEEL_LIBRARY")
SONAME = "libkolo.so.%s" % VERSION.split(".")[0]


class BuildPyWithVersion(build_py):
    """Writes kolo/_version.py into the built package: installed, it cannot
    read version.bzl, and needs the version to find libkolo.so.MAJOR. Copies
    kolo.h into kolo/include (kolo.tensorflow compiles its kernels against
    it on first use). With KOLO_WHEEL_LIBRARY, copies that library in as
    kolo/libkolo.so.MAJOR."""

    def run(self):
        super().run()
        path = os.path.join(self.build_lib, "kolo", "_version.py")
        with open(path, "w") as f:
            f.write("# Written by setup.py from bindings/c/version.bzl.\nversion = %r\n" % VERSION)
        include = os.path.join(self.build_lib, "kolo", "include")
        os.makedirs(include, exist_ok=True)
        shutil.copyfile(KOLO_H, os.path.join(include, "kolo.h"))
        if LIBRARY:
            shutil.copyfile(LIBRARY, os.path.join(self.build_lib, "kolo", SONAME))


class BinaryDistribution(Distribution):
    """A wheel holding libkolo is for this platform, not pure Python."""

    def has_ext_modules(self):
        return bool(LIBRARY)


COMMANDS = {"build_py": BuildPyWithVersion}
if LIBRARY:
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:  # setuptools before 70.1
        from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        """py3-none-PLATFORM: libkolo is loaded through ctypes, so the wheel
        needs this platform but no particular Python or its ABI."""

        def get_tag(self):
            return ("py3", "none") + tuple(super().get_tag()[2:])

    COMMANDS["bdist_wheel"] = PlatformWheel


# Build in a scratch folder, so that installing leaves no build/ or
# kolo.egg-info/ in the checkout.
SCRATCH = tempfile.mkdtemp(prefix="kolo-setup-")
atexit.register(shutil.rmtree, SCRATCH, True)

setup(
    name="kolo",
    version=VERSION,
    description="kolo: ring-allreduce collectives over libkolo (NumPy; kolo.torch mirrors horovod.torch)",
    packages=find_packages(HERE, include=["kolo", "kolo.*"]),
    py_modules=["_kolo_torch_backend"],
    # Compiled on first use: a device map that mixes kolo with another
    # backend; kolo.tensorflow's kernels.
    package_data={
        "kolo.torch": ["_device_backend.cpp"],
        "kolo.tensorflow": ["_ops_common.cc", "_ops_common.h", "_ops_kernels.cc", "_ops_definitions.cc"],
        "kolo.jax": ["_ffi.cc"],
    },
    entry_points={"torch.backends": ["kolo = _kolo_torch_backend:register"]},
    # A plain script, not a console-script entry point: kolorun must start
    # without importing kolo (which loads libkolo). pip points its first
    # line at the environment's interpreter, so `kolorun` works as a command.
    scripts=[os.path.join("..", "..", "tools", "kolorun"), os.path.join("..", "..", "tools", "kolo-doctor")],
    python_requires=">=3.9",
    cmdclass=COMMANDS,
    distclass=BinaryDistribution,
    options={"build": {"build_base": SCRATCH}, "egg_info": {"egg_base": SCRATCH}},
)
