"""Elastic training with kolo.tensorflow.keras's Horovod API under
kolorun's elastic driver (scripts/elastic_keras_training.py): model.fit
with KerasState and Horovod's elastic callbacks; a worker that fails
mid-epoch (its error reaches the others as a TensorFlow error from kolo's
op, which kolo.tensorflow.elastic.run turns into a reset) is left out, the
others go on from their last commit and end with bit-identical weights."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SCRIPT = os.path.join(HERE, "scripts", "elastic_keras_training.py")


def test_a_failed_keras_worker_is_left_out_and_the_others_go_on():
    cmd = [sys.executable, os.path.join(REPO, "tools", "kolorun"), "-np", "3", "--min-np", "2", "--max-np", "3",
           "-H", "h0:1,h1:1,h2:1", sys.executable, SCRIPT]
    env = dict(os.environ, KOLO_TIMEOUT_S="10", ELASTIC_FAIL="h1:0:1:3", TF_CPP_MIN_LOG_LEVEL="2",
               KOLO_ELASTIC_VERBOSE="1")
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240, env=env)
    out = done.stdout
    assert done.returncode == 0, out
    assert "worker h1:0 fails at epoch 1 batch 3" in out, out
    assert "worker h1:0 (rank 1) exited with status 1: blacklisting host h1" in out, out
    assert re.search(r"kolo elastic: lost a worker \((PEER_LOST|TIMEOUT|ABORTED)\)", out), out
    assert "version 2: 2 worker(s): h0:0, h2:0" in out, out
    finished = re.findall(r"worker (\S+): rank (\d) of (\d) done: epochs (\d), parameters (\w+)", out)
    assert sorted(f[0] for f in finished) == ["h0:0", "h2:0"], out
    assert all(f[2] == "2" and f[3] == "3" for f in finished), out
    assert len({f[4] for f in finished}) == 1, out  # bit-identical weights
