"""torch's own flight-recorder analyzer (torch.distributed.flight_recorder.
fr_trace) on a kolo job: a torch job on kolo whose last rank passes another
count at one allreduce fails on every rank, each writes kolo's flight
record, kolo.torch.flight_record makes torch's dumps of them, and fr_trace
reports the size mismatch at that call."""
import os
import subprocess
import sys

from rank_by_rank import finish, start

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "torch_flight_job.py")


def test_torchs_analyzer_reads_kolos_records(tmp_path):
    records, dumps = tmp_path / "kolo", tmp_path / "torch"
    records.mkdir()
    _, _, out = finish(start(SCRIPT, lambda r: [tmp_path / "rendezvous", r, 3], 3,
                             KOLO_FLIGHT_RECORDER_DIR=str(records), KOLO_TIMEOUT_S="10"))
    assert out.count("RuntimeError: MISMATCH") == 3, out
    convert = subprocess.run([sys.executable, "-m", "kolo.torch.flight_record", str(records), str(dumps)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert convert.returncode == 0 and len(os.listdir(dumps)) == 3, convert.stdout
    trace = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(dumps)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    text = trace.stdout
    assert "Collective sequence number: 4 has errors" in text, text
    assert "SIZE_OR_SYNTAX_MISMATCH" in text and "[[10]]" in text and "[[11]]" in text, text
