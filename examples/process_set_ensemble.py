"""Two models trained at once in one job, each data parallel within its own
process set.

The ranks split into two groups (the first half and the second half); each
group is a process set. Group g fits its own target (sin((g + 1) pi x) on
[-1, 1]) with one model whose gradients are averaged among the group's
ranks only: DistributedOptimizer(process_set=...). Each rank trains on its
slice of [-1, 1] (slices of the group's ranks cover the interval), so each
group's model learns the whole target, while the other group's operations
run concurrently on their own communicator. At the end every group's
members hold identical parameters, and rank 0 prints each group's error.

    tools/kolorun -np 4 .venv/bin/python examples/process_set_ensemble.py
"""
import math

import torch

import kolo.torch as hvd
from seed_common import column, evaluate, log, mlp, parse_args, rank_interval, train


def target(x, group):
    return torch.sin((group + 1) * math.pi * x)


def main():
    args = parse_args(__doc__.splitlines()[0], steps=2000, lr=2e-3)
    hvd.init()
    n = hvd.size()
    halves = [list(range(0, max(1, n // 2))), list(range(max(1, n // 2), n))]
    sets = [hvd.add_process_set(ranks) for ranks in halves if ranks]  # collective: every rank adds both
    group = 0 if hvd.rank() in halves[0] else 1
    my_set = sets[group]
    torch.manual_seed(args.seed + group)  # the members of a group start alike
    a, b = rank_interval(my_set.rank(), my_set.size())
    x = column(a, b, args.points)
    y = target(x, group)

    model = mlp(args.depth, args.width)
    optimizer = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=args.lr * my_set.size()),
                                         named_parameters=model.named_parameters(), process_set=my_set)
    hvd.broadcast_parameters(model.state_dict(), root_rank=my_set.ranks[0], process_set=my_set)
    x_all = column(-1, 1, 101)
    _, initial = evaluate(model, x_all, target(x_all, group))
    train(args, optimizer, lambda: torch.mean((model(x) - y) ** 2), ensemble=True)
    _, error = evaluate(model, x_all, target(x_all, group))

    # Members of a group must agree exactly; report per group through the world.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    same = all(torch.equal(flat, other) for other in hvd.allgather(flat.unsqueeze(0), process_set=my_set))
    reports = hvd.allgather_object((hvd.rank(), group, error, initial, same))
    for g, ps in enumerate(sets):
        mine = [rep for rep in reports if rep[1] == g]
        log("group %d (ranks %s, target sin(%d pi x)): error %.4e (initial %.4e), members identical: %s"
            % (g, ps.ranks, g + 1, mine[0][2], mine[0][3], all(rep[4] for rep in mine)))
    for ps in sets:
        hvd.remove_process_set(ps)


if __name__ == "__main__":
    main()
