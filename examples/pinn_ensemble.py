"""Seed 4: PINN ensemble: each rank solves a problem of its own.

Rank r solves -u'' = f_r on [-1, 1] with u(-1) = u(1) = 0 and
f_r = (k pi)^2 sin(k pi x), k = r + 1 (on 2 ranks: pi^2 sin(pi x) and
4 pi^2 sin(2 pi x)), whose exact solution is sin(k pi x). Nothing is
averaged: kolo only gathers the results. Each rank reports its relative L2
error against its exact solution on 101 points.

    tools/kolorun -np 2 .venv/bin/python examples/pinn_ensemble.py
"""
import math

import torch

import kolo.torch as hvd
from pinn import pinn_args, pinn_loss, sine_problem
from seed_common import column, evaluate, log, mlp, output_path, save_plot, train


def forcing_text(k):
    """f_k written out: "pi^2 sin(pi x)", "4 pi^2 sin(2 pi x)"..."""
    return "pi^2 sin(pi x)" if k == 1 else "%d pi^2 sin(%d pi x)" % (k * k, k)


def main():
    args = pinn_args(__doc__.splitlines()[0])
    hvd.init()
    torch.manual_seed(args.seed + hvd.rank())
    forcing, solution = sine_problem((hvd.rank() + 1) * math.pi)
    x = column(-1, 1, args.points)
    x_eval = column(-1, 1, 101)
    exact = solution(x_eval)

    model = mlp(args.depth, args.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    _, initial_error = evaluate(model, x_eval, exact)
    timer = train(args, optimizer, lambda: pinn_loss(model, x, forcing, args.boundary_weight), ensemble=True)

    prediction, error = evaluate(model, x_eval, exact)
    reports = hvd.allgather_object((hvd.rank(), hvd.rank() + 1, error, initial_error))
    for r, kk, err, initial in reports:
        log("member %d (f = %s): error %.4e (initial %.4e)" % (r, forcing_text(kk), err, initial))
    log("time per step: %.3f ms" % timer.mean_ms())
    log("final error: %.4e (initial %.4e), worst member's relative L2 on 101 points"
        % (max(rep[2] for rep in reports), max(rep[3] for rep in reports)))
    predictions = hvd.allgather(prediction.reshape(1, -1), name="predictions")
    exacts = hvd.allgather(exact.reshape(1, -1), name="exacts")
    states = hvd.allgather_object(model.state_dict())
    if hvd.rank() == 0:
        curves = []
        for r, kk, err, _ in reports:
            curves += [("member %d: exact sin(%d pi x)" % (r, kk), exacts[r]),
                       ("member %d: PINN (error %.1e)" % (r, err), predictions[r])]
        save_plot(output_path(args, "pinn_ensemble.png"), "PINN ensemble of %d problems" % hvd.size(),
                  x_eval.squeeze(1), None, curves)
        torch.save({"members": states, "step": args.steps}, output_path(args, "pinn_ensemble.pt"))


if __name__ == "__main__":
    main()
