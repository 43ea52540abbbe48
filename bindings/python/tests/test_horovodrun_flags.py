"""horovodrun's tuning flags, --config-file and HOROVOD_* variables as kolo's
settings (kolo/runner/horovodrun_flags.py). The cases are those of
Horovod's own test/single/test_run.py (its parse_args tests), with the
variables kolo's ranks read in place of the HOROVOD_* ones horovodrun sets;
the last runs kolorun itself on this machine with a Horovod user's flags."""
import os
import subprocess
import sys
import textwrap

import pytest

from kolo.runner import horovodrun_flags as flags

KOLORUN = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "tools", "kolorun")


def settings(*argv, environ=None):
    return flags.settings(flags.namespace(list(argv)), environ or {})


def test_the_parameters_become_kolos_settings():
    env, notes = settings("--fusion-threshold-mb", "10", "--cycle-time-ms", "20", "--cache-capacity", "512",
                          "--hierarchical-allreduce", "--hierarchical-allgather")
    assert env == {"KOLO_FUSION_THRESHOLD": str(10 * 1024 * 1024), "KOLO_CYCLE_TIME_MS": "20.0",
                   "KOLO_CACHE_CAPACITY": "512", "KOLO_ALGORITHM": "hierarchical"}
    assert notes == ["--hierarchical-allgather: kolo's allgather is chosen per size by its cost model "
                     "(docs/performance.md); ignored"]


def test_the_autotuner_is_said_once_and_fixed_parameters_still_apply():
    env, notes = settings("--autotune", "--autotune-log-file", "/tmp/autotune.txt", "--autotune-warmup-samples", "1",
                          "--autotune-steps-per-sample", "5", "--autotune-bayes-opt-max-samples", "10",
                          "--autotune-gaussian-process-noise", "0.2")
    assert env == {}
    assert len(notes) == 1 and notes[0].startswith("--autotune: kolo has no autotuner")
    env, notes = settings("--autotune", "--cache-capacity", "1024", "--no-hierarchical-allgather")
    assert env == {"KOLO_CACHE_CAPACITY": "1024"}
    assert len(notes) == 1  # a switch turned off says nothing


def test_timeline_stall_check_library_and_logging():
    env, notes = settings("--timeline-filename", "/tmp/timeline.json", "--timeline-mark-cycles")
    assert env == {"KOLO_TIMELINE": "/tmp/timeline.json"} and notes[0].startswith("--timeline-mark-cycles:")
    assert settings("--no-stall-check")[0] == {"KOLO_STALL_WARNING_S": "1e7"}
    assert settings("--stall-check-warning-time-seconds", "10", "--stall-check-shutdown-time-seconds", "20")[0] == {
        "KOLO_STALL_WARNING_S": "10", "KOLO_STALL_SHUTDOWN_S": "20"}
    env, notes = settings("--mpi-threads-disable", "--num-nccl-streams", "2", "--thread-affinity", "1",
                          "--gloo-timeout-seconds", "60", "--tcp", "--mpi", "--gloo")
    assert env == {"KOLO_TIMEOUT_S": "60"}
    assert [n.split(":")[0] for n in notes] == ["--mpi-threads-disable", "--num-nccl-streams", "--thread-affinity",
                                                "--tcp", "--mpi"]
    assert settings("--log-level", "warning", "--log-hide-timestamp") == ({"KOLO_LOG_LEVEL": "warn"}, [])
    assert settings("--log-level", "TRACE")[0] == {"KOLO_LOG_LEVEL": "debug"}


def test_the_environment_the_config_file_and_the_flags_in_that_order(tmp_path):
    # Horovod's variables in kolorun's environment count, but not over a
    # KOLO_ variable set there, and a flag wins over both.
    assert settings(environ={"HOROVOD_GLOO_TIMEOUT_SECONDS": "1800", "HOROVOD_FUSION_THRESHOLD": "1048576",
                             "HOROVOD_HIERARCHICAL_ALLREDUCE": "0"})[0] == {
        "KOLO_TIMEOUT_S": "1800", "KOLO_FUSION_THRESHOLD": "1048576"}
    assert settings(environ={"HOROVOD_GLOO_TIMEOUT_SECONDS": "1800", "KOLO_TIMEOUT_S": "5"})[0] == {}
    assert settings("--gloo-timeout-seconds", "7", environ={"KOLO_TIMEOUT_S": "5"})[0] == {"KOLO_TIMEOUT_S": "7"}
    config = tmp_path / "config.yaml"
    config.write_text(textwrap.dedent("""\
        controller: gloo
        params:
          fusion_threshold_mb: 32
          cycle_time_ms: 10
          cache_capacity: 2048
          hierarchical_allreduce: true
        autotune:
          enabled: false
          warmup_samples: 5
        timeline:
          filename: horovod_timeline.json
        stall_check:
          enabled: true
          warning_time_seconds: 120
          shutdown_time_seconds: 240
        library_options:
          gloo_timeout_seconds: 60
        logging:
          level: INFO
          hide_timestamp: true
        """))
    values, ignored = flags.read_config_file(str(config))
    assert values == {"fusion_threshold_mb": 32, "cycle_time_ms": 10.0, "cache_capacity": 2048,
                      "hierarchical_allreduce": True, "autotune": False, "autotune_warmup_samples": 5,
                      "timeline_filename": "horovod_timeline.json", "no_stall_check": False,
                      "stall_check_warning_time_seconds": 120, "stall_check_shutdown_time_seconds": 240,
                      "gloo_timeout_seconds": 60, "log_level": "INFO"}
    assert ignored == ["logging.hide_timestamp"]
    env, notes = settings("--config-file", str(config), "--fusion-threshold-mb", "256",
                          environ={"HOROVOD_CACHE_CAPACITY": "7", "HOROVOD_CYCLE_TIME": "3"})
    assert env == {"KOLO_FUSION_THRESHOLD": str(256 << 20), "KOLO_CYCLE_TIME_MS": "10.0",
                   "KOLO_CACHE_CAPACITY": "2048", "KOLO_ALGORITHM": "hierarchical",
                   "KOLO_TIMELINE": "horovod_timeline.json", "KOLO_STALL_WARNING_S": "120",
                   "KOLO_STALL_SHUTDOWN_S": "240", "KOLO_TIMEOUT_S": "60", "KOLO_LOG_LEVEL": "info"}
    assert notes == ["--config-file %s: ignored logging.hide_timestamp, which Horovod does not read either" % config]


@pytest.mark.parametrize("argv, environ, message", [
    (["--fusion-threshold-mb", "-1"], {}, "fusion_threshold_mb=-1 must be >= 0"),
    (["--cycle-time-ms", "-0.5"], {}, "cycle_time_ms=-0.5 must be >= 0"),
    (["--autotune-gaussian-process-noise", "2"], {}, r"noise=2.0 must be in \[0, 1\]"),
    ([], {"HOROVOD_FUSION_THRESHOLD": "lots"}, "HOROVOD_FUSION_THRESHOLD=lots is not a value Horovod takes"),
    ([], {"HOROVOD_LOG_LEVEL": "loud"}, "log level LOUD: Horovod's are TRACE"),
])
def test_values_horovodrun_refuses_are_refused(argv, environ, message):
    with pytest.raises(flags.FlagError, match=message):
        settings(*argv, environ=environ)


def test_a_config_file_that_cannot_be_read_is_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("controller: nccl\n")
    with pytest.raises(flags.FlagError, match="controller 'nccl': Horovod's are gloo, mpi and jsrun"):
        settings("--config-file", str(bad))
    with pytest.raises(flags.FlagError, match="--config-file .*missing.yaml: .*No such file"):
        settings("--config-file", str(tmp_path / "missing.yaml"))
    bad.write_text("- a list\n")
    with pytest.raises(flags.FlagError, match="not a mapping of Horovod's sections"):
        settings("--config-file", str(bad))


def kolorun(*argv, cwd):
    return subprocess.run([sys.executable, KOLORUN] + list(argv), cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_kolorun_takes_a_horovod_users_command_line(tmp_path):
    # No kolo library needed: the ranks are shells that print what they got.
    run = kolorun("--num-proc", "2", "--gloo", "--fusion-threshold-mb", "32", "--cycle-time-ms", "2",
                  "--autotune", "--no-stall-check", "--output-filename", "out", "-prefix-timestamp",
                  "sh", "-c", 'echo "rank $KOLO_RANK: $KOLO_FUSION_THRESHOLD $KOLO_CYCLE_TIME_MS '
                  '$KOLO_STALL_WARNING_S"; echo "rank $KOLO_RANK to stderr" >&2', cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    for rank in (0, 1):
        line = "rank %d: 33554432 2.0 1e7\n" % rank
        # On the terminal: the time, the rank, the line; in the files, the line alone.
        assert any(out.endswith("[%d] %s" % (rank, line)) and out[:3].isalpha() for out in run.stdout.splitlines(True))
        assert (tmp_path / "out" / ("rank.%d" % rank) / "stdout").read_text() == line
        assert (tmp_path / "out" / ("rank.%d" % rank) / "stderr").read_text() == "rank %d to stderr\n" % rank
    assert "kolorun: --autotune: kolo has no autotuner" in run.stderr
    # horovodrun's spellings of the elastic flags reach kolorun's checks.
    run = kolorun("--num-proc", "2", "--min-num-proc", "3", "--max-num-proc", "4", "true", cwd=tmp_path)
    assert run.returncode == 2 and "elastic jobs need 1 <= --min-np <= -np <= --max-np" in run.stderr
    run = kolorun("-np", "2", "--fusion-threshold-mb", "-1", "true", cwd=tmp_path)
    assert run.returncode == 2 and "fusion_threshold_mb=-1 must be >= 0 (nothing was started)" in run.stderr
