"""Each seed example, a few hundred steps on 2 ranks through kolorun: it
must finish, its error must fall, and rank 0 alone writes the plot and the
checkpoint. Then a Horovod-style training script whose only change is its
import. (Run as one process: it starts the jobs itself.)"""
import os
import re
import subprocess
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KOLORUN = os.path.join(REPO, "tools", "kolorun")


def run_example(script, tmp_path, steps, ranks=2):
    cmd = [sys.executable, KOLORUN, "-np", str(ranks), "--timeout", "240", sys.executable,
           os.path.join(REPO, "examples", script), "--steps", str(steps), "--output-dir", str(tmp_path)]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert done.returncode == 0, done.stdout
    return done.stdout


def final_and_initial(output):
    m = re.search(r"^\[0\] final error: (\S+) \(initial (\S+)\)", output, re.M)
    assert m, output
    return float(m.group(1)), float(m.group(2))


@pytest.mark.parametrize("script,steps", [("function_approximation.py", 300), ("pinn.py", 300)])
def test_data_parallel_example(script, tmp_path, steps):
    out = run_example(script, tmp_path, steps)
    final, initial = final_and_initial(out)
    assert final < 0.8 * initial, out
    stem = script[:-3]
    assert sorted(os.listdir(tmp_path)) == [stem + ".png", stem + ".pt"]
    checkpoint = torch.load(os.path.join(tmp_path, stem + ".pt"))
    assert checkpoint["step"] == steps and "model" in checkpoint
    assert re.search(r"^\[0\] step +%d +loss" % steps, out, re.M), "the loss curve ends at the last step"
    assert not re.search(r"^\[1\] (step|final)", out, re.M), "only rank 0 prints the curve"


@pytest.mark.parametrize("script,steps", [("function_approximation_ensemble.py", 300), ("pinn_ensemble.py", 300)])
def test_ensemble_example(script, tmp_path, steps):
    out = run_example(script, tmp_path, steps)
    members = re.findall(r"^\[0\] member (\d).*?error (?:on its subinterval )?(\S+) \(initial (\S+)\)", out, re.M)
    assert [int(m[0]) for m in members] == [0, 1], out
    for _, error, initial in members:
        assert float(error) < 0.8 * float(initial), out
    stem = script[:-3]
    assert sorted(os.listdir(tmp_path)) == [stem + ".png", stem + ".pt"]
    assert len(torch.load(os.path.join(tmp_path, stem + ".pt"))["members"]) == 2


def test_process_set_example_trains_two_models_at_once(tmp_path):
    out = run_example("process_set_ensemble.py", tmp_path, 600, ranks=4)
    groups = re.findall(r"^\[0\] group (\d) \(ranks \[(.*?)\].*error (\S+) \(initial (\S+)\), members identical: (\w+)",
                        out, re.M)
    assert [(g, ranks) for g, ranks, *_ in groups] == [("0", "0, 1"), ("1", "2, 3")], out
    for _, _, error, initial, identical in groups:
        assert float(error) < 0.5 * float(initial) and identical == "True", out


@pytest.mark.parametrize("options", [[], ["--fp16-allreduce", "--gradient-predivide-factor", "2"]])
def test_a_horovod_script_runs_after_changing_its_import(options):
    script = os.path.join(REPO, "bindings", "python", "tests", "scripts", "horovod_style_training.py")
    cmd = [sys.executable, KOLORUN, "-np", "2", "--timeout", "240", sys.executable, script] + options
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert done.returncode == 0, done.stdout
    finals = re.findall(r"final rank (\d): accuracy (\S+) \(before training (\S+)\) checksum (\S+)", done.stdout)
    assert sorted(int(f[0]) for f in finals) == [0, 1], done.stdout
    for _, after, before, _ in finals:
        assert float(after) > 0.5 and float(after) > 2 * float(before), done.stdout
    assert finals[0][3] == finals[1][3], "both ranks hold the same model"
