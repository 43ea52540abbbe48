"""The kolo Python package and the kolorun launcher, for pip, offline:

    /usr/bin/python3 -m pip install --no-build-isolation --no-deps ./bindings/python

(from the repository root; it reads ../c/version.bzl and ../../tools/kolorun,
so it installs from a checkout, not from a copy of this folder). Debian's
python3-setuptools, python3-wheel and python3-numpy are all it needs. The
package loads libkolo (ctypes): install that with tools/install.sh PREFIX
into the same prefix, or put it where the system loader finds it, or set
KOLO_LIBRARY (see kolo/_library.py for the search order).
"""
import atexit
import os
import re
import shutil
import tempfile

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION_FILE = os.path.join(HERE, "..", "c", "version.bzl")


def read_version():
    # bindings/c/version.bzl is where kolo's version is declared.
    with open(VERSION_FILE) as f:
        found = re.search(r'^KOLO_VERSION = "(\d+\.\d+\.\d+)"$', f.read(), re.M)
    if not found:
        raise SystemExit("setup.py: no KOLO_VERSION line in %s" % VERSION_FILE)
    return found.group(1)


VERSION = read_version()


class BuildPyWithVersion(build_py):
    """Writes kolo/_version.py into the built package: installed, it cannot
    read version.bzl, and needs the version to find libkolo.so.MAJOR."""

    def run(self):
        super().run()
        path = os.path.join(self.build_lib, "kolo", "_version.py")
        with open(path, "w") as f:
            f.write("# Written by setup.py from bindings/c/version.bzl.\nversion = %r\n" % VERSION)


# Build in a scratch folder, so that installing leaves no build/ or
# kolo.egg-info/ in the checkout.
SCRATCH = tempfile.mkdtemp(prefix="kolo-setup-")
atexit.register(shutil.rmtree, SCRATCH, True)

setup(
    name="kolo",
    version=VERSION,
    description="kolo: ring-allreduce collectives over libkolo (NumPy; kolo.torch mirrors horovod.torch)",
    packages=find_packages(HERE, include=["kolo", "kolo.*"]),
    # A plain script, not an entry point: kolorun must start without
    # importing kolo (which loads libkolo).
    scripts=[os.path.join("..", "..", "tools", "kolorun")],
    python_requires=">=3.9",
    cmdclass={"build_py": BuildPyWithVersion},
    options={"build": {"build_base": SCRATCH}, "egg_info": {"egg_base": SCRATCH}},
)
