"""What kolo's builds of native code on first use share (kolo's TensorFlow
kernels, its XLA handlers for JAX, its torch device backend): kolo.h's
folder, the compiler, where a build is cached, and the build itself under a
lock, so that ranks that start together on one machine build once and the
others wait and load the result.

The lock is an flock, which the kernel drops when its process ends, so a rank
killed mid-build leaves nothing that blocks the next job; and the wait has a
deadline, so a build that never ends fails every waiter with its reason
instead of hanging them."""
import contextlib
import errno
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

# A build takes 20-60 s alone, longer beside others on a loaded machine.
DEFAULT_TIMEOUT_S = 600.0
_HERE = os.path.dirname(os.path.abspath(__file__))


def kolo_h_dir(module, what):
    """Where kolo.h is: beside the installed package (kolo/include, put there
    by setup.py), else in the checkout (bindings/c); an ImportError naming
    the module and what it builds if neither has it."""
    for folder in (os.path.join(_HERE, "include"), os.path.join(os.path.dirname(os.path.dirname(_HERE)), "c")):
        if os.path.isfile(os.path.join(folder, "kolo.h")):
            return folder
    raise ImportError("%s: kolo.h is neither in kolo/include nor in the checkout's bindings/c; it is needed to "
                      "build %s" % (module, what))


def compiler():
    """The C++ compiler: $CXX, else g++."""
    return os.environ.get("CXX", "g++")


@contextlib.contextmanager
def build_lock(path, what, timeout_s=DEFAULT_TIMEOUT_S):
    """Holds the lock file `path` (made with its folder if need be) for the
    body; raises TimeoutError naming `what` and the lock after timeout_s."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as lock:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                raise TimeoutError("kolo: waited %.0f s for another process's build of %s (lock %s); "
                                   "it is still running or stuck" % (timeout_s, what, path))
            time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def library_path(stem, version, files, details, env_var, folder):
    """Where a build is cached: $env_var, else ~/.cache/kolo/<folder>; named
    stem-version-hash, the hash of the files' bytes and the details (the
    compiler, its flags), so that a change to any makes a new one."""
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            digest.update(f.read())
    digest.update(" ".join(details).encode())
    cache = os.environ.get(env_var) or os.path.join(os.path.expanduser("~"), ".cache", "kolo", folder)
    return os.path.join(cache, "%s-%s-%s.so" % (stem, version, digest.hexdigest()[:16]))


def run_side_by_side(commands):
    """Runs the commands side by side; the first failure's command and
    output, else None."""
    running = [(command, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
               for command in commands]
    failure = None
    for command, process in running:
        output, _ = process.communicate()
        if process.returncode != 0 and failure is None:
            failure = "%s\n%s" % (" ".join(command), output[-8000:])
    return failure


def build_once(path, module, what, built_for, plan):
    """Builds the library at path unless another process has (under its
    lock). plan(scratch) -> (stages, built): lists of commands, each
    stage's run side by side and the next only once they succeeded, which
    leave the library at `built` in the scratch folder. module and what
    name it in the messages ("kolo.jax", "kolo's XLA handlers"), built_for
    what it is built against ("jaxlib 0.10.2")."""
    with build_lock(path + ".lock", what):
        if os.path.isfile(path):
            return
        if shutil.which(compiler()) is None:
            raise ImportError("%s: building %s needs a C++ compiler (%s); install g++ or set CXX"
                              % (module, what, compiler()))
        print("%s: building %s for %s (once) into %s" % (module, what, built_for, path), file=sys.stderr,
              flush=True)
        scratch = tempfile.mkdtemp(prefix="build-", dir=os.path.dirname(path))
        try:
            stages, built = plan(scratch)
            for commands in stages:
                failure = run_side_by_side(commands)
                if failure:
                    raise ImportError("%s: building %s failed:\n%s" % (module, what, failure))
            os.replace(built, path)  # whole, or not there: a rank that finds it may load it
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
