"""One replica group of a torchft job, with kolo as the process group of
torchft's Manager: data-parallel training whose replica groups may die,
come back and heal from the others while the rest train on.

    .venv/bin/torchft_lighthouse --min_replicas 1 --quorum_tick_ms 100 --join_timeout_ms 1000 &
    REPLICA_GROUP_ID=0 TORCHFT_LIGHTHOUSE=http://localhost:29510 \\
      .venv/bin/torchrun --nproc_per_node 1 --master_port 29600 examples/torchft_ddp.py &
    REPLICA_GROUP_ID=1 TORCHFT_LIGHTHOUSE=http://localhost:29510 \\
      .venv/bin/torchrun --nproc_per_node 1 --master_port 29601 examples/torchft_ddp.py

torchft's DDP example (train_ddp.py) in shape: a small CNN on synthetic
CIFAR-sized images (no dataset download), torchft's DistributedDataParallel,
Optimizer and DistributedSampler, and the checkpoint of a healing replica
group sent over the process group itself (PGTransport). Each step prints
its committed step, the replica groups in the quorum, the loss and a hash
of the parameters, which replica groups at the same step share exactly.

Settings (environment): REPLICA_GROUP_ID, NUM_REPLICA_GROUPS (2), STEPS
(200), STEP_SLEEP (seconds, 0.02), TORCHFT_PG (kolo, or gloo: torchft's
own), FAULT_AT_STEP (this replica group kill -9s itself in its gradient
hook at that step, once the step's quorum has formed with it and before it
posts its part of the allreduce: a fault mid-step).
"""
import hashlib
import logging
import os
import signal
import time
from datetime import timedelta

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchft import DistributedDataParallel, DistributedSampler, Manager, Optimizer, ProcessGroupGloo
from torchft.checkpointing.pg_transport import PGTransport

from kolo.torch.torchft import ProcessGroupKolo

GROUP = int(os.environ.get("REPLICA_GROUP_ID", "0"))
GROUPS = int(os.environ.get("NUM_REPLICA_GROUPS", "2"))
STEPS = int(os.environ.get("STEPS", "200"))
STEP_SLEEP = float(os.environ.get("STEP_SLEEP", "0.02"))
FAULT_AT_STEP = int(os.environ.get("FAULT_AT_STEP", "-1"))


class FaultTolerantDDP(DistributedDataParallel):
    """torchft's DistributedDataParallel, whose gradient hook survives a
    replica group lost mid-step. torchft 0.2.0's hook asserts that the
    Manager's allreduce gave a future to chain; after a failure it gives
    none (the failed allreduce) or a plain completed one (the step's later
    buckets), and the assertion would end this replica group too. The
    Manager has recorded the failure either way and will not commit the
    step, so the bucket's gradients as they are do no harm."""

    @staticmethod
    def _comm_hook(manager, bucket):
        if manager.current_step() == FAULT_AT_STEP:
            # Mid-step: once this step's quorum has formed with this group in
            # it and its process group is configured (so the others wait for
            # this group's part in the step's allreduce), and before posting
            # that part. Dying earlier could leave the lighthouse to form the
            # quorum without this group; dying after posting, the part could
            # still arrive whole and the step succeed.
            manager.wait_quorum()
            os.kill(os.getpid(), signal.SIGKILL)
        work = manager.allreduce(bucket.buffer())
        work.wait()
        future = work.get_future()
        chained = getattr(future, "_fut", future)
        if chained is None:  # this allreduce failed
            chained = torch.futures.Future()
            chained.set_result(bucket.buffer())
        return chained


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                                        nn.Linear(84, 10))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def parameters_hash(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    logging.basicConfig(level=logging.WARNING)
    g = torch.Generator().manual_seed(0)  # the same synthetic data set in every replica group
    data = TensorDataset(torch.randn(2048, 3, 32, 32, generator=g), torch.randint(0, 10, (2048,), generator=g))
    sampler = DistributedSampler(data, replica_rank=GROUP, num_replica_groups=GROUPS, group_rank=0, num_replicas=1,
                                 shuffle=True)
    loader = DataLoader(data, batch_size=64, sampler=sampler)

    torch.manual_seed(GROUP)  # different weights on purpose: the Manager's first sync makes them one
    model = Net()
    optimizer_inner = torch.optim.AdamW(model.parameters())

    def state_dict():
        return {"model": model.state_dict(), "optim": optimizer_inner.state_dict()}

    def load_state_dict(state):
        model.load_state_dict(state["model"])
        optimizer_inner.load_state_dict(state["optim"])

    timeout = timedelta(seconds=5)
    pg = ProcessGroupKolo(timeout=timeout) if os.environ.get("TORCHFT_PG", "kolo") == "kolo" else \
        ProcessGroupGloo(timeout=timeout)
    manager = Manager(pg=pg, min_replica_size=1, load_state_dict=load_state_dict, state_dict=state_dict,
                      replica_id="torchft_ddp_%d" % GROUP, timeout=timedelta(seconds=30),
                      checkpoint_transport=PGTransport(pg, timeout=timedelta(seconds=10), device=torch.device("cpu")))
    ddp = FaultTolerantDDP(manager, model)
    optimizer = Optimizer(manager, optimizer_inner)
    loss_fn = nn.CrossEntropyLoss()
    print("[group %d] %s, %d parameters" % (GROUP, pg.getBackendName(), sum(p.numel() for p in model.parameters())),
          flush=True)
    while True:
        for inputs, labels in loader:
            optimizer.zero_grad()  # starts the step's quorum
            loss = loss_fn(ddp(inputs), labels)
            loss.backward()  # the gradients' allreduce, through the Manager's process group
            optimizer.step()  # commits (the step count goes on) only if every replica group's allreduce succeeded
            print("[group %d] step=%d participants=%d loss=%.4f params=%s"
                  % (GROUP, manager.current_step(), manager.num_participants(), loss.item(), parameters_hash(model)),
                  flush=True)
            if manager.current_step() >= STEPS:
                manager.shutdown(wait=False)
                return
            time.sleep(STEP_SLEEP)


if __name__ == "__main__":
    main()
