"""Seed 1: function approximation, data parallel.

A fully connected network fits y = sin(2 pi x) + sin(4 pi x) on [-1, 1].
Rank r of N trains on its own slice of x (the r-th of N subintervals), yet
the model learns the whole function: DistributedOptimizer averages the
gradients, so every step is a step on the union of the slices, and all
ranks hold the same model (initial parameters broadcast from rank 0). The
learning rate is scaled by N, as Horovod recommends.

    tools/kolorun -np 2 .venv/bin/python examples/function_approximation.py
"""
import math

import torch

import kolo.torch as hvd
from seed_common import (column, data_parallel, evaluate, log, mlp, output_path, parse_args, rank_interval, save_plot,
                         train)


def target(x):
    return torch.sin(2 * math.pi * x) + torch.sin(4 * math.pi * x)


def main():
    args = parse_args(__doc__.splitlines()[0], steps=4000, lr=2e-3)
    hvd.init()
    torch.manual_seed(args.seed + hvd.rank())  # different on purpose: the broadcast must make them equal
    a, b = rank_interval(hvd.rank(), hvd.size())
    x = column(a, b, args.points)
    y = target(x)
    x_eval = column(-1, 1, 101)
    y_eval = target(x_eval)

    model = mlp(args.depth, args.width)
    optimizer = data_parallel(model, args.lr, args.compression)

    _, initial_error = evaluate(model, x_eval, y_eval)
    log("rank slices: %s; %d points each" % (
        ", ".join("[%.2f, %.2f]" % rank_interval(r, hvd.size()) for r in range(hvd.size())), args.points))
    timer = train(args, optimizer, lambda: torch.mean((model(x) - y) ** 2))

    prediction, error = evaluate(model, x_eval, y_eval)
    log("time per step: %.3f ms" % timer.mean_ms())
    log("final error: %.4e (initial %.4e), relative L2 on linspace(-1, 1, 101)" % (error, initial_error))
    slices = hvd.allgather(torch.cat([x, y], dim=1), name="slices")
    if hvd.rank() == 0:
        save_plot(output_path(args, "function_approximation.png"),
                  "data parallel on %d ranks: relative L2 error %.2e" % (hvd.size(), error),
                  x_eval.squeeze(1), y_eval.squeeze(1), [("prediction", prediction.squeeze(1))],
                  [("training points (all ranks)", slices[:, 0], slices[:, 1])])
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": args.steps},
                   output_path(args, "function_approximation.pt"))


if __name__ == "__main__":
    main()
