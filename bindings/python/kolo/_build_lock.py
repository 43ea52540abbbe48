"""What kolo's builds of native code on first use share (kolo's TensorFlow
kernels, its XLA handlers for JAX, its torch device backend): kolo.h's
folder, the compiler, and the lock around a build, so that ranks that start
together on one machine build once and the others wait and load the result.

It is an flock, which the kernel drops when its process ends, so a rank
killed mid-build leaves nothing that blocks the next job; and the wait has a
deadline, so a build that never ends fails every waiter with its reason
instead of hanging them."""
import contextlib
import errno
import fcntl
import os
import time

# A build takes 20-60 s alone, longer beside others on a loaded machine.
DEFAULT_TIMEOUT_S = 600.0
_HERE = os.path.dirname(os.path.abspath(__file__))


def kolo_h_dir(who):
    """Where kolo.h is: beside the installed package (kolo/include, put there
    by setup.py), else in the checkout (bindings/c); an ImportError naming
    `who` if neither has it."""
    for folder in (os.path.join(_HERE, "include"), os.path.join(os.path.dirname(os.path.dirname(_HERE)), "c")):
        if os.path.isfile(os.path.join(folder, "kolo.h")):
            return folder
    raise ImportError("%s: kolo.h is neither in kolo/include nor in the checkout's bindings/c; it is needed to "
                      "build it" % who)


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
