"""Seed 2: function approximation, ensemble (no gradient averaging).

The same network and data as seed 1, but every rank trains a model of its
own on its own slice of x and nothing is averaged. Each member fits its
subinterval well and fails outside it: it never saw that data. Compare with
seed 1, where averaged gradients make one model learn every slice.

    tools/kolorun -np 2 .venv/bin/python examples/function_approximation_ensemble.py
"""
import torch

import kolo.torch as hvd
from function_approximation import target
from seed_common import column, evaluate, log, mlp, output_path, parse_args, rank_interval, save_plot, train


def main():
    args = parse_args(__doc__.splitlines()[0], steps=4000, lr=2e-3)
    hvd.init()
    torch.manual_seed(args.seed + hvd.rank())
    a, b = rank_interval(hvd.rank(), hvd.size())
    x = column(a, b, args.points)
    y = target(x)
    x_own = column(a, b, 101)
    x_all = column(-1, 1, 101)

    model = mlp(args.depth, args.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)  # one rank's data: no scaling
    _, initial_error = evaluate(model, x_own, target(x_own))
    timer = train(args, optimizer, lambda: torch.mean((model(x) - y) ** 2), ensemble=True)

    _, own_error = evaluate(model, x_own, target(x_own))
    prediction, whole_error = evaluate(model, x_all, target(x_all))
    # Every member reports; rank 0 prints them in order.
    reports = hvd.allgather_object((hvd.rank(), a, b, own_error, whole_error, initial_error))
    for r, lo, hi, own, whole, initial in reports:
        log("member %d on [%.2f, %.2f]: error on its subinterval %.4e (initial %.4e), on [-1, 1] %.4e"
            % (r, lo, hi, own, initial, whole))
    log("time per step: %.3f ms" % timer.mean_ms())
    log("final error: %.4e (initial %.4e), worst member's relative L2 on its own subinterval (101 points)"
        % (max(rep[3] for rep in reports), max(rep[5] for rep in reports)))
    predictions = hvd.allgather(prediction.reshape(1, -1), name="predictions")
    states = hvd.allgather_object(model.state_dict())
    if hvd.rank() == 0:
        save_plot(output_path(args, "function_approximation_ensemble.png"),
                  "ensemble of %d: each member knows only its slice" % hvd.size(),
                  x_all.squeeze(1), target(x_all).squeeze(1),
                  [("member %d (trained on [%.2f, %.2f])" % (r, lo, hi), predictions[r])
                   for r, lo, hi, *_ in reports])
        torch.save({"members": states, "step": args.steps}, output_path(args, "function_approximation_ensemble.pt"))


if __name__ == "__main__":
    main()
