"""The JAX twins of the seed examples (examples/jax) on 2 ranks through
kolorun: each finishes with its error fallen, rank 0 alone prints the loss
and writes the plot, each model is saved once; data parallel equals one
process on the same points (--as-ranks 2) to float32 rounding; the
ensembles train one model per process set. (Run as one process: it starts
the jobs itself.)"""
import os

import pytest

import test_tensorflow_examples as examples
from test_tensorflow_examples import REPO, final_and_initial, losses

EXAMPLES = os.path.join(REPO, "examples", "jax")


def run(script, folder, steps, ranks=2, options=()):
    return examples.run(script, folder, steps, ranks, options, examples=EXAMPLES)


@pytest.mark.parametrize("script", ["function_approximation_jax.py", "pinn_jax.py"])
def test_data_parallel_trains_and_equals_one_process_on_the_same_points(script, tmp_path):
    out = run(script, tmp_path / "parallel", 300, 2, ["--log-every", "10"])
    final, initial = final_and_initial(out)
    assert final < 0.8 * initial, out
    assert not any(line.startswith("[1] step") for line in out.splitlines()), "only rank 0 prints"
    stem = script[:-3]
    assert sorted(os.listdir(tmp_path / "parallel")) == [stem + ".npz", stem + ".png"]
    # The PINN's residual loss amplifies float32 rounding after a few dozen
    # Adam steps (as reordering a sum in one process does): its first 40.
    steps = 40 if "pinn" in script else 300
    alone = run(script, tmp_path / "alone", steps, 0, ["--log-every", "10", "--as-ranks", "2"])
    got, want = losses(out)[:steps // 10], losses(alone)
    assert [s for s, _ in got] == [s for s, _ in want] and got, (out, alone)
    for (_, a), (_, b) in zip(got, want):
        assert a == pytest.approx(b, rel=1e-4), (out, alone)


def test_ensemble_of_process_sets(tmp_path):
    out = run("function_approximation_jax.py", tmp_path, 300, 2, ["--ensemble"])
    final, initial = final_and_initial(out)
    assert final < 0.8 * initial, out
    assert len([line for line in out.splitlines() if line.startswith("[0] member ")]) == 2, out
    assert sorted(os.listdir(tmp_path)) == ["function_approximation_jax.png", "function_approximation_jax_member0.npz",
                                            "function_approximation_jax_member1.npz"]
