"""Seed 4: PINN ensemble: each rank solves a problem of its own.

Rank r solves -u'' = f_r on [-1, 1] with u(-1) = u(1) = 0 and
f_r = (k pi)^2 sin(k pi x), k = r + 1 (on 2 ranks: pi^2 sin(pi x) and
4 pi^2 sin(2 pi x)), whose exact solution is sin(k pi x). Nothing is
averaged: kolo only gathers the results. Each rank reports its relative L2
error against its exact solution on 101 points.

    tools/kolorun -np 2 /usr/bin/python3 examples/pinn_ensemble.py
"""
import math

import torch

import kolo.torch as hvd
from pinn import pinn_loss
from seed_common import StepTimer, column, log, mlp, output_path, parse_args, relative_l2, save_plot


def forcing_text(k):
    """f_k written out: "pi^2 sin(pi x)", "4 pi^2 sin(2 pi x)"..."""
    return "pi^2 sin(pi x)" if k == 1 else "%d pi^2 sin(%d pi x)" % (k * k, k)


def main():
    args = parse_args(__doc__.splitlines()[0], steps=3000, lr=2e-3, depth=2, width=32, points=51,
                      extra=[(("--boundary-weight",), dict(type=float, default=100.0,
                                                           help="weight of the boundary term (default %(default)s)"))])
    hvd.init()
    torch.manual_seed(args.seed + hvd.rank())
    k = (hvd.rank() + 1) * math.pi

    def forcing(x):
        return k * k * torch.sin(k * x)

    x = column(-1, 1, args.points)
    x_eval = column(-1, 1, 101)
    exact = torch.sin(k * x_eval)

    model = mlp(args.depth, args.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    with torch.no_grad():
        initial_error = relative_l2(model(x_eval), exact)
    timer = StepTimer()
    for step in range(1, args.steps + 1):
        timer.begin()
        optimizer.zero_grad()
        loss = pinn_loss(model, x, forcing, args.boundary_weight)
        loss.backward()
        optimizer.step()
        timer.end()
        if step % args.log_every == 0 or step == args.steps:
            losses = hvd.allgather(loss.detach().reshape(1), name="losses")
            log("step %5d  loss per member %s" % (step, " ".join("%.3e" % v for v in losses.tolist())))

    with torch.no_grad():
        prediction = model(x_eval)
    error = relative_l2(prediction, exact)
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
