"""Elastic data-parallel training with Horovod's API on kolo.

    tools/kolorun -np 2 --min-np 1 --max-np 4 -H localhost:4 .venv/bin/python examples/elastic_torch.py

Workers may die, be stopped, or come and go with the hosts
(--host-discovery-script): the job goes on. On a lost worker every
survivor goes back to its last commit and the job re-forms without it; a
replacement joins at the next commit and receives rank 0's state. The
ElasticSampler resumes an epoch where the job was, without repeating a
sample; the learning rate follows the number of workers after each reset.
"""
import torch

import kolo.torch as hvd

EPOCHS, BATCH, BASE_LR = 5, 16, 0.01
hvd.init()
torch.manual_seed(0)
x = torch.randn(1024, 16)
y = x @ torch.randn(16, 1) + 0.1 * torch.randn(1024, 1)
dataset = torch.utils.data.TensorDataset(x, y)
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=0)
loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler)
model = torch.nn.Linear(16, 1)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=BASE_LR * hvd.size()),
                                     named_parameters=model.named_parameters())
state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)


def scale_learning_rate():
    for group in optimizer.param_groups:
        group["lr"] = BASE_LR * hvd.size()


state.register_reset_callbacks([scale_learning_rate])


@hvd.elastic.run
def train(state):
    for state.epoch in range(state.epoch, EPOCHS):
        for batch_idx, (data, target) in enumerate(loader):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data), target)
            loss.backward()
            optimizer.step()
            sampler.record_batch(batch_idx, BATCH)
            if batch_idx % 4 == 0:
                state.commit()
        if hvd.rank() == 0:
            print("epoch %d: loss %.4f on %d workers" % (state.epoch, loss.item(), hvd.size()), flush=True)
        sampler.set_epoch(state.epoch + 1)
        state.epoch += 1  # committed as done
        state.commit()


train(state)
if hvd.rank() == 0:
    print("done: %d epochs" % state.epoch)
