"""Draws bench/compression_training.sh's curves: for the ResNet-style
example and the function-approximation seed, the loss against wall-clock
seconds and against steps, one line per compression.

    python bench/plot_training_curves.py OUT_DIR TITLE MODE...
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return ([int(r["step"]) for r in rows], [float(r["seconds"]) for r in rows], [float(r["loss"]) for r in rows])


def main():
    out, title, modes = sys.argv[1], sys.argv[2], sys.argv[3:]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for row, (model, name) in enumerate([("resnet", "ResNet-style, 8.4 M parameters"),
                                         ("seed", "function approximation (seed 1)")]):
        for mode in modes:
            path = os.path.join(out, "%s_%s.csv" % (model, mode.replace("+", "_")))
            if not os.path.exists(path):
                continue
            steps, seconds, loss = read(path)
            label = {"none": "float32 (none)", "int8+ef": "int8 + error feedback"}.get(mode, mode)
            axes[row][0].plot(seconds, loss, label=label)
            axes[row][1].plot(steps, loss, label=label)
        for col, x in enumerate(["seconds", "steps"]):
            ax = axes[row][col]
            ax.set_yscale("log")
            ax.set_xlabel(x)
            ax.set_ylabel("loss")
            ax.set_title("%s: loss against %s" % (name, x))
            ax.grid(True, alpha=0.3)
            ax.legend()
    fig.suptitle("kolo wire formats, %s" % title)
    fig.tight_layout()
    path = os.path.join(out, "training_curves.png")
    fig.savefig(path, dpi=100)
    print(path)


if __name__ == "__main__":
    main()
