"""kolo.run: a Python function as a kolo job, as horovod.run runs one.

    import kolo

    def train(lr):
        import kolo.torch as hvd
        hvd.init()
        ...
        return hvd.rank()

    results = kolo.run(train, args=(0.1,), np=4, hosts="server1:2,server2:2")  # [0, 1, 2, 3]

run() starts `kolorun` (tools/kolorun, or the wheel's script) with the
same hosts, ssh and interface options a kolorun command line has; every
rank runs this module (`python -m kolo.function_job`), which calls the
function and hands its result back. The function and its arguments travel
pickled (cloudpickle) in the ranks' environment, which kolorun sends to
every host with the job, so nothing needs a shared file system but kolo
and the function's own imports; each rank's result comes back as one line
of its standard output, marked with a token of this run that no other
output carries, and every other line goes to the caller's stdout. A rank
that raises fails the job (every rank is ended, as in any kolorun job) and
run() raises RuntimeError naming it.
"""
import base64
import os
import secrets
import shutil
import subprocess
import sys
import threading

CHUNK = 96 * 1024  # bytes of base64 per environment variable: under Linux's 128 KiB for one
MAX_CHUNKS = 12  # about 1.1 MiB in all: well under what execve takes for a whole environment
MARK = "\x1ekolo-result"  # a record separator starts the line a rank's result is on
STOP_S = 30  # kolorun ends every rank within its stop grace (5 s) and a margin: then it is killed


def _kolorun():
    """The kolorun beside this package in a checkout (tools/kolorun), or the
    one on PATH (the wheel's script)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "..", "..", "..", "tools", "kolorun"), shutil.which("kolorun")):
        if candidate and os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise RuntimeError("kolo.run: no kolorun found (install kolo's wheel, or run from a checkout)")


def _pickled(func, args, kwargs):
    try:
        import cloudpickle
    except ImportError:
        raise RuntimeError("kolo.run pickles the function with cloudpickle: pip install cloudpickle") from None
    text = base64.b64encode(cloudpickle.dumps((func, tuple(args), dict(kwargs or {})))).decode()
    chunks = [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)]
    if len(chunks) > MAX_CHUNKS:
        raise ValueError("kolo.run: the function and its arguments pickle to %d bytes, more than the %d the ranks' "
                         "environment can carry: pass large data as a file or path instead"
                         % (len(text), MAX_CHUNKS * CHUNK))
    return chunks


def kolorun_argv(np, hosts=None, hostfile=None, start_timeout=None, ssh_port=None, ssh_identity_file=None,
                 network_interface=None, verbose=None):
    """kolorun's command line for these horovod.run options, up to the
    program."""
    argv = [sys.executable, _kolorun(), "-np", str(np)]
    if hosts:
        argv += ["-H", hosts]
    if hostfile:
        argv += ["--hostfile", hostfile]
    if start_timeout is not None:
        argv += ["--start-timeout", str(start_timeout)]
    if ssh_port:
        argv += ["-p", str(ssh_port)]
    if ssh_identity_file:
        argv += ["-i", ssh_identity_file]
    if network_interface:
        argv += ["--network-interfaces", network_interface if isinstance(network_interface, str)
                 else ",".join(network_interface)]
    if verbose and verbose >= 2:
        argv.append("--verbose")
    return argv


def run(func, args=(), kwargs=None, np=1, hosts=None, hostfile=None, start_timeout=None, ssh_port=None,
        ssh_identity_file=None, network_interface=None, env=None, verbose=None, executable=None, stdout=None,
        disable_cache=None, use_gloo=None, use_mpi=None, min_np=None, max_np=None):
    """func(*args, **kwargs) on np ranks across hosts ("host:slots,...", or
    a hostfile of `host slots=N` lines; default: this machine); returns the
    ranks' results in rank order. start_timeout (s, default 30),
    ssh_port, ssh_identity_file and network_interface (a comma list) are
    kolorun's -p, -i, --start-timeout and --network-interfaces; env adds to
    every rank's environment; executable is the Python the ranks run
    (default: this one, on every host at the same path); stdout receives
    the ranks' other output lines (default: sys.stdout). disable_cache,
    use_gloo and use_mpi are horovod.run's choices, which kolo does not
    need. Elastic jobs (min_np, max_np) run with kolorun --min-np."""
    del disable_cache, use_gloo, use_mpi
    if min_np is not None or max_np is not None:
        raise NotImplementedError("kolo.run runs fixed jobs; an elastic job is `kolorun --min-np N --max-np M`")
    if func is None or not callable(func):
        raise ValueError("kolo.run: func must be a callable, got %r" % (func,))
    if np is None or np < 1:
        raise ValueError("kolo.run: np must be at least 1, got %r" % (np,))
    token = secrets.token_hex(16)
    job_env = dict(os.environ)
    job_env.update({k: str(v) for k, v in (env or {}).items()})
    for i, chunk in enumerate(_pickled(func, args, kwargs)):
        job_env["KOLO_RUN_FUNCTION_%d" % i] = chunk
    job_env["KOLO_RUN_TOKEN"] = token
    # The ranks import this package as this process does.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    job_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, job_env.get("PYTHONPATH", "")) if p)
    argv = kolorun_argv(np, hosts, hostfile, start_timeout, ssh_port, ssh_identity_file, network_interface, verbose)
    argv += [executable or sys.executable, "-m", "kolo.function_job"]
    out = stdout or sys.stdout
    results, errors = {}, []
    proc = subprocess.Popen(argv, env=job_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def relay_errors():
        for line in proc.stderr:
            errors.append(line)
            sys.stderr.write(line)
    relay = threading.Thread(target=relay_errors, daemon=True)
    relay.start()
    try:
        for line in proc.stdout:
            at = line.find(MARK)
            fields = line[at + len(MARK):].split() if at >= 0 else []  # token, rank, result
            if len(fields) == 3 and fields[0] == token:
                results[int(fields[1])] = fields[2]
            else:
                out.write(line)
        status = proc.wait()
    except BaseException:  # Ctrl-C here: kolorun ends every rank on every host
        proc.terminate()
        try:
            proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_S)
        raise
    relay.join(timeout=5)
    if status != 0:
        said = [e.strip() for e in errors if e.startswith("kolorun")]
        raise RuntimeError("kolo.run: the job failed (kolorun exit status %d)%s. Horovod detected that one or more "
                           "processes exited with non-zero status, thus causing the job to be terminated."
                           % (status, ": " + said[-1] if said else ""))
    missing = [r for r in range(np) if r not in results]
    if missing:
        raise RuntimeError("kolo.run: ranks %s ended without a result" % missing)
    import cloudpickle
    return [cloudpickle.loads(base64.b64decode(results[r])) for r in range(np)]


def main():
    """A rank: the function from the environment, called; its result, one
    marked line on standard output."""
    import cloudpickle
    chunks, i = [], 0
    while "KOLO_RUN_FUNCTION_%d" % i in os.environ:
        chunks.append(os.environ.pop("KOLO_RUN_FUNCTION_%d" % i))
        i += 1
    func, args, kwargs = cloudpickle.loads(base64.b64decode("".join(chunks)))
    result = func(*args, **kwargs)
    line = "%s %s %s %s\n" % (MARK, os.environ["KOLO_RUN_TOKEN"], os.environ.get("KOLO_RANK", "0"),
                              base64.b64encode(cloudpickle.dumps(result)).decode())
    sys.stdout.flush()
    sys.stdout.write(line)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
