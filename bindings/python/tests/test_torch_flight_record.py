"""torch's own flight-recorder analyzer (torch.distributed.flight_recorder.
fr_trace) on a kolo job: a torch job on kolo whose last rank passes another
count at one allreduce fails on every rank, each writes kolo's flight
record, kolo.torch.flight_record makes torch's dumps of them, and fr_trace
reports the size mismatch at that call."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "torch_flight_job.py")


def test_torchs_analyzer_reads_kolos_records(tmp_path):
    records, dumps = tmp_path / "kolo", tmp_path / "torch"
    records.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KOLO_RANK", "KOLO_WORLD", "KOLO_MASTER"))}
    env.update(KOLO_FLIGHT_RECORDER_DIR=str(records), KOLO_TIMEOUT_S="10")
    procs = [subprocess.Popen([sys.executable, SCRIPT, str(tmp_path / "rendezvous"), str(r), "3"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(3)]
    out = "".join(p.communicate(timeout=120)[0] for p in procs)
    assert out.count("RuntimeError: MISMATCH") == 3, out
    convert = subprocess.run([sys.executable, "-m", "kolo.torch.flight_record", str(records), str(dumps)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert convert.returncode == 0 and len(os.listdir(dumps)) == 3, convert.stdout
    trace = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(dumps)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    text = trace.stdout
    assert "Collective sequence number: 4 has errors" in text, text
    assert "SIZE_OR_SYNTAX_MISMATCH" in text and "[[10]]" in text and "[[11]]" in text, text
