"""horovodrun's launch on kolo: parse_args() reads horovodrun's command
line (the flags of an elastic job), _run_elastic(args) runs the job under
kolorun's elastic driver (kolo/runner/elastic_driver.py), in this process,
as Horovod's own _run_elastic runs its driver, and _run_static(args) runs a
fixed one: a function (args.run_func) through kolo.run, its results in rank
order, a command under kolorun. A job that fails raises RuntimeError with
Horovod's messages. The rest of the module is Horovod's own (its _run,
which picks between the two; horovod.spark's runner, which Horovod's
test_spark.py imports, takes names from it); these three replace Horovod's."""
import argparse
import os
import secrets
import subprocess
import sys
import threading

_checkout = os.environ.get("HOROVOD_CHECKOUT")
if _checkout:
    _own = os.path.join(_checkout, "horovod", "runner", "launch.py")
    with open(_own) as _f:
        exec(compile(_f.read(), _own, "exec"))

NON_ZERO_EXIT = ("Horovod detected that one or more processes exited with non-zero status, thus causing the job "
                 "to be terminated. The first process to do so was: %s")


class _Args(argparse.Namespace):
    """horovodrun's arguments; the many it has that kolo's launch does not
    take (fusion, autotune, timeline...) read as None, as unset, so that
    Horovod's config_parser.set_env_from_args works on them."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def parse_args():
    parser = argparse.ArgumentParser(prog="horovodrun", description="horovodrun's elastic jobs, on kolo")
    parser.add_argument("-np", "--num-proc", dest="np", type=int, required=True)
    parser.add_argument("--min-np", "--min-num-proc", dest="min_np", type=int)
    parser.add_argument("--max-np", "--max-num-proc", dest="max_np", type=int)
    parser.add_argument("-H", "--hosts", dest="hosts")
    parser.add_argument("--host-discovery-script", dest="host_discovery_script")
    parser.add_argument("--slots-per-host", "--slots", dest="slots", type=int)
    parser.add_argument("--reset-limit", dest="reset_limit", type=int)
    parser.add_argument("--blacklist-cooldown-range", dest="cooldown_range", type=int, nargs=2)
    parser.add_argument("--elastic-timeout", dest="elastic_timeout", type=int)
    parser.add_argument("--log-level", dest="log_level")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = _Args(**vars(parser.parse_args(sys.argv[1:])))
    if not args.command:
        parser.error("a command to run is required")
    return args


def _run_elastic(args):
    from horovod.runner import gloo_run
    from horovod.runner.elastic import constants
    from horovod.runner.elastic import driver as settings

    from kolo.runner import elastic_driver

    command = list(args.command)
    if command[0] in ("python", "python3"):
        command[0] = sys.executable  # the interpreter of this job, as horovodrun's workers share it
    # horovodrun starts a worker on every slot there is, up to --max-np (no
    # limit by default), once -np slots are there (kolorun starts -np).
    max_np = args.max_np or 1 << 20
    opts = argparse.Namespace(
        np=max_np, min_np=args.min_np or args.np, max_np=max_np, hosts=args.hosts or "",
        host_discovery_script=args.host_discovery_script or "", slots=args.slots or 1,
        discovery_interval=settings.DISCOVER_HOSTS_FREQUENCY_SECS,
        elastic_timeout=args.elastic_timeout or settings.ELASTIC_TIMEOUT_SECS,
        min_hosts=gloo_run._get_min_start_hosts(args), reset_limit=args.reset_limit or 0, host_failure_limit=1,
        blacklist_cooldown_range=args.cooldown_range, reset_grace=30, start_timeout=300, no_prefix=False)
    env = dict(os.environ)
    env.setdefault("KOLO_JOB_ID", "horovodrun-" + secrets.token_hex(8))
    env.setdefault("KOLO_SECRET", secrets.token_hex(32))
    if args.log_level:
        env["HOROVOD_LOG_LEVEL"] = args.log_level
    driver = elastic_driver.ElasticDriver(opts, command, env, os.environ.get("PYTHONPATH", ""), threading.Lock())
    if driver.run() != 0:
        if driver.failure == "reset-limit":
            raise RuntimeError(constants.RESET_LIMIT_EXCEEDED_MESSAGE.format(opts.reset_limit))
        raise RuntimeError(NON_ZERO_EXIT % (driver.failure or "unknown"))


def _run_static(args):
    from kolo import function_job
    nics = ",".join(sorted(args.nics)) if args.nics else None
    options = dict(hosts=args.hosts, hostfile=None if args.hosts else args.hostfile, start_timeout=args.start_timeout,
                   ssh_port=args.ssh_port, ssh_identity_file=args.ssh_identity_file, network_interface=nics,
                   verbose=args.verbose)
    if args.run_func:
        return function_job.run(args.run_func, np=args.num_proc, **options)
    status = subprocess.call(function_job.kolorun_argv(args.num_proc, **options) + list(args.command))
    if status != 0:
        raise RuntimeError(NON_ZERO_EXIT % ("kolorun exit status %d" % status))
    return None
