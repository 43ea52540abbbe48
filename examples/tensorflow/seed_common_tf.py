"""What the TensorFlow, Keras and JAX twins of the seed examples share: the command
line (and the PINNs'), who trains which model on which points, the error measure, the loss
log, and the plot.

Data parallel (the default): one model, every rank a slice of the points,
gradients averaged over all ranks, the learning rate scaled by their
number. Ensemble (--ensemble): --members models (default: one per rank),
each a process set of ranks that trains its own model, data parallel
within the set, on its own subinterval of [-1, 1]; nothing is averaged
between members. --as-ranks N runs one process on the points N ranks would
share (and their learning rate): the reference a data-parallel run must
match.
"""
import argparse
import math
import os
import time

import numpy as np

import kolo

TWO_PI = 2 * math.pi


def parse_args(description, steps, lr, depth=2, width=16, points=16, extra=()):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps, help="training steps (default %(default)s)")
    p.add_argument("--lr", type=float, default=lr, help="Adam learning rate for one rank (default %(default)s)")
    p.add_argument("--depth", type=int, default=depth, help="hidden layers (default %(default)s)")
    p.add_argument("--width", type=int, default=width, help="units per hidden layer (default %(default)s)")
    p.add_argument("--points", type=int, default=points, help="training points per rank (default %(default)s)")
    p.add_argument("--ensemble", action="store_true", help="train an ensemble of models (process sets)")
    p.add_argument("--members", type=int, default=0, help="ensemble members (default: one per rank)")
    p.add_argument("--as-ranks", type=int, default=0, help="one process on the points of N ranks (reference)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=0, help="print the loss every N steps (default: 20 lines)")
    p.add_argument("--output-dir", default=".", help="where rank 0 writes the plot and the checkpoint")
    for args, kwargs in extra:
        p.add_argument(*args, **kwargs)
    a = p.parse_args()
    if a.log_every <= 0:
        a.log_every = max(1, a.steps // 20)
    if a.as_ranks and a.ensemble:
        p.error("--as-ranks is the reference of a data-parallel run, not of an ensemble")
    return a


def interval(index, count, lo=-1.0, hi=1.0):
    """The index-th of count equal subintervals of [lo, hi]."""
    step = (hi - lo) / count
    return lo + index * step, lo + (index + 1) * step


def column(a, b, n):
    return np.linspace(a, b, n, dtype=np.float32)[:, None]


class Layout:
    """Who trains what. `process_set` is this rank's member (the global set
    for data parallel); `x_train` its training points; `lr` the learning
    rate scaled by the ranks that share a model; [lo, hi] the member's
    domain: its subinterval of [-1, 1], or with split=False all of it (each
    member then solves a problem of its own)."""

    def __init__(self, hvd, args, split=True):
        size, rank = hvd.size(), hvd.rank()
        self.members = (args.members or size) if args.ensemble else 1
        if size % self.members:
            raise SystemExit("--members %d does not divide %d ranks" % (self.members, size))
        per_member = size // self.members
        self.member = rank // per_member
        self.process_set = hvd.global_process_set
        if args.ensemble:
            sets = [hvd.ProcessSet(list(range(m * per_member, (m + 1) * per_member))) for m in range(self.members)]
            for ps in sets:
                hvd.add_process_set(ps)
            self.process_set = sets[self.member]
        self.root = self.member * per_member  # the member's first rank: its initial model goes to the others
        self.lo, self.hi = interval(self.member, self.members) if split else (-1.0, 1.0)
        sharing = args.as_ranks or per_member
        parts = range(sharing) if args.as_ranks else [rank - self.root]
        self.x_train = np.concatenate([column(*interval(i, sharing, self.lo, self.hi), args.points) for i in parts])
        self.lr = args.lr * sharing


def relative_l2(prediction, truth):
    return float(np.linalg.norm(prediction - truth) / np.linalg.norm(truth))


class StepTimer:
    """Mean wall time per step, leaving out the first few (warm-up)."""

    def __init__(self, warmup=5):
        self.warmup, self.count, self.total, self.start = warmup, 0, 0.0, None

    def begin(self):
        self.start = time.perf_counter()

    def end(self):
        self.count += 1
        if self.count > self.warmup:
            self.total += time.perf_counter() - self.start

    def mean_ms(self):
        timed = self.count - self.warmup
        return 1e3 * self.total / timed if timed > 0 else float("nan")


def log(message):
    """One line from rank 0."""
    if kolo.rank() == 0:
        print(message, flush=True)


def log_loss(step, loss, layout):
    """The loss of each model: its ranks' mean (data parallel: the loss on
    the union of their points). Every rank must call it."""
    per_rank = kolo.allgather(np.array([loss], dtype=np.float64), name="loss.%d" % step)
    sets = kolo.size() // layout.members
    means = [per_rank[m * sets:(m + 1) * sets].mean() for m in range(layout.members)]
    if layout.members == 1:
        log("step %5d  loss %.9e" % (step, means[0]))
    else:
        log("step %5d  loss per member %s" % (step, " ".join("%.3e" % v for v in means)))


def report(layout, evaluate, initial_error, steps_timer):
    """The final lines, from rank 0: each model's relative L2 error on its
    subinterval (and, for an ensemble, on [-1, 1]); `final error` is the
    worst model's on its subinterval. evaluate(x) -> (prediction, relative
    L2 error against the truth). Every rank must call it. Returns x on
    [-1, 1] and every member's prediction there."""
    own_error = evaluate(column(layout.lo, layout.hi, 101))[1]
    x_all = column(-1, 1, 101)
    prediction, whole_error = evaluate(x_all)
    reports = {}
    for member, error, whole, initial, pred in kolo.allgather_object(
            (layout.member, own_error, whole_error, initial_error, prediction)):
        reports.setdefault(member, (error, whole, initial, pred))
    if layout.members > 1:
        for m, (error, whole, initial, _) in sorted(reports.items()):
            lo, hi = interval(m, layout.members) if layout.hi - layout.lo < 2 else (-1.0, 1.0)
            log("member %d on [%.2f, %.2f]: error on its subinterval %.4e (initial %.4e), on [-1, 1] %.4e" % (
                m, lo, hi, error, initial, whole))
    log("time per step: %.3f ms on %d ranks" % (steps_timer.mean_ms(), kolo.size()))
    log("final error: %.9e (initial %.4e), relative L2 on each model's subinterval (101 points)" % (
        max(r[0] for r in reports.values()), max(r[2] for r in reports.values())))
    return x_all, [reports[m][3] for m in range(layout.members)]


def save_plot(path, title, x, truth, curves):
    """Truth and (label, prediction) curves on x; rank 0 calls it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    if truth is not None:
        ax.plot(x, truth, "k-", lw=2, label="truth")
    for label, y in curves:
        ax.plot(x, y, "--", label=label)
    ax.set_title(title)
    ax.set_xlabel("x")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_pinn(args, layout, name, style, k, x_all, predictions):
    """Rank 0's plot of a PINN run: the prediction against sin(k x), or
    every member's (each solves its own problem)."""
    if layout.members > 1:
        curves = [("member %d, k = %d pi" % (m, m + 1), p[:, 0]) for m, p in enumerate(predictions)]
        truth = None
    else:
        curves, truth = [("prediction", predictions[0][:, 0])], np.sin(k * x_all)[:, 0]
    save_plot(output_path(args, name), "%s PINN %s on %d ranks" % (
        style, "ensemble" if layout.members > 1 else "data parallel", kolo.size()), x_all[:, 0], truth, curves)


def output_path(args, name):
    os.makedirs(args.output_dir, exist_ok=True)
    return os.path.join(args.output_dir, name)


def pinn_args(description):
    """The command line of both PINN twins."""
    return parse_args(description, steps=3000, lr=2e-3, depth=2, width=32, points=51,
                      extra=[(("--boundary-weight",), dict(type=float, default=100.0,
                                                           help="weight of the boundary term (default %(default)s)"))])


def wave_number(args, layout):
    """k of the member's problem: 2 pi data parallel, (m + 1) pi for member m."""
    return (layout.member + 1) * math.pi if args.ensemble else 2 * math.pi
