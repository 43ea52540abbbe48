"""One host's supervisor (kolo/runner/supervisor.py) as kolorun sees it: the
process that starts it (directly, in an emulated host's namespace, or ssh),
the messages to it, and its output, split into the ranks' lines (passed on)
and its own messages (queued for the driver as (host index, kind, value)).
RemoteProcess is one rank under a supervisor of its own, for the elastic
driver's workers on other hosts. What of kolorun's environment travels to
another host is passed_environment's.
"""
import collections
import functools
import json
import os
import queue
import secrets
import shlex
import signal
import subprocess
import sys
import threading

# What every host runs: read the supervisor's text from standard input,
# then run it. No quote, `!` or `$` in it, so it survives any login shell.
BOOTSTRAP = 'import sys;n=int(sys.stdin.readline());exec(compile(sys.stdin.read(n),"kolo-supervisor","exec"))'
SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervisor.py")

# What a rank on another host gets of kolorun's environment, as horovodrun
# passes it: all of it but what names this machine, this shell or this
# terminal (-x VAR passes one of these all the same).
NOT_PASSED = ("HOSTNAME", "KOLO_HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "DISPLAY", "TERM", "TERMCAP",
              "XAUTHORITY", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY",
              "TMUX", "TMUX_PANE", "STY", "WINDOW", "LS_COLORS", "PS1", "PS2", "PROMPT_COMMAND")
HEARTBEAT_S = 2  # kolorun's word to every supervisor, this often
SILENCE_S = 15  # a supervisor that hears nothing this long ends its ranks
STOP_GRACE_S = 5  # a rank told to end (SIGTERM) has this long before SIGKILL


def passed_environment(base, extra=()):
    env = {k: v for k, v in base.items() if k not in NOT_PASSED and not k.startswith("BASH_FUNC_")}
    for item in extra:
        name, eq, value = item.partition("=")
        env[name] = value if eq else base.get(name, "")
    return env


@functools.lru_cache(maxsize=None)
def supervisor_text():
    """What every supervisor runs: read once, sent to every host."""
    with open(SUPERVISOR) as f:
        return f.read()


def local_argv():
    return [sys.executable, "-c", BOOTSTRAP]


def netns_argv(namespace):
    return ["ip", "netns", "exec", namespace, sys.executable, "-c", BOOTSTRAP]


def ssh_argv(host, port=None, identity=None, connect_timeout=30, extra=()):
    """ssh to `host` running the supervisor in this directory, with this
    interpreter when the host has it at the same path (a shared file
    system), else its python3. Never prompts (BatchMode): a host that wants
    a password fails at once instead of hanging the job. The ssh client
    ends itself when the host stops answering for 15 s (ServerAlive*).
    ssh keeps the first value it is given for each option, so the order is
    the precedence: the port and identity kolorun was given and `extra`
    (what the caller needs, such as a forwarded socket), then
    KOLO_SSH_OPTIONS (ssh's own options, e.g. "-F config" or "-o
    ServerAliveInterval=2", which thereby override the defaults after
    them), then kolo's defaults."""
    argv = ["ssh", "-T"]
    if port:
        argv += ["-p", str(port)]
    if identity:
        argv += ["-i", identity]
    argv += list(extra) + shlex.split(os.environ.get("KOLO_SSH_OPTIONS", ""))
    argv += ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR",
             "-o", "ConnectTimeout=%d" % max(1, int(connect_timeout)),
             "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
    # One sh script, quoted once for the login shell (bash, zsh, csh alike).
    script = 'cd %s && { P=%s; [ -x "$P" ] || P=python3; exec "$P" -c %s; }' % (
        shlex.quote(os.getcwd()), shlex.quote(sys.executable), shlex.quote(BOOTSTRAP))
    return argv + [host, "sh -c " + shlex.quote(script)]


class HostSession:
    def __init__(self, index, name, argv, events, out_lock, mark):
        self.index, self.name, self.argv = index, name, argv
        self.events, self.out_lock = events, out_lock
        self.mark_text, self.mark = mark, mark.encode() + b" "
        self.proc = None
        self.said = collections.deque(maxlen=5)  # its last lines on stderr that no rank wrote
        self.gone = False
        self.lock = threading.Lock()

    def open(self, token, ports=0):
        """Starts the supervisor and sends it its text and its hello (the
        job's token, its index, how many free ports of its host to find);
        False (and a "gone" event) if it cannot be started at all."""
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            self.said.append("cannot run %s: %s" % (self.argv[0], e.strerror or e))
            self.gone = True
            self.events.put((self.index, "gone", 127))
            return False
        self.err_pump = threading.Thread(target=self.pump_err, daemon=True)
        self.err_pump.start()
        threading.Thread(target=self.pump_out, daemon=True).start()
        text = supervisor_text()
        self.write("%d\n%s" % (len(text), text))
        self.send({"hello": {"host": self.index, "token": token, "mark": self.mark_text, "ports": ports,
                             "heartbeat_s": SILENCE_S, "grace_s": STOP_GRACE_S}})
        return True

    def write(self, text):
        with self.lock:
            if self.proc is None or self.proc.stdin.closed:
                return
            try:
                self.proc.stdin.write(text.encode())
                self.proc.stdin.flush()
            except OSError:
                pass  # it is gone: its "gone" event says so

    def send(self, msg):
        self.write(json.dumps(msg) + "\n")

    def pump_out(self):
        for raw in iter(self.proc.stdout.readline, b""):
            if raw.startswith(self.mark):
                try:
                    (kind, value), = json.loads(raw[len(self.mark):]).items()
                except ValueError:
                    continue
                self.events.put((self.index, kind, value))
                continue
            with self.out_lock:
                sys.stdout.buffer.write(raw)
                sys.stdout.buffer.flush()
        self.proc.stdout.close()
        self.proc.wait()
        self.err_pump.join(timeout=2)  # ssh's last words, for the driver's message
        self.gone = True
        self.events.put((self.index, "gone", self.proc.returncode))

    def pump_err(self):
        for raw in iter(self.proc.stderr.readline, b""):
            if not raw.startswith(b"["):  # not a rank's line: ssh's, the shell's, the supervisor's
                self.said.append(raw.decode(errors="replace").strip())
            with self.out_lock:
                sys.stderr.buffer.write(raw)
                sys.stderr.buffer.flush()
        self.proc.stderr.close()

    def starter(self):
        """What started its supervisor, for messages."""
        return "its ssh connection" if self.argv[0] == "ssh" else "its supervisor"

    def last_words(self):
        return " / ".join(line.rstrip(".") for line in self.said if line) or "no message"

    def close(self):
        """Ends its standard input: the supervisor ends its ranks and exits."""
        with self.lock:
            if self.proc is not None and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass


class RemoteProcess:
    """One rank started by a supervisor of its own over `argv` (ssh), with
    what the elastic driver asks of a Popen: poll(), wait(timeout),
    returncode, and signal_group(sig) for os.killpg. A supervisor that is
    lost counts as the rank's exit with status 255. remove: files of the
    host (the driver's forwarded socket) that its supervisor removes when
    the rank has ended."""

    def __init__(self, name, argv, command, env, prefix, out_lock, remove=()):
        self.returncode = None
        self.ended = threading.Event()
        events = queue.Queue()
        self.session = HostSession(0, name, argv, events, out_lock, "\x1fkolo-" + secrets.token_hex(8))
        if self.session.open(secrets.token_hex(8)):
            self.session.send({"start": {"argv": command, "cwd": os.getcwd(), "env": env,
                                         "ranks": [[0, {}, prefix]], "remove": list(remove)}})
        threading.Thread(target=self.follow, args=(events,), daemon=True).start()

    def follow(self, events):
        while True:
            try:
                _, kind, value = events.get(timeout=HEARTBEAT_S)
            except queue.Empty:
                self.session.send({"heartbeat": True})
                continue
            if kind == "exit" and self.returncode is None:
                status = value["status"]
                self.returncode = 255 if status is None else status
            elif kind == "gone":
                if self.returncode is None:
                    self.returncode = 255
                self.ended.set()
                return

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self.ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.session.argv, timeout)
        return self.returncode

    def signal_group(self, sig):
        if sig == signal.SIGKILL:
            self.session.close()
            self.session.kill()
        else:
            self.session.send({"signal": signal.Signals(sig).name[3:]})
