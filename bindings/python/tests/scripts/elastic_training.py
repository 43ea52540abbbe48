"""An elastic training job with kolo.torch's Horovod API (hvd.elastic), run
by tests/test_elastic.py under `kolorun --min-np ... --max-np ...`.

A linear model learns y = x . w on 256 samples, 3 epochs of batches of 8
per worker, one commit per batch, ELASTIC_STEP_S (0.02) of "compute" per
batch. Faults, by
the environment:
  ELASTIC_FAIL=host:slot:epoch:batch[,...]   that worker exits 1 there
      (the first time: a restarted worker does not)
  ELASTIC_STOP=host:slot:epoch:batch   that worker stops itself (SIGSTOP)
  ELASTIC_HOSTS_FILE=path, ELASTIC_ADD=line@epoch, ELASTIC_DROP=host@epoch
      rank 0 appends the line to (or drops the host from) the file the
      discovery script prints, at the start of that epoch (once)
Rank 0 prints, per epoch, how many distinct samples the workers processed
(all of them, once each, whatever resets happened); every worker prints
its final size, epochs, commits and a digest of its parameters."""
import hashlib
import os
import signal
import time

import torch

import kolo.torch as hvd

EPOCHS, SAMPLES, BATCH = 3, 256, 8
hvd.init()
torch.manual_seed(0)
x = torch.randn(SAMPLES, 8)
y = x @ torch.arange(1.0, 9.0).unsqueeze(1)
dataset = torch.utils.data.TensorDataset(x, y)
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=1)
loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler)
model = torch.nn.Linear(8, 1)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                     named_parameters=model.named_parameters())
me = os.environ.get("KOLO_ELASTIC_WORKER", "")
stop = os.environ.get("ELASTIC_STOP", "")
# A restarted worker does not fail again.
fail = os.environ.get("ELASTIC_FAIL", "").split(",") if os.environ.get("KOLO_ELASTIC_RESTARTS", "0") == "0" else []
state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0, commits=0, edits=[])


def edit_hosts(epoch):
    path = os.environ.get("ELASTIC_HOSTS_FILE")
    if not path or hvd.rank() != 0:
        return
    for kind in ("ELASTIC_ADD", "ELASTIC_DROP"):
        spec = os.environ.get(kind, "")
        if not spec or spec in state.edits or int(spec.rsplit("@", 1)[1]) != epoch:
            continue
        what = spec.rsplit("@", 1)[0]
        lines = open(path).read().split()
        lines = lines + [what] if kind == "ELASTIC_ADD" else [l for l in lines if l.split(":")[0] != what]
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.rename(path + ".tmp", path)
        state.edits = state.edits + [spec]
        print("rank 0 edited the hosts: %s" % spec, flush=True)


@hvd.elastic.run
def train(state):
    for state.epoch in range(state.epoch, EPOCHS):
        edit_hosts(state.epoch)
        for batch_idx, (data, target) in enumerate(loader):
            if "%s:%d:%d" % (me, state.epoch, batch_idx) == stop:
                print("worker %s stops at epoch %d batch %d" % (me, state.epoch, batch_idx), flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)
            if "%s:%d:%d" % (me, state.epoch, batch_idx) in fail:
                print("worker %s fails at epoch %d batch %d" % (me, state.epoch, batch_idx), flush=True)
                os._exit(1)
            time.sleep(float(os.environ.get("ELASTIC_STEP_S", "0.02")))
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data), target)
            loss.backward()
            optimizer.step()
            sampler.record_batch(batch_idx, BATCH)
            state.batch = batch_idx
            state.commits += 1
            state.commit()
        seen = set()
        for indices in hvd.allgather_object(sampler.processed_indices):
            seen |= set(indices)
        if hvd.rank() == 0:
            print("epoch %d: %d of %d samples processed, on %d workers" % (state.epoch, len(seen), SAMPLES,
                                                                          hvd.size()), flush=True)
        sampler.set_epoch(state.epoch + 1)
        state.batch = 0
        state.epoch += 1  # committed as done: a reset from here on starts the next epoch
        state.commit()


train(state)
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
print("worker %s: rank %d of %d done: epochs %d, commits %d, parameters %s" % (
    me, hvd.rank(), hvd.size(), state.epoch, state.commits, digest), flush=True)
