"""Emulated hosts for kolorun's elastic driver (`--netns PREFIX:K`): the
network namespaces tools/netns.sh makes, and a way to serve one of them
from a thread of the driver."""
import ctypes
import os
import threading

CLONE_NEWNET = 0x40000000  # <sched.h>: setns() into a network namespace


def in_netns(name, fn):
    """fn() called on a thread that has entered network namespace `name`
    (made by `ip netns add`), returning what it returns. A thread's network
    namespace is its own, so the driver's other threads stay where they
    are, and a socket keeps the namespace it was made in: a server socket
    made here serves that namespace's own 127.0.0.1."""
    result = {}

    def enter():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(os.path.join("/var/run/netns", name), os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, "cannot enter network namespace %s: %s" % (name, os.strerror(err)))
            finally:
                os.close(fd)
            result["value"] = fn()
        except BaseException as e:  # handed to the caller's thread
            result["error"] = e

    t = threading.Thread(target=enter)
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


class EmulatedHosts:
    """`kolorun --netns PREFIX:K`: hosts named PREFIXh<i> are the network
    namespaces tools/netns.sh made, each with its own address (10.77.0.<i+1>)
    on one bridge. Their workers run inside them (`ip netns exec`), a rank 0
    there serves the version's rendezvous on that address, and the driver
    answers each namespace on its own loopback, so a host's link taken down
    cuts it from the other hosts, as on a cluster, and not from the driver."""

    def __init__(self, spec):
        prefix, _, count = spec.rpartition(":")
        if not prefix or not count.isdigit() or int(count) < 1:
            raise ValueError("--netns wants PREFIX:K, e.g. kolo-:4 (got %r)" % spec)
        self.names = ["%sh%d" % (prefix, i) for i in range(int(count))]
        for name in self.names:
            if not os.path.exists(os.path.join("/var/run/netns", name)):
                raise ValueError("no network namespace %s: make the hosts first (tools/netns.sh up %s, with "
                                 "KOLO_NETNS_PREFIX=%s)" % (name, count, prefix))

    def index(self, host):
        return self.names.index(host) if host in self.names else None

    def address(self, host):
        i = self.index(host)
        return "127.0.0.1" if i is None else "10.77.0.%d" % (i + 1)

    def argv(self, host, argv):
        return argv if self.index(host) is None else ["ip", "netns", "exec", host] + argv
