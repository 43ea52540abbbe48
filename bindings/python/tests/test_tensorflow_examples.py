"""The TensorFlow and Keras twins of the seed examples (examples/tensorflow),
data parallel and as ensembles of process sets, on 2 and 4 ranks through
kolorun: each must finish with its error fallen, rank 0 alone prints the
loss and writes the plot, each model is saved once; a data-parallel run
equals one process on the same points (--as-ranks) to float32 rounding.
And the Keras 2 program Horovod's tutorial teaches with (keras2_mnist.py).
(Run as one process: it starts the jobs itself.)"""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KOLORUN = os.path.join(REPO, "tools", "kolorun")
EXAMPLES = os.path.join(REPO, "examples", "tensorflow")
TWINS = ["function_approximation_tf1.py", "function_approximation_keras.py", "pinn_tf1.py", "pinn_keras.py"]


def run(script, folder, steps, ranks=2, options=(), env=None, examples=EXAMPLES):
    """The example's output (examples: its folder); ranks=0 runs it as one
    process, without kolorun."""
    command = [sys.executable, os.path.join(examples, script), "--steps", str(steps), "--output-dir",
               str(folder)] + list(options)
    if ranks:
        command = [sys.executable, KOLORUN, "-np", str(ranks), "--timeout", "240"] + command
    environ = dict(os.environ, **(env or {}))
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                          env=environ)
    assert done.returncode == 0, done.stdout
    return done.stdout


def final_and_initial(output):
    m = re.search(r"^(?:\[0\] )?final error: (\S+) \(initial (\S+)\)", output, re.M)
    assert m, output
    return float(m.group(1)), float(m.group(2))


def losses(output):
    return [(int(s), float(v)) for s, v in re.findall(r"^(?:\[0\] )?step +(\d+) +loss (\S+)$", output, re.M)]


def check_trained(out, folder, script, steps, members):
    """The error fell, the loss log ends at the last step on rank 0 alone,
    rank 0 wrote the plot and each model's first rank its checkpoint."""
    final, initial = final_and_initial(out)
    assert final < 0.8 * initial, out
    assert re.search(r"^\[0\] step +%d +loss" % steps, out, re.M), "the loss log ends at the last step"
    assert not re.search(r"^\[[1-9]\] (step|final)", out, re.M), "only rank 0 prints"
    if members > 1:
        assert len(re.findall(r"^\[0\] member \d on", out, re.M)) == members, out
    stem = script[:-3]
    names = sorted(os.listdir(folder))
    ext = "" if "tf1" in script else ".keras"
    models = [stem + ext] if members == 1 else [stem + "_member%d%s" % (m, ext) for m in range(members)]
    assert names == sorted([stem + ".png"] + models), names
    if "tf1" in script:
        for model in models:
            assert any(n.endswith(".index") for n in os.listdir(os.path.join(folder, model))), model


@pytest.mark.parametrize("script", TWINS)
def test_data_parallel_trains_and_equals_one_process_on_the_same_points(script, tmp_path):
    out = run(script, tmp_path / "parallel", 300, 2, ["--log-every", "10"])
    check_trained(out, tmp_path / "parallel", script, 300, 1)
    # The PINNs' residual loss amplifies float32 rounding after a few dozen
    # Adam steps (reordering a sum in one process does the same), so they
    # are compared over their first 40 steps, the function approximations
    # over all 300.
    steps = 40 if "pinn" in script else 300
    alone = run(script, tmp_path / "alone", steps, 0, ["--log-every", "10", "--as-ranks", "2"],
                env={"PYTHONPATH": os.path.join(REPO, "bindings", "python")})
    got, want = losses(out)[:steps // 10], losses(alone)
    assert [s for s, _ in got] == [s for s, _ in want] and got, (out, alone)
    for (_, a), (_, b) in zip(got, want):
        assert a == pytest.approx(b, rel=1e-4), (out, alone)
    if steps == 300:
        assert final_and_initial(out)[0] == pytest.approx(final_and_initial(alone)[0], rel=1e-4)


# The PINNs' ensembles (1000 steps each) are the extended set's: the
# function approximations' run the same process sets in the default one.
@pytest.mark.parametrize("script", [s if "pinn" not in s else pytest.param(s, marks=pytest.mark.extended)
                                    for s in TWINS])
def test_ensemble_of_process_sets(script, tmp_path):
    steps = 1000 if "pinn" in script else 300  # a PINN member alone needs more steps
    check_trained(run(script, tmp_path, steps, 2, ["--ensemble"]), tmp_path, script, steps, 2)


# More ranks of what runs on 2 above: the extended set.
@pytest.mark.extended
@pytest.mark.parametrize("script,options,members", [("function_approximation_tf1.py", [], 1),
                                                    ("function_approximation_keras.py",
                                                     ["--ensemble", "--members", "2"], 2),
                                                    ("pinn_keras.py", [], 1)])
def test_on_four_ranks(script, options, members, tmp_path):
    check_trained(run(script, tmp_path, 300, 4, options), tmp_path, script, 300, members)


def test_keras_example_on_the_torch_backend(tmp_path):
    out = run("function_approximation_keras.py", tmp_path, 300, 2, env={"KERAS_BACKEND": "torch"})
    check_trained(out, tmp_path, "function_approximation_keras.py", 300, 1)


# 4 ranks repeat what 2 show: the extended set.
@pytest.mark.parametrize("ranks", [2, pytest.param(4, marks=pytest.mark.extended)])
def test_the_tutorials_keras2_program(tmp_path, ranks):
    """The Keras program Horovod's tutorial teaches with, under tf_keras: it
    learns, every rank ends with the same weights, rank 0 alone writes the
    checkpoints."""
    data = tmp_path / "mnist.npz"
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "keras2_mnist.py"), "--make-data", str(data)], check=True)
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, KOLORUN, "-np", str(ranks), "--timeout", "240", sys.executable,
                           os.path.join(EXAMPLES, "keras2_mnist.py"), "--data", str(data), "--epochs", "2", "--steps",
                           "40", "--checkpoint-dir", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, env=dict(os.environ, TF_USE_LEGACY_KERAS="1"))
    assert done.returncode == 0, done.stdout
    found = re.findall(r"^\[(\d+)\] rank (\d+) of (\d+): loss (\S+), accuracy (\S+), weights' sha256 (\w+)$",
                       done.stdout, re.M)
    assert sorted(int(r) for r, *_ in found) == list(range(ranks)), done.stdout
    assert all(int(size) == ranks for _, _, size, *_ in found)
    assert len({digest for *_, digest in found}) == 1, found  # the same weights on every rank
    assert all(float(accuracy) > 0.5 for *_, accuracy, _ in found), found  # it learned (10 classes)
    assert sorted(os.listdir(out)) == ["checkpoint-1.h5", "checkpoint-2.h5"]
