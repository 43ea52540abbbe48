"""Seed 3: physics-informed network (PINN), data parallel.

Solves -u'' = f on [-1, 1] with f = 4 pi^2 sin(2 pi x) and u(-1) = u(1) = 0
(exact solution u = sin(2 pi x)) without any samples of u: the loss is the
mean squared residual of the equation at collocation points, with u''
taken by autograd, plus the boundary conditions. The collocation points are
split across ranks (rank r takes the r-th subinterval); DistributedOptimizer
averages the gradients, so all ranks train one model on all the points.

    tools/kolorun -np 2 .venv/bin/python examples/pinn.py
"""
import math

import torch

import kolo.torch as hvd
from seed_common import (column, data_parallel, evaluate, log, mlp, output_path, parse_args, rank_interval, save_plot,
                         train)


def pinn_args(description):
    """The command line of both PINN seeds."""
    return parse_args(description, steps=3000, lr=2e-3, depth=2, width=32, points=51,
                      extra=[(("--boundary-weight",), dict(type=float, default=100.0,
                                                           help="weight of the boundary term (default %(default)s)"))])


def sine_problem(k):
    """-u'' = f with f(x) = k^2 sin(k x) and u(+-1) = 0, for k a multiple of
    pi: the forcing f and the exact solution sin(k x)."""
    return (lambda x: k * k * torch.sin(k * x)), (lambda x: torch.sin(k * x))


def residual(model, x, forcing):
    """-u''(x) - f(x), differentiating the network twice."""
    x = x.clone().requires_grad_(True)
    u = model(x)
    du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
    d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
    return -d2u - forcing(x)


def pinn_loss(model, x, forcing, boundary_weight):
    """Mean squared residual at x, plus the weighted squared boundary values."""
    boundary = model(torch.tensor([[-1.0], [1.0]]))
    return torch.mean(residual(model, x, forcing) ** 2) + boundary_weight * torch.mean(boundary ** 2)


def main():
    args = pinn_args(__doc__.splitlines()[0])
    hvd.init()
    torch.manual_seed(args.seed)
    forcing, solution = sine_problem(2 * math.pi)
    a, b = rank_interval(hvd.rank(), hvd.size())
    x = column(a, b, args.points)
    x_eval = column(-1, 1, 201)
    exact = solution(x_eval)

    model = mlp(args.depth, args.width)
    optimizer = data_parallel(model, args.lr, args.compression)

    _, initial_error = evaluate(model, x_eval, exact)
    timer = train(args, optimizer, lambda: pinn_loss(model, x, forcing, args.boundary_weight))

    prediction, error = evaluate(model, x_eval, exact)
    log("time per step: %.3f ms on %d ranks" % (timer.mean_ms(), hvd.size()))
    log("final error: %.4e (initial %.4e), relative L2 against sin(2 pi x) on 201 points" % (error, initial_error))
    if hvd.rank() == 0:
        save_plot(output_path(args, "pinn.png"),
                  "PINN, data parallel on %d ranks: relative L2 error %.2e" % (hvd.size(), error),
                  x_eval.squeeze(1), exact.squeeze(1), [("prediction", prediction.squeeze(1))])
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": args.steps},
                   output_path(args, "pinn.pt"))


if __name__ == "__main__":
    main()
