"""A ResNet-style network trained data parallel with its gradients sent in
a wire format: the companion of docs/compression.md's training curves.

A small residual network (a stem, residual blocks of 3x3 convolutions,
and a wide classifier, so that its 8 M gradients cost more to send than to
compute) learns to classify synthetic 16x16 images (each class a fixed
random pattern, plus noise; the same data set on every rank, each rank its
own batches). --compression picks how the gradients travel (seed_common's
compression_of: none, bf16, int8+ef, ...); --curve writes the loss against
steps and seconds.

    tools/kolorun -np 4 .venv/bin/python examples/resnet_compression.py --compression int8+ef --curve int8.csv
"""
import torch
from torch import nn

import kolo.torch as hvd
from seed_common import data_parallel, log, parse_args, train


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
                                  nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels))

    def forward(self, x):
        return torch.relu(x + self.body(x))


def resnet(channels, blocks, classes, hidden):
    return nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
                         *[Block(channels) for _ in range(blocks)], nn.Flatten(),
                         nn.Linear(channels * 16 * 16, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def main():
    args = parse_args(__doc__.splitlines()[0], steps=120, lr=3e-4, extra=[
        (("--batch",), dict(type=int, default=32, help="images per rank per step (default %(default)s)")),
        (("--classes",), dict(type=int, default=10)),
        (("--channels",), dict(type=int, default=16)),
        (("--hidden",), dict(type=int, default=2048, help="classifier width (default %(default)s)"))])
    torch.set_num_threads(1)
    hvd.init()
    g = torch.Generator().manual_seed(args.seed)  # the same patterns on every rank
    patterns = torch.randn(args.classes, 3, 16, 16, generator=g)
    mine = torch.Generator().manual_seed(1000 + hvd.rank())
    torch.manual_seed(args.seed)
    model = resnet(args.channels, 2, args.classes, args.hidden)
    log("%d parameters, %s on the wire, %d ranks" % (sum(p.numel() for p in model.parameters()), args.compression,
                                                     hvd.size()))
    optimizer = data_parallel(model, args.lr, args.compression)
    loss_fn = nn.CrossEntropyLoss()

    def step_loss():
        labels = torch.randint(0, args.classes, (args.batch,), generator=mine)
        images = patterns[labels] + 4.0 * torch.randn(args.batch, 3, 16, 16, generator=mine)
        return loss_fn(model(images), labels)

    timer = train(args, optimizer, step_loss)
    log("time per step: %.1f ms" % timer.mean_ms())


if __name__ == "__main__":
    main()
