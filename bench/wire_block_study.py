"""How the block size of the 8-bit wire formats trades error for bytes
(collectives/wire_format.h's kWireBlock): one int8 encoding, scaled per
block by its largest magnitude / 126, of the real gradients of the
ResNet-style example (examples/resnet_compression.py) at initialisation,
for blocks of 32 to 4096 elements. An independent model of the format in
numpy, not kolo's kernels.

    PYTHONPATH=bindings/python .venv/bin/python bench/wire_block_study.py
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from resnet_compression import resnet  # noqa: E402


def gradients():
    torch.manual_seed(0)
    model = resnet(16, 2, 10, 2048)
    g = torch.Generator().manual_seed(0)
    patterns = torch.randn(10, 3, 16, 16, generator=g)
    labels = torch.randint(0, 10, (32,), generator=g)
    images = patterns[labels] + 4 * torch.randn(32, 3, 16, 16, generator=g)
    torch.nn.CrossEntropyLoss()(model(images), labels).backward()
    return [p.grad.detach().reshape(-1).numpy().astype(np.float64) for p in model.parameters()]


def int8(v, block):
    """Each message (here each tensor) cut into blocks from its start, as kolo does."""
    out = np.zeros_like(v)
    for s in range(0, len(v), block):
        b = v[s:s + block]
        largest = np.abs(b).max()
        if largest > 0:
            scale = largest / 126
            out[s:s + block] = np.clip(np.round(b / scale), -126, 126) * scale
    return out


def main():
    grads = gradients()
    print("%d gradient elements" % sum(len(v) for v in grads))
    print("| block | bytes per element | relative L2 error | mean relative error |")
    print("| --- | --- | --- | --- |")
    for block in [32, 64, 128, 256, 512, 1024, 4096]:
        err2 = total2 = 0.0
        relative = []
        for v in grads:
            q = int8(v, block)
            err2 += ((q - v) ** 2).sum()
            total2 += (v ** 2).sum()
            nonzero = v != 0
            relative.append(np.abs(q[nonzero] - v[nonzero]) / np.abs(v[nonzero]))
        print("| %d | %.3f | %.1e | %.1e |" % (block, 1 + 4 / block, (err2 / total2) ** 0.5,
                                              np.concatenate(relative).mean()))


if __name__ == "__main__":
    main()
