"""What the four seed examples share: the network, the command line, the
slice of [-1, 1] a rank owns, the error measure, the plot and the log."""
import argparse
import math
import os
import time

import torch

import kolo.torch as hvd


def parse_args(description, steps, lr, depth=2, width=16, points=16, extra=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps, help="training steps (default %(default)s)")
    p.add_argument("--lr", type=float, default=lr, help="Adam learning rate for one rank (default %(default)s)")
    p.add_argument("--depth", type=int, default=depth, help="hidden layers (default %(default)s)")
    p.add_argument("--width", type=int, default=width, help="units per hidden layer (default %(default)s)")
    p.add_argument("--points", type=int, default=points, help="training points per rank (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=0, help="print the loss every N steps (default: 20 lines)")
    p.add_argument("--output-dir", default=".", help="where rank 0 writes the plot and the checkpoint")
    p.add_argument("--compression", default="none",
                   help="the gradients' allreduce: none, fp16 (Horovod's cast), or a wire format (bf16, fp16_wire, "
                        "fp8_e4m3, fp8_e5m2, int8), with +ef for error feedback, e.g. int8+ef")
    p.add_argument("--curve", default="", help="rank 0 writes step, seconds and loss at each logged step here (CSV)")
    for args, kwargs in extra or []:
        p.add_argument(*args, **kwargs)
    a = p.parse_args()
    if a.log_every <= 0:
        a.log_every = max(1, a.steps // 20)
    return a


def mlp(depth, width):
    """x -> u: `depth` tanh layers of `width` units (smooth, so the PINNs
    can differentiate it twice)."""
    layers, n_in = [], 1
    for _ in range(depth):
        layers += [torch.nn.Linear(n_in, width), torch.nn.Tanh()]
        n_in = width
    layers.append(torch.nn.Linear(n_in, 1))
    return torch.nn.Sequential(*layers)


def rank_interval(rank, size, lo=-1.0, hi=1.0):
    """Rank r of N owns the r-th of N equal subintervals of [lo, hi]."""
    step = (hi - lo) / size
    return lo + rank * step, lo + (rank + 1) * step


def column(a, b, n):
    return torch.linspace(a, b, n, dtype=torch.float32).unsqueeze(1)


def relative_l2(pred, truth):
    """||pred - truth|| / ||truth|| over the evaluation points."""
    return (torch.linalg.norm(pred - truth) / torch.linalg.norm(truth)).item()


def evaluate(model, x, truth):
    """The model's prediction on x (no gradients) and its relative L2 error
    against truth."""
    with torch.no_grad():
        prediction = model(x)
    return prediction, relative_l2(prediction, truth)


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


def save_plot(path, title, x, truth, curves, points=()):
    """Truth (if not None) and curves ((label, y on x) pairs); `points` are (label, x, y)
    scatters of training data. Written by rank 0 only."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    if truth is not None:
        ax.plot(x, truth, "k-", lw=2, label="truth")
    for label, y in curves:
        ax.plot(x, y, "--", label=label)
    for label, px, py in points:
        ax.plot(px, py, "o", ms=3, label=label)
    ax.set_title(title)
    ax.set_xlabel("x")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def compression_of(name):
    """--compression's Compression class: "none", "fp16" (Horovod's cast), or
    a wire format ("fp16_wire" for fp16 on the wire), "+ef" for error
    feedback."""
    if name in ("none", "fp16"):
        return getattr(hvd.Compression, name)
    wire, _, feedback = name.partition("+")
    if feedback not in ("", "ef"):
        raise SystemExit("--compression %s: the suffix is +ef (error feedback)" % name)
    return hvd.Compression.wire("fp16" if wire == "fp16_wire" else wire, error_feedback=feedback == "ef")


def data_parallel(model, lr, compression="none"):
    """Horovod's recipe: Adam at `lr` x N (N ranks' data per step), the
    parameters and optimizer state broadcast from rank 0 so every rank starts
    alike, and a DistributedOptimizer that averages the gradients (sent as
    `compression` says, compression_of)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr * hvd.size())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    return hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                    compression=compression_of(compression))


def train(args, optimizer, loss_fn, ensemble=False):
    """`args.steps` steps of `optimizer` on `loss_fn()`; returns the StepTimer.
    Every `args.log_every` steps and at the last, rank 0 logs the loss: the
    mean of the ranks' losses (data parallel: the loss on the union of their
    slices), or with `ensemble` each member's. Every rank must call it."""
    timer = StepTimer()
    curve = open(args.curve, "w") if getattr(args, "curve", "") and hvd.rank() == 0 else None
    if curve:
        curve.write("step,seconds,loss\n")
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        timer.begin()
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        timer.end()
        if step % args.log_every == 0 or step == args.steps:
            if ensemble:
                losses = hvd.allgather(loss.detach().reshape(1), name="losses")
                log("step %5d  loss per member %s" % (step, " ".join("%.3e" % v for v in losses.tolist())))
            else:
                mean = hvd.allreduce(loss.detach(), name="loss").item()
                log("step %5d  loss %.3e" % (step, mean))
                if curve:
                    curve.write("%d,%.4f,%.6e\n" % (step, time.perf_counter() - start, mean))
    if curve:
        curve.close()
    return timer


def output_path(args, name):
    os.makedirs(args.output_dir, exist_ok=True)
    return os.path.join(args.output_dir, name)


def log(message):
    """One line from rank 0."""
    if hvd.rank() == 0:
        print(message, flush=True)


TWO_PI = 2 * math.pi
