"""horovodrun's tuning flags, its --config-file and its HOROVOD_* variables,
as kolo's settings: one row per setting.

kolorun takes every flag horovodrun takes, so that a Horovod user's command
line runs with `kolorun` in place of `horovodrun`. Where kolo has the
setting, the flag sets the KOLO_ variable every rank reads
(docs/configuration.md); where it has none (an autotuner, NCCL streams,
MPI's threads), kolorun says so once at the start, with why, and goes on.
The values come, each overriding the one before: HOROVOD_* variables of
kolorun's own environment (a KOLO_ variable set there wins over them),
then --config-file (Horovod's YAML sections), then the command line.
"""
import argparse
import collections

MIB = 1 << 20


class FlagError(Exception):
    """A value horovodrun would refuse too, or a config file kolorun cannot
    read; nothing has started."""


Row = collections.namedtuple("Row", "dest flags type config variable kolo why")
# dest       horovodrun's argparse destination, which kolorun's parser uses too
# flags      its spellings: (flag,) for a value, (yes, no[, ...]) for a switch
#            (type bool), a further spelling of either given as (flag, value)
# type       of the value (int, float, str, bool)
# config     (section, key) in Horovod's --config-file; a key "!k" is the
#            negation of the value (stall_check.enabled is --no-stall-check's)
# variable   (HOROVOD_* name, text -> value) or None: what horovodrun sets from
#            the flag, read from kolorun's environment
# kolo       (KOLO_* name, value -> text or None) or None
# why        said when the value is given (a switch: set) and kolo has no
#            counterpart; "" is said by another row (the autotuner's details)


def _switch(text):
    return text.strip().lower() not in ("", "0", "false", "no")


def _log_level(level):
    return {"TRACE": "debug", "DEBUG": "debug", "INFO": "info", "WARNING": "warn", "ERROR": "error",
            "FATAL": "error"}[level]


NO_MPI = "kolorun starts the ranks itself (over ssh), with no mpirun"
ROWS = [
    Row("fusion_threshold_mb", ("--fusion-threshold-mb",), int, ("params", "fusion_threshold_mb"),
        ("HOROVOD_FUSION_THRESHOLD", lambda t: int(t) / MIB),
        ("KOLO_FUSION_THRESHOLD", lambda mb: str(int(mb * MIB))), None),
    Row("cycle_time_ms", ("--cycle-time-ms",), float, ("params", "cycle_time_ms"), ("HOROVOD_CYCLE_TIME", float),
        ("KOLO_CYCLE_TIME_MS", str), None),
    Row("cache_capacity", ("--cache-capacity",), int, ("params", "cache_capacity"),
        ("HOROVOD_CACHE_CAPACITY", int), ("KOLO_CACHE_CAPACITY", str), None),
    # kolo's default already picks hierarchical where its cost model finds it
    # fastest, so "no" leaves that choice.
    Row("hierarchical_allreduce", ("--hierarchical-allreduce", "--no-hierarchical-allreduce"), bool,
        ("params", "hierarchical_allreduce"), ("HOROVOD_HIERARCHICAL_ALLREDUCE", _switch),
        ("KOLO_ALGORITHM", lambda on: "hierarchical" if on else None), None),
    Row("hierarchical_allgather", ("--hierarchical-allgather", "--no-hierarchical-allgather"), bool,
        ("params", "hierarchical_allgather"), ("HOROVOD_HIERARCHICAL_ALLGATHER", _switch), None,
        "kolo's allgather is chosen per size by its cost model (docs/performance.md)"),
    Row("torus_allreduce", ("--torus-allreduce", "--no-torus-allreduce"), bool, ("params", "torus_allreduce"),
        ("HOROVOD_TORUS_ALLREDUCE", _switch), None,
        "kolo has no torus allreduce; KOLO_ALGORITHM names the algorithms it has"),
    Row("autotune", ("--autotune", "--no-autotune"), bool, ("autotune", "enabled"), ("HOROVOD_AUTOTUNE", _switch),
        None, "kolo has no autotuner: its cost model picks each size's algorithm (docs/performance.md)"),
    Row("autotune_log_file", ("--autotune-log-file",), str, ("autotune", "log_file"), None, None, ""),
    Row("autotune_warmup_samples", ("--autotune-warmup-samples",), int, ("autotune", "warmup_samples"), None, None,
        ""),
    Row("autotune_steps_per_sample", ("--autotune-steps-per-sample",), int, ("autotune", "steps_per_sample"), None,
        None, ""),
    Row("autotune_bayes_opt_max_samples", ("--autotune-bayes-opt-max-samples",), int,
        ("autotune", "bayes_opt_max_samples"), None, None, ""),
    Row("autotune_gaussian_process_noise", ("--autotune-gaussian-process-noise",), float,
        ("autotune", "gaussian_process_noise"), None, None, ""),
    Row("timeline_filename", ("--timeline-filename",), str, ("timeline", "filename"), ("HOROVOD_TIMELINE", str),
        ("KOLO_TIMELINE", str), None),
    Row("timeline_mark_cycles", ("--timeline-mark-cycles", "--no-timeline-mark-cycles"), bool,
        ("timeline", "mark_cycles"), ("HOROVOD_TIMELINE_MARK_CYCLES", _switch), None,
        "kolo's timeline has no cycle marks: each round's negotiation and collectives are its events"),
    Row("stall_check_warning_time_seconds", ("--stall-check-warning-time-seconds",), int,
        ("stall_check", "warning_time_seconds"), ("HOROVOD_STALL_CHECK_TIME_SECONDS", int),
        ("KOLO_STALL_WARNING_S", str), None),
    Row("stall_check_shutdown_time_seconds", ("--stall-check-shutdown-time-seconds",), int,
        ("stall_check", "shutdown_time_seconds"), ("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", int),
        ("KOLO_STALL_SHUTDOWN_S", str), None),
    # After the warning time's row, so that a disabled check wins over it;
    # kolo's warning time has no "never", its largest value is one.
    Row("no_stall_check", ("--no-stall-check", "--stall-check"), bool, ("stall_check", "!enabled"),
        ("HOROVOD_STALL_CHECK_DISABLE", _switch), ("KOLO_STALL_WARNING_S", lambda off: "1e7" if off else None),
        None),
    Row("mpi_threads_disable", ("--mpi-threads-disable", "--no-mpi-threads-disable"), bool,
        ("library_options", "mpi_threads_disable"), None, None, "kolo does not use MPI"),
    Row("num_nccl_streams", ("--num-nccl-streams",), int, ("library_options", "num_nccl_streams"), None, None,
        "kolo does not use NCCL: its GPU collectives run on the caller's stream"),
    Row("thread_affinity", ("--thread-affinity",), int, ("library_options", "thread_affinity"), None, None,
        "kolo does not pin its threads"),
    # Horovod's Gloo timeout bounds its rendezvous and collectives, as
    # KOLO_TIMEOUT_S bounds every wait of kolo's.
    Row("gloo_timeout_seconds", ("--gloo-timeout-seconds",), int, ("library_options", "gloo_timeout_seconds"),
        ("HOROVOD_GLOO_TIMEOUT_SECONDS", int), ("KOLO_TIMEOUT_S", str), None),
    Row("tcp_flag", ("--tcp",), bool, None, None, None,
        "kolo uses RDMA only between ranks whose devices have active ports; KOLO_TRANSPORT=tcp forces TCP "
        "on every link"),
    Row("log_level", ("--log-level",), str, ("logging", "level"), ("HOROVOD_LOG_LEVEL", str.upper),
        ("KOLO_LOG_LEVEL", _log_level), None),
    Row("log_with_timestamp", ("--log-with-timestamp", "--log-without-timestamp", ("--log-hide-timestamp", False),
                               ("--no-log-hide-timestamp", True)), bool, ("logging", "with_timestamp"), None, None,
        "kolo's log lines carry no time; --prefix-output-with-timestamp puts one before every output line"),
    Row("use_mpi", ("--mpi",), bool, ("controller", "mpi"), None, None, NO_MPI),
    Row("use_jsrun", ("--jsrun",), bool, ("controller", "jsrun"), None, None,
        "kolorun starts the ranks itself (over ssh), with no jsrun"),
    Row("mpi_args", ("--mpi-args",), str, None, None, None, NO_MPI),
    Row("binding_args", ("--binding-args",), str, None, None, None, NO_MPI),
]
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")
NONNEGATIVE = ("fusion_threshold_mb", "cycle_time_ms", "cache_capacity", "autotune_warmup_samples",
               "autotune_steps_per_sample", "autotune_bayes_opt_max_samples", "stall_check_warning_time_seconds",
               "stall_check_shutdown_time_seconds", "num_nccl_streams", "thread_affinity", "gloo_timeout_seconds")


def add_arguments(parser):
    """horovodrun's flags, in a group of their own; each defaults to None
    (not given), which lets a config file or the environment decide."""
    group = parser.add_argument_group(
        "horovodrun's tuning flags", "kolo's settings where kolo has them (docs/launchers.md), else said and ignored")
    for row in ROWS:
        if row.type is bool:
            for i, flag in enumerate(row.flags):
                flag, value = flag if isinstance(flag, tuple) else (flag, i == 0)
                group.add_argument(flag, dest=row.dest, action="store_const", const=value, default=None)
        elif row.dest == "log_level":
            group.add_argument(*row.flags, dest=row.dest, type=str.upper, choices=LOG_LEVELS, default=None)
        else:
            group.add_argument(*row.flags, dest=row.dest, type=row.type, default=None, metavar="VALUE")
    group.add_argument("--gloo", dest="use_gloo", action="store_true",
                       help="accepted for horovodrun's command lines: kolo is its own controller, as Gloo is")
    group.add_argument("--config-file", default="", help="Horovod's YAML file of these settings; flags given "
                       "on the command line win over it")


def read_config_file(path):
    """Horovod's --config-file: {dest: value} of the rows it names, and the
    keys no row takes (Horovod ignores them too)."""
    try:
        import yaml
    except ImportError:
        raise FlagError("--config-file %s: reading it needs PyYAML in kolorun's Python "
                        "(python3 -m pip install pyyaml), or give its settings as flags" % path)
    try:
        with open(path) as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        raise FlagError("--config-file %s: %s" % (path, e))
    if not isinstance(config, dict):
        raise FlagError("--config-file %s: not a mapping of Horovod's sections" % path)
    values, ignored = {}, []
    controller = config.pop("controller", None)
    if controller is not None:
        if str(controller).lower() not in ("gloo", "mpi", "jsrun"):
            raise FlagError("--config-file %s: controller %r: Horovod's are gloo, mpi and jsrun" % (path, controller))
        values.update({row.dest: True for row in ROWS if row.config == ("controller", str(controller).lower())})
    for section, keys in config.items():
        if not isinstance(keys, dict):
            ignored.append(str(section))
            continue
        for key, value in keys.items():
            row = next((r for r in ROWS if r.config in ((section, key), (section, "!" + key))), None)
            if row is None:
                ignored.append("%s.%s" % (section, key))
            elif value is not None:
                value = bool(value) if row.type is bool else row.type(value)
                values[row.dest] = (not value) if row.config[1].startswith("!") else value
    return values, ignored


def settings(opts, environ):
    """(the KOLO_ variables every rank gets, kolorun's notes): from the
    HOROVOD_* variables of environ, opts.config_file and opts' flags."""
    values, notes = {}, []
    for row in ROWS:
        if row.variable and row.variable[0] in environ and not (row.kolo and row.kolo[0] in environ):
            try:
                values[row.dest] = row.variable[1](environ[row.variable[0]])
            except (ValueError, KeyError):
                raise FlagError("%s=%s is not a value Horovod takes" % (row.variable[0], environ[row.variable[0]]))
    if opts.config_file:
        from_file, ignored = read_config_file(opts.config_file)
        values.update(from_file)
        if ignored:
            notes.append("--config-file %s: ignored %s, which Horovod does not read either"
                         % (opts.config_file, ", ".join(ignored)))
    values.update({row.dest: getattr(opts, row.dest) for row in ROWS if getattr(opts, row.dest, None) is not None})
    for dest in NONNEGATIVE:
        if values.get(dest) is not None and values[dest] < 0:
            raise FlagError("%s=%s must be >= 0" % (dest, values[dest]))
    noise = values.get("autotune_gaussian_process_noise")
    if noise is not None and not 0 <= noise <= 1:
        raise FlagError("autotune_gaussian_process_noise=%s must be in [0, 1]" % noise)
    if values.get("log_level") is not None and values["log_level"] not in LOG_LEVELS:
        raise FlagError("log level %s: Horovod's are %s" % (values["log_level"], ", ".join(LOG_LEVELS)))
    env = {}
    for row in ROWS:
        value = values.get(row.dest)
        if value is None or value is False and row.type is bool and not row.kolo:
            continue
        if row.kolo:
            text = row.kolo[1](value)
            if text is not None:
                env[row.kolo[0]] = text
        elif row.why:
            flag = row.flags[0] if not isinstance(row.flags[0], tuple) else row.flags[0][0]
            notes.append("%s: %s; ignored" % (flag, row.why))
    return env, notes


def namespace(argv):
    """The flags of argv alone (for tests and tools): horovodrun's parse of
    them, as kolorun's parser reads them."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return parser.parse_args(argv)
