"""How kolorun's elastic driver (elastic_driver.py) starts its workers: as
processes running the job's command, on this machine, on emulated hosts in
network namespaces (`--netns`), or on other hosts over ssh. kolo.ray's
ElasticRayExecutor has the same four methods for Ray actors; the driver
only ever calls these:

  start(host, slot, env, prefix) -> a handle with poll(), wait(timeout),
      returncode, as subprocess.Popen's
  end(handle, sig)            ends a worker (and what it started)
  rendezvous(workers) -> (address, port)  where rank 0 (workers[0]) serves
      a version's rendezvous for the others (workers: the version's, in rank
      order, each with .host and .proc, start's handle)
  close()                     after the last worker has ended

bind_address is the address the driver's server answers on, for workers
this object told to ask there (see start).
Standard library only: kolorun loads the runner without kolo's library."""
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading

from . import hosts as host_names
from . import session
from .emulated_hosts import EmulatedHosts, in_netns
from .supervisor import free_port


class WorkerProcesses:
    bind_address = "127.0.0.1"

    def __init__(self, opts, argv, python_path, out_lock, serve, say):
        """serve(namespace) -> the port of the driver's server on 127.0.0.1
        of that network namespace (None: this machine's own)."""
        self.opts, self.argv, self.python_path, self.out_lock = opts, argv, python_path, out_lock
        self.serve, self.say = serve, say
        self.emulated = EmulatedHosts(opts.netns) if getattr(opts, "netns", "") else None
        self.remote_hosts = {}  # host -> whether its workers start over ssh
        self.local_addresses = host_names.local_addresses()
        self.pumps = []

    def namespace(self, host):
        """The network namespace a host's workers run in (None: this machine's)."""
        return host if self.emulated and self.emulated.index(host) is not None else None

    def remote(self, host):
        """Whether the host's workers start over ssh: a host that resolves to
        none of this machine's addresses (and is no emulated host). A name
        that does not resolve runs its workers here, told they are on it
        (hosts named for a test on one machine), and is said once."""
        if host not in self.remote_hosts:
            if self.namespace(host) is not None or host_names.is_local(host, self.local_addresses):
                self.remote_hosts[host] = False
            elif not host_names.resolves(host):
                self.say("host %s does not resolve: its workers run on this machine, told they are on %s"
                         % (host, host))
                self.remote_hosts[host] = False
            else:
                self.remote_hosts[host] = True
        return self.remote_hosts[host]

    def start(self, host, slot, env, prefix):
        env = dict(env, KOLO_ELASTIC_DRIVER="127.0.0.1:%d" % self.serve(self.namespace(host)))
        if self.python_path:
            env["PYTHONPATH"] = self.python_path
        if self.remote(host):
            return self.start_remote(host, env, prefix)
        argv = self.emulated.argv(host, self.argv) if self.emulated else self.argv
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        for stream, out in ((proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer)):
            t = threading.Thread(target=self.pump, args=(stream, prefix, out), daemon=True)
            t.start()
            self.pumps.append(t)
        return proc

    def start_remote(self, host, env, prefix):
        """A worker on another host: ssh, with the driver's port forwarded to
        a Unix socket of a random name in the host's /tmp (the driver answers
        on this machine's loopback only). A socket, not a TCP port: no port
        of the host can be taken already, and only this user may connect
        (ssh makes it 0600); its supervisor removes it when the worker ends."""
        socket_path = "/tmp/kolo-driver-%s.sock" % secrets.token_hex(16)
        env["KOLO_ELASTIC_DRIVER"] = "unix:" + socket_path
        extra = ["-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                 "-R", "%s:127.0.0.1:%d" % (socket_path, self.serve(None))]
        start_timeout = getattr(self.opts, "start_timeout", 300)
        argv = session.ssh_argv(host, getattr(self.opts, "ssh_port", 0), getattr(self.opts, "ssh_identity_file", ""),
                                min(start_timeout, 60), extra)
        passed = session.passed_environment(env, getattr(self.opts, "export", ()))
        passed["KOLO_HOSTNAME"] = host  # as every worker is told its host
        return session.RemoteProcess(host, argv, self.argv, passed, prefix.decode(), self.out_lock,
                                     remove=[socket_path])

    def pump(self, stream, prefix, out):
        for raw in iter(stream.readline, b""):
            with self.out_lock:
                out.write(prefix + raw)
                out.flush()
        stream.close()

    def end(self, proc, sig=signal.SIGTERM):
        if proc.poll() is None:
            if isinstance(proc, session.RemoteProcess):
                proc.signal_group(sig)
                return
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass

    def rendezvous(self, workers):
        """Rank 0's address and a port free there: on an emulated host, its
        own address; on another host, its name; else this machine's address
        on its route to the other hosts when some are remote, or 127.0.0.1."""
        hosts = [w.host for w in workers]
        home = self.namespace(hosts[0]) if hosts else None
        if home:
            address = self.emulated.address(hosts[0])
            return address, in_netns(home, lambda: free_port(address))
        if hosts and self.remote(hosts[0]):
            return hosts[0], free_port()  # free here: the best guess without asking that host
        others = [h for h in hosts if self.remote(h)]
        if not others:
            return "127.0.0.1", free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((others[0], 9))  # no packet is sent: the kernel picks the route and its source
            return s.getsockname()[0], free_port()

    def close(self):
        for t in self.pumps:
            t.join(timeout=2)
