"""The chaos soak's training job (tools/chaos/soak.py runs it under kolorun's
elastic driver): an MLP learns a fixed random regression with kolo.torch's
Horovod API, one commit per step, until rank 0 finds the stop file and
every worker has the job's full size. Rank 0 prints each committed step
("step S size N at T"); every worker prints its parameters' digest when
the job ends. Each reset's cause and times come from KOLO_ELASTIC_VERBOSE."""
import hashlib
import os
import sys
import time

import torch

import kolo.torch as hvd

STOP_FILE, FULL_SIZE = sys.argv[1], int(sys.argv[2])
STEP_S = float(os.environ.get("CHAOS_STEP_S", "0.02"))
hvd.init()
torch.manual_seed(0)
x = torch.randn(512, 32)
y = torch.sin(x @ torch.randn(32, 1))
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                     named_parameters=model.named_parameters())
state = hvd.elastic.TorchState(model, optimizer, step=0)
print("worker %s pid %d" % (os.environ.get("KOLO_ELASTIC_WORKER"), os.getpid()), flush=True)


@hvd.elastic.run
def train(state):
    while True:
        stop = hvd.broadcast_object(os.path.exists(STOP_FILE) and hvd.size() == FULL_SIZE, 0, name="stop")
        if stop:
            return
        rows = torch.arange(hvd.rank(), 512, hvd.size())[(state.step * 7) % 16::16]
        time.sleep(STEP_S)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[rows]), y[rows])
        loss.backward()
        optimizer.step()
        state.step += 1
        state.commit()
        if hvd.rank() == 0:
            print("step %d size %d at %.6f loss %.5f" % (state.step, hvd.size(), time.time(), loss.item()), flush=True)


train(state)
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
print("worker %s: rank %d of %d ends at step %d, parameters %s" % (
    os.environ.get("KOLO_ELASTIC_WORKER"), hvd.rank(), hvd.size(), state.step, digest), flush=True)
