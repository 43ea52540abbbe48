"""PyTorch Lightning's Trainer with DDPStrategy(process_group_backend=BACKEND)
on the CPU, as its users start it: under torchrun, or under srun through
Lightning's own Slurm detection. Trains a small regression for 2 epochs on
a fixed data set (Lightning's DistributedSampler shards it) and has rank 0
save the weights to OUT, for the caller to compare kolo's with gloo's:

    lightning_train.py BACKEND DEVICES OUT

Prints "lightning rank R of N on BACKEND ok".
"""
import sys

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset

import kolo.torch  # noqa: F401  (registers backend "kolo")

backend, devices, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


g = torch.Generator().manual_seed(1)
x = torch.randn(256, 8, generator=g)
data = TensorDataset(x, x.sum(1, keepdim=True).sin())
model = Regression()
trainer = L.Trainer(strategy=DDPStrategy(process_group_backend=backend), accelerator="cpu", devices=devices,
                    max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(model, DataLoader(data, batch_size=16))
assert dist.get_backend() == backend, dist.get_backend()
if trainer.global_rank == 0:
    torch.save(model.state_dict(), out)
print("lightning rank %d of %d on %s ok" % (trainer.global_rank, trainer.world_size, backend), flush=True)
# An orderly end for either backend: gloo's group torn down by the
# interpreter's exit while a peer has already gone aborted a rank (SIGABRT)
# in about one run in two on 4 ranks.
dist.barrier()
dist.destroy_process_group()
